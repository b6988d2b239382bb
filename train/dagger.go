package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/nesy-dev/nesy/constraint"
	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl/search"
	"github.com/nesy-dev/nesy/planner"
	"github.com/nesy-dev/nesy/trie"
)

// DAggerOptions configure DAggerDemos.
type DAggerOptions struct {
	// Points is how many states of a failed rollout get a demonstration:
	// the first step that does not bring the goal nearer, then states
	// spread over the rest of the rollout (0: 3).
	Points int
	// MaxActions bounds a rollout (0: 50, as nesy bench).
	MaxActions int
	// Timeout bounds the reference planner per state (0: 10 s).
	Timeout time.Duration
	// NoRevisit rolls out with cgreedy's revisit mask
	// (planner.Options.NoRevisit) as the shipped prior's three rounds
	// were made: where every action leads back, all stay allowed
	// (planner.Options.RevisitAll; cgreedy now keeps only the least
	// visited of them); false rolls out plain cgreedy (how p17's round was
	// made).
	NoRevisit bool
	// OptimalBlocksworld corrects Blocksworld rollouts with shortest plans
	// (referenceSolve's A* over LM-cut), as their demonstrations were made
	// with RunOptions.OptimalBlocksworld.
	OptimalBlocksworld bool
	// Prompt is the prompt the demonstrations train on: with GoalTrace
	// their actions carry the goal trace (in capitals with UpperGoal), as
	// the prior trained on them will read its plans.
	Prompt decoder.PromptOptions
}

// daggerMark separates a DAgger demonstration's ID from its task's: the
// task's ID, daggerMark and the step of the rollout it starts after.
const daggerMark = "#dagger"

// task returns the ID of d's task: d.ID without a DAgger demonstration's
// suffix.
func (d Demo) task() string {
	if i := strings.LastIndex(d.ID, daggerMark); i >= 0 {
		return d.ID[:i]
	}
	return d.ID
}

