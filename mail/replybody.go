package mail

import (
	"html"
	"regexp"
	"strings"
	"time"
)

// Quote is the earlier message a reply quotes below itself.
type Quote struct {
	Date time.Time
	Name string // who wrote it: a name, else an address
	Text string
}

// The quoted history is bounded: a reply to a long mail quotes its start.
const (
	maxQuoteLines = 40
	maxQuoteBytes = 4000
)

// ReplyBodies writes an agent's reply as mail clients show it: what the
// agent wrote, the agent's signature under "-- " (RFC 3676 §4.3), and the
// customer's previous message under "On <date>, <name> wrote:", quoted
// with "> " in the text and in a blockquote in the HTML, at most
// maxQuoteLines lines or maxQuoteBytes bytes of it. The HTML is built from
// the same text: escaped, blank lines making paragraphs, web addresses
// made links.
func ReplyBodies(body, signature string, q *Quote) (text, htmlBody string) {
	body = strings.TrimRight(normalizeNewlines(body), "\n ")
	signature = strings.TrimRight(normalizeNewlines(signature), "\n ")
	var t, h strings.Builder
	h.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"></head><body>\n")
	t.WriteString(body + "\n")
	h.WriteString(paragraphsHTML(body))
	if strings.TrimSpace(signature) != "" {
		t.WriteString("\n-- \n" + signature + "\n")
		h.WriteString("<div class=\"signature\">-- <br>\n" + linesHTML(signature) + "</div>\n")
	}
	if q != nil && strings.TrimSpace(q.Text) != "" {
		quoted, cut := boundQuote(q.Text)
		intro := "On " + q.Date.UTC().Format("Mon, 2 Jan 2006 at 15:04 MST") + ", " + oneLine(q.Name) + " wrote:"
		t.WriteString("\n" + intro + "\n")
		for _, line := range strings.Split(quoted, "\n") {
			t.WriteString(strings.TrimRight("> "+line, " ") + "\n")
		}
		if cut {
			t.WriteString("> […]\n")
			quoted += "\n[…]"
		}
		h.WriteString("<p>" + html.EscapeString(intro) + "</p>\n<blockquote type=\"cite\" style=\"margin:0 0 0 .8ex;border-left:1px solid #ccc;padding-left:1ex\">\n" +
			paragraphsHTML(quoted) + "</blockquote>\n")
	}
	h.WriteString("</body></html>\n")
	return t.String(), h.String()
}

func normalizeNewlines(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
}

// boundQuote returns the start of text, at most maxQuoteLines lines and
// maxQuoteBytes bytes (cut at a line, or at a character in a line that
// long), and whether anything was left out.
func boundQuote(text string) (string, bool) {
	lines := strings.Split(strings.TrimRight(normalizeNewlines(text), "\n "), "\n")
	var out []string
	size, cut := 0, false
	for i, line := range lines {
		if i == maxQuoteLines {
			cut = true
			break
		}
		if size+len(line) > maxQuoteBytes {
			if len(out) == 0 {
				out = append(out, strings.ToValidUTF8(line[:maxQuoteBytes], ""))
			}
			cut = true
			break
		}
		size += len(line) + 1
		out = append(out, line)
	}
	return strings.Join(out, "\n"), cut
}

var blankLines = regexp.MustCompile(`\n[ \t]*\n+`)

// paragraphsHTML makes paragraphs of blocks separated by blank lines.
func paragraphsHTML(text string) string {
	var b strings.Builder
	for _, para := range blankLines.Split(strings.Trim(text, "\n"), -1) {
		if strings.TrimSpace(para) != "" {
			b.WriteString("<p>" + linesHTML(para) + "</p>\n")
		}
	}
	return b.String()
}

// webAddress is an http or https address in text, without the punctuation
// that usually ends the sentence around it.
var webAddress = regexp.MustCompile(`https?://[^\s<>"]*[^\s<>".,;:!?)\]'’]`)

// linesHTML escapes text, keeps its line breaks and makes links of its
// web addresses.
func linesHTML(text string) string {
	var b strings.Builder
	for i, line := range strings.Split(strings.Trim(text, "\n"), "\n") {
		if i > 0 {
			b.WriteString("<br>\n")
		}
		last := 0
		for _, m := range webAddress.FindAllStringIndex(line, -1) {
			b.WriteString(html.EscapeString(line[last:m[0]]))
			u := html.EscapeString(line[m[0]:m[1]])
			b.WriteString(`<a href="` + u + `">` + u + `</a>`)
			last = m[1]
		}
		b.WriteString(html.EscapeString(line[last:]))
	}
	return b.String()
}
