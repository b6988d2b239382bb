// Package planner runs a planning method on a task with a language model:
// the one place where "run method M on a task" is written. The CLI (`nesy
// plan`), the server (POST /v1/plan) and the benchmark runner (`nesy
// bench`) call Run and keep only their own concerns (flags, HTTP,
// records), so the same task, method, seed and budget give the same plan,
// counters and stop reason through all three.
//
// Decoding methods (greedy, cgreedy, thinking) go through package decoder,
// the searches (mcts, cmcts) through package mcts; both follow package
// constraint. The paper's settings (width 16, c 2.5, base 10, batch 16,
// h_FF leaves, lambda 0.1) are the defaults here; every returned plan is
// re-validated against the task with pddl.Task.Validate, the way `nesy
// validate` reads it.
package planner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nesy-dev/nesy/constraint"
	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/mcts"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/pddl/heuristic"
	"github.com/nesy-dev/nesy/trie"
)

// Task is what to plan for: a ground task seen through its lexicon (the
// words actions are written in), and the goal in words where an
// environment has them.
type Task struct {
	Lexicon *lexicon.Bound
	// Goal is the goal in words ("" describes the task's goal from its
	// facts).
	Goal string
}

// Budgets bound a run. Zero values take the defaults given per field.
type Budgets struct {
	// Time bounds the run's wall-clock time. 0 means DefaultSearchTime for
	// the searches and no bound for decoding. When it runs out the plan so
	// far is returned with Stop StopTime (not an error).
	Time time.Duration
	// Simulations bounds the simulations of a search (0: none).
	Simulations int
	// EvaluatedTokens bounds the tokens a search evaluates (prompt, tree,
	// rollouts; 0: none).
	EvaluatedTokens int64
	// GeneratedTokens bounds the answer's tokens when decoding (0: what the
	// context leaves after the prompt).
	GeneratedTokens int
	// MaxActions bounds the plan's length. 0 means DefaultMaxActions; a
	// negative value means no bound.
	MaxActions int
	// MaxNodes bounds a search's tree, and so its memory (mcts.NodeBytes
	// per node at most): the search stops with StopMemory, keeping its
	// best plan. 0 means no bound.
	MaxNodes int
}

// Options configure a run. The zero value runs the method with the paper's
// settings, greedy decoding and seed 0.
type Options struct {
	Budgets
	// Seed seeds sampling and search: the same seed, model, task and
	// budget (other than time) give the same plan.
	Seed uint64
	// Sampling chooses tokens for greedy, cgreedy and thinking (zero:
	// greedy); its Seed is Options.Seed when zero.
	Sampling decoder.Sampling
	// Search tunes mcts and cmcts (package mcts's Options). Its zero fields
	// take this package's defaults (DefaultWidth, DefaultC, DefaultBase,
	// ...); a negative Base means a constant c. Its budget, seed,
	// heuristic and method fields are set from Budgets, Seed, Heuristic and
	// the method; its OnTree (a live view of the tree) passes through.
	Search mcts.Options
	// Heuristic values search leaves, in package heuristic's syntax ("ff",
	// "lmcut", "mix(0.5*ff+0.5*lmcut)", ...); "" means DefaultHeuristic.
	Heuristic string
	// Evaluator, when set, is that heuristic already built for the task
	// (callers that also use it, as the server's solvability check does,
	// build it once); Heuristic is then ignored.
	Evaluator heuristic.Heuristic
	// End says where a constrained plan may end (zero: at any boundary,
	// when the model writes its end token).
	End constraint.EndPolicy
	// EndMarker is a line the model may write to end the plan (e.g.
	// "done"); "" means its end tokens only.
	EndMarker string
	// KeepGoing lets the plan go on after the goal holds (by default it
	// ends there).
	KeepGoing bool
	// Think lets a thinking model think before a greedy or cgreedy answer
	// (Thinking always thinks).
	Think bool
	// OmitStatic leaves facts that never change out of the prompt's state.
	OmitStatic bool
	// NoRevisit keeps a constrained plan from returning to a state it has
	// been in (constraint.Options.NoRevisit): cgreedy cannot loop, and a
	// search's tree holds no cycles.
	NoRevisit bool
	// RevisitAll is constraint.Options.RevisitAll: with NoRevisit, where
	// every action leads back, all stay allowed (not only the least
	// visited).
	RevisitAll bool
	// FeedEachToken is decoder.Options.FeedEachToken: cgreedy feeds every
	// token in a model call of its own instead of a forced run in one.
	FeedEachToken bool
	// Index is the model's vocabulary index (constraint.NewIndex); nil
	// builds it. Callers that plan often with one model build it once.
	Index *trie.Index
	// OnEvent, when set, is called synchronously for every action
	// committed to the plan (as decoding writes it; a search's plan when
	// the search ends) and for the first invalid step of free decoding.
	OnEvent func(Event)
}

