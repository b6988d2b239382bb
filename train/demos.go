// Package train makes planner demonstrations on training tasks and trains
// a small decoder-only llama transformer on them with gorgonia, exported as
// a GGUF the engine (package models) loads: nesy's own planning prior.
//
// It is the only package that imports gorgonia; the server and the planner
// never do (internal/archtest checks it).
package train

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/nesy-dev/nesy/constraint"
	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/pddl/heuristic"
	"github.com/nesy-dev/nesy/pddl/search"
)

// Demo is one demonstration: the planning chat the decoder builds for a
// task (decoder.Messages) and the reference planner's plan, written as the
// decoder writes it (one action text per line).
type Demo struct {
	ID    string // the task
	Scene string // the game whose scene it is on (ID for a game's own goal)
	// Env is the environment the task is from: "" for ALFWorld (the games
	// of RunOptions.ALFWorld), EnvBlocksworld or EnvVirtualHome.
	Env  string `json:",omitempty"`
	Goal *Goal  `json:",omitempty"` // the further goal; nil for the game's own
	// Problem is a generated task's PDDL problem (Blocksworld); "" for a
	// task of a dataset's files.
	Problem  string `json:",omitempty"`
	Messages []models.Message
	// Prefix are actions already taken before Plan (action texts): a
	// DAgger demonstration's steps of the prior's own rollout, context for
	// the loss but not trained on. Empty for the reference planner's own.
	Prefix []string `json:",omitempty"`
	Plan   []string // action texts, in order
}

// PlanText is the text the model writes for d: every action text followed
// by a newline.
func (d Demo) PlanText() string { return lines(d.Plan) }

// PrefixText is the text of d's Prefix, written as PlanText writes actions.
func (d Demo) PrefixText() string { return lines(d.Prefix) }

func lines(actions []string) string {
	var b strings.Builder
	for _, a := range actions {
		b.WriteString(a + "\n")
	}
	return b.String()
}

// Demo.Env values besides ALFWorld's "".
const (
	EnvBlocksworld = "blocksworld"
	EnvVirtualHome = "virtualhome"
)

// CheckTrainingSplit refuses a folder of evaluation tasks (ALFWorld's
// valid_unseen and valid_seen, PlanBench, a test split): demonstrations
// come from training tasks only.
func CheckTrainingSplit(dir string) error {
	for _, part := range strings.Split(filepath.ToSlash(filepath.Clean(dir)), "/") {
		switch part {
		case "valid_unseen", "valid_seen", "planbench-blocksworld", "test":
			return fmt.Errorf("train: %s is an evaluation split (%s): demonstrations come from training tasks only", dir, part)
		}
	}
	return nil
}

// DemoOptions configure ALFWorldDemos.
type DemoOptions struct {
	// Prompt are the prompt options (the goal in words is filled in per
	// task); they must be those the planner uses with the trained model.
	Prompt decoder.PromptOptions
	// Limit bounds the games (0: all).
	Limit int
	// Goals is how many further goals per game are sampled on its scene
	// (SceneGoals, spread over the task types) and demonstrated besides the
	// game's own; 0: none.
	Goals int
	// Seed seeds the sampling of further goals.
	Seed uint64
	// Timeout bounds the reference planner per task (0: 30 s).
	Timeout time.Duration
	// Workers solve tasks in parallel (0: GOMAXPROCS); the result does not
	// depend on it.
	Workers int
	// Optimal solves with A* over LM-cut (shortest plans, referenceSolve)
	// instead of GBFS: BlocksworldDemos with RunOptions.OptimalBlocksworld.
	Optimal bool
}

// referenceSolve is the reference planner of demonstrations and DAgger's
// corrections: GBFS over h_FF with preferred operators (nesy solve's
// default: fast, plans near the shortest on ALFWorld and VirtualHome), or
// with optimal A* over LM-cut, whose plans are shortest: greedy search
// writes a fifth of generated five- and six-block Blocksworld plans with
// detours (a tower stacked early, then taken down), which a prior learns as
// habits, and DAgger's progress test (a step is a mistake when the plan
// from after it is no shorter) is exact only with shortest plans.
func referenceSolve(ctx context.Context, t *pddl.Task, optimal bool, timeout time.Duration) (search.Result, error) {
	if !optimal {
		return search.Solve(ctx, t, search.Options{PreferredOperators: true, Timeout: timeout})
	}
	h, err := heuristic.New("lmcut", t)
	if err != nil {
		return search.Result{}, fmt.Errorf("LM-cut: %w", err)
	}
	return search.Solve(ctx, t, search.Options{Algorithm: search.AStar, Heuristic: h, UnitCost: true, Timeout: timeout})
}

