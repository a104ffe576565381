package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// TestMailRenderedWhenWritten: a mail the service renders as it writes it
// (an acknowledgement, a notification to an agent) is kept with its row in
// one insert, ready for its first attempt, and mail text is stored with
// lz4 (migration 029) on a server that has it, as Debian's and every
// PostgreSQL since 14 built with it do.
func TestMailRenderedWhenWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, st := withAda(t)
	ticket, err := st.InsertTicket(ctx, &store.InsertTicketParams{CustomerID: "C-0001", Subject: "Parcel"})
	if err != nil {
		t.Fatal(err)
	}
	// Long enough that PostgreSQL compresses it (past about 2 KiB).
	text := strings.Repeat("We are sorry your parcel is late; a new one leaves today. ", 80)
	raw := []byte("Subject: Parcel\r\n\r\n" + text)
	msg, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: ticket.ID, Direction: vocab.DirectionNotification,
		Author: vocab.System, Body: text})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.InsertOutboundEmail(ctx, &store.InsertOutboundEmailParams{MessageID: msg.ID, FromAddress: "support@example.com",
		Recipients: []store.Recipient{{Address: "alice@example.com", Kind: "to"}},
		Rendered:   raw, InReplyTo: "<a@example.com>", References: []string{"<a@example.com>"}}); err != nil {
		t.Fatal(err)
	}

	t.Run("KeptWithItsRow", func(t *testing.T) {
		em, err := st.GetOutboundEmail(ctx, msg.ID)
		if err != nil {
			t.Fatal(err)
		}
		if string(em.Rendered) != string(raw) || em.InReplyTo == nil || *em.InReplyTo != "<a@example.com>" || len(em.References) != 1 ||
			em.State != store.DeliveryQueued {
			t.Errorf("row holds %d bytes, In-Reply-To %v, References %v, state %s; want the %d bytes, the thread, queued",
				len(em.Rendered), em.InReplyTo, em.References, em.State, len(raw))
		}
	})

	t.Run("MailTextIsCompressedWithLZ4", func(t *testing.T) {
		var rendered, body string
		if err := pool.QueryRow(ctx, `SELECT coalesce(pg_column_compression(o.rendered), 'none'), coalesce(pg_column_compression(m.body), 'none')
			FROM outbound_emails o JOIN messages m ON m.id = o.message_id WHERE o.message_id = $1`, msg.ID).Scan(&rendered, &body); err != nil {
			t.Fatal(err)
		}
		if rendered != "lz4" || body != "lz4" {
			t.Errorf("rendered bytes compressed with %s, body with %s; want lz4 for both (is this PostgreSQL built without lz4?)", rendered, body)
		}
	})
}

// TestADeliverysStatementsSettleOnOnePlan: what a delivery reads and
// writes runs on kept plans (plansKept) whether or not its tables have
// been analysed yet, as after a burst of mail on a new desk, or only
// vacuumed. The attempt's record joined its recipients' results from
// unnest, which a kept plan costs at a hundred rows: PostgreSQL planned
// every attempt anew until the tables were analysed (1,755 plans in 2,500
// attempts in the email benchmark, 300 µs each).
func TestADeliverysStatementsSettleOnOnePlan(t *testing.T) {
	t.Parallel()
	for name, after := range map[string]string{"AfterNothing": "", "AfterVACUUM": "VACUUM"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool, _ := withAda(t)
			for _, sql := range []string{
				`ALTER TABLE outbound_emails SET (autovacuum_enabled = false)`,
				`ALTER TABLE outbound_recipients SET (autovacuum_enabled = false)`,
				`INSERT INTO tickets (customer_id, subject) VALUES ('C-0001', 'Parcel')`,
				`INSERT INTO messages (ticket_id, direction, author, body)
					SELECT id, 'outbound', 'agent:alice', 'On its way.' FROM tickets, generate_series(1, 2000)`,
				`INSERT INTO outbound_emails (message_id, from_address) SELECT id, 'support@example.com' FROM messages`,
				`INSERT INTO outbound_recipients (message_id, address, kind) SELECT id, 'c' || id || '@example.com', 'to' FROM messages`,
				after,
			} {
				if sql == "" {
					continue
				}
				if _, err := pool.Exec(ctx, sql); err != nil {
					t.Fatal(err)
				}
			}
			plansKept(t, pool, func(run int, b *store.Batch) {
				id := int64(100 + 37*run)
				var (
					em     store.OutboundEmail
					kept   store.Kept
					marked bool
				)
				b.GetOutboundEmail(id, &em)
				b.MarkSendingIfDue(id, "relay", time.Hour, &marked)
				b.KeepRenderedAndMarkSending(id, "<a@example.com>", []string{"<a@example.com>"}, []byte("Subject: Parcel\r\n\r\nOn its way."),
					false, "relay", &kept)
				b.RecordAttempt(id, &store.AttemptResult{State: store.DeliverySent, Recipients: []store.RecipientResult{
					{Address: fmt.Sprintf("c%d@example.com", id), State: store.RecipientSent, SMTPCode: 250}}})
			})
		})
	}
}

