// Package fetcher takes the mail of the IMAP mailboxes teams already have and files it as the listener files what it receives: exactly once, across crashes.
//
// It is an edge of its own, beside inbound/'s listener, because a mailbox
// is read, not delivered to: the fetcher holds a lease on it, keeps a
// checkpoint of its folder (UIDVALIDITY and the last UID filed, advanced
// in the transaction that files each message), reads without touching a
// flag (BODY.PEEK[]), moves what it filed only after the commit, and
// waits for more with IDLE. Each mailbox runs on its own and fails alone.
package fetcher

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/helpdesk-dev/helpdesk/backoff"
	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/inbound"
	"github.com/helpdesk-dev/helpdesk/metrics"
	"github.com/helpdesk-dev/helpdesk/oauth"
	"github.com/helpdesk-dev/helpdesk/senderauth"
	"github.com/helpdesk-dev/helpdesk/settings"
	"github.com/helpdesk-dev/helpdesk/store"
)

// Config is how the fetchers of a process work; zero values take the
// defaults of Settings.
type Config struct {
	// Poll is how often a mailbox whose server has no IDLE is looked at,
	// and how often new and disabled mailboxes are noticed.
	Poll time.Duration
	// Lease is how long a process holds a mailbox without renewing: the
	// longest another waits after this one died.
	Lease time.Duration
	// MaxBytes is the largest message fetched whole; a larger one is kept
	// as its headers with a note (the listener's HELPDESK_INBOUND_MAX_BYTES).
	MaxBytes int64
	// Backoff spaces the reconnections of a mailbox that fails.
	Backoff backoff.Backoff
	// Timeout bounds each IMAP command.
	Timeout time.Duration
	// PassBy is how long a message whose body the server refuses is asked
	// for again before it is passed by (refusals); default 10 minutes, so
	// that a server's passing trouble loses no mail.
	PassBy time.Duration
	// TLS is the client's TLS configuration (the test's roots); nil: the
	// system's.
	TLS    *tls.Config
	Logger *slog.Logger
	// Holder names this process in leases; default host and a random part.
	Holder string
}

// Settings declares the fetchers' settings.
func (c *Config) Settings() []settings.Setting {
	return []settings.Setting{
		settings.Duration(&c.Poll, "HELPDESK_IMAP_POLL", "imap-poll", "60s",
			"how often a mailbox whose server has no IDLE is looked at, and how soon a mailbox added or disabled is noticed (at most 10s)"),
		settings.Duration(&c.Lease, "HELPDESK_IMAP_LEASE", "imap-lease", "90s",
			"a worker holds each mailbox this long without renewing it: the longest another waits once that worker died"),
	}
}

// Fetchers fetch every enabled mailbox, each in its own loop, while they
// run.
type Fetchers struct {
	desk     *desk.Desk
	receiver *inbound.Receiver
	config   Config
	log      *slog.Logger

	mu      sync.Mutex
	running map[string]*mailboxLoop
	last    map[string]*mailboxLoop // each mailbox's latest loop, running or not
	wg      sync.WaitGroup
}

// mailboxLoop is a mailbox's loop, running or ending.
type mailboxLoop struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when it has ended, its lease given back
	config string        // configDigest of what it was started with
}

// New returns the fetchers of a process, filing with d through rc.
func New(d *desk.Desk, rc *inbound.Receiver, config Config) *Fetchers {
	settings.Defaults(config.Settings())
	if config.MaxBytes <= 0 {
		config.MaxBytes = 30 << 20
	}
	if config.Backoff.Base <= 0 {
		config.Backoff = backoff.Backoff{Base: 5 * time.Second, Cap: 5 * time.Minute}
	}
	if config.Timeout <= 0 {
		config.Timeout = 2 * time.Minute
	}
	if config.PassBy <= 0 {
		config.PassBy = 10 * time.Minute
	}
	if config.Logger == nil {
		config.Logger = slog.Default()
	}
	if config.Holder == "" {
		host, _ := os.Hostname()
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		config.Holder = host + "-" + hex.EncodeToString(b)
	}
	return &Fetchers{desk: d, receiver: rc, config: config, log: config.Logger, running: map[string]*mailboxLoop{}, last: map[string]*mailboxLoop{}}
}

// Run fetches until ctx ends: it starts a loop for every enabled mailbox
// and stops the loops of those disabled, looking again every Poll (at
// most 10s), and waits for the loops to end.
func (f *Fetchers) Run(ctx context.Context) {
	every := min(f.config.Poll, 10*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		f.reconcile(ctx)
		select {
		case <-ctx.Done():
			f.mu.Lock()
			for _, l := range f.running {
				l.cancel()
			}
			f.mu.Unlock()
			f.wg.Wait()
			return
		case <-t.C:
		}
	}
}