// ALFWorldDemos solves the ALFWorld games under dir (a training split such
// as datasets/alfworld/valid_train) from their true initial states with the
// reference planner (GBFS over h_FF with preferred operators, as nesy solve)
// and returns one demonstration per solved task, in game order (each game's
// own goal first, then its further goals), and the IDs of the tasks it
// could not solve. Further goals whose plan is empty (reached at the start)
// are left out.
func ALFWorldDemos(ctx context.Context, dir string, o DemoOptions) ([]Demo, []string, error) {
	if err := CheckTrainingSplit(dir); err != nil {
		return nil, nil, err
	}
	env, err := envs.NewALFWorld(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("train: %w", err)
	}
	// The jobs: every game, then its further goals.
	var jobs []demoJob
	for i, info := range env.Tasks() {
		if o.Limit > 0 && i >= o.Limit {
			break
		}
		jobs = append(jobs, demoJob{id: info.ID, scene: info.ID, open: func() (*envs.Episode, error) { return env.Open(ctx, info.ID) }})
		if o.Goals <= 0 {
			continue
		}
		data, err := os.ReadFile(info.Problem)
		if err != nil {
			return nil, nil, fmt.Errorf("train: %w", err)
		}
		rng := rand.New(rand.NewPCG(o.Seed, uint64(i)))
		goals, err := SceneGoals(data, rng)
		if err != nil {
			return nil, nil, fmt.Errorf("train: %s: %w", info.ID, err)
		}
		for k, g := range spread(goals, o.Goals, rng) {
			game, err := WithGoal(data, g)
			if err != nil {
				return nil, nil, fmt.Errorf("train: %s: %w", info.ID, err)
			}
			id := fmt.Sprintf("%s#goal%d", info.ID, k+1)
			jobs = append(jobs, demoJob{id: id, scene: info.ID, goal: &g, open: func() (*envs.Episode, error) {
				return envs.OpenALFWorldGameData(ctx, id, g.Type, game)
			}})
		}
	}
	return solveJobs(ctx, jobs, o)
}

// A demoJob is one task to demonstrate.
type demoJob struct {
	id, scene, env, problem string
	goal                    *Goal
	open                    func() (*envs.Episode, error)
}

// solveJobs demonstrates the jobs on o.Workers goroutines and returns the
// demonstrations in the jobs' order and the IDs of the unsolved tasks.
func solveJobs(ctx context.Context, jobs []demoJob, o DemoOptions) ([]Demo, []string, error) {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	type result struct {
		demo   *Demo
		failed bool
		err    error
	}
	results := make([]result, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				d, ok, err := demonstrate(ctx, jobs[j].open, o)
				if d != nil {
					d.ID, d.Scene, d.Goal = jobs[j].id, jobs[j].scene, jobs[j].goal
					d.Env, d.Problem = jobs[j].env, jobs[j].problem
				}
				results[j] = result{d, !ok, err}
			}
		}()
	}
	for j := range jobs {
		if ctx.Err() != nil {
			break
		}
		next <- j
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("train: making demonstrations: %w", err)
	}
	var demos []Demo
	var unsolved []string
	for j, r := range results {
		switch {
		case r.err != nil:
			return nil, nil, fmt.Errorf("train: %s: %w", jobs[j].id, r.err)
		case r.failed:
			unsolved = append(unsolved, jobs[j].id)
		case r.demo != nil:
			demos = append(demos, *r.demo)
		}
	}
	return demos, unsolved, nil
}

