package api

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// HeaderIdempotencyKey names a creating request; HeaderReplayed marks an
// answer given again for a repeated one.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderReplayed       = "Idempotent-Replayed"
)

// idempotencyKey reads the optional header: 1 to 255 printable ASCII characters.
func idempotencyKey(r *http.Request) (string, error) {
	values := r.Header.Values(HeaderIdempotencyKey)
	if len(values) == 0 {
		return "", nil
	}
	key := values[0]
	ok := len(values) == 1 && len(key) >= 1 && len(key) <= 255
	for i := 0; ok && i < len(key); i++ {
		ok = key[i] >= 0x21 && key[i] <= 0x7e
	}
	if !ok {
		return "", badRequest("invalid_idempotency_key", "Idempotency-Key must be one value of 1 to 255 printable ASCII characters, without spaces")
	}
	return key, nil
}

// fingerprint names a request by its method, path and canonical body (the
// decoded request encoded again), so spacing and key order do not count.
func fingerprint(r *http.Request, canonical any) []byte {
	body, _ := json.Marshal(canonical)
	h := sha256.New()
	h.Write([]byte(r.Method + " " + r.URL.Path + "\n"))
	h.Write(body)
	return h.Sum(nil)
}

// createOnce runs create in a transaction at most once per (actor, key):
// the first request's answer is saved with the key in the same transaction,
// and a repeat with the same fingerprint gets it back with Idempotent-Replayed:
// true, saving nothing. A repeat that arrives while the first is in flight
// waits on the key's unique index and then replays, having done nothing of
// its own. The same key with another request is 422 idempotency_key_reused.
// Without a key, create just runs.
//
// The claim goes with the transaction's first trip (with BEGIN and
// create's first statements), before them, and the answer with its last
// (with create's writes that wait for it, and COMMIT): a new request costs
// the key no trip of its own. A key taken stops the first trip at the
// claim, so a repeat runs none of create's statements and takes no number;
// it brings the first answer back, and costs the rollback's trip.
func (s *Server) createOnce(w http.ResponseWriter, r *http.Request, who vocab.Actor, canonical any,
	create func(ctx context.Context, tx *store.Tx) (status int, body any, err error)) error {
	ctx := r.Context()
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	fp := fingerprint(r, canonical)
	actor := who.String()
	retention := s.desk.IdempotencyRetention()

	var (
		status   int
		response []byte
		claim    store.Claim
		lost     error // the failed trip's error, when the claim failed
	)
	err = store.Run(ctx, s.pool, func(tx *store.Tx) error {
		if key != "" {
			tx.Later(func(b *store.Batch) { b.ClaimIdempotencyKey(actor, key, fp, retention, &claim) })
		}
		st, body, err := create(ctx, tx)
		if key == "" {
			if err == nil {
				status, response = st, bytes.TrimSuffix(encodeJSON(body), []byte("\n"))
			}
			return err
		}
		if !claim.Sent {
			// create refused before any trip: the claim still decides
			// first, so that a repeat gets the first answer.
			if ferr := tx.Flush(ctx); ferr != nil {
				err = errors.Join(err, ferr)
			}
		}
		if claim.Sent && !claim.Claimed {
			// The trip stopped at the claim: the key is taken, most
			// likely, whatever create made of the failure.
			lost = err
			return errLostRace
		}
		if err != nil {
			return err
		}
		status, response = st, bytes.TrimSuffix(encodeJSON(body), []byte("\n"))
		tx.Later(func(b *store.Batch) { b.SaveIdempotentResponse(actor, key, status, response) })
		return nil
	})
	if errors.Is(err, errLostRace) {
		// A key read with the claim has its answer: the claim and the
		// answer commit together. Without one, a copy in flight then has
		// committed since, or the claim would not have failed.
		prior := claim.Prior
		if prior == nil {
			if prior, err = store.New(s.pool).GetIdempotencyKey(ctx, actor, key, retention); errors.Is(err, store.ErrNotFound) {
				// The claim failed for another reason.
				return fmt.Errorf("idempotency key %q: %w", key, cmp.Or(lost, store.ErrKeyTaken))
			} else if err != nil {
				return err
			}
		}
		return replay(w, prior, fp)
	}
	if err != nil {
		return err
	}
	writeRaw(w, status, response)
	return nil
}

// errLostRace rolls back a request whose Idempotency-Key a copy claimed first.
var errLostRace = errors.New("idempotency key claimed by a copy")

// replay answers a repeated request with the first answer, or 422 if the
// key was used for another request.
func replay(w http.ResponseWriter, prior *store.IdempotencyKey, fp []byte) error {
	if !prior.Matches(fp) {
		return unprocessable("idempotency_key_reused",
			"Idempotency-Key %q was used for another request; use a new key for a new request", prior.Key)
	}
	w.Header().Set(HeaderReplayed, "true")
	writeRaw(w, prior.Status, prior.Response)
	return nil
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
