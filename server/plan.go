package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	humanize "github.com/dustin/go-humanize"

	"github.com/nesy-dev/nesy/constraint"

	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/mcts"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/pddl/heuristic"
	"github.com/nesy-dev/nesy/planner"
)

// Planning methods of POST /v1/plan: package planner's.
const (
	MethodGreedy   = string(planner.Greedy)   // unconstrained greedy (or sampled) decoding
	MethodCGreedy  = string(planner.CGreedy)  // constrained decoding: every action applicable
	MethodMCTS     = string(planner.MCTS)     // token-level MCTS over the full vocabulary
	MethodCMCTS    = string(planner.CMCTS)    // token-level MCTS over executable prefixes
	MethodThinking = string(planner.Thinking) // a thinking model thinks, then writes freely
)

// PlanRequest is the body of POST /v1/plan. Give the task either as PDDL
// text (Domain and Problem) or as an environment and a task id (Env, Task).
// Zero budgets take the server's defaults; budgets above the server's caps
// are refused (400 budget_over_cap).
type PlanRequest struct {
	Domain  string `json:"domain,omitempty"`
	Problem string `json:"problem,omitempty"`
	Env     string `json:"env,omitempty"`
	Task    string `json:"task,omitempty"`
	// Lexicon is the action and object text (package lexicon's JSON form);
	// absent means the built-in lexicon of the domain (or of the env).
	Lexicon json.RawMessage `json:"lexicon,omitempty"`
	Model   string          `json:"model,omitempty"`
	// Method is greedy, cgreedy, mcts, cmcts or thinking; "" means cmcts.
	Method string `json:"method,omitempty"`

	// Seconds bounds the planner's wall-clock time; 0 means 60 (or the
	// server's cap if lower).
	Seconds float64 `json:"seconds,omitempty"`
	// Simulations bounds MCTS simulations; 0 means no bound but time.
	Simulations int `json:"simulations,omitempty"`
	// MaxTokens bounds the generated tokens of greedy/cgreedy decoding; 0
	// means the server's cap.
	MaxTokens int `json:"max_tokens,omitempty"`
	// MaxEvaluatedTokens bounds the tokens an mcts/cmcts search evaluates
	// (prompt, tree, rollouts); 0 means no bound but time.
	MaxEvaluatedTokens int64 `json:"max_evaluated_tokens,omitempty"`
	// MaxActions bounds the plan length; 0 means 100.
	MaxActions int `json:"max_actions,omitempty"`
	// End says where a constrained plan may end: "any" (default: at any
	// action boundary, when the model writes its end token) or "goal"
	// (only where the goal holds). Every plan also stops as soon as the
	// goal holds.
	End string `json:"end,omitempty"`
	// Heuristic values search leaves (package heuristic's syntax: "ff",
	// "lmcut", "mix(0.5*ff+0.5*lmcut)", ...); "" means ff.
	Heuristic string `json:"heuristic,omitempty"`
	// NoRevisit keeps a constrained plan from returning to a state it has
	// been in (planner.Options.NoRevisit); nil means the method's default
	// (planner.DefaultNoRevisit: on for cgreedy).
	NoRevisit *bool `json:"no_revisit,omitempty"`

	Sampling *SamplingParams `json:"sampling,omitempty"`
	Search   *SearchParams   `json:"search,omitempty"`

	// Think lets a thinking model think before the plan (Qwen 3).
	Think bool `json:"think,omitempty"`
	// Trace returns the state after every action.
	Trace bool `json:"trace,omitempty"`
	// Tree adds the search tree's changes to a streamed mcts/cmcts
	// request's "search" events (PlanEvent.Tree), for the live view.
	Tree bool `json:"tree,omitempty"`
	// Stream answers with NDJSON events (application/x-ndjson).
	Stream bool `json:"stream,omitempty"`
}

// SamplingParams choose tokens for greedy/cgreedy decoding. Temperature 0
// (the default) is greedy.
type SamplingParams struct {
	Temperature float64 `json:"temperature,omitempty"`
	TopK        int     `json:"top_k,omitempty"`
	TopP        float64 `json:"top_p,omitempty"`
	Seed        uint64  `json:"seed,omitempty"`
}

