package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// openAIClient is OpenAI's own Go client pointed at ts.
func openAIClient(ts *testServer, opts ...option.RequestOption) openai.Client {
	base := []option.RequestOption{option.WithBaseURL(ts.url + "/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0)}
	return openai.NewClient(append(base, opts...)...)
}

// nesyCertificate reads the "nesy" extension field of an answer.
func nesyCertificate(t *testing.T, raw string) PlanResponse {
	t.Helper()
	var body struct {
		Nesy *PlanResponse `json:"nesy"`
	}
	mustJSON(t, []byte(raw), &body)
	if body.Nesy == nil {
		t.Fatalf("no nesy certificate in %s", raw)
	}
	return *body.Nesy
}

// TestOpenAIPlainChat drives plain generation through openai-go: streamed
// pieces concatenate to the non-streamed answer, usage counts add up, n
// gives that many choices, stop cuts the answer, logprobs come per token.
func TestOpenAIPlainChat(t *testing.T) {
	ts := startServer(t, Options{})
	c := openAIClient(ts)
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You write plans."), openai.UserMessage("pick up the red block")}
	greedy := openai.ChatCompletionNewParams{Model: ts.model, Messages: msgs, Temperature: openai.Float(0), MaxTokens: openai.Int(16)}

	whole, err := c.Chat.Completions.New(ctx, greedy)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Choices) != 1 || whole.Object != "chat.completion" || whole.Model != ts.model || !strings.HasPrefix(whole.ID, "chatcmpl-") {
		t.Fatalf("answer %s", whole.RawJSON())
	}
	ch := whole.Choices[0]
	u := whole.Usage
	if ch.Message.Role != "assistant" || u.PromptTokens == 0 || u.CompletionTokens > 16 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("choice %+v usage %+v", ch.Message, u)
	}
	if (ch.FinishReason == "length") != (u.CompletionTokens == 16) {
		t.Errorf("finish_reason %q after %d tokens", ch.FinishReason, u.CompletionTokens)
	}

	t.Run("stream", func(t *testing.T) {
		p := greedy
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := c.Chat.Completions.NewStreaming(ctx, p)
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		for stream.Next() {
			acc.AddChunk(stream.Current())
			chunks++
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != ch.Message.Content || acc.Choices[0].FinishReason != ch.FinishReason {
			t.Errorf("streamed %q (%s), whole %q (%s)", acc.Choices[0].Message.Content, acc.Choices[0].FinishReason, ch.Message.Content, ch.FinishReason)
		}
		if acc.Usage.CompletionTokens != u.CompletionTokens || acc.Usage.PromptTokens != u.PromptTokens {
			t.Errorf("streamed usage %+v, whole %+v", acc.Usage, u)
		}
		if chunks < 2 {
			t.Errorf("%d chunks", chunks)
		}
	})

	t.Run("n_and_seed", func(t *testing.T) {
		p := openai.ChatCompletionNewParams{Model: ts.model, Messages: msgs, N: openai.Int(3), Seed: openai.Int(42),
			Temperature: openai.Float(1.5), MaxTokens: openai.Int(8)}
		a, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Choices) != 3 || len(b.Choices) != 3 {
			t.Fatalf("%d and %d choices", len(a.Choices), len(b.Choices))
		}
		for i := range a.Choices {
			if a.Choices[i].Index != int64(i) || a.Choices[i].Message.Content != b.Choices[i].Message.Content {
				t.Errorf("choice %d: %q vs %q (the same seed)", i, a.Choices[i].Message.Content, b.Choices[i].Message.Content)
			}
		}
	})

	t.Run("stop", func(t *testing.T) {
		text := ch.Message.Content
		if len(text) < 6 {
			t.Skipf("the random model wrote only %q", text)
		}
		stop := text[3:6]
		want := text[:strings.Index(text, stop)]
		p := greedy
		p.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{stop}}
		got, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].Message.Content != want || got.Choices[0].FinishReason != "stop" {
			t.Errorf("stop %q: got %q (%s), want %q", stop, got.Choices[0].Message.Content, got.Choices[0].FinishReason, want)
		}
	})

	t.Run("tool_message", func(t *testing.T) {
		// An OpenAI client's tool round: the assistant's call, then the
		// tool's result. The result reaches the prompt (its tokens are
		// counted), rendered by the model's chat template.
		withTool := append(slices.Clone(msgs),
			openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
				ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: "call_1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "where", Arguments: "{}"}}}}}},
			openai.ToolMessage("the red block is on the green block", "call_1"))
		p := greedy
		p.Messages = withTool
		got, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if got.Usage.PromptTokens <= u.PromptTokens+5 {
			t.Errorf("prompt of %d tokens with the tool's result, %d without", got.Usage.PromptTokens, u.PromptTokens)
		}
	})

	t.Run("logprobs", func(t *testing.T) {
		p := greedy
		p.Logprobs, p.TopLogprobs = openai.Bool(true), openai.Int(3)
		got, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		lp := got.Choices[0].Logprobs.Content
		if int64(len(lp)) != got.Usage.CompletionTokens {
			t.Fatalf("%d logprobs for %d tokens", len(lp), got.Usage.CompletionTokens)
		}
		for i, tl := range lp {
			// Greedy decoding picks the most likely token: the first of
			// the top list.
			if tl.Logprob > 0 || len(tl.TopLogprobs) != 3 || tl.TopLogprobs[0].Logprob != tl.Logprob || tl.TopLogprobs[0].Token != tl.Token {
				t.Errorf("token %d: %+v", i, tl)
			}
		}
	})
}

