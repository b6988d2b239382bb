package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl"
)

// bwShort: the goal is two actions away (pick up a, stack it on b), so a
// tree search finds it in a few simulations.
const bwShort = `(define (problem bw-short)
  (:domain blocksworld-4ops)
  (:objects a b)
  (:init (handempty) (ontable a) (ontable b) (clear a) (clear b))
  (:goal (and (on a b))))
`

// bwLong has six blocks: an exhaustive search (search.exhaust) cannot
// finish its tree within the tests' time, so only a budget, a cancellation
// or a shutdown ends it.
const bwLong = `(define (problem bw-6)
  (:domain blocksworld-4ops)
  (:objects a b c d e f)
  (:init (handempty) (ontable a) (ontable b) (ontable c) (ontable d) (ontable e) (ontable f)
         (clear a) (clear b) (clear c) (clear d) (clear e) (clear f))
  (:goal (and (on a b) (on b c) (on c d) (on d e) (on e f))))
`

// validate re-checks a returned plan with package pddl, independently of
// the server.
func validate(t *testing.T, domain, problem string, plan []string) pddl.ValidationResult {
	t.Helper()
	d, _, err := pddl.ParseDomain("d", []byte(domain))
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := pddl.ParseProblem("p", []byte(problem))
	if err != nil {
		t.Fatal(err)
	}
	task, err := pddl.Ground(d, p)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := pddl.ParsePlan("plan", []byte(strings.Join(plan, "\n")))
	if err != nil {
		t.Fatalf("plan %q does not parse: %v", plan, err)
	}
	return task.Validate(steps)
}

func decodePlan(t *testing.T, body []byte) PlanResponse {
	t.Helper()
	var r PlanResponse
	mustJSON(t, body, &r)
	return r
}

// TestPlanMethods runs every method on a small task and checks the answer
// against an independent validation of the returned plan.
func TestPlanMethods(t *testing.T) {
	ts := startServer(t, Options{})
	tests := []struct {
		method string
		extra  map[string]any
		// wantValid: the method guarantees applicable actions.
		wantValid bool
	}{
		{MethodGreedy, nil, false},
		{MethodCGreedy, nil, true},
		{MethodCGreedy, map[string]any{"end": "goal", "sampling": map[string]any{"temperature": 1, "seed": 7}}, true},
		{MethodMCTS, map[string]any{"simulations": 40}, false},
		{MethodCMCTS, map[string]any{"seconds": 60, "search": map[string]any{"seed": 1}}, true},
		{MethodCMCTS, map[string]any{"seconds": 60, "search": map[string]any{"seed": 1, "rollout": 4, "rollout_temperature": 1}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			req := map[string]any{"domain": bwDomain, "problem": bwShort, "method": tt.method, "max_actions": 8, "trace": true}
			for k, v := range tt.extra {
				req[k] = v
			}
			status, _, body := ts.do("POST", "/v1/plan", req)
			var r PlanResponse
			switch status {
			case 200:
				r = decodePlan(t, body)
			case 422:
				// A budget ran out before the goal: the partial plan comes
				// with the error.
				e := apiErr(t, body)
				if e.Code != CodeBudgetExhausted || e.Result == nil {
					t.Fatalf("422 %s: %s", e.Code, body)
				}
				r = *e.Result
				if r.GoalReached {
					t.Errorf("budget_exhausted with the goal reached")
				}
			default:
				t.Fatalf("status %d: %s", status, body)
			}
			if r.Method != tt.method || r.Model != ts.model {
				t.Errorf("method %q model %q", r.Method, r.Model)
			}
			if !r.Revalidated {
				t.Errorf("planner and server disagree: %s", body)
			}
			v := validate(t, bwDomain, bwShort, r.Plan)
			if !v.Valid || v.GoalReached != r.GoalReached {
				t.Errorf("independent validation %+v; response valid=%v goal=%v plan=%v", v, r.Valid, r.GoalReached, r.Plan)
			}
			if tt.wantValid && !r.Valid {
				t.Errorf("%s returned an invalid plan: %s", tt.method, body)
			}
			if r.Valid && len(r.Actions) != len(r.Plan) {
				t.Errorf("%d action texts for %d actions", len(r.Actions), len(r.Plan))
			}
			if len(r.States) != len(r.Plan)+1 {
				t.Errorf("trace has %d states for %d actions", len(r.States), len(r.Plan))
			}
			if r.PromptTokens == 0 || r.EvaluatedTokens < r.PromptTokens || r.ModelCalls == 0 {
				t.Errorf("token counts: prompt %d evaluated %d calls %d", r.PromptTokens, r.EvaluatedTokens, r.ModelCalls)
			}
			if r.Task.Actions == 0 || r.Timings.TotalSeconds < r.Timings.PlanSeconds {
				t.Errorf("task %+v timings %+v", r.Task, r.Timings)
			}
			if tt.method == MethodCMCTS && (!r.GoalReached || r.Simulations == 0) {
				t.Errorf("cmcts did not reach a two-action goal: %s", body)
			}
		})
	}
	for _, m := range []string{MethodGreedy, MethodCGreedy, MethodMCTS, MethodCMCTS} {
		var n float64
		for _, o := range planOutcomes {
			if v := ts.metric(`nesy_plan_requests_total{method="` + m + `",outcome="` + o + `"}`); v > 0 {
				n += v
			}
		}
		if n == 0 {
			t.Errorf("no plan requests counted for %s", m)
		}
	}
	if v := ts.metric("nesy_mcts_simulations_total"); v <= 0 {
		t.Errorf("simulations metric %v", v)
	}
	if v := ts.metric("nesy_decoder_mask_duration_seconds_count"); v <= 0 {
		t.Errorf("mask histogram count %v", v)
	}
	if v := ts.metric("nesy_engine_kv_sequences_in_use"); v != 0 {
		t.Errorf("%v sequences still in use after all requests", v)
	}
}

