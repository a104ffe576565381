package mail

import (
	"regexp"
	"strings"
)

// The lines where a reply's quoted history begins, as mail clients write
// them; everything from such a line on is history, not the new text.
var (
	// Gmail, Apple Mail, Thunderbird: "On Tue, Nov 3, 2026 at 10:02 AM Support <…> wrote:",
	// which Gmail wraps over two lines when it is long.
	onWrote     = regexp.MustCompile(`(?i)^on\s.+\bwrote:\s*$`)
	onWroteHead = regexp.MustCompile(`(?i)^on\s.+\d`)
	wroteTail   = regexp.MustCompile(`(?i)\bwrote:\s*$`)
	// Other languages' clients: "Am … schrieb …:", "Le … a écrit :", "El … escribió:".
	otherWrote = regexp.MustCompile(`(?i)^(am\s.+\sschrieb\s.*:|le\s.+\sa écrit\s?:|el\s.+\sescribió:)\s*$`)
	// Any language's: a line that names an address and ends in a colon,
	// with the quote right under it ("Op zo 6 dec. 2026 om 17:20 schreef
	// Support <support@…>:", "Il giorno … Support <support@…> ha scritto:").
	addressColon = regexp.MustCompile(`@[^\s@]+.*:$`)
	// Outlook: "-----Original Message-----", or a header block "From: … Sent: …"
	// after a line of underscores.
	originalMessage = regexp.MustCompile(`(?i)^-{2,}\s*original message\s*-{2,}$`)
	// The header's words in English, German, French, Spanish, Portuguese,
	// Dutch, Italian, Polish, Swedish, Danish and Norwegian.
	outlookFrom = regexp.MustCompile(`(?i)^\*?(from|von|de|van|da|od|från|fra):\*?\s`)
	outlookSent = regexp.MustCompile(`(?i)^\*?(sent|gesendet|envoyé|date|enviado|enviada|verzonden|inviato|wysłano|skickat|sendt):\*?\s`)
	underscores = regexp.MustCompile(`^_{10,}$`)
	// "Forwarded message" blocks start history too.
	forwarded = regexp.MustCompile(`(?i)^-{5,}\s*forwarded message\s*-{5,}$`)
)

// NewText is what a person wrote above the quoted history of a reply: it
// cuts at the first line where a mail client begins the quote (Gmail's
// and Apple Mail's "On … wrote:", Outlook's "-----Original Message-----"
// and "From: … Sent: …" block, Thunderbird's "On … wrote:", and in any
// language a line naming an address that ends in a colon over the quote), drops lines
// quoted with ">", and cuts a "-- " signature. A reply written below the
// quote (bottom-posting) keeps its own lines and loses the quoted ones.
func NewText(text string) string {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	if above := textAbove(lines); above != "" {
		return above
	}
	// Nothing above the quote: the reply is below it (Thunderbird's and
	// mutt's default). Keep the lines that are not quoted.
	var out []string
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if line == "--" || line == "-- " {
			break
		}
		if strings.HasPrefix(trimmed, ">") || onWrote.MatchString(trimmed) || otherWrote.MatchString(trimmed) || wroteTail.MatchString(trimmed) ||
			attribution(trimmed, lines[i+1:]) {
			continue
		}
		out = append(out, strings.TrimRight(line, " \t"))
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// textAbove is the text above the first line where quoted history begins.
func textAbove(lines []string) string {
	var out []string
cut:
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], " \t")
		trimmed := strings.TrimSpace(line)
		next := ""
		if i+1 < len(lines) {
			next = strings.TrimSpace(lines[i+1])
		}
		switch {
		case line == "--" || line == "-- ": // RFC 3676 §4.3: the signature separator
			break cut
		case onWrote.MatchString(trimmed), otherWrote.MatchString(trimmed):
			break cut
		case attribution(trimmed, lines[i+1:]):
			break cut
		case onWroteHead.MatchString(trimmed) && wroteTail.MatchString(next) && !strings.HasPrefix(next, ">"):
			break cut
		case originalMessage.MatchString(trimmed), forwarded.MatchString(trimmed):
			break cut
		case underscores.MatchString(trimmed) && outlookFrom.MatchString(next):
			break cut
		case outlookFrom.MatchString(trimmed) && quoteHeaderFollows(lines[i+1:]):
			break cut
		case strings.HasPrefix(trimmed, ">"):
			continue
		}
		out = append(out, line)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// attribution reports whether line introduces the quote in any language:
// it names an address and ends in a colon, and the next line that is not
// blank is quoted.
func attribution(line string, rest []string) bool {
	if len(line) > 300 || !addressColon.MatchString(line) {
		return false
	}
	for _, l := range rest {
		if l = strings.TrimSpace(l); l != "" {
			return strings.HasPrefix(l, ">")
		}
	}
	return false
}

// quoteHeaderFollows reports whether a "Sent:" (or "Date:") line comes
// within the next few lines: the rest of Outlook's header block.
func quoteHeaderFollows(rest []string) bool {
	for i, l := range rest {
		if i == 4 {
			break
		}
		if outlookSent.MatchString(strings.TrimSpace(l)) {
			return true
		}
	}
	return false
}
