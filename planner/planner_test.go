package planner

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nesy-dev/nesy/constraint"
	"github.com/nesy-dev/nesy/examples"
	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
	"github.com/nesy-dev/nesy/pddl"
)

func TestParseMethod(t *testing.T) {
	tests := []struct {
		in     string
		direct bool
		want   Method
		err    bool
	}{
		{"", false, CMCTS, false},
		{"CGreedy", false, CGreedy, false},
		{" mcts ", false, MCTS, false},
		{"thinking", false, Thinking, false},
		{"direct", false, "", true},
		{"direct", true, Direct, false},
		{"beam", true, "", true},
	}
	for _, tt := range tests {
		got, err := ParseMethod(tt.in, tt.direct)
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("ParseMethod(%q, %v) = %q, %v", tt.in, tt.direct, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), "cgreedy") {
			t.Errorf("error %q does not list the methods", err)
		}
	}
	if !CMCTS.Search() || !CMCTS.Constrained() || CGreedy.Search() || !CGreedy.Constrained() || MCTS.Constrained() {
		t.Error("method kinds")
	}
	if SuggestedSequences(CMCTS) == 0 || SuggestedSequences(Greedy) != 0 {
		t.Error("suggested sequences")
	}
}

// setup loads a tiny random model and the example blocks task.
func setup(t *testing.T, ctxLen int) (models.LM, Task) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := gguf.Write(path, gguf.Default(gguf.ArchQwen3)); err != nil {
		t.Fatal(err)
	}
	lm, err := models.Load(context.Background(), path, models.Options{Threads: 1, ContextLength: ctxLen, Sequences: 32})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lm.Close() })
	d, _, err := pddl.ParseDomain("domain.pddl", []byte(examples.BlocksDomain))
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := pddl.ParseProblem("problem.pddl", []byte(examples.BlocksProblem))
	if err != nil {
		t.Fatal(err)
	}
	task, err := pddl.Ground(d, p)
	if err != nil {
		t.Fatal(err)
	}
	lex, err := lexicon.ForTask(task).Bind(task)
	if err != nil {
		t.Fatal(err)
	}
	return lm, Task{Lexicon: lex}
}

// TestRun runs every method on the example task: each outcome is
// re-validated (the verdict is the validator's), constrained methods give
// valid plans, counters add up, and a fixed seed repeats the plan.
func TestRun(t *testing.T) {
	lm, task := setup(t, 4096)
	for _, m := range []Method{Greedy, CGreedy, MCTS, CMCTS} {
		t.Run(string(m), func(t *testing.T) {
			opts := Options{Budgets: Budgets{Simulations: 60, GeneratedTokens: 200, MaxActions: 12}, Seed: 2}
			var events []Event
			opts.OnEvent = func(e Event) { events = append(events, e) }
			a, err := Run(context.Background(), lm, task, m, opts)
			if err != nil {
				t.Fatal(err)
			}
			opts.OnEvent = nil
			b, err := Run(context.Background(), lm, task, m, opts)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(a.Lines, b.Lines) || a.Stop != b.Stop || a.EvaluatedTokens != b.EvaluatedTokens {
				t.Errorf("same seed, different runs:\n%v %s %d\n%v %s %d", a.Lines, a.Stop, a.EvaluatedTokens, b.Lines, b.Stop, b.EvaluatedTokens)
			}
			vr := task.Lexicon.Task().Validate(steps(t, a.Lines))
			if a.Valid != (vr.Valid && a.FirstInvalid == nil) || a.GoalReached != (a.Valid && vr.GoalReached) || !a.Agrees {
				t.Errorf("verdict valid=%v goal=%v agrees=%v, validator %+v", a.Valid, a.GoalReached, a.Agrees, vr)
			}
			if m.Constrained() && !a.Valid {
				t.Errorf("%s returned an invalid plan %v", m, a.Lines)
			}
			if a.Method != m || a.Stop == "" || a.PromptTokens == 0 || a.EvaluatedTokens < a.PromptTokens || a.ModelCalls == 0 {
				t.Errorf("outcome %+v", a)
			}
			if m.Search() != (a.Search != nil) || m.Search() == (a.Decode != nil) {
				t.Errorf("details: search %v decode %v", a.Search != nil, a.Decode != nil)
			}
			if m == CMCTS && a.Simulations == 0 { // (mcts may end at once: a random model's top tokens are rarely plan text)
				t.Error("no simulations counted")
			}
			n := 0
			for _, e := range events {
				if e.Kind == EventAction {
					if e.Index != n || e.Line != a.Lines[n] {
						t.Errorf("event %+v, want step %d %s", e, n, a.Lines[n])
					}
					n++
				}
			}
			if n != len(a.Lines) {
				t.Errorf("%d action events for %d actions", n, len(a.Lines))
			}
		})
	}
}

