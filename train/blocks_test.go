package train

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/pddl/search"
)

// TestBlocksKey: renaming blocks keeps a problem's key; moving one block
// or changing the goal changes it.
func TestBlocksKey(t *testing.T) {
	base := blocksProblem("p", []string{"a", "b", "c"}, []string{"(clear a)", "(clear c)", "(on a b)", "(ontable b)", "(ontable c)"}, []string{"(on c a)"})
	tests := []struct {
		name string
		src  string
		same bool
	}{
		{"renamed", blocksProblem("q", []string{"x", "y", "z"}, []string{"(clear z)", "(clear y)", "(on z x)", "(ontable x)", "(ontable y)"}, []string{"(on y z)"}), true},
		{"objects listed in another order", strings.Replace(base, "a b c", "c a b", 1), true},
		{"other start", blocksProblem("p", []string{"a", "b", "c"}, []string{"(clear a)", "(clear b)", "(clear c)", "(ontable a)", "(ontable b)", "(ontable c)"}, []string{"(on c a)"}), false},
		{"other goal", blocksProblem("p", []string{"a", "b", "c"}, []string{"(clear a)", "(clear c)", "(on a b)", "(ontable b)", "(ontable c)"}, []string{"(on b c)"}), false},
	}
	k0, err := blocksKey(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		k, err := blocksKey(tt.src)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if (k == k0) != tt.same {
			t.Errorf("%s: key %q vs %q, same = %v, want %v", tt.name, k, k0, k == k0, tt.same)
		}
	}
}

// TestGenerateBlocksworld: the generated problems are PlanBench-shaped,
// solvable, deterministic for a seed, distinct up to renaming, and none is
// a PlanBench instance up to renaming, although PlanBench's own instances,
// renamed, are recognised.
func TestGenerateBlocksworld(t *testing.T) {
	ds := testenv.Datasets(t)
	dir := filepath.Join(ds, "planbench-blocksworld", "instances")
	keys, err := PlanBenchKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	// PlanBench's 501 instances are 240 problems up to renaming (instance-126
	// and instance-365, for one, differ only in their blocks' names).
	if len(keys) != 240 {
		t.Fatalf("%d distinct PlanBench problems up to renaming, want 240", len(keys))
	}
	src, err := os.ReadFile(filepath.Join(dir, "instance-10.pddl"))
	if err != nil {
		t.Fatal(err)
	}
	renamed := strings.NewReplacer(" a", " q", " b", " a", " q", " b").Replace(string(src))
	if k, err := blocksKey(renamed); err != nil || !keys[k] {
		t.Fatalf("instance-10 with a and b swapped not recognised (%v)", err)
	}
	probs, err := GenerateBlocksworld(300, 1, keys)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := GenerateBlocksworld(300, 1, keys)
	seen := map[string]bool{}
	for i, p := range probs {
		if again[i] != p {
			t.Fatalf("problem %d differs between two runs with seed 1", i)
		}
		k, err := blocksKey(p.Src)
		if err != nil {
			t.Fatal(err)
		}
		if keys[k] || seen[k] {
			t.Fatalf("%s equals a PlanBench instance or an earlier problem up to renaming", p.ID)
		}
		seen[k] = true
	}
	suite, err := envs.NewBlocksworld(filepath.Join(ds, "planbench-blocksworld"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs[:20] {
		ep, err := suite.OpenProblem(context.Background(), p.ID, "blocksworld", p.ID+".pddl", []byte(p.Src))
		if err != nil {
			t.Fatalf("%s: %v\n%s", p.ID, err, p.Src)
		}
		res, err := search.Solve(context.Background(), ep.Task(), search.Options{PreferredOperators: true})
		if err != nil || res.Status != search.Solved || len(res.Plan) == 0 {
			t.Fatalf("%s: not solved with a non-empty plan: %v %v", p.ID, res.Status, err)
		}
	}
}

// TestOtherEnvDemos: generated Blocksworld problems and VirtualHome's
// train split are demonstrated, every plan token of theirs is among the
// tokens the constraint allows (reopened from Sources as the loss needs),
// and VirtualHome's test split and the whole suite are refused.
func TestOtherEnvDemos(t *testing.T) {
	ctx := context.Background()
	ds := testenv.Datasets(t)
	bw, err := envs.NewBlocksworld(filepath.Join(ds, "planbench-blocksworld"))
	if err != nil {
		t.Fatal(err)
	}
	probs, err := GenerateBlocksworld(6, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := DemoOptions{Prompt: decoder.PromptOptions{Compact: true}, Limit: 6}
	demos, unsolved, err := BlocksworldDemos(ctx, bw, probs, opts)
	if err != nil || len(demos) != 6 || len(unsolved) != 0 {
		t.Fatalf("Blocksworld: %d demonstrations, unsolved %v, %v", len(demos), unsolved, err)
	}
	all, err := envs.NewVirtualHome(filepath.Join(ds, "virtualhome"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", envs.VirtualHomeTest} {
		suite := all
		if s != "" {
			suite, _ = all.Split(s)
		}
		if _, _, err := VirtualHomeDemos(ctx, suite, opts); err == nil {
			t.Errorf("VirtualHome split %q accepted for demonstrations", s)
		}
	}
	vh, err := all.Split(envs.VirtualHomeTrain)
	if err != nil {
		t.Fatal(err)
	}
	vdemos, _, err := VirtualHomeDemos(ctx, vh, opts)
	if err != nil || len(vdemos) == 0 {
		t.Fatalf("VirtualHome: %d demonstrations, %v", len(vdemos), err)
	}
	test := map[string]bool{}
	for _, id := range envs.VirtualHomeTestIDs() {
		test[id[strings.Index(id, "/")+1:]] = true
	}
	for _, d := range vdemos {
		if d.Env != EnvVirtualHome || test[d.ID] {
			t.Fatalf("%s: env %q, in the test split %v", d.ID, d.Env, test[d.ID])
		}
	}
	demos = append(demos, vdemos...)
	_, lm := tinyPrior(t, demos, 800)
	ex, err := Tokenize(lm, demos)
	if err != nil {
		t.Fatal(err)
	}
	left, err := ConstrainedSets(ctx, lm, Sources{Blocksworld: bw, VirtualHome: vh}, demos, ex)
	if err != nil || left != 0 {
		t.Fatalf("constrained sets: %d examples left the constraint, %v", left, err)
	}
	for _, x := range ex {
		for k, tok := range x.Tokens[x.PlanStart:] {
			if !slices.Contains(x.Allowed[k], tok) {
				t.Fatalf("%s: plan token %d not allowed", x.ID, k)
			}
		}
	}
}
