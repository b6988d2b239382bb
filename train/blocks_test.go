package train

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/pddl/heuristic"
	"github.com/nesy-dev/nesy/pddl/search"
)

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
	probs, err := envs.GenerateBlocksworld(6, 2, nil)
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

// TestOptimalBlocksworldDemos: with DemoOptions.Optimal every generated
// Blocksworld problem is demonstrated by a plan as short as breadth-first
// search finds (A* with the blind heuristic, a different search and no
// LM-cut), never longer than GBFS's; and GBFS's default demonstrations take
// a detour on some of them (else the option would change nothing).
func TestOptimalBlocksworldDemos(t *testing.T) {
	ctx := context.Background()
	bw, err := envs.NewBlocksworld(filepath.Join(testenv.Datasets(t), "planbench-blocksworld"))
	if err != nil {
		t.Fatal(err)
	}
	probs, err := envs.GenerateBlocksworld(40, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := DemoOptions{Prompt: decoder.PromptOptions{Compact: true}}
	greedy, _, err := BlocksworldDemos(ctx, bw, probs, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Optimal = true
	optimal, unsolved, err := BlocksworldDemos(ctx, bw, probs, opts)
	if err != nil || len(optimal) != len(probs) || len(greedy) != len(probs) || len(unsolved) != 0 {
		t.Fatalf("%d optimal and %d greedy demonstrations of %d problems, unsolved %v, %v", len(optimal), len(greedy), len(probs), unsolved, err)
	}
	longer := 0
	for i, p := range probs {
		ep, err := bw.OpenProblem(ctx, p.ID, EnvBlocksworld, p.ID+".pddl", []byte(p.Src))
		if err != nil {
			t.Fatal(err)
		}
		blind, err := heuristic.New("blind", ep.Task())
		if err != nil {
			t.Fatal(err)
		}
		bfs, err := search.Solve(ctx, ep.Task(), search.Options{Algorithm: search.AStar, Heuristic: blind, UnitCost: true})
		if err != nil || bfs.Status != search.Solved {
			t.Fatalf("%s: breadth-first: %v %v", p.ID, bfs.Status, err)
		}
		if len(optimal[i].Plan) != len(bfs.Plan) {
			t.Errorf("%s: optimal demonstration of %d actions, breadth-first finds %d", p.ID, len(optimal[i].Plan), len(bfs.Plan))
		}
		if len(greedy[i].Plan) < len(optimal[i].Plan) {
			t.Errorf("%s: GBFS's %d actions shorter than the optimal %d", p.ID, len(greedy[i].Plan), len(optimal[i].Plan))
		}
		if len(greedy[i].Plan) > len(optimal[i].Plan) {
			longer++
		}
	}
	if longer == 0 {
		t.Errorf("GBFS's demonstrations of %d problems are all shortest: the premise fails", len(probs))
	}
	t.Logf("GBFS longer than the shortest plan on %d of %d problems", longer, len(probs))
}

// blocksDemos opens PlanBench's suite (its domain and words) and
// demonstrates n generated Blocksworld problems of the seed with opts.
func blocksDemos(t *testing.T, n int, seed uint64, opts DemoOptions) (*envs.Suite, []Demo) {
	t.Helper()
	bw, err := envs.NewBlocksworld(filepath.Join(testenv.Datasets(t), "planbench-blocksworld"))
	if err != nil {
		t.Fatal(err)
	}
	probs, err := envs.GenerateBlocksworld(n, seed, nil)
	if err != nil {
		t.Fatal(err)
	}
	demos, _, err := BlocksworldDemos(context.Background(), bw, probs, opts)
	if err != nil || len(demos) != n {
		t.Fatalf("Blocksworld: %d demonstrations of %d problems, %v", len(demos), n, err)
	}
	return bw, demos
}

// virtualHomeTrain opens VirtualHome's train split.
func virtualHomeTrain(t *testing.T) *envs.Suite {
	t.Helper()
	vh, err := envs.NewVirtualHome(filepath.Join(testenv.Datasets(t), "virtualhome"))
	if err == nil {
		vh, err = vh.Split(envs.VirtualHomeTrain)
	}
	if err != nil {
		t.Fatal(err)
	}
	return vh
}
