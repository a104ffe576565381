package desk

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// Bounce is a mail of ours that could not be delivered to one address: a
// delivery report, or a 5xx at RCPT.
type Bounce struct {
	TicketID string
	Address  string
	Status   string // the enhanced status and the server's words, "5.1.1 smtp; 550 5.1.1 User unknown"
	Code     int    // the SMTP reply code when we saw it ourselves, else 0
	Delayed  bool   // a "delayed" report: recorded, nothing more
	// Direction is the bounced mail's: an agent's reply or the
	// acknowledgement to the customer, or a notification to an agent.
	Direction vocab.Direction
}

// bounces reports whether a bounce of mail of this direction is told:
// mail to the customer, and mail to agents.
func bounces(d vocab.Direction) bool {
	return d.ToCustomer() || d == vocab.DirectionNotification
}

// bouncedTx tells of a bounce, in the caller's transaction: of mail to
// the customer as bounceTx does; of a notification with a system note on
// its ticket, for whoever reads it and can mend the agent's address.
// Nobody is mailed about an agent's (the assignee may be the very address
// that bounced: each bounce would make another), nothing of ours is
// suppressed, and a delay of it is only logged.
func (d *Desk) bouncedTx(ctx context.Context, tx *store.Tx, b *Bounce) error {
	if b.Direction != vocab.DirectionNotification {
		return d.bounceTx(ctx, tx, b)
	}
	if b.Delayed {
		d.log.InfoContext(ctx, "a mail to an agent is delayed", "ticket_id", b.TicketID, "address", b.Address, "status", b.Status)
		return nil
	}
	d.log.WarnContext(ctx, "a mail to an agent bounced", "ticket_id", b.TicketID, "address", b.Address, "status", b.Status)
	note := fmt.Sprintf("A mail to agent address %s about this ticket bounced: %s. Nobody at that address was told; mend the agent's address (helpdesk agent list).",
		b.Address, b.Status)
	_, err := tx.Store().InsertMessage(ctx, &store.InsertMessageParams{TicketID: b.TicketID, Direction: vocab.DirectionNote, Author: vocab.System, Body: note})
	return err
}

// what names the bounced mail in the ticket's notes.
func (b *Bounce) what() string {
	if b.Direction == vocab.DirectionAcknowledgement {
		return "The acknowledgement"
	}
	return "A reply"
}

// bounceTx makes a bounce reach the agent, in the caller's transaction: a
// system note naming the address, the status and the reason; a pending or
// solved ticket reopens; the assignee is told by mail. A hard failure
// (mail.HardFailure) puts the address on the suppression list for
// SuppressFor. A delayed report is only noted.
func (d *Desk) bounceTx(ctx context.Context, tx *store.Tx, b *Bounce) error {
	st := tx.Store()
	t, err := st.LockTicket(ctx, b.TicketID)
	if err != nil {
		return err
	}
	if b.Delayed {
		_, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: t.ID, Direction: vocab.DirectionNote, Author: vocab.System,
			Body: fmt.Sprintf("Delivery of %s to %s is delayed: %s. The receiving side is still trying.", strings.ToLower(b.what()), b.Address, b.Status)})
		return err
	}
	hard := mail.HardFailure(b.Status, b.Code)
	note := fmt.Sprintf("%s to %s bounced: %s.", b.what(), b.Address, b.Status)
	if hard {
		note += fmt.Sprintf(" The address is suppressed for %d days: replies to it fail at once until an agent clears it (DELETE /v1/suppressions/%s).",
			int(d.config.SuppressFor/(24*time.Hour)), b.Address)
		if err := st.Suppress(ctx, b.Address, b.Status, t.ID, d.config.SuppressFor); err != nil {
			return err
		}
	}
	if _, err := st.InsertMessage(ctx, &store.InsertMessageParams{TicketID: t.ID, Direction: vocab.DirectionNote, Author: vocab.System, Body: note}); err != nil {
		return err
	}
	if t.Status == vocab.StatusPending || t.Status == vocab.StatusSolved {
		setStatus(tx, t, vocab.System, vocab.StatusOpen)
	}
	d.retimeTx(tx, t.ID)
	return d.tellAssigneeTx(ctx, tx, t, "Bounced: ", note)
}