// reconcile starts a loop for each enabled mailbox that has none, stops
// the loops of those disabled, and restarts the loop of a mailbox whose
// settings changed: a session goes on with what it signed in with, and
// would otherwise keep an old password, server or folder for as long as
// its connection lasts.
func (f *Fetchers) reconcile(ctx context.Context) {
	list, err := f.desk.Mailboxes(ctx)
	if err != nil {
		if ctx.Err() == nil {
			f.log.WarnContext(ctx, "mailboxes: could not list them", slog.Any("error", err))
		}
		return
	}
	enabled := map[string]string{}
	for _, m := range list {
		if m.DisabledAt == nil {
			enabled[m.Name] = configDigest(m)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, l := range f.running {
		if config, ok := enabled[name]; !ok || config != l.config {
			l.cancel()
			delete(f.running, name)
		}
	}
	for name, config := range enabled {
		if _, ok := f.running[name]; ok {
			continue
		}
		mctx, cancel := context.WithCancel(ctx)
		l := &mailboxLoop{cancel: cancel, done: make(chan struct{}), config: config}
		previous := f.last[name]
		f.running[name], f.last[name] = l, l
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer close(l.done)
			if previous != nil {
				// The loop it replaces, stopped but perhaps not ended,
				// gives its lease back first: two loops of one process
				// would both hold it, as one holder.
				select {
				case <-previous.done:
				case <-mctx.Done():
					return
				}
			}
			f.loop(mctx, name)
		}()
	}
}

// configDigest stands for what a mailbox's loop works with: its server,
// credentials, folders and address, but not what the loop itself writes
// (its checkpoint, its state, the access tokens it refreshes).
func configDigest(m *store.Mailbox) string {
	h := sha256.New()
	for _, v := range []string{m.IMAPURL, m.Password, m.ProcessedFolder, m.AfterImport, m.Address} {
		fmt.Fprintf(h, "%d:%s", len(v), v)
	}
	if m.ImportSince != nil {
		fmt.Fprintf(h, "since:%d", m.ImportSince.UnixNano())
	}
	if o := m.OAuth; o != nil {
		for _, v := range []string{o.Provider, o.ClientID, o.ClientSecret, o.TokenURL, o.Scopes} {
			fmt.Fprintf(h, "%d:%s", len(v), v)
		}
	}
	return string(h.Sum(nil))
}

// loop fetches one mailbox for as long as ctx lasts: it takes the lease
// when it is free, runs sessions, and after a failure waits with backoff;
// its failures are its own.
func (f *Fetchers) loop(ctx context.Context, name string) {
	failures := 0
	refused := refusals{} // across its sessions
	for ctx.Err() == nil {
		held, err := f.desk.ClaimMailbox(ctx, name, f.config.Holder, f.config.Lease)
		switch {
		case err != nil:
			failures++
		case !held:
			// Another process has it: look again before its lease ends.
			sleep(ctx, f.config.Lease/3)
			continue
		default:
			err = f.session(ctx, name, refused)
			if ctx.Err() != nil {
				_ = f.desk.ReleaseMailbox(context.WithoutCancel(ctx), name, f.config.Holder)
				metrics.IMAPConnected.WithLabelValues(name).Set(0)
				return
			}
			if err == nil {
				failures = 0
				continue
			}
			failures++
		}
		metrics.IMAPConnected.WithLabelValues(name).Set(0)
		f.log.WarnContext(ctx, "mailbox: fetching failed; trying again", slog.String("mailbox", name), slog.Any("error", err))
		_ = f.desk.MailboxFailed(ctx, name, err.Error())
		sleep(ctx, f.config.Backoff.Wait(failures))
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// errLeaseLost ends a session whose lease another process took.
var errLeaseLost = errors.New("the lease on the mailbox was lost")

// session is one connection to a mailbox: sign in, select its folder,
// finish the moves a crash left, file what is new, then wait for more
// (IDLE, or Poll) and file again, renewing the lease, until something
// fails or ctx ends.
func (f *Fetchers) session(ctx context.Context, name string, refused refusals) (err error) {
	mb, err := f.desk.Mailbox(ctx, name)
	if err != nil {
		return err
	}
	ep, err := ParseURL(mb.IMAPURL)
	if err != nil {
		return fmt.Errorf("the mailbox's URL: %w", err)
	}
	if mb.Password != "" {
		ep.Password = mb.Password
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go f.renew(ctx, cancel, name)

	newMail := make(chan struct{}, 1)
	conn, err := f.connect(ctx, ep, mb, newMail)
	if err != nil {
		return err
	}
	defer conn.close()
	defer func() {
		// go-imap keeps no word of a server's BYE, and the session ends
		// in a closed connection's error; the person reading the
		// mailbox's last error sees the server's reason instead (Microsoft
		// 365's "Session invalidated - AccessTokenExpired", Dovecot's
		// "IMAP session state is inconsistent").
		if bye := conn.raw.bye(); err != nil && bye != "" {
			err = fmt.Errorf("the server ended the session: %s (%w)", bye, err)
		}
	}()
	conn.authservID, conn.refused = mailboxAuthservID(mb, ep), refused
	metrics.IMAPConnected.WithLabelValues(name).Set(1)

	sel, err := conn.selectFolder(ep.Folder)
	if err != nil {
		return err
	}
	if conn.folder != ep.Folder {
		f.log.InfoContext(ctx, "mailbox: the server keeps folders under a prefix: reading the folder under it",
			slog.String("mailbox", name), slog.String("folder", conn.folder))
	}
	uidvalidity := int64(sel.UIDValidity)
	reset, err := f.desk.MailboxSelected(ctx, name, uidvalidity)
	if err != nil {
		return err
	}
	if reset {
		metrics.IMAPUIDValidityResets.WithLabelValues(name).Inc()
		f.log.WarnContext(ctx, "mailbox: UIDVALIDITY changed: reading the folder again from its first message; what was filed is not filed twice",
			slog.String("mailbox", name), slog.Int64("uidvalidity", uidvalidity))
	}
	if mb.AfterImport == desk.AfterImportMove {
		if conn.processed, err = conn.processedFolder(mb.ProcessedFolder); err != nil {
			return err
		}
		if desk.SameFolder(conn.processed, conn.folder) {
			// A message moved into the folder read comes back with a new
			// UID, past the checkpoint, to be moved again, without end.
			return fmt.Errorf("the processed folder %s is the folder read: name another, or after import flag or keep", conn.processed)
		}
		if conn.processed != mb.ProcessedFolder {
			f.log.InfoContext(ctx, "mailbox: the server keeps folders under a prefix: filed mail goes to the folder under it",
				slog.String("mailbox", name), slog.String("processed", conn.processed))
		}
	}
	for first := true; ; first = false {
		if !first {
			// A folder made anew (a server's migration, a restore) has a
			// new UIDVALIDITY, and the selected one may go on looking
			// empty: each round asks, and starts over on a change.
			st, err := conn.c.Status(conn.folder, &imap.StatusOptions{UIDValidity: true}).Wait()
			if err != nil {
				return fmt.Errorf("status of %s: %w", conn.folder, err)
			}
			if int64(st.UIDValidity) != uidvalidity {
				return fmt.Errorf("the UIDVALIDITY of %s changed from %d to %d: selecting it again", conn.folder, uidvalidity, st.UIDValidity)
			}
		}
		var refused *movesRefused
		if err := f.fetchNew(ctx, conn, mb, ep, uidvalidity); errors.As(err, &refused) {
			f.log.WarnContext(ctx, "mailbox: the server refused to move filed mail; it stays where it is, and the move is tried again next round",
				slog.String("mailbox", name), slog.Any("error", err))
			_ = f.desk.MailboxTrouble(ctx, name, err.Error())
		} else if err != nil {
			return err
		}
		_ = f.desk.MailboxOK(ctx, name)
		metrics.IMAPLastSuccess.WithLabelValues(name).SetToCurrentTime()
		if err := conn.wait(ctx, newMail, f.config.Poll); err != nil {
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				return cause
			}
			return err
		}
		if ctx.Err() != nil {
			if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) {
				return cause
			}
			return nil
		}
	}
}

// renew keeps the lease while the session runs, and ends the session when
// it is lost.
func (f *Fetchers) renew(ctx context.Context, cancel context.CancelCauseFunc, name string) {
	t := time.NewTicker(f.config.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			held, err := f.desk.ClaimMailbox(ctx, name, f.config.Holder, f.config.Lease)
			if err == nil && !held {
				cancel(errLeaseLost)
				return
			}
		}
	}
}

// batch is how many messages are filed before their moves are done.
const batch = 25

// fetchNew files every message past the checkpoint, in UID order, and
// moves (or flags) each batch once it is committed; first it does the
// moves a crash, or a refusal, left. A move the server refuses (NO: a
// folder over its quota, one it will not write) does not stop the
// filing: the mail stays where it is, its move pending, no more moves
// are asked for this round, and fetchNew ends with the refusal
// (movesRefused) once the rest is filed.
func (f *Fetchers) fetchNew(ctx context.Context, conn *conn, mb *store.Mailbox, ep *Endpoint, uidvalidity int64) error {
	pending, err := f.desk.PendingMoves(ctx, mb.Name, uidvalidity)
	if err != nil {
		return err
	}
	var refusal *movesRefused
	move := func(uids []int64) error {
		if refusal != nil {
			return nil
		}
		err := f.afterImport(ctx, conn, mb, uidvalidity, uids)
		if errors.As(err, &refusal) {
			return nil
		}
		return err
	}
	if err := move(pending); err != nil {
		return err
	}
	current, err := f.desk.Mailbox(ctx, mb.Name)
	if err != nil {
		return err
	}
	last := current.LastUID
	// A message marked \Deleted is one a person threw away (Thunderbird's
	// and Outlook's delete, in a mailbox not yet compacted): it is left
	// out, as their views leave it out.
	data, err := conn.c.UIDSearch(&imap.SearchCriteria{UID: []imap.UIDSet{{imap.UIDRange{Start: imap.UID(last + 1), Stop: 0}}},
		NotFlag: []imap.Flag{imap.FlagDeleted}}, nil).Wait()
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	var uids []imap.UID
	for _, uid := range data.AllUIDs() {
		if int64(uid) > last { // "last+1:*" names the last message even below last+1
			uids = append(uids, uid)
		}
	}
	var (
		done   []int64
		passed int64 // the last UID passed by as older than ImportSince, not yet behind the checkpoint
	)
	sizes := map[imap.UID]int64{}
	arrived := map[imap.UID]time.Time{}
	for i, uid := range uids {
		if ctx.Err() != nil {
			return nil
		}
		if i%100 == 0 { // the sizes and dates of the next hundred, in one command
			set := imap.UIDSetNum(uids[i:min(i+100, len(uids))]...)
			msgs, err := conn.c.Fetch(set, &imap.FetchOptions{UID: true, RFC822Size: true, InternalDate: true}).Collect()
			if err != nil {
				return fmt.Errorf("fetch sizes: %w", err)
			}
			for _, m := range msgs {
				sizes[m.UID], arrived[m.UID] = m.RFC822Size, m.InternalDate
			}
		}
		size, ok := sizes[uid]
		if !ok {
			continue // expunged meanwhile
		}
		if at := arrived[uid]; mb.ImportSince != nil && !at.IsZero() && at.Before(*mb.ImportSince) {
			// Older than the mailbox imports: left where it is, unread.
			// The checkpoint passes it with the next message filed, or
			// at the end.
			metrics.IMAPMessages.WithLabelValues(mb.Name, "before_since").Inc()
			passed = int64(uid)
			continue
		}
		filed, err := f.fetchOne(ctx, conn, mb, uidvalidity, uid, size, arrived[uid])
		if err != nil {
			return err
		}
		passed = 0 // the checkpoint is past them now
		if filed && mb.AfterImport != desk.AfterImportKeep {
			done = append(done, int64(uid))
		}
		if len(done) >= batch {
			if err := move(done); err != nil {
				return err
			}
			done = done[:0]
		}
	}
	if passed != 0 {
		if err := f.desk.PassOlderMail(ctx, mb.Name, uidvalidity, passed); err != nil {
			return err
		}
	}
	if err := move(done); err != nil {
		return err
	}
	if refusal != nil {
		return refusal
	}
	return nil
}

// movesRefused is a move (or flag) after import that the server answered
// NO: it would refuse again at once, and it stops nothing else.
type movesRefused struct{ err error }

func (e *movesRefused) Error() string { return e.err.Error() }
func (e *movesRefused) Unwrap() error { return e.err }

// fetchOne reads one message, without touching its flags, and files it;
// filed says whether it is to be moved. arrived is its INTERNALDATE: of
// a message that waited in the mailbox more than a day before it was
// fetched, nobody is mailed (desk.MailSource.Arrived). A message the
// filing refuses for good stays where it is and is passed by.
func (f *Fetchers) fetchOne(ctx context.Context, conn *conn, mb *store.Mailbox, uidvalidity int64, uid imap.UID, size int64, arrived time.Time) (filed bool, err error) {
	src := &desk.MailSource{Mailbox: mb.Name, Address: mb.Address, UIDValidity: uidvalidity, UID: int64(uid),
		Pending: mb.AfterImport != desk.AfterImportKeep, Arrived: arrived}
	set := imap.UIDSetNum(uid)
	section := &imap.FetchItemBodySection{Peek: true}
	tooLarge := size > f.config.MaxBytes
	if tooLarge {
		section = &imap.FetchItemBodySection{Peek: true, Specifier: imap.PartSpecifierHeader}
	}
	cmd := conn.c.Fetch(set, &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{section}})
	defer cmd.Close()
	msg := cmd.Next()
	if msg == nil {
		var no *imap.Error
		if err := cmd.Close(); errors.As(err, &no) {
			return f.refused(ctx, conn, mb, uidvalidity, uid, err)
		} else if err != nil {
			return false, err
		}
		return false, nil // expunged meanwhile
	}
	var literal imap.LiteralReader
	for item := msg.Next(); item != nil; item = msg.Next() {
		if b, ok := item.(imapclient.FetchItemDataBodySection); ok && b.Literal != nil {
			literal = b.Literal
			break
		}
	}
	if literal == nil {
		return f.refused(ctx, conn, mb, uidvalidity, uid, errors.New("it came without its body"))
	}
	delete(conn.refused, refusedUID{uidvalidity, uid})
	lit := &whole{r: literal, left: literal.Size()}
	body := io.Reader(lit)
	if literal.Size() > f.config.MaxBytes {
		// What comes is measured by its literal, not by RFC822.SIZE, which
		// may fall short (Exchange's is an estimate), nor by a header
		// section, which has no limit of its own: only the headers are
		// kept, and no more of them than the limit.
		if !tooLarge {
			tooLarge, size = true, literal.Size()
		}
		body = headerSection(body, f.config.MaxBytes)
	}
	if tooLarge {
		kept := conn.folder
		if mb.AfterImport == desk.AfterImportMove {
			kept = conn.processed
		}
		note := fmt.Sprintf("\r\n(This message had %d bytes, over the limit of %d: only its headers were fetched. It stays in the folder %s of the mailbox %s.)\r\n",
			size, f.config.MaxBytes, kept, mb.Name)
		body = io.MultiReader(body, strings.NewReader(note))
	}
	out, err := f.receiver.ReceiveFrom(ctx, &inbound.Envelope{Source: src, AuthservID: conn.authservID}, body)
	// The literal must be read to its end before the next command, and
	// not once more after it ended: go-imap's reader goes on with the
	// connection's next bytes as soon as it has.
	_, _ = io.Copy(io.Discard, lit)
	if lit.err != io.EOF {
		// It ended short or failed: the connection is lost. go-imap's
		// FETCH would read the rest once more as it closes, beside the
		// client's own reader; end the connection, and let that reader
		// stop first.
		_ = conn.c.Close()
		select {
		case <-conn.c.Closed():
		case <-ctx.Done():
		}
	}
	if cerr := cmd.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("fetch UID %d: %w", uid, cerr)
	}
	switch {
	case err == nil:
		outcome := out.Kind
		if tooLarge {
			outcome = "too_large"
		}
		metrics.IMAPMessages.WithLabelValues(mb.Name, outcome).Inc()
		return true, nil
	case permanent(err):
		metrics.IMAPMessages.WithLabelValues(mb.Name, "refused").Inc()
		f.log.WarnContext(ctx, "mailbox: a message that cannot be filed is passed by and left where it is",
			slog.String("mailbox", mb.Name), slog.Int64("uid", int64(uid)), slog.Any("error", err))
		return false, f.desk.SkipMailboxMessage(ctx, &desk.MailSource{Mailbox: src.Mailbox, UIDValidity: uidvalidity, UID: int64(uid)})
	default:
		return false, err
	}
}

