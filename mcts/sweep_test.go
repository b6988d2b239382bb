package mcts

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/nesy-dev/nesy/constraint"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/models"
)

// The sweep (NESY_SWEEP=1, not in CI) runs constrained MCTS, constrained
// greedy decoding and unconstrained MCTS from the true initial state of the
// 134 ALFWorld valid_unseen games (TextWorld names, the goal in ALFWorld's
// words, as `nesy plan` does) and PlanBench Blocksworld instances 1-100,
// with a random-weight model that has the real Qwen3 vocabulary. Per method
// it writes one JSON object per task to $NESY_SWEEP_OUT/<method>.jsonl and a
// summary to $NESY_SWEEP_OUT/summary.md (default folder:
// $TMPDIR/nesy-mcts-sweep).
//
// Environment: NESY_SWEEP_METHODS (default "cmcts,cgreedy,mcts"; also
// "cgreedy-goal", constrained greedy that may end only at the goal, and
// "greedy"),
// NESY_SWEEP_SECONDS (cmcts budget per task, default 60),
// NESY_SWEEP_MCTS_SECONDS (unconstrained budget, default 10),
// NESY_SWEEP_SUITES ("alfworld,planbench"), NESY_SWEEP_LIMIT (tasks per
// suite, default all), NESY_SWEEP_THREADS (ggml threads, default 1).
//
//	NESY_SWEEP=1 go test ./mcts -run TestSweep -timeout 10h -v

// sweepTask is one task of the sweep.
type sweepTask struct {
	suite, name string
	lex         *lexicon.Bound
	goal        string // the goal in words, when the suite has it
}

