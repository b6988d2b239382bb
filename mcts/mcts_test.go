package mcts

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nesy-dev/nesy/constraint"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/trie"
)

// A small blocksworld (PlanBench's four operators) for tests that need no
// shared data.
const bwDomain = `(define (domain blocksworld-4ops)
  (:requirements :strips)
  (:predicates (clear ?x) (ontable ?x) (handempty) (holding ?x) (on ?x ?y))
  (:action pick-up :parameters (?ob)
    :precondition (and (clear ?ob) (ontable ?ob) (handempty))
    :effect (and (holding ?ob) (not (clear ?ob)) (not (ontable ?ob)) (not (handempty))))
  (:action put-down :parameters (?ob)
    :precondition (holding ?ob)
    :effect (and (clear ?ob) (handempty) (ontable ?ob) (not (holding ?ob))))
  (:action stack :parameters (?ob ?underob)
    :precondition (and (clear ?underob) (holding ?ob))
    :effect (and (handempty) (clear ?ob) (on ?ob ?underob) (not (clear ?underob)) (not (holding ?ob))))
  (:action unstack :parameters (?ob ?underob)
    :precondition (and (on ?ob ?underob) (clear ?ob) (handempty))
    :effect (and (holding ?ob) (clear ?underob) (not (on ?ob ?underob)) (not (clear ?ob)) (not (handempty)))))`

// bwProblem stacks a tower of the blocks given by the goal.
func bwProblem(init, goal string) string {
	return `(define (problem p) (:domain blocksworld-4ops) (:objects a b c d)
  (:init (handempty) ` + init + `)
  (:goal (and ` + goal + `)))`
}

// bwWide is ten blocks on the table with the goal of bwReverse: a space no
// budget in these tests can exhaust (tens of thousands of states), so a
// budget, not exhaustion, ends every search on it on any machine.
const bwWide = `(define (problem p) (:domain blocksworld-4ops) (:objects a b c d e f g h i j)
  (:init (handempty) (ontable a) (ontable b) (ontable c) (ontable d) (ontable e) (ontable f) (ontable g)
    (ontable h) (ontable i) (ontable j) (clear a) (clear b) (clear c) (clear d) (clear e) (clear f) (clear g)
    (clear h) (clear i) (clear j))
  (:goal (and (on a b) (on b c) (on c d) (on d e) (on e f) (on f g) (on g h) (on h i) (on i j))))`

// Problems: c on b on a from all on the table (4 actions); the reverse of
// a tower of four (6 actions); a goal that holds initially.
var (
	bwTower   = bwProblem("(ontable a) (ontable b) (ontable c) (ontable d) (clear a) (clear b) (clear c) (clear d)", "(on c b) (on b a)")
	bwReverse = bwProblem("(ontable a) (on b a) (on c b) (on d c) (clear d)", "(on a b) (on b c)")
	bwDone    = bwProblem("(ontable a) (on b a) (ontable c) (ontable d) (clear b) (clear c) (clear d)", "(on b a)")
)

