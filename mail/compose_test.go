package mail_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	gomail "github.com/emersion/go-message/mail"

	"github.com/helpdesk-dev/helpdesk/mail"
)

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("<%02d.x7kq2m4n5p6r7s8t9v2w3y4z5a@helpdesk.example.com>", i)
	}
	return out
}

func TestReferences(t *testing.T) {
	t.Parallel()

	t.Run("AShortTicketKeepsEveryIDInOrder", func(t *testing.T) {
		t.Parallel()
		in := ids(5)
		if got := mail.References(in); strings.Join(got, " ") != strings.Join(in, " ") {
			t.Errorf("got %v", got)
		}
	})

	t.Run("ALongTicketKeepsTheRootAndTheNewestUnder998", func(t *testing.T) {
		t.Parallel()
		in := ids(300)
		got := mail.References(in)
		if got[0] != in[0] || got[len(got)-1] != in[299] || got[len(got)-2] != in[298] {
			t.Errorf("kept %v…%v, want the root and the newest", got[0], got[len(got)-1])
		}
		if line := "References: " + strings.Join(got, " "); len(line) > mail.MaxHeaderLine {
			t.Errorf("unfolded line is %d characters", len(line))
		}
		if len(got) < 10 {
			t.Errorf("kept only %d ids; the budget allows more", len(got))
		}
	})

	t.Run("DuplicatesAndBlanksAreDropped", func(t *testing.T) {
		t.Parallel()
		if got := mail.References([]string{"<a@x>", "", "<a@x>", "<b@x>"}); strings.Join(got, " ") != "<a@x> <b@x>" {
			t.Errorf("got %v", got)
		}
	})
}

func outgoing() *mail.Outgoing {
	return &mail.Outgoing{
		From:        &mail.Address{Name: "Example Support", Address: "support@helpdesk.example.com"},
		To:          []*mail.Address{{Name: "Ada Lovelace", Address: "ada@example.com"}},
		Cc:          []*mail.Address{{Address: "bram@example.com"}},
		Subject:     "Charged twice — invoice 1042",
		TicketID:    "T-500001",
		Date:        time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC),
		MessageID:   "<reply1@helpdesk.example.com>",
		InReplyTo:   "<T-500001.root@helpdesk.example.com>",
		References:  []string{"<T-500001.root@helpdesk.example.com>"},
		ThreadRoot:  "<T-500001.root@helpdesk.example.com>",
		ThreadStart: time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC),
		Body:        "Hello Ada,\n\nwe refunded the second charge.\n\nBest regards",
	}
}

func TestRender(t *testing.T) {
	t.Parallel()

	t.Run("TheMailParsesBackWithItsThreadHeaders", func(t *testing.T) {
		t.Parallel()
		raw, err := outgoing().Render()
		if err != nil {
			t.Fatal(err)
		}
		r, err := gomail.CreateReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		id, _ := r.Header.MessageID()
		irt, _ := r.Header.MsgIDList("In-Reply-To")
		refs, _ := r.Header.MsgIDList("References")
		subj, _ := r.Header.Subject()
		if id != "reply1@helpdesk.example.com" || len(irt) != 1 || irt[0] != "T-500001.root@helpdesk.example.com" || len(refs) != 1 {
			t.Errorf("Message-ID %q, In-Reply-To %v, References %v", id, irt, refs)
		}
		if subj != "Re: Charged twice — invoice 1042 [#T-500001]" {
			t.Errorf("subject %q", subj)
		}
		if r.Header.Get("Thread-Index") == "" || r.Header.Get("Thread-Topic") == "" {
			t.Errorf("no Outlook thread headers")
		}
	})

	t.Run("RenderingTwiceGivesTheSameBytes", func(t *testing.T) {
		t.Parallel()
		a, _ := outgoing().Render()
		b, _ := outgoing().Render()
		if !bytes.Equal(a, b) {
			t.Errorf("two renders differ")
		}
	})

	t.Run("CRLFInTheSubjectNeverReachesAHeader", func(t *testing.T) {
		t.Parallel()
		o := outgoing()
		o.Subject = "Hi\r\nBcc: victim@example.com"
		raw, err := o.Render()
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte("\r\nBcc:")) {
			t.Errorf("the subject injected a header:\n%s", raw)
		}
	})

	t.Run("ItsOwnIDInReferencesIsRefused", func(t *testing.T) {
		t.Parallel()
		o := outgoing()
		o.References = append(o.References, o.MessageID)
		if _, err := o.Render(); err == nil {
			t.Error("rendered a message that cites itself")
		}
	})

	t.Run("EveryHeaderLineOfALongThreadStaysUnder998", func(t *testing.T) {
		t.Parallel()
		o := outgoing()
		o.References = mail.References(ids(300))
		raw, err := o.Render()
		if err != nil {
			t.Fatal(err)
		}
		head, _, _ := bytes.Cut(raw, []byte("\r\n\r\n"))
		for _, line := range strings.Split(string(head), "\r\n") {
			if len(line) > mail.MaxHeaderLine {
				t.Errorf("a header line of %d characters", len(line))
			}
		}
	})
}

