package desk

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/oauth"
	"github.com/helpdesk-dev/helpdesk/senderauth"
	"github.com/helpdesk-dev/helpdesk/store"
	"golang.org/x/oauth2"
)

// MailboxName is what a mailbox may be called.
var MailboxName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// The ways a fetched message is left in its mailbox. Never deleted.
const (
	AfterImportMove = "move" // to the processed folder (the default)
	AfterImportFlag = "flag" // a keyword on it, $HelpdeskImported
	AfterImportKeep = "keep" // as it was: the checkpoint alone says it was filed
)

// ErrInvalidMailbox is a mailbox that cannot be as asked.
var ErrInvalidMailbox = errors.New("invalid mailbox")

// MailboxParams are a mailbox to add or change; the URL is the fetcher's,
// parsed by it, without its password.
type MailboxParams struct {
	Name            string
	IMAPURL         string
	Password        string
	Address         string        // the support address its mail is to
	From            *mail.Address // its replies' From; default the address with HELPDESK_FROM's name
	Team            string        // its tickets' team; "" for triage to choose
	Folder          string        // the folder read, as the URL names it
	ProcessedFolder string        // default Processed
	AfterImport     string        // default move
	// AuthservID is whose Authentication-Results are believed for its
	// mail: the authserv-id of the MTA in front of its server, or
	// senderauth.Microsoft365; "" for its provider's (Microsoft 365,
	// Google), else the service's.
	AuthservID string
	// ImportSince: only mail its server took at or after it is imported
	// (its INTERNALDATE); older mail is passed by and left where it is.
	// Nil: every message in the folder, however old.
	ImportSince *time.Time
}

// importSkew is how far in the future ImportSince may be: a clock a little
// ahead of the database's. Further, and every mail until then would be
// passed by, unread.
const importSkew = 5 * time.Minute

// AddMailbox adds a mailbox, or changes how it is reached and where its
// mail goes; its checkpoint stays. Its address becomes a support address
// with its From name and team. A team no agent is in is refused.
func (d *Desk) AddMailbox(ctx context.Context, p *MailboxParams) (*store.Mailbox, error) {
	if !MailboxName.MatchString(p.Name) {
		return nil, fmt.Errorf("%w: name %q: lower case letters, digits, . _ - (up to 64)", ErrInvalidMailbox, p.Name)
	}
	a, err := mail.ParseAddress(p.Address)
	if err != nil || a.Name != "" || strings.Contains(a.Address, "+") {
		return nil, fmt.Errorf("%w: address %q: want one plain address such as support@example.com", ErrInvalidMailbox, p.Address)
	}
	if p.ProcessedFolder == "" {
		p.ProcessedFolder = "Processed"
	}
	if p.AfterImport == "" {
		p.AfterImport = AfterImportMove
	}
	if !slices.Contains([]string{AfterImportMove, AfterImportFlag, AfterImportKeep}, p.AfterImport) {
		return nil, fmt.Errorf("%w: after import %q: move, flag or keep", ErrInvalidMailbox, p.AfterImport)
	}
	if p.AfterImport == AfterImportMove && SameFolder(p.ProcessedFolder, p.Folder) {
		return nil, fmt.Errorf("%w: processed folder %q is the folder read: a message moved there comes back as new, again and again "+
			"(name another folder, or after import flag or keep)", ErrInvalidMailbox, p.ProcessedFolder)
	}
	if p.AuthservID != "" && !senderauth.ValidID(p.AuthservID) {
		return nil, fmt.Errorf("%w: authserv-id %q: a host name such as mx.example.com, as its MTA writes it first in Authentication-Results, "+
			"or microsoft365", ErrInvalidMailbox, p.AuthservID)
	}
	if p.ImportSince != nil && time.Until(*p.ImportSince) > importSkew {
		return nil, fmt.Errorf("%w: import since %s is in the future: mail until then would be passed by, never imported",
			ErrInvalidMailbox, p.ImportSince.UTC().Format(time.RFC3339))
	}
	row := &store.SupportAddress{Address: strings.ToLower(a.Address)}
	if p.From != nil {
		if !strings.EqualFold(p.From.Address, a.Address) {
			return nil, fmt.Errorf("%w: -from %s: its address must be the mailbox's, %s", ErrInvalidMailbox, p.From, a.Address)
		}
		row.FromName = p.From.Name
	}
	st := store.New(d.pool)
	if p.Team != "" {
		if err := requireTeam(ctx, st, p.Team); err != nil {
			return nil, err
		}
		row.Team = &p.Team
	}
	err = store.Run(ctx, d.pool, func(tx *store.Tx) error {
		if err := tx.Store().UpsertSupportAddress(ctx, row); err != nil {
			return err
		}
		return tx.Store().UpsertMailbox(ctx, &store.Mailbox{Name: p.Name, Address: row.Address, IMAPURL: p.IMAPURL, Password: p.Password,
			ProcessedFolder: p.ProcessedFolder, AfterImport: p.AfterImport, AuthservID: p.AuthservID, ImportSince: p.ImportSince})
	})
	if err != nil {
		return nil, err
	}
	d.addresses.mu.Lock()
	delete(d.addresses.rows, row.Address)
	d.addresses.mu.Unlock()
	return st.GetMailbox(ctx, p.Name)
}

// Mailboxes lists the mailboxes with where their fetching stands.
func (d *Desk) Mailboxes(ctx context.Context) ([]*store.Mailbox, error) {
	return store.New(d.pool).ListMailboxes(ctx)
}

// Mailbox is one mailbox; store.ErrNotFound for none.
func (d *Desk) Mailbox(ctx context.Context, name string) (*store.Mailbox, error) {
	if !MailboxName.MatchString(name) {
		return nil, noMailbox(name)
	}
	return store.New(d.pool).GetMailbox(ctx, name)
}

