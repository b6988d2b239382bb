package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nesy-dev/nesy/constraint"
	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/mcts"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/planner"
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

// runPlanner runs the request's method on its model through package
// planner. The request's seconds budget is the planner's time budget; when
// it (or another budget) runs out the plan so far is returned with
// budgetOut set. A cancelled ctx (client gone, shutdown) returns ctx's
// error. Every sequence the request allocated is released before it
// returns, whatever the planner did.
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
	defer lm.releaseAll()
	req := job.req
	end, _ := constraint.ParseEndPolicy(req.End) // checked with the request
	opts := planner.Options{
		Budgets: planner.Budgets{Time: job.budget, Simulations: req.Simulations, EvaluatedTokens: req.MaxEvaluatedTokens,
			GeneratedTokens: req.MaxTokens, MaxActions: req.MaxActions, MaxNodes: searchNodes(s.opts.RequestMemory, len(job.task.Actions))},
		Heuristic: req.Heuristic, Evaluator: job.heur, End: end, Think: req.Think, Index: idx,
	}
	if sp := req.Sampling; sp != nil {
		opts.Sampling = decoder.Sampling{Temperature: sp.Temperature, TopK: sp.TopK, TopP: sp.TopP}
		opts.Seed = sp.Seed
	}
	if sp := req.Search; sp != nil {
		opts.Search = mcts.Options{Width: sp.Width, C: sp.C, Base: sp.Base, GoalReward: sp.GoalReward, Lambda: sp.Lambda,
			Backup: sp.Backup, Batch: sp.Batch, Rollout: sp.Rollout, RolloutTemperature: sp.RolloutTemperature, Exhaust: sp.Exhaust}
		if sp.Seed != 0 {
			opts.Seed = sp.Seed
		}
	}
	method := planner.Method(req.Method)
	opts.NoRevisit = planner.DefaultNoRevisit(method)
	if req.NoRevisit != nil {
		opts.NoRevisit = *req.NoRevisit
	}
	if job.emit != nil {
		st := job.task.Init
		opts.OnEvent = func(e planner.Event) {
			switch e.Kind {
			case planner.EventAction:
				ev := PlanEvent{Event: "action", Index: e.Index, Action: e.Line, Text: e.Text}
				if req.Trace {
					st = job.task.Apply(st, e.Action)
					ev.State = stateFacts(job.task, st)
				}
				job.emit(ev)
			case planner.EventInvalid:
				job.emit(PlanEvent{Event: "invalid", Index: e.Index, Text: e.Text, Reason: e.Reason})
			}
		}
		if method.Search() {
			stop := s.reportProgress(ctx, job, lm)
			defer stop()
			if req.Tree {
				opts.Search.OnTree = treeEvents(job, lm)
			}
		}
	}
	res, err := planner.Run(ctx, lm, planner.Task{Lexicon: job.lex, Goal: job.goal}, method, opts)
	if res != nil {
		out = planOutcome{actions: res.Plan, texts: res.Texts, text: res.Text, stop: string(res.Stop),
			valid: res.Valid, goal: res.GoalReached, prompt: res.PromptTokens, generated: res.GeneratedTokens,
			thinking: res.ThinkingTokens, evaluated: res.EvaluatedTokens, calls: res.ModelCalls, sims: res.Simulations,
			interrupted: res.Interrupted}
		out.budgetOut = !res.GoalReached && res.Stop.BudgetRanOut()
		if res.FirstInvalid != nil {
			out.invalidText, out.invalidReason = res.FirstInvalid.Text, res.FirstInvalid.Reason
		}
		if res.Decode != nil {
			s.m.observeMask(res.Decode)
		}
		if res.Search != nil && res.Search.ModelCalls > 0 {
			s.m.occupancy.Observe(res.Search.BatchOccupancy)
		}
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return out, ctx.Err()
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

// reportProgress sends a "search" event with the request's counters every
// progressEvery until the returned stop is called or ctx ends.
func (s *Server) reportProgress(ctx context.Context, job *planJob, lm *requestLM) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				job.emit(PlanEvent{Event: "search", EvaluatedTokens: lm.evaluated.Load(), ModelCalls: lm.calls.Load()})
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// requestLM is one request's view of a loaded model: it counts the
// request's evaluations (for progress events and per-request stats),
// limits the sequences the request holds at once to its share of the
// engine's slots (slots divided by the requests admitted at once, at least
// 2) and releases every sequence it still holds when the request ends.
// Beyond the share, NewSequence and Fork fail with models.ErrNoSequences,
// which the search answers by evicting its own least recently used forks.
//
// Its method set is explicit: Close releases the request's sequences and
// never the shared engine, and Stats are the request's own.
type requestLM struct {
	engine           models.LM
	evaluated, calls atomic.Int64
	quota            int

	mu   sync.Mutex // protects held
	held map[models.SeqID]struct{}
}

var _ models.LM = (*requestLM)(nil)

func newRequestLM(lm models.LM, concurrent int) *requestLM {
	quota := max(2, lm.Stats().SequenceSlots/max(concurrent, 1))
	return &requestLM{engine: lm, quota: quota, held: map[models.SeqID]struct{}{}}
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

// Info describes the model.
func (c *requestLM) Info() models.Info { return c.engine.Info() }

// Vocab returns the model's vocabulary.
func (c *requestLM) Vocab() *models.Vocab { return c.engine.Vocab() }

// Tokenize encodes text.
func (c *requestLM) Tokenize(text string, parseSpecial bool) ([]int32, error) {
	return c.engine.Tokenize(text, parseSpecial)
}

// Detokenize decodes tokens.
func (c *requestLM) Detokenize(ids []int32) (string, error) { return c.engine.Detokenize(ids) }

// RenderChat renders a chat with the model's template.
func (c *requestLM) RenderChat(msgs []models.Message, opts models.ChatOptions) (string, error) {
	return c.engine.RenderChat(msgs, opts)
}

// NewSequence allocates a sequence within the request's share.
func (c *requestLM) NewSequence() (models.SeqID, error) { return c.take(c.engine.NewSequence) }

// Fork forks a sequence within the request's share.
func (c *requestLM) Fork(src models.SeqID, n int) (models.SeqID, error) {
	return c.take(func() (models.SeqID, error) { return c.engine.Fork(src, n) })
}

// Truncate drops a sequence's tail.
func (c *requestLM) Truncate(seq models.SeqID, n int) error { return c.engine.Truncate(seq, n) }

// Len returns a sequence's cached positions.
func (c *requestLM) Len(seq models.SeqID) int { return c.engine.Len(seq) }

// Release frees a sequence of the request.
func (c *requestLM) Release(seq models.SeqID) {
	c.mu.Lock()
	_, ok := c.held[seq]
	delete(c.held, seq)
	c.mu.Unlock()
	if ok {
		c.engine.Release(seq)
	}
}

// releaseAll frees every sequence the request still holds (a planner that
// returned early, or leaked).
func (c *requestLM) releaseAll() {
	c.mu.Lock()
	held := c.held
	c.held = map[models.SeqID]struct{}{}
	c.mu.Unlock()
	for id := range held {
		c.engine.Release(id)
	}
}

// Close ends the request's use of the model: its sequences are released;
// the shared engine stays open.
func (c *requestLM) Close() error {
	c.releaseAll()
	return nil
}

// Stats are the request's own: its evaluations and the sequences it holds
// within its share (the engine-wide figures are the server's metrics).
func (c *requestLM) Stats() models.Stats {
	c.mu.Lock()
	held := len(c.held)
	c.mu.Unlock()
	return models.Stats{ModelCalls: c.calls.Load(), EvaluatedTokens: c.evaluated.Load(),
		SequencesInUse: held, SequenceSlots: c.quota}
}

// Eval evaluates and counts.
func (c *requestLM) Eval(ctx context.Context, reqs []models.EvalRequest) ([]models.EvalResult, error) {
	res, err := c.engine.Eval(ctx, reqs)
	if err == nil {
		c.calls.Add(1)
		for _, r := range res {
			c.evaluated.Add(int64(r.Positions))
		}
	}
	return res, err
}
