//go:build browser

package console_test

// The console in a real Chromium (Debian's package; .ci/run installs it),
// driven by chromedp: `make browser`. With HELPDESK_SCREENSHOTS=DIR the
// test also writes the queue and a ticket there (`make screenshots`).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium finds the browser, or fails the test saying how to get one.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("HELPDESK_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Fatal("no Chromium found: install Debian's package (apt-get install chromium), or set HELPDESK_CHROMIUM to the browser")
	return ""
}

// browser is one Chromium with a window of its own (its own cookies).
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1280, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// read runs an action that answers something.
func read[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// byLabel finds a control by its label's text, as a person would.
func byLabel(label string) string {
	return fmt.Sprintf(`//*[@id=//label[normalize-space(text())=%q]/@for]`, label)
}

// button finds a button by its text.
func button(text string) string {
	return fmt.Sprintf(`//button[normalize-space(.)=%q]`, text)
}

func (w *world) signInBrowser(t *testing.T, ctx context.Context, agent string) {
	t.Helper()
	run(t, ctx, "sign in",
		chromedp.Navigate(w.url+"/ui/login"),
		chromedp.SendKeys(byLabel("API key"), w.keys[agent]),
		chromedp.Click(button("Sign in")),
		chromedp.WaitVisible(button("Sign out")),
	)
}

// unnamedControls lists the page's controls without an accessible name:
// a label, aria-label, aria-labelledby, or a button's text.
const unnamedControls = `Array.from(document.querySelectorAll('input:not([type=hidden]), select, textarea, button, a[href]')).filter(el => {
  const byLabels = el.labels && Array.from(el.labels).some(l => l.textContent.trim() !== '');
  const byAria = (el.getAttribute('aria-label') || '').trim() !== '' ||
    (el.getAttribute('aria-labelledby') || '').split(' ').some(id => id && document.getElementById(id) && document.getElementById(id).textContent.trim() !== '');
  const byText = (el.tagName === 'BUTTON' || el.tagName === 'A') && el.textContent.trim() !== '';
  return !(byLabels || byAria || byText);
}).map(el => el.outerHTML.slice(0, 120))`

func requireNamed(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	unnamed := read(t, ctx, "accessibility check of "+page, chromedp.Evaluate[[]string](unnamedControls))
	if len(unnamed) > 0 {
		t.Errorf("%s: controls without an accessible name: %v", page, unnamed)
	}
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("HELPDESK_SCREENSHOTS")
	if dir == "" {
		return
	}
	run(t, ctx, "viewport", chromedp.EmulateViewport(1280, 900))
	png := read(t, ctx, "screenshot", chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestBrowserAgentAnswersFromTheConsole(t *testing.T) {
	w := newWorld(t)
	// A few more tickets, so that the queue in the screenshots is a queue.
	for _, subject := range []string{"Invoice shows the wrong VAT number", "Card declined at checkout", "Refund for a returned kettle",
		"Two invoices for one order", "Change the billing address"} {
		w.OpenTicket(t, w.queue, subject, "Hello, "+strings.ToLower(subject)+". Can you help?")
	}
	if _, err := w.Pool.Exec(w.Ctx, `UPDATE tickets SET team = 'billing'`); err != nil {
		t.Fatal(err)
	}
	alice := browser(t)
	w.signInBrowser(t, alice, "alice")
	requireNamed(t, alice, "the queue")

	// Unassigned, then the ticket, then take it.
	run(t, alice, "open Unassigned and the ticket",
		chromedp.Click(`//nav[@aria-label="Queues"]//a[starts-with(normalize-space(.), "Unassigned")]`),
		chromedp.WaitVisible(`//a[normalize-space(.)="`+w.ticket+`"]`),
	)
	screenshot(t, alice, "console-queue.png")
	run(t, alice, "take it",
		chromedp.Click(`//a[normalize-space(.)="`+w.ticket+`"]`),
		chromedp.WaitVisible(byLabel("Reply")),
		chromedp.Click(button("Take it")),
		chromedp.WaitVisible(`//p[@role="status"][contains(., "The ticket is yours.")]`),
	)
	requireNamed(t, alice, "the ticket")
	draft := read(t, alice, "read the draft", chromedp.Value(byLabel("Reply")))
	if strings.TrimSpace(draft) == "" {
		t.Fatal("the reply box does not hold the AI draft")
	}
	screenshot(t, alice, "console-ticket.png")

	// Edit the draft and send it; then a note.
	edited := "We refunded the second charge today. " + draft
	run(t, alice, "send the edited draft",
		chromedp.SetValue(byLabel("Reply"), edited),
		chromedp.Click(button("Send reply")),
		chromedp.WaitVisible(`//p[@role="status"][contains(., "Reply sent.")]`),
		chromedp.SendKeys(byLabel("Note"), "Refund id R-991 in the payment system."),
		chromedp.Click(button("Add note")),
		chromedp.WaitVisible(`//p[@role="status"][contains(., "Note added.")]`),
		chromedp.WaitVisible(`//li[contains(@class, "note")]//div[contains(., "R-991")]`),
	)
	w.awaitMail(t, "We refunded the second charge today.")
	for _, d := range w.smtp.Deliveries() {
		if strings.Contains(string(d.Raw), "R-991") {
			t.Error("the note was mailed")
		}
	}

	// Two agents answer the same ticket: the second is refused and keeps
	// its text; the customer gets one reply.
	bilal := browser(t)
	w.signInBrowser(t, bilal, "bilal")
	for _, ctx := range []context.Context{alice, bilal} {
		run(t, ctx, "open the ticket", chromedp.Navigate(w.url+"/ui/tickets/"+w.ticket), chromedp.WaitVisible(byLabel("Reply")))
	}
	run(t, alice, "alice answers first",
		chromedp.SetValue(byLabel("Reply"), "Alice here: anything else?"),
		chromedp.Click(button("Send reply")),
		chromedp.WaitVisible(`//p[@role="status"][contains(., "Reply sent.")]`),
	)
	run(t, bilal, "bilal answers second",
		chromedp.SetValue(byLabel("Reply"), "Bilal here: all done."),
		chromedp.Click(button("Send reply")),
		chromedp.WaitVisible(`//p[@role="alert"]`),
	)
	problem := read(t, bilal, "the refusal", chromedp.Text(`//p[@role="alert"]`))
	kept := read(t, bilal, "the kept text", chromedp.Value(byLabel("Reply")))
	if !strings.Contains(problem, "not sent") || kept != "Bilal here: all done." {
		t.Errorf("bilal's refusal %q with the box holding %q", problem, kept)
	}
	w.awaitMail(t, "Alice here: anything else?")
	for _, d := range w.smtp.Deliveries() {
		if strings.Contains(string(d.Raw), "Bilal here") {
			t.Error("the second answer was mailed")
		}
	}
}

// awaitMail waits until a mail with the text reaches the relay.
func (w *world) awaitMail(t *testing.T, text string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		for _, d := range w.smtp.Deliveries() {
			if strings.Contains(strings.ReplaceAll(string(d.Raw), "=\r\n", ""), text) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no mail with %q within 30s", text)
		}
	}
}

// TestBrowserQueueOfAThousandTickets measures what a queue of 1,000 open
// tickets costs the browser: the page's bytes and its time until the
// document is parsed and loaded, as Chromium reports them (headless
// Chromium reports no paint; logged, no wall-clock bound).
func TestBrowserQueueOfAThousandTickets(t *testing.T) {
	w := newWorld(t)
	if _, err := w.Pool.Exec(w.Ctx, `INSERT INTO tickets (id, customer_id, subject, status, team, last_customer_message_at)
		SELECT 'T-' || (700000 + g), 'C-0001', 'Question number ' || g || ' about an invoice', 'open', 'billing', now() - g * interval '1 minute'
		FROM generate_series(1, 1000) g`); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	w.signInBrowser(t, ctx, "alice")
	run(t, ctx, "open All open", chromedp.Navigate(w.url+"/ui/?view=open"), chromedp.WaitVisible(`//a[@rel="next"]`))
	rows := read(t, ctx, "count rows", chromedp.Evaluate[int](`document.querySelectorAll("table.queue tbody tr").length`))
	if rows != 50 {
		t.Errorf("%d rows on the first page, want 50", rows)
	}
	timing := read(t, ctx, "timing", chromedp.Evaluate[map[string]float64](`(() => {
  const n = performance.getEntriesByType("navigation")[0];
  const res = performance.getEntriesByType("resource").reduce((s, r) => s + r.encodedBodySize, 0);
  return {html: n.encodedBodySize, assets: res, response: n.responseEnd - n.startTime,
    dom: n.domContentLoadedEventEnd - n.startTime, loaded: n.loadEventEnd - n.startTime};
})()`))
	t.Logf("queue of 1,000 open tickets, first page of 50: HTML %.0f bytes, assets %.0f bytes; response %.0f ms, DOMContentLoaded %.0f ms, load %.0f ms",
		timing["html"], timing["assets"], timing["response"], timing["dom"], timing["loaded"])
	// j moves to the next ticket, Enter opens it.
	run(t, ctx, "keys", chromedp.KeyEvent("j"), chromedp.KeyEvent("j"), chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(byLabel("Reply")))
	title := read(t, ctx, "title", chromedp.Title())
	if !strings.Contains(title, "Question number 1 ") { // the second row: the world's own ticket is newest
		t.Errorf("j, j, Enter opened %q, want the second row", title)
	}
}