// refused counts a refusal of a message's body; refused minRefusals
// times over Config.PassBy, the message is passed by: the checkpoint
// moves past it, and it stays in the folder, for a person to look at with
// a mail client. A refusal the server calls passing (RFC 5530's
// UNAVAILABLE, INUSE, LIMIT) is not counted.
func (f *Fetchers) refused(ctx context.Context, conn *conn, mb *store.Mailbox, uidvalidity int64, uid imap.UID, why error) (bool, error) {
	var no *imap.Error
	if errors.As(why, &no) && slices.Contains([]imap.ResponseCode{imap.ResponseCodeUnavailable, imap.ResponseCodeInUse, imap.ResponseCodeLimit}, no.Code) {
		return false, fmt.Errorf("fetch UID %d: %w", uid, why)
	}
	k := refusedUID{uidvalidity, uid}
	r := conn.refused[k]
	if r == nil {
		r = &refusal{first: time.Now()}
		conn.refused[k] = r
	}
	r.times++
	if r.times < minRefusals || time.Since(r.first) < f.config.PassBy {
		return false, fmt.Errorf("fetch UID %d: the server refused it (%d times since %s; it is passed by once refused %d times over %s): %w",
			uid, r.times, r.first.UTC().Format(time.RFC3339), minRefusals, f.config.PassBy, why)
	}
	delete(conn.refused, k)
	metrics.IMAPMessages.WithLabelValues(mb.Name, "unfetchable").Inc()
	f.log.WarnContext(ctx, "mailbox: a message the server refused to give, each time asked, is passed by and left where it is",
		slog.String("mailbox", mb.Name), slog.String("folder", conn.folder), slog.Int64("uid", int64(uid)), slog.Any("error", why))
	return false, f.desk.SkipMailboxMessage(ctx, &desk.MailSource{Mailbox: mb.Name, UIDValidity: uidvalidity, UID: int64(uid)})
}

