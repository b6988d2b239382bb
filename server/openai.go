package server

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nesy-dev/nesy/models"
)

// The OpenAI-compatible routes: POST /v1/chat/completions and POST
// /v1/completions in OpenAI's request and response shapes (streamed as
// server-sent events ending with "data: [DONE]"), errors as {"error":
// {"message", "type", "code"}}. Without the "pddl" extension they are plain
// generation through the same generate and sample as the Ollama routes;
// with it the answer is a plan made by POST /v1/plan's own handler (see
// openai_plan.go), one action per line, with the certificate in "nesy".
// Fields of OpenAI's API that nesy does not use are accepted and ignored,
// except those that would change the answer (tools, a JSON response
// format, logit_bias, echo, suffix), which are refused with 400.

// maxChoices bounds n (each choice is a generation of its own).
const maxChoices = 16

// maxTopLogprobs bounds top_logprobs (OpenAI's own limit is 20).
const maxTopLogprobs = 20

// ChatMessage is one message of a chat completion request, or the
// assistant's answer.
type ChatMessage struct {
	// Role is system, developer (read as system), user, assistant or tool
	// (a tool's result, rendered as the model's chat template renders
	// tool messages).
	Role string `json:"role"`
	// Content is the text; requests may send a string or a list of text
	// parts.
	Content MessageContent `json:"content"`
	Name    string         `json:"name,omitempty"`
	// ToolCallID is the call a tool message answers; accepted for OpenAI
	// clients' sake (the chat templates do not show it).
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// MessageContent is a message's text. OpenAI's clients send either a
// string or a list of parts ({"type": "text", "text": ...}); the text parts
// are joined. Other parts (images, audio) are refused.
type MessageContent string

// UnmarshalJSON reads a string, null, or a list of text parts.
func (c *MessageContent) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*c = MessageContent(s)
		return nil
	}
	if string(b) == "null" {
		*c = ""
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return fmt.Errorf("content: want a string or a list of text parts: %w", err)
	}
	var sb strings.Builder
	for i, p := range parts {
		if p.Type != "text" {
			return fmt.Errorf("content[%d]: part type %q is not supported (text only)", i, p.Type)
		}
		sb.WriteString(p.Text)
	}
	*c = MessageContent(sb.String())
	return nil
}

// StringList is OpenAI's "a string or a list of strings" (stop, prompt).
type StringList []string

// UnmarshalJSON reads a string, null or a list of strings.
func (l *StringList) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*l = StringList{s}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("want a string or a list of strings (token arrays are not supported): %w", err)
	}
	*l = list
	return nil
}

// StreamOptions are OpenAI's stream_options.
type StreamOptions struct {
	// IncludeUsage adds a last chunk with the usage and no choices.
	IncludeUsage bool `json:"include_usage,omitempty"`
}

// ChatCompletionRequest is the body of POST /v1/chat/completions. Fields
// of OpenAI's API not listed here are accepted and ignored unless they
// change the answer (see the package doc of this file).
type ChatCompletionRequest struct {
	Model    string        `json:"model"`
	Messages []ChatMessage `json:"messages"`
	// MaxTokens (or its newer name MaxCompletionTokens) bounds the answer's
	// tokens; 0 means the server's cap.
	MaxTokens           int `json:"max_tokens,omitempty"`
	MaxCompletionTokens int `json:"max_completion_tokens,omitempty"`
	// Temperature (default 1; 0 is greedy), TopP (default 1) and Seed
	// choose tokens; with pddl their absence means greedy decoding.
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
	// N is the number of choices (default 1, at most 16; 1 with pddl).
	N    int        `json:"n,omitempty"`
	Stop StringList `json:"stop,omitempty"`
	// Logprobs returns each answer token's log-probability (and the
	// TopLogprobs most likely alternatives) under the raw model.
	Logprobs      bool           `json:"logprobs,omitempty"`
	TopLogprobs   int            `json:"top_logprobs,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`
	// PDDL, nesy's extension, makes the answer a plan for a PDDL task,
	// executable by construction.
	PDDL *PDDLConstraint `json:"pddl,omitempty"`

	// Refused when set: nesy cannot honour them.
	Tools          json.RawMessage `json:"tools,omitempty"`
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
	LogitBias      json.RawMessage `json:"logit_bias,omitempty"`
}

