package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/api"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail/mailtest"
	"github.com/helpdesk-dev/helpdesk/store"
)

// setupAttachments is setupReplies with a small attachment limit.
func setupAttachments(t *testing.T, maxBytes int64) *replyBundle {
	t.Helper()
	b := jobstest.Setup(t)
	srv := b.WithSMTP(t)
	b.DeskConfig.AttachmentMaxBytes = maxBytes
	ab := serveAPI(t, b, b.StartQueue(t), 0)
	ticketID, _ := b.OpenTicket(t, ab.queue, "Charged twice", "My card was charged twice.")
	return &replyBundle{apiBundle: ab, smtp: srv, ticketID: ticketID, customer: ab.key(t, "customer:C-0001")}
}

// upload posts one file as multipart/form-data under field.
func (b *replyBundle) upload(t *testing.T, key, field, filename, contentType string, content []byte, idemKey string) (int, http.Header, map[string]any) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", mime.FormatMediaType("form-data", map[string]string{"name": field, "filename": filename}))
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	w, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write(content)
	_ = mw.Close()
	header := http.Header{"Content-Type": {mw.FormDataContentType()}}
	if idemKey != "" {
		header.Set(api.HeaderIdempotencyKey, idemKey)
	}
	return b.doWith(t, key, "POST", "/v1/attachments", body.Bytes(), header)
}

// download gets an attachment as key: status, headers, bytes.
func (b *replyBundle) download(t *testing.T, key, path string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", b.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw
}