// inlineTask grounds an inline blocksworld problem with its lexicon.
func inlineTask(t testing.TB, problem string) *lexicon.Bound {
	t.Helper()
	d, _, err := pddl.ParseDomain("domain.pddl", []byte(bwDomain))
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := pddl.ParseProblem("problem.pddl", []byte(problem))
	if err != nil {
		t.Fatal(err)
	}
	task, err := pddl.Ground(d, p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := lexicon.ForTask(task).Bind(task)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tinySpec is the default tiny llama with its synthetic vocabulary: loads
// and evaluates in milliseconds.
func tinySpec(testing.TB) gguf.Spec { s := gguf.Default(gguf.ArchLlama); s.Seed = 3; return s }

// setup is a model, a task and the planning prompt.
type setup struct {
	lm     *models.Engine
	idx    *trie.Index
	lex    *lexicon.Bound
	sp     *constraint.Space
	prompt []int32
}

func newSetup(t testing.TB, lm *models.Engine, idx *trie.Index, lex *lexicon.Bound, space constraint.Options) setup {
	t.Helper()
	sp, err := constraint.New(idx, lex, space)
	if err != nil {
		t.Fatal(err)
	}
	p, err := decoder.BuildPrompt(lm, lex, decoder.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return setup{lm: lm, idx: idx, lex: lex, sp: sp, prompt: p.Tokens}
}

func (st setup) search(t testing.TB, opts Options) *Result {
	t.Helper()
	res, err := Search(context.Background(), st.lm, st.sp, st.prompt, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, st, res)
	return res
}

// checkResult checks what every result must satisfy: the plan re-validates
// (independently, from its PDDL lines), Valid and GoalReached agree with the
// validator, the tokens spell the plan, the engine's sequences are all
// released, and the counts are consistent.
func checkResult(t testing.TB, st setup, res *Result) {
	t.Helper()
	task := st.lex.Task()
	steps, err := pddl.ParsePlan("plan", []byte(strings.Join(res.Lines, "\n")))
	if err != nil {
		t.Fatalf("plan lines do not parse: %v", err)
	}
	v := task.Validate(steps)
	if !v.Valid {
		t.Fatalf("returned plan is not executable: %s\n%s", v.Error, strings.Join(res.Lines, "\n"))
	}
	if res.Valid != v.Valid || res.GoalReached != v.GoalReached {
		t.Errorf("result says valid=%v goal=%v, validator valid=%v goal=%v", res.Valid, res.GoalReached, v.Valid, v.GoalReached)
	}
	if len(res.Plan) != len(res.Lines) || len(res.Texts) != len(res.Plan) {
		t.Errorf("plan %d actions, %d lines, %d texts", len(res.Plan), len(res.Lines), len(res.Texts))
	}
	text, err := st.lm.Detokenize(res.Tokens)
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, x := range res.Texts {
		want += x + "\n"
	}
	if st.sp.Options().Trace != nil {
		// Each line carries the trace the constraint forced after the
		// action's text; the action is what comes before it.
		var lines []string
		for _, l := range strings.SplitAfter(text, "\n") {
			if a, _, ok := strings.Cut(l, constraint.TraceSep); ok {
				l = a + "\n"
			}
			lines = append(lines, l)
		}
		text = strings.Join(lines, "")
	}
	if text != want {
		t.Errorf("tokens spell %q, plan is %q", text, want)
	}
	if n := st.lm.Stats().SequencesInUse; n != 0 {
		t.Errorf("%d sequences still held after the search", n)
	}
	s := res.Stats
	if (s.ModelCalls > 0 && s.EvaluatedTokens < s.PromptTokens) || s.PromptTokens != int64(len(st.prompt)) {
		t.Errorf("evaluated %d tokens, prompt %d (of %d)", s.EvaluatedTokens, s.PromptTokens, len(st.prompt))
	}
	if s.Simulations > 0 && (s.ModelCalls < 2 || s.Expanded != s.Simulations+1) {
		t.Errorf("%d simulations, %d expanded, %d model calls", s.Simulations, s.Expanded, s.ModelCalls)
	}
}

func TestSearchReachesGoal(t *testing.T) {
	lm, idx := loadModel(t, modelPath(t, "tiny", tinySpec), models.Options{})
	tests := []struct {
		name    string
		problem string
		opts    Options
	}{
		{"tower", bwTower, Options{}},
		{"reverse", bwReverse, Options{}},
		{"reverse/batch1", bwReverse, Options{Batch: 1}},
		{"reverse/mean", bwReverse, Options{Backup: BackupMean}},
		{"reverse/range", bwReverse, Options{Normalize: NormalizeRange}},
		{"reverse/alphazero-c", bwReverse, Options{Base: 10}},
		{"reverse/lmcut", bwReverse, Options{Heuristic: "lmcut"}},
		{"reverse/goalcount-nolookahead", bwReverse, Options{Heuristic: "goalcount", NoLookahead: true}},
		{"reverse/helpful", bwReverse, Options{Helpful: 0.5}},
		{"reverse/mix", bwReverse, Options{Heuristic: "mix(0.5*ff+0.5*lmcut)"}},
		{"reverse/all-tokens", bwReverse, Options{AllTokens: true}},
		{"reverse/keep-duplicates", bwReverse, Options{KeepDuplicates: true}},
		{"reverse/allow-loops", bwReverse, Options{AllowLoops: true}},
		{"reverse/rollout", bwReverse, Options{Rollout: 2}},
		{"reverse/rollout-sampled", bwReverse, Options{Rollout: 2, RolloutTemperature: 1}},
		{"reverse/no-collapse", bwReverse, Options{NoCollapse: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newSetup(t, lm, idx, inlineTask(t, tt.problem), constraint.Options{})
			tt.opts.Simulations = 3000
			res := st.search(t, tt.opts)
			if !res.GoalReached || res.Stop != StopGoal {
				t.Fatalf("no plan within %d simulations: stop %s, best %v", res.Stats.Simulations, res.Stop, res.Texts)
			}
			if res.Stats.FirstGoal <= 0 || res.Stats.FirstGoal > res.Stats.Elapsed {
				t.Errorf("first goal at %v of %v", res.Stats.FirstGoal, res.Stats.Elapsed)
			}
		})
	}
}

// TestSearchWithTrace: with a goal trace after every action (the prompt of
// a prior trained with --goal-trace), the trie's action texts carry the
// trace, and the search must still value partial actions by the actions
// they can complete (it once looked those texts up in the lexicon, found
// none, valued every child of the root a dead end and stopped exhausted).
func TestSearchWithTrace(t *testing.T) {
	lm, idx := loadModel(t, modelPath(t, "tiny", tinySpec), models.Options{})
	tests := []struct {
		name string
		opts Options
	}{
		{"ff", Options{}},
		{"ff/batch1", Options{Batch: 1}},
		{"ff/helpful", Options{Helpful: 0.5}},
		{"goalcount", Options{Heuristic: "goalcount"}},
		{"blind/rollout", Options{Heuristic: "blind", Rollout: 2}},
		{"ff/rollout/batch1", Options{Rollout: 2, Batch: 1}},
		{"ff/no-collapse", Options{NoCollapse: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lex := inlineTask(t, bwReverse)
			st := newSetup(t, lm, idx, lex, constraint.Options{Trace: constraint.GoalTrace(lex, false)})
			tt.opts.Simulations = 3000
			res := st.search(t, tt.opts)
			if !res.GoalReached || res.Stop != StopGoal {
				t.Fatalf("no plan within %d simulations: stop %s, best %v", res.Stats.Simulations, res.Stop, res.Texts)
			}
			text, err := lm.Detokenize(res.Tokens)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(text, constraint.TraceSep+"left: "); n != len(res.Plan) {
				t.Errorf("%d traced lines for %d actions:\n%s", n, len(res.Plan), text)
			}
			// A rollout feeds the trace's tokens with the token before
			// them, in one call: most evaluated tokens are forced.
			t.Logf("%d model calls, %d evaluated tokens, %d simulations", res.Stats.ModelCalls, res.Stats.EvaluatedTokens, res.Stats.Simulations)
			if tt.opts.Rollout > 0 && 3*res.Stats.ModelCalls > res.Stats.EvaluatedTokens {
				t.Errorf("rollouts: %d model calls for %d evaluated tokens; the forced runs should go in one call each", res.Stats.ModelCalls, res.Stats.EvaluatedTokens)
			}
		})
	}
}

func TestGoalHoldsInitially(t *testing.T) {
	lm, idx := loadModel(t, modelPath(t, "tiny", tinySpec), models.Options{})
	st := newSetup(t, lm, idx, inlineTask(t, bwDone), constraint.Options{})
	res := st.search(t, Options{})
	if !res.GoalReached || len(res.Plan) != 0 || res.Stop != StopGoal || res.Stats.ModelCalls != 0 {
		t.Errorf("goal at start: plan %v, goal %v, stop %s, %d model calls", res.Texts, res.GoalReached, res.Stop, res.Stats.ModelCalls)
	}
}

func TestDeterministic(t *testing.T) {
	lm, idx := loadModel(t, modelPath(t, "tiny", tinySpec), models.Options{})
	st := newSetup(t, lm, idx, inlineTask(t, bwReverse), constraint.Options{})
	for _, batch := range []int{1, 16} {
		for _, seed := range []uint64{0, 1} {
			// A budget well short of the goal: the whole search must repeat,
			// not just its outcome.
			opts := Options{Seed: seed, Batch: batch, Simulations: 150, Exhaust: true}
			a, b := st.search(t, opts), st.search(t, opts)
			same := slices.Equal(a.Plan, b.Plan) && slices.Equal(a.Tokens, b.Tokens) &&
				a.Stats.Simulations == b.Stats.Simulations && a.Stats.Nodes == b.Stats.Nodes &&
				a.Stats.EvaluatedTokens == b.Stats.EvaluatedTokens && a.Stats.ModelCalls == b.Stats.ModelCalls &&
				a.Stats.Collisions == b.Stats.Collisions && a.Stats.MaxDepth == b.Stats.MaxDepth
			if !same {
				t.Errorf("batch %d seed %d: two runs differ:\n%v %+v\n%v %+v", batch, seed, a.Texts, a.Stats, b.Texts, b.Stats)
			}
		}
	}
}

// TestFewSequenceSlots runs searches on engines with few sequence slots and
// a small KV cache: evictions must replace crashes, recomputed tokens must
// be counted, and the search's count of evaluated tokens must match the
// engine's own.
func TestFewSequenceSlots(t *testing.T) {
	path := modelPath(t, "tiny", tinySpec)
	lex := loadTask(t, "", alfworldGame(t, 3))
	probe, idx := loadModel(t, path, models.Options{})
	prompt := newSetup(t, probe, idx, lex, constraint.Options{}).prompt
	tests := []struct {
		name string
		lex  *lexicon.Bound
		opts models.Options
	}{
		{"slots", inlineTask(t, bwReverse), models.Options{Sequences: 3}},
		// Room for the prompt and a few hundred tree tokens.
		{"cells", lex, models.Options{Sequences: 32, BatchSize: 64, CacheSize: len(prompt) + 256}},
	}
	// Rollouts that outgrow the cache end early (their leaves keep the
	// static value) instead of failing the search: 16 leaves rolled out
	// for up to 50 actions each need far more than 256 cells.
	t.Run("rollout cells", func(t *testing.T) {
		lm, idx := loadModel(t, path, models.Options{Sequences: 32, BatchSize: 64, CacheSize: len(prompt) + 256})
		st := newSetup(t, lm, idx, lex, constraint.Options{})
		res := st.search(t, Options{Simulations: 300, Rollout: 50})
		if res.Stats.Simulations == 0 {
			t.Fatalf("no simulations: %s", res.Stop)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lm, idx := loadModel(t, path, tt.opts)
			st := newSetup(t, lm, idx, tt.lex, constraint.Options{})
			before := lm.Stats().EvaluatedTokens
			res := st.search(t, Options{Simulations: 1500})
			if !res.GoalReached {
				t.Errorf("no plan: %s after %d simulations", res.Stop, res.Stats.Simulations)
			}
			if res.Stats.Evictions == 0 || res.Stats.RecomputedTokens == 0 {
				t.Errorf("%d evictions, %d recomputed tokens: the limit was never hit (%s, %+v)", res.Stats.Evictions, res.Stats.RecomputedTokens, res.Stop, res.Stats)
			}
			if got := lm.Stats().EvaluatedTokens - before; got != res.Stats.EvaluatedTokens {
				t.Errorf("search counted %d evaluated tokens, engine %d", res.Stats.EvaluatedTokens, got)
			}
		})
	}
}

// TestShareBelowBatch: with fewer sequence slots than a batch has leaves
// (a server request's share of the engine), a batch must not evict the
// sources of its own leaves, or its leaves recompute their paths from far
// up the tree. With 16 slots the search may evaluate at most 6 times the
// tree tokens it does with 128 (measured: 4.4x; 11.5x before a batch kept
// its sources).
func TestShareBelowBatch(t *testing.T) {
	path := modelPath(t, "tiny", tinySpec)
	lex := loadTask(t, "", alfworldGame(t, 3))
	tree := map[int]int64{}
	for _, slots := range []int{16, 128} {
		lm, idx := loadModel(t, path, models.Options{Sequences: slots})
		st := newSetup(t, lm, idx, lex, constraint.Options{})
		res := st.search(t, Options{Batch: 16, Simulations: 400, Exhaust: true})
		tree[slots] = res.Stats.EvaluatedTokens - int64(len(st.prompt))
		t.Logf("%d slots: %d simulations, %d evictions, %d tree tokens, %d recomputed", slots, res.Stats.Simulations, res.Stats.Evictions, tree[slots], res.Stats.RecomputedTokens)
		if slots == 16 && res.Stats.Evictions == 0 {
			t.Fatalf("no evictions with %d slots: the share was never hit (%+v)", slots, res.Stats)
		}
	}
	if tree[16] > 6*tree[128] {
		t.Errorf("with 16 slots the search evaluated %d tree tokens, with 128 slots %d: evictions thrash", tree[16], tree[128])
	}
}

func TestBatching(t *testing.T) {
	lm, idx := loadModel(t, modelPath(t, "tiny", tinySpec), models.Options{Sequences: 64})
	st := newSetup(t, lm, idx, loadTask(t, "", alfworldGame(t, 3)), constraint.Options{})
	one := st.search(t, Options{Batch: 1, Simulations: 200, Exhaust: true})
	many := st.search(t, Options{Batch: 16, Simulations: 200, Exhaust: true})
	if one.Stats.ModelCalls != int64(one.Stats.Simulations)+1 || one.Stats.BatchOccupancy != 1 {
		t.Errorf("batch 1: %d simulations in %d model calls, occupancy %g", one.Stats.Simulations, one.Stats.ModelCalls, one.Stats.BatchOccupancy)
	}
	// Leaves evaluated per call = occupancy * batch; at least 4 on average.
	if many.Stats.BatchOccupancy < 0.25 || many.Stats.BatchOccupancy > 1 ||
		many.Stats.ModelCalls*4 > int64(many.Stats.Simulations)+4 {
		t.Errorf("batch 16: %d simulations in %d model calls, occupancy %g", many.Stats.Simulations, many.Stats.ModelCalls, many.Stats.BatchOccupancy)
	}
}

func TestExhaustFindsShorterPlans(t *testing.T) {
	lm, idx := loadModel(t, modelPath(t, "tiny", tinySpec), models.Options{})
	st := newSetup(t, lm, idx, inlineTask(t, bwReverse), constraint.Options{})
	first := st.search(t, Options{Simulations: 3000})
	best := st.search(t, Options{Simulations: 3000, Exhaust: true})
	if !first.GoalReached || !best.GoalReached {
		t.Fatalf("no plan: %v / %v", first.Texts, best.Texts)
	}
	if len(best.Plan) > len(first.Plan) || best.Stop == StopGoal {
		t.Errorf("exhaustive search: %d actions (stop %s), first plan %d", len(best.Plan), best.Stop, len(first.Plan))
	}
	if len(best.Plan) != 6 {
		t.Logf("shortest plan found: %d actions (optimal 6)", len(best.Plan))
	}
}

func TestUnconstrained(t *testing.T) {
	lm, idx := loadModel(t, modelPath(t, "tiny", tinySpec), models.Options{})
	st := newSetup(t, lm, idx, inlineTask(t, bwReverse), constraint.Options{})
	res := st.search(t, Options{Unconstrained: true, Simulations: 300})
	// A random model's top tokens are rarely plan text: branches die and the
	// result is the best valid prefix (checked by checkResult).
	if res.Stats.Terminals == 0 {
		t.Errorf("no branch ended: %+v", res.Stats)
	}
	if res.Stats.Widened != 0 {
		t.Errorf("the unconstrained search widened %d nodes", res.Stats.Widened)
	}
}

// cancelLM cancels a context at its model's n-th evaluation, so a test
// cancels a search mid-way on any machine, however fast.
type cancelLM struct {
	models.LM
	n      int
	cancel context.CancelFunc
}

func (c *cancelLM) Eval(ctx context.Context, reqs []models.EvalRequest) ([]models.EvalResult, error) {
	if c.n--; c.n == 0 {
		c.cancel()
	}
	return c.LM.Eval(ctx, reqs)
}

func TestCancel(t *testing.T) {
	lm, idx := loadModel(t, modelPath(t, "tiny", tinySpec), models.Options{})
	// bwWide: no search exhausts it before the cancellation arrives.
	st := newSetup(t, lm, idx, inlineTask(t, bwWide), constraint.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clm := &cancelLM{LM: lm, n: 20, cancel: cancel}
	res, err := Search(ctx, clm, st.sp, st.prompt, Options{Time: time.Hour, Exhaust: true})
	if !errors.Is(err, context.Canceled) || res == nil || res.Stop != StopCanceled {
		t.Fatalf("got %v, %v", res, err)
	}
	if res.Stats.Simulations == 0 {
		t.Errorf("cancelled before any simulation: %+v", res.Stats)
	}
	checkResult(t, st, res)
}

func TestBudgets(t *testing.T) {
	lm, idx := loadModel(t, modelPath(t, "tiny", tinySpec), models.Options{})
	// Each budget must be the limit that ends the search on any machine:
	// on bwReverse a fast machine exhausts the space within 100 ms.
	st := newSetup(t, lm, idx, inlineTask(t, bwWide), constraint.Options{})
	tests := []struct {
		opts Options
		stop string
		ok   func(*Result) bool
	}{
		{Options{Simulations: 37, Exhaust: true}, StopSimulations, func(r *Result) bool { return r.Stats.Simulations == 37 }},
		{Options{Tokens: 400, Exhaust: true}, StopTokens, func(r *Result) bool { return r.Stats.EvaluatedTokens >= 400 }},
		{Options{Time: 100 * time.Millisecond, Exhaust: true}, StopTime, func(r *Result) bool { return r.Stats.Elapsed >= 100*time.Millisecond }},
	}
	for _, tt := range tests {
		res := st.search(t, tt.opts)
		if res.Stop != tt.stop || !tt.ok(res) {
			t.Errorf("%+v: stop %s, stats %+v", tt.opts, res.Stop, res.Stats)
		}
	}
}

func TestOptionErrors(t *testing.T) {
	lm, idx := loadModel(t, modelPath(t, "tiny", tinySpec), models.Options{})
	st := newSetup(t, lm, idx, inlineTask(t, bwTower), constraint.Options{})
	tests := []struct {
		opts Options
		want string
	}{
		{Options{Width: -1}, "width"},
		{Options{C: -1}, "exploration"},
		{Options{Base: -1}, "base"},
		{Options{Batch: -2}, "batch"},
		{Options{Time: -time.Second}, "budget"},
		{Options{Backup: "median"}, "backup"},
		{Options{Normalize: "z"}, "normalisation"},
		{Options{Heuristic: "nosuch"}, "heuristic"},
		{Options{GoalReward: -1}, "goal reward"},
		{Options{Rollout: -1}, "rollout"},
		{Options{Rollout: 4, RolloutTemperature: -0.5}, "rollout temperature"},
		{Options{Rollout: 4, RolloutTemperature: math.NaN()}, "rollout temperature"},
		{Options{Helpful: -1}, "helpful"},
	}
	for _, tt := range tests {
		_, err := Search(context.Background(), lm, st.sp, st.prompt, tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: error %v, want one naming %q", tt.opts, err, tt.want)
		}
	}
	if _, err := Search(context.Background(), lm, st.sp, nil, Options{}); err == nil {
		t.Error("empty prompt accepted")
	}
}

// TestPUCB pins the selection rule on a hand-built node: children with
// known priors, visits and values.
func TestPUCB(t *testing.T) {
	mk := func(prior, static float64, n int, best float64) *node {
		return &node{prior: prior, static: static, n: n, best: best}
	}
	tests := []struct {
		name    string
		opts    Options
		parentN int
		kids    []*node
		want    int
	}{
		// Equal values: the prior decides.
		{"prior", Options{}, 4, []*node{mk(0.2, -5, 0, 0), mk(0.7, -5, 0, 0), mk(0.1, -5, 0, 0)}, 1},
		// One unit of value (ValueScale 0.1 = 10 in Q) beats the prior at
		// few visits...
		{"value", Options{ValueScale: 0.1}, 4, []*node{mk(0.9, -6, 0, 0), mk(0.1, -5, 0, 0)}, 1},
		// ... but not after many: c*p*sqrt(N) grows.
		{"exploration", Options{ValueScale: 0.1}, 1e4, []*node{mk(0.9, -6, 0, 0), mk(0.1, -5, 100, -5)}, 0},
		// Visits lower a child's bonus: the visited one loses at equal
		// value and prior.
		{"visits", Options{}, 9, []*node{mk(0.5, -5, 8, -5), mk(0.5, -5, 0, 0)}, 1},
		// AlphaZero's c(N) = log((1+N+base)/base) + c adds exploration: with
		// a large N it flips a choice the constant c makes the other way.
		{"alphazero-c", Options{ValueScale: 0.1, Base: 10}, 16, []*node{mk(0.9, -6, 0, 0), mk(0.1, -5, 15, -5)}, 0},
		{"constant-c", Options{ValueScale: 0.1}, 16, []*node{mk(0.9, -6, 0, 0), mk(0.1, -5, 15, -5)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := tt.opts.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			s := &searcher{opts: o, vr: newRange(), batch: 1}
			s.root = &node{static: -6, n: tt.parentN, children: tt.kids}
			for _, k := range tt.kids {
				s.vr.add(k.static)
			}
			if got := s.pick(s.root); got != tt.kids[tt.want] {
				t.Errorf("picked child %d, want %d", slices.Index(tt.kids, got), tt.want)
			}
		})
	}
}

// TestTreeInvariants runs a search and walks its tree: collapsed edges hold
// only forced tokens, children are allowed tokens ordered by nothing but
// the seed, folded tokens are dominated, and virtual losses are all undone.
func TestTreeInvariants(t *testing.T) {
	lm, idx := loadModel(t, modelPath(t, "tiny", tinySpec), models.Options{})
	st := newSetup(t, lm, idx, inlineTask(t, bwReverse), constraint.Options{})
	for _, collapse := range []bool{true, false} {
		var tree *searcher
		hook := func(s *searcher) { tree = s }
		o := Options{Simulations: 300, Exhaust: true, NoCollapse: !collapse}
		res, err := searchTree(context.Background(), lm, st.sp, st.prompt, o, hook)
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, st, res)
		var set trie.Set
		var walk func(n *node)
		edges, chains := 0, 0
		walk = func(n *node) {
			if n.vl != 0 {
				t.Fatalf("virtual loss %d left on a node", n.vl)
			}
			for _, c := range n.children {
				if c.kind == dead && c.cur.Len() == n.cur.Len() && c.cur.Node() == n.cur.Node() {
					continue // an invalid token (unconstrained only)
				}
				edges++
				if len(c.toks) > 1 {
					chains++
				}
				if !collapse && len(c.toks) != 1 {
					t.Fatalf("NoCollapse edge with %d tokens", len(c.toks))
				}
				cur := n.cur
				for i, tok := range c.toks {
					st.sp.Allowed(cur, &set)
					k := slices.Index(set.IDs, tok)
					if k < 0 {
						t.Fatalf("edge token %d not allowed", tok)
					}
					// A collapsed token is forced: the only one allowed,
					// or one whose text every other allowed token's text
					// begins (the same forced text, spelled by shorter
					// tokens: the search folds them into it).
					if i > 0 && set.Len() != 1 {
						long := string(idx.Text(tok))
						for _, id := range set.IDs {
							if !idx.IsText(id) || !strings.HasPrefix(long, string(idx.Text(id))) {
								t.Fatalf("collapsed token %d of an edge (%q) had %d allowed tokens, %q among them", i, long, set.Len(), idx.Text(id))
							}
						}
					}
					var err error
					if cur, err = st.sp.Advance(cur, set.Next[k]); err != nil {
						t.Fatal(err)
					}
				}
				if !slices.Equal(cur.Plan(), c.cur.Plan()) || cur.Node() != c.cur.Node() {
					t.Fatal("a child's cursor is not where its tokens lead")
				}
				walk(c)
			}
		}
		walk(tree.root)
		if collapse && chains == 0 {
			t.Error("no forced chain was collapsed")
		}
		t.Logf("collapse=%v: %d edges, %d chains, %d simulations", collapse, edges, chains, res.Stats.Simulations)
	}
}

// TestDominance checks on real tasks and the real Qwen3 vocabulary that a
// token is only folded into a longer one leaving exactly the same actions
// possible, so the kept tokens still reach every consistent action.
func TestDominance(t *testing.T) {
	lm, idx := loadModel(t, modelPath(t, "qwen3", testModelSpec), models.Options{})
	_ = lm
	games := alfworldGames(t)
	d, p := planbench(t, 7)
	for _, lex := range []*lexicon.Bound{loadTask(t, "", games[0]), loadTask(t, "", games[len(games)/2]), loadTask(t, d, p)} {
		sp, err := constraint.New(idx, lex, constraint.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cur, _ := sp.Start()
		var set trie.Set
		// Walk the first action of every applicable one, checking each node
		// on the way.
		var check func(c constraint.Cursor, depth int)
		check = func(c constraint.Cursor, depth int) {
			sp.Allowed(c, &set)
			ids, next := slices.Clone(set.IDs), slices.Clone(set.Next)
			into := dominance(idx, c.Trie(), ids, next)
			at := c.Trie()
			reach := map[int32]bool{}
			for i := range ids {
				j := into[i]
				if int(j) != i {
					ti, tj := string(idx.Text(ids[i])), string(idx.Text(ids[j]))
					if !strings.HasPrefix(tj, ti) || len(tj) <= len(ti) || at.NumConsistent(next[i]) != at.NumConsistent(next[j]) {
						t.Fatalf("%q folded into %q", ti, tj)
					}
					continue
				}
				if next[i] >= 0 {
					for _, a := range at.Consistent(next[i], nil) {
						reach[a] = true
					}
				}
			}
			for _, a := range at.Consistent(c.Node(), nil) {
				if !reach[a] {
					t.Fatalf("action %q unreachable after folding at %q", at.Action(int(a)), c.Partial())
				}
			}
			if depth == 0 {
				return
			}
			for i := range ids {
				if into[i] == int32(i) && next[i] >= 0 && !at.IsLeaf(next[i]) {
					nc, err := sp.Advance(c, next[i])
					if err != nil {
						t.Fatal(err)
					}
					check(nc, depth-1)
				}
			}
		}
		check(cur, 3)
	}
}

// TestRealTasks is the CI slice of the sweep: a few ALFWorld games and
// PlanBench instances with the real Qwen3 vocabulary and a random-weight
// model, within a simulation budget.
func TestRealTasks(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	lm, idx := loadModel(t, modelPath(t, "qwen3", testModelSpec), models.Options{Sequences: 128})
	type task struct{ name, domain, problem string }
	var tasks []task
	for _, i := range []int{0, 60, 120} {
		g := alfworldGame(t, i)
		tasks = append(tasks, task{filepath.Base(filepath.Dir(filepath.Dir(g))), "", g})
	}
	for _, i := range []int{2, 50} {
		d, p := planbench(t, i)
		tasks = append(tasks, task{"planbench-" + filepath.Base(p), d, p})
	}
	for _, tt := range tasks {
		t.Run(tt.name, func(t *testing.T) {
			st := newSetup(t, lm, idx, loadTask(t, tt.domain, tt.problem), constraint.Options{StopAtGoal: true, MaxActions: 100})
			res := st.search(t, Options{Simulations: 3000, Time: 5 * time.Minute})
			if !res.GoalReached {
				t.Errorf("no plan after %d simulations (%s): best %v", res.Stats.Simulations, res.Stop, res.Texts)
			}
			t.Logf("%d actions, %d simulations, %d evaluated tokens, %v", len(res.Plan), res.Stats.Simulations, res.Stats.EvaluatedTokens, res.Stats.Elapsed.Round(time.Millisecond))
		})
	}
}

// TestRolloutToken checks the rollout's choice among the allowed tokens:
// the most likely (first among equals) when greedy, and when sampled the
// frequencies of softmax(logits/T) over the allowed tokens only.
func TestRolloutToken(t *testing.T) {
	// Token 2 is not allowed: its large logit must never be picked.
	logits := []float32{0, float32(math.Log(3)), 50, 0}
	ids := []int32{0, 1, 3}
	tests := []struct {
		name string
		temp float64
		want []float64 // probability of each of ids
	}{
		{"greedy", 0, []float64{0, 1, 0}},
		{"T=1", 1, []float64{0.2, 0.6, 0.2}},
		// At T=2 the weights are 1, sqrt(3), 1.
		{"T=2", 2, []float64{1 / (2 + math.Sqrt(3)), math.Sqrt(3) / (2 + math.Sqrt(3)), 1 / (2 + math.Sqrt(3))}},
	}
	const n = 60000
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &searcher{opts: Options{RolloutTemperature: tt.temp}, rng: rand.New(rand.NewPCG(7, 7))}
			s.set.IDs = ids
			counts := make([]int, len(ids))
			for range n {
				counts[s.rolloutToken(logits)]++
			}
			for k, p := range tt.want {
				got := float64(counts[k]) / n
				// Five standard deviations of a binomial frequency.
				if tol := 5*math.Sqrt(p*(1-p)/n) + 1e-9; math.Abs(got-p) > tol {
					t.Errorf("token %d: frequency %.4f, want %.4f +- %.4f", ids[k], got, p, tol)
				}
			}
		})
	}
	// Ties go to the first allowed token when greedy.
	s := &searcher{}
	s.set.IDs = []int32{3, 0}
	if k := s.rolloutToken([]float32{1, 0, 0, 1}); k != 0 {
		t.Errorf("greedy tie: index %d, want 0", k)
	}
}

// TestRolloutsKeepBudget: a token budget is checked between the rollout
// steps of a batch, not only between batches, so rollouts of 50 actions from
// a batch of leaves stop soon after the budget is spent instead of running
// to their end (which, for a random-weight model on an ALFWorld task, is
// thousands of tokens past it).
func TestRolloutsKeepBudget(t *testing.T) {
	lm, idx := loadModel(t, modelPath(t, "tiny", tinySpec), models.Options{})
	st := newSetup(t, lm, idx, loadTask(t, "", alfworldGame(t, 3)), constraint.Options{})
	for _, temp := range []float64{0, 1} {
		budget := int64(len(st.prompt)) + 100
		res := st.search(t, Options{Rollout: 50, RolloutTemperature: temp, Batch: 4, Tokens: budget})
		// Past the budget by at most one batch's leaves (a collapsed chain
		// holds a few tokens) and one rollout step of each.
		if over := res.Stats.EvaluatedTokens - budget; res.Stop != StopTokens || over > 100 {
			t.Errorf("T=%g: stop %s, %d tokens evaluated against a budget of %d (%d over)", temp, res.Stop, res.Stats.EvaluatedTokens, budget, over)
		}
	}
}

// TestCandidateLogitsSameSearch: a search whose engine computes only the
// allowed tokens' logits (the default on the CPU) repeats the search of an
// engine that computes them all (models.Options.FullLogits): the same
// plan, tokens, simulations and tree, at batch 1 and 16 and with rollouts,
// while its passes compute only the candidates.
func TestCandidateLogitsSameSearch(t *testing.T) {
	path := modelPath(t, "qwen3", testModelSpec)
	lex := loadTask(t, "", alfworldGame(t, 0))
	for _, opts := range []Options{
		{Batch: 1, Simulations: 60},
		{Batch: 16, Simulations: 150},
		{Batch: 16, Simulations: 60, Rollout: 3},
	} {
		t.Run(fmt.Sprintf("batch%d-rollout%d", opts.Batch, opts.Rollout), func(t *testing.T) {
			var runs [2]*Result
			for i, full := range []bool{true, false} {
				lm, idx := loadModel(t, path, models.Options{Sequences: 128, FullLogits: full})
				st := newSetup(t, lm, idx, lex, constraint.Options{StopAtGoal: true, MaxActions: 30})
				opts.Exhaust, opts.Seed = true, 1
				runs[i] = st.search(t, opts)
				if got, narrows := lm.Stats().CandidatePasses, !full && lm.Info().Device == "CPU"; (got > 0) != narrows {
					t.Fatalf("FullLogits %v on %s: %d passes computed only the candidates", full, lm.Info().Device, got)
				}
			}
			a, b := runs[0], runs[1]
			if !slices.Equal(a.Plan, b.Plan) || !slices.Equal(a.Tokens, b.Tokens) ||
				a.Stats.Simulations != b.Stats.Simulations || a.Stats.Nodes != b.Stats.Nodes ||
				a.Stats.EvaluatedTokens != b.Stats.EvaluatedTokens || a.Stats.MaxDepth != b.Stats.MaxDepth {
				t.Errorf("full logits and candidate logits searched differently:\n%v %+v\n%v %+v", a.Texts, a.Stats, b.Texts, b.Stats)
			}
		})
	}
}