// CompletionRequest is the body of POST /v1/completions (OpenAI's legacy
// text completion).
type CompletionRequest struct {
	Model string `json:"model"`
	// Prompt is a string or a list of strings (each gets N choices).
	Prompt      StringList `json:"prompt"`
	MaxTokens   int        `json:"max_tokens,omitempty"`
	Temperature *float64   `json:"temperature,omitempty"`
	TopP        *float64   `json:"top_p,omitempty"`
	Seed        *int64     `json:"seed,omitempty"`
	N           int        `json:"n,omitempty"`
	Stop        StringList `json:"stop,omitempty"`
	// Logprobs, when set, returns each token's log-probability and that
	// many most likely alternatives (0 to 20).
	Logprobs      *int            `json:"logprobs,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	StreamOptions *StreamOptions  `json:"stream_options,omitempty"`
	PDDL          *PDDLConstraint `json:"pddl,omitempty"`

	// Refused when set.
	Echo      bool            `json:"echo,omitempty"`
	Suffix    string          `json:"suffix,omitempty"`
	LogitBias json.RawMessage `json:"logit_bias,omitempty"`
}

// Usage counts a completion's tokens.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// TopLogprob is one alternative token with its log-probability.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// TokenLogprob is one answer token's log-probability (chat completions).
type TokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// ChatLogprobs are a chat choice's log-probabilities.
type ChatLogprobs struct {
	Content []TokenLogprob `json:"content"`
}

// TextLogprobs are a text completion choice's log-probabilities (the
// legacy shape: parallel lists).
type TextLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// ChatChoice is one answer of a chat completion.
type ChatChoice struct {
	Index        int           `json:"index"`
	Message      ChatMessage   `json:"message"`
	FinishReason string        `json:"finish_reason"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
}

// ChatCompletion is the answer of POST /v1/chat/completions.
type ChatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"` // "chat.completion"
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   Usage        `json:"usage"`
	// Nesy is the certificate of a pddl request: the POST /v1/plan answer
	// (plan, valid, goal_reached, stop_reason, counters, timings).
	Nesy *PlanResponse `json:"nesy,omitempty"`
}

// ChatDelta is the new part of a streamed message.
type ChatDelta struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content,omitempty"`
}

// ChatChunkChoice is one choice's part of a streamed chunk.
type ChatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        ChatDelta     `json:"delta"`
	FinishReason *string       `json:"finish_reason"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
}

// ChatCompletionChunk is one server-sent event of a streamed chat
// completion.
type ChatCompletionChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"` // "chat.completion.chunk"
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []ChatChunkChoice `json:"choices"`
	// Usage is set on the last chunk (no choices) with
	// stream_options.include_usage.
	Usage *Usage `json:"usage,omitempty"`
	// Nesy is the certificate, on the chunk that finishes a pddl answer.
	Nesy *PlanResponse `json:"nesy,omitempty"`
}

// TextChoice is one answer of a text completion (also a streamed chunk's
// choice, where FinishReason is null until the last).
type TextChoice struct {
	Index        int           `json:"index"`
	Text         string        `json:"text"`
	FinishReason *string       `json:"finish_reason"`
	Logprobs     *TextLogprobs `json:"logprobs"`
}

// TextCompletion is the answer of POST /v1/completions, and each chunk of
// its stream.
type TextCompletion struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"` // "text_completion"
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []TextChoice  `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"`
	Nesy    *PlanResponse `json:"nesy,omitempty"`
}

// OpenAIError is the "error" object of an OpenAI-shaped error body.
type OpenAIError struct {
	Message string `json:"message"`
	// Type is OpenAI's kind: invalid_request_error, authentication_error,
	// rate_limit_error or server_error.
	Type string `json:"type"`
	// Code is nesy's error code (the same as POST /v1/plan's).
	Code  string  `json:"code"`
	Param *string `json:"param"`
	// Positions locate bad_pddl errors in the request's PDDL text.
	Positions  []Position `json:"positions,omitempty"`
	RetryAfter int        `json:"retry_after,omitempty"`
}

