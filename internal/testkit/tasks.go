// Package testkit holds test helpers shared by several packages' tests:
// real tasks from the shared datasets with their lexicons and reference
// plans, vocabulary indexes of the shared tokenizers, and plan checks the
// way `nesy validate` makes them. It is imported by tests only.
package testkit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/trie"
	"github.com/nesy-dev/nesy/vocab"
)

// FullRun reports whether the long version of the dataset-wide tests was
// asked for (NESY_FULL=1).
func FullRun() bool { return os.Getenv("NESY_FULL") == "1" }

// Task is a real task with its lexicon, and a reference plan when the
// dataset has one.
type Task struct {
	Name string
	Lex  *lexicon.Bound
	Gold []string // reference plan in PDDL syntax, or nil
}

// Task returns the grounded task.
func (tt Task) Task() *pddl.Task { return tt.Lex.Task() }

// DatasetTasks loads up to n tasks of each dataset (ALFWorld, PlanBench
// Blocksworld, VirtualHome), spread over the dataset; n <= 0 loads all.
// It skips the test when the shared datasets are absent (see testenv).
func DatasetTasks(t testing.TB, n int) []Task {
	t.Helper()
	root := testenv.Datasets(t)
	var out []Task
	load := func(name, domain, problem string, gold []string) {
		task, _, err := pddl.LoadFiles(domain, problem)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := lexicon.ForTask(task).Bind(task)
		if err != nil {
			t.Fatalf("%s: binding the lexicon: %v", name, err)
		}
		out = append(out, Task{Name: name, Lex: b, Gold: gold})
	}
	spread := func(files []string) []string {
		slices.Sort(files)
		if n <= 0 || len(files) <= n {
			return files
		}
		sel := make([]string, n)
		for i := range sel {
			sel[i] = files[i*len(files)/n]
		}
		return sel
	}

	games, _ := filepath.Glob(filepath.Join(root, "alfworld", "valid_unseen", "*", "*", "game.tw-pddl"))
	for _, g := range spread(games) {
		rel, _ := filepath.Rel(root, g)
		load(rel, "", g, nil)
	}

	bw := filepath.Join(root, "planbench-blocksworld")
	var bwGold map[string][]string
	ReadJSON(t, filepath.Join(bw, "ground_truth_plans.json"), &bwGold)
	insts, _ := filepath.Glob(filepath.Join(bw, "instances", "*.pddl"))
	for _, p := range spread(insts) {
		id := strings.TrimSuffix(filepath.Base(p), ".pddl")
		load("planbench/"+id, filepath.Join(bw, "domain.pddl"), p, bwGold[id])
	}

	vh := filepath.Join(root, "virtualhome")
	var vhGold map[string]json.RawMessage
	ReadJSON(t, filepath.Join(vh, "gold_pddl_plan.json"), &vhGold)
	probs, _ := filepath.Glob(filepath.Join(vh, "problems", "*", "*.pddl"))
	for _, p := range spread(probs) {
		id := strings.TrimSuffix(filepath.Base(p), ".pddl")
		load("virtualhome/"+id, filepath.Join(vh, "virtualhome.pddl"), p, goldLines(vhGold[id]))
	}
	if len(out) == 0 {
		t.Fatalf("no tasks found under %s", root)
	}
	return out
}

// goldLines reads a VirtualHome gold plan: a list of action strings.
func goldLines(raw json.RawMessage) []string {
	if raw == nil {
		return nil
	}
	var lines []string
	if json.Unmarshal(raw, &lines) != nil {
		return nil
	}
	return lines
}

// ReadJSON decodes the JSON file at path into v or fails the test.
func ReadJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// RealIndex builds the vocabulary index of a shared tokenizer ("qwen3",
// "llama2", ...), with its EOS token as end token. It takes a fraction of a
// second; callers that need it often keep it.
func RealIndex(t testing.TB, family string) *trie.Index {
	t.Helper()
	tok, err := vocab.Load(testenv.Tokenizer(t, family))
	if err != nil {
		t.Fatal(err)
	}
	d := tok.Decoded()
	var end []int32
	if tok.Config != nil {
		if id, ok := tok.ID(tok.Config.EOSToken); ok {
			end = append(end, id)
		}
	}
	x, err := trie.NewIndex(d.Text, d.Special, trie.IndexOptions{EndTokens: end})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// ValidatePlanText checks a plan the way `nesy validate` does: the printed
// lines are parsed with pddl.ParsePlan and executed with Task.Validate.
func ValidatePlanText(t testing.TB, task *pddl.Task, lines []string) pddl.ValidationResult {
	t.Helper()
	src := strings.Join(lines, "\n") + "\n"
	steps, err := pddl.ParsePlan("plan", []byte(src))
	if err != nil {
		t.Fatalf("printed plan does not parse: %v\n%s", err, src)
	}
	return task.Validate(steps)
}

// IndexCache keeps the vocabulary indexes of the shared tokenizers across
// the tests of one test binary (each takes a fraction of a second to
// build). The zero value is ready; it is safe for concurrent use.
type IndexCache struct{ m sync.Map }

// Get returns the (cached) index of a shared tokenizer (see RealIndex).
func (c *IndexCache) Get(tb testing.TB, family string) *trie.Index {
	tb.Helper()
	if x, ok := c.m.Load(family); ok {
		return x.(*trie.Index)
	}
	x := RealIndex(tb, family)
	c.m.Store(family, x)
	return x
}