// TestOpenAICompletions drives the legacy text completion route.
func TestOpenAICompletions(t *testing.T) {
	ts := startServer(t, Options{})
	c := openAIClient(ts)
	ctx := context.Background()
	p := openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(ts.model), MaxTokens: openai.Int(10), Temperature: openai.Float(0),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("(define (problem")}, Logprobs: openai.Int(2)}
	whole, err := c.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Choices) != 1 || whole.Object != "text_completion" || whole.Usage.PromptTokens == 0 {
		t.Fatalf("answer %s", whole.RawJSON())
	}
	if n := len(whole.Choices[0].Logprobs.Tokens); int64(n) != whole.Usage.CompletionTokens {
		t.Errorf("%d logprob tokens for %d completion tokens", n, whole.Usage.CompletionTokens)
	}
	stream := c.Completions.NewStreaming(ctx, p)
	var text strings.Builder
	finish := ""
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			text.WriteString(ch.Text)
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != whole.Choices[0].Text || finish != string(whole.Choices[0].FinishReason) {
		t.Errorf("streamed %q (%s), whole %q (%s)", text.String(), finish, whole.Choices[0].Text, whole.Choices[0].FinishReason)
	}

	models, err := c.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.ID)
		if m.Object != "model" || m.OwnedBy == "" {
			t.Errorf("model %+v", m)
		}
	}
	if !slices.Contains(ids, ts.model) || !slices.Contains(ids, "tiny-llama") {
		t.Errorf("models %v", ids)
	}
}

// TestOpenAIPDDL: the pddl extension makes the answer a plan, one action
// per line, valid and reaching the goal by an independent validation, with
// the certificate in "nesy"; streamed and not, chat and text completions.
func TestOpenAIPDDL(t *testing.T) {
	ts := startServer(t, Options{})
	c := openAIClient(ts)
	ctx := context.Background()
	constraint := map[string]any{"domain": bwDomain, "problem": bwShort, "method": "cmcts", "seconds": 60,
		"search": map[string]any{"seed": 1}, "trace": true}
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Stack a on b.")}
	params := openai.ChatCompletionNewParams{Model: ts.model, Messages: msgs}

	check := func(t *testing.T, content string, cert PlanResponse) {
		t.Helper()
		plan := strings.Split(content, "\n")
		if !slices.Equal(plan, cert.Plan) {
			t.Errorf("content %q, certificate plan %q", content, cert.Plan)
		}
		v := validate(t, bwDomain, bwShort, plan)
		if !v.Valid || !v.GoalReached || !cert.Valid || !cert.GoalReached || !cert.Revalidated {
			t.Errorf("validation %+v, certificate valid=%v goal=%v revalidated=%v", v, cert.Valid, cert.GoalReached, cert.Revalidated)
		}
		if cert.Method != "cmcts" || cert.Simulations == 0 || len(cert.States) != len(plan)+1 {
			t.Errorf("certificate %+v", cert)
		}
	}

	t.Run("chat", func(t *testing.T) {
		got, err := c.Chat.Completions.New(ctx, params, option.WithJSONSet("pddl", constraint))
		if err != nil {
			t.Fatal(err)
		}
		cert := nesyCertificate(t, got.RawJSON())
		check(t, got.Choices[0].Message.Content, cert)
		if got.Choices[0].FinishReason != "stop" || got.Usage.PromptTokens != cert.PromptTokens || got.Usage.CompletionTokens != cert.GeneratedTokens {
			t.Errorf("finish %q usage %+v certificate tokens %d/%d", got.Choices[0].FinishReason, got.Usage, cert.PromptTokens, cert.GeneratedTokens)
		}
	})

	t.Run("chat_stream", func(t *testing.T) {
		p := params
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := c.Chat.Completions.NewStreaming(ctx, p, option.WithJSONSet("pddl", constraint))
		var acc openai.ChatCompletionAccumulator
		var cert *PlanResponse
		for stream.Next() {
			chunk := stream.Current()
			acc.AddChunk(chunk)
			if _, ok := chunk.JSON.ExtraFields["nesy"]; ok {
				pr := nesyCertificate(t, chunk.RawJSON())
				cert = &pr
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if cert == nil {
			t.Fatal("no chunk carried the certificate")
		}
		check(t, acc.Choices[0].Message.Content, *cert)
		if acc.Usage.PromptTokens != cert.PromptTokens {
			t.Errorf("usage %+v", acc.Usage)
		}
	})

	t.Run("completions", func(t *testing.T) {
		got, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(ts.model),
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("")}}, option.WithJSONSet("pddl", constraint))
		if err != nil {
			t.Fatal(err)
		}
		check(t, got.Choices[0].Text, nesyCertificate(t, got.RawJSON()))
	})
}