// headerSection reads r to the end of its header section, the first
// empty line (RFC 5322 §2.1), or to max bytes, whichever comes first. An
// error reading r, other than its end, is the returned reader's, after
// the bytes read.
func headerSection(r io.Reader, max int64) io.Reader {
	var head bytes.Buffer
	br := bufio.NewReader(io.LimitReader(r, max))
	for lineStart := true; ; {
		line, err := br.ReadSlice('\n')
		head.Write(line)
		if err == bufio.ErrBufferFull {
			lineStart = false
			continue
		}
		if err != nil && err != io.EOF {
			return io.MultiReader(&head, failed{err})
		}
		if err != nil || (lineStart && (string(line) == "\r\n" || string(line) == "\n")) {
			return &head
		}
		lineStart = true
	}
}

// failed is a reader that fails with its error.
type failed struct{ err error }

func (f failed) Read([]byte) (int, error) { return 0, f.err }

// whole reads a literal, and ends in io.ErrUnexpectedEOF where it ends
// short of its size. go-imap's literal reader ends at the connection's end
// as at the literal's: a mail cut by a connection lost halfway through its
// FETCH would otherwise be filed as if it were whole, and the checkpoint
// moved past the rest of it.
type whole struct {
	r    io.Reader
	left int64
	err  error // how it ended; it is not read after
}

