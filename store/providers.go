package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Breaker states.
const (
	BreakerClosed = "closed" // calls go
	BreakerOpen   = "open"   // nobody calls until the next probe
)

// Provider is an AI provider's shared state: its circuit breaker and the
// pace its quota allows, as every process sees it.
type Provider struct {
	Provider      string        `json:"provider"`
	State         string        `json:"state"`
	Failures      int           `json:"failures"`
	WindowStart   *time.Time    `json:"window_start"`
	OpenedAt      *time.Time    `json:"opened_at"`
	ProbeInterval time.Duration `json:"-"`
	NextProbeAt   *time.Time    `json:"next_probe_at"`
	ProbeUntil    *time.Time    `json:"-"`
	LastError     *string       `json:"last_error"`
	ChangedAt     time.Time     `json:"changed_at"`

	CallInterval   time.Duration `json:"-"`
	BlockedUntil   time.Time     `json:"blocked_until"`
	QuotaLimit     *int          `json:"quota_limit"`
	QuotaRemaining *int          `json:"quota_remaining"`
	QuotaResetAt   *time.Time    `json:"quota_reset_at"`
}

const providerColumns = `provider, state, failures, window_start, opened_at, probe_interval, next_probe_at, probe_until,
	last_error, changed_at, call_interval, blocked_until, quota_limit, quota_remaining, quota_reset_at`

func scanProvider(row pgx.Row) (*Provider, error) {
	var p Provider
	err := row.Scan(&p.Provider, &p.State, &p.Failures, &p.WindowStart, &p.OpenedAt, &p.ProbeInterval, &p.NextProbeAt,
		&p.ProbeUntil, &p.LastError, &p.ChangedAt, &p.CallInterval, &p.BlockedUntil, &p.QuotaLimit, &p.QuotaRemaining, &p.QuotaResetAt)
	if err != nil {
		return nil, interpretError(err)
	}
	return &p, nil
}

// GetProvider returns the provider's state; one never seen is closed and unpaced.
func (s *Store) GetProvider(ctx context.Context, provider string) (*Provider, error) {
	p, err := scanProvider(s.db.QueryRow(ctx, `SELECT `+providerColumns+` FROM providers WHERE provider = $1`, provider))
	if errors.Is(err, ErrNotFound) {
		return &Provider{Provider: provider, State: BreakerClosed}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", provider, err)
	}
	return p, nil
}

