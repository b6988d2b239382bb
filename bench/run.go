package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nesy-dev/nesy/constraint"
	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/explore"
	"github.com/nesy-dev/nesy/mcts"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/planner"
	"github.com/nesy-dev/nesy/trie"
)

// Methods (package planner's, by name; direct is bench's own).
const (
	// MethodDirect is the direct policy: one unconstrained command per turn,
	// with the environment's feedback, until the goal or the step budget.
	MethodDirect = string(planner.Direct)
	// MethodGreedy and MethodCGreedy decode a whole plan greedily,
	// unconstrained and constrained.
	MethodGreedy  = string(planner.Greedy)
	MethodCGreedy = string(planner.CGreedy)
	// MethodMCTS and MethodCMCTS search the model's tokens, unconstrained
	// and constrained.
	MethodMCTS  = string(planner.MCTS)
	MethodCMCTS = string(planner.CMCTS)
	// MethodThinking decodes a plan greedily and unconstrained after Qwen's
	// thinking.
	MethodThinking = string(planner.Thinking)
)

// Modes.
const (
	// ModeTrueState plans from the true initial state (Phase II only).
	ModeTrueState = "true-state"
	// ModeTwoPhase explores first (Phase I, package explore) and plans from
	// the grounded estimate.
	ModeTwoPhase = "two-phase"
)

// Methods lists the methods in report order; Modes the modes.
var (
	Methods = []string{MethodDirect, MethodGreedy, MethodCGreedy, MethodMCTS, MethodCMCTS, MethodThinking}
	Modes   = []string{ModeTrueState, ModeTwoPhase}
)

// Defaults for the zero values of Config.
const (
	DefaultSeconds    = 60
	DefaultMaxActions = 50
	DefaultMaxSteps   = 50
	DefaultMaxTokens  = 1024
)

// Config describes a benchmark run. Zero values take the documented
// defaults.
type Config struct {
	// Env is the environment; Suite selects its tasks (see SelectTasks).
	Env   envs.Env
	Suite string
	// Method is one of Methods, Mode one of Modes ("" means ModeTwoPhase).
	Method string
	Mode   string
	// Model is the loaded model; ModelName how the run names it. Index is
	// the model's vocabulary index (constraint.NewIndex); nil builds it.
	Model     models.LM
	ModelName string
	Index     *trie.Index
	// Out is the output folder (created).
	Out string
	// Shard runs one part of the tasks; Limit keeps the first Limit tasks of
	// the suite (before sharding); 0 means all.
	Shard Shard
	Limit int
	// Seconds bounds each task's planning (the search's time, the
	// decoder's deadline, the direct policy's whole episode); 0 means
	// DefaultSeconds.
	Seconds float64
	// Simulations bounds each search (0: time only). Heuristic is the
	// search's leaf heuristic ("" means mcts's default, h_FF).
	Simulations int
	Heuristic   string
	// SearchMemory bounds each search's tree, in bytes (mcts.NodeBytes per
	// node): a search that reaches it stops with stop "memory", keeping its
	// best plan. 0 means mcts.DefaultSearchMemory.
	SearchMemory int64
	// Batch is the leaves a search evaluates per model call (0: the
	// planner's default, 16). At batch b a search needs about b
	// simulations per branching level of its plan, so simulation counts
	// compare priors best at batch 1.
	Batch int
	// NoCollapse gives every token of a search its own node
	// (mcts.Options.NoCollapse).
	NoCollapse bool
	// Rollout continues every leaf a search evaluates by constrained
	// greedy decoding for up to this many actions and values it by where
	// that ends (mcts.Options.Rollout); 0 values leaves directly.
	Rollout int
	// RolloutTemperature samples rollout tokens at this temperature
	// instead of greedily (mcts.Options.RolloutTemperature); 0 is greedy.
	RolloutTemperature float64
	// Seed seeds sampling and the search's tie-breaking.
	Seed uint64
	// MaxActions bounds a plan's length; 0 means DefaultMaxActions.
	// MaxSteps bounds the direct policy's commands; 0 means
	// DefaultMaxSteps. MaxTokens bounds a decoded plan's tokens; 0 means
	// DefaultMaxTokens.
	MaxActions int
	MaxSteps   int
	MaxTokens  int
	// OmitStatic leaves static facts out of the planning prompt.
	OmitStatic bool
	// NoRevisit keeps constrained plans from returning to a state they have
	// been in (planner.Options.NoRevisit).
	NoRevisit bool
	// End says where a constrained plan may end (planner.Options.End):
	// at any action boundary (the zero value) or only once the goal holds.
	End constraint.EndPolicy
	// Explore configures Phase I (two-phase mode).
	Explore explore.Options
	// Progress, when not nil, is called after every task (and once at the
	// start with the tasks already done).
	Progress func(Progress)
}

