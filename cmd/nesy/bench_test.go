package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/bench"
	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/models/gguf"
)

func writeRecords(t *testing.T, recs []bench.Record) string {
	t.Helper()
	var b strings.Builder
	for _, r := range recs {
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, bench.TasksFile), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestBenchCompare(t *testing.T) {
	a := writeRecords(t, []bench.Record{
		{Task: "f1/1", Cluster: "f1", Success: true}, {Task: "f1/2", Cluster: "f1", Success: true},
		{Task: "f2/1", Cluster: "f2", Success: true}, {Task: "f2/2", Cluster: "f2", Success: true},
		{Task: "f3/1", Cluster: "f3", Success: true}, {Task: "f3/2", Cluster: "f3"},
	})
	b := writeRecords(t, []bench.Record{
		{Task: "f1/1", Cluster: "f1"}, {Task: "f1/2", Cluster: "f1"},
		{Task: "f2/1", Cluster: "f2"}, {Task: "f2/2", Cluster: "f2"},
		{Task: "f3/1", Cluster: "f3"}, {Task: "f3/2", Cluster: "f3"},
	})
	out, errOut, code := runNesy(t, "bench", "compare", a, b)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// 5 discordant pairs all one way: p = 2 * (1/2)^5.
	for _, want := range []string{"paired tasks: 6 in 3 clusters", "only A 5, only B 0", "McNemar exact p = 0.0625", "+83.3 points"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, _, code = runNesy(t, "bench", "compare", "--json", filepath.Join(a, bench.TasksFile), b)
	var c bench.Comparison
	if code != 0 || json.Unmarshal([]byte(out), &c) != nil || c.Paired != 6 || c.AOnly != 5 || c.PValue != 0.0625 {
		t.Fatalf("json (exit %d): %s", code, out)
	}
	if _, _, code := runNesy(t, "bench", "compare", a, t.TempDir()); code == 0 {
		t.Error("a folder without records was accepted")
	}
}

func TestBenchFlagErrors(t *testing.T) {
	cases := [][]string{
		{"bench", "--method", "cgreedy", "--model", "m", "--out", "o"},
		{"bench", "--env", "alfworld", "--method", "cgreedy", "--model", "m", "--out", "o", "--shard", "3/2"},
		{"bench", "--env", "mars", "--method", "cgreedy", "--model", "m", "--out", "o", "--datasets", "."},
		{"bench", "--env", "blocksworld", "--method", "cgreedy", "--model", "m", "--out", "o", "--end", "never"},
		{"bench", "report"},
		{"bench", "compare", "only-one"},
	}
	for _, args := range cases {
		if _, _, code := runNesy(t, args...); code == 0 {
			t.Errorf("%v: exit 0", args)
		}
	}
	// Bad sizes and delta rules are named before any model loads.
	for flag, value := range map[string]string{"--search-memory": "lots", "--delta-rule": "fast"} {
		args := []string{"bench", "--env", "blocksworld", "--method", "cmcts", "--model", "m", "--out", "o", flag, value}
		if _, stderr, code := runNesy(t, args...); code == 0 || !strings.Contains(stderr, flag) {
			t.Errorf("%v: exit %d, stderr %q; want an error naming %s", args, code, stderr, flag)
		}
	}
}

// TestBenchEndAtGoal: --end goal reaches the planner, is recorded in
// run.json, and a resume with the other policy is refused with the folder
// named. The task is one of ALFWorld's training games on which p29 (the
// prior shipped before a25), in two-phase mode, ended its plan (end-of-turn
// token) short of the goal; with --end goal the plan must not end so. The
// shipped a25 ends no training game early (it reads "left: none" in its
// goal trace before it ends: 0 of 200 true-state, 0 of 50 two-phase), so
// here the end-token check only guards against a regression; the refusal
// of the end token before the goal is tested in package constraint
// ("end token refused before the goal") and through nesy plan
// (TestPlanCLI's "ends only at the goal" cases).
func TestBenchEndAtGoal(t *testing.T) {
	ds := testenv.Datasets(t)
	const task = "pick_two_obj_and_place-CreditCard-None-Desk-313/trial_T20190909_104504_038752"
	run := func(end string) (string, bench.Record) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "run")
		if _, stderr, code := runNesy(t, "bench", "--env", "alfworld", "--split", "valid_train", "--suite", task, "--method", "cgreedy",
			"--mode", "two-phase", "--out", out, "--threads", "1", "--datasets", ds, "--quiet", "--end", end); code != 0 {
			t.Fatalf("--end %s: exit %d: %s", end, code, stderr)
		}
		data, err := os.ReadFile(filepath.Join(out, bench.TasksFile))
		var r bench.Record
		if err != nil || json.Unmarshal(data, &r) != nil || r.Task != task {
			t.Fatalf("--end %s: tasks %s (%v)", end, data, err)
		}
		return out, r
	}
	if _, r := run("any"); !r.Success && r.Stop != "end_token" && r.Stop != "max_actions" && r.Stop != "max_tokens" {
		t.Fatalf("--end any: stop %q without the goal", r.Stop)
	}
	out, r := run("goal")
	if !r.Success && r.Stop == "end_token" {
		t.Errorf("--end goal: the plan ended at the end token short of the goal (%d actions)", len(r.Plan))
	}
	var info bench.RunInfo
	if data, err := os.ReadFile(filepath.Join(out, bench.RunFile)); err != nil || json.Unmarshal(data, &info) != nil || info.End != "goal" {
		t.Fatalf("run.json %s (%v): want end goal", data, err)
	}
	if _, stderr, code := runNesy(t, "bench", "--env", "alfworld", "--split", "valid_train", "--suite", task, "--method", "cgreedy",
		"--mode", "two-phase", "--out", out, "--threads", "1", "--datasets", ds, "--quiet"); code == 0 || !strings.Contains(stderr, `holds a run with end "goal"`) {
		t.Fatalf("resume with --end any: exit %d, %q", code, stderr)
	}
}

