package jobs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
)

func TestExpiredIdempotencyKeysArePrunedByThePeriodicJob(t *testing.T) {
	t.Parallel()
	b := jobstest.Setup(t)
	b.DeskConfig.IdempotencyRetention = time.Hour
	if _, err := b.Pool.Exec(b.Ctx, `INSERT INTO idempotency_keys (actor, key, fingerprint, created_at) VALUES
		('customer:C-0001', 'old', '\x00', now() - interval '2 hours'), ('customer:C-0001', 'new', '\x00', now())`); err != nil {
		t.Fatal(err)
	}
	b.StartQueue(t) // the prune runs when the queue starts, then periodically
	deadline := time.Now().Add(10 * time.Second)
	for {
		var keys []string
		rows, _ := b.Pool.Query(b.Ctx, `SELECT key FROM idempotency_keys ORDER BY key`)
		for rows.Next() {
			var k string
			_ = rows.Scan(&k)
			keys = append(keys, k)
		}
		rows.Close()
		if strings.Join(keys, ",") == "new" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("keys %v after 10s, want only the one within the retention", keys)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
