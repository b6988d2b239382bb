package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/nesy-dev/nesy/bench"
	"github.com/nesy-dev/nesy/constraint"
	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/explore"
	"github.com/nesy-dev/nesy/mcts"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
	"github.com/nesy-dev/nesy/planner"
)

// tinyModel is the --model value that stands for the default tiny model.
const tinyModel = "tiny"

func newBenchCmd() *cobra.Command {
	var (
		envName, suite, method, mode, model, out, shard           string
		datasets, heuristic, tokenizer                            string
		seconds, rolloutTemp                                      float64
		limit, simulations, threads, maxActions, maxTokens, batch int
		sequences                                                 int
		exploreSteps, maxSteps, rollout                           int
		seed                                                      uint64
		allSkills, omitStatic, quiet, partial, noRevisit          bool
		noCollapse, fullLogits                                    bool
		perception, flash, split, end                             string
		searchMemory, deltaRule                                   string
	)
	cmd := &cobra.Command{
		Use:   "bench --env alfworld|virtualhome|blocksworld --method X [--model M] --out DIR",
		Short: "Run a benchmark suite with a planning method and a model",
		Long: `bench runs the tasks of an environment's suite with a method and a model and
writes DIR/tasks.jsonl (one JSON object per task), DIR/summary.json,
DIR/report.md (success in the layout of the paper's Table 2, by task type,
failure stages, why planning ended (goal, time, memory, ...), cost) and the plots
DIR/success.svg and DIR/tokens.svg.

Methods: direct (one free command per turn with feedback), greedy, cgreedy
(constrained greedy), mcts, cmcts (constrained MCTS), thinking (Qwen thinking
mode, then greedy). Modes: two-phase (explore, then plan from the grounded
state; the default) and true-state (plan from the true initial state).

Runs resume: tasks already in DIR/tasks.jsonl are skipped, and an
interrupted run (Ctrl-C) keeps every finished task. --shard i/n runs the tasks
whose position modulo n is i (0 <= i < n), so a suite can be split across
machines; "nesy bench report" merges the folders' tables.

--suite: all (default), types (the first task of each type), or
comma-separated prefixes of task IDs or types.

--model takes a GGUF path, an Ollama model name, "prior" (the default when
--model is omitted): nesy's trained planning prior, embedded in the binary
(see "nesy train"), or "tiny": a random-weight
qwen3 model generated once into the user cache folder, with the real Qwen3
vocabulary when a tokenizer.json is found (--tokenizer, else
$NESY_SHARED/tokenizers/qwen3/tokenizer.json or ../shared/tokenizers/...),
else a small synthetic one; or "uniform": the ablation prior, zero logits
(every token the constraint allows alike) over the tiny model's vocabulary,
with no forward pass, which says how much a model's prior adds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if envName == "" || method == "" || out == "" {
				return errors.New("bench: --env, --method and --out are required")
			}
			sh, err := bench.ParseShard(shard)
			if err != nil {
				return err
			}
			memBytes, err := parseSearchMemory(searchMemory)
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			if err := models.CheckDeltaRule(deltaRule); err != nil {
				return fmt.Errorf("bench: --delta-rule: %w", err)
			}
			endPolicy, err := constraint.ParseEndPolicy(end)
			if err != nil {
				return fmt.Errorf("bench: --end: %w", err)
			}
			ds, err := datasetsDir(datasets)
			if err != nil {
				return err
			}
			env, err := envs.NewWith(envName, ds, envs.Options{Partial: partial, Split: split})
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			ctx := cmd.Context()
			mopts := models.Options{Threads: threads, FlashAttention: flash, DeltaRule: deltaRule, FullLogits: fullLogits,
				Sequences: sequences, FitSequences: sequences == 0}
			if sequences == 0 && (method == bench.MethodMCTS || method == bench.MethodCMCTS) {
				mopts.Sequences = mcts.SuggestedSequences // forks of recently evaluated nodes stay cached
			}
			lm, name, err := loadLM(ctx, cmd.ErrOrStderr(), model, tokenizer, seed, mopts)
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			defer lm.Close()
			if !cmd.Flags().Changed("no-revisit") {
				noRevisit = planner.DefaultNoRevisit(planner.Method(method))
			}
			cfg := bench.Config{
				Env: env, Suite: suite, Method: method, Mode: mode, Model: lm, ModelName: name,
				Out: out, Shard: sh, Limit: limit, Seconds: seconds, Simulations: simulations, SearchMemory: memBytes, Batch: batch, NoCollapse: noCollapse, Rollout: rollout,
				RolloutTemperature: rolloutTemp, Heuristic: heuristic, Seed: seed, MaxActions: maxActions, MaxTokens: maxTokens, MaxSteps: maxSteps,
				OmitStatic: omitStatic, NoRevisit: noRevisit, End: endPolicy,
				Explore: explore.Options{MaxSteps: exploreSteps, AllSkills: allSkills, Perception: perception},
			}
			pr := newProgress(cmd.ErrOrStderr(), fmt.Sprintf("%s %s", method, envName), quiet)
			cfg.Progress = pr.update
			sum, err := bench.Run(ctx, cfg)
			pr.finish()
			if sum != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s (%s): %d/%d tasks succeeded (%.1f%%); report: %s\n",
					method, envName, cfg.Mode, sum.Successes, sum.Tasks, 100*sum.SuccessRate, filepath.Join(out, bench.ReportFile))
			}
			if err != nil && ctx.Err() != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "bench: interrupted; run the same command again to resume")
				return exitError{130}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&envName, "env", "", "environment: alfworld, virtualhome or blocksworld")
	f.StringVar(&suite, "suite", "all", "tasks: all, types, or comma-separated prefixes of task IDs or types")
	f.StringVar(&method, "method", "", "method: "+strings.Join(bench.Methods, ", "))
	f.StringVar(&mode, "mode", bench.ModeTwoPhase, "mode: two-phase or true-state")
	f.StringVar(&model, "model", "", `GGUF path, Ollama model name, "prior" (the embedded trained prior; the default), "tiny" (generated random-weight qwen3) or "uniform" (zero logits: every allowed token alike)`)
	f.StringVar(&out, "out", "", "output folder (resumed when it holds the same run)")
	f.StringVar(&shard, "shard", "", "run shard i/n of the tasks (0 <= i < n)")
	f.StringVar(&datasets, "datasets", "", "datasets folder (default $NESY_SHARED/datasets, else ../shared/datasets)")
	f.StringVar(&heuristic, "heuristic", "", "search leaf heuristic (ff, lmcut, goalcount, mix(...); default ff)")
	f.StringVar(&tokenizer, "tokenizer", "", "tokenizer.json for --model tiny or uniform")
	f.Float64Var(&seconds, "seconds", bench.DefaultSeconds, "planning budget per task in seconds")
	f.IntVar(&limit, "limit", 0, "run only the first N tasks of the suite (before sharding)")
	f.IntVar(&simulations, "simulations", 0, "bound each search to N simulations (0: time only)")
	f.StringVar(&searchMemory, "search-memory", "", searchMemoryUsage)
	f.IntVar(&batch, "batch", 0, "leaves a search evaluates per model call (0: 16); simulation counts compare priors best at 1")
	f.IntVar(&rollout, "rollout", 0, "searches: continue every evaluated leaf by constrained greedy decoding for up to N actions and value it by where that ends (0: value leaves directly)")
	f.Float64Var(&rolloutTemp, "rollout-temp", 0, "searches with --rollout: sample each rollout token at this temperature instead of taking the most likely (0: greedy)")
	f.BoolVar(&noCollapse, "no-collapse", false, "searches: every token its own node, also where the constraint allows only one (forced chains are otherwise one edge)")
	f.IntVar(&threads, "threads", 0, "CPU threads for the model (0: all)")
	f.IntVar(&sequences, "sequences", 0, sequencesUsage)
	f.StringVar(&deltaRule, "delta-rule", "auto", deltaRuleUsage)
	f.BoolVar(&fullLogits, "full-logits", false, fullLogitsUsage)
	f.StringVar(&flash, "flash-attention", "auto", "flash attention: auto (on where every layer runs on a GPU, or the KV cache is quantized; off on the CPU, where it slows long prompts), on or off")
	f.IntVar(&maxActions, "max-actions", bench.DefaultMaxActions, "longest plan")
	f.IntVar(&maxTokens, "max-tokens", bench.DefaultMaxTokens, "most tokens in a decoded plan (greedy, cgreedy; a goal trace's tokens count)")
	f.IntVar(&maxSteps, "max-steps", bench.DefaultMaxSteps, "direct policy: most commands per task")
	f.IntVar(&exploreSteps, "explore-steps", explore.DefaultMaxSteps, "two-phase: exploration budget in skills")
	f.Uint64Var(&seed, "seed", 0, "seed for sampling, search tie-breaking and --model tiny")
	f.StringVar(&perception, "perception", explore.PerceiveText, "two-phase: how Phase I reads observations: text (the deterministic reader of the env's text templates) or model (the model writes facts by constrained decoding)")
	f.BoolVar(&allSkills, "all-skills", false, "two-phase: offer every valid exploration skill, not only informative ones")
	f.StringVar(&split, "split", "", "alfworld: valid_unseen (default; evaluation only) or valid_train (the training games: tune settings here); virtualhome: test (evaluation only) or train (nesy train --virtualhome learns from it), default all 338; blocksworld: planbench (default; evaluation only) or heldout (200 generated five-block problems no training run draws: for choosing between priors)")
	f.BoolVar(&partial, "partial", false, "virtualhome: hide the contents of closed containers until opened (reports say so)")
	f.BoolVar(&omitStatic, "omit-static", false, "leave static facts out of the planning prompt")
	f.StringVar(&end, "end", "any", "when a constrained plan (cgreedy, cmcts) may end: any (the model decides) or goal (only once the goal holds; the plan runs on until then or --max-actions)")
	f.BoolVar(&noRevisit, "no-revisit", false, "never take an action that returns to a state the plan has been in (cgreedy, cmcts; default: on for cgreedy, off otherwise)")
	f.BoolVar(&quiet, "quiet", false, "no progress output")
	cmd.AddCommand(newBenchReportCmd(), newBenchCompareCmd())
	return cmd
}

func newBenchReportCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "report [--out DIR] RUN...",
		Short: "Rewrite run reports and combine runs into one table (method x environment)",
		Long: `report rewrites each run folder's summary.json, report.md and plots from its
tasks.jsonl, and writes a combined report.md (the paper's Table 2 layout:
one row per method and mode, one column per environment) and success.svg to
--out (default: the current folder).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, r := range args {
				if same, _ := samePath(r, out); same {
					return fmt.Errorf("bench report: --out %s is a run folder; the combined report would replace its own", out)
				}
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("bench report: %w", err)
			}
			sums, err := bench.WriteTable(out, args)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), bench.Table(sums))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", ".", "folder for the combined report.md and success.svg")
	return cmd
}

