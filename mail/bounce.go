package mail

import (
	"regexp"
	"strconv"
)

var enhancedStatus = regexp.MustCompile(`\b([245])\.([0-9]{1,3})\.([0-9]{1,3})\b`)

// HardFailure reports whether a failed delivery says the address itself is
// bad for good (RFC 3463): 5.1.x (no such mailbox, bad address, 5.1.10 a
// null MX), 5.2.1 (mailbox disabled), 5.4.1 (recipient address rejected,
// as Exchange reports it), or a 550 at RCPT without an enhanced code. A
// full mailbox (5.2.2), a message too large, a policy refusal, anything
// 4.x.x or delayed is not: those may pass.
func HardFailure(status string, code int) bool {
	m := enhancedStatus.FindStringSubmatch(status)
	if m == nil {
		return code == 550
	}
	class, subject, detail := m[1], m[2], m[3]
	if class != "5" {
		return false
	}
	d, _ := strconv.Atoi(detail)
	switch subject {
	case "1":
		return true
	case "2":
		return d == 1
	case "4":
		return d == 1
	}
	return false
}
