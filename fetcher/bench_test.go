package fetcher_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/fetcher/imaptest"
	"github.com/helpdesk-dev/helpdesk/inbound"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
)

// BenchmarkFetchAgainstTheListener files the same 200 mails fetched from
// a mailbox and sent to the SMTP listener, one after another each way, in
// the same run: imap_msgs/s, smtp_msgs/s and their ratio.
func BenchmarkFetchAgainstTheListener(b *testing.B) {
	const mails = 200
	raw := func(way string, n int) []byte {
		return []byte(fmt.Sprintf("From: Customer %d <c%d@example.net>\r\nTo: support@example.org\r\nSubject: Question %d\r\n"+
			"Message-ID: <%s.%d.%d@example.net>\r\n\r\nQuestion number %d, with a few words more to read.\r\n", n, n, n, way, n, time.Now().UnixNano(), n))
	}
	var imapRate, smtpRate float64
	for i := 0; i < b.N; i++ {
		w := newWorld(b)
		s := imaptest.Start(b, imaptest.Options{User: "support@example.org", Password: "pw"})
		for n := range mails {
			_, _ = s.Append("INBOX", raw("imap", n))
		}
		start := time.Now()
		w.mailbox(b, "support", s, "pw", "support@example.org")
		for s.Count("Processed") < mails {
			time.Sleep(time.Millisecond)
		}
		imapRate += mails / time.Since(start).Seconds()

		rc := inbound.NewReceiver(w.desk, inbound.ReceiverConfig{Logger: jobstest.Logger()})
		srv := inbound.NewServer(rc, inbound.ServerConfig{Domain: "example.org"})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		go func() { _ = srv.Serve(ln) }()
		start = time.Now()
		for n := range mails {
			if err := smtptest.Send(ln.Addr().String(), "c@example.net", "support@helpdesk.example.com", raw("smtp", n)); err != nil {
				b.Fatal(err)
			}
		}
		smtpRate += mails / time.Since(start).Seconds()
		_ = srv.Close()
	}
	b.ReportMetric(imapRate/float64(b.N), "imap_msgs/s")
	b.ReportMetric(smtpRate/float64(b.N), "smtp_msgs/s")
	b.ReportMetric(imapRate/smtpRate, "imap/smtp")
}
