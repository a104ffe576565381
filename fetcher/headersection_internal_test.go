package fetcher

import (
	"io"
	"strings"
	"testing"
)

func TestHeaderSectionEndsAtTheFirstEmptyLine(t *testing.T) {
	t.Parallel()
	// Exactly bufio's buffer before its CRLF: the line comes in two
	// pieces, the second a bare CRLF that does not end the section.
	long := "X-Long: " + strings.Repeat("a", 4096-len("X-Long: ")) + "\r\n"
	for _, tc := range []struct {
		name, in, want string
		max            int64
	}{
		{"CRLF", "From: a@example.com\r\nSubject: hi\r\n\r\nbody\r\n", "From: a@example.com\r\nSubject: hi\r\n\r\n", 1 << 20},
		{"BareLF", "From: a@example.com\n\nbody\n", "From: a@example.com\n\n", 1 << 20},
		{"ALineLongerThanTheBuffer", long + "\r\nbody\r\n", long + "\r\n", 1 << 20},
		{"NoEmptyLineIsCutAtTheLimit", strings.Repeat("X-A: b\r\n", 100), strings.Repeat("X-A: b\r\n", 100)[:50], 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := io.ReadAll(headerSection(strings.NewReader(tc.in), tc.max))
			if err != nil || string(got) != tc.want {
				t.Errorf("got %d bytes ending %q (%v), want %d ending %q", len(got), tail(string(got)), err, len(tc.want), tail(tc.want))
			}
		})
	}
}

func tail(s string) string { return s[max(0, len(s)-20):] }
