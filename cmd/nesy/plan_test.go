package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/internal/testkit"
	"github.com/nesy-dev/nesy/models/gguf"
)

// runPlanCLI runs the nesy command in-process and returns stdout, stderr and
// the exit status.
func runPlanCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	out, errb, err := execRoot(args...)
	code := 0
	if err != nil {
		var e exitError
		if !errors.As(err, &e) {
			t.Fatalf("nesy %s: error %v is not an exit status", strings.Join(args, " "), err)
		}
		code = e.code
	}
	return out, errb, code
}

// execRoot runs the nesy command in-process and returns its stdout, stderr
// and error.
func execRoot(args ...string) (string, string, error) {
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errb.String(), err
}

// oneShot is a task whose only action reaches the goal: a constrained plan
// that may end only at the goal must be that action.
const (
	oneShotDomain  = "(define (domain oneshot) (:requirements :strips :negative-preconditions)\n (:predicates (used))\n (:action press :parameters () :precondition (not (used)) :effect (used)))\n"
	oneShotProblem = "(define (problem p) (:domain oneshot) (:init) (:goal (used)))\n"
)

// TestPlanCLI runs nesy plan on a tiny random model (real Qwen3
// vocabulary) and checks the CLI contract: the JSON fields, the exit status,
// and that nesy validate accepts the printed plan with the same verdict.
func TestPlanCLI(t *testing.T) {
	ds := testenv.Datasets(t)
	dir := t.TempDir()
	model := testkit.Model(t, dir, "q", testkit.ModelSpec{Arch: gguf.ArchQwen3, Tokenizer: "qwen3", Seed: 0})
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	oneD, oneP := write("d.pddl", oneShotDomain), write("p.pddl", oneShotProblem)
	bwD := filepath.Join(ds, "planbench-blocksworld/domain.pddl")
	bwP := filepath.Join(ds, "planbench-blocksworld/instances/instance-10.pddl")
	games, _ := filepath.Glob(filepath.Join(ds, "alfworld/valid_unseen/*/*/game.tw-pddl"))
	if len(games) == 0 {
		t.Fatal("no ALFWorld games")
	}
	common := []string{"--model", model, "--threads", "1", "--json"}
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache")) // where --model uniform writes its tiny model
	tests := []struct {
		name        string
		args        []string
		code        int  // -1: 0 iff goal reached
		valid       bool // expected "valid" (when code != 2)
		invalidStep bool // first_invalid present
		goal        bool // goal must be reached
	}{
		{"cgreedy blocksworld", []string{"--method", "cgreedy", "--domain", bwD, "--problem", bwP, "--max-actions", "6"}, -1, true, false, false},
		{"cgreedy sampled", []string{"--method", "cgreedy", "--domain", bwD, "--problem", bwP, "--max-actions", "6", "--temperature", "1", "--top-k", "5", "--seed", "7"}, -1, true, false, false},
		{"cgreedy alfworld game without domain", []string{"--method", "cgreedy", "--problem", games[0], "--max-actions", "4"}, -1, true, false, false},
		{"cgreedy ends only at the goal", []string{"--method", "cgreedy", "--domain", oneD, "--problem", oneP, "--end", "goal"}, 0, true, false, true},
		{"greedy reports the first invalid step", []string{"--method", "greedy", "--domain", bwD, "--problem", bwP, "--max-tokens", "12"}, 1, false, true, false},
		{"cmcts", []string{"--method", "cmcts", "--domain", oneD, "--problem", oneP, "--simulations", "20"}, 0, true, false, true},
		{"missing problem", []string{"--method", "cgreedy"}, 2, false, false, false},
		{"unknown method", []string{"--method", "beam", "--domain", oneD, "--problem", oneP}, 2, false, false, false},
		{"negative search batch", []string{"--method", "cmcts", "--domain", oneD, "--problem", oneP, "--batch", "-1"}, 2, false, false, false},
		{"negative rollout", []string{"--method", "cmcts", "--domain", oneD, "--problem", oneP, "--rollout", "-1"}, 2, false, false, false},
		{"negative rollout temperature", []string{"--method", "cmcts", "--domain", oneD, "--problem", oneP, "--rollout", "5", "--rollout-temp", "-1"}, 2, false, false, false},
		{"bad delta rule", []string{"--method", "cmcts", "--domain", oneD, "--problem", oneP, "--delta-rule", "fast"}, 2, false, false, false},
		{"bad search memory", []string{"--method", "cmcts", "--domain", oneD, "--problem", oneP, "--search-memory", "lots"}, 2, false, false, false},
		{"search memory below one node", []string{"--method", "cmcts", "--domain", oneD, "--problem", oneP, "--search-memory", "100B"}, 2, false, false, false},
		// Two nodes' worth of memory stops the search (stop_reason
		// "memory", checked below) before any plan reaches the goal.
		{"search memory bound", []string{"--model", "uniform", "--method", "cmcts", "--problem", games[0], "--simulations", "2000", "--search-memory", "16KiB"}, 1, true, false, false},
		{"bad end policy", []string{"--method", "cgreedy", "--domain", oneD, "--problem", oneP, "--end", "never"}, 2, false, false, false},
		// The uniform prior (zero logits) over the tiny model's vocabulary,
		// written into the test's cache folder: the search alone solves the
		// first ALFWorld game.
		{"uniform cgreedy ends only at the goal", []string{"--model", "uniform", "--method", "cgreedy", "--domain", oneD, "--problem", oneP, "--end", "goal"}, 0, true, false, true},
		{"uniform cmcts alfworld", []string{"--model", "uniform", "--method", "cmcts", "--problem", games[0], "--simulations", "2000"}, 0, true, false, true},
		{"missing model file", []string{"--method", "cgreedy", "--domain", oneD, "--problem", oneP, "--model", filepath.Join(dir, "none.gguf")}, 2, false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := runPlanCLI(t, append(append([]string{"plan"}, common...), tc.args...)...)
			var raw map[string]any
			if err := json.Unmarshal([]byte(out), &raw); err != nil {
				t.Fatalf("output is not JSON: %v\n%s\n%s", err, out, stderr)
			}
			if tc.code == 2 {
				if code != 2 || raw["error"] == "" || raw["error"] == nil {
					t.Fatalf("exit %d, error %v; want 2 with an error\n%s", code, raw["error"], stderr)
				}
				return
			}
			// The contract's fields, with their types.
			for key, kind := range map[string]string{"plan": "array", "valid": "bool", "goal_reached": "bool",
				"generated_tokens": "number", "evaluated_tokens": "number", "model_calls": "number", "seconds": "number"} {
				v, ok := raw[key]
				got := map[bool]string{true: "?"}[true]
				switch v.(type) {
				case []any:
					got = "array"
				case bool:
					got = "bool"
				case float64:
					got = "number"
				}
				if !ok || got != kind {
					t.Fatalf("field %q is %v (%s), want a %s\n%s", key, v, got, kind, out)
				}
			}
			var res planJSON
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatal(err)
			}
			want := tc.code
			if want < 0 {
				want = map[bool]int{true: 0, false: 1}[res.Valid && res.GoalReached]
			}
			if code != want {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, want, out, stderr)
			}
			if res.Valid != tc.valid || (res.FirstInvalid != nil) != tc.invalidStep || (tc.goal && !res.GoalReached) {
				t.Fatalf("valid %v first_invalid %+v goal %v\n%s", res.Valid, res.FirstInvalid, res.GoalReached, out)
			}
			if slices.Contains(tc.args, "--search-memory") && res.StopReason != "memory" {
				t.Fatalf("stop_reason %q, want memory\n%s", res.StopReason, out)
			}
			if res.EvaluatedTokens < int64(res.PromptTokens) || res.PromptTokens == 0 || res.ModelCalls == 0 {
				t.Fatalf("accounting: %d prompt, %d evaluated, %d calls", res.PromptTokens, res.EvaluatedTokens, res.ModelCalls)
			}
			// nesy validate reads the printed plan and agrees.
			domain, problem := "", ""
			for i, a := range tc.args {
				switch a {
				case "--domain":
					domain = tc.args[i+1]
				case "--problem":
					problem = tc.args[i+1]
				}
			}
			plan := write("plan.txt", strings.Join(res.Plan, "\n")+"\n")
			vargs := []string{"validate", "--problem", problem, "--plan", plan, "--json"}
			if domain != "" {
				vargs = append(vargs, "--domain", domain)
			}
			vout, _, vcode := runPlanCLI(t, vargs...)
			var v struct {
				Valid       bool `json:"valid"`
				GoalReached bool `json:"goal_reached"`
				Steps       int  `json:"steps"`
			}
			if err := json.Unmarshal([]byte(vout), &v); err != nil {
				t.Fatalf("validate output: %v\n%s", err, vout)
			}
			if !v.Valid || v.Steps != len(res.Plan) || v.GoalReached != res.GoalReached || (vcode == 0) != res.GoalReached {
				t.Fatalf("nesy validate says valid %v goal %v (%d steps, exit %d) for %v", v.Valid, v.GoalReached, v.Steps, vcode, res.Plan)
			}
		})
	}
}