// OpenAIErrorBody is the body of an error answer of the OpenAI-compatible
// routes (and an in-stream error event).
type OpenAIErrorBody struct {
	Error OpenAIError `json:"error"`
	// Nesy is the partial plan of a budget_exhausted pddl request.
	Nesy *PlanResponse `json:"nesy,omitempty"`
}

// openAIModel is an entry of GET /v1/models in OpenAI's list shape.
type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "model"
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// openAIModels lists models in OpenAI's shape (the "data" of GET
// /v1/models).
func openAIModels(list []modelInfo) []openAIModel {
	out := make([]openAIModel, 0, len(list))
	for _, m := range list {
		var created int64
		if !m.Modified.IsZero() {
			created = m.Modified.Unix()
		}
		out = append(out, openAIModel{ID: m.Name, Object: "model", Created: created, OwnedBy: "nesy"})
	}
	return out
}

// isOpenAIRoute says whether errors on path take OpenAI's shape.
func isOpenAIRoute(path string) bool {
	return path == "/v1/chat/completions" || path == "/v1/completions"
}

// writeErrorFor writes err in the error shape of r's route: OpenAI's for
// the OpenAI-compatible routes, nesy's otherwise.
func writeErrorFor(r *http.Request, w http.ResponseWriter, err error) {
	if isOpenAIRoute(r.URL.Path) {
		writeOpenAIError(w, err)
		return
	}
	writeError(w, err)
}

// openAIErrorType maps a status to OpenAI's error type.
func openAIErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// openAIErrorBody converts an error into OpenAI's shape.
func openAIErrorBody(err error) (*apiError, OpenAIErrorBody) {
	ae := asAPIError(err)
	return ae, OpenAIErrorBody{
		Error: OpenAIError{Message: ae.Message, Type: openAIErrorType(ae.Status), Code: ae.Code,
			Positions: ae.Positions, RetryAfter: ae.RetryAfter},
		Nesy: ae.Result,
	}
}

// writeOpenAIError writes err as {"error": {"message", "type", "code"}}
// with the status POST /v1/plan would use.
func writeOpenAIError(w http.ResponseWriter, err error) {
	ae, body := openAIErrorBody(err)
	if ae.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(ae.RetryAfter))
	}
	writeJSON(w, ae.Status, body)
}

// sseWriter writes server-sent events ("data: <json>\n\n"), flushing each.
// Safe for concurrent senders.
type sseWriter struct {
	mu      sync.Mutex // serializes writes
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	failed  bool // a write failed: the client is gone
}

func newSSE(w http.ResponseWriter) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// write sends raw event text; errors make later writes no-ops (the request
// context tells the work to stop).
func (s *sseWriter) write(text []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed {
		return
	}
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
	}
	if _, err := s.w.Write(text); err != nil {
		s.failed = true
		return
	}
	if err := s.rc.Flush(); err != nil {
		s.failed = true
	}
}