// readEvents reads NDJSON plan events until the stream ends.
func readEvents(t *testing.T, resp *http.Response) []PlanEvent {
	t.Helper()
	var evs []PlanEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var ev PlanEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("bad event line %q: %v", sc.Text(), err)
		}
		if (ev.Event == "action" || ev.Event == "invalid") && !strings.Contains(sc.Text(), `"index":`) {
			t.Errorf("%s event without an index: %s", ev.Event, sc.Text())
		}
		evs = append(evs, ev)
	}
	return evs
}

func postStream(t *testing.T, ctx context.Context, ts *testServer, req map[string]any) *http.Response {
	t.Helper()
	req["stream"] = true
	data, _ := json.Marshal(req)
	hreq, _ := http.NewRequestWithContext(ctx, "POST", ts.url+"/v1/plan", strings.NewReader(string(data)))
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("stream status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp
}

// TestPlanStream checks the event stream: start, one action event per plan
// action in order (with states when traced), progress for a search, and a
// result equal in plan to the events.
func TestPlanStream(t *testing.T) {
	ts := startServer(t, Options{})
	for _, tt := range []struct {
		method string
		extra  map[string]any
	}{
		{MethodCGreedy, map[string]any{"end": "goal", "sampling": map[string]any{"temperature": 1, "seed": 3}}},
		{MethodCMCTS, map[string]any{"seconds": 60}},
	} {
		t.Run(tt.method, func(t *testing.T) {
			req := map[string]any{"domain": bwDomain, "problem": bwShort, "method": tt.method, "max_actions": 6, "trace": true}
			for k, v := range tt.extra {
				req[k] = v
			}
			resp := postStream(t, context.Background(), ts, req)
			defer resp.Body.Close()
			evs := readEvents(t, resp)
			if len(evs) < 2 || evs[0].Event != "start" || evs[0].Task == nil || evs[0].Model != ts.model {
				t.Fatalf("events %+v", evs)
			}
			last := evs[len(evs)-1]
			if last.Seconds <= 0 {
				t.Errorf("the last event says seconds %v, want the plan's time", last.Seconds)
			}
			var res *PlanResponse
			switch last.Event {
			case "result":
				res = last.Result
			case "error":
				if last.Error == nil || last.Error.Code != CodeBudgetExhausted {
					t.Fatalf("error event %+v", last.Error)
				}
				res = last.Error.Result
			default:
				t.Fatalf("stream ends with %q", last.Event)
			}
			if res == nil {
				t.Fatal("no result in the last event")
			}
			var actions []string
			for _, ev := range evs[1 : len(evs)-1] {
				switch ev.Event {
				case "action":
					if ev.Index != len(actions) {
						t.Errorf("action event index %d, want %d", ev.Index, len(actions))
					}
					actions = append(actions, ev.Action)
					if len(res.States) > ev.Index+1 && strings.Join(ev.State, ",") != strings.Join(res.States[ev.Index+1], ",") {
						t.Errorf("event state %v, result state %v", ev.State, res.States[ev.Index+1])
					}
				case "search", "invalid":
				default:
					t.Errorf("unexpected event %q in the middle", ev.Event)
				}
			}
			if len(actions) == 0 {
				t.Error("no action events")
			}
			if strings.Join(actions, ",") != strings.Join(res.Plan, ",") {
				t.Errorf("streamed actions %v, result plan %v", actions, res.Plan)
			}
		})
	}
}

// TestPlanEnvTask plans for a task named by environment and id.
func TestPlanEnvTask(t *testing.T) {
	datasets := testenv.Datasets(t)
	ts := startServer(t, Options{Datasets: datasets})
	status, _, body := ts.do("POST", "/v1/plan", map[string]any{"env": "blocksworld", "task": "instance-2", "method": "cgreedy", "max_actions": 10})
	if status != 200 && status != 422 {
		t.Fatalf("status %d: %s", status, body)
	}
	var r PlanResponse
	if status == 200 {
		r = decodePlan(t, body)
	} else {
		e := apiErr(t, body)
		if e.Code != CodeBudgetExhausted {
			t.Fatalf("%s: %s", e.Code, e.Message)
		}
		r = *e.Result
	}
	if r.Task.Domain != "blocksworld-4ops" || !r.Valid {
		t.Errorf("task %+v valid %v", r.Task, r.Valid)
	}
	for _, a := range r.Actions {
		// PlanBench's lexicon names blocks by colour.
		if !strings.Contains(a, "block") {
			t.Errorf("action text %q is not in PlanBench's words", a)
		}
	}
	status, _, body = ts.do("POST", "/v1/plan", map[string]any{"env": "blocksworld", "task": "instance-99999"})
	if status != 404 {
		t.Errorf("unknown task: %d %s", status, body)
	}
}

// TestBudgetExhausted: a search with one simulation cannot reach a goal
// four actions away; the answer is 422 with the partial plan.
func TestBudgetExhausted(t *testing.T) {
	ts := startServer(t, Options{})
	status, _, body := ts.do("POST", "/v1/plan", map[string]any{"domain": bwDomain, "problem": bwProblem, "method": "cmcts", "simulations": 1})
	if status != 422 {
		t.Fatalf("status %d: %s", status, body)
	}
	e := apiErr(t, body)
	if e.Code != CodeBudgetExhausted || e.Result == nil || e.Result.GoalReached || !e.Result.Valid || e.Result.Simulations == 0 {
		t.Errorf("error %+v result %+v", e, e.Result)
	}
	if !strings.Contains(e.Message, "budget") {
		t.Errorf("message %q", e.Message)
	}
}

// TestCancellation: a client that goes away stops its search and frees its
// sequences and its admission slot.
func TestCancellation(t *testing.T) {
	ts := startServer(t, Options{MaxConcurrent: 1})
	ctx, cancel := context.WithCancel(context.Background())
	// exhaust keeps the search going after the first goal plan: only the
	// 60 s budget or a cancellation ends it.
	resp := postStream(t, ctx, ts, map[string]any{"domain": bwDomain, "problem": bwLong, "method": "cmcts", "seconds": 60,
		"max_actions": 30, "search": map[string]any{"exhaust": true}})
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || !strings.Contains(sc.Text(), `"start"`) {
		t.Fatalf("first event %q", sc.Text())
	}
	waitFor(t, "the search to hold sequences", func() bool { return ts.engine().Stats().SequencesInUse > 0 })
	start := time.Now()
	cancel()
	resp.Body.Close()
	waitFor(t, "the sequences to be freed", func() bool { return ts.engine().Stats().SequencesInUse == 0 })
	waitFor(t, "the slot to be freed", func() bool { r, _ := ts.s.adm.stats(); return r == 0 })
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the search ran on for %v after the client left", d)
	}
	waitFor(t, "the cancelled request to be counted", func() bool {
		return ts.metric(`nesy_plan_requests_total{method="cmcts",outcome="cancelled"}`) == 1
	})
	// The slot is usable again.
	if status, _, body := ts.do("POST", "/v1/plan", map[string]any{"domain": bwDomain, "problem": bwShort, "method": "cgreedy"}); status != 200 && status != 422 {
		t.Errorf("after cancellation: %d %s", status, body)
	}
}