func TestParseAddress(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "not an address", "a@b.c\r\nBcc: x@y.z", "Ada\n <a@b.c>", "a@b.c, d@e.f"} {
		if _, err := mail.ParseAddress(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for in, want := range map[string]string{
		"Ada Lovelace <ada@example.com>": "ada@example.com",
		// RFC 6530: the local part as written, the domain as DNS looks it up.
		"Jörg <jörg@bücher.de>": "jörg@xn--bcher-kva.de",
		"jörg@xn--bcher-kva.de": "jörg@xn--bcher-kva.de",
		// The domain follows the last @: a quoted local part may hold one
		// (net/mail gives it back unquoted).
		`"jörg@home"@bücher.de`: "jörg@home@xn--bcher-kva.de",
	} {
		if a, err := mail.ParseAddress(in); err != nil || a.Address != want {
			t.Errorf("%q: %v %v, want %s", in, a, err, want)
		}
	}
	if a, err := mail.ParseAddress("ada@b\u200dücher.de"); err == nil {
		t.Errorf("a domain with no ASCII form: %v accepted", a)
	}
}

func TestAddrSpecQuotesWhatIsKeptUnquoted(t *testing.T) {
	t.Parallel()
	for kept, want := range map[string]string{
		"ada@example.com":        "ada@example.com",
		"ada.l+x@example.com":    "ada.l+x@example.com",
		"jörg@xn--bcher-kva.de":  "jörg@xn--bcher-kva.de",
		"john doe@example.com":   `"john doe"@example.com`,
		`o"neil@example.com`:     `"o\"neil"@example.com`,
		`back\slash@example.com`: `"back\\slash"@example.com`,
		".ada@example.com":       `".ada"@example.com`,
		"a..b@example.com":       `"a..b"@example.com`,
		"jane@home@example.com":  `"jane@home"@example.com`,
	} {
		got := mail.AddrSpec(kept)
		if got != want {
			t.Errorf("AddrSpec(%q) = %s, want %s", kept, got, want)
		}
		// What it writes parses back to what is kept.
		if a, err := mail.ParseAddress(got); err != nil || a.Address != kept {
			t.Errorf("ParseAddress(%s) = %v, %v; want %q", got, a, err, kept)
		}
	}
}

func TestAddrSpecKeepsWhatNoHeaderMayHold(t *testing.T) {
	t.Parallel()
	// net/mail's own quoting drops CR and LF, which would turn a stored
	// header injection into a mangled address that is sent; kept, they
	// are refused.
	kept := "x@example.com\r\nBcc: victim@example.com"
	if a, err := mail.ParseAddress(mail.AddrSpec(kept)); err == nil {
		t.Errorf("AddrSpec(%q) parses as %v", kept, a)
	}
}

func TestThreadIndexTellsTimesApart(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 3, 10, 15, 0, 0, time.UTC)
	a := mail.ThreadIndex("<root@example.com>", start, start.Add(time.Second))
	b := mail.ThreadIndex("<root@example.com>", start, start.Add(2*time.Second))
	if a == b {
		t.Errorf("two replies a second apart carry the same Thread-Index %s", a)
	}
	c := mail.ThreadIndex("<root@example.com>", start.Add(time.Second), start.Add(2*time.Second))
	if a[:8] == c[:8] {
		t.Errorf("two threads started a second apart share the header's time: %s and %s", a, c)
	}
	// The header's time is FILETIME: 100ns units since 1601, big-endian.
	raw, _ := base64.StdEncoding.DecodeString(a)
	var ft [8]byte
	copy(ft[:6], raw[:6])
	got := time.Unix(int64(binary.BigEndian.Uint64(ft[:])/10_000_000)-11644473600, 0).UTC()
	if d := got.Sub(start); d < -time.Second || d > time.Second {
		t.Errorf("the header's time reads %s, want about %s", got, start)
	}
}
