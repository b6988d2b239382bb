package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/train"
)

// runTrainCLI runs the nesy command in-process and returns its stdout and
// stderr together, and its error.
func runTrainCLI(args ...string) (string, error) {
	out, errb, err := execRoot(args...)
	return out + errb, err
}

// TestTrainCLI trains a tiny prior on four training games and plans with
// it: nesy train writes a GGUF, the plot and the checkpoint, --resume
// continues, and nesy plan loads the prior (with its compact prompt).
func TestTrainCLI(t *testing.T) {
	ds := testenv.Datasets(t)
	dir := t.TempDir()
	args := []string{"train", "--out", dir, "--datasets", ds, "--limit", "4", "--steps", "4", "--batch", "1",
		"--eval-every", "2", "--layers", "1", "--dim", "16", "--heads", "2", "--ffn", "16", "--merges", "200", "--quiet"}
	run := runTrainCLI
	out, err := run(args...)
	if err != nil || !strings.Contains(out, "held-out loss") {
		t.Fatalf("nesy train: %v\n%s", err, out)
	}
	for _, f := range []string{train.ModelFile, train.PlotFile, train.CheckpointFile} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if out, err := run(append(args, "--resume")...); err != nil {
		t.Fatalf("nesy train --resume: %v\n%s", err, out)
	}
	if _, err := run("train", "--datasets", ds); err == nil {
		t.Fatal("nesy train without --out: no error")
	}
	if out, err := run("train", "--out", t.TempDir(), "--datasets", ds, "--blas", "mkl"); err == nil || !strings.Contains(out+err.Error(), `unknown BLAS "mkl"`) {
		t.Fatalf("nesy train --blas mkl: %v\n%s", err, out)
	}
	// --probe: the trained GGUF is probed on the first 8 training games.
	if out, err := run("train", "--probe", filepath.Join(dir, train.ModelFile), "--datasets", ds, "--limit", "8"); err != nil ||
		!strings.Contains(out, "takes the goal's object type:") || !strings.Contains(out, "uniform choice") {
		t.Fatalf("nesy train --probe: %v\n%s", err, out)
	}
	if out, err := run("train", "--probe", filepath.Join(dir, "missing.gguf"), "--datasets", ds, "--limit", "2"); err == nil {
		t.Fatalf("nesy train --probe of a missing file: no error\n%s", out)
	}
	games, _ := filepath.Glob(filepath.Join(ds, "alfworld/valid_unseen/*/*/game.tw-pddl"))
	if len(games) == 0 {
		t.Fatal("no ALFWorld games")
	}
	out, stderr, code := runPlanCLI(t, "plan", "--model", filepath.Join(dir, train.ModelFile), "--method", "cgreedy",
		"--problem", games[0], "--max-actions", "3", "--threads", "1", "--json")
	if code == 2 || !strings.Contains(out, `"valid":true`) {
		t.Fatalf("nesy plan with the prior: exit %d\n%s\n%s", code, out, stderr)
	}
}

// TestTrainCLIStateFirstPack trains a tiny prior on the state-first prompt
// with the goal in capitals and a scene's goals packed: the GGUF says its prompt, the run reports
// fewer training sequences than demonstrations, nesy plan and --probe use
// it, and --pack without --state-first is refused.
func TestTrainCLIStateFirstPack(t *testing.T) {
	ds := testenv.Datasets(t)
	dir := t.TempDir()
	run := runTrainCLI
	if out, err := run("train", "--out", t.TempDir(), "--datasets", ds, "--pack", "4"); err == nil || !strings.Contains(out+err.Error(), "--pack needs --state-first") {
		t.Fatalf("nesy train --pack without --state-first: %v\n%s", err, out)
	}
	out, err := run("train", "--out", dir, "--datasets", ds, "--limit", "3", "--goals", "4", "--state-first", "--upper-goal", "--pack", "4",
		"--steps", "2", "--batch", "2", "--eval-every", "2", "--layers", "1", "--dim", "16", "--heads", "2", "--ffn", "16", "--merges", "200", "--quiet")
	if err != nil {
		t.Fatalf("nesy train --state-first --pack 4: %v\n%s", err, out)
	}
	var seqs, examples int
	if _, err := fmt.Sscanf(out[strings.Index(out, "examples: "):], "examples: %d training", &examples); err != nil {
		t.Fatalf("no example count in\n%s", out)
	}
	i := strings.Index(out, "held-out loss")
	if _, err := fmt.Sscanf(out[i:], "held-out loss %f at step 2 (%d training sequences", new(float64), &seqs); err != nil {
		t.Fatalf("no sequence count in\n%s", out)
	}
	if seqs <= 0 || seqs >= examples {
		t.Errorf("%d training sequences for %d examples: nothing packed", seqs, examples)
	}
	path := filepath.Join(dir, train.ModelFile)
	kind := promptKind(t, path)
	if want := decoder.PromptCompactStateFirst + decoder.PromptUpperGoal; kind != want {
		t.Fatalf("the GGUF's prompt is %q, want %q", kind, want)
	}
	if out, err := run("train", "--probe", path, "--datasets", ds, "--limit", "6"); err != nil || !strings.Contains(out, "takes the goal's object type:") {
		t.Fatalf("nesy train --probe of a state-first prior: %v\n%s", err, out)
	}
	games, _ := filepath.Glob(filepath.Join(ds, "alfworld/valid_unseen/*/*/game.tw-pddl"))
	if len(games) == 0 {
		t.Fatal("no ALFWorld games")
	}
	out, stderr, code := runPlanCLI(t, "plan", "--model", path, "--method", "cgreedy",
		"--problem", games[0], "--max-actions", "3", "--threads", "1", "--json")
	if code == 2 || !strings.Contains(out, `"valid":true`) {
		t.Fatalf("nesy plan with a state-first prior: exit %d\n%s\n%s", code, out, stderr)
	}
}

