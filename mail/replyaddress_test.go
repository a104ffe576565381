package mail_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/mail"
)

func TestReplyAddresses(t *testing.T) {
	t.Parallel()
	r := &mail.ReplyAddresses{Local: "support", Domain: "helpdesk.example.com", Secret: []byte("the current secret, 16+ chars")}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	expires := now.Add(30 * 24 * time.Hour)
	addr := r.Sign("T-500001", 1234, expires)
	local, _, _ := strings.Cut(addr, "@")
	if !strings.HasPrefix(addr, "support+T-500001.n1234.e") || !strings.HasSuffix(addr, "@helpdesk.example.com") || len(local) > 64 {
		t.Fatalf("signed address %q (local part of %d octets; at most 64)", addr, len(local))
	}
	mac := addr[strings.LastIndex(local, ".")+1 : len(local)]
	if len(mac) < 16 {
		t.Errorf("a MAC of %d characters carries %d bits, want at least 80", len(mac), len(mac)*5)
	}
	for _, tc := range []struct {
		name, addr string
		at         time.Time
		signed     bool
		err        error
	}{
		{"TheSignedAddressVerifies", addr, now, true, nil},
		{"InAnyCase", strings.ToUpper(addr), now, true, nil},
		{"AnotherNotificationDoesNot", strings.Replace(addr, ".n1234.", ".n1235.", 1), now, true, mail.ErrBadSignature},
		{"AnotherTicketDoesNot", strings.Replace(addr, "T-500001", "T-500002", 1), now, true, mail.ErrBadSignature},
		{"ALaterExpiryDoesNot", strings.Replace(addr, ".e", ".e9", 1), now, true, mail.ErrBadSignature},
		{"ItExpires", addr, expires.Add(25 * time.Hour), true, mail.ErrExpired},
		{"APlainPlusAddressIsNotSigned", "support+T-500001@helpdesk.example.com", now, false, nil},
		{"TheFormerFormIsNotSigned", "support+T-500001.alice.abcdefghij@helpdesk.example.com", now, false, nil},
		// Which addresses are ours is the caller's to say; the MAC covers what an address names.
		{"AtAnotherSupportAddress", r.SignAt("billing@example.org", "T-500001", 1234, expires), now, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply, signed, err := r.Parse(tc.addr, tc.at)
			if signed != tc.signed || !errors.Is(err, tc.err) || (tc.signed && tc.err == nil && (reply.TicketID != "T-500001" || reply.Notification != 1234)) {
				t.Errorf("Parse(%q) = %+v %v %v", tc.addr, reply, signed, err)
			}
		})
	}
	t.Run("APreviousSecretStillVerifiesAfterARotation", func(t *testing.T) {
		rotated := &mail.ReplyAddresses{Local: "support", Domain: "helpdesk.example.com", Secret: []byte("the next secret, also long"),
			Previous: [][]byte{r.Secret}}
		if _, signed, err := rotated.Parse(addr, now); !signed || err != nil {
			t.Errorf("an address signed before the rotation: %v %v", signed, err)
		}
		forgotten := &mail.ReplyAddresses{Local: "support", Domain: "helpdesk.example.com", Secret: []byte("the next secret, also long")}
		if _, _, err := forgotten.Parse(addr, now); !errors.Is(err, mail.ErrBadSignature) {
			t.Errorf("without the previous secret: %v", err)
		}
	})
	t.Run("ABounceAddressNamesItsMessage", func(t *testing.T) {
		b := r.BounceAddress(77)
		if id, ok, err := r.ParseBounce(b); !ok || err != nil || id != 77 {
			t.Errorf("ParseBounce(%q) = %d %v %v", b, id, ok, err)
		}
		if _, ok, err := r.ParseBounce(strings.Replace(b, "+77.", "+78.", 1)); !ok || !errors.Is(err, mail.ErrBadSignature) {
			t.Errorf("another message's number: %v %v", ok, err)
		}
		if _, ok, _ := r.ParseBounce("support@helpdesk.example.com"); ok {
			t.Error("the support address is no bounce address")
		}
		at := r.BounceAddressAt("billing@example.org", 77)
		if id, ok, err := r.ParseBounce(at); at != "billing+bounces.77."+strings.Split(strings.Split(b, "@")[0], ".")[1]+"@example.org" || !ok || err != nil || id != 77 {
			t.Errorf("the plus form %q: %d %v %v", at, id, ok, err)
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
		// Gmail in other languages: the attribution names the address and
		// ends in a colon, the quote under it.
		"DutchGmail":      {"Gedaan.\n\nOp zo 6 dec. 2026 om 17:20 schreef Support <support@x.example>:\n\n> oud", "Gedaan."},
		"ItalianGmail":    {"Fatto.\n\nIl giorno dom 6 dic 2026 alle ore 17:20 Support <support@x.example> ha scritto:\n\n> vecchio", "Fatto."},
		"PortugueseGmail": {"Feito.\n\nEm dom., 6 de dez. de 2026 às 17:20, Support <support@x.example> escreveu:\n\n> antigo", "Feito."},
		"PolishGmail":     {"Zrobione.\n\nW dniu 6.12.2026 o 17:20 Support <support@x.example> napisał(a):\n\n> stare", "Zrobione."},
		"DutchAppleMail":  {"Gedaan.\n\nOp 6 dec 2026 om 17:20 heeft Support <support@x.example> het volgende geschreven:\n\n> oud", "Gedaan."},
		"DutchBottomPost": {"Op 06-12-2026 om 17:20 schreef Support <support@x.example>:\n> oud\n\nMijn antwoord.", "Mijn antwoord."},
		// Outlook's header block in other languages.
		"SpanishOutlook": {"Hecho.\n\nDe: Support <support@x.example>\nEnviado: martes\nPara: Dana\nAsunto: x\n\nviejo", "Hecho."},
		"DutchOutlook":   {"Gedaan.\n\nVan: Support <support@x.example>\nVerzonden: dinsdag\nAan: Dana\nOnderwerp: x\n\noud", "Gedaan."},
		"ItalianOutlook": {"Fatto.\n\nDa: Support <support@x.example>\nInviato: martedì\nA: Dana\nOggetto: x\n\nvecchio", "Fatto."},
		"PolishOutlook":  {"Zrobione.\n\nOd: Support <support@x.example>\nWysłano: wtorek\nDo: Dana\nTemat: x\n\nstare", "Zrobione."},
		// A colon after an address is text when no quote follows it.
		"AnAddressAndAColonWithoutAQuoteIsText": {"Write to billing@x.example:\nthey answer within a day.", "Write to billing@x.example:\nthey answer within a day."},
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
