package desk

import (
	"testing"

	"helpdesk/store"
)

func TestStatusChanges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{store.StatusOpen, store.StatusPending, true},
		{store.StatusPending, store.StatusOpen, true},
		{store.StatusSolved, store.StatusOpen, true},
		{store.StatusSolved, store.StatusClosed, true},
		{store.StatusOpen, store.StatusOpen, true},
		{store.StatusClosed, store.StatusPending, false},
		{store.StatusClosed, store.StatusOpen, false},
		{store.StatusClosed, store.StatusSolved, false},
		{store.StatusOpen, "archived", false},
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