// TestAMailKeptRenderedIsMarkedWithItsReadsOnlyWhenNothingComesFirst:
// MarkSendingIfDue marks an attempt as starting only where the attempt
// would mark it after reading: bytes kept, a recipient to send to, none
// of those suppressed, the mail young enough, the relay not troubled.
// Anything else is left as it was, for the attempt to decide.
func TestAMailKeptRenderedIsMarkedWithItsReadsOnlyWhenNothingComesFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, st := withAda(t)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO tickets (id, customer_id, subject) VALUES ('T-1', 'C-0001', 'Parcel')`)
	for _, tc := range []struct {
		name        string
		setup       string // SQL run on mail $1 (to c$1@example.com) before the mark; "" for none
		relay       string
		marks       bool
		uncertainly bool
	}{
		{name: "ABytesKeptMailToAPendingRecipient", marks: true},
		{name: "AResendToARecipientWhoseOutcomeIsUnknown", setup: `UPDATE outbound_recipients SET state = 'uncertain' WHERE message_id = $1`,
			marks: true, uncertainly: true},
		{name: "AMailStillToRender", setup: `UPDATE outbound_emails SET rendered = NULL WHERE message_id = $1`},
		{name: "AMailSentToEveryone", setup: `UPDATE outbound_recipients SET state = 'sent' WHERE message_id = $1`},
		{name: "AMailToASuppressedAddress", setup: `INSERT INTO suppressions (address, status, expires_at)
			SELECT 'c' || $1::bigint || '@example.com', '5.1.1', now() + interval '1 day'`},
		{name: "AMailToAnAddressWhoseSuppressionEnded", setup: `INSERT INTO suppressions (address, status, expires_at)
			SELECT 'c' || $1::bigint || '@example.com', '5.1.1', now() - interval '1 second'`, marks: true},
		{name: "AMailTooOld", setup: `UPDATE outbound_emails SET queued_at = now() - interval '2 hours' WHERE message_id = $1`},
		{name: "AMailThroughARelayThatAskedToSlowDown", relay: "slow", marks: false},
		{name: "AMailThroughAnotherRelay", relay: "fine", marks: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var id int64
			if err := pool.QueryRow(ctx, `INSERT INTO messages (ticket_id, direction, author, body) VALUES ('T-1', 'notification', 'system', 'B')
				RETURNING id`).Scan(&id); err != nil {
				t.Fatal(err)
			}
			exec(`INSERT INTO outbound_emails (message_id, from_address, rendered) VALUES ($1, 'support@example.com', $2)`, id, []byte("Subject: S\r\n\r\nB"))
			exec(`INSERT INTO outbound_recipients (message_id, address, kind) VALUES ($1::bigint, 'c' || $1::bigint || '@example.com', 'to')`, id)
			exec(`INSERT INTO smtp_relays (relay, not_before, slowdowns) VALUES ('slow', now() + interval '1 hour', 1) ON CONFLICT DO NOTHING`)
			if tc.setup != "" {
				exec(tc.setup, id)
			}
			relay := tc.relay
			if relay == "" {
				relay = "relay"
			}
			before, err := st.GetOutboundEmail(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var (
				b      store.Batch
				marked bool
			)
			b.MarkSendingIfDue(id, relay, time.Hour, &marked)
			if err := st.Send(ctx, &b); err != nil {
				t.Fatal(err)
			}
			after, err := st.GetOutboundEmail(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if marked != tc.marks {
				t.Errorf("marked %v, want %v", marked, tc.marks)
			}
			wantState, wantAttempts, wantUncertain := before.State, before.Attempts, before.UncertainResends
			if tc.marks {
				wantState, wantAttempts = store.DeliverySending, wantAttempts+1
				if tc.uncertainly {
					wantUncertain++
				}
			}
			if after.State != wantState || after.Attempts != wantAttempts || after.UncertainResends != wantUncertain {
				t.Errorf("state %s, %d attempts, %d uncertain resends; want %s, %d, %d", after.State, after.Attempts, after.UncertainResends,
					wantState, wantAttempts, wantUncertain)
			}
		})
	}
}
