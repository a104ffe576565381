package faulttest_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/fetcher/imaptest"
)

// A mailbox of 200 messages fetched by the built binary, SIGKILLed twice
// while it fetches: every mail is stored exactly once, none is deleted,
// none is left unmoved.
func TestAMailboxFetchSurvivesKills(t *testing.T) {
	t.Parallel()
	const mails = 200
	w := newWorld(t)
	imap := imaptest.Start(t, imaptest.Options{User: "support@example.org", Password: "imap-password"})
	for i := range mails {
		raw := fmt.Sprintf("From: Customer %d <c%d@example.net>\r\nTo: support@example.org\r\nSubject: Question %d\r\nMessage-ID: <fetch.%d@example.net>\r\n\r\nQuestion %d.\r\n",
			i, i, i, i, i)
		if _, err := imap.Append("INBOX", []byte(raw)); err != nil {
			t.Fatal(err)
		}
	}
	cases := desk.New(w.pool, nil, desk.Config{})
	if _, err := cases.AddMailbox(context.Background(), &desk.MailboxParams{Name: "support", Address: "support@example.org",
		IMAPURL: "imap://" + url.PathEscape(imap.Username()) + "@" + imap.Addr + "/INBOX?tls=none", Password: "imap-password"}); err != nil {
		t.Fatal(err)
	}
	// A lease of 3s: a killed worker's mailbox is taken over within seconds.
	env := map[string]string{"HELPDESK_ROLE": "worker", "HELPDESK_IMAP_LEASE": "3s", "HELPDESK_IMAP_POLL": "1s"}
	stored := func() int {
		return w.count(t, `SELECT count(*) FROM messages WHERE email_message_id LIKE '<fetch.%@example.net>'`)
	}
	awaitStored := func(atLeast int) {
		t.Helper()
		deadline := time.Now().Add(120 * time.Second)
		for stored() < atLeast {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d mails stored after 120s", stored(), atLeast)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for i, upTo := range []int{40, 110} {
		p := w.start(t, fmt.Sprintf("fetcher-%d", i+1), env)
		awaitStored(upTo)
		p.kill(t) // in the middle of the fetch
		t.Logf("killed fetcher %d with %d of %d stored, %d moved", i+1, stored(), mails, imap.Count("Processed"))
	}
	w.start(t, "fetcher-3", env)
	deadline := time.Now().Add(120 * time.Second)
	// A move is forgotten (mailbox_pending) just after the server did it:
	// the fetch is over when both are.
	pending := func() int { return w.count(t, `SELECT count(*) FROM mailbox_pending`) }
	for stored() < mails || imap.Count("INBOX") != 0 || pending() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after 120s: %d stored, %d in INBOX, %d in Processed, %d moves pending", stored(), imap.Count("INBOX"),
				imap.Count("Processed"), pending())
		}
		time.Sleep(20 * time.Millisecond)
	}
	distinct := w.count(t, `SELECT count(DISTINCT email_message_id) FROM messages WHERE email_message_id LIKE '<fetch.%@example.net>'`)
	if stored() != mails || distinct != mails {
		t.Errorf("%d stored (%d distinct), want each of %d once", stored(), distinct, mails)
	}
	if imap.Count("Processed") != mails || imap.Count("INBOX") != 0 {
		t.Errorf("%d in Processed and %d in INBOX, want all %d moved and none deleted", imap.Count("Processed"), imap.Count("INBOX"), mails)
	}
}