// TestTrainCLIGoalTrace trains tiny priors with --goal-trace and with
// --goal-trace-all: the GGUF says which, and nesy plan then writes (the
// constraint forcing it) the goal trace after every action of a
// Blocksworld plan, whose actions alone make the plan it reports and
// validates; with --goal-trace-all also after every action of an ALFWorld
// plan whose goal has alternatives. --goal-trace-all alone is refused.
func TestTrainCLIGoalTrace(t *testing.T) {
	ds := testenv.Datasets(t)
	games, _ := filepath.Glob(filepath.Join(ds, "alfworld/valid_unseen/look_at*/*/game.tw-pddl"))
	if len(games) == 0 {
		t.Fatal("no ALFWorld look-at games")
	}
	bw := filepath.Join(ds, "planbench-blocksworld")
	for _, tc := range []struct {
		flags []string
		kind  string
		alfw  bool // an ALFWorld plan is traced
	}{
		{[]string{"--goal-trace"}, decoder.PromptCompactStateFirst + decoder.PromptUpperGoal + decoder.PromptGoalTrace, false},
		{[]string{"--goal-trace", "--goal-trace-all"}, decoder.PromptCompactStateFirst + decoder.PromptUpperGoal + decoder.PromptGoalTraceAll, true},
	} {
		dir := t.TempDir()
		args := append([]string{"train", "--out", dir, "--datasets", ds, "--limit", "2", "--goals", "0", "--blocksworld", "4", "--state-first", "--upper-goal"}, tc.flags...)
		out, err := runTrainCLI(append(args, "--masked", "--steps", "2", "--batch", "2", "--eval-every", "2", "--layers", "1", "--dim", "16", "--heads", "2", "--ffn", "16", "--merges", "200", "--quiet")...)
		if err != nil {
			t.Fatalf("nesy train %v: %v\n%s", tc.flags, err, out)
		}
		if strings.Contains(out, "left unconstrained: their tokens leave it") && !strings.Contains(out, "(0 left unconstrained") {
			t.Fatalf("%v: traced demonstrations leave the constraint:\n%s", tc.flags, out)
		}
		path := filepath.Join(dir, train.ModelFile)
		if kind := promptKind(t, path); kind != tc.kind {
			t.Fatalf("%v: the GGUF's prompt is %q, want %q", tc.flags, kind, tc.kind)
		}
		plans := [][]string{{"--domain", filepath.Join(bw, "domain.pddl"), "--problem", filepath.Join(bw, "instances", "instance-1.pddl")}}
		if tc.alfw {
			plans = append(plans, []string{"--problem", games[0]})
		}
		for _, task := range plans {
			args := append(append([]string{"plan", "--model", path, "--method", "cgreedy", "--end", "goal"}, task...), "--max-actions", "4", "--threads", "1", "--json")
			out, stderr, code := runPlanCLI(t, args...)
			if code == 2 || !strings.Contains(out, `"valid":true`) {
				t.Fatalf("nesy plan %v with a prior of %v: exit %d\n%s\n%s", task, tc.flags, code, out, stderr)
			}
			var res struct{ Text string }
			if err := json.Unmarshal([]byte(out), &res); err != nil || !strings.Contains(res.Text, " => left: ") {
				t.Fatalf("%v, %v: no goal trace in the plan's text (%v):\n%s", tc.flags, task, err, out)
			}
		}
	}
	if out, err := runTrainCLI("train", "--out", t.TempDir(), "--datasets", ds, "--state-first", "--goal-trace-all"); err == nil || !strings.Contains(err.Error(), "--goal-trace-all needs --goal-trace") {
		t.Fatalf("--goal-trace-all alone: error %v, want it refused\n%s", err, out)
	}
}

// promptKind returns the prompt kind the GGUF at path declares.
func promptKind(t *testing.T, path string) string {
	t.Helper()
	lm, err := models.Load(context.Background(), path, models.Options{Threads: 1, Sequences: 1, ContextLength: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	return lm.Info().Prompt
}