// SearchParams tune mcts/cmcts (see package mcts's Options; zero values
// take its defaults: width 16, c 2.5, batch 16, lambda 0.1).
type SearchParams struct {
	Width      int     `json:"width,omitempty"`
	C          float64 `json:"c,omitempty"`
	Base       float64 `json:"base,omitempty"`
	GoalReward float64 `json:"goal_reward,omitempty"`
	Lambda     float64 `json:"lambda,omitempty"`
	Backup     string  `json:"backup,omitempty"`
	Batch      int     `json:"batch,omitempty"`
	Rollout    int     `json:"rollout,omitempty"`
	// RolloutTemperature samples rollout tokens instead of taking the
	// most likely (mcts.Options.RolloutTemperature).
	RolloutTemperature float64 `json:"rollout_temperature,omitempty"`
	Exhaust            bool    `json:"exhaust,omitempty"`
	Seed               uint64  `json:"seed,omitempty"`
}

// PlanResponse is the answer of POST /v1/plan (and the "result" event of a
// stream).
type PlanResponse struct {
	Model  string `json:"model"`
	Method string `json:"method"`
	// Plan is the plan in PDDL syntax, one action per element, as nesy
	// validate reads it.
	Plan []string `json:"plan"`
	// Actions are the same actions as the model wrote them (lexicon text).
	Actions []string `json:"actions"`
	// Valid: every action was applicable in turn; GoalReached: and the goal
	// holds after the last. Both come from the server's own re-validation
	// of the plan against the transition model.
	Valid       bool `json:"valid"`
	GoalReached bool `json:"goal_reached"`
	// Revalidated is true when the server re-validated the plan and the
	// planner's own verdict agrees (it always should; a planner stopped
	// mid-step by the seconds budget has no verdict of its own).
	Revalidated bool `json:"revalidated"`
	// StopReason says why the planner stopped: goal, end_token,
	// end_marker, max_actions, dead_end, invalid_action, max_tokens,
	// budget, exhausted, memory (a search's tree filled the request's
	// memory budget), ...
	StopReason      string `json:"stop_reason"`
	ValidationError string `json:"validation_error,omitempty"`
	GoalError       string `json:"goal_error,omitempty"`
	Cost            int    `json:"cost"`
	// States[i] is the state before action i (States[0] the initial
	// state), then the final state; only with "trace": true.
	States [][]string `json:"states,omitempty"`
	// Text is the model's raw output for unconstrained decoding.
	Text string `json:"text,omitempty"`

	PromptTokens    int64 `json:"prompt_tokens"`
	GeneratedTokens int64 `json:"generated_tokens"`
	// ThinkingTokens are the tokens a thinking model wrote before the
	// plan (not counted in GeneratedTokens, as the CLI and bench count).
	ThinkingTokens  int64 `json:"thinking_tokens,omitempty"`
	EvaluatedTokens int64 `json:"evaluated_tokens"`
	ModelCalls      int64 `json:"model_calls"`
	Simulations     int64 `json:"simulations,omitempty"`

	Task    TaskSummary `json:"task"`
	Timings Timings     `json:"timings"`
	// Seconds is Timings.PlanSeconds (the CLI's field name).
	Seconds float64 `json:"seconds"`
}

// TaskSummary describes the grounded task.
type TaskSummary struct {
	Domain  string `json:"domain"`
	Problem string `json:"problem"`
	Facts   int    `json:"facts"`
	Actions int    `json:"actions"`
}

// Timings break a plan request's time down.
type Timings struct {
	QueueSeconds  float64 `json:"queue_seconds"`
	LoadSeconds   float64 `json:"load_seconds"`
	GroundSeconds float64 `json:"ground_seconds"`
	PlanSeconds   float64 `json:"plan_seconds"`
	TotalSeconds  float64 `json:"total_seconds"`
}

