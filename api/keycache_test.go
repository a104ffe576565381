package api

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

func TestTheKeyCache(t *testing.T) {
	t.Parallel()
	alice := &store.Caller{Actor: vocab.Agent("alice"), KeyID: 1}
	reads := 0
	read := func(hash []byte) (*store.Caller, error) {
		reads++
		if string(hash) == "unknown" {
			return nil, errors.New("no such key")
		}
		return alice, nil
	}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

	t.Run("AVerifiedKeyIsBelievedForASecondAndNoLonger", func(t *testing.T) {
		var c keyCache
		reads = 0
		for _, at := range []time.Duration{0, 500 * time.Millisecond, keyCacheTTL - time.Nanosecond} {
			if got, err := c.lookup([]byte("alice"), t0.Add(at), read); err != nil || got.Actor != alice.Actor {
				t.Fatalf("at %v: %v %v", at, got, err)
			}
		}
		if reads != 1 {
			t.Errorf("%d reads within the second, want 1", reads)
		}
		if _, err := c.lookup([]byte("alice"), t0.Add(keyCacheTTL), read); err != nil || reads != 2 {
			t.Errorf("a second later: %d reads (%v), want the key read again", reads, err)
		}
	})

	t.Run("AnUnknownKeyIsNeverKept", func(t *testing.T) {
		var c keyCache
		reads = 0
		for range 3 {
			if _, err := c.lookup([]byte("unknown"), t0, read); err == nil {
				t.Fatal("an unknown key verified")
			}
		}
		if reads != 3 {
			t.Errorf("%d reads for three tries of an unknown key, want 3", reads)
		}
	})

	t.Run("ForgetMakesTheNextRequestReadAgain", func(t *testing.T) {
		var c keyCache
		reads = 0
		_, _ = c.lookup([]byte("alice"), t0, read)
		c.forget()
		_, _ = c.lookup([]byte("alice"), t0, read)
		if reads != 2 {
			t.Errorf("%d reads, want the key read again after forget", reads)
		}
	})

	t.Run("TheCacheHoldsAtMostKeyCacheMaxKeys", func(t *testing.T) {
		var c keyCache
		for i := range keyCacheMax + 10 {
			_, _ = c.lookup([]byte(fmt.Sprint("key-", i)), t0, read)
			if n := len(c.entries); n > keyCacheMax {
				t.Fatalf("%d keys kept after %d lookups, want at most %d", n, i+1, keyCacheMax)
			}
		}
	})
}