// Progress reports how a run is going.
type Progress struct {
	// Total is the number of tasks of this run (shard); Done those finished,
	// Resumed of them those found already done at the start.
	Total, Done, Resumed int
	Successes            int
	// Last is the task just finished (nil at the start).
	Last *Record
}

// RunInfo is what run.json records about a run; resuming checks that it
// matches.
type RunInfo struct {
	Env         string  `json:"env"`
	Suite       string  `json:"suite"`
	Method      string  `json:"method"`
	Mode        string  `json:"mode"`
	Model       string  `json:"model"`
	Seconds     float64 `json:"seconds"`
	Simulations int     `json:"simulations,omitempty"`
	Heuristic   string  `json:"heuristic,omitempty"`
	// SearchMemory is Config.SearchMemory as applied (searches only).
	SearchMemory       int64   `json:"search_memory,omitempty"`
	Batch              int     `json:"batch,omitempty"`
	NoCollapse         bool    `json:"no_collapse,omitempty"`
	Rollout            int     `json:"rollout,omitempty"`
	RolloutTemperature float64 `json:"rollout_temperature,omitempty"`
	Seed               uint64  `json:"seed"`
	MaxActions         int     `json:"max_actions"`
	// MaxTokens is Config.MaxTokens where it is not DefaultMaxTokens.
	MaxTokens  int  `json:"max_tokens,omitempty"`
	OmitStatic bool `json:"omit_static,omitempty"`
	NoRevisit  bool `json:"no_revisit,omitempty"`
	// Revisit is the revisit mask's rule where every action leads back
	// (RevisitLeastVisited with NoRevisit; "" without it, or in a run made
	// before the rule, when all such actions stayed allowed).
	Revisit string `json:"revisit,omitempty"`
	// End is "goal" when constrained plans may end only once the goal
	// holds ("" : at any action boundary).
	End string `json:"end,omitempty"`
	// Perception is Phase I's perception method (two-phase runs).
	Perception string `json:"perception,omitempty"`
	// Split is the dataset split the tasks come from (ALFWorld
	// "valid_unseen", the evaluation split; "" where the env has none).
	Split string `json:"split,omitempty"`
	// PartiallyObservable says the env hides part of the state
	// (envs.Capabilities; VirtualHome only with envs.Options.Partial).
	PartiallyObservable bool `json:"partially_observable,omitempty"`
}

// splitter is an environment whose tasks come from a named dataset split.
type splitter interface{ Split() string }