// send writes v as one data event.
func (s *sseWriter) send(v any) {
	data, err := json.Marshal(v)
	if err != nil {
		data, _ = json.Marshal(OpenAIErrorBody{Error: OpenAIError{Message: "encoding an event: " + err.Error(), Type: "server_error", Code: CodeInternal}})
	}
	buf := make([]byte, 0, len(data)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	s.write(buf)
}

// comment writes an SSE comment line (clients ignore it; it keeps idle
// connections open and shows progress to curl).
func (s *sseWriter) comment(text string) {
	s.write([]byte(": " + strings.ReplaceAll(text, "\n", " ") + "\n\n"))
}

// done ends the stream as OpenAI does.
func (s *sseWriter) done() { s.write([]byte("data: [DONE]\n\n")) }

// isStarted says whether the status line is out.
func (s *sseWriter) isStarted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// oaiParams are the parameters the two routes share, after parsing.
type oaiParams struct {
	model        string
	maxTokens    int
	temperature  *float64
	topP         *float64
	seed         *int64
	n            int
	stop         []string
	stream       bool
	includeUsage bool
	logprobs     bool
	topLogprobs  int
	pddl         *PDDLConstraint
}

// check validates the shared parameters and fills n.
func (p *oaiParams) check(maxTokens int) error {
	bad := func(format string, args ...any) error {
		return errorf(http.StatusBadRequest, CodeBadRequest, format, args...)
	}
	switch {
	case p.n < 0:
		return bad("n must be at least 1")
	case p.n > maxChoices:
		return errorf(http.StatusBadRequest, CodeOverCap, "n %d is above this server's cap of %d", p.n, maxChoices)
	case p.maxTokens < 0:
		return bad("max_tokens must not be negative")
	case p.maxTokens > maxTokens:
		return errorf(http.StatusBadRequest, CodeOverCap, "max_tokens %d is above this server's cap of %d", p.maxTokens, maxTokens)
	case p.temperature != nil && (*p.temperature < 0 || *p.temperature > 2 || math.IsNaN(*p.temperature)):
		return bad("temperature must be in [0, 2]")
	case p.topP != nil && (*p.topP <= 0 || *p.topP > 1 || math.IsNaN(*p.topP)):
		return bad("top_p must be in (0, 1]")
	case p.topLogprobs < 0 || p.topLogprobs > maxTopLogprobs:
		return bad("top_logprobs/logprobs must be in [0, %d]", maxTopLogprobs)
	}
	if p.n == 0 {
		p.n = 1
	}
	if p.pddl != nil {
		switch {
		case p.n > 1:
			return bad("pddl: n must be 1 (one plan per request)")
		case len(p.stop) > 0:
			return bad("pddl: stop is not supported (a plan ends at the goal, its end token or a budget)")
		case p.logprobs:
			return bad("pddl: logprobs are not supported (a search has no single sampling distribution)")
		}
	}
	return nil
}

// genOptions are the sampling options of choice i: OpenAI's defaults are
// temperature 1 and top_p 1; a seed gives each choice its own stream.
func (p *oaiParams) genOptions(i, maxTokens int) genOptions {
	o := genOptions{temperature: 1, topP: 1, numPredict: maxTokens, stop: p.stop}
	if p.maxTokens > 0 {
		o.numPredict = p.maxTokens
	}
	if p.temperature != nil {
		o.temperature = *p.temperature
	}
	if p.topP != nil {
		o.topP = *p.topP
	}
	if p.seed != nil {
		o.seed = uint64(*p.seed) + uint64(i)
		if o.seed == 0 {
			o.seed = math.MaxUint64 // 0 means "random" to generate
		}
	}
	return o
}

func (s *Server) handleChatCompletions(w http.ResponseWriter, r *http.Request) {
	var req ChatCompletionRequest
	if err := decodeJSON(r, &req, false); err != nil {
		writeOpenAIError(w, err)
		return
	}
	bad := func(format string, args ...any) {
		writeOpenAIError(w, errorf(http.StatusBadRequest, CodeBadRequest, format, args...))
	}
	switch {
	case len(req.Tools) > 0 && string(req.Tools) != "null" && string(req.Tools) != "[]":
		bad("tools are not supported; use the pddl extension for constrained plans")
		return
	case isStructuredFormat(req.ResponseFormat):
		bad("response_format other than text is not supported; use the pddl extension for constrained plans")
		return
	case hasLogitBias(req.LogitBias):
		bad("logit_bias is not supported")
		return
	}
	p := oaiParams{model: req.Model, maxTokens: req.MaxTokens, temperature: req.Temperature, topP: req.TopP,
		seed: req.Seed, n: req.N, stop: req.Stop, stream: req.Stream, logprobs: req.Logprobs,
		topLogprobs: req.TopLogprobs, pddl: req.PDDL}
	if req.MaxCompletionTokens > 0 {
		p.maxTokens = req.MaxCompletionTokens
	}
	if req.StreamOptions != nil {
		p.includeUsage = req.StreamOptions.IncludeUsage
	}
	if err := p.check(s.opts.MaxTokens); err != nil {
		writeOpenAIError(w, err)
		return
	}
	shape := chatShape{}
	if p.pddl != nil {
		s.servePDDL(w, r, &p, shape)
		return
	}
	if len(req.Messages) == 0 {
		bad("messages: at least one message is required")
		return
	}
	msgs := make([]models.Message, 0, len(req.Messages))
	for i, m := range req.Messages {
		role := m.Role
		switch role {
		case "developer":
			role = "system"
		case "system", "user", "assistant", "tool":
		default:
			bad("messages[%d]: role %q is not supported (want system, developer, user, assistant or tool)", i, m.Role)
			return
		}
		msgs = append(msgs, models.Message{Role: role, Content: string(m.Content)})
	}
	render := func(lm models.LM) ([][]int32, error) {
		text, err := lm.RenderChat(msgs, models.ChatOptions{})
		if err != nil {
			return nil, errorf(http.StatusBadRequest, CodeBadRequest, "rendering the chat: %v", err)
		}
		toks, err := lm.Tokenize(text, true)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, CodeBadRequest, "tokenizing the chat: %v", err)
		}
		return [][]int32{toks}, nil
	}
	s.serveOpenAIGeneration(w, r, &p, render, shape)
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var req CompletionRequest
	if err := decodeJSON(r, &req, false); err != nil {
		writeOpenAIError(w, err)
		return
	}
	bad := func(format string, args ...any) {
		writeOpenAIError(w, errorf(http.StatusBadRequest, CodeBadRequest, format, args...))
	}
	switch {
	case req.Echo:
		bad("echo is not supported")
		return
	case req.Suffix != "":
		bad("suffix (fill in the middle) is not supported")
		return
	case hasLogitBias(req.LogitBias):
		bad("logit_bias is not supported")
		return
	}
	p := oaiParams{model: req.Model, maxTokens: req.MaxTokens, temperature: req.Temperature, topP: req.TopP,
		seed: req.Seed, n: req.N, stop: req.Stop, stream: req.Stream, pddl: req.PDDL}
	if req.Logprobs != nil {
		p.logprobs, p.topLogprobs = true, *req.Logprobs
	}
	if req.StreamOptions != nil {
		p.includeUsage = req.StreamOptions.IncludeUsage
	}
	if err := p.check(s.opts.MaxTokens); err != nil {
		writeOpenAIError(w, err)
		return
	}
	shape := textShape{}
	if p.pddl != nil {
		s.servePDDL(w, r, &p, shape)
		return
	}
	if len(req.Prompt) == 0 {
		bad("prompt: a string or a list of strings is required")
		return
	}
	if len(req.Prompt)*p.n > maxChoices {
		writeOpenAIError(w, errorf(http.StatusBadRequest, CodeOverCap, "%d prompts x n %d is above this server's cap of %d choices", len(req.Prompt), p.n, maxChoices))
		return
	}
	render := func(lm models.LM) ([][]int32, error) {
		var out [][]int32
		for i, text := range req.Prompt {
			toks, err := lm.Tokenize(text, true)
			if err != nil {
				return nil, errorf(http.StatusBadRequest, CodeBadRequest, "tokenizing prompt %d: %v", i, err)
			}
			if bos := lm.Vocab().BOS; bos >= 0 && (len(toks) == 0 || toks[0] != bos) {
				toks = append([]int32{bos}, toks...)
			}
			out = append(out, toks)
		}
		return out, nil
	}
	s.serveOpenAIGeneration(w, r, &p, render, shape)
}