// PlanEvent is one line of a streamed plan (NDJSON). Event is "start",
// "action" (an action committed: as decoding writes it, or the search's
// plan when it ends), "invalid" (an unconstrained step that is not an
// applicable action), "search" (MCTS progress, every half second), "result"
// (the final PlanResponse) or "error" (the request failed; Error is the same
// body a non-streamed request would get).
type PlanEvent struct {
	Event   string  `json:"event"`
	Seconds float64 `json:"seconds"` // since the planner started

	// start
	Model  string       `json:"model,omitempty"`
	Method string       `json:"method,omitempty"`
	Task   *TaskSummary `json:"task,omitempty"`

	// action, invalid: Index counts actions from 0 and is always sent
	// for these events (MarshalJSON), the first one's 0 included.
	Index  int      `json:"index,omitempty"`
	Action string   `json:"action,omitempty"` // PDDL syntax
	Text   string   `json:"text,omitempty"`   // lexicon text (as written)
	State  []string `json:"state,omitempty"`  // after the action, with "trace"
	Reason string   `json:"reason,omitempty"` // why a written step is not applicable

	// search
	EvaluatedTokens int64 `json:"evaluated_tokens,omitempty"`
	ModelCalls      int64 `json:"model_calls,omitempty"`
	// Tree is the search tree's change since the last tree event (with
	// "tree": true): new or changed visited nodes and the best plan so far.
	Tree *mcts.TreeDelta `json:"tree,omitempty"`

	Result *PlanResponse `json:"result,omitempty"`
	Error  *apiError     `json:"error,omitempty"`
}

// MarshalJSON writes the event, with "index" on every action and invalid
// event (omitempty would drop the first action's 0).
func (ev PlanEvent) MarshalJSON() ([]byte, error) {
	type plain PlanEvent // without this method
	if ev.Event != "action" && ev.Event != "invalid" {
		return json.Marshal(plain(ev))
	}
	return json.Marshal(struct {
		plain
		Index int `json:"index"`
	}{plain(ev), ev.Index})
}

// planJob is a checked plan request with its grounded task.
type planJob struct {
	req     PlanRequest // defaults filled
	task    *pddl.Task
	lex     *lexicon.Bound
	goal    string              // the goal in words (environments), "" to describe it from the task
	heur    heuristic.Heuristic // the request's heuristic, built once for the checks and the search
	budget  time.Duration
	model   *modelEntry
	started time.Time
	// emit sends a stream event; nil when not streaming.
	emit func(PlanEvent)
}

// planOutcome is what a planner returns.
type planOutcome struct {
	actions   []int // task action ids, in order
	texts     []string
	text      string // raw output (unconstrained decoding)
	stop      string
	valid     bool // the planner's own verdict
	goal      bool
	prompt    int64
	generated int64 // the answer's tokens
	thinking  int64 // thinking tokens before the answer
	evaluated int64
	calls     int64
	sims      int64
	budgetOut bool // a budget ran out before the goal
	// interrupted: the seconds budget stopped the planner mid-step, so its
	// own verdict is not compared with the re-validation.
	interrupted bool
	// The first step of an unconstrained plan that is not an applicable
	// action, as written, and why ("" when none).
	invalidText, invalidReason string
}

