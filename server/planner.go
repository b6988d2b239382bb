package server

import (
	"context"
	"errors"
	"fmt"
	"github.com/nesy-dev/nesy/constraint"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/mcts"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/trie"
)

// progressEvery is how often a streamed search reports its progress.
const progressEvery = 500 * time.Millisecond

// indexFor returns the model's vocabulary index for constrained decoding,
// built once per loaded model and shared by every request.
func (e *modelEntry) indexFor() (*trie.Index, error) {
	e.once.Do(func() {
		e.extra, e.exErr = constraint.NewIndex(e.engine)
	})
	if e.exErr != nil {
		return nil, e.exErr
	}
	return e.extra.(*trie.Index), nil
}

// runPlanner runs the request's method on its model: greedy and cgreedy
// through package decoder, mcts and cmcts through package mcts. The
// request's seconds budget is a deadline on the planner; when it (or
// another budget) runs out the plan so far is returned with budgetOut set.
// A cancelled ctx (client gone, shutdown) returns ctx's error.
func (s *Server) runPlanner(ctx context.Context, job *planJob) (out planOutcome, err error) {
	// A panic in a planner is an internal error of this request, answered
	// as such even when a stream has started (the recover middleware can
	// only answer requests whose headers are not sent yet).
	defer func() {
		if p := recover(); p != nil {
			s.m.panics.Inc()
			s.log.Error("panic in planner", "method", job.req.Method, "panic", p, "stack", string(debug.Stack()))
			out, err = planOutcome{}, errorf(http.StatusInternalServerError, CodeInternal, "internal error in the %s planner: %v", job.req.Method, p)
		}
	}()
	idx, err := job.model.indexFor()
	if err != nil {
		return planOutcome{}, fmt.Errorf("preparing the model for decoding: %w", err)
	}
	// The request works on its own view of the engine: it counts the
	// request's evaluations and holds at most its share of the sequence
	// slots, so that a search evicts its own forks instead of taking the
	// slots every other running request needs.
	lm := newRequestLM(job.model.engine, s.opts.MaxConcurrent)
	dec, err := decoder.New(lm, idx)
	if err != nil {
		return planOutcome{}, fmt.Errorf("preparing the model for decoding: %w", err)
	}
	req := job.req
	end, _ := constraint.ParseEndPolicy(req.End) // checked with the request
	space := constraint.Options{MaxActions: req.MaxActions, StopAtGoal: true, EndPolicy: end}
	prompt := decoder.PromptOptions{Think: req.Think, Goal: job.goal}
	bctx, cancel := context.WithTimeout(ctx, job.budget)
	defer cancel()
	switch req.Method {
	case MethodGreedy, MethodCGreedy:
		out, err = s.decode(bctx, dec, job, decoder.Request{Lexicon: job.lex, Prompt: prompt, Space: space})
	default:
		out, err = s.search(bctx, dec, lm, job, space, prompt)
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return out, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && bctx.Err() != nil:
			// The seconds budget ran out: not an error, a partial plan
			// (the planner's own verdict is about an interrupted run; the
			// server's re-validation decides).
			out.budgetOut, out.stop, out.interrupted = !out.goal, "time", true
			return out, nil
		case errors.Is(err, models.ErrNoSequences), errors.Is(err, models.ErrCacheFull):
			return out, &apiError{Status: http.StatusServiceUnavailable, Code: CodeModelBusy, RetryAfter: 5,
				Message: "the model's KV cache is full with other requests' sequences; retry later: " + err.Error()}
		case errors.Is(err, models.ErrContextLength):
			return out, errorf(http.StatusUnprocessableEntity, CodeBadRequest, "the prompt and plan do not fit the model's context: %v", err)
		}
		return out, err
	}
	return out, nil
}

// decode runs greedy or cgreedy decoding.
func (s *Server) decode(ctx context.Context, dec *decoder.Decoder, job *planJob, dreq decoder.Request) (planOutcome, error) {
	req := job.req
	opts := decoder.Options{Constrained: req.Method == MethodCGreedy, MaxTokens: req.MaxTokens}
	if sp := req.Sampling; sp != nil {
		opts.Sampling = decoder.Sampling{Temperature: sp.Temperature, TopK: sp.TopK, TopP: sp.TopP, Seed: sp.Seed}
	}
	if job.emit != nil {
		st := job.task.Init
		opts.OnEvent = func(e decoder.Event) {
			switch e.Kind {
			case decoder.EventAction:
				ev := PlanEvent{Event: "action", Index: e.Step, Action: e.Line, Text: e.ActionText}
				if req.Trace {
					st = job.task.Apply(st, e.Action)
					ev.State = stateFacts(job.task, st)
				}
				job.emit(ev)
			case decoder.EventInvalid:
				job.emit(PlanEvent{Event: "invalid", Index: e.Step, Text: e.ActionText, Reason: e.Reason})
			}
		}
	}
	res, err := dec.Decode(ctx, dreq, opts)
	if res == nil {
		if err == nil {
			err = errors.New("decoder returned no result")
		}
		return planOutcome{}, err
	}
	out := planOutcome{actions: res.Plan, texts: res.Texts, text: res.Text, stop: res.EndReason,
		valid: res.Valid, goal: res.GoalReached, prompt: int64(res.PromptTokens),
		generated: int64(res.GeneratedTokens + res.ThinkingTokens), evaluated: int64(res.EvaluatedTokens),
		calls: int64(res.ModelCalls)}
	if res.FirstInvalid != nil {
		out.invalidText, out.invalidReason = res.FirstInvalid.Text, res.FirstInvalid.Reason
	}
	out.budgetOut = !res.GoalReached && (res.EndReason == "max_tokens" || res.EndReason == constraint.EndedAtMaxActions.String())
	s.m.observeMask(res)
	return out, err
}

