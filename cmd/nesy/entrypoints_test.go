package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/bench"
	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/internal/testkit"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
	"github.com/nesy-dev/nesy/server"
)

// entryResult is what the three entry points report of one run, in
// common terms.
type entryResult struct {
	Plan                                []string
	Stop                                string
	Prompt, Generated, Evaluated, Calls int64
}

func (r entryResult) String() string {
	return fmt.Sprintf("stop %s, prompt %d, generated %d, evaluated %d, calls %d, plan %v",
		r.Stop, r.Prompt, r.Generated, r.Evaluated, r.Calls, r.Plan)
}

// TestEntryPointsAgree: nesy plan, POST /v1/plan and nesy bench run one
// planner (package planner), so the same ALFWorld task, method, seed and
// budget give the same plan, counters and stop reason through all three.
// (Before the planner package each had its own copy of "run method M":
// only bench used the paper's PUCB base, so cmcts differed.)
func TestEntryPointsAgree(t *testing.T) {
	ds := testenv.Datasets(t)
	env, err := envs.New("alfworld", ds)
	if err != nil {
		t.Fatal(err)
	}
	// The smallest game: its prompt fits the model's 8,192 tokens with
	// room for the plan.
	var task envs.TaskInfo
	var size int64 = 1 << 62
	for _, ti := range env.Tasks() {
		if st, err := os.Stat(ti.Problem); err == nil && st.Size() < size {
			task, size = ti, st.Size()
		}
	}
	if task.ID == "" {
		t.Fatal("no ALFWorld task")
	}
	dir := t.TempDir()
	model := testkit.Model(t, dir, "q", testkit.ModelSpec{Arch: gguf.ArchQwen3, Tokenizer: "qwen3", Seed: 1})

	// The server: one running request holding the CLI's 128 sequence slots,
	// so that the search evicts exactly as in the CLI and bench.
	ctx := context.Background()
	srv, err := server.New(ctx, server.Options{Model: model, Datasets: ds, MaxConcurrent: 1, NoOllamaStore: true,
		Engine: models.Options{Threads: 1, Sequences: 128}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	const seed, sims, maxActions, maxTokens = 3, 300, bench.DefaultMaxActions, bench.DefaultMaxTokens
	for _, method := range []string{"cgreedy", "cmcts"} {
		t.Run(method, func(t *testing.T) {
			// nesy plan
			out, stderr, _ := runPlanCLI(t, "plan", "--problem", task.Problem, "--model", model, "--method", method,
				"--simulations", fmt.Sprint(sims), "--seed", fmt.Sprint(seed), "--threads", "1", "--json",
				"--max-actions", fmt.Sprint(maxActions), "--max-tokens", fmt.Sprint(maxTokens), "--seconds", "60")
			var pj planJSON
			if err := json.Unmarshal([]byte(out), &pj); err != nil {
				t.Fatalf("nesy plan: %v\n%s\n%s", err, out, stderr)
			}
			if pj.Error != "" {
				t.Fatalf("nesy plan: %s", pj.Error)
			}
			cli := entryResult{pj.Plan, pj.StopReason, int64(pj.PromptTokens), int64(pj.GeneratedTokens), pj.EvaluatedTokens, pj.ModelCalls}

			// POST /v1/plan
			body, _ := json.Marshal(map[string]any{"env": "alfworld", "task": task.ID, "method": method,
				"simulations": sims, "max_actions": maxActions, "max_tokens": maxTokens, "seconds": 60,
				"sampling": map[string]any{"seed": seed}, "search": map[string]any{"seed": seed}})
			resp, err := http.Post(hs.URL+"/v1/plan", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var pr server.PlanResponse
			switch resp.StatusCode {
			case 200:
				err = json.Unmarshal(raw, &pr)
			case 422: // a budget ran out: the partial plan is in result
				var e struct {
					Result *server.PlanResponse `json:"result"`
				}
				err = json.Unmarshal(raw, &e)
				if err == nil && e.Result == nil {
					err = fmt.Errorf("no result")
				}
				if err == nil {
					pr = *e.Result
				}
			default:
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
			if err != nil {
				t.Fatalf("POST /v1/plan: %v: %s", err, raw)
			}
			api := entryResult{pr.Plan, pr.StopReason, pr.PromptTokens, pr.GeneratedTokens, pr.EvaluatedTokens, pr.ModelCalls}

			// nesy bench (true state: Phase II only)
			bout := filepath.Join(dir, "bench-"+method)
			_, stderr, code := runNesy(t, "bench", "--env", "alfworld", "--suite", task.ID, "--mode", "true-state",
				"--method", method, "--model", model, "--out", bout, "--simulations", fmt.Sprint(sims),
				"--seed", fmt.Sprint(seed), "--threads", "1", "--max-actions", fmt.Sprint(maxActions),
				"--datasets", ds, "--quiet")
			if code != 0 {
				t.Fatalf("nesy bench: exit %d: %s", code, stderr)
			}
			data, err := os.ReadFile(filepath.Join(bout, bench.TasksFile))
			if err != nil {
				t.Fatal(err)
			}
			var rec bench.Record
			if err := json.Unmarshal(bytes.TrimSpace(data), &rec); err != nil {
				t.Fatalf("%s: %v", data, err)
			}
			if rec.Error != "" {
				t.Fatalf("nesy bench: %s", rec.Error)
			}
			bn := entryResult{rec.Plan, rec.Stop, int64(rec.PromptTokens), int64(rec.GeneratedTokens), int64(rec.EvaluatedTokens), int64(rec.ModelCalls)}

			t.Logf("task %s\n  cli   %v\n  api   %v\n  bench %v", task.ID, cli, api, bn)
			for name, r := range map[string]entryResult{"POST /v1/plan": api, "nesy bench": bn} {
				if !slices.Equal(r.Plan, cli.Plan) || r.Stop != cli.Stop || r.Prompt != cli.Prompt ||
					r.Generated != cli.Generated || r.Evaluated != cli.Evaluated || r.Calls != cli.Calls {
					t.Errorf("%s differs from nesy plan:\n  %v\n  %v", name, r, cli)
				}
			}
			if cli.Prompt == 0 || cli.Evaluated < cli.Prompt || (method == "cmcts" && !strings.Contains("goal simulations", cli.Stop)) {
				t.Errorf("implausible run: %v", cli)
			}
		})
	}
}