func (s *Server) handlePlan(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req PlanRequest
	if err := decodeJSON(r, &req, true); err != nil {
		writeError(w, err)
		return
	}
	if err := s.checkPlanRequest(&req); err != nil {
		writeError(w, err)
		return
	}
	if _, _, err := s.models.resolve(req.Model); err != nil {
		writeError(w, err) // unknown model: no need to queue
		return
	}
	ctx, cancel := s.workContext(r)
	defer cancel()

	// Admitted before the PDDL is parsed or grounded: grounding is the
	// request's work too (bounded by the server's grounding limits and
	// stopped by ctx when the client goes away), so it counts against
	// MaxConcurrent like planning does.
	release, wait, err := s.admit(ctx)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	timings := Timings{QueueSeconds: wait.Seconds()}

	gstart := time.Now()
	task, lex, goal, heur, err := s.buildTask(ctx, &req)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client is gone
		}
		writeError(w, err)
		return
	}
	timings.GroundSeconds = time.Since(gstart).Seconds()

	lstart := time.Now()
	entry, done, err := s.models.acquire(ctx, req.Model)
	if err != nil {
		if ae := asAPIError(err); ae.Code == CodeModelBusy {
			s.m.rejected.WithLabelValues(CodeModelBusy).Inc()
		}
		writeError(w, err)
		return
	}
	defer done()
	timings.LoadSeconds = time.Since(lstart).Seconds()

	job := &planJob{req: req, task: task, lex: lex, goal: goal, heur: heur, model: entry, budget: time.Duration(req.Seconds * float64(time.Second))}
	summary := TaskSummary{task.DomainName, task.ProblemName, len(task.Facts), len(task.Actions)}

	var stream *ndjson
	if req.Stream {
		stream = newNDJSON(w)
		job.emit = func(ev PlanEvent) {
			ev.Seconds = time.Since(job.started).Seconds()
			stream.send(ev)
		}
	}
	job.started = time.Now()
	if job.emit != nil {
		job.emit(PlanEvent{Event: "start", Model: entry.name, Method: req.Method, Task: &summary})
	}
	out, err := s.runPlanner(ctx, job)
	timings.PlanSeconds = time.Since(job.started).Seconds()
	s.m.planSecs.WithLabelValues(req.Method).Observe(timings.PlanSeconds)
	if err != nil {
		outcome := "error"
		if ctx.Err() != nil {
			outcome = "cancelled"
			if s.workCtx.Err() != nil {
				err = errShuttingDown
			}
		}
		s.m.plans.WithLabelValues(req.Method, outcome).Inc()
		if r.Context().Err() != nil {
			return // the client is gone
		}
		if ae := asAPIError(err); ae.Status >= 500 && ae.Code != CodeShuttingDown {
			s.log.Error("plan request failed", "method", req.Method, "model", entry.name, "code", ae.Code, "err", ae.Message)
		}
		if stream != nil {
			stream.send(PlanEvent{Event: "error", Seconds: timings.PlanSeconds, Error: asAPIError(err)})
			return
		}
		writeError(w, err)
		return
	}
	s.countTokens(out.prompt, out.generated, out.evaluated, out.calls)
	s.m.tokens.WithLabelValues("thinking").Add(float64(out.thinking))
	s.m.sims.Add(float64(out.sims))

	resp := s.planResponse(job, out)
	resp.Task = summary
	timings.TotalSeconds = time.Since(start).Seconds()
	resp.Timings, resp.Seconds = timings, timings.PlanSeconds
	switch {
	case resp.GoalReached:
		s.m.plans.WithLabelValues(req.Method, "goal").Inc()
	case !resp.Valid:
		s.m.plans.WithLabelValues(req.Method, "invalid").Inc()
	default:
		s.m.plans.WithLabelValues(req.Method, "no_goal").Inc()
	}
	if !resp.Revalidated {
		s.log.Error("planner and validator disagree", "method", req.Method, "stop", resp.StopReason,
			"valid", resp.Valid, "goal", resp.GoalReached, "planner_valid", out.valid, "planner_goal", out.goal)
	}
	var final error
	if out.budgetOut && !resp.GoalReached {
		final = &apiError{Status: http.StatusUnprocessableEntity, Code: CodeBudgetExhausted, Result: resp,
			Message: fmt.Sprintf("the %s budget ran out after %d actions without reaching the goal (%s); the partial plan is in result", req.Method, len(resp.Plan), resp.StopReason)}
	}
	if stream != nil {
		if final != nil {
			stream.send(PlanEvent{Event: "error", Seconds: timings.PlanSeconds, Error: asAPIError(final)})
			return
		}
		stream.send(PlanEvent{Event: "result", Seconds: timings.PlanSeconds, Result: resp})
		return
	}
	if final != nil {
		writeError(w, final)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) countTokens(prompt, generated, evaluated, calls int64) {
	s.m.tokens.WithLabelValues("prompt").Add(float64(prompt))
	s.m.tokens.WithLabelValues("generated").Add(float64(generated))
	s.m.tokens.WithLabelValues("evaluated").Add(float64(evaluated))
	s.m.calls.Add(float64(calls))
}

