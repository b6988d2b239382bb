package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/train"
)

// TestTrainCLI trains a tiny prior on four training games and plans with
// it: nesy train writes a GGUF, the plot and the checkpoint, --resume
// continues, and nesy plan loads the prior (with its compact prompt).
func TestTrainCLI(t *testing.T) {
	ds := testenv.Datasets(t)
	dir := t.TempDir()
	args := []string{"train", "--out", dir, "--datasets", ds, "--limit", "4", "--steps", "4", "--batch", "1",
		"--eval-every", "2", "--layers", "1", "--dim", "16", "--heads", "2", "--ffn", "16", "--merges", "200", "--quiet"}
	run := func(args ...string) (string, error) {
		cmd := newRootCmd()
		var o, e bytes.Buffer
		cmd.SetOut(&o)
		cmd.SetErr(&e)
		cmd.SetArgs(args)
		err := cmd.Execute()
		return o.String() + e.String(), err
	}
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
