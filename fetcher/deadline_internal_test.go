package fetcher

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// countingConn counts the reads that reach the connection.
type countingConn struct {
	net.Conn
	reads atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(b)
}

func TestAReadPastItsDeadlineEndsTheConnectionsReading(t *testing.T) {
	t.Parallel()
	client, server := net.Pipe()
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	counted := &countingConn{Conn: client}
	c := &deadlineConn{Conn: counted, timeout: 10 * time.Millisecond}

	buf := make([]byte, 16)
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("first read: %v, want the deadline's error", err)
	}
	// go-imap's decoder reads again after an error, once for each token it
	// would have taken; each read must fail at once, not wait out a fresh
	// deadline on a server that went silent.
	for i := range 3 {
		if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read %d after the timeout: %v, want the deadline's error", i+2, err)
		}
	}
	if n := counted.reads.Load(); n != 1 {
		t.Errorf("%d reads reached the connection, want 1: each read after the timeout waited for another", n)
	}
}