func (w *whole) Read(b []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n, err := w.r.Read(b)
	w.left -= int64(n)
	if err == io.EOF && w.left > 0 {
		err = fmt.Errorf("the message's body ended %d bytes short: %w", w.left, io.ErrUnexpectedEOF)
	}
	w.err = err
	return n, err
}

// permanent reports whether the same bytes would fail again.
func permanent(err error) bool {
	return errors.Is(err, inbound.ErrUnparseable) || errors.Is(err, desk.ErrNoSender) || errors.Is(err, desk.ErrUnstorable) ||
		errors.Is(err, inbound.ErrLineTooLong)
}

// afterImport moves (or flags) filed messages, then forgets that they
// were to be: a crash between the two only does the move again.
func (f *Fetchers) afterImport(ctx context.Context, conn *conn, mb *store.Mailbox, uidvalidity int64, uids []int64) error {
	if len(uids) == 0 {
		return nil
	}
	if mb.AfterImport != desk.AfterImportKeep {
		set := imap.UIDSet{}
		for _, u := range uids {
			set.AddNum(imap.UID(u))
		}
		var err error
		how := mb.AfterImport
		if caps := conn.c.Caps(); how == desk.AfterImportMove && !caps.Has(imap.CapMove) && !caps.Has(imap.CapIMAP4rev2) && !caps.Has(imap.CapUIDPlus) {
			// Without MOVE or UIDPLUS a move is COPY and an EXPUNGE of
			// every message marked \Deleted, others' too: flag instead.
			how = desk.AfterImportFlag
		}
		switch how {
		case desk.AfterImportMove:
			_, err = conn.c.Move(set, conn.processed).Wait()
		case desk.AfterImportFlag:
			err = conn.c.Store(set, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{importedFlag}}, nil).Close()
		}
		if err != nil {
			err = fmt.Errorf("%s after import: %w; a mail filed is not filed again, and -after-import flag or keep leaves it where it is", mb.AfterImport, err)
			if imapErr := (*imap.Error)(nil); errors.As(err, &imapErr) && imapErr.Type == imap.StatusResponseTypeNo {
				return &movesRefused{err}
			}
			return err
		}
	}
	return f.desk.MovesDone(ctx, mb.Name, uidvalidity, uids)
}

