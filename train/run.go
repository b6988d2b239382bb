package train

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
)

// RunOptions configure Run, the whole of nesy train.
type RunOptions struct {
	// ALFWorld is the training split of ALFWorld games
	// (datasets/alfworld/valid_train); evaluation splits are refused.
	ALFWorld string
	// Limit bounds the games (0: all).
	Limit int
	// Goals is how many further goals per game are sampled on its scene and
	// demonstrated (DemoOptions.Goals); 0: the games' own goals only.
	Goals int
	// Blocksworld is how many generated Blocksworld problems
	// (envs.GenerateBlocksworld: none equal to a PlanBench instance or a
	// problem of the held-out split up to renaming,
	// envs.BlocksworldTrainingExclusions) are demonstrated besides; 0: none.
	Blocksworld int
	// OptimalBlocksworld demonstrates the Blocksworld problems, and corrects
	// their DAgger rollouts, with shortest plans (A* over LM-cut) instead of
	// GBFS's (DemoOptions.Optimal).
	OptimalBlocksworld bool
	// BlocksworldPerEpoch, when above 0 and below Blocksworld, holds only
	// that many of the generated problems' demonstrations in each training
	// epoch, in turn (Options.Rotate): every problem is trained on over the
	// epochs while Blocksworld's share of each epoch, and with it the other
	// suites', stays that of BlocksworldPerEpoch problems. A problem's
	// sequence rotates whole: with Train.Pack, the DAgger corrections packed
	// into it (same scene, shared prompt) rotate with it; those in
	// sequences of their own stay in every epoch.
	BlocksworldPerEpoch int
	// PlanBench is PlanBench's Blocksworld folder (domain.pddl and
	// instances/): its domain and words for the generated problems, and the
	// instances they must differ from. Needed when Blocksworld > 0.
	PlanBench string
	// VirtualHome, when set, is VirtualHome's folder: the problems of its
	// training split (envs.VirtualHomeTrain) are demonstrated besides; the
	// test split is never read for training.
	VirtualHome string
	// DAgger are priors (GGUF) rolled out on the training tasks, each
	// adding the reference planner's corrections of its failed rollouts as
	// demonstrations after its own steps (DAggerDemos; DAgger's rounds:
	// every earlier round's policy stays, so the data aggregates). Held-out
	// scenes are never rolled out. The vocabulary stays the one learned
	// from the reference planner's demonstrations, so that a checkpoint
	// trained on them resumes on the aggregated data.
	DAgger []string
	// DAggerTasks bounds the tasks rolled out (spread evenly over the
	// training tasks; 0: all).
	DAggerTasks int
	// DAggerPoints is DAggerOptions.Points.
	DAggerPoints int
	// DAggerNoRevisit is DAggerOptions.NoRevisit: roll the policies out
	// with cgreedy's revisit mask.
	DAggerNoRevisit bool
	// Average are checkpoints (checkpoint.gob files of earlier points of
	// this run) whose weights are averaged with the trained ones for the
	// GGUF written at the end (AverageCheckpoints); the folder's checkpoint
	// keeps the trained weights, so a resumed run continues from them.
	Average []string
	// Out is the folder written: prior.gguf, train.svg, checkpoint.gob.
	Out string
	// Model is the shape (Vocab is set from the tokenizer).
	Model Config
	// Masked trains on the constrained distribution: the loss of each plan
	// token is over the tokens the constraint allows there
	// (ConstrainedSets), as the planner uses the prior; false: over the
	// whole vocabulary.
	Masked bool
	// StateFirst trains on the state-first compact prompt
	// (decoder.PromptOptions.StateFirst; the GGUF says
	// decoder.PromptCompactStateFirst), whose goals on one scene share the
	// state's tokens, so that Options.Pack can pack them; false: the
	// compact prompt, goal before and after the state.
	StateFirst bool
	// UpperGoal writes the prompt's goal in capitals
	// (decoder.PromptOptions.UpperGoal).
	UpperGoal bool
	// GoalTrace trains with the goal trace after every action of a task
	// whose goal is one conjunction (decoder.PromptOptions.GoalTrace).
	GoalTrace bool
	// GoalTraceAll, with GoalTrace, traces every task: the facts left of
	// the goal's nearest alternatives (decoder.PromptOptions.GoalTraceAll).
	GoalTraceAll bool
	// BLASCore, with Train.BLAS BLASOpenBLAS, names the kernels OpenBLAS
	// runs (its OPENBLAS_CORETYPE, e.g. "Haswell"), set before OpenBLAS
	// loads, instead of those it picks for the CPU: the kernels decide the
	// bits, so naming them lets every CPU that has their instructions
	// train the same weights. Run fails if OpenBLAS runs others. "": its
	// own pick.
	BLASCore string
	// Merges bounds the tokenizer's BPE merges.
	Merges int
	// Seed seeds the weights and the data order.
	Seed uint64
	// HeldOut is the share of games held out for the held-out loss
	// (0: 0.1).
	HeldOut float64
	// Train are the optimiser's options (Seq, Checkpoint and Progress are
	// filled in when zero).
	Train Options
	// Log receives one-line reports of the stages (nil: none).
	Log func(format string, args ...any)
}