func (c *Config) normalize() error {
	if c.Env == nil {
		return errors.New("bench: no environment")
	}
	if c.Model == nil {
		return errors.New("bench: no model")
	}
	if c.Out == "" {
		return errors.New("bench: no output folder")
	}
	if !slices.Contains(Methods, c.Method) {
		return fmt.Errorf("bench: unknown method %q (known: %s)", c.Method, strings.Join(Methods, ", "))
	}
	if c.Mode == "" {
		c.Mode = ModeTwoPhase
	}
	if !slices.Contains(Modes, c.Mode) {
		return fmt.Errorf("bench: unknown mode %q (known: %s)", c.Mode, strings.Join(Modes, ", "))
	}
	if c.Seconds < 0 || c.Simulations < 0 || c.SearchMemory < 0 || c.Batch < 0 || c.Rollout < 0 || c.RolloutTemperature < 0 || c.Limit < 0 || c.MaxActions < 0 || c.MaxSteps < 0 || c.MaxTokens < 0 {
		return errors.New("bench: negative budget")
	}
	if c.Seconds == 0 {
		c.Seconds = DefaultSeconds
	}
	if c.SearchMemory == 0 {
		c.SearchMemory = mcts.DefaultSearchMemory()
	}
	if c.Batch == planner.DefaultBatch {
		c.Batch = 0 // the default, named or not: one run
	}
	if c.MaxActions == 0 {
		c.MaxActions = DefaultMaxActions
	}
	if c.MaxSteps == 0 {
		c.MaxSteps = DefaultMaxSteps
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if err := c.Shard.check(); err != nil {
		return err
	}
	if c.ModelName == "" {
		c.ModelName = c.Model.Info().Name
	}
	return nil
}

// RevisitLeastVisited is RunInfo.Revisit for the revisit mask's rule:
// where every action leads back, the least visited successors stay
// (constraint.Options.NoRevisit).
const RevisitLeastVisited = "least-visited"

// revisitRule is RunInfo.Revisit for a run with or without the mask.
func revisitRule(noRevisit bool) string {
	if noRevisit {
		return RevisitLeastVisited
	}
	return ""
}

func (c *Config) info() RunInfo {
	return RunInfo{Env: c.Env.Name(), Suite: c.Suite, Method: c.Method, Mode: c.Mode, Model: c.ModelName,
		Seconds: c.Seconds, Simulations: c.Simulations, Heuristic: c.Heuristic, SearchMemory: c.searchMemory(), Batch: c.Batch, NoCollapse: c.NoCollapse, Rollout: c.Rollout, RolloutTemperature: c.RolloutTemperature, Seed: c.Seed,
		MaxActions: c.MaxActions, MaxTokens: nonDefault(c.MaxTokens, DefaultMaxTokens), OmitStatic: c.OmitStatic, NoRevisit: c.NoRevisit, Revisit: revisitRule(c.NoRevisit), End: endName(c.End), Perception: c.perception(), Split: splitOf(c.Env),
		PartiallyObservable: c.Env.Capabilities().PartiallyObservable}
}

// searchMemory is RunInfo.SearchMemory: the bound for the search methods,
// 0 for the others.
func (c *Config) searchMemory() int64 {
	if c.Method == MethodMCTS || c.Method == MethodCMCTS {
		return c.SearchMemory
	}
	return 0
}

// endName is RunInfo.End for policy p.
func endName(p constraint.EndPolicy) string {
	if p == constraint.EndAtGoal {
		return p.String()
	}
	return ""
}

// endOrAny names RunInfo.End for messages ("any" for "").
func endOrAny(s string) string {
	if s == "" {
		return constraint.EndAnyTime.String()
	}
	return s
}

// splitOf returns the env's dataset split, or "".
func splitOf(e envs.Env) string {
	if s, ok := e.(splitter); ok {
		return s.Split()
	}
	return ""
}

// perception is the run's perception method ("" in true-state mode).
func (c *Config) perception() string {
	if c.Mode != ModeTwoPhase {
		return ""
	}
	if c.Explore.Perception == "" {
		return explore.PerceiveText
	}
	return c.Explore.Perception
}

// Run runs the configured tasks that tasks.jsonl in the output folder does
// not hold yet, appending one record per task, then writes the summary, the
// report and the plots over every record of the folder. A run interrupted
// (the context cancelled) keeps the records of finished tasks; the task in
// progress is redone by the next run. Run refuses a folder holding a run of
// another environment, suite, method, mode or model.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	all, err := SelectTasks(cfg.Env.Tasks(), cfg.Suite)
	if err != nil {
		return nil, err
	}
	if cfg.Limit > 0 && cfg.Limit < len(all) {
		all = all[:cfg.Limit]
	}
	tasks := cfg.Shard.Select(all)
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	info := cfg.info()
	if err := checkRunInfo(cfg.Out, info); err != nil {
		return nil, err
	}
	path := filepath.Join(cfg.Out, TasksFile)
	if err := repair(path); err != nil {
		return nil, err
	}
	prev, err := ReadRecords(path)
	if err != nil {
		return nil, err
	}
	done := map[string]bool{}
	for _, r := range prev {
		done[r.Task] = true
	}
	p := Progress{Total: len(tasks)}
	var todo []envs.TaskInfo
	for _, t := range tasks {
		if done[t.ID] {
			p.Done++
			p.Resumed++
		} else {
			todo = append(todo, t)
		}
	}
	for _, r := range prev {
		if r.Success && slices.ContainsFunc(tasks, func(t envs.TaskInfo) bool { return t.ID == r.Task }) {
			p.Successes++
		}
	}
	if cfg.Progress != nil {
		cfg.Progress(p)
	}
	r, err := newRunner(cfg)
	if err != nil {
		return nil, err
	}
	app, err := openAppender(path)
	if err != nil {
		return nil, err
	}
	var runErr error
	for _, t := range todo {
		if runErr = ctx.Err(); runErr != nil {
			break
		}
		rec := r.task(ctx, t)
		if ctx.Err() != nil {
			runErr = ctx.Err() // the task was cut short: leave it to the next run
			break
		}
		if runErr = app.Append(rec); runErr != nil {
			break
		}
		p.Done++
		if rec.Success {
			p.Successes++
		}
		if cfg.Progress != nil {
			p.Last = &rec
			cfg.Progress(p)
		}
	}
	if err := app.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("bench: %w", err)
	}
	sum, err := WriteReport(cfg.Out)
	return sum, errors.Join(runErr, err)
}

