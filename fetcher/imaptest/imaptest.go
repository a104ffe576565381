// Package imaptest runs go-imap's in-memory IMAP server on loopback for tests, with the faults a mailbox fetcher must survive.
package imaptest

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
	"github.com/emersion/go-sasl"

	"github.com/helpdesk-dev/helpdesk/oauth"
)

// Options are how the server behaves.
type Options struct {
	User, Password string
	// NoIdle leaves IDLE out of the capabilities, as a server without it
	// does, and refuses it.
	NoIdle bool
	// Token, when set, is the one access token XOAUTH2 takes (and PLAIN
	// and LOGIN are refused for the user).
	Token func() string
	// TLS serves implicit TLS.
	TLS *tls.Config
	// ShortSizes has every RFC822.SIZE said as 1 byte, as a server whose
	// sizes are estimates (Exchange's) may fall short.
	ShortSizes bool
	// Prefix, when set, is the personal namespace's prefix, as Courier's
	// and many Dovecot servers' "INBOX." (here "INBOX/", the in-memory
	// server's delimiter being "/"): NAMESPACE names it, and a folder
	// outside it cannot be made, with the refusal Dovecot gives.
	Prefix string
	// NoCreate refuses every CREATE, as a shared mailbox whose account
	// may read but not make folders does.
	NoCreate bool
}

// Server is the running server.
type Server struct {
	Addr string
	User *imapmemserver.User
	opts Options
	srv  *imapserver.Server

	closed    chan struct{} // closed by Close
	closeOnce sync.Once

	mu       sync.Mutex
	dropMove int  // connections to drop at their next MOVE
	noMove   bool // every MOVE is answered NO (RefuseMoves)
	dropBody int  // connections to drop halfway through the next message body they send
	refuse   map[imap.UID]bool
	stall    int      // sessions whose next IDLE never ends
	bye      []string // what the next sessions that idle say in a BYE before they close
	conns    []net.Conn
	logins   atomic.Int64
	idling   atomic.Int64
}

// Start runs a server with INBOX, until the test ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := Listen(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// Listen runs a server with INBOX on 127.0.0.1:0; Close stops it.
func Listen(opts Options) (*Server, error) {
	mem := imapmemserver.New()
	user := imapmemserver.NewUser(opts.User, opts.Password)
	if err := user.Create("INBOX", nil); err != nil {
		return nil, err
	}
	mem.AddUser(user)
	s := &Server{User: user, opts: opts, closed: make(chan struct{})}
	caps := imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapIMAP4rev2: {}}
	if opts.NoIdle {
		caps = imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapMove: {}, imap.CapUIDPlus: {}, imap.CapNamespace: {}}
	}
	s.srv = imapserver.New(&imapserver.Options{
		NewSession: func(c *imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			s.mu.Lock()
			s.conns = append(s.conns, c.NetConn())
			s.mu.Unlock()
			inner := mem.NewSession()
			return &session{Session: inner, move: inner.(imapserver.SessionMove), server: s, conn: c.NetConn()}, nil, nil
		},
		InsecureAuth: true,
		Caps:         caps,
		Logger:       discard{},
	})
	var ln net.Listener
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if opts.NoIdle {
		ln = &rewriteListener{ln, noIdle}
	}
	if opts.ShortSizes {
		ln = &rewriteListener{ln, shortSizes}
	}
	ln = &rewriteListener{ln, s.cutBody}
	if opts.TLS != nil {
		ln = tls.NewListener(ln, opts.TLS)
	}
	s.Addr = ln.Addr().String()
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Username is the one user's name.
func (s *Server) Username() string { return s.opts.User }

// Close stops the server and its connections.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return s.srv.Close()
}

// ByeAtNextIdle makes the next session that idles say BYE with text and
// close its connection, as Microsoft 365 does when the access token it
// was signed in with expires ("Session invalidated - AccessTokenExpired").
func (s *Server) ByeAtNextIdle(text string) {
	s.mu.Lock()
	s.bye = append(s.bye, text)
	s.mu.Unlock()
}

// StallNextIdle makes the next session that idles go silent: it answers
// neither DONE nor anything after it, as a connection that died without a
// word (a NAT that forgot it) looks to the client.
func (s *Server) StallNextIdle() {
	s.mu.Lock()
	s.stall++
	s.mu.Unlock()
}

// Append puts a message into a folder, with flags, and returns its UID.
func (s *Server) Append(folder string, raw []byte, flags ...imap.Flag) (imap.UID, error) {
	return s.AppendAt(folder, raw, time.Now(), flags...)
}

// AppendAt is Append of a message the server took at at, its INTERNALDATE:
// mail that has waited in the mailbox.
func (s *Server) AppendAt(folder string, raw []byte, at time.Time, flags ...imap.Flag) (imap.UID, error) {
	data, err := s.User.Append(folder, literal{bytes.NewReader(raw), int64(len(raw))}, &imap.AppendOptions{Flags: flags, Time: at})
	if err != nil {
		return 0, err
	}
	return data.UID, nil
}