// checkPlanRequest fills defaults and checks every field that needs no
// task.
func (s *Server) checkPlanRequest(req *PlanRequest) error {
	o := s.opts
	bad := func(format string, args ...any) error {
		return errorf(http.StatusBadRequest, CodeBadRequest, format, args...)
	}
	overCap := func(what string, got, limit float64) error {
		return errorf(http.StatusBadRequest, CodeOverCap, "%s %g is above this server's cap of %g", what, got, limit)
	}
	hasPDDL := req.Domain != "" || req.Problem != ""
	hasEnv := req.Env != "" || req.Task != ""
	switch {
	case hasPDDL && hasEnv:
		return bad("give either domain and problem (PDDL text) or env and task, not both")
	case hasPDDL && (req.Domain == "" || req.Problem == ""):
		return bad("both domain and problem are required")
	case hasEnv && (req.Env == "" || req.Task == ""):
		return bad("both env and task are required")
	case !hasPDDL && !hasEnv:
		return bad("no task: give domain and problem (PDDL text), or env and task")
	}
	if len(req.Domain) > o.MaxPDDLBytes || len(req.Problem) > o.MaxPDDLBytes {
		return errorf(http.StatusRequestEntityTooLarge, CodePDDLTooLarge, "PDDL text is limited to %d bytes each for domain and problem (got %d and %d)", o.MaxPDDLBytes, len(req.Domain), len(req.Problem))
	}
	m, err := planner.ParseMethod(req.Method, false)
	if err != nil {
		return bad("%v", err)
	}
	req.Method = string(m)
	switch {
	case req.Seconds < 0 || math.IsNaN(req.Seconds) || req.Simulations < 0 || req.MaxTokens < 0 || req.MaxActions < 0 || req.MaxEvaluatedTokens < 0:
		return bad("budgets must not be negative")
	case req.Seconds > o.MaxSeconds:
		return overCap("seconds", req.Seconds, o.MaxSeconds)
	case req.Simulations > o.MaxSimulations:
		return overCap("simulations", float64(req.Simulations), float64(o.MaxSimulations))
	case req.MaxTokens > o.MaxTokens:
		return overCap("max_tokens", float64(req.MaxTokens), float64(o.MaxTokens))
	case req.MaxActions > o.MaxActions:
		return overCap("max_actions", float64(req.MaxActions), float64(o.MaxActions))
	}
	if req.Seconds == 0 {
		req.Seconds = min(60, o.MaxSeconds)
	}
	if req.MaxTokens == 0 {
		req.MaxTokens = o.MaxTokens
	}
	if req.MaxActions == 0 {
		req.MaxActions = min(100, o.MaxActions)
	}
	if _, err := constraint.ParseEndPolicy(req.End); err != nil {
		return bad("end: %v", err)
	}
	if req.Heuristic == "" {
		req.Heuristic = "ff"
	}
	if sp := req.Sampling; sp != nil {
		if sp.Temperature < 0 || sp.TopK < 0 || sp.TopP < 0 || sp.TopP > 1 || math.IsNaN(sp.Temperature) {
			return bad("sampling: temperature and top_k must not be negative and top_p must be in [0, 1]")
		}
	}
	if sp := req.Search; sp != nil {
		if sp.Width < 0 || sp.C < 0 || sp.Base < 0 || sp.Batch < 0 || sp.Rollout < 0 || sp.RolloutTemperature < 0 || sp.GoalReward < 0 {
			return bad("search: width, c, base, batch, rollout, rollout_temperature and goal_reward must not be negative")
		}
		if sp.Backup != "" && sp.Backup != "max" && sp.Backup != "mean" {
			return bad("search: unknown backup %q (want max or mean)", sp.Backup)
		}
		if sp.Width > 256 || sp.Batch > 256 {
			return overCap("search width/batch", float64(max(sp.Width, sp.Batch)), 256)
		}
	}
	return nil
}