// importedFlag marks a message filed, with after-import flag.
const importedFlag = imap.Flag("$HelpdeskImported")

// conn is a signed-in connection whose every command has a deadline.
type conn struct {
	c   *imapclient.Client
	raw *deadlineConn
	// folder is the folder read; processed is the name, on this server,
	// of the one filed mail is moved to.
	folder, processed string
	prefix            *string // personalPrefix's answer, once asked
	// authservID is whose Authentication-Results are believed for the
	// mail it fetches (mailboxAuthservID).
	authservID string
	// refused is its mailbox loop's count of refused fetches (refusals).
	refused refusals
}

// refusals counts, per message, the sessions in which the server refused
// to give the message's body (a NO to its FETCH, or a FETCH without it),
// and since when. Gmail answers "Some messages could not be FETCHed" for
// a message it cannot read, each time it is asked: retried without end,
// one such message would hold back every message behind it.
type refusals map[refusedUID]*refusal

type refusedUID struct {
	uidvalidity int64
	uid         imap.UID
}

type refusal struct {
	times int
	first time.Time
}

// minRefusals is how many sessions a message's fetch must be refused in,
// over Config.PassBy at least, before it is passed by and left in the
// folder.
const minRefusals = 3

func (c *conn) close() {
	_ = c.c.Logout().Wait()
	_ = c.c.Close()
}

// connect dials, with TLS as the endpoint asks, and signs in: with the
// password, or XOAUTH2 with a token refreshed when the server refuses it.
func (f *Fetchers) connect(ctx context.Context, ep *Endpoint, mb *store.Mailbox, newMail chan<- struct{}) (*conn, error) {
	opts := &imapclient.Options{TLSConfig: f.tlsConfig(ep), UnilateralDataHandler: &imapclient.UnilateralDataHandler{
		Mailbox: func(data *imapclient.UnilateralDataMailbox) {
			if data.NumMessages != nil {
				select {
				case newMail <- struct{}{}:
				default:
				}
			}
		},
	}}
	c, raw, err := f.dial(ctx, ep, opts)
	if err != nil {
		return nil, err
	}
	conn := &conn{c: c, raw: raw}
	if err := f.signIn(ctx, conn, ep, mb); err != nil {
		_ = c.Close()
		return nil, err
	}
	return conn, nil
}

func (f *Fetchers) tlsConfig(ep *Endpoint) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.config.TLS != nil {
		cfg = f.config.TLS.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(ep.Address)
	}
	return cfg
}

