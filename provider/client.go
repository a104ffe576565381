// Package provider calls an OpenAI-compatible AI provider for the triage steps and classifies its failures.
package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/helpdesk-dev/helpdesk/settings"
)

// Teams are the teams classify may choose when the service has no teams
// of its own yet.
var Teams = []string{"billing", "shipping", "technical", "account", "general"}

// Config says where the provider is and how long to wait for it.
type Config struct {
	BaseURL    string        // e.g. https://api.openai.com; /v1/… is appended
	APIKey     string        // sent as a bearer token when set
	ChatModel  string        // default "gpt-4o-mini"
	EmbedModel string        // default "text-embedding-3-small"
	Timeout    time.Duration // per call
}

// Settings declares the provider's settings. The models are the
// provider's names for them, not settings of the service.
func (c *Config) Settings() []settings.Setting {
	return []settings.Setting{
		settings.URL(&c.BaseURL, "HELPDESK_PROVIDER_URL", "provider-url", "",
			"an OpenAI-compatible provider's base URL; unset: the simulator, started in-process on a loopback port, so the real HTTP path always runs"),
		settings.Secret(&c.APIKey, "HELPDESK_PROVIDER_KEY", "provider-key", "bearer key for the provider"),
		settings.Duration(&c.Timeout, "HELPDESK_PROVIDER_TIMEOUT", "provider-timeout", "10s", "how long one provider call may take"),
	}
}

// Client calls the provider. It is safe for concurrent use.
type Client struct {
	config Config
	http   *http.Client
}

// New returns a client for the provider at config.BaseURL.
func New(config Config) (*Client, error) {
	if config.BaseURL == "" {
		return nil, errors.New("provider: BaseURL is required")
	}
	config.BaseURL = strings.TrimRight(config.BaseURL, "/")
	if config.ChatModel == "" {
		config.ChatModel = "gpt-4o-mini"
	}
	if config.EmbedModel == "" {
		config.EmbedModel = "text-embedding-3-small"
	}
	settings.Defaults(config.Settings())
	// Go's default keeps 2 idle connections a host: with dozens of
	// workers calling one provider, most calls dialled anew (over TLS, a
	// handshake each), a tenth of the process's CPU in the triage
	// benchmark and thousands of sockets left in TIME_WAIT.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns, transport.MaxIdleConnsPerHost = maxIdleConns, maxIdleConns
	return &Client{config: config, http: &http.Client{Transport: transport}}, nil
}

// maxIdleConns is how many connections to the provider stay open between
// calls: more than serve's triage workers.
const maxIdleConns = 128

// Name identifies the provider for the state every process shares about
// it (its circuit breaker, its pace): its base URL.
func (c *Client) Name() string { return c.config.BaseURL }

// Timeout is how long one call may take.
func (c *Client) Timeout() time.Duration { return c.config.Timeout }

// Ticket is what the provider is told about a ticket.
type Ticket struct {
	ID           string
	Subject      string
	CustomerName string
	Messages     []string // the customer's messages, oldest first, the newest last
	AgentReplies []string // what agents answered so far, oldest first
	Team         string   // known once classify ran; helps the draft
	Teams        []string // the teams classify may choose; nil: Teams
	// Examples are how we answered tickets like this one before, for the
	// draft to draw on; the desk chooses them (desk.DraftExamples).
	Examples []Example
}

// Example is a solved ticket like the one drafted for: its subject, the
// customer's question and the agents' final reply.
type Example struct {
	Subject  string
	Question string
	Answer   string
}

// Body is what the customer wrote, oldest first.
func (t Ticket) Body() string { return strings.Join(t.Messages, "\n\n") }

// teams is what classify may choose.
func (t Ticket) teams() []string {
	if len(t.Teams) > 0 {
		return t.Teams
	}
	return Teams
}

// The prompt's layout, which the simulator reads back: header lines, then
// the customer's messages separated by a line of three dashes, then the
// agents' replies.
const (
	MessageSeparator   = "\n---\n"
	AgentRepliesHeader = "\n\nAgent replies so far:\n"
)

// The examples' layout, a message of their own before the ticket's:
// ExamplesHeader, then each example as its subject, question and answer
// lines, examples separated by ExampleSeparator.
const (
	ExamplesHeader   = "How we answered similar tickets before (draw on them where they fit; never name their customers):\n"
	ExampleSeparator = "\n===\n"
	ExampleQuestion  = "\nQuestion:\n"
	ExampleAnswer    = "\nOur answer:\n"
)