// isStructuredFormat says whether response_format asks for more than text.
func isStructuredFormat(raw json.RawMessage) bool {
	if len(raw) == 0 || string(raw) == "null" {
		return false
	}
	var f struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(raw, &f) != nil || f.Type != "" && f.Type != "text"
}

// hasLogitBias says whether logit_bias holds any entry.
func hasLogitBias(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null" && s != "{}"
}

// oaiChoice is one generated choice.
type oaiChoice struct {
	index  int
	text   string
	reason string // OpenAI's finish_reason: stop or length
	tokens int
	lps    []tokenLogprob
}

// tokenLogprob is a generated token's log-probability with the most likely
// alternatives, before it takes a route's shape.
type tokenLogprob struct {
	token []byte
	lp    float64
	top   []tokenAlt
}

type tokenAlt struct {
	token []byte
	lp    float64
}

// oaiShape builds one route's answers: chat completions or text
// completions.
type oaiShape interface {
	prefix() string // of the completion id
	// chunk is a streamed piece of choice i; finish is "" until the last.
	chunk(id string, created int64, model string, i int, first bool, piece string, lps []tokenLogprob, finish string) any
	// usageChunk is the last chunk with include_usage.
	usageChunk(id string, created int64, model string, u Usage) any
	// final is the whole non-streamed answer.
	final(id string, created int64, model string, choices []oaiChoice, u Usage, nesy *PlanResponse) any
	// finishChunk closes a pddl answer with its certificate.
	finishChunk(id string, created int64, model string, finish string, nesy *PlanResponse) any
}