// Files Run writes in RunOptions.Out.
const (
	ModelFile      = "prior.gguf"
	PlotFile       = "train.svg"
	CheckpointFile = "checkpoint.gob"
	DemosFile      = "demos.json"
)

// DefaultPackSeq is the training sequence's positions when examples are
// packed (Options.Pack) and RunOptions.Train.Seq is 0 (at least the
// longest example's).
const DefaultPackSeq = 1024

// maxHeldOut bounds the examples the held-out loss is evaluated on.
const maxHeldOut = 96

// demoCacheVersion is the current DemosFile format (2: demonstrations
// name their further goal; Blocksworld and VirtualHome, added later, are
// zero in a cache without them).
const demoCacheVersion = 2

// demoCache is DemosFile: the demonstrations of one Limit, Goals,
// Blocksworld, VirtualHome and Seed.
type demoCache struct {
	Version      int // demoCacheVersion
	Limit, Goals int
	Blocksworld  int `json:",omitempty"`
	// OptimalBlocksworld: the Blocksworld plans are shortest
	// (RunOptions.OptimalBlocksworld).
	OptimalBlocksworld bool `json:",omitempty"`
	VirtualHome        bool `json:",omitempty"`
	Seed               uint64
	// Prompt is the prompt's decoder kind ("" in older files: compact).
	Prompt   string `json:",omitempty"`
	Demos    []Demo
	Unsolved []string
}