// BlocksworldDemos demonstrates generated Blocksworld problems
// (envs.GenerateBlocksworld) in PlanBench's domain and words: suite is PlanBench's
// (envs.NewBlocksworld; only its domain and lexicon are used, never its
// instances).
func BlocksworldDemos(ctx context.Context, suite *envs.Suite, probs []envs.BlocksProblem, o DemoOptions) ([]Demo, []string, error) {
	var jobs []demoJob
	for _, p := range probs {
		jobs = append(jobs, demoJob{id: p.ID, scene: p.ID, env: EnvBlocksworld, problem: p.Src, open: func() (*envs.Episode, error) {
			return suite.OpenProblem(ctx, p.ID, EnvBlocksworld, p.ID+".pddl", []byte(p.Src))
		}})
	}
	return solveJobs(ctx, jobs, o)
}

// VirtualHomeDemos demonstrates the problems of VirtualHome's training
// split (suite must be envs' VirtualHome restricted to envs.VirtualHomeTrain:
// the test split is for evaluation only).
func VirtualHomeDemos(ctx context.Context, suite *envs.Suite, o DemoOptions) ([]Demo, []string, error) {
	if suite.Name() != EnvVirtualHome || suite.SplitName() != envs.VirtualHomeTrain {
		return nil, nil, fmt.Errorf("train: %s split %q: demonstrations come from VirtualHome's %q split only", suite.Name(), suite.SplitName(), envs.VirtualHomeTrain)
	}
	var jobs []demoJob
	for i, info := range suite.Tasks() {
		if o.Limit > 0 && i >= o.Limit {
			break
		}
		jobs = append(jobs, demoJob{id: info.ID, scene: info.ID, env: EnvVirtualHome, open: func() (*envs.Episode, error) {
			return suite.Open(ctx, info.ID)
		}})
	}
	return solveJobs(ctx, jobs, o)
}

// demonstrate solves one task with the reference planner: its
// demonstration (nil when the goal holds at the start), and false when the
// planner found no plan.
func demonstrate(ctx context.Context, open func() (*envs.Episode, error), o DemoOptions) (*Demo, bool, error) {
	ep, err := open()
	if err != nil {
		return nil, false, err
	}
	task, lex := ep.Task(), ep.Lexicon()
	res, err := referenceSolve(ctx, task, o.Optimal, o.Timeout)
	if err != nil {
		return nil, false, fmt.Errorf("solving: %w", err)
	}
	if res.Status != search.Solved {
		return nil, false, nil
	}
	if len(res.Plan) == 0 {
		return nil, true, nil
	}
	popts := o.Prompt
	popts.Goal = ep.Goal()
	d := &Demo{Messages: decoder.Messages(lex, popts), Plan: actionTexts(lex, popts.Trace(lex), task.Init, res.Plan)}
	return d, true, nil
}

// actionTexts returns the lines the decoder writes for plan from state s:
// each action's lexicon text, and with trace (constraint.Options.Trace)
// constraint.TraceSep and the trace of the state it leads to, as the
// constraint forces them.
func actionTexts(lex *lexicon.Bound, trace func(pddl.State) string, s pddl.State, plan []int) []string {
	out := make([]string, len(plan))
	for i, a := range plan {
		out[i] = lex.Text(a)
		if trace != nil {
			s = lex.Task().Apply(s, a)
			if tr := trace(s); tr != "" {
				out[i] += constraint.TraceSep + tr
			}
		}
	}
	return out
}

// spread picks up to n of goals, as evenly over the task types as the
// scene allows, in an order drawn from rng.
func spread(goals []Goal, n int, rng *rand.Rand) []Goal {
	byType := map[string][]Goal{}
	for _, g := range goals {
		byType[g.Type] = append(byType[g.Type], g)
	}
	var types []string
	for _, t := range goalTypes {
		if gs := byType[t]; len(gs) > 0 {
			rng.Shuffle(len(gs), func(i, j int) { gs[i], gs[j] = gs[j], gs[i] })
			types = append(types, t)
		}
	}
	var out []Goal
	for len(out) < n && len(types) > 0 {
		rng.Shuffle(len(types), func(i, j int) { types[i], types[j] = types[j], types[i] })
		var left []string
		for _, t := range types {
			if len(out) == n {
				break
			}
			out = append(out, byType[t][0])
			byType[t] = byType[t][1:]
			if len(byType[t]) > 0 {
				left = append(left, t)
			}
		}
		types = left
	}
	return out
}