// TestQueueLimits fills the admission slots and the queue and checks the
// 429 and 503 answers with Retry-After.
func TestQueueLimits(t *testing.T) {
	plan := map[string]any{"domain": bwDomain, "problem": bwShort, "method": "cgreedy"}
	t.Run("queue full", func(t *testing.T) {
		ts := startServer(t, Options{MaxConcurrent: 1, MaxQueue: -1})
		release, err := ts.s.adm.acquire(context.Background()) // hold the only slot
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		status, hdr, body := ts.do("POST", "/v1/plan", plan)
		if status != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
			t.Fatalf("status %d Retry-After %q: %s", status, hdr.Get("Retry-After"), body)
		}
		wantCode(t, body, CodeQueueFull)
		if v := ts.metric(`nesy_scheduler_rejected_total{reason="queue_full"}`); v != 1 {
			t.Errorf("rejected metric %v", v)
		}
	})
	t.Run("queue timeout", func(t *testing.T) {
		ts := startServer(t, Options{MaxConcurrent: 1, MaxQueue: 4, QueueTimeout: 50 * time.Millisecond})
		release, err := ts.s.adm.acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		status, hdr, body := ts.do("POST", "/api/generate", map[string]any{"model": ts.model, "prompt": "x", "stream": false})
		if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
			t.Fatalf("status %d Retry-After %q: %s", status, hdr.Get("Retry-After"), body)
		}
		wantCode(t, body, CodeQueueTimeout)
	})
	t.Run("queued then served", func(t *testing.T) {
		ts := startServer(t, Options{MaxConcurrent: 1, MaxQueue: 4})
		release, err := ts.s.adm.acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan int, 1)
		go func() {
			status, _, _ := ts.do("POST", "/v1/plan", plan)
			done <- status
		}()
		waitFor(t, "the request to queue", func() bool { _, q := ts.s.adm.stats(); return q == 1 })
		if v := ts.metric("nesy_scheduler_queue_depth"); v != 1 {
			t.Errorf("queue depth metric %v", v)
		}
		release()
		if status := <-done; status != 200 && status != 422 {
			t.Errorf("queued request answered %d", status)
		}
	})
}

