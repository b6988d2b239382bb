package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nesy-dev/nesy/planner"
)

// PDDLConstraint is the "pddl" extension of the OpenAI-compatible routes
// (as vLLM takes guided_* fields and llama.cpp a grammar): the answer
// becomes a plan for this task, executable by construction, made by POST
// /v1/plan's own handler (the same checks, grounding, admission, planner
// and re-validation). Its fields mean what POST /v1/plan's fields of the
// same names mean; model, max_tokens, temperature, top_p and seed come
// from the completion request. The prompt is built from the task as POST
// /v1/plan builds it: the request's messages or prompt are not read.
type PDDLConstraint struct {
	Domain  string          `json:"domain,omitempty"`
	Problem string          `json:"problem,omitempty"`
	Env     string          `json:"env,omitempty"`
	Task    string          `json:"task,omitempty"`
	Lexicon json.RawMessage `json:"lexicon,omitempty"`
	// Method is greedy, cgreedy, mcts, cmcts or thinking; "" means cmcts.
	Method             string        `json:"method,omitempty"`
	Seconds            float64       `json:"seconds,omitempty"`
	Simulations        int           `json:"simulations,omitempty"`
	MaxEvaluatedTokens int64         `json:"max_evaluated_tokens,omitempty"`
	MaxActions         int           `json:"max_actions,omitempty"`
	End                string        `json:"end,omitempty"`
	Heuristic          string        `json:"heuristic,omitempty"`
	NoRevisit          *bool         `json:"no_revisit,omitempty"`
	Search             *SearchParams `json:"search,omitempty"`
	Think              bool          `json:"think,omitempty"`
	// Trace puts the state after every action into the certificate.
	Trace bool `json:"trace,omitempty"`
}

// planRequest is the POST /v1/plan request a pddl completion stands for.
func (p *oaiParams) planRequest() PlanRequest {
	c := p.pddl
	req := PlanRequest{Domain: c.Domain, Problem: c.Problem, Env: c.Env, Task: c.Task, Lexicon: c.Lexicon,
		Model: p.model, Method: c.Method, Seconds: c.Seconds, Simulations: c.Simulations, MaxTokens: p.maxTokens,
		MaxEvaluatedTokens: c.MaxEvaluatedTokens, MaxActions: c.MaxActions, End: c.End, Heuristic: c.Heuristic, NoRevisit: c.NoRevisit,
		Search: c.Search, Think: c.Think, Trace: c.Trace, Stream: p.stream}
	if p.temperature != nil || p.topP != nil || p.seed != nil {
		sp := &SamplingParams{}
		if p.temperature != nil {
			sp.Temperature = *p.temperature
		}
		if p.topP != nil && *p.topP < 1 {
			sp.TopP = *p.topP
		}
		if p.seed != nil {
			sp.Seed = uint64(*p.seed)
		}
		req.Sampling = sp
	}
	return req
}

// planFinishReason maps a plan's stop reason to OpenAI's finish_reason:
// "length" where a budget cut the plan, "stop" otherwise.
func planFinishReason(stop string) string {
	if planner.Stop(stop).BudgetRanOut() {
		return "length"
	}
	return "stop"
}

// planUsage counts a plan's tokens as OpenAI's usage: the prompt, and the
// plan's generated tokens (a search's other evaluated tokens are in the
// certificate).
func planUsage(resp *PlanResponse) Usage {
	return Usage{PromptTokens: resp.PromptTokens, CompletionTokens: resp.GeneratedTokens + resp.ThinkingTokens,
		TotalTokens: resp.PromptTokens + resp.GeneratedTokens + resp.ThinkingTokens}
}

// servePDDL answers a completion request with a pddl extension by running
// POST /v1/plan's handler on the equivalent plan request, so checking,
// grounding, admission, planning and re-validation are the plan route's
// own; its answer (or NDJSON stream) is translated into the route's shape.
func (s *Server) servePDDL(w http.ResponseWriter, r *http.Request, p *oaiParams, shape oaiShape) {
	body, err := json.Marshal(p.planRequest())
	if err != nil {
		writeOpenAIError(w, fmt.Errorf("encoding the plan request: %w", err))
		return
	}
	inner := r.Clone(r.Context())
	inner.Body = io.NopCloser(bytes.NewReader(body))
	inner.ContentLength = int64(len(body))
	inner.URL.Path = "/v1/plan"
	capture := &planCapture{}
	id, created := newCompletionID(shape.prefix()), time.Now().Unix()

	if !p.stream {
		s.handlePlan(capture, inner)
		if capture.status != http.StatusOK {
			writeOpenAIError(w, capturedError(capture))
			return
		}
		var resp PlanResponse
		if err := json.Unmarshal(capture.buf.Bytes(), &resp); err != nil {
			writeOpenAIError(w, fmt.Errorf("%w: %v", errNoBody, err))
			return
		}
		choice := oaiChoice{text: strings.Join(resp.Plan, "\n"), reason: planFinishReason(resp.StopReason), tokens: int(resp.GeneratedTokens)}
		writeJSON(w, http.StatusOK, shape.final(id, created, resp.Model, []oaiChoice{choice}, planUsage(&resp), &resp))
		return
	}

	sse := newSSE(w)
	model := p.model
	actions := 0
	ended := false
	capture.onLine = func(line []byte) {
		var ev PlanEvent
		if err := json.Unmarshal(line, &ev); err != nil || ended {
			return
		}
		switch ev.Event {
		case "start":
			model = ev.Model
			sse.send(shape.chunk(id, created, model, 0, true, "", nil, ""))
		case "search":
			sse.comment(fmt.Sprintf("search seconds=%.1f evaluated_tokens=%d model_calls=%d", ev.Seconds, ev.EvaluatedTokens, ev.ModelCalls))
		case "action":
			piece := ev.Action
			if actions > 0 {
				piece = "\n" + piece
			}
			actions++
			sse.send(shape.chunk(id, created, model, 0, false, piece, nil, ""))
		case "result":
			ended = true
			res := ev.Result
			if res == nil {
				res = &PlanResponse{}
			}
			sse.send(shape.finishChunk(id, created, model, planFinishReason(res.StopReason), res))
			if p.includeUsage {
				sse.send(shape.usageChunk(id, created, model, planUsage(res)))
			}
			sse.done()
		case "error":
			ended = true
			ae := ev.Error
			if ae == nil {
				ae = errorf(http.StatusInternalServerError, CodeInternal, "the plan stream failed without a message")
			}
			_, eb := openAIErrorBody(ae)
			sse.send(eb)
			sse.done()
		}
	}
	s.handlePlan(capture, inner)
	switch {
	case capture.status != http.StatusOK && capture.status != 0:
		// Refused before the stream started: an ordinary error answer.
		writeOpenAIError(w, capturedError(capture))
	case !ended && r.Context().Err() == nil:
		_, eb := openAIErrorBody(errorf(http.StatusInternalServerError, CodeInternal, "the plan stream ended without a result"))
		sse.send(eb)
		sse.done()
	}
}

// capturedError reads the plan handler's error answer back into an
// apiError with its status.
func capturedError(c *planCapture) *apiError {
	var ae apiError
	if err := json.Unmarshal(c.buf.Bytes(), &ae); err != nil || ae.Message == "" {
		return errorf(http.StatusInternalServerError, CodeInternal, "%v: status %d: %s", errNoBody, c.status, c.buf.String())
	}
	ae.Status = c.status
	return &ae
}