// EventKind tells what an Event reports.
type EventKind uint8

const (
	// EventAction: an action was committed to the plan.
	EventAction EventKind = iota
	// EventInvalid: a written step is not an applicable action (free
	// decoding; reported once, for the first).
	EventInvalid
)

// Event is one step of a plan as it is made.
type Event struct {
	Kind EventKind
	// Index is the step's 0-based position in the plan.
	Index int
	// Action is the task action id (EventAction).
	Action int
	// Line is the action in PDDL syntax (EventAction).
	Line string
	// Text is the step as the model wrote it (lexicon text).
	Text string
	// Reason says why an invalid step is not applicable (EventInvalid).
	Reason string
}

// Stop says why a run ended.
type Stop string

// Stop reasons. The decoding ones come from package constraint's end
// reasons, the search ones from package mcts.
const (
	StopGoal        Stop = "goal"        // the goal holds (and the plan ends there)
	StopEndToken    Stop = "end_token"   // the model wrote its end token
	StopEndMarker   Stop = "end_marker"  // the model wrote the end marker line
	StopMaxActions  Stop = "max_actions" // the plan reached Budgets.MaxActions
	StopDeadEnd     Stop = "dead_end"    // no action applies and the plan may not end
	StopMaxTokens   Stop = "max_tokens"  // the answer reached its token budget
	StopTime        Stop = "time"        // Budgets.Time ran out
	StopSimulations Stop = "simulations" // Budgets.Simulations were run
	StopTokens      Stop = "tokens"      // Budgets.EvaluatedTokens were evaluated
	StopExhausted   Stop = "exhausted"   // the search space within reach was searched
	StopCanceled    Stop = "canceled"    // the caller's context ended
	StopMemory      Stop = "memory"      // a search's tree reached Budgets.MaxNodes
)

// BudgetRanOut reports whether a budget, not the model or the goal, ended
// the run.
func (s Stop) BudgetRanOut() bool {
	switch s {
	case StopTime, StopSimulations, StopTokens, StopMaxTokens, StopMaxActions, StopMemory:
		return true
	}
	return false
}

// Outcome is what a run produced, re-validated.
type Outcome struct {
	Method Method
	// Plan is the plan as task action ids; Lines the same in PDDL syntax
	// ("(name a b)", as `nesy validate` reads it); Texts as the model wrote
	// them (lexicon text).
	Plan  []int
	Lines []string
	Texts []string
	// Text is the model's answer as written (decoding methods).
	Text string

	// Valid: every step was applicable in turn (and, for free decoding,
	// every written line was an action); GoalReached: and the goal holds
	// after the last. Both come from Run's own re-validation.
	Valid       bool
	GoalReached bool
	// Validation is the re-validation (its States are the states the plan
	// visits).
	Validation pddl.ValidationResult
	// Agrees reports that the method's own verdict equals the
	// re-validation (it always should; a decode stopped mid-step by the
	// time budget has no verdict of its own and counts as agreeing).
	Agrees bool
	// FirstInvalid is free decoding's first written step that is not an
	// applicable action, and StepsWritten the steps it wrote.
	FirstInvalid *decoder.InvalidStep
	StepsWritten int

	Stop Stop
	// Interrupted: the time budget stopped decoding mid-step.
	Interrupted bool

	PromptTokens    int64
	GeneratedTokens int64 // the answer's tokens (thinking excluded)
	ThinkingTokens  int64
	EvaluatedTokens int64 // every token a forward pass computed
	ModelCalls      int64
	Simulations     int64
	Seconds         float64

	// Decode is the decoder's full result (decoding methods; mask timings
	// and more), Search the search's statistics (searches).
	Decode *decoder.Result
	Search *mcts.Stats
}