// TestShutdown: on shutdown the server stops accepting, lets a short
// request finish, cancels a long one at the deadline, and Serve returns.
func TestShutdown(t *testing.T) {
	ts := startServer(t, Options{ShutdownTimeout: 500 * time.Millisecond})
	resp := postStream(t, context.Background(), ts, map[string]any{"domain": bwDomain, "problem": bwLong, "method": "cmcts",
		"seconds": 60, "max_actions": 30, "search": map[string]any{"exhaust": true}})
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		t.Fatal("no start event")
	}
	start := time.Now()
	if err := ts.stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("shutdown took %v with a 500ms deadline", d)
	}
	// The long request was cancelled: its stream ends with a shutting_down
	// error event (or is cut).
	var last PlanEvent
	for sc.Scan() {
		json.Unmarshal(sc.Bytes(), &last)
	}
	if last.Event != "" && last.Event != "search" && (last.Event != "error" || last.Error.Code != CodeShuttingDown) {
		t.Errorf("last event of the cancelled stream: %+v", last)
	}
	if n := ts.engine().Stats().SequencesInUse; n != 0 {
		t.Errorf("%d sequences in use after shutdown", n)
	}
	if _, err := http.Get(ts.url + "/healthz"); err == nil {
		t.Error("the server still accepts connections after shutdown")
	}
}