func strPtr(s string) *string { return &s }

// chatShape: POST /v1/chat/completions.
type chatShape struct{}

func (chatShape) prefix() string { return "chatcmpl-" }

func (chatShape) chunk(id string, created int64, model string, i int, first bool, piece string, lps []tokenLogprob, finish string) any {
	c := ChatChunkChoice{Index: i, Delta: ChatDelta{Content: piece}, Logprobs: chatLogprobs(lps)}
	if first {
		c.Delta.Role = "assistant"
	}
	if finish != "" {
		c.FinishReason = strPtr(finish)
	}
	return ChatCompletionChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, Choices: []ChatChunkChoice{c}}
}

func (chatShape) usageChunk(id string, created int64, model string, u Usage) any {
	return ChatCompletionChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, Choices: []ChatChunkChoice{}, Usage: &u}
}

func (chatShape) final(id string, created int64, model string, choices []oaiChoice, u Usage, nesy *PlanResponse) any {
	out := ChatCompletion{ID: id, Object: "chat.completion", Created: created, Model: model, Usage: u, Nesy: nesy, Choices: []ChatChoice{}}
	for _, c := range choices {
		out.Choices = append(out.Choices, ChatChoice{Index: c.index, FinishReason: c.reason, Logprobs: chatLogprobs(c.lps),
			Message: ChatMessage{Role: "assistant", Content: MessageContent(c.text)}})
	}
	return out
}

func (chatShape) finishChunk(id string, created int64, model string, finish string, nesy *PlanResponse) any {
	return ChatCompletionChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, Nesy: nesy,
		Choices: []ChatChunkChoice{{Index: 0, FinishReason: strPtr(finish)}}}
}

func tokenBytes(b []byte) []int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}

func chatLogprobs(lps []tokenLogprob) *ChatLogprobs {
	if lps == nil {
		return nil
	}
	out := &ChatLogprobs{Content: make([]TokenLogprob, 0, len(lps))}
	for _, t := range lps {
		tl := TokenLogprob{Token: string(t.token), Logprob: t.lp, Bytes: tokenBytes(t.token), TopLogprobs: []TopLogprob{}}
		for _, a := range t.top {
			tl.TopLogprobs = append(tl.TopLogprobs, TopLogprob{Token: string(a.token), Logprob: a.lp, Bytes: tokenBytes(a.token)})
		}
		out.Content = append(out.Content, tl)
	}
	return out
}

// textShape: POST /v1/completions.
type textShape struct{}

func (textShape) prefix() string { return "cmpl-" }

func (textShape) chunk(id string, created int64, model string, i int, first bool, piece string, lps []tokenLogprob, finish string) any {
	c := TextChoice{Index: i, Text: piece, Logprobs: textLogprobs(lps, 0)}
	if finish != "" {
		c.FinishReason = strPtr(finish)
	}
	return TextCompletion{ID: id, Object: "text_completion", Created: created, Model: model, Choices: []TextChoice{c}}
}

