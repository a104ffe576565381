package mail

import "strings"

// MaxHeaderLine is RFC 5322 §2.1.1's limit on a line, without its CRLF.
const MaxHeaderLine = 998

// References builds a reply's References field from the Message-IDs of the
// ticket's earlier messages, oldest first, the thread root first of all.
//
// RFC 5322 §3.6.4: References is the parent's References plus the parent's
// Message-ID. helpdesk knows the whole ticket, so the chain is the ticket's
// earlier messages in order, which is what the parent's References would
// have held. The caller must leave the reply itself out of earlier: a
// message is never its own ancestor.
//
// RFC 5537 §3.4.4 allows trimming a long list: keep the first (the root)
// and the most recent ids, drop from the middle. We trim until the unfolded
// "References: …" line fits in MaxHeaderLine, so it fits however long the
// ticket grows.
func References(earlier []string) []string {
	ids := make([]string, 0, len(earlier))
	seen := make(map[string]bool, len(earlier))
	for _, id := range earlier {
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	const prefix = len("References: ")
	size := prefix + len(strings.Join(ids, " "))
	if size <= MaxHeaderLine {
		return ids
	}
	// Drop from just after the root until it fits; the newest stay.
	drop := 0
	for i := 1; i < len(ids)-1 && size > MaxHeaderLine; i++ {
		size -= len(ids[i]) + 1
		drop++
	}
	return append([]string{ids[0]}, ids[1+drop:]...)
}