// noMailbox is ErrNotFound for a name no mailbox can have: it is answered
// before PostgreSQL sees its bytes (a NUL, what is not UTF-8).
func noMailbox(name string) error {
	return fmt.Errorf("mailbox %q: %w", name, store.ErrNotFound)
}

// DisableMailbox stops fetching a mailbox; its checkpoint stays, so it
// goes on where it stopped once added again.
func (d *Desk) DisableMailbox(ctx context.Context, name string) error {
	if !MailboxName.MatchString(name) {
		return noMailbox(name)
	}
	return store.New(d.pool).DisableMailbox(ctx, name)
}

// ClaimMailbox takes or renews a fetcher's lease on a mailbox.
func (d *Desk) ClaimMailbox(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	return store.New(d.pool).ClaimMailbox(ctx, name, holder, ttl)
}

// ReleaseMailbox gives a lease up.
func (d *Desk) ReleaseMailbox(ctx context.Context, name, holder string) error {
	return store.New(d.pool).ReleaseMailbox(ctx, name, holder)
}

// MailboxSelected records the UIDVALIDITY its folder has: a new one
// restarts the checkpoint (the mail is filed once all the same: a mail
// stored already is a duplicate) and says so.
func (d *Desk) MailboxSelected(ctx context.Context, name string, uidvalidity int64) (reset bool, err error) {
	return store.New(d.pool).SetMailboxUIDValidity(ctx, name, uidvalidity)
}

// PendingMoves are the filed messages a fetcher still has to move.
func (d *Desk) PendingMoves(ctx context.Context, name string, uidvalidity int64) ([]int64, error) {
	return store.New(d.pool).PendingMoves(ctx, name, uidvalidity)
}

// MovesDone forgets moves that were done.
func (d *Desk) MovesDone(ctx context.Context, name string, uidvalidity int64, uids []int64) error {
	return store.New(d.pool).MovesDone(ctx, name, uidvalidity, uids)
}

// SkipMailboxMessage moves the checkpoint past a message that will never
// be filed (no sender, unreadable): it stays in the mailbox, and is not
// fetched again.
func (d *Desk) SkipMailboxMessage(ctx context.Context, s *MailSource) error {
	var b store.Batch
	b.AdvanceMailbox(s.Mailbox, s.UIDValidity, s.UID, false)
	return store.New(d.pool).Send(ctx, &b)
}

// PassOlderMail moves a mailbox's checkpoint past messages up to uid that
// are older than its ImportSince: they stay where they are, unread, and
// are not fetched again.
func (d *Desk) PassOlderMail(ctx context.Context, name string, uidvalidity, uid int64) error {
	var b store.Batch
	b.PassMailbox(name, uidvalidity, uid)
	return store.New(d.pool).Send(ctx, &b)
}

// MailboxOK records that a mailbox was fetched.
func (d *Desk) MailboxOK(ctx context.Context, name string) error {
	return store.New(d.pool).MailboxOK(ctx, name)
}

// MailboxTrouble records what went wrong with a mailbox that is still
// fetched: a move after import that the server refused.
func (d *Desk) MailboxTrouble(ctx context.Context, name, why string) error {
	return store.New(d.pool).MailboxTrouble(ctx, name, why)
}

// MailboxFailed records why a mailbox could not be fetched.
func (d *Desk) MailboxFailed(ctx context.Context, name, why string) error {
	return store.New(d.pool).MailboxFailed(ctx, name, why)
}

// MailboxTokens are a connected mailbox's OAuth tokens, refreshed as they
// expire and kept in its row: for XOAUTH2 over IMAP, and over SMTP for a
// relay of the same account.
func (d *Desk) MailboxTokens(ctx context.Context, name string) (*oauth.Tokens, error) {
	mb, err := d.Mailbox(ctx, name)
	if err != nil {
		return nil, err
	}
	o := mb.OAuth
	if o == nil {
		return nil, fmt.Errorf("mailbox %s signs in with a password, not OAuth: run helpdesk mailbox connect %s", name, name)
	}
	kept := &oauth2.Token{AccessToken: o.AccessToken, RefreshToken: o.RefreshToken}
	if o.ExpiresAt != nil {
		kept.Expiry = *o.ExpiresAt
	}
	client := &oauth.Client{Provider: o.Provider, ClientID: o.ClientID, ClientSecret: o.ClientSecret, TokenURL: o.TokenURL}
	if o.Scopes != "" {
		client.Scopes = strings.Fields(o.Scopes)
	}
	return oauth.NewTokens(client, kept, func(ctx context.Context, tok *oauth2.Token) error {
		return store.New(d.pool).SetMailboxTokens(ctx, name, tok.AccessToken, tok.RefreshToken, tok.Expiry)
	})
}

// ConnectMailbox has a mailbox sign in with OAuth from now on, with the
// tokens its account's sign-in gave. Its server, folders, address, team
// and From name stay as they are.
func (d *Desk) ConnectMailbox(ctx context.Context, name string, o *store.OAuth, access, refresh string, expires time.Time) error {
	if !MailboxName.MatchString(name) {
		return noMailbox(name)
	}
	return store.New(d.pool).ConnectMailboxOAuth(ctx, name, o, access, refresh, expires)
}

// SameFolder reports whether two folder names are one folder: INBOX is
// INBOX however it is written (RFC 9051 §5.1), other names as they are.
func SameFolder(a, b string) bool {
	return a == b || (strings.EqualFold(a, "INBOX") && strings.EqualFold(b, "INBOX"))
}