func (textShape) usageChunk(id string, created int64, model string, u Usage) any {
	return TextCompletion{ID: id, Object: "text_completion", Created: created, Model: model, Choices: []TextChoice{}, Usage: &u}
}

func (textShape) final(id string, created int64, model string, choices []oaiChoice, u Usage, nesy *PlanResponse) any {
	out := TextCompletion{ID: id, Object: "text_completion", Created: created, Model: model, Usage: &u, Nesy: nesy, Choices: []TextChoice{}}
	for _, c := range choices {
		out.Choices = append(out.Choices, TextChoice{Index: c.index, Text: c.text, FinishReason: strPtr(c.reason), Logprobs: textLogprobs(c.lps, 0)})
	}
	return out
}

func (textShape) finishChunk(id string, created int64, model string, finish string, nesy *PlanResponse) any {
	return TextCompletion{ID: id, Object: "text_completion", Created: created, Model: model, Nesy: nesy,
		Choices: []TextChoice{{Index: 0, FinishReason: strPtr(finish)}}}
}

// textLogprobs builds the legacy shape; offset is the text offset of the
// first token.
func textLogprobs(lps []tokenLogprob, offset int) *TextLogprobs {
	if lps == nil {
		return nil
	}
	out := &TextLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	for _, t := range lps {
		out.Tokens = append(out.Tokens, string(t.token))
		out.TokenLogprobs = append(out.TokenLogprobs, t.lp)
		top := map[string]float64{}
		for _, a := range t.top {
			top[string(a.token)] = a.lp
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
		out.TextOffset = append(out.TextOffset, offset)
		offset += len(t.token)
	}
	return out
}

// logprobOf returns tok's log-probability under the softmax of logits and
// the top most likely tokens (control tokens other than the end tokens
// left out, as sample leaves them out).
func logprobOf(v *models.Vocab, tok int32, logits []float32, top int) tokenLogprob {
	mx := math.Inf(-1)
	for _, x := range logits {
		if f := float64(x); f > mx && !math.IsNaN(f) {
			mx = f
		}
	}
	var sum float64
	for _, x := range logits {
		if f := float64(x); !math.IsNaN(f) {
			sum += math.Exp(f - mx)
		}
	}
	lse := mx + math.Log(sum)
	text := func(id int) []byte {
		if id < len(v.Text) {
			return v.Text[id]
		}
		return nil
	}
	out := tokenLogprob{token: text(int(tok)), lp: float64(logits[tok]) - lse}
	if top <= 0 {
		return out
	}
	// Top-k by insertion into a short sorted list: k <= 20.
	best := make([]int, 0, top+1)
	for i, x := range logits {
		if i < len(v.Special) && v.Special[i] || math.IsNaN(float64(x)) {
			continue
		}
		if len(best) == top && x <= logits[best[top-1]] {
			continue
		}
		j := len(best)
		best = append(best, i)
		for j > 0 && logits[best[j-1]] < x {
			best[j] = best[j-1]
			j--
		}
		best[j] = i
		if len(best) > top {
			best = best[:top]
		}
	}
	for _, id := range best {
		out.top = append(out.top, tokenAlt{token: text(id), lp: float64(logits[id]) - lse})
	}
	return out
}

// newCompletionID returns a fresh completion id.
func newCompletionID(prefix string) string { return prefix + strings.ToLower(rand.Text()) }

// serveOpenAIGeneration runs plain generation for the OpenAI routes:
// admission, model, then n choices for each rendered prompt, one after the
// other on the request's admission slot, streamed or answered at once.
func (s *Server) serveOpenAIGeneration(w http.ResponseWriter, r *http.Request, p *oaiParams, render func(models.LM) ([][]int32, error), shape oaiShape) {
	if _, _, err := s.models.resolve(p.model); err != nil {
		writeOpenAIError(w, err) // unknown model: no need to queue
		return
	}
	ctx, cancel := s.workContext(r)
	defer cancel()
	release, _, err := s.admit(ctx)
	if err != nil {
		writeOpenAIError(w, err)
		return
	}
	defer release()
	entry, done, err := s.models.acquire(ctx, p.model)
	if err != nil {
		if ae := asAPIError(err); ae.Code == CodeModelBusy {
			s.m.rejected.WithLabelValues(CodeModelBusy).Inc()
		}
		writeOpenAIError(w, err)
		return
	}
	defer done()
	lm := entry.engine
	prompts, err := render(lm)
	if err != nil {
		writeOpenAIError(w, err)
		return
	}
	id, created := newCompletionID(shape.prefix()), time.Now().Unix()
	var sse *sseWriter
	if p.stream {
		sse = newSSE(w)
	}
	var usage Usage
	var choices []oaiChoice
	for pi, prompt := range prompts {
		usage.PromptTokens += int64(len(prompt))
		for k := range p.n {
			i := pi*p.n + k
			o := p.genOptions(i, s.opts.MaxTokens)
			var pending []tokenLogprob // logprobs not yet sent
			if p.logprobs {
				pending = []tokenLogprob{}
				vocab := lm.Vocab()
				o.onToken = func(tok int32, logits []float32) {
					pending = append(pending, logprobOf(vocab, tok, logits, p.topLogprobs))
				}
			}
			first := true
			onText := func(string) {}
			if sse != nil {
				onText = func(piece string) {
					if piece == "" {
						return
					}
					sse.send(shape.chunk(id, created, entry.name, i, first, piece, pending, ""))
					first = false
					if pending != nil {
						pending = []tokenLogprob{}
					}
				}
			}
			res, err := generate(ctx, lm, prompt, nil, o, onText)
			s.countTokens(int64(len(prompt)), int64(len(res.tokens)), int64(len(prompt)+len(res.tokens)), res.modelCalls)
			if err != nil {
				if r.Context().Err() != nil {
					return // the client is gone
				}
				if s.workCtx.Err() != nil {
					err = errShuttingDown
				}
				if sse != nil && sse.isStarted() {
					_, body := openAIErrorBody(err)
					sse.send(body)
					sse.done()
					return
				}
				writeOpenAIError(w, err)
				return
			}
			usage.CompletionTokens += int64(len(res.tokens))
			if sse != nil {
				sse.send(shape.chunk(id, created, entry.name, i, first, "", pending, res.reason))
				continue
			}
			var lps []tokenLogprob
			if p.logprobs {
				lps = pending
			}
			choices = append(choices, oaiChoice{index: i, text: res.text, reason: res.reason, tokens: len(res.tokens), lps: lps})
		}
	}
	usage.TotalTokens = usage.PromptTokens + usage.CompletionTokens
	if sse != nil {
		if p.includeUsage {
			sse.send(shape.usageChunk(id, created, entry.name, usage))
		}
		sse.done()
		return
	}
	writeJSON(w, http.StatusOK, shape.final(id, created, entry.name, choices, usage, nil))
}

// errNoBody marks an inner plan answer that could not be read.
var errNoBody = errors.New("the plan handler wrote no readable answer")

// planCapture is the http.ResponseWriter POST /v1/plan's handler writes
// to when a pddl completion runs it: it keeps the status and body, and with
// onLine hands each NDJSON line of a stream over as it is written.
type planCapture struct {
	header http.Header
	status int
	buf    bytes.Buffer
	onLine func(line []byte)
}

// Header returns the captured header map.
func (c *planCapture) Header() http.Header {
	if c.header == nil {
		c.header = http.Header{}
	}
	return c.header
}

// WriteHeader records the status.
func (c *planCapture) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}

// Write buffers the body, handing complete lines of a 200 stream to onLine.
func (c *planCapture) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.buf.Write(b)
	if c.onLine != nil && c.status == http.StatusOK {
		for {
			i := bytes.IndexByte(c.buf.Bytes(), '\n')
			if i < 0 {
				break
			}
			c.onLine(c.buf.Next(i + 1))
		}
	}
	return len(b), nil
}

// Flush is a no-op: lines are handed over as they are written.
func (c *planCapture) Flush() {}
