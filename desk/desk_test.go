package desk

import (
	"testing"

	"github.com/helpdesk-dev/helpdesk/vocab"
)

func TestStatusChanges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		from, to vocab.Status
		ok       bool
	}{
		{vocab.StatusOpen, vocab.StatusPending, true},
		{vocab.StatusPending, vocab.StatusOpen, true},
		{vocab.StatusSolved, vocab.StatusOpen, true},
		{vocab.StatusSolved, vocab.StatusClosed, true},
		{vocab.StatusOpen, vocab.StatusOpen, true},
		{vocab.StatusClosed, vocab.StatusPending, false},
		{vocab.StatusClosed, vocab.StatusOpen, false},
		{vocab.StatusClosed, vocab.StatusSolved, false},
		{vocab.StatusOpen, "archived", false},
	} {
		if got := CanChangeStatus(tc.from, tc.to); got != tc.ok {
			t.Errorf("%s → %s: %v, want %v", tc.from, tc.to, got, tc.ok)
		}
	}
}

func TestAgentCommands(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text, command, arg, rest string
	}{
		{"#note\nCalled her.", "note", "", "Called her."},
		{"  #Assign Bilal  \n\nPlease take this one.", "assign", "bilal", "Please take this one."},
		{"#solved", "solved", "", ""},
		{"Thanks!\n#note not a command here", "", "", ""},
		{"# Heading, not a command", "", "", ""},
		{"#", "", "", ""},
	} {
		command, arg, rest := parseCommand(tc.text)
		if command != tc.command || arg != tc.arg || rest != tc.rest {
			t.Errorf("parseCommand(%q) = %q %q %q, want %q %q %q", tc.text, command, arg, rest, tc.command, tc.arg, tc.rest)
		}
	}
}