// sweepRecord is one line of <method>.jsonl.
type sweepRecord struct {
	Task            string   `json:"task"`
	Suite           string   `json:"suite"`
	Method          string   `json:"method"`
	Success         bool     `json:"success"`
	Valid           bool     `json:"valid"`
	Actions         int      `json:"actions"`
	Simulations     int      `json:"simulations"`
	EvaluatedTokens int64    `json:"evaluated_tokens"`
	GeneratedTokens int      `json:"generated_tokens"`
	PromptTokens    int      `json:"prompt_tokens"`
	ModelCalls      int64    `json:"model_calls"`
	Seconds         float64  `json:"seconds"`
	FirstGoal       float64  `json:"first_goal_seconds,omitempty"`
	Stop            string   `json:"stop"`
	Plan            []string `json:"plan"`
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func sweepTasks(t *testing.T, suites []string, limit int) []sweepTask {
	var out []sweepTask
	for _, suite := range suites {
		var n int
		switch suite {
		case "alfworld":
			for _, g := range alfworldGames(t) {
				if limit > 0 && n == limit {
					break
				}
				ep, err := envs.OpenALFWorldGame(context.Background(), g)
				if err != nil {
					t.Fatal(err)
				}
				rel := filepath.Join(filepath.Base(filepath.Dir(filepath.Dir(g))), filepath.Base(filepath.Dir(g)))
				out = append(out, sweepTask{suite, rel, ep.Lexicon(), ep.Goal()})
				n++
			}
		case "planbench":
			for i := 1; i <= 100 && (limit <= 0 || n < limit); i++ {
				d, p := planbench(t, i)
				out = append(out, sweepTask{suite, "instance-" + strconv.Itoa(i), loadTask(t, d, p), ""})
				n++
			}
		default:
			t.Fatalf("unknown suite %q", suite)
		}
	}
	return out
}

func TestSweep(t *testing.T) {
	if os.Getenv("NESY_SWEEP") != "1" {
		t.Skip("set NESY_SWEEP=1 to run the ALFWorld / PlanBench sweep (hours)")
	}
	out := os.Getenv("NESY_SWEEP_OUT")
	if out == "" {
		out = filepath.Join(os.TempDir(), "nesy-mcts-sweep")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	methods := strings.Split(orDefault(os.Getenv("NESY_SWEEP_METHODS"), "cmcts,cgreedy,mcts"), ",")
	suites := strings.Split(orDefault(os.Getenv("NESY_SWEEP_SUITES"), "alfworld,planbench"), ",")
	budget := time.Duration(envInt("NESY_SWEEP_SECONDS", 60)) * time.Second
	freeBudget := time.Duration(envInt("NESY_SWEEP_MCTS_SECONDS", 10)) * time.Second
	lm, idx := loadModel(t, modelPath(t, "qwen3", testModelSpec), models.Options{
		Sequences: 128, Threads: envInt("NESY_SWEEP_THREADS", 1), ContextLength: 8192,
	})
	dec, err := decoder.New(lm, idx)
	if err != nil {
		t.Fatal(err)
	}
	tasks := sweepTasks(t, suites, envInt("NESY_SWEEP_LIMIT", 0))
	load0 := loadAvg()
	records := map[string][]sweepRecord{}
	for _, method := range methods {
		f, err := os.Create(filepath.Join(out, method+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		enc := json.NewEncoder(f)
		for _, tk := range tasks {
			r := runSweepTask(t, lm, dec, tk, method, budget, freeBudget)
			records[method] = append(records[method], r)
			if err := enc.Encode(r); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %s/%s: success=%v actions=%d sims=%d tokens=%d %.1fs", method, tk.suite, tk.name, r.Success, r.Actions, r.Simulations, r.EvaluatedTokens, r.Seconds)
		}
		f.Close()
	}
	sum := sweepSummary(records, methods, suites, budget, freeBudget, load0, loadAvg())
	fmt.Println(sum)
	if err := os.WriteFile(filepath.Join(out, "summary.md"), []byte(sum), 0o644); err != nil {
		t.Fatal(err)
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func runSweepTask(t *testing.T, lm models.LM, dec *decoder.Decoder, tk sweepTask, method string, budget, freeBudget time.Duration) sweepRecord {
	space := constraint.Options{StopAtGoal: true, MaxActions: 100}
	popts := decoder.PromptOptions{Goal: tk.goal}
	rec := sweepRecord{Task: tk.name, Suite: tk.suite, Method: method}
	ctx := context.Background()
	switch method {
	case "cgreedy", "greedy", "cgreedy-goal":
		if method == "cgreedy-goal" {
			// The plan may end only where the goal holds: greedy decoding
			// cannot stop early by writing an end token.
			space.EndPolicy = constraint.EndAtGoal
		}
		r, err := dec.Decode(ctx, decoder.Request{Lexicon: tk.lex, Prompt: popts, Space: space}, decoder.Options{Constrained: method != "greedy"})
		if err != nil {
			t.Fatalf("%s: %v", tk.name, err)
		}
		rec.Success, rec.Valid, rec.Actions, rec.Plan = r.GoalReached, r.Valid, len(r.Plan), r.Lines
		rec.EvaluatedTokens, rec.GeneratedTokens, rec.PromptTokens = int64(r.EvaluatedTokens), r.GeneratedTokens, r.PromptTokens
		rec.ModelCalls, rec.Seconds, rec.Stop = int64(r.ModelCalls), r.Seconds, r.EndReason
	case "cmcts", "mcts":
		sp, err := constraint.New(dec.Index(), tk.lex, space)
		if err != nil {
			t.Fatal(err)
		}
		p, err := decoder.BuildPrompt(lm, tk.lex, popts)
		if err != nil {
			t.Fatal(err)
		}
		opts := Options{Time: budget}
		if method == "mcts" {
			opts = Options{Time: freeBudget, Unconstrained: true}
		}
		start := time.Now()
		r, err := Search(ctx, lm, sp, p.Tokens, opts)
		if err != nil {
			t.Fatalf("%s: %v", tk.name, err)
		}
		rec.Success, rec.Valid, rec.Actions, rec.Plan = r.GoalReached, r.Valid, len(r.Plan), r.Lines
		rec.Simulations, rec.EvaluatedTokens, rec.GeneratedTokens = r.Stats.Simulations, r.Stats.EvaluatedTokens, len(r.Tokens)
		rec.PromptTokens, rec.ModelCalls, rec.Stop = len(p.Tokens), r.Stats.ModelCalls, r.Stop
		rec.Seconds, rec.FirstGoal = time.Since(start).Seconds(), r.Stats.FirstGoal.Seconds()
		if !r.Valid {
			t.Errorf("%s: %s returned an invalid plan: %s", tk.name, method, r.Validation.Error)
		}
	default:
		t.Fatalf("unknown method %q", method)
	}
	return rec
}

// loadAvg returns the 1-minute load average ("" when unknown).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.Fields(string(b))[0]
}

func sweepSummary(records map[string][]sweepRecord, methods, suites []string, budget, freeBudget time.Duration, load0, load1 string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "random-weight qwen3 (%s), real Qwen3 vocabulary; cmcts %v per task, mcts (unconstrained) %v; load average %s at start, %s at end\n\n",
		"64 wide, 2 layers", budget, freeBudget, load0, load1)
	fmt.Fprintln(&b, "| suite | method | tasks | success | mean sims | median sims | mean evaluated tokens | mean s | median s | max s |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|---|---|")
	for _, suite := range suites {
		for _, m := range methods {
			var rs []sweepRecord
			for _, r := range records[m] {
				if r.Suite == suite {
					rs = append(rs, r)
				}
			}
			if len(rs) == 0 {
				continue
			}
			ok := 0
			var sims, secs []float64
			var toks float64
			for _, r := range rs {
				if r.Success {
					ok++
				}
				sims = append(sims, float64(r.Simulations))
				secs = append(secs, r.Seconds)
				toks += float64(r.EvaluatedTokens)
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d (%.1f%%) | %.0f | %.0f | %.0f | %.1f | %.1f | %.1f |\n", suite, m, len(rs), ok,
				100*float64(ok)/float64(len(rs)), mean(sims), median(sims), toks/float64(len(rs)), mean(secs), median(secs), slices.Max(secs))
		}
	}
	return b.String()
}

func mean(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

func median(x []float64) float64 {
	y := slices.Clone(x)
	slices.Sort(y)
	return y[len(y)/2]
}
