package inbound

import (
	"context"
	"log/slog"

	"helpdesk/desk"
	"helpdesk/metrics"
)

// Receiver parses inbound mail and hands it to the desk, which files it.
type Receiver struct {
	desk   *desk.Desk
	logger *slog.Logger
}

// NewReceiver returns a receiver that files mail with d.
func NewReceiver(d *desk.Desk, logger *slog.Logger) *Receiver {
	if logger == nil {
		logger = slog.Default()
	}
	return &Receiver{desk: d, logger: logger}
}

// AcceptsRecipient reports whether rcpt is at one of the support domains.
func (rc *Receiver) AcceptsRecipient(rcpt string) bool { return rc.desk.AcceptsRecipient(rcpt) }

// Receive parses raw and files it (desk.FileInbound): under its ticket,
// as a new ticket, as a bounce or an agent's answer, or not at all when it
// is stored already.
func (rc *Receiver) Receive(ctx context.Context, rcpts []string, raw []byte) (*desk.Filed, error) {
	msg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	out, err := rc.desk.FileInbound(ctx, rcpts, msg, raw)
	if err != nil {
		return nil, err
	}
	metrics.InboundMessages.WithLabelValues(out.Kind).Inc()
	rc.logger.InfoContext(ctx, "inbound mail", slog.String("outcome", out.Kind), slog.String("ticket_id", out.TicketID),
		slog.String("matched", out.Matched), slog.String("message_id", msg.MessageID), slog.Bool("automatic", msg.Automatic))
	return out, nil
}
