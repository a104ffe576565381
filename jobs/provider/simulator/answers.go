package simulator

import (
	"fmt"
	"hash/fnv"
	"math"
	"strings"

	"helpdesk/jobs/provider"
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

// Classify picks a team and priority from keywords.
func Classify(text string) provider.Classification {
	words := tokens(text)
	seen := map[string]bool{}
	for _, w := range words {
		seen[w] = true
	}
	best, bestHits := "general", 0
	for _, team := range provider.Teams {
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

// Draft is the templated suggested answer.
func Draft(subject, team string) string {
	return fmt.Sprintf("Thank you for your message about %q. Our %s team has your ticket "+
		"and will get back to you within one business day.\n\nBest regards,\nThe support team", subject, team)
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

// parsePrompt reads the "Team: …" and "Subject: …" lines that the client
// puts before the customer's text.
func parsePrompt(prompt string) (subject, body, team string) {
	rest := prompt
	for {
		line, after, found := strings.Cut(rest, "\n")
		switch {
		case strings.HasPrefix(line, "Team: "):
			team = strings.TrimPrefix(line, "Team: ")
		case strings.HasPrefix(line, "Subject: "):
			subject = strings.TrimPrefix(line, "Subject: ")
		default:
			return subject, strings.TrimSpace(rest), team
		}
		if !found {
			return subject, "", team
		}
		rest = after
	}
}

func usage(prompt, completion string) provider.Usage {
	p, c := len(tokens(prompt)), len(tokens(completion))
	return provider.Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: p + c}
}
