package decoder

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

// testTask is a real task with its lexicon, and a reference plan when the
// dataset has one.
type testTask struct {
	name string
	lex  *lexicon.Bound
	gold []string // reference plan in PDDL syntax, or nil
}

func (tt testTask) task() *pddl.Task { return tt.lex.Task() }

// datasetTasks loads up to n tasks of each dataset (ALFWorld, PlanBench
// Blocksworld, VirtualHome), spread over the dataset; n <= 0 loads all.
func datasetTasks(t testing.TB, n int) []testTask {
	t.Helper()
	root := testenv.Datasets(t)
	var out []testTask
	load := func(name, domain, problem string, gold []string) {
		task, _, err := pddl.LoadFiles(domain, problem)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := lexicon.ForTask(task).Bind(task)
		if err != nil {
			t.Fatalf("%s: binding the lexicon: %v", name, err)
		}
		out = append(out, testTask{name: name, lex: b, gold: gold})
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
	readJSON(t, filepath.Join(bw, "ground_truth_plans.json"), &bwGold)
	insts, _ := filepath.Glob(filepath.Join(bw, "instances", "*.pddl"))
	for _, p := range spread(insts) {
		id := strings.TrimSuffix(filepath.Base(p), ".pddl")
		load("planbench/"+id, filepath.Join(bw, "domain.pddl"), p, bwGold[id])
	}

	vh := filepath.Join(root, "virtualhome")
	var vhGold map[string]json.RawMessage
	readJSON(t, filepath.Join(vh, "gold_pddl_plan.json"), &vhGold)
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

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// realIndexes caches the vocabulary indexes of the shared tokenizers (they
// take a fraction of a second each to build) across the tests of one run.
var realIndexes sync.Map // family -> *trie.Index

// realIndex returns the vocabulary index of a shared tokenizer, with its
// EOS token as end token.
func realIndex(t testing.TB, family string) *trie.Index {
	t.Helper()
	if x, ok := realIndexes.Load(family); ok {
		return x.(*trie.Index)
	}
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
	realIndexes.Store(family, x)
	return x
}

// validatePlanText checks a plan the way `nesy validate` does: the printed
// lines are parsed with pddl.ParsePlan and executed with Task.Validate.
func validatePlanText(t testing.TB, task *pddl.Task, lines []string) pddl.ValidationResult {
	t.Helper()
	src := strings.Join(lines, "\n") + "\n"
	steps, err := pddl.ParsePlan("plan", []byte(src))
	if err != nil {
		t.Fatalf("printed plan does not parse: %v\n%s", err, src)
	}
	return task.Validate(steps)
}