// TestDefaultModelIsTheTrainedPrior: with --model omitted, nesy plan and
// bench plan with the trained prior embedded in the binary, and that prior
// has learnt something: constrained greedy decoding (no search) reaches more
// goals than the uniform prior (zero logits) on twenty ALFWorld valid_train
// games (every tenth) and the first 40 problems of VirtualHome's train split
// (the splits it was trained on). Every plan either way is valid.
func TestDefaultModelIsTheTrainedPrior(t *testing.T) {
	ds := testenv.Datasets(t)
	games, _ := filepath.Glob(filepath.Join(ds, "alfworld/valid_train/*/*/game.tw-pddl"))
	if len(games) < 200 {
		t.Fatalf("%d valid_train games, want 200", len(games))
	}
	t.Setenv("XDG_CACHE_HOME", filepath.Join(t.TempDir(), "cache"))
	solved := map[string]int{}
	for i := 0; i < len(games); i += 10 {
		for _, model := range []string{"", uniformModel} {
			args := []string{"plan", "--problem", games[i], "--method", "cgreedy", "--threads", "1", "--json"}
			if model != "" {
				args = append(args, "--model", model)
			}
			out, stderr, code := runPlanCLI(t, args...)
			var res planJSON
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("%s %q: %v\nstderr: %s", games[i], model, err, stderr)
			}
			if !res.Valid {
				t.Errorf("%s, model %q: invalid plan %v", games[i], model, res.Plan)
			}
			if model == "" && res.Model != defaultModel {
				t.Errorf("default model reported as %q, want %q", res.Model, defaultModel)
			}
			if res.GoalReached != (code == 0) {
				t.Errorf("%s: goal_reached %v with exit status %d", games[i], res.GoalReached, code)
			}
			if res.GoalReached {
				solved[res.Model]++
			}
		}
	}
	// And the first 40 problems of VirtualHome's train split, through nesy
	// bench (the goal in the environment's words, as training saw it).
	for _, model := range []string{"", uniformModel} {
		out := filepath.Join(t.TempDir(), "vh")
		args := []string{"bench", "--env", "virtualhome", "--split", "train", "--method", "cgreedy", "--mode", "true-state",
			"--limit", "40", "--threads", "1", "--quiet", "--out", out, "--datasets", ds}
		name := defaultModel
		if model != "" {
			args, name = append(args, "--model", model), model
		}
		if _, stderr, code := runPlanCLI(t, args...); code != 0 {
			t.Fatalf("nesy bench (model %q): exit %d\n%s", model, code, stderr)
		}
		data, err := os.ReadFile(filepath.Join(out, "tasks.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var rec struct {
				Success   bool `json:"success"`
				PlanValid bool `json:"plan_valid"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
			if !rec.PlanValid {
				t.Errorf("VirtualHome, model %q: an invalid plan: %s", name, line)
			}
			if rec.Success {
				solved[name]++
			}
		}
	}
	t.Logf("goals reached on 20 ALFWorld valid_train games and 40 VirtualHome train problems, cgreedy: prior %d, uniform %d", solved[defaultModel], solved[uniformModel])
	if solved[defaultModel] == 0 || solved[defaultModel] <= solved[uniformModel] {
		t.Errorf("the embedded prior reached %d goals, the uniform prior %d: the prior should reach some and more", solved[defaultModel], solved[uniformModel])
	}
}