// TestShutdownFinishes: with a generous deadline, a request in flight when
// the shutdown starts is answered in full, and new requests are refused.
func TestShutdownFinishes(t *testing.T) {
	ts := startServer(t, Options{ShutdownTimeout: 2 * time.Minute})
	resp := postStream(t, context.Background(), ts, map[string]any{"domain": bwDomain, "problem": bwLong, "method": "cgreedy",
		"end": "goal", "max_actions": 100, "sampling": map[string]any{"temperature": 1, "seed": 5}})
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		t.Fatal("no start event")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- ts.stop() }()
	waitFor(t, "draining", func() bool { return ts.s.adm.isDraining() })
	var last PlanEvent
	for sc.Scan() {
		json.Unmarshal(sc.Bytes(), &last)
	}
	switch {
	case last.Event == "result":
	case last.Event == "error" && last.Error.Code == CodeBudgetExhausted:
	default:
		t.Errorf("the in-flight request ended with %+v", last)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// TestPlanUniform serves the default model as the uniform prior: requests
// naming none or "uniform" plan with zero logits (no forward pass of the
// model), and the constrained search still reaches the goal.
func TestPlanUniform(t *testing.T) {
	ts := startServer(t, Options{Uniform: true})
	for _, model := range []string{"", models.UniformName} {
		req := map[string]any{"domain": bwDomain, "problem": bwShort, "method": MethodCMCTS, "max_actions": 8, "seconds": 60}
		if model != "" {
			req["model"] = model
		}
		status, _, body := ts.do("POST", "/v1/plan", req)
		if status != 200 {
			t.Fatalf("model %q: status %d: %s", model, status, body)
		}
		r := decodePlan(t, body)
		if r.Model != models.UniformName || !r.Valid || !r.GoalReached {
			t.Fatalf("model %q: answered by %q, valid %v, goal %v", model, r.Model, r.Valid, r.GoalReached)
		}
	}
	if info := ts.engine().Info(); info.Name != models.UniformName || info.Params != 0 {
		t.Fatalf("the loaded model is %q with %d parameters, want the uniform prior", info.Name, info.Params)
	}
}

// TestNoRevisitField: no_revisit reaches the planner, and an absent field
// means the method's default (on for cgreedy): the default plan equals the
// one with no_revisit true, and with no_revisit false the model's plan
// returns to a state it has been in, which the masked plan does not.
func TestNoRevisitField(t *testing.T) {
	ts := startServer(t, Options{})
	plan := func(noRevisit any) PlanResponse {
		t.Helper()
		req := map[string]any{"domain": bwDomain, "problem": bwLong, "method": "cgreedy", "end": "goal", "max_actions": 20, "trace": true}
		if noRevisit != nil {
			req["no_revisit"] = noRevisit
		}
		status, _, body := ts.do("POST", "/v1/plan", req)
		switch status {
		case 200:
			return decodePlan(t, body)
		case 422:
			return *apiErr(t, body).Result
		}
		t.Fatalf("no_revisit %v: status %d: %s", noRevisit, status, body)
		return PlanResponse{}
	}
	d, _, err := pddl.ParseDomain("d.pddl", []byte(bwDomain))
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := pddl.ParseProblem("p.pddl", []byte(bwLong))
	if err != nil {
		t.Fatal(err)
	}
	task, err := pddl.Ground(d, p)
	if err != nil {
		t.Fatal(err)
	}
	// revisits counts the plan's steps into a visited state, and of them
	// those some other applicable action would have avoided.
	revisits := func(r PlanResponse) (all, avoidable int) {
		steps, err := pddl.ParsePlan("plan", []byte(strings.Join(r.Plan, "\n")))
		if err != nil {
			t.Fatal(err)
		}
		s := task.Init
		seen := map[string]bool{s.Key(): true}
		for _, st := range steps {
			ids := task.LookupAction(st.Name, st.Args)
			if len(ids) == 0 {
				t.Fatalf("%v is not an action", st)
			}
			next := task.Apply(s, ids[0])
			if seen[next.Key()] {
				all++
				for _, b := range task.Applicable(s, nil) {
					if !seen[task.Apply(s, b).Key()] {
						avoidable++
						break
					}
				}
			}
			seen[next.Key()] = true
			s = next
		}
		return all, avoidable
	}
	def, on, off := plan(nil), plan(true), plan(false)
	if strings.Join(def.Plan, ",") != strings.Join(on.Plan, ",") {
		t.Errorf("default cgreedy plan %v differs from no_revisit true %v", def.Plan, on.Plan)
	}
	if _, n := revisits(off); n == 0 {
		t.Fatalf("the plain plan %v never returns to a state it could have avoided: no contrast to test", off.Plan)
	}
	if _, n := revisits(on); n != 0 {
		t.Errorf("the masked plan %v returns to a visited state %d times where another action would not", on.Plan, n)
	}
	if status, _, body := ts.do("POST", "/v1/plan", map[string]any{"domain": bwDomain, "problem": bwShort, "method": "cgreedy", "no_revisit": "yes"}); status != 400 {
		t.Errorf("no_revisit \"yes\": status %d: %s", status, body)
	}
}
