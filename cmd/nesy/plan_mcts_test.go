package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/internal/testkit"
	"github.com/nesy-dev/nesy/models/gguf"
)

// TestPlanCLIMCTS runs nesy plan --method cmcts and mcts on real tasks with
// a random-weight model (real Qwen3 vocabulary): every plan printed
// validates with nesy validate, with the verdict the JSON gives; cmcts
// reaches the goal; a fixed seed gives the same plan twice.
func TestPlanCLIMCTS(t *testing.T) {
	ds := testenv.Datasets(t)
	dir := t.TempDir()
	model := testkit.Model(t, dir, "q", testkit.ModelSpec{Arch: gguf.ArchQwen3, Tokenizer: "qwen3", Seed: 0})
	bwD := filepath.Join(ds, "planbench-blocksworld/domain.pddl")
	bwP := filepath.Join(ds, "planbench-blocksworld/instances/instance-10.pddl")
	games, _ := filepath.Glob(filepath.Join(ds, "alfworld/valid_unseen/*/*/game.tw-pddl"))
	if len(games) == 0 {
		t.Fatal("no ALFWorld games")
	}
	common := []string{"plan", "--model", model, "--threads", "1", "--json", "--seed", "3"}
	tests := []struct {
		name   string
		args   []string
		goal   bool // must reach the goal
		domain string
		prob   string
	}{
		{"cmcts planbench", []string{"--method", "cmcts", "--domain", bwD, "--problem", bwP, "--simulations", "3000"}, true, bwD, bwP},
		{"cmcts planbench timed", []string{"--method", "cmcts", "--domain", bwD, "--problem", bwP, "--seconds", "120"}, true, bwD, bwP},
		{"cmcts alfworld", []string{"--method", "cmcts", "--problem", games[5], "--simulations", "3000"}, true, "", games[5]},
		{"mcts unconstrained", []string{"--method", "mcts", "--domain", bwD, "--problem", bwP, "--simulations", "30"}, false, bwD, bwP},
		// One leaf per model call, and every token its own node.
		{"cmcts batch 1", []string{"--method", "cmcts", "--domain", bwD, "--problem", bwP, "--simulations", "3000", "--batch", "1"}, true, bwD, bwP},
		{"cmcts no collapse", []string{"--method", "cmcts", "--problem", games[5], "--simulations", "3000", "--no-collapse"}, true, "", games[5]},
		// Leaves valued by constrained greedy rollouts of up to 10 actions.
		{"cmcts rollouts", []string{"--method", "cmcts", "--problem", games[5], "--simulations", "3000", "--rollout", "10"}, true, "", games[5]},
		// The same rollouts sampled at temperature 1.
		{"cmcts sampled rollouts", []string{"--method", "cmcts", "--problem", games[5], "--simulations", "3000", "--rollout", "10", "--rollout-temp", "1"}, true, "", games[5]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var plans [][]string
			for run := 0; run < 2; run++ {
				out, stderr, code := runPlanCLI(t, append(slices.Clone(common), tc.args...)...)
				var res planJSON
				if err := json.Unmarshal([]byte(out), &res); err != nil {
					t.Fatalf("output is not JSON: %v\n%s\n%s", err, out, stderr)
				}
				if tc.goal && !res.GoalReached {
					t.Fatalf("no plan reaching the goal: %s\n%s", out, stderr)
				}
				if (code == 0) != (res.Valid && res.GoalReached) || !res.Valid {
					t.Fatalf("exit %d, valid %v, goal %v\n%s", code, res.Valid, res.GoalReached, out)
				}
				// (The unconstrained search may end at once: a random model's
				// top tokens at the root are rarely plan text.)
				if res.Search == nil || (tc.goal && res.Search.Simulations == 0) || res.EvaluatedTokens < int64(res.PromptTokens) {
					t.Fatalf("accounting: %s", out)
				}
				// At batch 1 nearly every simulation is a model call of its
				// own (at the default 16, about one call per 16).
				if slices.Contains(tc.args, "--batch") && 4*res.ModelCalls < int64(res.Search.Simulations) {
					t.Fatalf("--batch 1: %d model calls for %d simulations", res.ModelCalls, res.Search.Simulations)
				}
				plan := filepath.Join(dir, "plan.txt")
				if err := os.WriteFile(plan, []byte(strings.Join(res.Plan, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				vargs := []string{"validate", "--problem", tc.prob, "--plan", plan, "--json"}
				if tc.domain != "" {
					vargs = append(vargs, "--domain", tc.domain)
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
				plans = append(plans, res.Plan)
				if strings.Contains(tc.name, "timed") {
					break // a time budget is not reproducible
				}
			}
			if len(plans) == 2 && !slices.Equal(plans[0], plans[1]) {
				t.Errorf("same seed, different plans:\n%v\n%v", plans[0], plans[1])
			}
		})
	}
}

// TestPlanCLITinyModel: --model tiny generates the random-weight model once
// into the user cache folder, and plans with it like with any GGUF file.
func TestPlanCLITinyModel(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	args := []string{"plan", "--model", "tiny", "--method", "cmcts", "--simulations", "2000", "--threads", "1", "--json",
		"--domain", "../../examples/blocks/domain.pddl", "--problem", "../../examples/blocks/problem.pddl"}
	var first os.FileInfo
	for run := 0; run < 2; run++ {
		out, stderr, code := runPlanCLI(t, args...)
		var res planJSON
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("output is not JSON: %v\n%s\n%s", err, out, stderr)
		}
		if code != 0 || !res.Valid || !res.GoalReached || len(res.Plan) == 0 {
			t.Fatalf("run %d: exit %d, valid %v, goal %v\n%s\n%s", run, code, res.Valid, res.GoalReached, out, stderr)
		}
		files, _ := filepath.Glob(filepath.Join(cache, "nesy", "tiny-qwen3-*.gguf"))
		if len(files) != 1 {
			t.Fatalf("run %d: tiny models in the cache: %v", run, files)
		}
		st, err := os.Stat(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if run == 0 {
			first = st
		} else if !st.ModTime().Equal(first.ModTime()) {
			t.Errorf("the tiny model was written again on the second run")
		}
	}
}

// TestPlanCLIHybrid: a user's first steps with Qwen3.5-style models, as in
// issue 16: nesy mkmodel --arch qwen35 (and qwen35moe), then nesy plan
// --method cmcts with the written file. Loading used to fail (the search
// asks for 128 sequence slots); now every plan validates and reaches the
// goal of the demo task. The third model has heads of 64, whose delta rule
// runs as one ggml operator (models' deltaWKV), as Qwen3.5's heads of 128
// do. The last two store their weights as users' files do: BF16 (Qwen3.5's
// released type) and Q8_0.
func TestPlanCLIHybrid(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{gguf.ArchQwen35, []string{"--arch", gguf.ArchQwen35}},
		{gguf.ArchQwen35MoE, []string{"--arch", gguf.ArchQwen35MoE}},
		{"qwen35-heads-64", []string{"--arch", gguf.ArchQwen35, "--embd", "128", "--heads", "2", "--kv-heads", "1", "--head-dim", "64", "--ffn", "256"}},
		{"qwen35-bf16", []string{"--arch", gguf.ArchQwen35, "--dtype", "bf16"}},
		{"qwen35moe-q8_0", []string{"--arch", gguf.ArchQwen35MoE, "--dtype", "q8_0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := filepath.Join(t.TempDir(), tc.name+".gguf")
			if out, stderr, code := runNesy(t, append([]string{"mkmodel", "--out", model}, tc.args...)...); code != 0 {
				t.Fatalf("mkmodel: exit %d\n%s\n%s", code, out, stderr)
			}
			domain, problem := "../../examples/blocks/domain.pddl", "../../examples/blocks/problem.pddl"
			for _, method := range []string{"cmcts", "cgreedy"} {
				// --end goal: a random-weight model may end a plan at once.
				out, stderr, code := runPlanCLI(t, "plan", "--model", model, "--method", method, "--simulations", "2000",
					"--threads", "1", "--json", "--seed", "1", "--domain", domain, "--problem", problem, "--end", "goal")
				var res planJSON
				if err := json.Unmarshal([]byte(out), &res); err != nil {
					t.Fatalf("%s: output is not JSON: %v\n%s\n%s", method, err, out, stderr)
				}
				if !res.Valid || len(res.Plan) == 0 || (code == 0) != res.GoalReached {
					t.Fatalf("%s: exit %d, valid %v, goal %v\n%s\n%s", method, code, res.Valid, res.GoalReached, out, stderr)
				}
				if method == "cmcts" && !res.GoalReached {
					t.Fatalf("cmcts did not reach the goal\n%s\n%s", out, stderr)
				}
			}
		})
	}
}

// TestPlanCLIStateMemory: --sequences beyond what a Qwen3.5 model's
// recurrent state has memory for (here 100M slots of ~16 KiB: 1.6 TB) is
// an input error naming the sizes and the most slots that fit, before
// anything is allocated (a process that touched it all would be killed by
// the kernel); without --sequences the same model plans (the default
// slots fit, or are fitted to memory).
func TestPlanCLIStateMemory(t *testing.T) {
	model := filepath.Join(t.TempDir(), "qwen35.gguf")
	if out, stderr, code := runNesy(t, "mkmodel", "--out", model, "--arch", gguf.ArchQwen35); code != 0 {
		t.Fatalf("mkmodel: exit %d\n%s\n%s", code, out, stderr)
	}
	domain, problem := "../../examples/blocks/domain.pddl", "../../examples/blocks/problem.pddl"
	args := []string{"plan", "--model", model, "--method", "cmcts", "--simulations", "200", "--threads", "1", "--gpu-layers", "-1",
		"--seed", "1", "--domain", domain, "--problem", problem, "--end", "goal"}
	out, stderr, code := runPlanCLI(t, append(args, "--sequences", "100000000")...)
	if code == 0 {
		t.Fatalf("100M slots: exit 0\n%s\n%s", out, stderr)
	}
	for _, want := range []string{"100000000 sequence slots need", "of recurrent state", "load at most", "--sequences"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	if out, stderr, code := runPlanCLI(t, args...); code != 0 {
		t.Fatalf("default slots: exit %d\n%s\n%s", code, out, stderr)
	}
}
