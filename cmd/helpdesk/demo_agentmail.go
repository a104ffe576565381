//go:build demo

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	gomail "github.com/emersion/go-message/mail"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/inbound"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
)

// agentRoundTrip is the demo's part 4: a customer's mail, the assignee's
// notification, her answer from her mail client above the quote, and what
// the customer receives.
func agentRoundTrip(ctx context.Context, out io.Writer, pool *pgxpool.Pool, queue *jobs.Queue, cases *desk.Desk,
	replies *mail.ReplyAddresses, relay *smtptest.Server, expect func(string, any, any), logger *slog.Logger) error {
	fmt.Fprintln(out, "Part 4: an agent answers from her mail client")
	receiver := inbound.NewReceiver(cases, inbound.ReceiverConfig{Logger: logger})
	customerMail := "From: Viktor Horvat <viktor.horvat@example.com>\r\nTo: support@helpdesk.example.com\r\n" +
		"Subject: Invoice 2210 charged twice\r\nMessage-ID: <demo.viktor.1@mail.example.com>\r\n\r\n" +
		"Hello, invoice 2210 was charged twice on my card. Please refund one.\r\n"
	notesBefore := len(deliveriesTo(relay, "alice@support.example.com"))
	repliesBefore := len(deliveriesTo(relay, "viktor.horvat@example.com"))
	opened, err := receiver.Receive(ctx, []string{"support@helpdesk.example.com"}, []byte(customerMail))
	if err != nil {
		return err
	}
	note, err := awaitDelivery(ctx, relay, "alice@support.example.com", notesBefore+1)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  customer mail → %s; triage assigned alice and mailed her %q\n", opened.TicketID, note.subject)
	fmt.Fprintf(out, "    Reply-To: %s (signed for %s and this notification)\n", note.replyTo, opened.TicketID)
	answer := "From: Alice Moreau <alice@support.example.com>\r\nTo: " + note.replyTo + "\r\nSubject: Re: " + note.subject + "\r\n" +
		"Message-ID: <demo.alice.1@support.example.com>\r\nIn-Reply-To: " + note.messageID + "\r\n\r\n" +
		"Hello Viktor, we refunded the second charge of invoice 2210.\r\n\r\nAlice\r\n\r\n" +
		"On Tue, Nov 3, 2026 at 10:15 AM Example Support <" + note.replyTo + "> wrote:\r\n> " +
		strings.ReplaceAll(strings.TrimSpace(note.text), "\n", "\n> ") + "\r\n"
	answered, err := receiver.Receive(ctx, []string{note.replyTo}, []byte(answer))
	if err != nil {
		return err
	}
	reply, err := awaitDelivery(ctx, relay, "viktor.horvat@example.com", repliesBefore+1)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  alice answers above the quote → %s; the customer receives from %s:\n", answered.Kind, reply.from)
	fmt.Fprintf(out, "    %q\n", strings.ReplaceAll(strings.TrimSpace(reply.text), "\r\n", "\n"))
	fmt.Fprintf(out, "    In-Reply-To: %s (the customer's mail; no notification id in the thread: %v)\n", reply.inReplyTo,
		!strings.Contains(reply.inReplyTo+strings.Join(reply.references, " "), strings.Trim(note.messageID, "<>")))
	expect("the agent's answer", answered.Kind, "agent_replied")
	expect("what the customer reads as new", mail.NewText(reply.text), "Hello Viktor, we refunded the second charge of invoice 2210.\n\nAlice")
	expect("the reply's In-Reply-To", reply.inReplyTo, "<demo.viktor.1@mail.example.com>")
	return nil
}

// demoMail is a delivered mail as the demo shows it.
type demoMail struct {
	messageID, inReplyTo, subject, replyTo, from, text string
	references                                         []string
}

// awaitDelivery waits for the n-th mail to the address at the relay.
func awaitDelivery(ctx context.Context, relay *smtptest.Server, address string, n int) (*demoMail, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		if got := deliveriesTo(relay, address); len(got) >= n {
			return readDemoMail(got[n-1].Raw)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no mail %d to %s within 15s", n, address)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func deliveriesTo(relay *smtptest.Server, address string) []smtptest.Delivery {
	var out []smtptest.Delivery
	for _, d := range relay.Deliveries() {
		for _, to := range d.To {
			if to == address {
				out = append(out, d)
			}
		}
	}
	return out
}

func readDemoMail(raw []byte) (*demoMail, error) {
	r, err := gomail.CreateReader(strings.NewReader(string(raw)))
	if err != nil {
		return nil, err
	}
	m := &demoMail{}
	id, _ := r.Header.MessageID()
	m.messageID = "<" + id + ">"
	if irt, _ := r.Header.MsgIDList("In-Reply-To"); len(irt) > 0 {
		m.inReplyTo = "<" + irt[0] + ">"
	}
	m.references, _ = r.Header.MsgIDList("References")
	m.subject, _ = r.Header.Subject()
	if l, _ := r.Header.AddressList("Reply-To"); len(l) > 0 {
		m.replyTo = l[0].Address
	}
	if l, _ := r.Header.AddressList("From"); len(l) > 0 {
		m.from = l[0].Address
	}
	for m.text == "" {
		p, err := r.NextPart()
		if err != nil {
			break
		}
		if ct, _, _ := p.Header.(*gomail.InlineHeader).ContentType(); ct == "text/plain" {
			b, _ := io.ReadAll(p.Body)
			m.text = string(b)
		}
	}
	return m, nil
}

// awaitIdle waits until no job of the kind is left to do.
func awaitIdle(ctx context.Context, pool *pgxpool.Pool, kind string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND state NOT IN ('completed', 'cancelled', 'discarded')`, kind).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d %s jobs still to do after 15s", n, kind)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