// TestOpenAIErrors: errors come in OpenAI's shape, with the statuses and
// codes POST /v1/plan uses, before a stream starts and inside one.
func TestOpenAIErrors(t *testing.T) {
	ts := startServer(t, Options{Token: "secret"})
	ctx := context.Background()
	c := openAIClient(ts, option.WithAPIKey("secret"))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}
	pddlSet := func(m map[string]any) option.RequestOption { return option.WithJSONSet("pddl", m) }
	tests := []struct {
		name   string
		client openai.Client
		params openai.ChatCompletionNewParams
		opts   []option.RequestOption
		status int
		typ    string
		code   string
		// extra is an extension field the error object must carry.
		extra string
	}{
		{"no token", openAIClient(ts), openai.ChatCompletionNewParams{Model: ts.model, Messages: msgs}, nil, 401, "authentication_error", CodeUnauthorized, ""},
		{"unknown model", c, openai.ChatCompletionNewParams{Model: "no-such-model", Messages: msgs}, nil, 404, "invalid_request_error", CodeModelNotFound, ""},
		{"no messages", c, openai.ChatCompletionNewParams{Model: ts.model}, nil, 400, "invalid_request_error", CodeBadRequest, ""},
		{"n over cap", c, openai.ChatCompletionNewParams{Model: ts.model, Messages: msgs, N: openai.Int(99)}, nil, 400, "invalid_request_error", CodeOverCap, ""},
		{"bad temperature", c, openai.ChatCompletionNewParams{Model: ts.model, Messages: msgs, Temperature: openai.Float(3)}, nil, 400, "invalid_request_error", CodeBadRequest, ""},
		{"tools", c, openai.ChatCompletionNewParams{Model: ts.model, Messages: msgs}, []option.RequestOption{option.WithJSONSet("tools", []any{map[string]any{"type": "function"}})}, 400, "invalid_request_error", CodeBadRequest, ""},
		{"bad pddl", c, openai.ChatCompletionNewParams{Model: ts.model, Messages: msgs},
			[]option.RequestOption{pddlSet(map[string]any{"domain": "(define (domain", "problem": bwShort})}, 422, "invalid_request_error", CodeBadPDDL, "positions"},
		{"unsolvable", c, openai.ChatCompletionNewParams{Model: ts.model, Messages: msgs},
			[]option.RequestOption{pddlSet(map[string]any{"domain": bwUnsolvableDomain, "problem": bwUnsolvableProblem})}, 422, "invalid_request_error", CodeUnsolvable, ""},
		{"pddl with n", c, openai.ChatCompletionNewParams{Model: ts.model, Messages: msgs, N: openai.Int(2)},
			[]option.RequestOption{pddlSet(map[string]any{"domain": bwDomain, "problem": bwShort})}, 400, "invalid_request_error", CodeBadRequest, ""},
		{"pddl unknown method", c, openai.ChatCompletionNewParams{Model: ts.model, Messages: msgs},
			[]option.RequestOption{pddlSet(map[string]any{"domain": bwDomain, "problem": bwShort, "method": "magic"})}, 400, "invalid_request_error", CodeBadRequest, ""},
		{"budget exhausted", c, openai.ChatCompletionNewParams{Model: ts.model, Messages: msgs},
			[]option.RequestOption{pddlSet(map[string]any{"domain": bwDomain, "problem": bwProblem, "method": "cmcts", "simulations": 1})}, 422, "invalid_request_error", CodeBudgetExhausted, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.client.Chat.Completions.New(ctx, tt.params, tt.opts...)
			var ae *openai.Error
			if !errors.As(err, &ae) {
				t.Fatalf("error %v, want an *openai.Error", err)
			}
			if ae.StatusCode != tt.status || ae.Type != tt.typ || ae.Code != tt.code || ae.Message == "" {
				t.Errorf("status %d type %q code %q message %q, want %d %q %q", ae.StatusCode, ae.Type, ae.Code, ae.Message, tt.status, tt.typ, tt.code)
			}
			if _, ok := ae.JSON.ExtraFields[tt.extra]; tt.extra != "" && !ok {
				t.Errorf("error lacks %q: %s", tt.extra, ae.RawJSON())
			}
		})
	}

	t.Run("budget exhausted body", func(t *testing.T) {
		// The partial plan comes beside the error, as POST /v1/plan's
		// result does.
		status, _, body := ts.do("POST", "/v1/chat/completions", map[string]any{"model": ts.model, "messages": []any{},
			"pddl": map[string]any{"domain": bwDomain, "problem": bwProblem, "method": "cmcts", "simulations": 1}},
			"Authorization", "Bearer secret")
		var e OpenAIErrorBody
		mustJSON(t, body, &e)
		if status != 422 || e.Error.Code != CodeBudgetExhausted || e.Nesy == nil || !e.Nesy.Valid || e.Nesy.GoalReached {
			t.Errorf("%d %s", status, body)
		}
	})

	t.Run("in stream", func(t *testing.T) {
		stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: ts.model, Messages: msgs},
			pddlSet(map[string]any{"domain": bwDomain, "problem": bwProblem, "method": "cmcts", "simulations": 1}))
		for stream.Next() {
		}
		var se *ssestream.StreamError
		if err := stream.Err(); !errors.As(err, &se) || !strings.Contains(string(se.Event.Data), CodeBudgetExhausted) {
			t.Errorf("stream error %v", err)
		}
	})

	t.Run("wrong method", func(t *testing.T) {
		status, _, body := ts.do("GET", "/v1/chat/completions", nil, "Authorization", "Bearer secret")
		var e OpenAIErrorBody
		mustJSON(t, body, &e)
		if status != http.StatusMethodNotAllowed || e.Error.Code != CodeMethod {
			t.Errorf("%d %s", status, body)
		}
	})

	t.Run("malformed", func(t *testing.T) {
		status, _, body := ts.do("POST", "/v1/completions", `{"model": `, "Authorization", "Bearer secret")
		var e OpenAIErrorBody
		mustJSON(t, body, &e)
		if status != 400 || e.Error.Type != "invalid_request_error" || e.Error.Code != CodeBadRequest {
			t.Errorf("%d %s", status, body)
		}
	})
}