// Run runs method m on task with lm. It returns the plan so far, with the
// stop reason, when a budget runs out; an error when the run could not be
// made (bad options, a prompt that does not fit, an engine failure) or ctx
// ended, in which case the outcome, when not nil, holds the partial plan.
func Run(ctx context.Context, lm models.LM, task Task, m Method, opts Options) (*Outcome, error) {
	if task.Lexicon == nil {
		return nil, errors.New("planner: no task")
	}
	if m == Direct {
		return nil, errors.New("planner: the direct policy needs an environment to talk to (nesy bench --method direct)")
	}
	if _, err := ParseMethod(string(m), false); err != nil || m == "" {
		return nil, fmt.Errorf("planner: unknown method %q (want one of %s)", m, Names(Methods()))
	}
	if opts.Time < 0 || opts.Simulations < 0 || opts.EvaluatedTokens < 0 || opts.GeneratedTokens < 0 {
		return nil, errors.New("planner: budgets must not be negative")
	}
	idx := opts.Index
	if idx == nil {
		var err error
		if idx, err = constraint.NewIndex(lm); err != nil {
			return nil, fmt.Errorf("planner: %w", err)
		}
	}
	space := constraint.Options{EndPolicy: opts.End, StopAtGoal: !opts.KeepGoing, MaxActions: opts.MaxActions,
		NoRevisit: opts.NoRevisit, RevisitAll: opts.RevisitAll}
	switch {
	case opts.MaxActions == 0:
		space.MaxActions = DefaultMaxActions
	case opts.MaxActions < 0:
		space.MaxActions = 0
	}
	if opts.EndMarker != "" {
		space.End = opts.EndMarker + "\n"
	}
	popts := decoder.PromptOptions{Goal: task.Goal, OmitStatic: opts.OmitStatic, Think: opts.Think || m == Thinking}.WithKind(lm.Info().Prompt)
	space.Trace = popts.Trace(task.Lexicon)
	if m.Search() && popts.Think {
		return nil, fmt.Errorf("planner: thinking works with greedy and cgreedy only, not %s", m)
	}
	// The decoder and the search each build the prompt once and refuse
	// one that does not fit the context (*models.PromptTooLongError).
	r := &run{lm: lm, idx: idx, task: task, method: m, opts: opts, space: space, popts: popts}
	start := time.Now()
	var out *Outcome
	var err error
	if m.Search() {
		out, err = r.search(ctx)
	} else {
		out, err = r.decode(ctx)
	}
	if out == nil {
		return nil, err
	}
	out.Method = m
	out.Seconds = time.Since(start).Seconds()
	if out.Plan == nil {
		out.Plan, out.Lines, out.Texts = []int{}, []string{}, []string{}
	}
	if verr := r.revalidate(out); verr != nil && err == nil {
		err = verr
	}
	return out, err
}

// run is one Run's state.
type run struct {
	lm     models.LM
	idx    *trie.Index
	task   Task
	method Method
	opts   Options
	space  constraint.Options
	popts  decoder.PromptOptions
}

// decode runs greedy, cgreedy or thinking.
func (r *run) decode(ctx context.Context) (*Outcome, error) {
	dec, err := decoder.New(r.lm, r.idx)
	if err != nil {
		return nil, fmt.Errorf("planner: %w", err)
	}
	dctx := ctx
	if r.opts.Time > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, r.opts.Time)
		defer cancel()
	}
	sampling := r.opts.Sampling
	if sampling.Seed == 0 {
		sampling.Seed = r.opts.Seed
	}
	dopts := decoder.Options{Constrained: r.method == CGreedy, MaxTokens: r.opts.GeneratedTokens, Sampling: sampling, FeedEachToken: r.opts.FeedEachToken}
	if on := r.opts.OnEvent; on != nil {
		dopts.OnEvent = func(e decoder.Event) {
			switch e.Kind {
			case decoder.EventAction:
				on(Event{Kind: EventAction, Index: e.Step, Action: e.Action, Line: e.Line, Text: e.ActionText})
			case decoder.EventInvalid:
				on(Event{Kind: EventInvalid, Index: e.Step, Text: e.ActionText, Reason: e.Reason})
			}
		}
	}
	res, err := dec.Decode(dctx, decoder.Request{Lexicon: r.task.Lexicon, Prompt: r.popts, Space: r.space}, dopts)
	if res == nil {
		switch {
		case err == nil:
			err = errors.New("planner: the decoder returned no result")
		case ctx.Err() == nil && dctx.Err() != nil:
			// The time budget ran out before the first token (a long
			// prompt on a slow machine): an empty plan, not an error.
			return &Outcome{Stop: StopTime, Interrupted: true}, nil
		}
		return nil, err
	}
	out := &Outcome{Plan: res.Plan, Lines: res.Lines, Texts: res.Texts, Text: res.Text,
		Valid: res.Valid, GoalReached: res.GoalReached, FirstInvalid: res.FirstInvalid, StepsWritten: res.StepsWritten,
		Stop: Stop(res.EndReason), PromptTokens: int64(res.PromptTokens), GeneratedTokens: int64(res.GeneratedTokens),
		ThinkingTokens: int64(res.ThinkingTokens), EvaluatedTokens: int64(res.EvaluatedTokens),
		ModelCalls: int64(res.ModelCalls), Decode: res}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			out.Stop = StopCanceled
			return out, ctx.Err()
		case dctx.Err() != nil:
			// The time budget: not an error, the plan so far.
			out.Stop, out.Interrupted = StopTime, true
			return out, nil
		}
		return out, err
	}
	return out, nil
}