func (f *Fetchers) dial(ctx context.Context, ep *Endpoint, opts *imapclient.Options) (*imapclient.Client, *deadlineConn, error) {
	d := net.Dialer{Timeout: 30 * time.Second}
	plain := func() (net.Conn, error) { return d.DialContext(ctx, "tcp", ep.Address) }
	wrap := func(nc net.Conn) *deadlineConn { return &deadlineConn{Conn: nc, timeout: f.config.Timeout} }
	switch ep.TLS {
	case TLSImplicit:
		nc, err := plain()
		if err != nil {
			return nil, nil, err
		}
		tc := tls.Client(nc, opts.TLSConfig)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			var plainText tls.RecordHeaderError
			if errors.As(err, &plainText) {
				// The server spoke first, in the clear: a greeting, on a
				// port that takes STARTTLS (143).
				return nil, nil, fmt.Errorf("TLS with %s: %w; the server answers without TLS on this port: write imap:// for STARTTLS", ep.Address, err)
			}
			return nil, nil, fmt.Errorf("TLS with %s: %w", ep.Address, err)
		}
		raw := wrap(tc)
		return imapclient.New(raw, opts), raw, nil
	case TLSNone:
		nc, err := plain()
		if err != nil {
			return nil, nil, err
		}
		raw := wrap(nc)
		return imapclient.New(raw, opts), raw, nil
	}
	nc, err := plain()
	if err != nil {
		return nil, nil, err
	}
	raw := wrap(nc)
	c, err := imapclient.NewStartTLS(raw, opts)
	var imapErr *imap.Error
	if err != nil && errors.As(err, &imapErr) && ep.TLS == TLSWhenOffered {
		// The server has no STARTTLS: a plain connection, as asked for by
		// an imap:// URL without ?tls=required.
		f.log.Warn("mailbox: the server offers no STARTTLS; signing in without TLS", slog.String("server", ep.Address))
		nc, err := plain()
		if err != nil {
			return nil, nil, err
		}
		raw = wrap(nc)
		return imapclient.New(raw, opts), raw, nil
	}
	if err != nil && errors.As(err, &imapErr) {
		return nil, nil, fmt.Errorf("STARTTLS with %s: %w", ep.Address, err)
	}
	if err != nil {
		// No greeting came, or what came was not IMAP: a port that takes
		// TLS from the first byte (993) waits for a handshake that an
		// imap:// URL never starts.
		return nil, nil, fmt.Errorf("STARTTLS with %s: %w; no IMAP greeting came: if the port takes TLS from the start (993), write imaps://", ep.Address, err)
	}
	return c, raw, nil
}

// signIn logs in with the password, or with XOAUTH2; a refused token is
// refreshed once and tried again.
func (f *Fetchers) signIn(ctx context.Context, conn *conn, ep *Endpoint, mb *store.Mailbox) error {
	if mb.OAuth == nil {
		if err := conn.c.Login(ep.User, ep.Password).Wait(); err != nil {
			return fmt.Errorf("sign in as %s: %w", ep.User, err)
		}
		return nil
	}
	tokens, err := f.desk.MailboxTokens(ctx, mb.Name)
	if err != nil {
		return err
	}
	for try := 0; ; try++ {
		token, err := tokens.Token(ctx)
		if err != nil {
			return err
		}
		err = conn.c.Authenticate(oauth.NewXOAUTH2(ep.User, token))
		if err == nil {
			return nil
		}
		if try == 1 {
			return fmt.Errorf("sign in as %s with OAuth: %w", ep.User, err)
		}
		tokens.Refused()
	}
}