// TestMessageContent reads both content forms OpenAI clients send.
func TestMessageContent(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{`"hello"`, "hello", false},
		{`null`, "", false},
		{`[{"type":"text","text":"a"},{"type":"text","text":"b"}]`, "ab", false},
		{`[{"type":"image_url","image_url":{"url":"x"}}]`, "", true},
		{`42`, "", true},
	}
	for _, tt := range tests {
		var c MessageContent
		err := json.Unmarshal([]byte(tt.in), &c)
		if (err != nil) != tt.wantErr || string(c) != tt.want {
			t.Errorf("%s: %q, %v", tt.in, c, err)
		}
	}
}

// TestOpenAIFieldForms pins how the loosely typed OpenAI fields are read.
func TestOpenAIFieldForms(t *testing.T) {
	lists := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{`"x"`, []string{"x"}, false},
		{`["a","b"]`, []string{"a", "b"}, false},
		{`[]`, []string{}, false},
		{`[1,2]`, nil, true},
	}
	for _, tt := range lists {
		var l StringList
		err := json.Unmarshal([]byte(tt.in), &l)
		if (err != nil) != tt.wantErr || !tt.wantErr && !slices.Equal([]string(l), tt.want) {
			t.Errorf("StringList %s: %q, %v", tt.in, l, err)
		}
	}
	formats := []struct {
		in   string
		want bool
	}{
		{``, false}, {`null`, false}, {`{"type":"text"}`, false}, {`{"type":"json_object"}`, true},
		{`{"type":"json_schema","json_schema":{}}`, true}, {`"bad"`, true},
	}
	for _, tt := range formats {
		if got := isStructuredFormat(json.RawMessage(tt.in)); got != tt.want {
			t.Errorf("isStructuredFormat(%s) = %v", tt.in, got)
		}
	}
	for in, want := range map[string]bool{``: false, `null`: false, `{}`: false, ` {} `: false, `{"1": 5}`: true} {
		if got := hasLogitBias(json.RawMessage(in)); got != want {
			t.Errorf("hasLogitBias(%q) = %v", in, got)
		}
	}
	for stop, want := range map[string]string{"goal": "stop", "end_token": "stop", "dead_end": "stop", "time": "length",
		"simulations": "length", "max_tokens": "length", "max_actions": "length", "tokens": "length"} {
		if got := planFinishReason(stop); got != want {
			t.Errorf("planFinishReason(%q) = %q, want %q", stop, got, want)
		}
	}
}