// search runs mcts or cmcts.
func (r *run) search(ctx context.Context) (*Outcome, error) {
	sp, err := constraint.New(r.idx, r.task.Lexicon, r.space)
	if err != nil {
		return nil, fmt.Errorf("planner: %w", err)
	}
	prompt, err := decoder.BuildPrompt(r.lm, r.task.Lexicon, r.popts)
	if err != nil {
		return nil, fmt.Errorf("planner: %w", err)
	}
	o := r.opts.Search
	if o.Width == 0 {
		o.Width = DefaultWidth
	}
	if o.C == 0 {
		o.C = DefaultC
	}
	switch {
	case o.Base == 0:
		o.Base = DefaultBase
	case o.Base < 0:
		o.Base = 0 // constant c
	}
	if o.Batch == 0 {
		o.Batch = DefaultBatch
	}
	if o.Lambda == 0 {
		o.Lambda = DefaultLambda
	}
	o.Heuristic, o.Evaluator = r.opts.Heuristic, r.opts.Evaluator
	if o.Heuristic == "" {
		o.Heuristic = DefaultHeuristic
	}
	o.Time = r.opts.Time
	if o.Time == 0 {
		o.Time = DefaultSearchTime
	}
	o.Simulations, o.Tokens, o.Seed, o.MaxNodes = r.opts.Simulations, r.opts.EvaluatedTokens, r.opts.Seed, r.opts.MaxNodes
	o.MaxActions = r.space.MaxActions
	o.Unconstrained = r.method == MCTS
	// The search stops itself at o.Time; the deadline is a backstop for a
	// model call that overruns it.
	sctx, cancel := context.WithTimeout(ctx, o.Time+o.Time/2+5*time.Second)
	defer cancel()
	res, err := mcts.Search(sctx, r.lm, sp, prompt.Tokens, o)
	if res == nil {
		if err == nil {
			err = errors.New("planner: the search returned no result")
		}
		return nil, err
	}
	st := res.Stats
	out := &Outcome{Plan: res.Plan, Lines: res.Lines, Texts: res.Texts, Valid: res.Valid, GoalReached: res.GoalReached,
		Stop: Stop(res.Stop), PromptTokens: st.PromptTokens, GeneratedTokens: int64(len(res.Tokens)),
		EvaluatedTokens: st.EvaluatedTokens, ModelCalls: st.ModelCalls, Simulations: int64(st.Simulations), Search: &st}
	if r.space.MaxActions > 0 && len(res.Plan) >= r.space.MaxActions && !res.GoalReached && !out.Stop.BudgetRanOut() {
		out.Stop = StopMaxActions
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			out.Stop = StopCanceled
			return out, ctx.Err()
		case sctx.Err() != nil:
			out.Stop = StopTime // the backstop: keep the best plan
			return out, nil
		}
		return out, err
	}
	if on := r.opts.OnEvent; on != nil {
		for i, a := range res.Plan {
			on(Event{Kind: EventAction, Index: i, Action: a, Line: res.Lines[i], Text: res.Texts[i]})
		}
	}
	return out, nil
}

// revalidate checks the plan the way `nesy validate` reads it and makes
// the outcome's verdict the validator's.
func (r *run) revalidate(out *Outcome) error {
	vr, err := decoder.Revalidate(r.task.Lexicon.Task(), out.Lines)
	if err != nil {
		out.Valid, out.GoalReached, out.Agrees = false, false, false
		return fmt.Errorf("planner: re-validating the plan: %w", err)
	}
	valid := vr.Valid && out.FirstInvalid == nil
	goal := valid && vr.GoalReached
	out.Agrees = out.Interrupted || (valid == out.Valid && goal == out.GoalReached)
	out.Valid, out.GoalReached, out.Validation = valid, goal, vr
	return nil
}
