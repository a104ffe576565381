package simulator

import (
	"fmt"
	"hash/fnv"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/helpdesk-dev/helpdesk/provider"
)

// EmbeddingDims is the length of the simulator's vectors.
const EmbeddingDims = 384

// teamKeywords drive the deterministic classification; the team with the
// most hits wins, ties going to the team listed first in provider.Teams.
var teamKeywords = map[string][]string{
	"billing":   {"charge", "charged", "invoice", "refund", "payment", "bill", "billing", "price", "subscription"},
	"shipping":  {"parcel", "delivery", "delivered", "shipping", "package", "shipment", "tracking", "courier", "late"},
	"technical": {"error", "crash", "bug", "broken", "app", "website", "working", "fails", "slow"},
	"account":   {"password", "login", "account", "sign", "username", "locked", "email"},
}

var urgentWords = []string{"urgent", "asap", "immediately", "outage", "down", "emergency"}
var lowWords = []string{"question", "wondering", "feedback", "suggestion"}

// Classify picks a team among teams (nil: provider.Teams) and a priority
// from keywords. Without a keyword hit it picks "general" if that is a
// team, else the first.
func Classify(text string, teams []string) provider.Classification {
	if len(teams) == 0 {
		teams = provider.Teams
	}
	words := tokens(text)
	seen := map[string]bool{}
	for _, w := range words {
		seen[w] = true
	}
	best, bestHits := teams[0], 0
	if slices.Contains(teams, "general") {
		best = "general"
	}
	for _, team := range teams {
		hits := 0
		for _, kw := range teamKeywords[team] {
			if seen[kw] {
				hits++
			}
		}
		if hits > bestHits {
			best, bestHits = team, hits
		}
	}
	priority := 3
	for _, w := range urgentWords {
		if seen[w] {
			priority = 1
		}
	}
	if priority == 3 {
		for _, w := range lowWords {
			if seen[w] {
				priority = 4
			}
		}
	}
	return provider.Classification{Team: best, Priority: priority}
}

// prompt is what the client's user message says of the ticket.
type prompt struct {
	subject, customer, team string
	teams                   []string
	messages                []string // the customer's, oldest first
	replies                 []string // the agents', oldest first
	examples                []provider.Example
}

func (p prompt) body() string { return strings.Join(p.messages, "\n\n") }

func (p prompt) newest() string {
	if len(p.messages) == 0 {
		return ""
	}
	return p.messages[len(p.messages)-1]
}

var (
	orderNumber = regexp.MustCompile(`(?i)\border\s*(?:number|no\.?|#)?\s*#?\s*([A-Z]*-?[0-9]{3,})`)
	invoiceNum  = regexp.MustCompile(`(?i)\binvoice\s*(?:number|no\.?|#)?\s*#?\s*([A-Z]*-?[0-9]{3,})`)
)

// Draft is the suggested answer, grounded in the ticket: it greets the
// customer by name and names the order or invoice number found in the
// newest message, or else quotes its opening words, so that a draft
// written before the customer's latest message reads differently from one
// written after it.
func Draft(p prompt) string {
	var b strings.Builder
	if p.customer != "" {
		fmt.Fprintf(&b, "Dear %s,\n\n", p.customer)
	} else {
		b.WriteString("Hello,\n\n")
	}
	newest := p.newest()
	switch {
	case orderNumber.MatchString(newest):
		fmt.Fprintf(&b, "Thank you for writing about order %s.", orderNumber.FindStringSubmatch(newest)[1])
	case invoiceNum.MatchString(newest):
		fmt.Fprintf(&b, "Thank you for writing about invoice %s.", invoiceNum.FindStringSubmatch(newest)[1])
	case newest != "":
		fmt.Fprintf(&b, "Thank you for your message (%q).", openingWords(newest, 8))
	default:
		fmt.Fprintf(&b, "Thank you for your message about %q.", p.subject)
	}
	if len(p.replies) > 0 {
		b.WriteString(" Following up on our earlier reply:")
	}
	if len(p.examples) > 0 {
		fmt.Fprintf(&b, " As we answered a similar question before: %q.", openingWords(p.examples[0].Answer, 24))
	}
	team := p.team
	if team == "" {
		team = "support"
	}
	fmt.Fprintf(&b, " Our %s team is looking into it and will get back to you within one business day.\n\nBest regards,\nThe support team", team)
	return b.String()
}

// openingWords is the first n words of s.
func openingWords(s string, n int) string {
	words := strings.Fields(s)
	if len(words) > n {
		return strings.Join(words[:n], " ") + " …"
	}
	return strings.Join(words, " ")
}

// Embed derives a unit vector from the text's words (feature hashing), so
// equal texts get equal vectors and texts sharing words lie close.
func Embed(text string) []float32 {
	vec := make([]float64, EmbeddingDims)
	for _, w := range tokens(text) {
		h := fnv.New64a()
		_, _ = h.Write([]byte(w))
		sum := h.Sum64()
		sign := 1.0
		if sum>>63 == 1 {
			sign = -1
		}
		vec[sum%EmbeddingDims] += sign
	}
	var norm float64
	for _, x := range vec {
		norm += x * x
	}
	out := make([]float32, EmbeddingDims)
	if norm == 0 {
		out[0] = 1
		return out
	}
	norm = math.Sqrt(norm)
	for i, x := range vec {
		out[i] = float32(x / norm)
	}
	return out
}

func tokens(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127)
	})
}

func lastUserMessage(msgs []provider.ChatMessage) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

// parsePrompt reads the header lines ("Teams: …", "Team: …", "Subject:
// …", "Customer: …") that the client puts before the customer's messages,
// then the messages and the agents' replies.
func parsePrompt(text string) prompt {
	var p prompt
	rest := text
	for {
		line, after, found := strings.Cut(rest, "\n")
		switch {
		case strings.HasPrefix(line, "Teams: "):
			for _, t := range strings.Split(strings.TrimPrefix(line, "Teams: "), ",") {
				p.teams = append(p.teams, strings.TrimSpace(t))
			}
		case strings.HasPrefix(line, "Team: "):
			p.team = strings.TrimPrefix(line, "Team: ")
		case strings.HasPrefix(line, "Subject: "):
			p.subject = strings.TrimPrefix(line, "Subject: ")
		case strings.HasPrefix(line, "Customer: "):
			p.customer = strings.TrimPrefix(line, "Customer: ")
		default:
			customer, replies, _ := strings.Cut(rest, provider.AgentRepliesHeader)
			p.messages = split(customer)
			p.replies = split(replies)
			return p
		}
		if !found {
			return p
		}
		rest = after
	}
}

// parseExamples reads the examples of the draft request back, from the
// system message that starts with provider.ExamplesHeader.
func parseExamples(msgs []provider.ChatMessage) []provider.Example {
	var out []provider.Example
	for _, m := range msgs {
		text, ok := strings.CutPrefix(m.Content, provider.ExamplesHeader)
		if m.Role != "system" || !ok {
			continue
		}
		for _, part := range strings.Split(text, provider.ExampleSeparator) {
			head, answer, _ := strings.Cut(part, provider.ExampleAnswer)
			subject, question, _ := strings.Cut(head, provider.ExampleQuestion)
			out = append(out, provider.Example{Subject: strings.TrimPrefix(subject, "Subject: "), Question: question, Answer: answer})
		}
	}
	return out
}

func split(s string) []string {
	var out []string
	for _, part := range strings.Split(s, provider.MessageSeparator) {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

func usage(prompt, completion string) provider.Usage {
	p, c := len(tokens(prompt)), len(tokens(completion))
	return provider.Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: p + c}
}
