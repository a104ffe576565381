package fetcher

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestByeIsTheServersLastLineOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, read, want string
	}{
		{"ABye", "* OK Still here\r\n* BYE Session invalidated - AccessTokenExpired\r\n", "Session invalidated - AccessTokenExpired"},
		{"AByeAlone", "* BYE Shutting down\r\n", "Shutting down"},
		{"ByeAndThenMore", "* BYE going\r\nA1 OK done\r\n", ""},
		{"ALineCutOff", "* BYE half a li", ""},
		{"ALiteralsBytesLongerThanTheTail", strings.Repeat("x", 600) + "* BYE not the server's\r\n", ""},
		{"ControlBytesAreShownAsQuestionMarks", "* BYE a\x1bb\r\n", "a?b"},
		{"NothingRead", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client, server := net.Pipe()
			go func() {
				// In pieces: the tail is kept across reads.
				for rest := tc.read; rest != ""; rest = rest[min(len(rest), 7):] {
					_, _ = server.Write([]byte(rest[:min(len(rest), 7)]))
				}
				_ = server.Close()
			}()
			c := &deadlineConn{Conn: client, timeout: time.Minute}
			if _, err := io.Copy(io.Discard, c); err != nil {
				t.Fatal(err)
			}
			if got := c.bye(); got != tc.want {
				t.Errorf("bye after %q = %q, want %q", tc.read, got, tc.want)
			}
		})
	}
}