// Count is how many messages a folder holds; -1 when it does not exist.
func (s *Server) Count(folder string) int {
	st, err := s.User.Status(folder, &imap.StatusOptions{NumMessages: true})
	if err != nil || st.NumMessages == nil {
		return -1
	}
	return int(*st.NumMessages)
}

// Seen is how many messages of a folder carry \Seen.
func (s *Server) Seen(folder string) int {
	st, err := s.User.Status(folder, &imap.StatusOptions{NumMessages: true, NumUnseen: true})
	if err != nil || st.NumMessages == nil || st.NumUnseen == nil {
		return -1
	}
	return int(*st.NumMessages - *st.NumUnseen)
}

// Recreate deletes a folder and makes it again with the same messages:
// a new UIDVALIDITY (RFC 9051 §2.3.1.1), as after a server's migration.
func (s *Server) Recreate(folder string, raws [][]byte) error {
	if err := s.User.Delete(folder); err != nil {
		return err
	}
	if err := s.User.Create(folder, nil); err != nil {
		return err
	}
	for _, raw := range raws {
		if _, err := s.Append(folder, raw); err != nil {
			return err
		}
	}
	return nil
}

// DropAtNextMove makes the next session that moves drop its connection
// instead: after its FETCH, before its MOVE.
func (s *Server) DropAtNextMove() {
	s.mu.Lock()
	s.dropMove++
	s.mu.Unlock()
}

// RefuseMoves has the server answer NO to every MOVE while refuse is
// true, as a server whose folder is over its quota does each time it is
// asked.
func (s *Server) RefuseMoves(refuse bool) {
	s.mu.Lock()
	s.noMove = refuse
	s.mu.Unlock()
}

// DropInNextBody makes the next session that sends a message's body
// (BODY[]) send half of it and drop its connection: a connection lost in
// the middle of a FETCH.
func (s *Server) DropInNextBody() {
	s.mu.Lock()
	s.dropBody++
	s.mu.Unlock()
}

// errCut is what a connection cut by DropInNextBody returns.
var errCut = errors.New("cut halfway through a message body")

// cutBody is DropInNextBody's rewrite: it keeps what comes before the
// body's literal and half of the rest, and errCut has the connection
// closed after writing it.
func (s *Server) cutBody(b []byte) ([]byte, error) {
	i := bytes.Index(b, []byte("BODY[] {"))
	if i < 0 {
		return b, nil
	}
	if !s.take(&s.dropBody) {
		return b, nil
	}
	return b[:i+(len(b)-i)/2], errCut
}

// RefuseFetch has the server answer NO to every FETCH of the body of
// the message uid, as Gmail answers "Some messages could not be FETCHed"
// for a message it cannot read, each time it is asked.
func (s *Server) RefuseFetch(uid imap.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse == nil {
		s.refuse = map[imap.UID]bool{}
	}
	s.refuse[uid] = true
}

// refused reports whether uids name a message RefuseFetch named.
func (s *Server) refused(uids imap.UIDSet) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid := range s.refuse {
		if uids.Contains(uid) {
			return true
		}
	}
	return false
}

// take uses up one of a fault's count, under the lock, and reports
// whether there was one.
func (s *Server) take(count *int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *count == 0 {
		return false
	}
	*count--
	return true
}

// Logins counts the sessions that signed in.
func (s *Server) Logins() int64 { return s.logins.Load() }

// Idling is how many sessions are in IDLE now: what a test waits on
// before it appends a message that only IDLE may bring, instead of a
// clock.
func (s *Server) Idling() int64 { return s.idling.Load() }

type session struct {
	imapserver.Session
	move   imapserver.SessionMove
	server *Server
	conn   net.Conn
}

var errNoIdle = &imap.Error{Type: imap.StatusResponseTypeBad, Text: "IDLE is not supported here"}

func (s *session) Login(username, password string) error {
	if s.server.opts.Token != nil {
		return imapserver.ErrAuthFailed
	}
	if err := s.Session.Login(username, password); err != nil {
		return err
	}
	s.server.logins.Add(1)
	return nil
}

func (s *session) AuthenticateMechanisms() []string {
	if s.server.opts.Token != nil {
		return []string{oauth.XOAUTH2}
	}
	return []string{sasl.Plain}
}

// Authenticate takes XOAUTH2 with the one valid token, or PLAIN.
func (s *session) Authenticate(mech string) (sasl.Server, error) {
	switch {
	case mech == oauth.XOAUTH2 && s.server.opts.Token != nil:
		return &xoauth2Server{session: s}, nil
	case mech == sasl.Plain && s.server.opts.Token == nil:
		return sasl.NewPlainServer(func(identity, username, password string) error {
			return s.Login(username, password)
		}), nil
	}
	return nil, fmt.Errorf("mechanism %s not offered", mech)
}