// buildTask grounds the request's task and binds its lexicon.
func (s *Server) buildTask(ctx context.Context, req *PlanRequest) (task *pddl.Task, lex *lexicon.Bound, goalText string, h heuristic.Heuristic, err error) {
	var goal *pddl.Formula
	if req.Env != "" {
		ep, err := s.envs.open(ctx, req.Env, req.Task)
		if err != nil {
			return nil, nil, "", nil, err
		}
		task, lex, goalText = ep.Task(), ep.Lexicon(), ep.Goal()
	} else {
		d, _, err := pddl.ParseDomain("domain.pddl", []byte(req.Domain))
		if err != nil {
			return nil, nil, "", nil, pddlError("domain", err)
		}
		p, _, err := pddl.ParseProblem("problem.pddl", []byte(req.Problem))
		if err != nil {
			return nil, nil, "", nil, pddlError("problem", err)
		}
		if err := checkProblemNames(d, p); err != nil {
			return nil, nil, "", nil, pddlError("problem", err)
		}
		task, _, err = pddl.GroundContext(ctx, d, p, s.groundLimits())
		if err != nil {
			return nil, nil, "", nil, groundError(ctx, err)
		}
		goal = p.Goal
	}
	// The request's heuristic, built once: the solvability check and the
	// search both use it.
	if h, err = heuristic.New(req.Heuristic, task); err != nil {
		return nil, nil, "", nil, errorf(http.StatusBadRequest, CodeBadRequest, "heuristic: %v", err)
	}
	if err := checkSolvable(task, goal, h); err != nil {
		return nil, nil, "", nil, err
	}
	if n := len(task.Actions); n > s.opts.MaxGroundActions {
		return nil, nil, "", nil, errorf(http.StatusUnprocessableEntity, CodeTooManyActions, "the task grounds to %d actions; this server allows %d", n, s.opts.MaxGroundActions)
	}
	if n := len(task.Actions); n > memActions(s.opts.RequestMemory) {
		return nil, nil, "", nil, errorf(http.StatusUnprocessableEntity, CodeTooManyActions, "the task grounds to %d actions; a request's memory budget of %s allows %d",
			n, humanize.IBytes(uint64(s.opts.RequestMemory)), memActions(s.opts.RequestMemory))
	}
	if len(req.Lexicon) > 0 && string(req.Lexicon) != "null" {
		l, err := lexicon.Parse(req.Lexicon)
		if err != nil {
			return nil, nil, "", nil, errorf(http.StatusUnprocessableEntity, CodeBadLexicon, "lexicon: %v", err)
		}
		if lex, err = l.Bind(task); err != nil {
			return nil, nil, "", nil, errorf(http.StatusUnprocessableEntity, CodeBadLexicon, "lexicon: %v", err)
		}
	} else if lex == nil {
		if lex, err = lexicon.ForTask(task).Bind(task); err != nil {
			return nil, nil, "", nil, errorf(http.StatusUnprocessableEntity, CodeBadLexicon, "built-in lexicon: %v", err)
		}
	}
	return task, lex, goalText, h, nil
}

// checkProblemNames refuses, with positions, what package pddl only warns
// about but a request almost surely got wrong: a problem for another
// domain, and an object declared twice in the problem.
func checkProblemNames(d *pddl.Domain, p *pddl.Problem) error {
	var errs pddl.ErrorList
	if p.DomainName != "" && !strings.EqualFold(p.DomainName, d.Name) {
		errs.Addf(p.DomainPos, "the problem is for domain %s, but the domain is %s", p.DomainName, d.Name)
	}
	first := map[string]pddl.Pos{}
	for _, o := range p.Objects {
		if at, dup := first[o.Name]; dup {
			errs.Addf(o.Pos, "object %s declared twice (first at %s)", o.Name, at)
			continue
		}
		first[o.Name] = o.Pos
	}
	return errs.Err()
}

// groundLimits are the grounding limits of a request: MaxGroundActions
// counted, four times as many join bindings kept (about 250 bytes each),
// MaxGroundEstimate before the joins, MaxGroundSteps of work; the actions
// and bindings also within RequestMemory.
func (s *Server) groundLimits() pddl.GroundLimits {
	n := min(s.opts.MaxGroundActions, memActions(s.opts.RequestMemory))
	return pddl.GroundLimits{MaxActions: n, MaxBindings: int(min(4*int64(n), s.opts.RequestMemory/bindingBytes)),
		MaxEstimate: s.opts.MaxGroundEstimate, MaxSteps: s.opts.MaxGroundSteps}
}

// groundError maps a grounding error: a limit is 422 too_many_actions
// naming the action and its estimate, a cancelled context is the
// context's error, anything else is bad PDDL.
func groundError(ctx context.Context, err error) error {
	var le *pddl.LimitError
	switch {
	case errors.As(err, &le):
		e := errorf(http.StatusUnprocessableEntity, CodeTooManyActions, "grounding: %v", err)
		if le.Pos.IsValid() {
			e.Positions = []Position{{le.Pos.File, le.Pos.Line, le.Pos.Col, le.Error()}}
		}
		return e
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return err
	}
	return pddlError("grounding", err)
}