// selectFolder selects the folder to read, and keeps its name on this
// server: a name given without the prefix of a server that keeps every
// folder under one ("Support" for "INBOX.Support") is looked for under it
// when it is not found as it is.
func (c *conn) selectFolder(name string) (*imap.SelectData, error) {
	sel, err := c.c.Select(name, nil).Wait()
	if err != nil && !strings.EqualFold(name, "INBOX") {
		if prefix := c.personalPrefix(); prefix != "" && !underPrefix(name, prefix) {
			if under, uerr := c.c.Select(prefix+name, nil).Wait(); uerr == nil {
				sel, err, name = under, nil, prefix+name
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("select %s: %w", name, err)
	}
	c.folder = name
	return sel, nil
}

// processedFolder finds the folder filed mail is moved to, or makes it,
// and returns its name on this server. Where the personal namespace has a
// prefix (Courier's, cPanel's and many Dovecot servers' "INBOX."), no
// folder can be made outside it: a name given without the prefix is
// looked for, and made, under it (RFC 2342; RFC 9051 §6.3.10).
func (c *conn) processedFolder(name string) (string, error) {
	if found, err := c.exists(name); err != nil || found {
		return name, err
	}
	if prefix := c.personalPrefix(); prefix != "" && !underPrefix(name, prefix) {
		under := prefix + name
		found, err := c.exists(under)
		if err != nil || found {
			return under, err
		}
		name = under
	}
	if err := c.c.Create(name, nil).Wait(); err != nil {
		// An account that may read a mailbox but not make folders in it
		// (a shared mailbox, often) can still leave its mail flagged.
		return "", fmt.Errorf("create %s: %w; name a folder that exists (-processed), or leave filed mail where it is (-after-import flag)", name, err)
	}
	return name, nil
}

// exists reports whether the folder is there. LIST takes the name as a
// pattern, in which * and % match others: only the name itself counts.
func (c *conn) exists(name string) (bool, error) {
	list, err := c.c.List("", name, nil).Collect()
	if err != nil {
		return false, fmt.Errorf("list %s: %w", name, err)
	}
	for _, d := range list {
		if desk.SameFolder(d.Mailbox, name) {
			return true, nil
		}
	}
	return false, nil
}

// personalPrefix is the prefix of the user's own folders, "" where the
// server has none or does not say; asked once a session.
func (c *conn) personalPrefix() string {
	if c.prefix == nil {
		prefix := ""
		if caps := c.c.Caps(); caps.Has(imap.CapNamespace) || caps.Has(imap.CapIMAP4rev2) {
			if ns, err := c.c.Namespace().Wait(); err == nil && len(ns.Personal) > 0 {
				prefix = ns.Personal[0].Prefix
			}
		}
		c.prefix = &prefix
	}
	return *c.prefix
}

// underPrefix reports whether name is in the namespace of prefix. INBOX
// is the same folder however it is written (RFC 9051 §5.1): "inbox." is
// under "INBOX.".
func underPrefix(name, prefix string) bool {
	const inbox = "INBOX"
	if len(name) >= len(inbox) && len(prefix) >= len(inbox) &&
		strings.EqualFold(name[:len(inbox)], inbox) && strings.EqualFold(prefix[:len(inbox)], inbox) {
		name, prefix = name[len(inbox):], prefix[len(inbox):]
	}
	return strings.HasPrefix(name, prefix)
}

// wait returns when new mail may have come: at once if the server said so
// meanwhile, else when IDLE reports some, or after poll in any case (a
// server that idles and never tells is looked at all the same; one
// without IDLE is polled).
func (c *conn) wait(ctx context.Context, newMail <-chan struct{}, poll time.Duration) error {
	select {
	case <-newMail:
		return nil
	default:
	}
	t := time.NewTimer(poll)
	defer t.Stop()
	if c.c.Caps().Has(imap.CapIdle) || c.c.Caps().Has(imap.CapIMAP4rev2) {
		c.raw.idle(true)
		defer c.raw.idle(false)
		idle, err := c.c.Idle()
		if err == nil {
			select {
			case <-ctx.Done():
			case <-newMail:
			case <-t.C:
			case <-c.c.Closed(): // the server said BYE, or the connection broke
			}
			c.raw.idle(false) // the answer to DONE is a command's
			if err := idle.Close(); err != nil {
				return err
			}
			return idle.Wait()
		}
		// IDLE was offered but refused: poll instead.
	}
	select {
	case <-ctx.Done():
		return nil
	case <-newMail:
	case <-t.C:
	case <-c.c.Closed():
	}
	return c.c.Noop().Wait()
}

// deadlineConn gives every read and write a deadline (go-imap sets
// none): Timeout for commands, longer while IDLE waits. A read past its
// deadline ends the connection's reading for good: go-imap's decoder reads
// again after an error (one try for each token it would accept), and each
// fresh deadline made a silent server's session end only after four
// timeouts, not one.
type deadlineConn struct {
	net.Conn
	timeout  time.Duration
	mu       sync.Mutex
	idling   bool
	tail     []byte // the last bytes read, for bye
	timedOut error  // the read that ran past its deadline
}

// tailBytes is how much of what was read the last line is looked for in.
const tailBytes = 512

// bye is the text of the server's BYE when it is the last line read
// (RFC 9051 §7.1.5), printable ASCII and at most 200 bytes; "" for none.
func (c *deadlineConn) bye() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	line, ok := bytes.CutSuffix(c.tail, []byte("\r\n"))
	if !ok {
		return "" // the last line did not end: cut off, not a BYE
	}
	if i := bytes.LastIndex(line, []byte("\r\n")); i >= 0 {
		line = line[i+2:]
	} else if len(c.tail) == tailBytes {
		return "" // a line longer than the tail: a literal's bytes
	}
	text, ok := bytes.CutPrefix(line, []byte("* BYE "))
	if !ok {
		return ""
	}
	out := bytes.Clone(text[:min(len(text), 200)])
	for i, b := range out {
		if b < ' ' || b > '~' {
			out[i] = '?'
		}
	}
	return string(out)
}

func (c *deadlineConn) idle(on bool) {
	c.mu.Lock()
	c.idling = on
	c.mu.Unlock()
	if !on {
		_ = c.Conn.SetReadDeadline(time.Now().Add(c.timeout))
	}
}

func (c *deadlineConn) deadline() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idling {
		return time.Now().Add(31 * time.Minute) // past go-imap's restart at 28
	}
	return time.Now().Add(c.timeout)
}

func (c *deadlineConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	timedOut := c.timedOut
	c.mu.Unlock()
	if timedOut != nil {
		return 0, timedOut
	}
	_ = c.Conn.SetReadDeadline(c.deadline())
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.timedOut = err
	}
	c.tail = append(c.tail, b[max(0, n-tailBytes):n]...)
	if over := len(c.tail) - tailBytes; over > 0 {
		c.tail = c.tail[:copy(c.tail, c.tail[over:])]
	}
	c.mu.Unlock()
	return n, err
}

func (c *deadlineConn) Write(b []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.timeout))
	return c.Conn.Write(b)
}

// mailboxAuthservID is whose Authentication-Results are believed for
// mail fetched from the mailbox: the one the mailbox names, else the
// provider that received it from the sender, where it is one whose
// results are known. Exchange Online writes its field with no
// authserv-id (senderauth.Microsoft365); Gmail and Google Workspace write
// mx.google.com. Any other server: "", the service's own setting.
func mailboxAuthservID(mb *store.Mailbox, ep *Endpoint) string {
	if mb.AuthservID != "" {
		return mb.AuthservID
	}
	provider := ""
	if mb.OAuth != nil {
		provider = mb.OAuth.Provider
	}
	host, _, _ := net.SplitHostPort(ep.Address)
	host = strings.ToLower(host)
	switch {
	case provider == "microsoft" || host == "outlook.office365.com":
		return senderauth.Microsoft365
	case provider == "google" || host == "imap.gmail.com":
		return "mx.google.com"
	}
	return ""
}
