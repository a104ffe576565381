package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SupportAddress is an address customers write to, with the From name
// its mail carries and the team its tickets belong to.
type SupportAddress struct {
	Address  string  `json:"address"`
	FromName string  `json:"from_name"`
	Team     *string `json:"team"`
}

// UpsertSupportAddress adds the address or changes its name and team.
func (s *Store) UpsertSupportAddress(ctx context.Context, a *SupportAddress) error {
	_, err := s.db.Exec(ctx, `INSERT INTO support_addresses (address, from_name, team) VALUES (lower($1), $2, $3)
		ON CONFLICT (address) DO UPDATE SET from_name = EXCLUDED.from_name, team = EXCLUDED.team`, a.Address, a.FromName, a.Team)
	if err != nil {
		return fmt.Errorf("support address %s: %w", a.Address, interpretError(err))
	}
	return nil
}

// SupportAddressOf queues the read of an address's row; into gets nil
// for an address that has none.
func (b *Batch) SupportAddressOf(address string, into **SupportAddress) {
	queueOptionalRow(b, "support address", address, func(row pgx.Row) (*SupportAddress, error) {
		var a SupportAddress
		if err := row.Scan(&a.Address, &a.FromName, &a.Team); err != nil {
			return nil, interpretError(err)
		}
		return &a, nil
	}, into, `SELECT address, from_name, team FROM support_addresses WHERE address = lower($1)`, address)
}

// ListSupportAddresses returns every support address with a row.
func (s *Store) ListSupportAddresses(ctx context.Context) ([]*SupportAddress, error) {
	rows, err := s.db.Query(ctx, `SELECT address, from_name, team FROM support_addresses ORDER BY address`)
	if err != nil {
		return nil, fmt.Errorf("support addresses: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*SupportAddress, error) {
		var a SupportAddress
		return &a, row.Scan(&a.Address, &a.FromName, &a.Team)
	})
}

// Mailbox is an IMAP mailbox the workers fetch from, and where they are.
type Mailbox struct {
	Name            string     `json:"name"`
	Address         string     `json:"address"`
	IMAPURL         string     `json:"imap_url"` // without a password
	Password        string     `json:"-"`
	ProcessedFolder string     `json:"processed_folder"`
	AfterImport     string     `json:"after_import"`          // move, flag or keep
	AuthservID      string     `json:"authserv_id,omitempty"` // whose Authentication-Results its mail is judged by; "": its provider's, else the service's
	ImportSince     *time.Time `json:"import_since"`          // only mail its server took at or after it is imported; nil: all of it
	OAuth           *OAuth     `json:"oauth,omitempty"`
	DisabledAt      *time.Time `json:"disabled_at"`

	UIDValidity       *int64     `json:"uidvalidity"`
	LastUID           int64      `json:"last_uid"`
	LeaseHolder       *string    `json:"lease_holder"`
	LeaseUntil        *time.Time `json:"lease_until"`
	Connected         bool       `json:"connected"`
	LastSuccessAt     *time.Time `json:"last_success_at"`
	LastError         *string    `json:"last_error"`
	LastErrorAt       *time.Time `json:"last_error_at"`
	UIDValidityResets int        `json:"uidvalidity_resets"`
	Imported          int64      `json:"imported"`
	CreatedAt         time.Time  `json:"created_at"`
}

// OAuth is a mailbox's OAuth 2.0 client and tokens; the secrets are
// never shown.
type OAuth struct {
	Provider     string     `json:"provider"` // microsoft, google, custom
	ClientID     string     `json:"client_id"`
	ClientSecret string     `json:"-"`
	TokenURL     string     `json:"token_url"`
	Scopes       string     `json:"scopes"`
	RefreshToken string     `json:"-"`
	AccessToken  string     `json:"-"`
	ExpiresAt    *time.Time `json:"expires_at"`
	Connected    bool       `json:"connected"` // it has a refresh token
}