// search runs mcts or cmcts.
func (s *Server) search(ctx context.Context, dec *decoder.Decoder, lm *requestLM, job *planJob, space constraint.Options, prompt decoder.PromptOptions) (planOutcome, error) {
	req := job.req
	sp, err := constraint.New(dec.Index(), job.lex, space)
	if err != nil {
		return planOutcome{}, err
	}
	p, err := decoder.BuildPrompt(lm, job.lex, prompt)
	if err != nil {
		return planOutcome{}, err
	}
	opts := mcts.Options{Heuristic: req.Heuristic, Time: job.budget, Simulations: req.Simulations,
		MaxActions: req.MaxActions, Unconstrained: req.Method == MethodMCTS}
	opts.Tokens = req.MaxEvaluatedTokens
	if sp := req.Search; sp != nil {
		opts.Width, opts.C, opts.Base, opts.GoalReward = sp.Width, sp.C, sp.Base, sp.GoalReward
		opts.Lambda, opts.Backup, opts.Batch, opts.Rollout = sp.Lambda, sp.Backup, sp.Batch, sp.Rollout
		opts.Exhaust, opts.Seed = sp.Exhaust, sp.Seed
	}
	if job.emit != nil {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			t := time.NewTicker(progressEvery)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				case <-t.C:
					job.emit(PlanEvent{Event: "search", EvaluatedTokens: lm.evaluated.Load(), ModelCalls: lm.calls.Load()})
				}
			}
		}()
	}
	res, err := mcts.Search(ctx, lm, sp, p.Tokens, opts)
	if res == nil {
		if err == nil {
			err = errors.New("search returned no result")
		}
		return planOutcome{}, err
	}
	st := res.Stats
	out := planOutcome{actions: res.Plan, texts: res.Texts, stop: res.Stop, valid: res.Valid, goal: res.GoalReached,
		prompt: st.PromptTokens, generated: int64(len(res.Tokens)), evaluated: st.EvaluatedTokens, calls: st.ModelCalls,
		sims: int64(st.Simulations)}
	switch res.Stop {
	case mcts.StopTime, mcts.StopSimulations, mcts.StopTokens:
		out.budgetOut = !res.GoalReached
	}
	if space.MaxActions > 0 && len(res.Plan) >= space.MaxActions && !res.GoalReached {
		out.budgetOut = true
	}
	if st.ModelCalls > 0 {
		s.m.occupancy.Observe(st.BatchOccupancy)
	}
	if job.emit != nil {
		cur := job.task.Init
		for i, a := range res.Plan {
			ev := PlanEvent{Event: "action", Index: i, Action: res.Lines[i], Text: res.Texts[i]}
			if req.Trace {
				cur = job.task.Apply(cur, a)
				ev.State = stateFacts(job.task, cur)
			}
			job.emit(ev)
		}
	}
	return out, err
}

// requestLM is one request's view of a loaded model: it counts the
// request's evaluations (for progress events) and limits the sequences the
// request holds at once to its share of the engine's slots (slots divided
// by the requests admitted at once, at least 2). Beyond the share,
// NewSequence and Fork fail with models.ErrNoSequences, which the search
// answers by evicting its own least recently used forks.
type requestLM struct {
	models.LM
	evaluated, calls atomic.Int64
	quota            int

	mu   sync.Mutex // protects held
	held map[models.SeqID]struct{}
}

func newRequestLM(lm models.LM, concurrent int) *requestLM {
	quota := max(2, lm.Stats().SequenceSlots/max(concurrent, 1))
	return &requestLM{LM: lm, quota: quota, held: map[models.SeqID]struct{}{}}
}

func (c *requestLM) take(alloc func() (models.SeqID, error)) (models.SeqID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.held) >= c.quota {
		return 0, fmt.Errorf("%w: the request holds its share of %d sequences", models.ErrNoSequences, c.quota)
	}
	id, err := alloc()
	if err == nil {
		c.held[id] = struct{}{}
	}
	return id, err
}

// NewSequence allocates a sequence within the request's share.
func (c *requestLM) NewSequence() (models.SeqID, error) { return c.take(c.LM.NewSequence) }

// Fork forks a sequence within the request's share.
func (c *requestLM) Fork(src models.SeqID, n int) (models.SeqID, error) {
	return c.take(func() (models.SeqID, error) { return c.LM.Fork(src, n) })
}

// Release frees a sequence of the request.
func (c *requestLM) Release(seq models.SeqID) {
	c.mu.Lock()
	delete(c.held, seq)
	c.mu.Unlock()
	c.LM.Release(seq)
}

// Eval evaluates and counts.
func (c *requestLM) Eval(ctx context.Context, reqs []models.EvalRequest) ([]models.EvalResult, error) {
	res, err := c.LM.Eval(ctx, reqs)
	if err == nil {
		c.calls.Add(1)
		for _, r := range res {
			c.evaluated.Add(int64(r.Positions))
		}
	}
	return res, err
}
