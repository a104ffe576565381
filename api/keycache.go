package api

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/helpdesk-dev/helpdesk/store"
)

// keyCacheTTL is how long a verified API key is believed without asking
// the database again: a revoked key, or a disabled agent's, stops working
// in every process within it.
const keyCacheTTL = time.Second

// keyCacheMax bounds the cache: only keys that verified enter it, and past
// this many distinct ones it starts over.
const keyCacheMax = 10000

// keyCache holds verified API keys by their hash for keyCacheTTL, so that
// a client's requests cost one key lookup a second, not one each.
type keyCache struct {
	mu      sync.Mutex
	entries map[string]keyEntry
	lookups atomic.Int64 // reads of the database, for tests
}

type keyEntry struct {
	caller store.Caller
	until  time.Time
}

func (c *keyCache) get(hash []byte, now time.Time) (*store.Caller, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[string(hash)]
	if !ok || !now.Before(e.until) {
		return nil, false
	}
	caller := e.caller
	return &caller, true
}

func (c *keyCache) put(hash []byte, caller *store.Caller, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= keyCacheMax {
		c.entries = make(map[string]keyEntry)
	}
	c.entries[string(hash)] = keyEntry{caller: *caller, until: now.Add(keyCacheTTL)}
}

// forget drops every verified key: after a change this process made to
// agents, it takes effect here from the next request.
func (c *keyCache) forget() {
	c.mu.Lock()
	c.entries = nil
	c.mu.Unlock()
}

// lookup answers from the cache, else reads the key and keeps it if it
// verified. Unknown keys are never kept: they are the guard's to count.
func (c *keyCache) lookup(hash []byte, now time.Time, read func([]byte) (*store.Caller, error)) (*store.Caller, error) {
	if caller, ok := c.get(hash, now); ok {
		return caller, nil
	}
	c.lookups.Add(1)
	caller, err := read(hash)
	if err != nil {
		return nil, err
	}
	c.put(hash, caller, now)
	return caller, nil
}