// DAggerDemos rolls the prior out on the tasks of demos by constrained
// greedy decoding (the prior alone, as `nesy bench --method cgreedy` runs
// it) and, where it does not reach the goal, asks the reference planner what
// to do from the states it went to (DAgger: the expert labels the learner's
// own states). Each returned demonstration has the rollout's steps up to a
// state as its Prefix and the reference planner's plan from there as its
// Plan, so that training on it teaches the prior to recover from its own
// mistakes (going back and forth, taking the wrong object) instead of only
// following the planner's paths. The first chosen state is where the
// rollout first took a step that did not shorten the planner's plan from
// there; the others are spread over the rest of the rollout. demos must be
// training tasks (src reopens them); the second result counts the rollouts
// that reached the goal.
//
// lms are one or more engines of the same prior: the tasks are rolled out
// on them in parallel, each task alone on one engine, and the results are
// gathered in the order of demos, so the output does not depend on how
// many engines there are (a rollout's passes are those it would have on a
// single engine).
func DAggerDemos(ctx context.Context, lms []models.LM, src Sources, demos []Demo, o DAggerOptions) ([]Demo, int, error) {
	if len(lms) == 0 {
		return nil, 0, errors.New("train: DAgger: no model")
	}
	if o.Points <= 0 {
		o.Points = 3
	}
	if o.MaxActions <= 0 {
		o.MaxActions = 50
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	type result struct {
		demos  []Demo
		solved bool
	}
	results := make([]result, len(demos))
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for _, lm := range lms {
		g.Go(func() error {
			wsrc := src // each worker opens its own ALFWorld environment once
			idx, err := constraint.NewIndex(lm)
			if err != nil {
				return fmt.Errorf("train: %w", err)
			}
			for {
				i := int(next.Add(1) - 1)
				if i >= len(demos) {
					return nil
				}
				dd, ok, err := daggerTask(gctx, lm, idx, &wsrc, demos[i], o)
				if err != nil {
					return err
				}
				results[i] = result{dd, ok}
			}
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	var out []Demo
	solved := 0
	for _, r := range results {
		out = append(out, r.demos...)
		if r.solved {
			solved++
		}
	}
	return out, solved, nil
}

// daggerTask rolls lm out on d's task and returns the corrections of a
// failed rollout, or solved=true when it reached the goal.
func daggerTask(ctx context.Context, lm models.LM, idx *trie.Index, src *Sources, d Demo, o DAggerOptions) (out []Demo, solved bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("train: DAgger: %w", err)
	}
	if len(d.Prefix) > 0 {
		return nil, false, nil // a DAgger demonstration itself
	}
	ep, err := src.open(ctx, d)
	if err != nil {
		return nil, false, fmt.Errorf("train: DAgger: %s: %w", d.ID, err)
	}
	task, lex := ep.Task(), ep.Lexicon()
	res, err := planner.Run(ctx, lm, planner.Task{Lexicon: lex, Goal: ep.Goal()}, planner.CGreedy,
		planner.Options{Budgets: planner.Budgets{MaxActions: o.MaxActions}, Index: idx, NoRevisit: o.NoRevisit, RevisitAll: o.NoRevisit,
			// A run of forced tokens is fed in one model call where the goal
			// trace makes them most of a plan's tokens; without the trace
			// one by one, the logits' bits the shipped prior's rounds were
			// rolled out with (a pass over several tokens rounds otherwise).
			FeedEachToken: !o.Prompt.GoalTrace})
	if err != nil {
		return nil, false, fmt.Errorf("train: DAgger: %s: rollout: %w", d.ID, err)
	}
	if res.GoalReached {
		return nil, true, nil
	}
	states := res.Validation.States // States[i]: before step i
	popts := o.Prompt
	popts.Goal = ep.Goal()
	trace := popts.Trace(lex)
	// plan returns the reference planner's plan from states[i] (nil:
	// none found, e.g. a dead end).
	cache := map[int][]int{}
	plan := func(i int) ([]int, error) {
		if p, ok := cache[i]; ok {
			return p, nil
		}
		t := *task
		t.Init = states[i]
		r, err := referenceSolve(ctx, &t, o.OptimalBlocksworld && d.Env == EnvBlocksworld, o.Timeout)
		if err != nil {
			return nil, err
		}
		var p []int
		if r.Status == search.Solved {
			p = r.Plan
		}
		cache[i] = p
		return p, nil
	}
	length := func(p []int) int {
		if p == nil {
			return math.MaxInt
		}
		return len(p)
	}
	first := -1
	for i := 0; i+1 < len(states); i++ {
		a, err := plan(i)
		if err != nil {
			return nil, false, fmt.Errorf("train: DAgger: %s: %w", d.ID, err)
		}
		b, err := plan(i + 1)
		if err != nil {
			return nil, false, fmt.Errorf("train: DAgger: %s: %w", d.ID, err)
		}
		if a != nil && length(b) >= length(a) {
			first = i
			break
		}
	}
	if first < 0 {
		return nil, false, nil // every step made progress: the rollout ran out of actions
	}
	points := []int{first}
	rest := len(states) - 1 - first // states after the first
	for k := 1; k < o.Points && rest > 0; k++ {
		i := first + k*rest/o.Points
		if i > points[len(points)-1] && i < len(states) {
			points = append(points, i)
		}
	}
	for _, i := range points {
		if i == 0 {
			continue // the planner's plan from the initial state: the demonstration itself
		}
		p, err := plan(i)
		if err != nil {
			return nil, false, fmt.Errorf("train: DAgger: %s: %w", d.ID, err)
		}
		if len(p) == 0 {
			continue
		}
		nd := Demo{ID: fmt.Sprintf("%s%s%d", d.ID, daggerMark, i), Scene: d.Scene, Env: d.Env, Goal: d.Goal, Problem: d.Problem,
			Messages: d.Messages}
		nd.Prefix = actionTexts(lex, trace, task.Init, res.Plan[:i])
		nd.Plan = actionTexts(lex, trace, states[i], p)
		out = append(out, nd)
	}
	return out, false, nil
}
