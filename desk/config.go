package desk

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/settings"
)

// mailDomainPattern is what HELPDESK_MAIL_DOMAIN and the inbound domains
// may be: a domain name of two labels or more.
var mailDomainPattern = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)+$`)

// Settings declares the use cases' settings. The ones of acknowledgements
// come after HELPDESK_ACK, which decides whether there are any: read in
// this order, HELPDESK_ACK=0 leaves the others without effect.
func (c *Config) Settings() []settings.Setting {
	return []settings.Setting{
		settings.Func("HELPDESK_MAIL_DOMAIN", "mail-domain", "helpdesk.localhost", "the domain of minted Message-IDs and of EHLO",
			func(v string) error {
				if !mailDomainPattern.MatchString(v) {
					return settings.Wantf("a domain name such as support.example.com")
				}
				c.MailDomain = v
				return nil
			}).ZeroWhen(func() bool { return c.MailDomain == "" }),
		settings.Func("HELPDESK_FROM", "from", "", "From of every mail the service sends, with a display name; default `Support <support@MAIL_DOMAIN>`",
			func(v string) error {
				a, err := mail.ParseAddress(v)
				if err != nil {
					return settings.Wantf("an address such as \"Example Support <support@example.com>\"")
				}
				c.From = a
				return nil
			}),
		settings.Func("HELPDESK_INBOUND_DOMAINS", "inbound-domains", "", "comma-separated support domains whose addresses take mail; default HELPDESK_MAIL_DOMAIN; others get 550 5.1.1",
			func(v string) error {
				c.Domains = nil
				for _, d := range strings.Split(v, ",") {
					if d = strings.TrimSpace(d); !mailDomainPattern.MatchString(d) {
						return settings.Wantf("domain names separated by commas")
					}
					c.Domains = append(c.Domains, d)
				}
				return nil
			}),
		settings.Secret(&c.ReplySecret, "HELPDESK_REPLY_SECRET", "reply-secret",
			"signs the reply addresses of mail to agents, so that their answers come back as theirs; at least 16 characters; required with inbound mail"),
		settings.Func("HELPDESK_REPLY_SECRET_PREVIOUS", "reply-secret-previous", "", "earlier secrets, comma-separated, still accepted while answers to older notifications come in",
			func(v string) error {
				c.ReplySecretPrevious = nil
				for _, p := range strings.Split(v, ",") {
					if p = strings.TrimSpace(p); p != "" {
						c.ReplySecretPrevious = append(c.ReplySecretPrevious, p)
					}
				}
				return nil
			}),
		settings.Duration(&c.ReplyAddressTTL, "HELPDESK_REPLY_ADDRESS_TTL", "reply-address-ttl", "720h",
			"how long the signed reply address of a notification takes an agent's answer; after it, mail to it is handled as anyone's"),
		settings.Duration(&c.IdempotencyRetention, "HELPDESK_IDEMPOTENCY_RETENTION", "idempotency-retention", "24h",
			"how long an Idempotency-Key replays its first answer; a periodic job forgets older keys"),
		settings.Func("HELPDESK_SUPPRESS_DAYS", "suppress-days", "30", "an address that bounced for good is left alone this many days: replies to it fail at once",
			func(v string) error {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					return settings.Wantf("a whole number of 1 or more")
				}
				c.SuppressFor = time.Duration(n) * 24 * time.Hour
				return nil
			}).ZeroWhen(func() bool { return c.SuppressFor == 0 }),
		settings.Int64(&c.AttachmentMaxBytes, "HELPDESK_ATTACHMENT_MAX_BYTES", "attachment-max-bytes", strconv.Itoa(DefaultAttachmentMaxBytes),
			"the largest file whose content is kept, inbound or uploaded; of a larger inbound part only its name, type and size are kept, with a note"),
		settings.Bool(&c.AutoAssign, "HELPDESK_AUTOASSIGN", "autoassign", "1",
			"1: triage gives each ticket to the least busy active agent of its team; 0: nobody is assigned automatically"),
		settings.Duration(&c.Delivery.GiveUpAfter, "HELPDESK_EMAIL_GIVE_UP_AFTER", "email-give-up-after", "72h",
			"an email still undelivered this long after it was written fails (EmailExpired); a person may retry it, and its age starts again"),
		settings.Duration(&c.Delivery.DelayNotice, "HELPDESK_EMAIL_DELAY_NOTICE", "email-delay-notice", "30m",
			"an email undelivered this long shows `delayed`; for a reply to the customer, a system note on its ticket says why and until when it is tried, and the assignee is mailed"),
		settings.Func("HELPDESK_DRAFT_EXAMPLES", "draft-examples", "3",
			"how many similar solved tickets of the team a draft draws on (subject, the customer's question without their name and address, the agents' last reply); 0: none, drafts see only their own ticket",
			func(v string) error {
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 || n > 10 {
					return settings.Wantf("a whole number from 0 to 10")
				}
				c.DraftExamples = n
				if n == 0 {
					c.DraftExamples = -1
				}
				return nil
			}).ZeroWhen(func() bool { return c.DraftExamples == 0 }),
		settings.Func("HELPDESK_DRAFT_EXAMPLE_QUESTIONS", "draft-example-questions", "1",
			"1: a draft's examples carry the other customers' questions, their name and address taken out; 0: only the subject and what our agents answered",
			func(v string) error {
				switch v {
				case "1":
					c.OmitExampleQuestions = false
				case "0":
					c.OmitExampleQuestions = true
				default:
					return settings.Wantf("1 or 0")
				}
				return nil
			}),
		score(&c.SimilarMinScore, "HELPDESK_SIMILAR_MIN_SCORE", "similar-min-score", "0.3",
			"how alike (cosine similarity of the embeddings) a solved ticket must be to serve as a draft's example"),
		settings.Duration(&c.DuplicateWindow, "HELPDESK_DUPLICATE_WINDOW", "duplicate-window", "168h",
			"a ticket's possible duplicate is an open or pending ticket of the same customer opened this recently"),
		score(&c.DuplicateMinScore, "HELPDESK_DUPLICATE_MIN_SCORE", "duplicate-min-score", "0.5",
			"how alike (cosine similarity) a ticket of the same customer must be to be named its possible duplicate"),
		settings.Func("HELPDESK_ACK", "ack", "1", "1: each new ticket a customer opens (API or email) is acknowledged by mail (RFC 3834 auto-reply); 0: never",
			func(v string) error {
				switch v {
				case "1":
					if c.Ack == nil {
						c.Ack = &AckConfig{}
					}
				case "0":
					c.Ack = nil
				default:
					return settings.Wantf("1 or 0")
				}
				return nil
			}),
		settings.Func("HELPDESK_ACK_MAX_PER_DAY", "ack-max-per-day", "3", "acknowledgements to one address in 24 hours, at most",
			func(v string) error {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					return settings.Wantf("a whole number of 1 or more")
				}
				if c.Ack != nil {
					c.Ack.MaxPerDay = n
				}
				return nil
			}).ZeroWhen(func() bool { return c.Ack != nil && c.Ack.MaxPerDay == 0 }),
		settings.Func("HELPDESK_ACK_MAX_PER_HOUR", "ack-max-per-hour", "100", "acknowledgements to every address together in an hour, at most: forged senders cannot make the service mail many",
			func(v string) error {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					return settings.Wantf("a whole number of 1 or more")
				}
				if c.Ack != nil {
					c.Ack.MaxPerHour = n
				}
				return nil
			}).ZeroWhen(func() bool { return c.Ack != nil && c.Ack.MaxPerHour == 0 }),
		settings.Func("HELPDESK_ACK_TEMPLATE", "ack-template", "",
			"the acknowledgement's text: a file's path, or the text itself when it holds `{{` or a line break; a Go text/template given .TicketID, .Subject, .CustomerName, .CustomerEmail (.Subject and .CustomerName are empty for a sender the mail made a customer: anyone can forge a From), tried at start; unset: a built-in text",
			func(v string) error {
				t, err := ackTemplateOf(v)
				if err != nil {
					return settings.Wantf("%v", err)
				}
				if c.Ack != nil {
					c.Ack.Template = t
				}
				return nil
			}),
	}
}

// score is a threshold of cosine similarity.
func score(p *float64, env, flag, def, help string) settings.Setting {
	return settings.Func(env, flag, def, help, func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 1) {
			return settings.Wantf("a number above 0 and at most 1, such as 0.5")
		}
		*p = f
		return nil
	}).ZeroWhen(func() bool { return *p == 0 })
}

// ackTemplateOf reads HELPDESK_ACK_TEMPLATE: a value with a template
// action or a line break is the text itself; anything else names a file.
func ackTemplateOf(v string) (*template.Template, error) {
	text := v
	if !strings.Contains(v, "{{") && !strings.Contains(v, "\n") {
		b, err := os.ReadFile(v)
		if err != nil {
			return nil, fmt.Errorf("a readable file, or the template's text: %w", err)
		}
		text = string(b)
	}
	t, err := ParseAckTemplate(text)
	if err != nil {
		return nil, fmt.Errorf("a Go text/template: %w", err)
	}
	return t, nil
}