const mailboxColumns = `name, address, imap_url, coalesce(password, ''), processed_folder, after_import, coalesce(authserv_id, ''), import_since,
	oauth_provider, coalesce(oauth_client_id, ''), coalesce(oauth_client_secret, ''), coalesce(oauth_token_url, ''),
	coalesce(oauth_scopes, ''), coalesce(oauth_refresh_token, ''), coalesce(oauth_access_token, ''), oauth_expires_at,
	disabled_at, uidvalidity, last_uid, lease_holder, lease_until, ` + connectedSQL + `, last_success_at, last_error, last_error_at,
	uidvalidity_resets, imported, created_at`

// connectedSQL is whether a mailbox is connected: as its fetcher last said,
// while the fetcher's lease runs. A fetcher renews its lease a few times
// a lease; one killed (kill -9, the machine lost) says nothing, and its
// mailbox reads as not connected once its lease has run out, not for as
// long as nobody takes it over.
const connectedSQL = `(connected AND coalesce(lease_until > now(), false))`

func scanMailbox(row pgx.Row) (*Mailbox, error) {
	var m Mailbox
	var o OAuth
	var provider *string
	if err := row.Scan(&m.Name, &m.Address, &m.IMAPURL, &m.Password, &m.ProcessedFolder, &m.AfterImport, &m.AuthservID, &m.ImportSince,
		&provider, &o.ClientID, &o.ClientSecret, &o.TokenURL, &o.Scopes, &o.RefreshToken, &o.AccessToken, &o.ExpiresAt,
		&m.DisabledAt, &m.UIDValidity, &m.LastUID, &m.LeaseHolder, &m.LeaseUntil, &m.Connected, &m.LastSuccessAt, &m.LastError,
		&m.LastErrorAt, &m.UIDValidityResets, &m.Imported, &m.CreatedAt); err != nil {
		return nil, interpretError(err)
	}
	if provider != nil {
		o.Provider, o.Connected = *provider, o.RefreshToken != ""
		m.OAuth = &o
	}
	return &m, nil
}

// UpsertMailbox adds a mailbox or changes how it is reached; its
// checkpoint stays, and so does its OAuth connection (ConnectMailboxOAuth;
// m.OAuth is not read) unless m gives a password, which it signs in with
// instead: its OAuth client and tokens then go.
func (s *Store) UpsertMailbox(ctx context.Context, m *Mailbox) error {
	// A sub-select of no row sets every column of the list to NULL.
	_, err := s.db.Exec(ctx, `INSERT INTO mailboxes (name, address, imap_url, password, processed_folder, after_import, authserv_id, import_since)
		VALUES ($1, lower($2), $3, nullif($4, ''), $5, $6, nullif($7, ''), $8)
		ON CONFLICT (name) DO UPDATE SET address = EXCLUDED.address, imap_url = EXCLUDED.imap_url, password = EXCLUDED.password,
			processed_folder = EXCLUDED.processed_folder, after_import = EXCLUDED.after_import, authserv_id = EXCLUDED.authserv_id,
			import_since = EXCLUDED.import_since, disabled_at = NULL,
			(oauth_provider, oauth_client_id, oauth_client_secret, oauth_token_url, oauth_scopes,
			 oauth_refresh_token, oauth_access_token, oauth_expires_at) =
			(SELECT mailboxes.oauth_provider, mailboxes.oauth_client_id, mailboxes.oauth_client_secret, mailboxes.oauth_token_url,
			        mailboxes.oauth_scopes, mailboxes.oauth_refresh_token, mailboxes.oauth_access_token, mailboxes.oauth_expires_at
			 WHERE EXCLUDED.password IS NULL)`,
		m.Name, m.Address, m.IMAPURL, m.Password, m.ProcessedFolder, m.AfterImport, m.AuthservID, m.ImportSince)
	if err != nil {
		return fmt.Errorf("mailbox %s: %w", m.Name, interpretError(err))
	}
	return nil
}

// GetMailbox returns a mailbox, or ErrNotFound.
func (s *Store) GetMailbox(ctx context.Context, name string) (*Mailbox, error) {
	m, err := scanMailbox(s.db.QueryRow(ctx, `SELECT `+mailboxColumns+` FROM mailboxes WHERE name = $1`, name))
	if err != nil {
		return nil, fmt.Errorf("mailbox %s: %w", name, err)
	}
	return m, nil
}