func (s *session) Idle(w *imapserver.UpdateWriter, stop <-chan struct{}) error {
	if s.server.opts.NoIdle {
		return errNoIdle
	}
	s.server.mu.Lock()
	var bye string
	if len(s.server.bye) > 0 {
		bye, s.server.bye = s.server.bye[0], s.server.bye[1:]
	}
	s.server.mu.Unlock()
	if bye != "" {
		_, _ = io.WriteString(s.conn, "* BYE "+bye+"\r\n")
		_ = s.conn.Close()
		return errors.New("said BYE")
	}
	if s.server.take(&s.server.stall) {
		<-s.server.closed
		return errors.New("stalled")
	}
	s.server.idling.Add(1)
	defer s.server.idling.Add(-1)
	return s.Session.Idle(w, stop)
}

func (s *session) Fetch(w *imapserver.FetchWriter, numSet imap.NumSet, options *imap.FetchOptions) error {
	if uids, ok := numSet.(imap.UIDSet); ok && len(options.BodySection) > 0 && s.server.refused(uids) {
		return &imap.Error{Type: imap.StatusResponseTypeNo, Text: "Some messages could not be FETCHed (Failure)"}
	}
	return s.Session.Fetch(w, numSet, options)
}

func (s *session) Move(w *imapserver.MoveWriter, numSet imap.NumSet, dest string) error {
	if s.server.take(&s.server.dropMove) {
		_ = s.conn.Close()
		return errors.New("dropped")
	}
	s.server.mu.Lock()
	refuse := s.server.noMove
	s.server.mu.Unlock()
	if refuse {
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeOverQuota, Text: "Quota exceeded (mailbox for user is full)"}
	}
	return s.move.Move(w, numSet, dest)
}

func (s *session) Namespace() (*imap.NamespaceData, error) {
	data, err := s.Session.(imapserver.SessionNamespace).Namespace()
	if err != nil || s.server.opts.Prefix == "" {
		return data, err
	}
	personal := data.Personal[0]
	personal.Prefix = s.server.opts.Prefix
	return &imap.NamespaceData{Personal: []imap.NamespaceDescriptor{personal}}, nil
}

func (s *session) Create(name string, options *imap.CreateOptions) error {
	if s.server.opts.NoCreate {
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeNoPerm, Text: "Permission denied"}
	}
	if p := s.server.opts.Prefix; p != "" && !strings.HasPrefix(name, p) {
		return &imap.Error{Type: imap.StatusResponseTypeNo,
			Text: "Client tried to access nonexistent namespace. (Mailbox name should probably be prefixed with: " + p + ")"}
	}
	return s.Session.Create(name, options)
}

// xoauth2Server checks an XOAUTH2 response against the valid token; a
// refused one gets the JSON challenge and then NO, as Google and
// Microsoft do.
type xoauth2Server struct {
	session *session
	failed  bool
}

func (x *xoauth2Server) Next(response []byte) ([]byte, bool, error) {
	if x.failed {
		return nil, true, imapserver.ErrAuthFailed
	}
	user, token, err := oauth.ParseXOAUTH2(response)
	if err != nil {
		return nil, true, err
	}
	if user != x.session.server.opts.User || token != x.session.server.opts.Token() {
		x.failed = true
		return oauth.FailureChallenge(), false, nil
	}
	if err := x.session.Session.Login(x.session.server.opts.User, x.session.server.opts.Password); err != nil {
		return nil, true, err
	}
	x.session.server.logins.Add(1)
	return nil, true, nil
}

type literal struct {
	*bytes.Reader
	size int64
}

func (l literal) Size() int64 { return l.size }

type discard struct{}

func (discard) Printf(string, ...any) {}

// rewriteListener's connections pass all they write through rewrite, as
// a server that says something else would write it; an error from it has
// the connection closed once the rewritten bytes are written. It is used
// by pointer: go-imap's server keeps its listeners in a map.
type rewriteListener struct {
	net.Listener
	rewrite func([]byte) ([]byte, error)
}

func (l *rewriteListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return rewriteConn{c, l.rewrite}, nil
}

type rewriteConn struct {
	net.Conn
	rewrite func([]byte) ([]byte, error)
}

func (c rewriteConn) Write(b []byte) (int, error) {
	out, cut := c.rewrite(b)
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	if cut != nil {
		_ = c.Conn.Close()
		return 0, cut
	}
	return len(b), nil
}

// noIdle leaves IDLE out of every capability list: go-imap's server
// always names it for IMAP4rev1.
func noIdle(b []byte) ([]byte, error) {
	if bytes.Contains(b, []byte("CAPABILITY")) {
		return bytes.ReplaceAll(b, []byte(" IDLE"), nil), nil
	}
	return b, nil
}

var rfc822Size = regexp.MustCompile(`RFC822\.SIZE [0-9]+`)

// shortSizes says 1 for every RFC822.SIZE.
func shortSizes(b []byte) ([]byte, error) {
	return rfc822Size.ReplaceAll(b, []byte("RFC822.SIZE 1")), nil
}
