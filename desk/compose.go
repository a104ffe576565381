package desk

import (
	"fmt"
	"html"
	"strings"
	"time"

	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// Every mail the service sends is composed here: agents' replies and
// acknowledgements to customers; notifications, explanations and notices
// to agents. What the rest of the package decides is whether and to whom.

// composed is a mail ready to store: its parts, its bytes and its
// recipient row.
type composed struct {
	out  *mail.Outgoing
	raw  []byte
	text string
	to   store.Recipient
}

// composeAck is the acknowledgement of a new ticket: the ticket number in
// the subject and the text, In-Reply-To the customer's mail, Reply-To the
// ticket's plus address, marked auto-replied (RFC 3834 §5). A neutral one
// (to a sender the mail made a customer) names neither the sender nor
// the subject: a forged sender must not make the service repeat its words.
func (d *Desk) composeAck(from *mail.Address, t *store.Ticket, c *store.Customer, root, id string, neutral bool) (*composed, error) {
	to, err := mail.ParseAddress(mail.AddrSpec(c.Email))
	if err != nil {
		return nil, err
	}
	data := AckData{TicketID: t.ID, Subject: t.Subject, CustomerName: c.Name, CustomerEmail: c.Email}
	subject, line := t.Subject, ""
	if neutral {
		data.Subject, data.CustomerName = "", ""
		subject, line = "", "Your message to "+from.Name+" [#"+t.ID+"]"
	} else {
		to.Name = c.Name
	}
	var text strings.Builder
	if err := d.config.Ack.Template.Execute(&text, data); err != nil {
		return nil, err
	}
	out := &mail.Outgoing{From: from, To: []*mail.Address{to}, Subject: subject, SubjectLine: line, TicketID: t.ID, Date: t.CreatedAt,
		MessageID: id, InReplyTo: root, References: []string{root}, ThreadRoot: root, ThreadStart: t.CreatedAt,
		Body: text.String(), AutoReply: true, ReplyTo: plusAddress(from, t.ID)}
	raw, err := out.Render()
	if err != nil {
		return nil, err
	}
	return &composed{out: out, raw: raw, text: text.String(), to: store.Recipient{Address: to.Address, Name: to.Name, Kind: "to"}}, nil
}

// plusAddress is the support address with the ticket in it, where a
// customer's answer finds its ticket even when a client drops
// In-Reply-To (the plus address is matched on the way in).
func plusAddress(from *mail.Address, ticketID string) *mail.Address {
	local, domain, ok := strings.Cut(from.Address, "@")
	if !ok {
		return nil
	}
	return &mail.Address{Name: from.Name, Address: local + "+" + ticketID + "@" + domain}
}

// replyParts is what an agent's reply to a customer is made of, read
// from the store when it is first sent.
type replyParts struct {
	from     *mail.Address
	msg      *store.Message
	ticket   *store.Ticket
	customer *store.Customer
	thread   *store.ThreadIDs
	agent    *store.Agent   // nil: the signature is empty
	quoted   *store.Message // the customer's message it answers, nil for none
	files    []*store.AttachmentFile
	to       []*store.Recipient
}

// composeReply is an agent's reply: Re: the ticket's subject with its
// token, threaded under the customer's thread (RFC 5322 §3.6.4), the text
// with the agent's signature and the customer's message quoted, Reply-To
// the ticket's plus address, the files attached.
func composeReply(p *replyParts) (*mail.Outgoing, []byte, error) {
	out := &mail.Outgoing{
		From: p.from, Subject: p.ticket.Subject, TicketID: p.ticket.ID, Date: p.msg.CreatedAt,
		MessageID: *p.msg.EmailMessageID, InReplyTo: p.thread.Parent, References: mail.References(p.thread.Earlier),
		ThreadRoot: p.thread.Root, ThreadStart: p.ticket.CreatedAt,
	}
	out.Body, out.HTML = replyBodies(p.msg, p.agent, p.quoted, p.customer)
	for _, f := range p.files {
		out.Attachments = append(out.Attachments, &mail.File{Name: f.Filename, ContentType: f.ContentType, Content: f.Content})
	}
	// Answers come back to the ticket's plus-address (matched on the way
	// in), so a client that drops In-Reply-To still threads.
	if local, domain, ok := strings.Cut(p.from.Address, "@"); ok {
		out.ReplyTo = &mail.Address{Name: p.from.Name, Address: local + "+" + p.ticket.ID + "@" + domain}
	}
	for _, r := range p.to {
		a, err := mail.ParseAddress(mail.AddrSpec(r.Address))
		if err != nil {
			return nil, nil, err
		}
		a.Name = r.Name
		if r.Kind == "to" {
			a.Name = p.customer.Name
			out.To = append(out.To, a)
		} else {
			out.Cc = append(out.Cc, a)
		}
	}
	raw, err := out.Render()
	if err != nil {
		return nil, nil, err
	}
	return out, raw, nil
}

// replyBodies writes a reply's text and HTML: the agent's text, the
// agent's signature, and the customer's message before it, quoted.
func replyBodies(msg *store.Message, agent *store.Agent, quoted *store.Message, customer *store.Customer) (text, html string) {
	var signature string
	if agent != nil {
		signature = agent.Signature
	}
	var quote *mail.Quote
	if quoted != nil {
		quote = &mail.Quote{Date: quoted.CreatedAt, Name: authorName(quoted, customer), Text: quoted.Body}
	}
	return mail.ReplyBodies(msg.Body, signature, quote)
}

// authorName is who wrote a customer-side message, as a quote or a
// notification names them: the customer by name for the customer's own,
// else the address it came from. Never another person's name.
func authorName(m *store.Message, customer *store.Customer) string {
	if m.Author == vocab.Customer(customer.ID) {
		if customer.Name != "" {
			return customer.Name
		}
		return customer.Email
	}
	if m.Sender != nil {
		return *m.Sender
	}
	return m.Author.ID()
}

// agentMail is a mail to an agent about a ticket: a notification, an
// explanation or a notice, threaded only among the ticket's agent-side
// mail, marked auto-generated (RFC 3834 §5) so that out-of-office answers
// stay away, with Reply-To the agent's signed address.
func (d *Desk) agentMail(from *mail.Address, t *store.Ticket, a *store.Agent, messageID int64, id string, date time.Time, refs []string, subject, text, htmlBody string) *mail.Outgoing {
	out := &mail.Outgoing{From: from, To: []*mail.Address{{Name: a.DisplayName, Address: a.Email}},
		SubjectLine: subject, TicketID: t.ID, Date: date, MessageID: id, References: mail.References(refs),
		Body: text, HTML: htmlBody, Automatic: true}
	if len(refs) > 0 {
		out.InReplyTo = refs[len(refs)-1]
	}
	if d.config.ReplyAddresses != nil {
		// At the ticket's own address: a team whose mail comes from its
		// mailbox gets the agents' answers there too.
		out.ReplyTo = &mail.Address{Name: from.Name,
			Address: d.config.ReplyAddresses.SignAt(from.Address, t.ID, messageID, date.Add(d.config.ReplyAddressTTL))}
	}
	return out
}

// notificationSubject is "[T-500001] Late parcel (shipping, P2)".
func notificationSubject(t *store.Ticket) string {
	s := "[" + t.ID + "] " + t.Subject
	if t.Team != nil && t.Priority != nil {
		s += fmt.Sprintf(" (%s, P%d)", *t.Team, *t.Priority)
	}
	return s
}

// howToAnswer closes every mail to an agent: how to answer the customer,
// by mail when answers by mail are taken (a reply secret signs their
// address), else through the API; a notification never promises what
// would not work.
func (d *Desk) howToAnswer(t *store.Ticket) string {
	if d.config.ReplyAddresses == nil {
		return "Answer the customer with POST /v1/tickets/" + t.ID + "/replies (or from_draft to send the suggested reply); " +
			"a reply to this mail reaches nobody: this service takes no answers by mail (HELPDESK_REPLY_SECRET is not set)."
	}
	return "Reply to this mail to answer the customer: only your new text is sent, from the support address. " +
		"Start with #note for an internal note, #draft to send the suggested reply as it is, #solved, #pending or #assign NAME."
}

// notificationBody tells the agents what the customer wrote and what
// triage made of it: the customer's newest message, the team and
// priority, the draft.
func notificationBody(t *store.Ticket, c *store.Customer, newest *store.Message, howToAnswer string) (text, htmlBody string) {
	customer := mail.AddrSpec(c.Email)
	if c.Name != "" {
		customer = c.Name + " <" + customer + ">"
	}
	message, who := "(no text)", customer
	if newest != nil {
		message = newest.Body
		switch {
		case newest.Author.IsAgent():
			// A ticket an agent opened for the customer (API, console).
			who = "Agent " + newest.Author.ID() + ", for " + customer + ","
		case newest.Author != vocab.Customer(c.ID):
			who = authorName(newest, c) // a participant, by the address they wrote from
		}
	}
	triage := "not triaged yet"
	if t.Team != nil && t.Priority != nil {
		triage = fmt.Sprintf("team %s, priority P%d", *t.Team, *t.Priority)
	}
	draft := "(none yet)"
	if t.DraftIsCurrent() {
		draft = *t.DraftReply
	}
	if t.PossibleDuplicateOf != nil {
		triage += fmt.Sprintf(". Possible duplicate of %s, open from the same customer about the same thing: "+
			"if it is, merge this ticket into it (POST /v1/tickets/%s/merge {\"into\": %q})", *t.PossibleDuplicateOf, t.ID, *t.PossibleDuplicateOf)
	}
	if t.DraftIsCurrent() && len(t.DraftSources) > 0 {
		draft += "\n\n(drawn on how we answered " + strings.Join(t.DraftSources, ", ") + ")"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s wrote on %s:\n\n%s\n\nTriage: %s.\n\nSuggested reply:\n\n%s\n\n-- \n%s\n", who, t.ID, message, triage, draft, howToAnswer)
	h := "<!DOCTYPE html>\n<html><body>\n" +
		htmlParagraph(fmt.Sprintf("%s wrote on %s:", who, t.ID)) +
		"<blockquote>" + htmlParagraph(message) + "</blockquote>\n" +
		htmlParagraph("Triage: "+triage+".") + htmlParagraph("Suggested reply:") + "<blockquote>" + htmlParagraph(draft) + "</blockquote>\n" +
		"<hr>\n" + htmlParagraph(howToAnswer) + "</body></html>\n"
	return b.String(), h
}

func htmlParagraph(s string) string {
	return "<p>" + strings.ReplaceAll(html.EscapeString(s), "\n", "<br>\n") + "</p>\n"
}

// explanation is the answer to an agent's mail that did nothing.
func explanation(reason, howToAnswer string) string {
	return reason + "\n\nNothing was sent to the customer and the ticket did not change.\n\n-- \n" + howToAnswer + "\n"
}

// notice is a short mail to the assignee: a bounce, a delay.
func notice(text, howToAnswer string) string {
	return text + "\n\n-- \n" + howToAnswer + "\n"
}
