package inbound

import (
	"strings"

	"golang.org/x/net/html"
)

// HTMLToText turns an HTML body into readable text: paragraphs and line
// breaks become new lines, links keep their address, scripts and styles go.
func HTMLToText(s string) string {
	z := html.NewTokenizer(strings.NewReader(s))
	var b strings.Builder
	skip := 0
	var href string
	for {
		switch z.Next() {
		case html.ErrorToken:
			return tidy(b.String())
		case html.TextToken:
			if skip == 0 {
				b.WriteString(strings.Join(strings.Fields(string(z.Text())), " "))
				b.WriteByte(' ')
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			switch string(name) {
			case "script", "style", "head", "title":
				skip++
			case "br":
				b.WriteString("\n")
			case "p", "div", "tr", "li", "h1", "h2", "h3", "h4", "blockquote", "table":
				b.WriteString("\n")
			case "a":
				href = ""
				for hasAttr {
					var k, v []byte
					k, v, hasAttr = z.TagAttr()
					if string(k) == "href" && strings.HasPrefix(string(v), "http") {
						href = string(v)
					}
				}
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script", "style", "head", "title":
				if skip > 0 {
					skip--
				}
			case "p", "div", "tr", "li", "h1", "h2", "h3", "h4", "blockquote", "table":
				b.WriteString("\n")
			case "a":
				if href != "" {
					b.WriteString("(" + href + ") ")
					href = ""
				}
			}
		}
	}
}

// tidy trims each line and keeps at most one blank line in a row.
func tidy(s string) string {
	var out []string
	blank := false
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			if !blank && len(out) > 0 {
				out = append(out, "")
			}
			blank = true
			continue
		}
		blank = false
		out = append(out, line)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}
