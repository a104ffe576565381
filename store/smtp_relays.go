package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RelayGate is what a job may do with the relay now.
type RelayGate struct {
	// Wait > 0: leave the relay alone that long (it is paused, or another
	// job is probing it).
	Wait time.Duration
	// Probe: the relay was down and this job is the one that tries it.
	Probe bool
	// Troubled: the relay failed or asked to slow down since its last
	// success, so a good attempt must report RelayRecovered.
	Troubled bool
	// Probing: another job is probing the relay now. Wait is what is left
	// of its lease as far as this job could see, possibly zero; the job
	// must wait all the same.
	Probing bool
	// Faults is how many pauses in a row the relay has earned.
	Faults int
}

// RelayPaused returns until when the relay is paused and how many faults in
// a row it has; zero values for a relay that never failed.
func (s *Store) RelayPaused(ctx context.Context, relay string) (notBefore time.Time, faults int, err error) {
	err = s.db.QueryRow(ctx, `SELECT not_before, slowdowns FROM smtp_relays WHERE relay = $1`, relay).Scan(&notBefore, &faults)
	if err = interpretError(err); errors.Is(err, ErrNotFound) {
		return time.Time{}, 0, nil
	}
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("relay %s: %w", relay, err)
	}
	return notBefore, faults, nil
}

// RelaysPaused counts the relays paused now: down, or asked to slow down.
func (s *Store) RelaysPaused(ctx context.Context) (int, error) {
	var n int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM smtp_relays WHERE not_before > now()`).Scan(&n); err != nil {
		return 0, fmt.Errorf("paused relays: %w", err)
	}
	return n, nil
}

// EnterRelay decides, in one statement, whether a job may use the relay:
// freely when it is healthy; after not_before when it is paused; and when
// it was down and the pause is over, only the one job that claims the
// probe (for lease), while the others wait. A probe whose job died is
// given to another job once its lease ends.
func (s *Store) EnterRelay(ctx context.Context, relay string, lease time.Duration) (RelayGate, error) {
	// A relay that never failed, or whose trouble is over, is the common
	// case: a plain read, no lock and no write.
	var troubled bool
	err := s.db.QueryRow(ctx, relayTroubledSQL, relay).Scan(&troubled)
	if err = interpretError(err); errors.Is(err, ErrNotFound) || (err == nil && !troubled) {
		return RelayGate{}, nil
	}
	if err != nil {
		return RelayGate{}, fmt.Errorf("enter relay %s: %w", relay, err)
	}
	var (
		g       RelayGate
		waitSec float64
		probing bool
	)
	err = s.db.QueryRow(ctx, `WITH claim AS (
			UPDATE smtp_relays SET probe_until = now() + $2::interval, updated_at = now()
			WHERE relay = $1 AND slowdowns > 0 AND not_before <= now()
			  AND (probe_until IS NULL OR probe_until <= now())
			RETURNING slowdowns
		)
		SELECT EXISTS (SELECT 1 FROM claim),
		       COALESCE((SELECT slowdowns FROM claim), r.slowdowns, 0),
		       CASE
		         WHEN EXISTS (SELECT 1 FROM claim) OR r.relay IS NULL THEN 0
		         WHEN r.not_before > now() THEN extract(epoch FROM r.not_before - now())
		         WHEN r.slowdowns > 0 THEN greatest(extract(epoch FROM r.probe_until - now()), 0)
		         ELSE 0
		       END,
		       -- Down, not paused, and the claim went to another job. The
		       -- row read here is the statement's snapshot, older than a
		       -- concurrent claim, so its probe_until may still be empty.
		       COALESCE(NOT EXISTS (SELECT 1 FROM claim) AND r.slowdowns > 0 AND r.not_before <= now(), false)
		FROM (SELECT 1) one LEFT JOIN smtp_relays r ON r.relay = $1`, relay, lease).Scan(&g.Probe, &g.Faults, &waitSec, &probing)
	if err != nil {
		return RelayGate{}, fmt.Errorf("enter relay %s: %w", relay, err)
	}
	g.Wait = time.Duration(waitSec * float64(time.Second))
	g.Troubled, g.Probing = g.Faults > 0, probing
	return g, nil
}

const relayTroubledSQL = `SELECT ` + relayTroubledCondition + ` FROM smtp_relays WHERE relay = $1`

// relayTroubledCondition is true of a relay row that failed or asked to
// slow down since its last success.
const relayTroubledCondition = `slowdowns > 0 OR not_before > now() OR probe_until IS NOT NULL`

// relayFree is the condition that the relay named by the expression relay
// is not troubled (relayTroubledCondition), what a job may send through
// without asking EnterRelay.
func relayFree(relay string) string {
	return `NOT EXISTS (SELECT 1 FROM smtp_relays WHERE relay = ` + relay + ` AND (` + relayTroubledCondition + `))`
}

// RecordRelayFault pauses the relay after it failed (no connection, no
// greeting, a failed TLS handshake) or asked us to slow down, and returns
// until when. The pause doubles with each fault that comes after the last
// pause ended (from base up to cap, the second half drawn at random); faults
// met by jobs that were already under way when the relay was paused do not
// lengthen it, so twenty workers failing at once count once.
func (s *Store) RecordRelayFault(ctx context.Context, relay, reply string, base, cap time.Duration) (time.Time, error) {
	var t time.Time
	err := s.db.QueryRow(ctx, `INSERT INTO smtp_relays (relay, not_before, slowdowns, last_reply)
		VALUES ($1, now() + $2::interval * (0.5 + random() / 2), 1, $4)
		ON CONFLICT (relay) DO UPDATE SET
			slowdowns  = CASE WHEN smtp_relays.not_before > now() THEN smtp_relays.slowdowns
			                  ELSE smtp_relays.slowdowns + 1 END,
			not_before = CASE WHEN smtp_relays.not_before > now() THEN smtp_relays.not_before
			                  ELSE now() + least($3::interval, $2::interval * power(2, least(smtp_relays.slowdowns, 30)))
			                               * (0.5 + random() / 2) END,
			probe_until = NULL,
			last_reply = $4,
			updated_at = now()
		RETURNING not_before`, relay, base, cap, reply).Scan(&t)
	if err != nil {
		return time.Time{}, fmt.Errorf("record fault of relay %s: %w", relay, err)
	}
	return t, nil
}

// RelayRecovered records that the relay answered an attempt: it is no
// longer down, and its next fault pauses it for the base time again. A
// pause that a slow-down set runs to its end.
func (s *Store) RelayRecovered(ctx context.Context, relay string) error {
	_, err := s.db.Exec(ctx, `UPDATE smtp_relays SET slowdowns = 0, probe_until = NULL, updated_at = now()
		WHERE relay = $1 AND (slowdowns > 0 OR probe_until IS NOT NULL)`, relay)
	if err != nil {
		return fmt.Errorf("relay %s recovered: %w", relay, err)
	}
	return nil
}
