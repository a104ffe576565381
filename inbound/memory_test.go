// The race detector slows the parsing of 29 MiB tenfold: this runs
// without it, as `make test` runs it (the unit target's second step).

//go:build !race

package inbound_test

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/inbound"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
)

// nested is a mail whose parts nest depth deep (multipart in multipart,
// or a forwarded message in a forwarded message), a file of fileBytes
// at the bottom.
func nested(depth, fileBytes int, forwarded bool) []byte {
	file := make([]byte, fileBytes)
	_, _ = rand.Read(file)
	var encoded strings.Builder
	b64 := base64.StdEncoding.EncodeToString(file)
	for len(b64) > 76 {
		encoded.WriteString(b64[:76] + "\r\n")
		b64 = b64[76:]
	}
	encoded.WriteString(b64 + "\r\n")
	body := "Content-Type: multipart/mixed; boundary=\"b0\"\r\n\r\n--b0\r\nContent-Type: text/plain\r\n\r\nThe report is attached.\r\n" +
		"--b0\r\nContent-Type: application/pdf; name=\"report.pdf\"\r\nContent-Disposition: attachment; filename=\"report.pdf\"\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\n" + encoded.String() + "--b0--\r\n"
	for level := 1; level < depth; level++ {
		if forwarded {
			body = fmt.Sprintf("Content-Type: multipart/mixed; boundary=\"f%d\"\r\n\r\n--f%d\r\nContent-Type: text/plain\r\n\r\nSee below.\r\n"+
				"--f%d\r\nContent-Type: message/rfc822\r\n\r\nFrom: Level %d <level%d@example.com>\r\nSubject: Level %d\r\n%s--f%d--\r\n",
				level, level, level, level, level, level, body, level)
		} else {
			body = fmt.Sprintf("Content-Type: multipart/mixed; boundary=\"b%d\"\r\n\r\n--b%d\r\n%s--b%d--\r\n", level, level, body, level)
		}
	}
	return []byte("From: Ada Lovelace <ada.lovelace@example.com>\r\nTo: support@helpdesk.example.com\r\nSubject: The report\r\n" +
		"Message-ID: <nested." + fmt.Sprint(forwarded) + "@example.com>\r\nMIME-Version: 1.0\r\n" + body)
}

// heapPeak samples the heap's live and unswept objects until stop, and
// returns the most it saw.
func heapPeak(stop <-chan struct{}) func() uint64 {
	var peak atomic.Uint64
	var done sync.WaitGroup
	done.Add(1)
	go func() {
		defer done.Done()
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	return func() uint64 { done.Wait(); return peak.Load() }
}

// TestInboundMemory runs alone (not in parallel): it reads the heap of the
// whole process.
func TestInboundMemory(t *testing.T) {
	for _, c := range []struct {
		name      string
		file      int
		forwarded bool
	}{
		{"AFileTooLargeToKeepInMultiparts", 21 << 20, false},
		{"AFileKeptInMultiparts", 19 << 20, false},
		{"AFileInForwardedMessages", 21 << 20, true},
	} {
		raw, forwarded, name := nested(10, c.file, c.forwarded), c.forwarded, c.name
		t.Run(name+"TenDeepCostsAtMostThreeTimesItsSize", func(t *testing.T) {
			b := setup(t)
			b.listen(t, inbound.ServerConfig{Domain: "helpdesk.example.com", MaxBytes: 40 << 20})
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			stop := make(chan struct{})
			peak := heapPeak(stop)
			err := smtptest.Send(b.addr, "ada.lovelace@example.com", "support@helpdesk.example.com", raw)
			close(stop)
			if err != nil {
				t.Fatal(err)
			}
			grew := peak() - before.HeapAlloc
			t.Logf("a %.1f MiB message: the heap grew by %.1f MiB at most (%.2f×)", mib(len(raw)), mib(int(grew)), float64(grew)/float64(len(raw)))
			if grew > 3*uint64(len(raw)) {
				t.Errorf("a %.1f MiB message took %.1f MiB of heap, want at most 3× its size", mib(len(raw)), mib(int(grew)))
			}
			// The file, or the outermost forwarded message, is listed, kept
			// if it is within the 20 MiB bound; a forwarded message inside
			// another is not kept again.
			want, wantKept := "report.pdf", c.file <= 20<<20
			if forwarded {
				want = "Level 9.eml"
			}
			var listed, kept int
			_ = b.Pool.QueryRow(b.Ctx, `SELECT count(*), count(sha256) FROM attachments WHERE filename = $1`, want).Scan(&listed, &kept)
			if listed != 1 || (kept == 1) != wantKept {
				t.Errorf("%s listed %d times, kept %d", want, listed, kept)
			}
		})
	}
}

func mib(n int) float64 { return float64(n) / (1 << 20) }
