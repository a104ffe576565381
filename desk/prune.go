package desk

import (
	"context"
	"log/slog"
	"time"

	"github.com/helpdesk-dev/helpdesk/store"
)

// UploadRetention is how long an upload waits for a reply to send it.
const UploadRetention = 24 * time.Hour

// webhookEventRetention keeps delivered events for a look: deliveries end
// within hours.
const webhookEventRetention = 7 * 24 * time.Hour

// Prune forgets what has outlived its use: Idempotency-Keys older than
// IdempotencyRetention, uploads no reply sent within UploadRetention (and contents
// nothing refers to), acknowledgements too old to count toward their
// limit, dispatched webhook events after a week, River UI sessions that
// expired.
func (d *Desk) Prune(ctx context.Context) error {
	retention := d.config.IdempotencyRetention
	st := store.New(d.pool)
	n, err := st.PruneIdempotencyKeys(ctx, retention)
	if err != nil {
		return err
	}
	if n > 0 {
		d.log.InfoContext(ctx, "pruned expired idempotency keys", slog.Int64("deleted", n), slog.Duration("retention", retention))
	}
	uploads, contents, err := st.PruneAttachments(ctx, UploadRetention)
	if err != nil {
		return err
	}
	if uploads+contents > 0 {
		d.log.InfoContext(ctx, "pruned unsent uploads", slog.Int64("uploads", uploads), slog.Int64("contents", contents))
	}
	if _, err = st.PruneAcknowledgements(ctx, AckWindow); err != nil {
		return err
	}
	if _, err = st.PruneWebhookEvents(ctx, webhookEventRetention); err != nil {
		return err
	}
	_, err = st.PruneUISessions(ctx)
	return err
}
