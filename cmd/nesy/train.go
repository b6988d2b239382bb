package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/internal/sysmem"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/train"
)

// trainMemoryFraction is the share of the machine's memory nesy train
// keeps its Go heap under (a soft limit; GOMEMLIMIT overrides): the traced
// recipe's DAgger stages peaked at 20.0 GB on a 24 GiB machine under a
// 19 GiB limit and were killed at 24.3 GB without one.
const trainMemoryFraction = 0.8

func newTrainCmd() *cobra.Command {
	var (
		o                       train.RunOptions
		datasets, blasName      string
		probe                   string
		layers, dim, heads, ffn int
		steps, batch, evalEvery int
		pack, seq               int
		workers                 int
		lr, clip, graphGiB      float64
		resume, quiet, tied, vh bool
	)
	cmd := &cobra.Command{
		Use:   "train --out DIR [--steps N] [--seed N] [--resume] [--layers N --dim N --heads N --ffn N]",
		Short: "Train nesy's planning prior on reference-planner demonstrations",
		Long: `train makes demonstrations with the reference planner (GBFS over h_FF with
preferred operators, as nesy solve) on ALFWorld's valid_train games only
(never valid_unseen, which is for evaluation), learns a byte-level BPE
vocabulary from their prompts and plans, and trains a small decoder-only
llama transformer with gorgonia on the plan tokens (the prompt is the
decoder's compact prompt, rendered with the model's own chat template, so
the prior is trained on the prompt nesy plan, bench and serve give it; the
GGUF's general.nesy.prompt selects it).

With --goals N, each training game's scene also gets up to N further goals
of ALFWorld's six task types (an object type and a receptacle type the scene
affords, phrased as ALFWorld phrases goals), demonstrated the same way. The
held-out loss is on whole scenes never trained on.

--blocksworld N adds N generated Blocksworld problems (3-6 blocks, PlanBench's
domain, words and goal form; none equal to any of PlanBench's 501 instances up
to renaming the blocks, which stay for evaluation), and --virtualhome the
problems of VirtualHome's train split (nesy bench --split train; the test
split is for evaluation), each demonstrated the same way. The reference
planner is nesy solve's GBFS; --optimal-blocksworld demonstrates Blocksworld
(and corrects its --dagger rollouts) with shortest plans instead (A* over
LM-cut): GBFS stacks a tower early and takes it down again on a fifth of the
five- and six-block problems, a habit a prior learns.

--dagger PRIOR.gguf rolls a prior out on the training tasks (constrained
greedy decoding, as nesy bench --method cgreedy; held-out scenes never) and,
where it fails, adds the reference planner's plans from the states it reached
after its own steps (DAgger: the loss covers the planner's part), so that the
prior learns to recover from its own mistakes. The vocabulary stays the one of
the planner's demonstrations: a run's checkpoint continues on the aggregated
data with --resume and more --steps. Repeat --dagger for DAgger's later
rounds: each policy's corrections are kept, so the data aggregates over the
rounds. Each policy's demonstrations are saved in DIR/dagger-HASH.json (the
first 12 hex digits of the GGUF's SHA-256) and reused.

It writes DIR/prior.gguf (loadable by --model DIR/prior.gguf), DIR/train.svg
(training and held-out loss per plan token), DIR/demos.json (the
demonstrations, reused by a later run with the same --limit, --goals,
--blocksworld, --optimal-blocksworld, --virtualhome and --seed) and DIR/checkpoint.gob, written at every held-out evaluation;
--resume continues from it. The same flags and seed give the same model, with
any --workers (the examples of a step run on that many cores at once, their
gradients summed in one order; --dagger rollouts run on that many engines of
the policy at once, one thread each, gathered in task order).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Out == "" && probe == "" {
				return errors.New("train: --out is required")
			}
			ds, err := datasetsDir(datasets)
			if err != nil {
				return err
			}
			o.ALFWorld = filepath.Join(ds, "alfworld", "valid_train")
			if probe != "" {
				return runProbe(cmd, o, probe)
			}
			o.PlanBench = filepath.Join(ds, "planbench-blocksworld")
			if vh {
				o.VirtualHome = filepath.Join(ds, "virtualhome")
			}
			o.Model = train.Config{Layers: layers, Dim: dim, Heads: heads, FFN: ffn, Tied: tied}
			o.Train = train.Options{Steps: steps, Batch: batch, LR: lr, Clip: clip, Seed: o.Seed, EvalEvery: evalEvery, Resume: resume, Workers: workers, BLAS: train.BLAS(blasName),
				Pack: pack, Seq: seq, GraphMemory: int64(graphGiB * (1 << 30))}
			if pack > 1 && !o.StateFirst {
				return errors.New("train: --pack needs --state-first: the compact prompt's goal comes before the state, so no two goals share their prompt's tokens")
			}
			if o.GoalTraceAll && !o.GoalTrace {
				return errors.New("train: --goal-trace-all needs --goal-trace: it widens the goal trace to every task")
			}
			errw := cmd.ErrOrStderr()
			o.Log = func(format string, a ...any) { fmt.Fprintf(errw, "nesy train: "+format+"\n", a...) }
			// A soft memory limit below the machine's memory: the long
			// DAgger examples' graphs otherwise let the heap grow past
			// it before a collection (the kernel's kill, not an error).
			if lim := sysmem.SoftLimit(sysmem.Total(), os.Getenv("GOMEMLIMIT"), trainMemoryFraction); lim > 0 {
				defer debug.SetMemoryLimit(debug.SetMemoryLimit(lim))
				o.Log("Go soft memory limit %.1f GiB, %.0f%% of the machine's (GOMEMLIMIT sets another)", float64(lim)/(1<<30), 100*trainMemoryFraction)
			}
			bar := newTrainBar(errw, steps, quiet)
			o.Train.Progress = bar.update
			start := time.Now()
			res, err := train.Run(cmd.Context(), o)
			bar.finish(err == nil)
			if err != nil && cmd.Context().Err() != nil {
				fmt.Fprintf(errw, "nesy train: interrupted; the same command with --resume continues from %s\n",
					filepath.Join(o.Out, train.CheckpointFile))
				return exitError{130}
			}
			if err != nil {
				return err
			}
			final := res.HeldOut[len(res.HeldOut)-1]
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s and %s: held-out loss %.3f at step %d (%d training sequences; %d examples longer than the graph left out) in %s\n",
				filepath.Join(o.Out, train.ModelFile), filepath.Join(o.Out, train.PlotFile), final.Loss, final.Step, res.Sequences, res.Skipped,
				time.Since(start).Round(time.Second))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Out, "out", "", "output folder (required)")
	f.StringVar(&datasets, "datasets", "", "datasets folder (default $NESY_SHARED/datasets, else ../shared/datasets)")
	f.IntVar(&o.Limit, "limit", 0, "use the first N training games only (0: all 200)")
	f.BoolVar(&o.Masked, "masked", false, "loss over the tokens the constraint allows at each plan token (the distribution the planner uses), not the whole vocabulary")
	f.IntVar(&o.Goals, "goals", 0, "further goals per training game, sampled on its scene over the six task types and demonstrated too")
	f.IntVar(&o.Blocksworld, "blocksworld", 0, "generated Blocksworld problems demonstrated too (none equal to a PlanBench instance up to renaming)")
	f.IntVar(&o.BlocksworldPerEpoch, "blocksworld-per-epoch", 0, "train on only N of the --blocksworld problems per epoch, in turn, so that a larger pool of problems keeps Blocksworld's share of each epoch (and the other suites') that of N problems (0: all in every epoch)")
	f.BoolVar(&o.OptimalBlocksworld, "optimal-blocksworld", false, "demonstrate the --blocksworld problems, and correct their --dagger rollouts, with shortest plans (A* over LM-cut) instead of GBFS's, which take detours on a fifth of the five- and six-block problems")
	f.StringArrayVar(&o.DAgger, "dagger", nil, "a prior (GGUF) whose failed rollouts on the training tasks get the reference planner's corrections as further demonstrations (repeat for DAgger's rounds: every policy's corrections are kept)")
	f.IntVar(&o.DAggerTasks, "dagger-tasks", 0, "training tasks rolled out by --dagger (spread evenly; 0: all)")
	f.IntVar(&o.DAggerPoints, "dagger-points", 3, "states per failed rollout that get a correction")
	f.StringArrayVar(&o.Average, "average", nil, "a checkpoint (checkpoint.gob of an earlier point of the run) whose weights are averaged with the trained ones in the GGUF written at the end (repeat: the mean of all; DIR/checkpoint.gob keeps the trained weights)")
	f.BoolVar(&o.DAggerNoRevisit, "dagger-no-revisit", false, "roll --dagger policies out with cgreedy's revisit mask (the default of nesy plan/bench cgreedy, and the shipped prior's round; off: plain cgreedy)")
	f.BoolVar(&vh, "virtualhome", false, "demonstrate the problems of VirtualHome's train split too")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the weights and the data order")
	f.IntVar(&steps, "steps", 400, "optimiser steps")
	f.IntVar(&batch, "batch", 4, "demonstrations per step")
	f.IntVar(&workers, "workers", runtime.NumCPU(), "demonstrations of a step evaluated (and --dagger tasks rolled out) at once, one core each (the weights are bit-identical for every count)")
	f.Float64Var(&lr, "lr", 3e-3, "peak learning rate (Adam, warm-up then cosine decay)")
	f.Float64Var(&clip, "clip", train.DefaultClip, "clip each step's gradient to this global norm (negative: no clipping)")
	f.IntVar(&evalEvery, "eval-every", 0, "steps between held-out evaluations and checkpoints (0: steps/10)")
	f.BoolVar(&resume, "resume", false, "continue from DIR/checkpoint.gob")
	f.IntVar(&layers, "layers", 2, "transformer blocks")
	f.IntVar(&dim, "dim", 128, "hidden size")
	f.IntVar(&heads, "heads", 4, "attention heads")
	f.IntVar(&ffn, "ffn", 256, "feed-forward size")
	f.BoolVar(&tied, "tied", false, "compute the logits with the token embedding (tied output weights) instead of a projection of its own")
	f.IntVar(&o.Merges, "merges", 2000, "BPE merges at most (the vocabulary stops growing when every word is one token)")
	f.StringVar(&o.BLASCore, "blas-core", "", "with --blas openblas: the kernels OpenBLAS runs (its OPENBLAS_CORETYPE, e.g. Haswell, SkylakeX, Cooperlake) instead of its pick for the CPU; the kernels decide the bits, so naming them trains the same weights on every CPU that has their instructions (refused where OpenBLAS runs others)")
	f.StringVar(&blasName, "blas", string(train.BLASGonum), "matrix products: gonum (pure Go, the same bits on every machine) or openblas (libopenblas.so.0, the shipped recipe's: its matrix products about 3x faster per core, a whole run about 1.5x; bit-identical for any --workers wherever OpenBLAS picks the same kernels, which the run logs)")
	f.StringVar(&probe, "probe", "", "train nothing: say whether a prior (GGUF) reads the goal's object, at the first take of each ALFWorld training game (teacher-forced), with its own goal and with the goal's object type swapped")
	f.BoolVar(&o.StateFirst, "state-first", false, "train on the compact prompt with the state before the goal (no goal line first), so that the goals of one scene share the state's tokens (the GGUF says general.nesy.prompt = compact-state-first)")
	f.BoolVar(&o.UpperGoal, "upper-goal", false, "write the prompt's goal in capitals, so that its words are tokens of their own, never the state's or the plan's (the GGUF's general.nesy.prompt ends in -upper-goal)")
	f.BoolVar(&o.GoalTrace, "goal-trace", false, "with a compact prompt: after every action the constraint writes, on its line, the goal's facts still to reach (\" => left: FACT; FACT\", forced tokens; tasks whose goal is one conjunction of facts: Blocksworld's, VirtualHome's, some of ALFWorld's), and the prior is trained on such plans (the GGUF's general.nesy.prompt ends in -goal-trace)")
	f.BoolVar(&o.GoalTraceAll, "goal-trace-all", false, "with --goal-trace: trace every task, also those whose goal has alternatives (most of ALFWorld's): the facts left of the goal's nearest alternatives, merged word by word with \"?\" where they disagree (\" => left: KETTLE ? IS IN/ON CABINET ?; KETTLE ? IS CLEAN\"; the prompt kind ends in -goal-trace-all)")
	f.IntVar(&pack, "pack", 0, "with --state-first, pack up to N demonstrations of one scene into one training sequence on a single copy of their shared state (each sees the state and its own tokens only; its loss and gradient are those it has alone); a step's --batch then counts sequences")
	f.Float64Var(&graphGiB, "graph-memory", 5, "GiB of training graphs kept between examples (one per 128-position length bucket, estimated from their tensors): the least recently used are rebuilt when needed instead; the weights are the same bits for any value (0: keep every graph)")
	f.IntVar(&seq, "seq", 0, "positions of a training sequence (0: the longest demonstration's, with --pack at least 1024)")
	f.BoolVar(&quiet, "quiet", false, "no progress bar (a line per held-out evaluation instead)")
	return cmd
}

// runProbe prints train.ProbeGoal of the prior at path over the ALFWorld
// training games' own goals.
func runProbe(cmd *cobra.Command, o train.RunOptions, path string) error {
	ctx := cmd.Context()
	lm, err := models.Load(ctx, path, models.Options{Threads: 1, Sequences: 1, ContextLength: 4096})
	if err != nil {
		return fmt.Errorf("train: --probe: %w", err)
	}
	defer lm.Close()
	prompt := decoder.PromptOptions{}.WithKind(lm.Info().Prompt)
	if !prompt.Compact {
		return fmt.Errorf("train: --probe: %s was not trained on a compact prompt (nesy train's)", path)
	}
	demos, _, err := train.ALFWorldDemos(ctx, o.ALFWorld, train.DemoOptions{Prompt: prompt, Limit: o.Limit})
	if err != nil {
		return err
	}
	r, err := train.ProbeGoal(ctx, lm, demos)
	if err != nil {
		return err
	}
	if r.Decisions == 0 {
		return errors.New("train: --probe: no first take with objects of two types at the place")
	}
	pct := func(n float64) float64 { return 100 * n / float64(r.Decisions) }
	fmt.Fprintf(cmd.OutOrStdout(), "%s on ALFWorld valid_train (training split), first take of %d games whose place holds two or more object types:\n"+
		"  takes the goal's object type: %d (%.1f%%; uniform choice %.1f%%)\n"+
		"  goal's object type swapped in the prompt, takes the new type: %d (%.1f%%; uniform choice %.1f%%)\n",
		path, r.Decisions, r.Right, pct(float64(r.Right)), pct(r.Chance), r.Follows, pct(float64(r.Follows)), pct(r.FollowChance))
	return nil
}

// trainBar shows the steps with the loss and an ETA.
type trainBar struct {
	w     io.Writer
	bar   *progressbar.ProgressBar
	quiet bool
	tty   bool
	// lastHeld is the held-out loss last logged by a quiet run.
	lastHeld float64
}

func newTrainBar(w io.Writer, steps int, quiet bool) *trainBar {
	b := &trainBar{w: w, quiet: quiet}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		b.tty = true
	}
	if !quiet {
		b.bar = progressbar.NewOptions(steps,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("train"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(500*time.Millisecond),
			progressbar.OptionShowElapsedTimeOnFinish(),
		)
	}
	return b
}

func (b *trainBar) update(p train.Progress) {
	desc := fmt.Sprintf("train loss %.3f held-out %.3f", p.Loss, p.HeldOut)
	if b.quiet {
		// Quiet runs still log each held-out evaluation, one line each.
		if !math.IsNaN(p.HeldOut) && p.HeldOut != b.lastHeld {
			b.lastHeld = p.HeldOut
			fmt.Fprintf(b.w, "nesy train: step %d/%d: %s\n", p.Step, p.Steps, desc)
		}
		return
	}
	if !b.tty && (p.Step%10 == 0 || p.Step == p.Steps) {
		// Logs get a line every ten steps; the bar below renders too.
		fmt.Fprintf(b.w, "\nnesy train: step %d/%d: %s\n", p.Step, p.Steps, desc)
	}
	b.bar.Describe(desc)
	b.bar.Set(p.Step)
}

func (b *trainBar) finish(done bool) {
	if b.bar == nil {
		return
	}
	if done {
		b.bar.Finish()
	} else {
		b.bar.Exit() // a failed or interrupted run does not show 100%
	}
	fmt.Fprintln(b.w)
}
