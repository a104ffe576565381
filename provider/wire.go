package provider

import (
	"bytes"
	"encoding/json"
)

// The OpenAI-compatible wire format, shared with the simulator so the two
// cannot drift apart.

// Headers that tell the provider which ticket and step a call is for. A
// real provider ignores them; the simulator counts calls by them.
const (
	HeaderTicket = "X-Helpdesk-Ticket"
	HeaderTask   = "X-Helpdesk-Task"
)

// ChatMessage is one message of a chat completion request or answer.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ResponseFormat asks the model for JSON output.
type ResponseFormat struct {
	Type string `json:"type"`
}

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	Model          string          `json:"model"`
	Messages       []ChatMessage   `json:"messages"`
	Temperature    float64         `json:"temperature"`
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	User           string          `json:"user,omitempty"`
}

// ChatChoice is one answer of a chat completion.
type ChatChoice struct {
	Index        int         `json:"index"`
	Message      ChatMessage `json:"message"`
	FinishReason string      `json:"finish_reason"`
}

// Usage counts a call's tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// ChatResponse is the answer of POST /v1/chat/completions.
type ChatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   Usage        `json:"usage"`
}

// EmbeddingRequest is the body of POST /v1/embeddings.
type EmbeddingRequest struct {
	Model string `json:"model"`
	Input string `json:"input"`
	User  string `json:"user,omitempty"`
}

// EmbeddingData is one vector of an embeddings answer.
type EmbeddingData struct {
	Object    string    `json:"object"`
	Index     int       `json:"index"`
	Embedding []float32 `json:"embedding"`
}

// EmbeddingResponse is the answer of POST /v1/embeddings.
type EmbeddingResponse struct {
	Object string          `json:"object"`
	Model  string          `json:"model"`
	Data   []EmbeddingData `json:"data"`
	Usage  Usage           `json:"usage"`
}

type errorResponse struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

// ErrorBody is an OpenAI-style error answer.
func ErrorBody(message, typ string) []byte {
	var e errorResponse
	e.Error.Message, e.Error.Type = message, typ
	b, _ := json.Marshal(e)
	return b
}

func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	return dec.Decode(v)
}
