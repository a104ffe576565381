package fetcher_test

import (
	"strings"
	"testing"

	"github.com/helpdesk-dev/helpdesk/fetcher"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want fetcher.Endpoint
	}{
		{"imaps://support%40example.com:s3cret@imap.example.com/INBOX",
			fetcher.Endpoint{Address: "imap.example.com:993", TLS: fetcher.TLSImplicit, User: "support@example.com", Password: "s3cret", Folder: "INBOX"}},
		// An @ of the user left as it is still reads: the host follows the last.
		{"imaps://support@example.com:s3cret@imap.example.com",
			fetcher.Endpoint{Address: "imap.example.com:993", TLS: fetcher.TLSImplicit, User: "support@example.com", Password: "s3cret", Folder: "INBOX"}},
		{"imap://u@[::1]:1143/Support/Open%20tickets?tls=required",
			fetcher.Endpoint{Address: "[::1]:1143", TLS: fetcher.TLSRequired, User: "u", Folder: "Support/Open tickets"}},
		{"imap://u:p%23ss@imap.example.com/?tls=none",
			fetcher.Endpoint{Address: "imap.example.com:143", TLS: fetcher.TLSNone, User: "u", Password: "p#ss", Folder: "INBOX"}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := fetcher.ParseURL(tc.in)
			if err != nil || *got != tc.want {
				t.Errorf("got %+v (%v), want %+v", got, err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ in, says string }{
		// A # left as it is ends the URL there: the password, or all after it, would be lost.
		{"imaps://support%40example.com:pa#ss@imap.example.com/INBOX", "%23"},
		{"imaps://u:pass@imap.example.com/INBOX#frag", "%23"},
		{"imaps://u:pa ss@imap.example.com/INBOX", "percent-encoded"},
		{"pop3://u@mail.example.com/", "imaps:// or imap://"},
		{"imaps://imap.example.com/INBOX", "a user and a host"},
		{"imap://u@imap.example.com/?tls=maybe", "required or none"},
		{"imap://u@imap.example.com/?user=x", "unknown parameter"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if _, err := fetcher.ParseURL(tc.in); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err %v, want one that says %q", err, tc.says)
			}
		})
	}
}
