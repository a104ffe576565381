package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/jackc/pgx/v5"

	"helpdesk/store"
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
// waits on the key's unique index and then replays. The same key with
// another request is 422 idempotency_key_reused. Without a key, create just runs.
func (s *Server) createOnce(w http.ResponseWriter, r *http.Request, who Actor, canonical any,
	create func(ctx context.Context, tx pgx.Tx) (status int, body any, err error)) error {
	return s.createOnceWith(w, r, who, canonical, creation{
		run: func(ctx context.Context, tx pgx.Tx, save func(status int, body any, b *store.Batch)) error {
			status, body, err := create(ctx, tx)
			if err != nil {
				return err
			}
			var b store.Batch
			save(status, body, &b)
			return store.New(tx).Send(ctx, &b)
		},
	})
}

// creation is what createOnceWith runs: first may queue statements to send
// with BEGIN and the key's claim; run writes the rest and hands its answer
// to save, with the batch it sends, so that the answer is saved in the
// same round trip as its last rows.
type creation struct {
	first func(b *store.Batch)
	run   func(ctx context.Context, tx pgx.Tx, save func(status int, body any, b *store.Batch)) error
}

// createOnceWith is createOnce in as few round trips as the guarantees
// allow: a replay is one read; a new request begins its transaction, claims
// the key and sends the creation's first statements at once.
func (s *Server) createOnceWith(w http.ResponseWriter, r *http.Request, who Actor, canonical any, c creation) error {
	ctx := r.Context()
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	fp := fingerprint(r, canonical)
	actor := who.String()

	// A repeat of a finished request is answered from a plain read: replays
	// then neither write nor queue up behind the key's row lock.
	if key != "" {
		prior, err := store.New(s.pool).GetIdempotencyKey(ctx, actor, key, s.retention)
		switch {
		case err == nil && prior.Status != 0:
			return replay(w, prior, fp)
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return err
		}
	}

	var (
		status   int
		response []byte
		prior    *store.IdempotencyKey
		claimed  bool
	)
	first := store.BeginBatch()
	if key != "" {
		first.ClaimIdempotencyKey(actor, key, fp, s.retention, &claimed)
	}
	if c.first != nil {
		c.first(first)
	}
	err = store.InTx(ctx, s.pool, first, func(tx pgx.Tx) error {
		if key != "" && !claimed {
			// A copy raced us and committed first; its answer is ours.
			var err error
			prior, err = store.New(tx).GetIdempotencyKey(ctx, actor, key, s.retention)
			return err
		}
		return c.run(ctx, tx, func(st int, body any, b *store.Batch) {
			status, response = st, bytes.TrimSuffix(encodeJSON(body), []byte("\n"))
			if key != "" {
				b.SaveIdempotentResponse(actor, key, status, response)
			}
		})
	})
	if err != nil {
		return err
	}
	if prior != nil {
		return replay(w, prior, fp)
	}
	writeRaw(w, status, response)
	return nil
}

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