// An end-to-end run through the CLI, then a combined report, and the
// refusal to write it into a run folder.
func TestBenchRunAndReport(t *testing.T) {
	ds := testenv.Datasets(t)
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := gguf.Write(model, gguf.Default(gguf.ArchQwen3)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"bench", "--env", "blocksworld", "--method", "cgreedy", "--mode", "true-state", "--model", model,
		"--out", out, "--limit", "2", "--seconds", "5", "--max-actions", "4", "--threads", "1", "--datasets", ds}
	stdout, stderr, code := runNesy(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "tasks succeeded") || !strings.Contains(stderr, "[2/2]") {
		t.Fatalf("stdout %q, progress %q", stdout, stderr)
	}
	for _, f := range []string{bench.TasksFile, bench.SummaryFile, bench.ReportFile, bench.SuccessPlot, bench.TokensPlot} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Fatal(err)
		}
	}
	var s bench.Summary
	data, _ := os.ReadFile(filepath.Join(out, bench.SummaryFile))
	if err := json.Unmarshal(data, &s); err != nil || s.Tasks != 2 {
		t.Fatalf("summary %s: %v", data, err)
	}
	// Resuming runs nothing new.
	if _, stderr, code := runNesy(t, args...); code != 0 || !strings.Contains(stderr, "2 already done") {
		t.Fatalf("resume: exit %d, %q", code, stderr)
	}
	combined := t.TempDir()
	table, _, code := runNesy(t, "bench", "report", "--out", combined, out)
	if code != 0 || !strings.Contains(table, "| cgreedy (true-state) |") {
		t.Fatalf("report: exit %d\n%s", code, table)
	}
	if _, _, code := runNesy(t, "bench", "report", "--out", out, out); code == 0 {
		t.Error("a combined report over a run folder was accepted")
	}
}

// TestBenchMaxTokens: --max-tokens bounds a decoded plan (the task stops
// at max_tokens with no more tokens than that), is recorded in run.json,
// and a resume with another bound is refused.
func TestBenchMaxTokens(t *testing.T) {
	ds := testenv.Datasets(t)
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"bench", "--env", "blocksworld", "--split", "heldout", "--limit", "1", "--method", "cgreedy", "--mode", "true-state",
		"--model", "uniform", "--out", out, "--threads", "1", "--datasets", ds, "--quiet"}
	if _, stderr, code := runNesy(t, append(args, "--max-tokens", "7")...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(filepath.Join(out, bench.TasksFile))
	var r bench.Record
	if err != nil || json.Unmarshal(data, &r) != nil {
		t.Fatalf("tasks %s (%v)", data, err)
	}
	if r.Stop != "max_tokens" || r.GeneratedTokens != 7 {
		t.Fatalf("stop %q after %d tokens, want max_tokens after 7", r.Stop, r.GeneratedTokens)
	}
	var info bench.RunInfo
	if data, err := os.ReadFile(filepath.Join(out, bench.RunFile)); err != nil || json.Unmarshal(data, &info) != nil || info.MaxTokens != 7 {
		t.Fatalf("run.json %s (%v): want max_tokens 7", data, err)
	}
	if _, stderr, code := runNesy(t, args...); code == 0 || !strings.Contains(stderr, "holds a run with max_tokens 7") {
		t.Fatalf("resume with the default bound: exit %d, %q", code, stderr)
	}
}
