// Package vocab holds the words every layer of helpdesk shares: ticket statuses, message directions and actors.
//
// It is a folder of its own, at the bottom of the tree, because the rows
// in store/ and the rules in desk/ must speak the same typed values: store
// scans into them, desk decides with them, the edges parse into them. The
// rules about them (which status may follow which, who may see what) live
// in desk/; this package only names them.
package vocab

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Status is where a ticket is in its life.
type Status string

// The ticket statuses, in the order of a ticket's life.
const (
	StatusOpen    Status = "open"    // the customer waits for us
	StatusPending Status = "pending" // an agent replied; we wait for the customer
	StatusSolved  Status = "solved"  // closes by itself after a while unless the customer writes
	StatusClosed  Status = "closed"  // done; a customer message opens a follow-up ticket
)

// Statuses lists every status.
var Statuses = []Status{StatusOpen, StatusPending, StatusSolved, StatusClosed}

// Valid reports whether s is one of Statuses.
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// StatusNames is Statuses as text, for messages that list them.
func StatusNames() string {
	names := make([]string, len(Statuses))
	for i, s := range Statuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// Direction says who wrote a message of a ticket and who may read it.
type Direction string

// Message directions.
const (
	DirectionInbound  Direction = "inbound"  // from the customer
	DirectionOutbound Direction = "outbound" // an agent's reply to the customer
	DirectionNote     Direction = "note"     // internal, never sent
	// The agent side: the service's mail to agents about the ticket, and
	// an agent's mail as it came in. Never shown to the customer, never in
	// the customer's thread.
	DirectionNotification Direction = "notification"
	DirectionAgentEmail   Direction = "agent_email"
	// The service's acknowledgement of a new ticket, mail to the customer.
	DirectionAcknowledgement Direction = "acknowledgement"
	// A mail that named the ticket but whose sender may not write into it:
	// kept for agents, never shown to the customer, never quoted, never
	// in a prompt, until an agent accepts it.
	DirectionHeld Direction = "held"
)

// Public reports whether the customer sees messages of this direction:
// their own and the agents' replies.
func (d Direction) Public() bool {
	return d == DirectionInbound || d == DirectionOutbound || d == DirectionAcknowledgement
}

// ToCustomer reports whether messages of this direction are mail to the
// customer: an agent's reply or the acknowledgement of a new ticket.
func (d Direction) ToCustomer() bool {
	return d == DirectionOutbound || d == DirectionAcknowledgement
}

// Actor is who wrote a message or made a change, as "kind:id":
// customer:C-0022, agent:alice, email:ada@example.com (a sender who is
// no customer), or system (the service itself). It is stored as text.
type Actor string

// System makes the changes nobody asked for: autoclose, assignment by
// triage, the notes of deliveries and bounces.
const System Actor = "system"

// The kinds of actor.
const (
	KindCustomer = "customer"
	KindAgent    = "agent"
	KindEmail    = "email"
	KindSystem   = "system"
)

// Agent is the actor of the agent with this name.
func Agent(name string) Actor { return Actor(KindAgent + ":" + name) }

// Customer is the actor of the customer with this id.
func Customer(id string) Actor { return Actor(KindCustomer + ":" + id) }

// Email is the actor of a sender known only by address.
func Email(address string) Actor { return Actor(KindEmail + ":" + address) }

// Kind is customer, agent, email or system.
func (a Actor) Kind() string {
	if a == System {
		return KindSystem
	}
	kind, _, _ := strings.Cut(string(a), ":")
	return kind
}

// ID is what follows the kind: C-0022, alice, an address; "" for system.
func (a Actor) ID() string {
	_, id, _ := strings.Cut(string(a), ":")
	return id
}

// IsAgent reports whether the actor is a support agent.
func (a Actor) IsAgent() bool { return a.Kind() == KindAgent }

// IsCustomer reports whether the actor is a customer.
func (a Actor) IsCustomer() bool { return a.Kind() == KindCustomer }

// CustomerIDPattern is what a customer id looks like: C- and at least four digits.
var CustomerIDPattern = regexp.MustCompile(`^C-[0-9]{4,}$`)

// TicketIDPattern is what a ticket id looks like: T- and up to 18
// digits, a number PostgreSQL's bigint holds.
var TicketIDPattern = regexp.MustCompile(`^T-[0-9]{1,18}$`)

// AgentNamePattern is what an agent's name may be.
var AgentNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ParseActor reads customer:C-0022 or agent:NAME, the actors that hold
// API keys.
func ParseActor(s string) (Actor, error) {
	kind, id, _ := strings.Cut(s, ":")
	switch {
	case kind == KindCustomer && CustomerIDPattern.MatchString(id), kind == KindAgent && AgentNamePattern.MatchString(id):
		return Actor(s), nil
	}
	return "", fmt.Errorf("actor %q: want customer:C-0022 or agent:NAME (lower case letters, digits, . _ -)", s)
}

// String is the actor as text: customer:C-0022, agent:alice, system.
func (a Actor) String() string { return string(a) }

// Verdict is what a mail's sender authentication said of its From: the
// domain vouched for it (pass), said it is not from it (fail), or said
// nothing we could read (none).
type Verdict string

// The verdicts.
const (
	VerdictPass Verdict = "pass"
	VerdictFail Verdict = "fail"
	VerdictNone Verdict = "none"
)