func newBenchCompareCmd() *cobra.Command {
	var (
		asJSON    bool
		resamples int
		seed      uint64
	)
	cmd := &cobra.Command{
		Use:   "compare [--json] A B",
		Short: "Compare two runs: McNemar's exact test and a task-cluster bootstrap interval",
		Long: `compare pairs the tasks of two run folders (or tasks.jsonl files) and reports
both success rates, the discordant pairs, McNemar's exact two-sided p-value
(binomial on the discordant pairs) and a 95% bootstrap interval of the
difference A - B that resamples task clusters (ALFWorld task folders, with
their trials resampled within; VirtualHome task folders), so correlated trials
do not narrow it.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := readRunRecords(args[0])
			if err != nil {
				return err
			}
			b, err := readRunRecords(args[1])
			if err != nil {
				return err
			}
			c := bench.Compare(a, b, resamples, seed)
			c.A, c.B = args[0], args[1]
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(c)
			}
			fmt.Fprintf(w, "A: %s\nB: %s\n", c.A, c.B)
			fmt.Fprintf(w, "paired tasks: %d in %d clusters (only in A: %d, only in B: %d)\n", c.Paired, c.Clusters, c.OnlyA, c.OnlyB)
			fmt.Fprintf(w, "success: A %.1f%% (%d), B %.1f%% (%d), difference A-B %+.1f points\n",
				100*c.RateA, c.SuccessA, 100*c.RateB, c.SuccessB, 100*c.Diff)
			fmt.Fprintf(w, "both %d, neither %d, only A %d, only B %d\n", c.Both, c.Neither, c.AOnly, c.BOnly)
			fmt.Fprintf(w, "McNemar exact p = %.4g\n", c.PValue)
			fmt.Fprintf(w, "bootstrap 95%% interval of A-B (clusters, %d resamples): [%+.1f, %+.1f] points\n",
				c.Resamples, 100*c.CI95[0], 100*c.CI95[1])
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the comparison as JSON")
	cmd.Flags().IntVar(&resamples, "resamples", bench.DefaultResamples, "bootstrap resamples")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "bootstrap seed")
	return cmd
}

// samePath reports whether a and b name the same folder.
func samePath(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}

// readRunRecords reads a run folder's tasks.jsonl, or a tasks.jsonl file.
func readRunRecords(path string) ([]bench.Record, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("bench compare: %w", err)
	}
	if st.IsDir() {
		path = filepath.Join(path, bench.TasksFile)
	}
	recs, err := bench.ReadRecords(path)
	if err == nil && len(recs) == 0 {
		err = fmt.Errorf("bench compare: %s holds no task records", path)
	}
	return recs, err
}

// datasetsDir finds the datasets folder: the flag, $NESY_SHARED/datasets,
// or ../shared/datasets from the working directory or one of its parents.
func datasetsDir(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	return sharedPath("datasets")
}

// sharedPath finds rel under $NESY_SHARED, or under a folder "shared" beside
// the working directory or one of its parents.
func sharedPath(rel string) (string, error) {
	if d := os.Getenv("NESY_SHARED"); d != "" {
		p := filepath.Join(d, rel)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("bench: %w (from NESY_SHARED)", err)
		}
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("tiny model: %w", err)
	}
	for {
		p := filepath.Join(filepath.Dir(dir), "shared", rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("bench: no shared/%s found (set NESY_SHARED or pass the path)", rel)
		}
		dir = parent
	}
}

// ensureTinyModel returns the default tiny model's path, writing it first
// if the cache does not hold it: gguf.Default(qwen3) weights drawn from
// seed, with the Qwen3 vocabulary when a tokenizer.json is found.
func ensureTinyModel(log io.Writer, tokenizer string, seed uint64) (string, error) {
	if tokenizer == "" {
		if p, err := sharedPath(filepath.Join("tokenizers", "qwen3", "tokenizer.json")); err == nil {
			tokenizer = p
		}
	}
	spec := gguf.Default(gguf.ArchQwen3)
	spec.Seed = seed
	vocab := "synthetic"
	if tokenizer != "" {
		st, err := os.Stat(tokenizer)
		if err != nil {
			return "", fmt.Errorf("tiny model: tokenizer: %w", err)
		}
		vocab = fmt.Sprintf("hf%x", st.Size())
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "nesy")
	path := filepath.Join(dir, fmt.Sprintf("tiny-qwen3-%s-seed%d.gguf", vocab, seed))
	if models.CheckGGUF(path) == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("tiny model: %w", err)
	}
	if tokenizer != "" {
		t, err := gguf.FromHF(tokenizer)
		if err != nil {
			return "", fmt.Errorf("tiny model: %w", err)
		}
		spec.Tokenizer = t
	}
	fmt.Fprintf(log, "nesy: writing the tiny model %s (%s vocabulary)\n", path, map[bool]string{true: tokenizer, false: "synthetic"}[tokenizer != ""])
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if err := gguf.Write(tmp, spec); err != nil {
		return "", fmt.Errorf("tiny model: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("tiny model: %w", err)
	}
	return path, nil
}

// progress shows a run's progress: a bar with the ETA on a terminal, one
// line per task otherwise.
type progress struct {
	w     io.Writer
	desc  string
	quiet bool
	tty   bool
	bar   *progressbar.ProgressBar
	start time.Time
}

func newProgress(w io.Writer, desc string, quiet bool) *progress {
	p := &progress{w: w, desc: desc, quiet: quiet, start: time.Now()}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	return p
}

func (p *progress) update(pr bench.Progress) {
	if p.quiet {
		return
	}
	label := fmt.Sprintf("%s %d/%d, %d ok", p.desc, pr.Done, pr.Total, pr.Successes)
	if !p.tty {
		if pr.Last == nil {
			fmt.Fprintf(p.w, "bench: %d tasks, %d already done\n", pr.Total, pr.Resumed)
			return
		}
		status := "ok"
		if !pr.Last.Success {
			status = "failed (" + pr.Last.FailureStage + ")"
		}
		fmt.Fprintf(p.w, "bench: [%d/%d] %s: %s in %.1fs (%d ok so far)\n", pr.Done, pr.Total, pr.Last.Task, status, pr.Last.Seconds, pr.Successes)
		return
	}
	if p.bar == nil {
		// The bar counts this run's tasks only, so the ETA is not skewed
		// by tasks resumed from an earlier run.
		p.bar = progressbar.NewOptions(pr.Total-pr.Resumed,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(label),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionSetRenderBlankState(true),
		)
	}
	p.bar.Describe(label)
	p.bar.Set(pr.Done - pr.Resumed)
}

func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}
