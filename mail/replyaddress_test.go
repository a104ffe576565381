package mail_test

import (
	"errors"
	"strings"
	"testing"

	"helpdesk/mail"
)

func TestReplyAddresses(t *testing.T) {
	t.Parallel()
	r := &mail.ReplyAddresses{Local: "support", Domain: "helpdesk.example.com", Secret: []byte("the current secret, 16+ chars")}
	addr := r.Sign("T-500001", "alice")
	if !strings.HasPrefix(addr, "support+T-500001.alice.") || !strings.HasSuffix(addr, "@helpdesk.example.com") || len(addr) != len("support+T-500001.alice.")+10+len("@helpdesk.example.com") {
		t.Fatalf("signed address %q", addr)
	}
	for _, tc := range []struct {
		name, addr, ticket, agent string
		signed                    bool
		err                       error
	}{
		{"TheSignedAddressVerifies", addr, "T-500001", "alice", true, nil},
		{"InAnyCase", strings.ToUpper(addr), "T-500001", "alice", true, nil},
		{"AnotherAgentsNameDoesNot", strings.Replace(addr, ".alice.", ".bilal.", 1), "T-500001", "bilal", true, mail.ErrBadSignature},
		{"AnotherTicketDoesNot", strings.Replace(addr, "T-500001", "T-500002", 1), "T-500002", "alice", true, mail.ErrBadSignature},
		{"APlainPlusAddressIsNotSigned", "support+T-500001@helpdesk.example.com", "", "", false, nil},
		{"AnotherDomainIsNotOurs", strings.Replace(addr, "helpdesk.example.com", "evil.example.com", 1), "", "", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ticket, agent, signed, err := r.Parse(tc.addr)
			if signed != tc.signed || !errors.Is(err, tc.err) || (tc.signed && (ticket != tc.ticket || agent != tc.agent)) {
				t.Errorf("Parse(%q) = %q %q %v %v", tc.addr, ticket, agent, signed, err)
			}
		})
	}
	t.Run("APreviousSecretStillVerifiesAfterARotation", func(t *testing.T) {
		rotated := &mail.ReplyAddresses{Local: "support", Domain: "helpdesk.example.com", Secret: []byte("the next secret, also long"),
			Previous: [][]byte{r.Secret}}
		if _, _, signed, err := rotated.Parse(addr); !signed || err != nil {
			t.Errorf("an address signed before the rotation: %v %v", signed, err)
		}
		forgotten := &mail.ReplyAddresses{Local: "support", Domain: "helpdesk.example.com", Secret: []byte("the next secret, also long")}
		if _, _, _, err := forgotten.Parse(addr); !errors.Is(err, mail.ErrBadSignature) {
			t.Errorf("without the previous secret: %v", err)
		}
	})
}

func TestNewText(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ in, want string }{
		"GmailTopPostWithAWrappedAttribution": {"Thanks!\n\nDana\n\nOn Tue, Nov 3, 2026 at 10:15 AM Support <support@x>\nwrote:\n\n> old text", "Thanks!\n\nDana"},
		"OutlookOriginalMessage":              {"Done.\n\n-----Original Message-----\nFrom: Support\nSent: today\n\nold", "Done."},
		"OutlookHeaderBlock":                  {"Done.\n\nFrom: Support <support@x>\nSent: Tuesday\nTo: Dana\nSubject: x\n\nold", "Done."},
		"BottomPost":                          {"On 03.11.26 10:15, Support wrote:\n> old\n> text\n\nMy answer.\n\n-- \nDana", "My answer."},
		"QuotedLinesInTheMiddle":              {"Yes.\n> are you sure?\nVery sure.", "Yes.\nVery sure."},
		"Signature":                           {"Short answer.\n-- \nDana Scully\nSupport", "Short answer."},
		"GermanClient":                        {"Erledigt.\n\nAm 03.11.2026 um 10:15 schrieb Support <support@x>:\n> alt", "Erledigt."},
	} {
		t.Run(name, func(t *testing.T) {
			if got := mail.NewText(tc.in); got != tc.want {
				t.Errorf("NewText = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRelayMessageID(t *testing.T) {
	t.Parallel()
	for reply, want := range map[string]string{
		"Ok 0100018c2f0a1b2c-3d4e5f6a-7b8c-4d9e-a0b1-c2d3e4f5a6b7-000000": "0100018c2f0a1b2c-3d4e5f6a-7b8c-4d9e-a0b1-c2d3e4f5a6b7-000000",
		"OK <0100018c2f0a1b2c-3d4e5f6a>":                                  "0100018c2f0a1b2c-3d4e5f6a",
		"2.0.0 Ok: queued as ABC123DEF":                                   "",
		"OK: queued":                                                      "",
		"Ok":                                                              "",
	} {
		if got := mail.RelayMessageID(reply); got != want {
			t.Errorf("RelayMessageID(%q) = %q, want %q", reply, got, want)
		}
	}
}
