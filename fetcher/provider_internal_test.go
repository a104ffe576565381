package fetcher

import (
	"testing"

	"github.com/helpdesk-dev/helpdesk/senderauth"
	"github.com/helpdesk-dev/helpdesk/store"
)

// The provider of a mailbox received its mail from the sender: its
// Authentication-Results are the ones to believe.
func TestProviderAuthservID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		mb   store.Mailbox
		want string
	}{
		{"Microsoft365ByOAuth", store.Mailbox{IMAPURL: "imaps://support%40example.com@outlook.office365.com/INBOX",
			OAuth: &store.OAuth{Provider: "microsoft"}}, senderauth.Microsoft365},
		{"Microsoft365ByItsServer", store.Mailbox{IMAPURL: "imaps://support%40example.com@Outlook.Office365.com:993/Support"}, senderauth.Microsoft365},
		{"GoogleByOAuth", store.Mailbox{IMAPURL: "imaps://support%40example.com@imap.gmail.com/INBOX",
			OAuth: &store.OAuth{Provider: "google"}}, "mx.google.com"},
		{"GmailByItsServer", store.Mailbox{IMAPURL: "imaps://support%40gmail.com@imap.gmail.com/INBOX"}, "mx.google.com"},
		{"AnyOtherServerIsTheServicesSetting", store.Mailbox{IMAPURL: "imaps://support@imap.example.com/INBOX"}, ""},
		{"ACustomOAuthProviderIsTheServicesSetting", store.Mailbox{IMAPURL: "imaps://support@imap.example.com/INBOX",
			OAuth: &store.OAuth{Provider: "custom"}}, ""},
		{"TheMailboxsOwnIsBelievedOverAnyProvider", store.Mailbox{IMAPURL: "imaps://support%40example.com@imap.gmail.com/INBOX",
			OAuth: &store.OAuth{Provider: "google"}, AuthservID: "mx.example.com"}, "mx.example.com"},
	} {
		ep, err := ParseURL(tc.mb.IMAPURL)
		if err != nil {
			t.Fatal(err)
		}
		if got := mailboxAuthservID(&tc.mb, ep); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