// examplesPrompt is the examples as the draft request carries them; "" for none.
func (t Ticket) examplesPrompt() string {
	if len(t.Examples) == 0 {
		return ""
	}
	parts := make([]string, len(t.Examples))
	for i, e := range t.Examples {
		parts[i] = "Subject: " + e.Subject + ExampleQuestion + e.Question + ExampleAnswer + e.Answer
	}
	return ExamplesHeader + strings.Join(parts, ExampleSeparator)
}

func (t Ticket) prompt() string {
	var b strings.Builder
	b.WriteString("Subject: " + t.Subject + "\n")
	if t.CustomerName != "" {
		b.WriteString("Customer: " + t.CustomerName + "\n")
	}
	b.WriteString("\n" + strings.Join(t.Messages, MessageSeparator))
	if len(t.AgentReplies) > 0 {
		b.WriteString(AgentRepliesHeader + strings.Join(t.AgentReplies, MessageSeparator))
	}
	return b.String()
}

// embedText is what a ticket's vector is made of: what it is about, the
// subject and the customer's words, and not who wrote it or our answers,
// so that a new question lies near the old questions like it.
func (t Ticket) embedText() string {
	return t.Subject + "\n\n" + strings.Join(t.Messages, "\n\n")
}

// Call describes one provider call, for the ai_runs record.
type Call struct {
	Model            string
	Latency          time.Duration
	PromptTokens     int
	CompletionTokens int
	Quota            *Quota // the rate limits the answer reported, if any
}

// Classification is classify's answer.
type Classification struct {
	Team     string `json:"team"`
	Priority int    `json:"priority"`
}

// classifyPrompt lists the teams there are.
func classifyPrompt(teams []string) string {
	quoted := make([]string, len(teams))
	for i, t := range teams {
		quoted[i] = strconv.Quote(t)
	}
	return `You triage customer support tickets. Answer with a JSON object only: ` +
		`{"team": one of ` + strings.Join(quoted, ", ") + `; "priority": 1 (urgent) to 4 (low)}.`
}

const draftPrompt = `You are a support agent. Write a short, polite reply to the customer's newest message, ` +
	`greeting the customer by name and answering what they asked, grounded in the conversation below; ` +
	`the agent will edit and send it. Do not promise refunds or dates. Plain text only.`

// Classify asks for the ticket's team and priority.
func (c *Client) Classify(ctx context.Context, t Ticket) (_ Classification, _ Call, err error) {
	defer func() { countCall("classify", err) }()
	teams := t.teams()
	content, call, err := c.chat(ctx, t, "classify", &ChatRequest{
		Model: c.config.ChatModel,
		Messages: []ChatMessage{{Role: "system", Content: classifyPrompt(teams)},
			{Role: "user", Content: "Teams: " + strings.Join(teams, ", ") + "\n" + t.prompt()}},
		ResponseFormat: &ResponseFormat{Type: "json_object"},
		User:           t.ID,
	})
	if err != nil {
		return Classification{}, call, err
	}
	var out Classification
	if err := json.Unmarshal([]byte(content), &out); err != nil {
		return Classification{}, call, invalidAnswer("classify answered no JSON object: %q", truncate(content, 80))
	}
	if !slices.Contains(teams, out.Team) {
		return Classification{}, call, invalidAnswer("classify chose unknown team %q", out.Team)
	}
	if out.Priority < 1 || out.Priority > 4 {
		return Classification{}, call, invalidAnswer("classify chose priority %d, want 1 to 4", out.Priority)
	}
	return out, call, nil
}

// DraftReply asks for a suggested answer to the ticket.
func (c *Client) DraftReply(ctx context.Context, t Ticket) (_ string, _ Call, err error) {
	defer func() { countCall("draft_reply", err) }()
	user := t.prompt()
	if t.Team != "" {
		user = "Team: " + t.Team + "\n" + user
	}
	messages := []ChatMessage{{Role: "system", Content: draftPrompt}}
	if examples := t.examplesPrompt(); examples != "" {
		messages = append(messages, ChatMessage{Role: "system", Content: examples})
	}
	content, call, err := c.chat(ctx, t, "draft_reply", &ChatRequest{
		Model:    c.config.ChatModel,
		Messages: append(messages, ChatMessage{Role: "user", Content: user}),
		User:     t.ID,
	})
	if err != nil {
		return "", call, err
	}
	if strings.TrimSpace(content) == "" {
		return "", call, invalidAnswer("draft_reply answered an empty text")
	}
	return content, call, nil
}