// checkSolvable refuses tasks whose goal is unreachable even when deletes
// are ignored (the initial state is a dead end of the delete relaxation): no
// planner can solve them. h is the request's heuristic; the relaxation
// heuristics (ff, add, max, lmcut and mixes of them) see such dead ends,
// and for the others (goalcount, blind) h_max is built. goal, when known,
// is the lifted goal, to name the goal facts no action can make true.
func checkSolvable(task *pddl.Task, goal *pddl.Formula, h heuristic.Heuristic) error {
	if len(task.Goal) == 0 {
		msg := "the task is unsolvable: the goal can never hold"
		if missing := unreachableGoalFacts(task, goal); len(missing) > 0 {
			msg += ": no sequence of actions makes " + strings.Join(missing, ", ") + " true"
		}
		return errorf(http.StatusUnprocessableEntity, CodeUnsolvable, "%s", msg)
	}
	if name := h.Name(); strings.HasPrefix(name, "goalcount") || strings.HasPrefix(name, "blind") {
		hmax, err := heuristic.New("max", task)
		if err != nil {
			return fmt.Errorf("solvability check: %w", err)
		}
		h = hmax
	}
	if _, dead := h.Eval(task.Init); dead {
		return errorf(http.StatusUnprocessableEntity, CodeUnsolvable, "the task is unsolvable: the goal is unreachable from the initial state even ignoring delete effects (%s)", task.ExplainGoal(task.Init))
	}
	return nil
}

// unreachableGoalFacts lists the ground positive atoms of a goal formula
// that are neither reachable fluents nor static facts of the task.
func unreachableGoalFacts(task *pddl.Task, goal *pddl.Formula) []string {
	if goal == nil {
		return nil
	}
	static := map[string]bool{}
	for _, f := range task.Static {
		static[f.String()] = true
	}
	var out []string
	var walk func(f *pddl.Formula)
	walk = func(f *pddl.Formula) {
		switch f.Kind {
		case pddl.FAnd:
			for _, sub := range f.Sub {
				walk(sub)
			}
		case pddl.FAtom:
			fact := pddl.Fact{Predicate: strings.ToLower(f.Pred)}
			for _, a := range f.Args {
				if a.Var {
					return
				}
				fact.Args = append(fact.Args, strings.ToLower(a.Name))
			}
			if task.FactID(fact) < 0 && !static[fact.String()] {
				out = append(out, fact.String())
			}
		}
	}
	walk(goal)
	return out
}

// planResponse re-validates the planner's plan against the transition
// model and builds the answer.
func (s *Server) planResponse(job *planJob, out planOutcome) *PlanResponse {
	task := job.task
	resp := &PlanResponse{Model: job.model.name, Method: job.req.Method, StopReason: out.stop, Text: out.text,
		PromptTokens: out.prompt, GeneratedTokens: out.generated, ThinkingTokens: out.thinking, EvaluatedTokens: out.evaluated,
		ModelCalls: out.calls, Simulations: out.sims, Plan: []string{}, Actions: []string{}}
	steps := make([]pddl.PlanStep, 0, len(out.actions))
	for i, a := range out.actions {
		act := &task.Actions[a]
		steps = append(steps, pddl.PlanStep{Name: act.Name, Args: act.Args})
		resp.Plan = append(resp.Plan, act.String())
		if i < len(out.texts) {
			resp.Actions = append(resp.Actions, out.texts[i])
		} else {
			resp.Actions = append(resp.Actions, job.lex.Text(a))
		}
	}
	res := task.Validate(steps)
	resp.Valid, resp.GoalReached, resp.Cost = res.Valid, res.GoalReached, res.Cost
	resp.ValidationError, resp.GoalError = res.Error, res.GoalError
	// An unconstrained plan may have stopped at a step that names no
	// applicable action: it is reported (as written) and makes the plan
	// invalid.
	if out.invalidText != "" || out.invalidReason != "" {
		resp.Actions = append(resp.Actions, out.invalidText)
		resp.Valid, resp.GoalReached = false, false
		if resp.ValidationError == "" {
			resp.ValidationError = fmt.Sprintf("step %d %q is not an applicable action: %s", len(out.actions)+1, out.invalidText, out.invalidReason)
		}
	}
	resp.Revalidated = out.interrupted || resp.Valid == out.valid && resp.GoalReached == out.goal
	if job.req.Trace {
		for _, st := range res.States {
			resp.States = append(resp.States, stateFacts(task, st))
		}
	}
	return resp
}

// stateFacts lists the facts of a state in PDDL syntax.
func stateFacts(task *pddl.Task, st pddl.State) []string {
	ids := st.Facts()
	out := make([]string, len(ids))
	for i, f := range ids {
		out[i] = task.Facts[f].String()
	}
	return out
}