func (b *replyBundle) attachmentRows(t *testing.T) [2]int {
	t.Helper()
	var n [2]int
	if err := b.Pool.QueryRow(b.Ctx, `SELECT (SELECT count(*) FROM attachments), (SELECT count(*) FROM attachment_contents)`).Scan(&n[0], &n[1]); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAttachments(t *testing.T) {
	t.Parallel()
	pdf := append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte{0, 1, 2, 0xff, '\r', '\n'}, 5000)...)
	const name = "Rechnung März 2026.pdf"

	t.Run("AnUploadSentWithAReplyArrivesAsAFileAndIsListed", func(t *testing.T) {
		t.Parallel()
		b := setupAttachments(t, 0)
		status, _, agent := b.do(t, b.agent, "PATCH", "/v1/agents/me", []byte(`{"signature": "Alice Example\nBilling team"}`), "")
		if status != 200 || agent["signature"] != "Alice Example\nBilling team" {
			t.Fatalf("signature: %d %v", status, agent)
		}
		status, _, up := b.upload(t, b.agent, "file", name, "application/pdf", pdf, "")
		if status != 201 || up["filename"] != name || up["content_type"] != "application/pdf" || up["size"] != float64(len(pdf)) {
			t.Fatalf("upload: %d %v", status, up)
		}
		id := int64(up["attachment_id"].(float64))
		status, _, reply := b.do(t, b.agent, "POST", "/v1/tickets/"+b.ticketID+"/replies",
			[]byte(fmt.Sprintf(`{"body": "Here is the corrected invoice.", "attachments": [%d]}`, id)), "")
		if status != 202 {
			t.Fatalf("reply: %d %v", status, reply)
		}
		jobstest.WaitFor(t, b.queue, int64(reply["job_id"].(float64)), jobs.StateSucceeded, 10*time.Second)

		raw := b.smtp.Deliveries()[0].Raw
		var stored []byte
		if err := b.Pool.QueryRow(b.Ctx, `SELECT rendered FROM outbound_emails WHERE message_id = $1`, int64(reply["message_id"].(float64))).Scan(&stored); err != nil || !bytes.Equal(stored, raw) {
			t.Errorf("the mail sent is not the bytes stored before the send (%v)", err)
		}
		got := mailtest.RequireNoDefects(t, raw)
		sum := sha256.Sum256(pdf)
		if len(got.Attachments) != 1 || got.Attachments[0].Filename != name || got.Attachments[0].SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("Python reads the attachments as %+v", got.Attachments)
		}
		text := strings.ReplaceAll(got.Text, "\r\n", "\n")
		if !strings.HasPrefix(text, "Here is the corrected invoice.\n\n-- \nAlice Example\nBilling team\n\nOn ") {
			t.Errorf("Python reads the text as %q", text)
		}
		if !strings.Contains(got.HTML, "Alice Example<br>") || !strings.Contains(got.HTML, "<blockquote") {
			t.Errorf("Python reads the HTML as %q", got.HTML)
		}

		for _, key := range []string{b.agent, b.customer} {
			status, _, ticket := b.do(t, key, "GET", "/v1/tickets/"+b.ticketID, nil, "")
			msgs := ticket["messages"].([]any)
			list := msgs[len(msgs)-1].(map[string]any)["attachments"].([]any)
			if status != 200 || len(list) != 1 || list[0].(map[string]any)["attachment_id"] != up["attachment_id"] ||
				list[0].(map[string]any)["filename"] != name || list[0].(map[string]any)["size"] != float64(len(pdf)) {
				t.Errorf("GET ticket lists %v", list)
			}
			status, h, content := b.download(t, key, fmt.Sprintf("/v1/tickets/%s/attachments/%d", b.ticketID, id))
			if status != 200 || !bytes.Equal(content, pdf) || h.Get("Content-Type") != "application/pdf" {
				t.Errorf("download: %d, %d bytes, %s", status, len(content), h.Get("Content-Type"))
			}
			_, params, err := mime.ParseMediaType(h.Get("Content-Disposition"))
			if err != nil || params["filename"] != name || !strings.HasPrefix(h.Get("Content-Disposition"), "attachment;") {
				t.Errorf("Content-Disposition %q: %v", h.Get("Content-Disposition"), err)
			}
		}
		// The upload went with that reply; a second reply cannot take it.
		status, _, resp := b.do(t, b.agent, "POST", "/v1/tickets/"+b.ticketID+"/replies", []byte(fmt.Sprintf(`{"body": "Again.", "attachments": [%d]}`, id)), "")
		requireError(t, status, resp, 422, "attachment_unavailable")
	})

	t.Run("AnUploadPostedTwiceWithOneKeyIsOneFile", func(t *testing.T) {
		t.Parallel()
		b := setupAttachments(t, 0)
		s1, _, first := b.upload(t, b.agent, "file", name, "application/pdf", pdf, "upload-1")
		s2, h2, second := b.upload(t, b.agent, "file", name, "application/pdf", pdf, "upload-1")
		if s1 != 201 || s2 != 201 || first["attachment_id"] != second["attachment_id"] || h2.Get("Idempotent-Replayed") != "true" {
			t.Errorf("answers %d %v and %d %v", s1, first, s2, second)
		}
		// Another upload of the same bytes is another attachment over one content.
		b.upload(t, b.agent, "file", "copy.pdf", "application/pdf", pdf, "")
		if got := b.attachmentRows(t); got != [2]int{2, 1} {
			t.Errorf("attachments, contents = %v, want [2 1]", got)
		}
	})

	t.Run("AFileSentWithItsPathIsKeptByItsName", func(t *testing.T) {
		t.Parallel()
		b := setupAttachments(t, 0)
		// As an old Windows browser sends it (RFC 7578 §4.2 allows a path).
		for _, path := range []string{`C:\Users\ada\scan.pdf`, `C:\` + strings.Repeat(`deep\`, 60) + "scan.pdf"} {
			status, _, resp := b.upload(t, b.agent, "file", path, "application/pdf", pdf, "")
			if status != 201 || resp["filename"] != "scan.pdf" {
				t.Errorf("%.40q: %d %v, want the file kept as scan.pdf", path, status, resp)
			}
		}
	})

	t.Run("BadUploadsWriteNothing", func(t *testing.T) {
		t.Parallel()
		b := setupAttachments(t, 1024)
		for _, tc := range []struct {
			name, key, field, filename string
			content                    []byte
			status                     int
			code                       string
		}{
			{"OverTheLimit", "agent", "file", "big.bin", make([]byte, 1025), 413, "attachment_too_large"},
			{"AnotherField", "agent", "photo", "a.png", []byte("x"), 400, "unknown_field"},
			{"NoFilename", "agent", "file", "", []byte("x"), 422, "invalid_filename"},
			{"ControlCharactersInTheName", "agent", "file", "a\x01b.txt", []byte("x"), 422, "invalid_filename"},
			{"AFoldersName", "agent", "file", "..", []byte("x"), 422, "invalid_filename"},
			{"APathToAFolder", "agent", "file", `C:\Users\ada\`, []byte("x"), 422, "invalid_filename"},
			{"ACustomer", "customer", "file", "a.txt", []byte("x"), 403, "forbidden"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				key := map[string]string{"agent": b.agent, "customer": b.customer}[tc.key]
				status, _, resp := b.upload(t, key, tc.field, tc.filename, "text/plain", tc.content, "")
				requireError(t, status, resp, tc.status, tc.code)
			})
		}
		t.Run("NotMultipart", func(t *testing.T) {
			status, _, resp := b.doWith(t, b.agent, "POST", "/v1/attachments", []byte(`{"file": "x"}`), http.Header{"Content-Type": {"application/json"}})
			requireError(t, status, resp, 415, "unsupported_media_type")
		})
		t.Run("NoFile", func(t *testing.T) {
			var body bytes.Buffer
			mw := multipart.NewWriter(&body)
			_ = mw.Close()
			status, _, resp := b.doWith(t, b.agent, "POST", "/v1/attachments", body.Bytes(), http.Header{"Content-Type": {mw.FormDataContentType()}})
			requireError(t, status, resp, 400, "missing_file")
		})
		if got := b.attachmentRows(t); got != [2]int{0, 0} {
			t.Errorf("attachments, contents = %v after refused uploads", got)
		}
	})

	t.Run("AReplyWithAnotherAgentsUploadWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setupAttachments(t, 0)
		if err := b.Store.UpsertAgent(b.Ctx, &store.UpsertAgentParams{Name: "bob", DisplayName: "Bob", Email: "bob@support.example.com"}); err != nil {
			t.Fatal(err)
		}
		_, _, up := b.upload(t, b.key(t, "agent:bob"), "file", "bob.txt", "text/plain", []byte("Bob's"), "")
		before := b.outboundRows(t)
		for _, body := range []string{
			fmt.Sprintf(`{"body": "Hi", "attachments": [%v]}`, up["attachment_id"]),
			`{"body": "Hi", "attachments": [999999]}`,
		} {
			status, _, resp := b.do(t, b.agent, "POST", "/v1/tickets/"+b.ticketID+"/replies", []byte(body), "")
			requireError(t, status, resp, 422, "attachment_unavailable")
		}
		status, _, resp := b.do(t, b.agent, "POST", "/v1/tickets/"+b.ticketID+"/replies", []byte(`{"body": "Hi", "attachments": [1, 1]}`), "")
		requireError(t, status, resp, 422, "invalid_attachments")
		if after := b.outboundRows(t); after != before {
			t.Errorf("rows %v became %v", before, after)
		}
	})

	t.Run("ADownloadNeverRunsInTheAPIsOrigin", func(t *testing.T) {
		t.Parallel()
		b := setupAttachments(t, 0)
		page := []byte(`<html><script>fetch("/v1/tickets")</script></html>`)
		_, _, up := b.upload(t, b.agent, "file", `page "1".html`, "text/html", page, "")
		status, _, reply := b.do(t, b.agent, "POST", "/v1/tickets/"+b.ticketID+"/replies",
			[]byte(fmt.Sprintf(`{"body": "See the page.", "attachments": [%v]}`, up["attachment_id"])), "")
		if status != 202 {
			t.Fatalf("reply: %d %v", status, reply)
		}
		path := fmt.Sprintf("/v1/tickets/%s/attachments/%v", b.ticketID, up["attachment_id"])
		status, h, content := b.download(t, b.agent, path)
		if status != 200 || !bytes.Equal(content, page) {
			t.Fatalf("download: %d %q", status, content)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(h.Get("Content-Disposition"), "attachment;") ||
			!strings.Contains(h.Get("Content-Security-Policy"), "sandbox") || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
			t.Errorf("headers %v", h)
		}
		if want := `attachment; filename="page _1_.html"; filename*=UTF-8''page%20%221%22.html`; h.Get("Content-Disposition") != want {
			t.Errorf("Content-Disposition %q, want %q", h.Get("Content-Disposition"), want)
		}

		other := b.key(t, "customer:C-0002")
		for _, tc := range []struct{ key, path string }{
			{other, path}, // another customer's ticket
			{b.agent, fmt.Sprintf("/v1/tickets/%s/attachments/999999", b.ticketID)},
			{b.agent, fmt.Sprintf("/v1/tickets/%s/attachments/abc", b.ticketID)},
			{b.agent, fmt.Sprintf("/v1/tickets/T-999999/attachments/%v", up["attachment_id"])},
		} {
			status, _, raw := b.download(t, tc.key, tc.path)
			var body map[string]any
			_ = json.Unmarshal(raw, &body)
			requireError(t, status, body, 404, "not_found")
		}
	})
}

func TestContentDispositionFollowsRFC6266(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"invoice.pdf":          `attachment; filename="invoice.pdf"`,
		"Rechnung März.pdf":    `attachment; filename="Rechnung M_rz.pdf"; filename*=UTF-8''Rechnung%20M%C3%A4rz.pdf`,
		"写真.png":               `attachment; filename="__.png"; filename*=UTF-8''%E5%86%99%E7%9C%9F.png`,
		`a\b"c; filename=x.js`: `attachment; filename="a_b_c; filename=x.js"; filename*=UTF-8''a%5Cb%22c%3B%20filename%3Dx.js`,
		"100%41.txt":           `attachment; filename="100_41.txt"; filename*=UTF-8''100%2541.txt`,
	} {
		got := api.ContentDisposition(name)
		if got != want {
			t.Errorf("%q: %s, want %s", name, got, want)
		}
		if _, params, err := mime.ParseMediaType(got); err != nil || params["filename"] != name {
			t.Errorf("%q: reads back as %q (%v)", name, params["filename"], err)
		}
	}
}