// checkRunInfo writes run.json, or checks that the one there describes the
// same run.
func checkRunInfo(dir string, info RunInfo) error {
	path := filepath.Join(dir, RunFile)
	data, err := os.ReadFile(path)
	if err == nil {
		var old RunInfo
		if err := json.Unmarshal(data, &old); err != nil {
			return fmt.Errorf("bench: %s: %w", path, err)
		}
		type key struct{ env, suite, method, mode, model string }
		if (key{old.Env, old.Suite, old.Method, old.Mode, old.Model}) != (key{info.Env, info.Suite, info.Method, info.Mode, info.Model}) {
			return fmt.Errorf("bench: %s holds a run of env %q suite %q method %q mode %q model %q; use another --out for env %q suite %q method %q mode %q model %q",
				dir, old.Env, old.Suite, old.Method, old.Mode, old.Model, info.Env, info.Suite, info.Method, info.Mode, info.Model)
		}
		if old.Perception != info.Perception || old.Split != info.Split || old.PartiallyObservable != info.PartiallyObservable {
			return fmt.Errorf("bench: %s holds a run with perception %q on split %q (partially observable %v); use another --out for perception %q on split %q (partially observable %v)",
				dir, old.Perception, old.Split, old.PartiallyObservable, info.Perception, info.Split, info.PartiallyObservable)
		}
		if old.NoRevisit != info.NoRevisit {
			return fmt.Errorf("bench: %s holds a run with no_revisit %v; use another --out for no_revisit %v", dir, old.NoRevisit, info.NoRevisit)
		}
		if old.Revisit != info.Revisit {
			return fmt.Errorf("bench: %s holds a run made with the revisit mask's earlier rule (every action allowed where all lead back); use another --out for the rule %q", dir, info.Revisit)
		}
		if old.End != info.End {
			return fmt.Errorf("bench: %s holds a run with end %q; use another --out for end %q", dir, endOrAny(old.End), endOrAny(info.End))
		}
		if old.MaxTokens != info.MaxTokens {
			return fmt.Errorf("bench: %s holds a run with max_tokens %d; use another --out for max_tokens %d",
				dir, cmp.Or(old.MaxTokens, DefaultMaxTokens), cmp.Or(info.MaxTokens, DefaultMaxTokens))
		}
		if old.Batch != info.Batch || old.NoCollapse != info.NoCollapse || old.Rollout != info.Rollout || old.RolloutTemperature != info.RolloutTemperature {
			return fmt.Errorf("bench: %s holds a run with batch %d, no_collapse %v, rollout %d, rollout temperature %g; use another --out for batch %d, no_collapse %v, rollout %d, rollout temperature %g",
				dir, old.Batch, old.NoCollapse, old.Rollout, old.RolloutTemperature, info.Batch, info.NoCollapse, info.Rollout, info.RolloutTemperature)
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("bench: %w", err)
	}
	data, err = json.MarshalIndent(info, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// ReadRunInfo reads a run folder's run.json.
func ReadRunInfo(dir string) (RunInfo, error) {
	var info RunInfo
	data, err := os.ReadFile(filepath.Join(dir, RunFile))
	if err != nil {
		return info, fmt.Errorf("bench: %w", err)
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return info, fmt.Errorf("bench: %s: %w", filepath.Join(dir, RunFile), err)
	}
	return info, nil
}

// Shard is one of N parts of a suite: the tasks whose position (in the
// suite's order, after Limit) modulo N is I. The zero value is the whole
// suite.
type Shard struct{ I, N int }

// ParseShard reads "i/n" (0 <= i < n).
func ParseShard(s string) (Shard, error) {
	if s == "" {
		return Shard{}, nil
	}
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("bench: shard %q is not i/n", s)
	}
	if n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("bench: shard %q: want i/n with 0 <= i < n", s)
	}
	return Shard{I: i, N: n}, nil
}

func (s Shard) check() error {
	if s == (Shard{}) {
		return nil
	}
	if s.N < 1 || s.I < 0 || s.I >= s.N {
		return fmt.Errorf("bench: shard %d/%d: want 0 <= i < n", s.I, s.N)
	}
	return nil
}

// String returns "i/n", or "" for the whole suite.
func (s Shard) String() string {
	if s.N <= 1 {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.I, s.N)
}

// Select returns the shard's tasks.
func (s Shard) Select(tasks []envs.TaskInfo) []envs.TaskInfo {
	if s.N <= 1 {
		return tasks
	}
	var out []envs.TaskInfo
	for i, t := range tasks {
		if i%s.N == s.I {
			out = append(out, t)
		}
	}
	return out
}

// SelectTasks picks a suite's tasks: "", "all" (and ALFWorld's split name
// "valid_unseen") mean every task; "types" the first task of each type;
// anything else is a comma-separated list of prefixes matched against task
// IDs and types. The order is the environment's.
func SelectTasks(tasks []envs.TaskInfo, suite string) ([]envs.TaskInfo, error) {
	switch suite {
	case "", "all", "valid_unseen":
		return tasks, nil
	case "types":
		seen := map[string]bool{}
		var out []envs.TaskInfo
		for _, t := range tasks {
			if !seen[t.Type] {
				seen[t.Type] = true
				out = append(out, t)
			}
		}
		return out, nil
	}
	var prefixes []string
	for _, p := range strings.Split(suite, ",") {
		if p = strings.TrimSpace(p); p != "" {
			prefixes = append(prefixes, p)
		}
	}
	var out []envs.TaskInfo
	for _, t := range tasks {
		for _, p := range prefixes {
			if strings.HasPrefix(t.ID, p) || strings.HasPrefix(t.Type, p) {
				out = append(out, t)
				break
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: suite %q selects no task", suite)
	}
	return out, nil
}

// ClusterOf is the unit the bootstrap resamples for a task: the task folder
// for IDs "folder/trial" (ALFWorld: trials of one task family are nested in
// it), else the task type when it names a family (VirtualHome's task
// folders), else the task itself.
func ClusterOf(env string, t envs.TaskInfo) string {
	if i := strings.LastIndexByte(t.ID, '/'); i > 0 {
		return t.ID[:i]
	}
	if t.Type != "" && t.Type != env {
		return t.Type
	}
	return t.ID
}

// elapsed is the seconds since t.
func elapsed(t time.Time) float64 { return time.Since(t).Seconds() }

// nonDefault is v, or 0 where it is def (run.json then reads as a run made
// before the setting could be changed).
func nonDefault(v, def int) int {
	if v == def {
		return 0
	}
	return v
}