// ListMailboxes returns every mailbox, disabled ones too, by name.
func (s *Store) ListMailboxes(ctx context.Context) ([]*Mailbox, error) {
	rows, err := s.db.Query(ctx, `SELECT `+mailboxColumns+` FROM mailboxes ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("mailboxes: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Mailbox, error) { return scanMailbox(row) })
	if err != nil {
		return nil, fmt.Errorf("mailboxes: %w", err)
	}
	return list, nil
}

// DisableMailbox stops the fetching of a mailbox; ErrNotFound for none.
func (s *Store) DisableMailbox(ctx context.Context, name string) error {
	tag, err := s.db.Exec(ctx, `UPDATE mailboxes SET disabled_at = coalesce(disabled_at, now()), lease_holder = NULL, lease_until = NULL,
		connected = false WHERE name = $1`, name)
	if err != nil {
		return fmt.Errorf("disable mailbox %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("mailbox %s: %w", name, ErrNotFound)
	}
	return nil
}

// ClaimMailbox takes or renews the lease on a mailbox for holder, until
// ttl from now; false when another holds it, or it is disabled.
func (s *Store) ClaimMailbox(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	var ok bool
	err := s.db.QueryRow(ctx, `UPDATE mailboxes SET lease_holder = $2, lease_until = now() + $3::interval
		WHERE name = $1 AND disabled_at IS NULL AND (lease_holder = $2 OR lease_until IS NULL OR lease_until < now())
		RETURNING true`, name, holder, ttl).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim mailbox %s: %w", name, err)
	}
	return true, nil
}

// ReleaseMailbox gives the lease up, if holder has it.
func (s *Store) ReleaseMailbox(ctx context.Context, name, holder string) error {
	_, err := s.db.Exec(ctx, `UPDATE mailboxes SET lease_holder = NULL, lease_until = NULL, connected = false
		WHERE name = $1 AND lease_holder = $2`, name, holder)
	if err != nil {
		return fmt.Errorf("release mailbox %s: %w", name, err)
	}
	return nil
}

// SetMailboxUIDValidity records the folder's UIDVALIDITY: a value that
// differs from the one recorded starts the checkpoint again from UID 0
// (RFC 9051 §2.3.1.1: the old UIDs mean nothing now), and says so.
func (s *Store) SetMailboxUIDValidity(ctx context.Context, name string, uidvalidity int64) (reset bool, err error) {
	err = s.db.QueryRow(ctx, `WITH old AS (SELECT uidvalidity FROM mailboxes WHERE name = $1 FOR UPDATE)
		UPDATE mailboxes m SET uidvalidity = $2,
			last_uid = CASE WHEN old.uidvalidity IS DISTINCT FROM $2 THEN 0 ELSE m.last_uid END,
			uidvalidity_resets = m.uidvalidity_resets + CASE WHEN old.uidvalidity IS NOT NULL AND old.uidvalidity <> $2 THEN 1 ELSE 0 END
		FROM old WHERE m.name = $1
		RETURNING old.uidvalidity IS NOT NULL AND old.uidvalidity <> $2`, name, uidvalidity).Scan(&reset)
	if err != nil {
		return false, fmt.Errorf("uidvalidity of mailbox %s: %w", name, interpretError(err))
	}
	return reset, nil
}

// AdvanceMailbox queues moving the checkpoint past a filed message, and,
// when it is still to be moved or flagged, remembering that.
func (b *Batch) AdvanceMailbox(name string, uidvalidity, uid int64, pending bool) {
	b.b.Queue(`UPDATE mailboxes SET last_uid = greatest(last_uid, $3), imported = imported + 1
		WHERE name = $1 AND uidvalidity = $2`, name, uidvalidity, uid)
	if pending {
		b.b.Queue(`INSERT INTO mailbox_pending (mailbox, uidvalidity, uid) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, name, uidvalidity, uid)
	}
}

// PassMailbox queues moving the checkpoint past messages that are not
// imported (older than the mailbox's ImportSince): they are not counted.
func (b *Batch) PassMailbox(name string, uidvalidity, uid int64) {
	b.b.Queue(`UPDATE mailboxes SET last_uid = greatest(last_uid, $3) WHERE name = $1 AND uidvalidity = $2`, name, uidvalidity, uid)
}