// Embed asks for the ticket's vector.
func (c *Client) Embed(ctx context.Context, t Ticket) (_ []float32, _ Call, err error) {
	defer func() { countCall("embed", err) }()
	var resp EmbeddingResponse
	call, err := c.post(ctx, t.ID, "embed", "/v1/embeddings",
		&EmbeddingRequest{Model: c.config.EmbedModel, Input: t.embedText(), User: t.ID}, &resp)
	if err != nil {
		return nil, call, err
	}
	if resp.Model != "" {
		call.Model = resp.Model
	}
	call.PromptTokens = resp.Usage.PromptTokens
	if len(resp.Data) != 1 || len(resp.Data[0].Embedding) == 0 {
		return nil, call, invalidAnswer("embed answered %d vectors, want one", len(resp.Data))
	}
	vec := resp.Data[0].Embedding
	for _, x := range vec {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, call, invalidAnswer("embed answered a vector with NaN or Inf")
		}
	}
	return vec, call, nil
}

func (c *Client) chat(ctx context.Context, t Ticket, task string, req *ChatRequest) (string, Call, error) {
	var resp ChatResponse
	call, err := c.post(ctx, t.ID, task, "/v1/chat/completions", req, &resp)
	if err != nil {
		return "", call, err
	}
	if resp.Model != "" {
		call.Model = resp.Model
	}
	call.PromptTokens, call.CompletionTokens = resp.Usage.PromptTokens, resp.Usage.CompletionTokens
	if len(resp.Choices) == 0 {
		return "", call, invalidAnswer("%s answered no choices", task)
	}
	return resp.Choices[0].Message.Content, call, nil
}

// maxAnswerBytes bounds what we read of an answer; a 384-float embedding is
// a few KiB, a 3072-float one under 64 KiB.
const maxAnswerBytes = 4 << 20

// post sends one JSON request and decodes a 2xx answer into out. Every
// failure comes back as *Error, except the caller's own cancellation, which
// is returned as is so that a shutdown is not mistaken for an outage.
func (c *Client) post(ctx context.Context, ticketID, task, path string, in, out any) (Call, error) {
	model := c.config.ChatModel
	if task == "embed" {
		model = c.config.EmbedModel
	}
	call := Call{Model: model}
	body, err := json.Marshal(in)
	if err != nil {
		return call, fmt.Errorf("encode %s request: %w", task, err)
	}

	callCtx, cancel := context.WithTimeout(ctx, c.config.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(callCtx, http.MethodPost, c.config.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		return call, &Error{Kind: KindRejected, Msg: fmt.Sprintf("build request: %v", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderTicket, ticketID)
	req.Header.Set(HeaderTask, task)
	if c.config.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.config.APIKey)
	}

	start := time.Now()
	resp, err := c.http.Do(req)
	if err == nil {
		defer resp.Body.Close()
		var answer []byte
		answer, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
		call.Latency = time.Since(start)
		call.Quota = parseQuota(resp.Header)
		if err == nil {
			if resp.StatusCode < 200 || resp.StatusCode > 299 {
				e := statusError(resp, answer, time.Now())
				e.Quota = call.Quota
				return call, e
			}
			if err := decodeJSON(answer, out); err != nil {
				return call, invalidAnswer("%s answer is not the expected JSON: %v", task, err)
			}
			return call, nil
		}
	}
	call.Latency = time.Since(start)
	if ctx.Err() != nil {
		return call, ctx.Err()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return call, &Error{Kind: KindTimeout, Msg: fmt.Sprintf("no answer to %s within %s", task, c.config.Timeout)}
	}
	return call, &Error{Kind: KindUnavailable, Msg: fmt.Sprintf("%s: %v", task, unwrapURLError(err))}
}

// unwrapURLError drops net/http's `Post "url": ` prefix, which repeats the
// base URL in every dead letter.
func unwrapURLError(err error) error {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err
	}
	return err
}
