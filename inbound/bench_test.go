package inbound_test

import (
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/helpdesk-dev/helpdesk/inbound"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/store"
)

type discardSession struct{}

func (discardSession) Mail(string, *smtp.MailOptions) error { return nil }
func (discardSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (discardSession) Data(r io.Reader) error               { _, err := io.Copy(io.Discard, r); return err }
func (discardSession) Reset()                               {}
func (discardSession) Logout() error                        { return nil }

// BenchmarkInbound measures inbound messages per second over SMTP on
// loopback (parse, match, commit a new ticket with its triage job), next to
// the same go-smtp server whose backend discards the message, in the same run.
func BenchmarkInbound(b *testing.B) {
	const senders = 10
	raw := func(i int64) []byte {
		return []byte(fmt.Sprintf("From: Customer %d <c%d@example.com>\r\nTo: support@helpdesk.example.com\r\n"+
			"Subject: =?UTF-8?Q?Late_parcel_=E2=80=94_order_%d?=\r\nMessage-ID: <bench.%d@mail.example.com>\r\n"+
			"Content-Type: text/plain; charset=utf-8\r\n\r\nMy parcel is late. Order %d.\r\n", i, i%50, i, i, i))
	}
	run := func(b *testing.B, srv interface {
		Serve(net.Listener) error
		Close() error
	}) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		var next atomic.Int64
		var wg sync.WaitGroup
		b.ResetTimer()
		begin := time.Now()
		for range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
					if err := smtptest.Send(ln.Addr().String(), "c@example.com", "support@helpdesk.example.com", raw(i)); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(begin).Seconds(), "msgs/s")
	}

	b.Run("DiscardBaseline", func(b *testing.B) {
		run(b, smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return discardSession{}, nil })))
	})

	b.Run("Receive", func(b *testing.B) {
		bundle := jobstest.Setup(b)
		// The desk takes mail only for its support domains.
		bundle.DeskConfig.MailDomain = "helpdesk.example.com"
		for i := range 50 {
			if err := bundle.Store.UpsertCustomer(bundle.Ctx, &store.InsertCustomerParams{
				ID: fmt.Sprintf("C-%04d", i+1), Name: "Customer", Email: fmt.Sprintf("c%d@example.com", i)}); err != nil {
				b.Fatal(err)
			}
		}
		rc := inbound.NewReceiver(bundle.Desk(bundle.NewQueue(b)), inbound.ReceiverConfig{Logger: jobstest.Logger()})
		run(b, inbound.NewServer(rc, inbound.ServerConfig{Domain: "helpdesk.example.com"}))
		var n int
		_ = bundle.Pool.QueryRow(bundle.Ctx, `SELECT count(*) FROM tickets`).Scan(&n)
		if n != b.N {
			b.Errorf("%d tickets, want %d", n, b.N)
		}
	})
}
