package desk

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/store"
)

// addressCache keeps the support addresses' rows the mail of their tickets
// is composed with. A row is read again after addressCacheFor, so a From
// name changed elsewhere shows within a minute; an address is never
// missing from it, since a ticket names only addresses that exist.
type addressCache struct {
	mu   sync.Mutex
	rows map[string]cachedAddress
}

type cachedAddress struct {
	row  *store.SupportAddress
	read time.Time
}

const addressCacheFor = time.Minute

// supportAddress returns the row of a support address, nil for one that
// has none.
func (d *Desk) supportAddress(ctx context.Context, address string) (*store.SupportAddress, error) {
	address = strings.ToLower(address)
	d.addresses.mu.Lock()
	c, ok := d.addresses.rows[address]
	d.addresses.mu.Unlock()
	if ok && time.Since(c.read) < addressCacheFor {
		return c.row, nil
	}
	var row *store.SupportAddress
	var b store.Batch
	b.SupportAddressOf(address, &row)
	if err := store.New(d.pool).Send(ctx, &b); err != nil {
		return nil, err
	}
	d.addresses.mu.Lock()
	if d.addresses.rows == nil {
		d.addresses.rows = map[string]cachedAddress{}
	}
	d.addresses.rows[address] = cachedAddress{row: row, read: time.Now()}
	d.addresses.mu.Unlock()
	return row, nil
}

// fromOf is the From of a ticket's mail: its support address with that
// address's name, else the default (HELPDESK_FROM).
func (d *Desk) fromOf(ctx context.Context, t *store.Ticket) (*mail.Address, error) {
	if t.SupportAddress == nil {
		return d.config.From, nil
	}
	row, err := d.supportAddress(ctx, *t.SupportAddress)
	if err != nil {
		return nil, fmt.Errorf("support address of %s: %w", t.ID, err)
	}
	name := d.config.From.Name
	if row != nil && row.FromName != "" {
		name = row.FromName
	}
	return &mail.Address{Name: name, Address: *t.SupportAddress}, nil
}

// ours reports whether an address is at one of the support domains the
// listener takes mail for; a support address elsewhere is read as a
// mailbox (IMAP), where only its plus forms come back.
func (d *Desk) ours(address string) bool { return d.AcceptsRecipient(address) }

// baseAddress is an address without its +detail.
func baseAddress(address string) string {
	local, domain, ok := strings.Cut(strings.ToLower(address), "@")
	if !ok {
		return ""
	}
	local, _, _ = strings.Cut(local, "+")
	return local + "@" + domain
}