// loadDemos returns the demonstrations of o, from o.Out's DemosFile when it
// holds those of the same games, goals and seed, else made anew and saved
// there.
func loadDemos(ctx context.Context, o RunOptions, src Sources, prompt decoder.PromptOptions, logf func(string, ...any)) ([]Demo, []string, error) {
	path := filepath.Join(o.Out, DemosFile)
	if data, err := os.ReadFile(path); err == nil {
		var c demoCache
		if json.Unmarshal(data, &c) == nil && c.Version == demoCacheVersion && c.Limit == o.Limit && c.Goals == o.Goals && c.Seed == o.Seed &&
			c.Blocksworld == o.Blocksworld && c.OptimalBlocksworld == (o.OptimalBlocksworld && o.Blocksworld > 0) && c.VirtualHome == (o.VirtualHome != "") && len(c.Demos) > 0 &&
			cmp.Or(c.Prompt, decoder.PromptCompact) == prompt.Kind() {
			logf("demonstrations: %d read from %s", len(c.Demos), path)
			return c.Demos, c.Unsolved, nil
		}
	}
	start := time.Now()
	dopts := DemoOptions{Prompt: prompt, Limit: o.Limit, Goals: o.Goals, Seed: o.Seed}
	demos, unsolved, err := ALFWorldDemos(ctx, o.ALFWorld, dopts)
	if err != nil {
		return nil, nil, err
	}
	logf("demonstrations: ALFWorld: %d tasks solved by the reference planner (%d not) in %.1f s", len(demos), len(unsolved), time.Since(start).Seconds())
	if o.Blocksworld > 0 {
		start := time.Now()
		keys, err := envs.BlocksworldTrainingExclusions(filepath.Join(o.PlanBench, "instances"))
		if err != nil {
			return nil, nil, err
		}
		probs, err := envs.GenerateBlocksworld(o.Blocksworld, o.Seed, keys)
		if err != nil {
			return nil, nil, err
		}
		ds, us, err := BlocksworldDemos(ctx, src.Blocksworld, probs, DemoOptions{Prompt: prompt, Seed: o.Seed, Optimal: o.OptimalBlocksworld})
		if err != nil {
			return nil, nil, err
		}
		how := "GBFS"
		if o.OptimalBlocksworld {
			how = "shortest plans, A* over LM-cut"
		}
		logf("demonstrations: Blocksworld: %d generated problems (none equal to a PlanBench instance or a held-out problem up to renaming), %d solved (%s) in %.1f s", len(probs), len(ds), how, time.Since(start).Seconds())
		demos, unsolved = append(demos, ds...), append(unsolved, us...)
	}
	if src.VirtualHome != nil {
		start := time.Now()
		ds, us, err := VirtualHomeDemos(ctx, src.VirtualHome, DemoOptions{Prompt: prompt, Seed: o.Seed})
		if err != nil {
			return nil, nil, err
		}
		logf("demonstrations: VirtualHome train split: %d problems solved (%d not) in %.1f s", len(ds), len(us), time.Since(start).Seconds())
		demos, unsolved = append(demos, ds...), append(unsolved, us...)
	}
	data, err := json.Marshal(demoCache{Version: demoCacheVersion, Limit: o.Limit, Goals: o.Goals, Blocksworld: o.Blocksworld,
		OptimalBlocksworld: o.OptimalBlocksworld && o.Blocksworld > 0,
		VirtualHome:        o.VirtualHome != "", Seed: o.Seed, Prompt: prompt.Kind(), Demos: demos, Unsolved: unsolved})
	if err != nil {
		return nil, nil, fmt.Errorf("train: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return nil, nil, fmt.Errorf("train: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, nil, fmt.Errorf("train: %w", err)
	}
	return demos, unsolved, nil
}

// prompt returns the compact prompt the options train on (the goal in
// words is filled in per task).
func (o RunOptions) prompt() decoder.PromptOptions {
	return decoder.PromptOptions{Compact: true, StateFirst: o.StateFirst, UpperGoal: o.UpperGoal, GoalTrace: o.GoalTrace, GoalTraceAll: o.GoalTrace && o.GoalTraceAll}
}

// sources opens the suites the options name, for making and reopening
// demonstrations.
func (o RunOptions) sources() (Sources, error) {
	src := Sources{ALFWorld: o.ALFWorld}
	if o.Blocksworld > 0 {
		if o.PlanBench == "" {
			return src, fmt.Errorf("train: generated Blocksworld problems need PlanBench's folder (its domain and the instances to differ from)")
		}
		s, err := envs.NewBlocksworld(o.PlanBench)
		if err != nil {
			return src, fmt.Errorf("train: %w", err)
		}
		src.Blocksworld = s
	}
	if o.VirtualHome != "" {
		s, err := envs.NewVirtualHome(o.VirtualHome)
		if err == nil {
			s, err = s.Split(envs.VirtualHomeTrain)
		}
		if err != nil {
			return src, fmt.Errorf("train: %w", err)
		}
		src.VirtualHome = s
	}
	return src, nil
}

// Run makes the demonstrations, learns the tokenizer, trains the prior and
// writes it as a GGUF (with the compact prompt selected in its metadata)
// and the loss curves as an SVG. It returns the training result.
func Run(ctx context.Context, o RunOptions) (*Result, error) {
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	// A BLAS that cannot load fails now, not after the demonstrations.
	if err := pinBLASCore(o.Train.BLAS, o.BLASCore); err != nil {
		return nil, err
	}
	if err := checkBLAS(o.Train.BLAS); err != nil {
		return nil, err
	}
	prompt := o.prompt()
	src, err := o.sources()
	if err != nil {
		return nil, err
	}
	demos, _, err := loadDemos(ctx, o, src, prompt, logf)
	if err != nil {
		return nil, err
	}
	if len(demos) < 2 {
		return nil, fmt.Errorf("train: %d demonstrations: too few to train and hold out", len(demos))
	}
	if o.Merges <= 0 {
		o.Merges = 2000
	}
	tok := NewTokenizer(demos, o.Merges)
	base := demos
	if o.BlocksworldPerEpoch > 0 {
		generated := map[string]bool{}
		for _, d := range demos {
			if d.Env == EnvBlocksworld {
				generated[d.ID] = true
			}
		}
		o.Train.Rotate, o.Train.RotateMatch = o.BlocksworldPerEpoch, func(id string) bool { return generated[id] }
	}
	for _, policy := range o.DAgger {
		dd, err := loadDAgger(ctx, o, policy, src, base, logf)
		if err != nil {
			return nil, err
		}
		demos = append(demos, dd...)
	}
	cfg := o.Model
	cfg.Vocab = len(tok.Tokens)
	p, err := NewParams(cfg, o.Seed)
	if err != nil {
		return nil, err
	}
	logf("model: %d tokens, %d parameters (%d layers, %d wide, %d heads, FFN %d)", cfg.Vocab, p.Count(), cfg.Layers, cfg.Dim, cfg.Heads, cfg.FFN)
	if desc, err := DescribeBLAS(o.Train.BLAS); err == nil {
		logf("matrix products: %s", desc)
	}
	path := filepath.Join(o.Out, ModelFile)
	// The initial model tokenizes and renders the demonstrations as the
	// engine will the trained one's prompts. It is written aside, so that
	// a trained prior.gguf (a run resumed in its folder) is replaced only
	// by the first snapshot, never by untrained weights.
	initPath := filepath.Join(o.Out, ".initial-"+ModelFile)
	if err := writeGGUF(p, tok, initPath, prompt.Kind()); err != nil {
		return nil, err
	}
	lm, err := models.Load(ctx, initPath, models.Options{Threads: 1, Sequences: 1, ContextLength: 256})
	os.Remove(initPath) // the engine holds what it needs once loaded
	if err != nil {
		return nil, fmt.Errorf("train: loading the initial model: %w", err)
	}
	examples, err := Tokenize(lm, demos)
	if err == nil && o.Masked {
		var left int
		left, err = ConstrainedSets(ctx, lm, src, demos, examples)
		if err == nil {
			logf("constrained loss: the constraint's tokens at every plan token of %d examples (%d left unconstrained: their tokens leave it)", len(examples)-left, left)
		}
	}
	lm.Close()
	if err != nil {
		return nil, err
	}
	heldScene := heldOutScenes(demos, o.HeldOut)
	var tr, held []Example
	longest := 0
	for _, x := range examples {
		longest = max(longest, len(x.Tokens))
		if heldScene[x.Scene] {
			held = append(held, x)
		} else {
			tr = append(tr, x)
		}
	}
	// The held-out loss is evaluated often: a spread-out sample of at most
	// maxHeldOut examples keeps it cheap beside the steps.
	if len(held) > maxHeldOut {
		sample := make([]Example, 0, maxHeldOut)
		for i := range maxHeldOut {
			sample = append(sample, held[i*len(held)/maxHeldOut])
		}
		held = sample
	}
	to := o.Train
	if to.Seq == 0 {
		to.Seq = longest
		if to.Pack > 1 {
			to.Seq = max(longest, DefaultPackSeq)
		}
	}
	if to.Checkpoint == "" {
		to.Checkpoint = filepath.Join(o.Out, CheckpointFile)
	}
	logf("examples: %d training, %d held out; longest %d tokens", len(tr), len(held), longest)
	if to.Snapshot == nil {
		to.Snapshot = func() error { return writeGGUF(p, tok, path, prompt.Kind()) }
	}
	res, err := Train(ctx, p, tr, held, to)
	if err != nil {
		return nil, err
	}
	if len(o.Average) > 0 {
		if err := AverageCheckpoints(p, o.Average); err != nil {
			return nil, err
		}
		logf("weights: the trained ones averaged with %d checkpoints", len(o.Average))
	}
	if err := writeGGUF(p, tok, path, prompt.Kind()); err != nil {
		return nil, err
	}
	if err := Plot(res, filepath.Join(o.Out, PlotFile)); err != nil {
		return nil, err
	}
	return res, nil
}

// heldOutScenes returns the scenes held out for the held-out loss: every
// k-th scene in the order of first appearance (k = 1/share, share 0 meaning
// 0.1), with all its goals. The games are sorted by task type, so each type
// is in both parts, and the held-out loss is on scenes never trained on, as
// the evaluation's are.
func heldOutScenes(demos []Demo, share float64) map[string]bool {
	if share <= 0 {
		share = 0.1
	}
	var scenes []string
	seen := map[string]bool{}
	for _, d := range demos {
		if !seen[d.Scene] {
			seen[d.Scene] = true
			scenes = append(scenes, d.Scene)
		}
	}
	k := min(max(2, int(math.Round(1/share))), len(scenes)) // at least one held out
	held := map[string]bool{}
	for i, sc := range scenes {
		if i%k == k-1 {
			held[sc] = true
		}
	}
	return held
}

// daggerCache is a DAgger file: the DAgger demonstrations of one policy
// (by its SHA-256), task bound and points.
type daggerCache struct {
	Policy        string
	Tasks, Points int
	NoRevisit     bool `json:",omitempty"`
	// OptimalBlocksworld: Blocksworld corrections are shortest plans.
	OptimalBlocksworld bool `json:",omitempty"`
	// GoalTrace: the demonstrations' actions carry the goal trace.
	GoalTrace bool `json:",omitempty"`
	// GoalTraceAll: every task's actions carry it (the nearest
	// alternatives' facts).
	GoalTraceAll bool `json:",omitempty"`
	Rollouts     int
	Solved       int
	Demos        []Demo
}

// DAggerFile is the file in RunOptions.Out that holds the DAgger
// demonstrations of the policy whose GGUF has the SHA-256 hash (hex),
// rolled out with the revisit mask or without, with Blocksworld corrected
// by shortest plans (RunOptions.OptimalBlocksworld) or not.
func DAggerFile(hash string, noRevisit, optimalBlocksworld bool) string {
	name := "dagger-" + hash[:12]
	if noRevisit {
		name += "-norevisit"
	}
	if optimalBlocksworld {
		name += "-optbw"
	}
	return name + ".json"
}

// loadDAgger returns the DAgger demonstrations of the policy (a GGUF path)
// on the training scenes of demos, from o.Out's DAggerFile when it holds
// those of the same policy, bound and points, else made anew and saved
// there.
func loadDAgger(ctx context.Context, o RunOptions, policyPath string, src Sources, demos []Demo, logf func(string, ...any)) ([]Demo, error) {
	data, err := os.ReadFile(policyPath)
	if err != nil {
		return nil, fmt.Errorf("train: DAgger policy: %w", err)
	}
	sum := sha256.Sum256(data)
	policy := hex.EncodeToString(sum[:])
	path := filepath.Join(o.Out, DAggerFile(policy, o.DAggerNoRevisit, o.OptimalBlocksworld))
	if b, err := os.ReadFile(path); err == nil {
		var c daggerCache
		if json.Unmarshal(b, &c) == nil && c.Policy == policy && c.Tasks == o.DAggerTasks && c.Points == o.DAggerPoints && c.NoRevisit == o.DAggerNoRevisit && c.OptimalBlocksworld == o.OptimalBlocksworld && c.GoalTrace == o.GoalTrace && c.GoalTraceAll == (o.GoalTrace && o.GoalTraceAll) {
			logf("DAgger: %d demonstrations read from %s", len(c.Demos), path)
			return c.Demos, nil
		}
	}
	held := heldOutScenes(demos, o.HeldOut)
	var tasks []Demo
	for _, d := range demos {
		if !held[d.Scene] {
			tasks = append(tasks, d)
		}
	}
	if n := o.DAggerTasks; n > 0 && n < len(tasks) {
		spread := make([]Demo, n)
		for i := range spread {
			spread[i] = tasks[i*len(tasks)/n]
		}
		tasks = spread
	}
	// One engine per worker, one thread each: the rollouts run in
	// parallel and each is computed as it would be alone.
	lms := make([]models.LM, max(1, min(o.Train.Workers, len(tasks))))
	for i := range lms {
		lm, err := models.Load(ctx, policyPath, models.Options{Threads: 1, Sequences: 2, ContextLength: 4096})
		if err != nil {
			return nil, fmt.Errorf("train: DAgger policy: %w", err)
		}
		defer lm.Close()
		lms[i] = lm
	}
	start := time.Now()
	dd, solved, err := DAggerDemos(ctx, lms, src, tasks, DAggerOptions{Points: o.DAggerPoints, NoRevisit: o.DAggerNoRevisit, OptimalBlocksworld: o.OptimalBlocksworld, Prompt: o.prompt()})
	if err != nil {
		return nil, err
	}
	logf("DAgger: %s rolled out on %d training tasks (%d engines): %d reached the goal; %d demonstrations from the states of the others (%.1f s)",
		policyPath, len(tasks), len(lms), solved, len(dd), time.Since(start).Seconds())
	b, err := json.Marshal(daggerCache{Policy: policy, Tasks: o.DAggerTasks, Points: o.DAggerPoints, NoRevisit: o.DAggerNoRevisit, OptimalBlocksworld: o.OptimalBlocksworld, GoalTrace: o.GoalTrace, GoalTraceAll: o.GoalTrace && o.GoalTraceAll, Rollouts: len(tasks), Solved: solved, Demos: dd})
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	return dd, nil
}

// writeGGUF writes p with tok to path, marked as trained on the prompt of
// kind (decoder.PromptOptions.Kind).
func writeGGUF(p *Params, tok *gguf.Tokenizer, path, kind string) error {
	spec, err := p.Spec(tok, "nesy-prior")
	if err != nil {
		return err
	}
	spec.Meta = map[string]string{models.PromptKey: kind}
	// Written aside and renamed: a model being read (a snapshot tried while
	// training goes on) is never half-written.
	tmp := path + ".tmp"
	if err := gguf.Write(tmp, spec); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return nil
}

// Plot writes the training loss (a moving mean over ten steps) and the
// held-out loss against the step as an SVG.
func Plot(res *Result, path string) error {
	pl := plot.New()
	pl.Title.Text = "nesy train: loss per plan token"
	pl.X.Label.Text = "step"
	pl.Y.Label.Text = "cross-entropy (nats)"
	line := func(name string, pts []Point, window int) error {
		if len(pts) == 0 {
			return nil
		}
		var xy plotter.XYs
		sum := 0.0
		for i, p := range pts {
			sum += p.Loss
			if i >= window {
				sum -= pts[i-window].Loss
			}
			if y := sum / float64(min(i+1, window)); !math.IsNaN(y) && !math.IsInf(y, 0) {
				xy = append(xy, plotter.XY{X: float64(p.Step), Y: y})
			}
		}
		if len(xy) == 0 {
			return nil
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		if name == "held out" {
			l.Color = plotter.DefaultLineStyle.Color
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		pl.Add(l)
		pl.Legend.Add(name, l)
		return nil
	}
	if err := line("training (mean of 10 steps)", res.Train, 10); err != nil {
		return fmt.Errorf("train: plot: %w", err)
	}
	if err := line("held out", res.HeldOut, 1); err != nil {
		return fmt.Errorf("train: plot: %w", err)
	}
	if err := pl.Save(8*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("train: plot: %w", err)
	}
	return nil
}