// PendingMoves returns the UIDs filed but not yet moved, of the folder's
// UIDVALIDITY; those of another are forgotten (they name nothing now).
func (s *Store) PendingMoves(ctx context.Context, name string, uidvalidity int64) ([]int64, error) {
	if _, err := s.db.Exec(ctx, `DELETE FROM mailbox_pending WHERE mailbox = $1 AND uidvalidity <> $2`, name, uidvalidity); err != nil {
		return nil, fmt.Errorf("pending moves of %s: %w", name, err)
	}
	rows, err := s.db.Query(ctx, `SELECT uid FROM mailbox_pending WHERE mailbox = $1 AND uidvalidity = $2 ORDER BY uid`, name, uidvalidity)
	if err != nil {
		return nil, fmt.Errorf("pending moves of %s: %w", name, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// MovesDone forgets pending moves that were done.
func (s *Store) MovesDone(ctx context.Context, name string, uidvalidity int64, uids []int64) error {
	_, err := s.db.Exec(ctx, `DELETE FROM mailbox_pending WHERE mailbox = $1 AND uidvalidity = $2 AND uid = ANY($3)`, name, uidvalidity, uids)
	if err != nil {
		return fmt.Errorf("moves of %s: %w", name, err)
	}
	return nil
}

// MailboxOK records a fetch that went well: connected, now.
func (s *Store) MailboxOK(ctx context.Context, name string) error {
	_, err := s.db.Exec(ctx, `UPDATE mailboxes SET connected = true, last_success_at = now() WHERE name = $1`, name)
	if err != nil {
		return fmt.Errorf("mailbox %s: %w", name, err)
	}
	return nil
}

// MailboxTrouble records what went wrong with a mailbox that is still
// fetched (its mail filed, a move refused): its last error, connected
// all the same.
func (s *Store) MailboxTrouble(ctx context.Context, name, why string) error {
	_, err := s.db.Exec(ctx, `UPDATE mailboxes SET last_error = $2, last_error_at = now() WHERE name = $1`, name, why)
	if err != nil {
		return fmt.Errorf("mailbox %s: %w", name, err)
	}
	return nil
}

// MailboxFailed records why a mailbox could not be fetched.
func (s *Store) MailboxFailed(ctx context.Context, name, why string) error {
	_, err := s.db.Exec(ctx, `UPDATE mailboxes SET connected = false, last_error = $2, last_error_at = now() WHERE name = $1`, name, why)
	if err != nil {
		return fmt.Errorf("mailbox %s: %w", name, err)
	}
	return nil
}

// ConnectMailboxOAuth sets the OAuth client a mailbox signs in with and
// the tokens its sign-in gave, in one statement; nothing else of the
// mailbox changes. ErrNotFound for no mailbox of that name.
func (s *Store) ConnectMailboxOAuth(ctx context.Context, name string, o *OAuth, access, refresh string, expires time.Time) error {
	tag, err := s.db.Exec(ctx, `UPDATE mailboxes SET oauth_provider = nullif($2, ''), oauth_client_id = nullif($3, ''),
			oauth_client_secret = nullif($4, ''), oauth_token_url = nullif($5, ''), oauth_scopes = nullif($6, ''),
			oauth_access_token = $7, oauth_refresh_token = $8, oauth_expires_at = $9
		WHERE name = $1`, name, o.Provider, o.ClientID, o.ClientSecret, o.TokenURL, o.Scopes, access, refresh, expires)
	if err == nil && tag.RowsAffected() == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("connect mailbox %s: %w", name, interpretError(err))
	}
	return nil
}

// SetMailboxTokens keeps a mailbox's OAuth tokens; an empty refresh
// token keeps the one it has.
func (s *Store) SetMailboxTokens(ctx context.Context, name, access, refresh string, expires time.Time) error {
	_, err := s.db.Exec(ctx, `UPDATE mailboxes SET oauth_access_token = $2, oauth_refresh_token = coalesce(nullif($3, ''), oauth_refresh_token),
		oauth_expires_at = $4 WHERE name = $1`, name, access, refresh, expires)
	if err != nil {
		return fmt.Errorf("tokens of mailbox %s: %w", name, err)
	}
	return nil
}