// ListProviders returns every provider the service has called.
func (s *Store) ListProviders(ctx context.Context) ([]*Provider, error) {
	rows, err := s.db.Query(ctx, `SELECT `+providerColumns+` FROM providers ORDER BY provider`)
	if err != nil {
		return nil, fmt.Errorf("list providers: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Provider, error) { return scanProvider(row) })
	if err != nil {
		return nil, fmt.Errorf("list providers: %w", err)
	}
	return list, nil
}

// ProviderGate is what one call may do, as EnterProvider decided.
type ProviderGate struct {
	State    string
	Failures int
	// Probe: the breaker is open and this call is the one that tries the
	// provider, until its lease ends.
	Probe bool
	// Slot is when the call may be made: now, or later to keep the pace.
	// It is reserved only when Reserved is true.
	Slot     time.Time
	Reserved bool
	// NextProbe is when an open breaker lets a probe through; ProbeUntil
	// is the lease of the probe under way, if any.
	NextProbe, ProbeUntil time.Time
	CallInterval          time.Duration
}

// ProviderFree reports, with a plain read, whether a call may go now
// without anything to reserve: the breaker closed and no pace to keep.
// It is the common case, and read inside the transactions a job makes
// anyway, it costs no transaction of its own. A provider never called is
// not free: its row is made by EnterProvider.
func (s *Store) ProviderFree(ctx context.Context, provider string) (free bool, err error) {
	err = exec(ctx, s, func(b *Batch) { b.ProviderFree(provider, &free) })
	return free, err
}

// ProviderFree queues ProviderFree; free gets its answer.
func (b *Batch) ProviderFree(provider string, free *bool) {
	q := b.b.Queue(providerFreeSQL, provider)
	q.QueryRow(func(row pgx.Row) error {
		err := row.Scan(free)
		if err != nil && !errors.Is(interpretError(err), ErrNotFound) {
			return fmt.Errorf("provider %s: %w", provider, err)
		}
		return nil
	})
	b.readOnly(q) // a step's save sends it with its commit
}

var providerFreeSQL = providerFreeOf("$1")

// providerFreeOf selects ProviderFree's answer for the provider whose name
// is the SQL provider; no row for one never called.
func providerFreeOf(provider string) string {
	return `SELECT p.state = 'closed' AND p.call_interval = '0' AND p.blocked_until <= now() AND p.next_call_at <= now()
	FROM providers p WHERE p.provider = ` + provider
}

// EnterProvider decides, in one statement on the provider's row, whether a
// call may be made: with the breaker closed, or as the one probe of an
// open breaker whose interval has passed; and when, so that calls from
// every process keep the pace the quota allows. A slot within maxWait is
// reserved for the caller (the next caller's slot comes one call interval
// later); a later one is not, and the caller should come back then.
func (s *Store) EnterProvider(ctx context.Context, provider string, lease, maxWait time.Duration) (*ProviderGate, error) {
	// The common case, a closed breaker and no pace to keep, is a plain
	// read: every worker of every process calls through one row, and
	// locking it for each call would make it the bottleneck.
	free, err := s.ProviderFree(ctx, provider)
	if err != nil {
		return nil, err
	}
	if free {
		return &ProviderGate{State: BreakerClosed, Slot: time.Now(), Reserved: true}, nil
	}
	g := &ProviderGate{}
	var nextProbe, probeUntil *time.Time
	err = s.enterProvider(ctx, provider, lease, maxWait, g, &nextProbe, &probeUntil)
	if errors.Is(err, ErrNotFound) {
		// The first call ever: the row is made once, then read as usual.
		if _, err = s.db.Exec(ctx, `INSERT INTO providers (provider) VALUES ($1) ON CONFLICT DO NOTHING`, provider); err == nil {
			err = s.enterProvider(ctx, provider, lease, maxWait, g, &nextProbe, &probeUntil)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("enter provider %s: %w", provider, err)
	}
	if nextProbe != nil {
		g.NextProbe = *nextProbe
	}
	if probeUntil != nil {
		g.ProbeUntil = *probeUntil
	}
	// A zero interval reserves nothing, yet the call may go at its slot.
	if g.CallInterval == 0 && (g.State == BreakerClosed || g.Probe) && time.Until(g.Slot) <= maxWait {
		g.Reserved = true
	}
	return g, nil
}

func (s *Store) enterProvider(ctx context.Context, provider string, lease, maxWait time.Duration, g *ProviderGate, nextProbe, probeUntil **time.Time) error {
	err := s.db.QueryRow(ctx, `WITH old AS (
			SELECT * FROM providers WHERE provider = $1 FOR UPDATE
		), d AS (
			SELECT old.*,
			       old.state = 'open' AND old.next_probe_at <= now() AND (old.probe_until IS NULL OR old.probe_until <= now()) AS probe,
			       greatest(old.next_call_at, old.blocked_until, now()) AS slot
			FROM old
		), upd AS (
			UPDATE providers p SET
				probe_until  = CASE WHEN d.probe THEN now() + $2::interval ELSE p.probe_until END,
				next_call_at = CASE WHEN (d.state = 'closed' OR d.probe) AND d.slot <= now() + $3::interval
				                    THEN d.slot + d.call_interval ELSE p.next_call_at END,
				updated_at   = now()
			FROM d WHERE p.provider = d.provider
			RETURNING p.next_call_at <> d.next_call_at AS reserved
		)
		SELECT d.state, d.failures, d.probe, d.slot, COALESCE((SELECT reserved FROM upd), false),
		       d.next_probe_at, CASE WHEN d.probe THEN now() + $2::interval ELSE d.probe_until END, d.call_interval
		FROM d`, provider, lease, maxWait).Scan(&g.State, &g.Failures, &g.Probe, &g.Slot, &g.Reserved, nextProbe, probeUntil, &g.CallInterval)
	return interpretError(err)
}

// UpdateProvider runs change on the provider's row under a lock and saves
// what it left, in one transaction; the breaker's rules live with the
// caller, the row here.
func (s *Store) UpdateProvider(ctx context.Context, provider string, change func(p *Provider)) (*Provider, error) {
	db, ok := s.db.(interface {
		Begin(context.Context) (pgx.Tx, error)
	})
	if !ok {
		return nil, errors.New("update provider: the store cannot begin a transaction")
	}
	var out *Provider
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO providers (provider) VALUES ($1) ON CONFLICT DO NOTHING`, provider); err != nil {
			return err
		}
		p, err := scanProvider(tx.QueryRow(ctx, `SELECT `+providerColumns+` FROM providers WHERE provider = $1 FOR UPDATE`, provider))
		if err != nil {
			return err
		}
		change(p)
		_, err = tx.Exec(ctx, `UPDATE providers SET state = $2, failures = $3, window_start = $4, opened_at = $5,
			probe_interval = $6, next_probe_at = $7, probe_until = $8, last_error = $9, changed_at = $10,
			call_interval = $11, blocked_until = $12, quota_limit = $13, quota_remaining = $14, quota_reset_at = $15,
			updated_at = now()
			WHERE provider = $1`, p.Provider, p.State, p.Failures, p.WindowStart, p.OpenedAt, p.ProbeInterval, p.NextProbeAt,
			p.ProbeUntil, p.LastError, p.ChangedAt, p.CallInterval, p.BlockedUntil, p.QuotaLimit, p.QuotaRemaining, p.QuotaResetAt)
		out = p
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update provider %s: %w", provider, err)
	}
	return out, nil
}