func steps(t *testing.T, lines []string) []pddl.PlanStep {
	t.Helper()
	s, err := pddl.ParsePlan("plan", []byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRunErrors: bad input gets an error that names the problem.
func TestRunErrors(t *testing.T) {
	lm, task := setup(t, 4096)
	small, stask := setup(t, 64)
	tests := []struct {
		name string
		lm   models.LM
		task Task
		m    Method
		opts Options
		want string
	}{
		{"direct", lm, task, Direct, Options{}, "environment"},
		{"unknown", lm, task, "beam", Options{}, "unknown method"},
		{"no task", lm, Task{}, CMCTS, Options{}, "no task"},
		{"negative", lm, task, CMCTS, Options{Budgets: Budgets{Simulations: -1}}, "negative"},
		{"think search", lm, task, CMCTS, Options{Think: true}, "thinking"},
		{"prompt too long", small, stask, CGreedy, Options{}, "context holds 64"},
	}
	for _, tt := range tests {
		_, err := Run(context.Background(), tt.lm, tt.task, tt.m, tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one naming %q", tt.name, err, tt.want)
		}
	}
	_, err := Run(context.Background(), small, stask, CMCTS, Options{})
	var tooLong *models.PromptTooLongError
	if !errors.As(err, &tooLong) || tooLong.ContextLength != 64 || tooLong.Tokens < 64 {
		t.Errorf("prompt too long: %v", err)
	}
}

// TestCancel: a cancelled context ends a search with the context's error
// and the plan so far.
func TestCancel(t *testing.T) {
	lm, task := setup(t, 4096)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out, err := Run(ctx, lm, task, CMCTS, Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
	if out != nil && out.Stop != StopCanceled {
		t.Errorf("stop %s", out.Stop)
	}
}

// TestTimeBeforeFirstToken: a time budget that runs out while the prompt
// is still being evaluated ends a decoding run with StopTime and an empty,
// valid plan, not an error (the fuzzed server answered such requests 500).
func TestTimeBeforeFirstToken(t *testing.T) {
	lm, task := setup(t, 4096)
	for _, m := range []Method{Greedy, CGreedy} {
		out, err := Run(context.Background(), lm, task, m, Options{Budgets: Budgets{Time: time.Nanosecond}})
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if out.Stop != StopTime || !out.Interrupted || len(out.Plan) != 0 || !out.Valid {
			t.Errorf("%s: stop %s, interrupted %v, plan %v, valid %v", m, out.Stop, out.Interrupted, out.Lines, out.Valid)
		}
	}
}

// TestNoRevisitPlans: with NoRevisit a constrained plan's trajectory
// returns to a state only where every applicable action would have, for
// cgreedy and cmcts alike; the plans stay valid.
func TestNoRevisitPlans(t *testing.T) {
	lm, task := setup(t, 4096)
	gt := task.Lexicon.Task()
	for _, m := range []Method{CGreedy, CMCTS} {
		t.Run(string(m), func(t *testing.T) {
			opts := Options{Budgets: Budgets{Simulations: 60, MaxActions: 30}, Seed: 3, End: constraint.EndAtGoal, NoRevisit: true}
			out, err := Run(context.Background(), lm, task, m, opts)
			if err != nil {
				t.Fatal(err)
			}
			if !out.Valid {
				t.Fatalf("invalid plan %v", out.Lines)
			}
			s := gt.Init
			seen := map[string]bool{s.Key(): true}
			for i, st := range steps(t, out.Lines) {
				ids := gt.LookupAction(st.Name, st.Args)
				if len(ids) == 0 {
					t.Fatalf("step %d %v not ground", i, st)
				}
				next := gt.Apply(s, ids[0])
				if seen[next.Key()] {
					for _, b := range gt.Applicable(s, nil) {
						if !seen[gt.Apply(s, b).Key()] {
							t.Fatalf("step %d %s returns to a visited state although %s did not", i, out.Lines[i], gt.Actions[b].String())
						}
					}
				}
				seen[next.Key()] = true
				s = next
			}
		})
	}
}
