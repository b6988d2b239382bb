package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nesy-dev/nesy/constraint"
	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/mcts"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/planner"
)

// planJSON is the --json output of nesy plan (the CLI contract's fields
// first).
type planJSON struct {
	Plan            []string `json:"plan"`
	Valid           bool     `json:"valid"`
	GoalReached     bool     `json:"goal_reached"`
	GeneratedTokens int      `json:"generated_tokens"`
	EvaluatedTokens int64    `json:"evaluated_tokens"`
	ModelCalls      int64    `json:"model_calls"`
	Seconds         float64  `json:"seconds"`

	Method         string               `json:"method"`
	Model          string               `json:"model,omitempty"`
	Actions        []string             `json:"actions"` // the plan in the lexicon's words
	PromptTokens   int                  `json:"prompt_tokens"`
	ThinkingTokens int                  `json:"thinking_tokens,omitempty"`
	StopReason     string               `json:"stop_reason,omitempty"`
	FirstInvalid   *decoder.InvalidStep `json:"first_invalid,omitempty"`
	StepsWritten   int                  `json:"steps_written,omitempty"`
	GoalError      string               `json:"goal_error,omitempty"`
	Error          string               `json:"error,omitempty"`
	Text           string               `json:"text,omitempty"` // the model's answer as written (greedy, cgreedy)
	Mask           *maskJSON            `json:"mask,omitempty"`
	Search         *mcts.Stats          `json:"search,omitempty"`
	States         [][]string           `json:"states,omitempty"` // with --trace: the facts of each state visited
}

// maskJSON is the constraint's cost in a cgreedy decode.
type maskJSON struct {
	Steps      int     `json:"steps"`
	Seconds    float64 `json:"seconds"`
	MaxSeconds float64 `json:"max_seconds"`
	// Histogram counts steps by duration: <1us, <10us, <100us, <1ms, more.
	Histogram []int `json:"histogram"`
}

// planFlags are nesy plan's options.
type planFlags struct {
	domain, problem, model, method, lexicon string
	seconds, rolloutTemp                    float64
	simulations, batch, rollout             int
	seed                                    uint64
	asJSON, trace, think, verbose           bool
	noCollapse                              bool
	temperature, topP                       float64
	topK, maxActions, maxTokens             int
	end, endMarker, heuristic, flash        string
	searchMemory, deltaRule                 string
	stopAtGoal, noRevisit, fullLogits       bool
	threads, ctx, gpuLayers, sequences      int
}

func newPlanCmd() *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan --domain D --problem P --model M [--method greedy|cgreedy|mcts|cmcts|thinking] [--json]",
		Short: "Generate a plan with a language model, constrained to executable actions",
		Long: `Plan asks a language model for a plan for a PDDL task and re-validates it.

Methods:
  greedy   the model writes freely (greedy, or sampled with --temperature); the
           output is read line by line and the first invalid step is reported
  cgreedy  constrained decoding: every token continues an action applicable in
           the current state, so the plan is executable by construction
  mcts     token-level tree search over the model's whole vocabulary
  cmcts    token-level tree search over executable prefixes (the default)
  thinking a thinking model (Qwen 3) thinks first, then writes freely

The searches use the paper's settings (width 16, c 2.5, base 10, batch 16,
h_FF leaf values, lambda 0.1): the same as POST /v1/plan and nesy bench, all
three running package planner.

--model takes a GGUF file, the name of a model pulled into the local Ollama
store (e.g. qwen3:4b), "prior" (the default when --model is omitted): nesy's
trained planning prior, embedded in the binary (see "nesy train"), or
"tiny": a random-weight qwen3 model generated once
into the user cache folder (with the real Qwen3 vocabulary when
../shared/tokenizers is found), which needs no download, or "uniform": zero
logits over the tiny model's vocabulary (every token the constraint allows
alike; no forward pass), the ablation that says how much a model's prior adds.

--problem may be an ALFWorld game.tw-pddl file; without
--domain its embedded domain, TextWorld's command forms and object names, and
its goal in words are used. Other domains use the built-in lexicon of the
domain (ALFWorld, VirtualHome, Blocksworld) or the default "name arg1 arg2"
form; --lexicon gives one as JSON (see package lexicon).

The plan is printed one action per line in PDDL syntax, as nesy validate reads
it (a summary goes to stderr), or with --json as
{"plan":[...],"valid":bool,"goal_reached":bool,"generated_tokens":N,
"evaluated_tokens":N,"model_calls":N,"seconds":x,...}.

Exit status: 0 when the plan is valid and reaches the goal, 1 when it is
invalid or does not reach the goal, 2 when the input or model cannot be read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPlan(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.domain, "domain", "", "PDDL domain file (optional when --problem is a game.tw-pddl file)")
	fl.StringVar(&f.problem, "problem", "", "PDDL problem file, or an ALFWorld game.tw-pddl file")
	fl.StringVar(&f.model, "model", "", `GGUF file, Ollama model name, "prior" (the embedded trained prior; the default), "tiny" (a generated random-weight qwen3, cached) or "uniform" (zero logits: every allowed token alike)`)
	fl.StringVar(&f.method, "method", string(planner.DefaultMethod), planner.Names(planner.Methods()))
	fl.StringVar(&f.lexicon, "lexicon", "", "lexicon JSON file (action and object text)")
	fl.Float64Var(&f.seconds, "seconds", 0, "time budget in seconds (0: none for greedy/cgreedy, 60 for the searches)")
	fl.IntVar(&f.simulations, "simulations", 0, "simulation budget of mcts/cmcts (0: none)")
	fl.StringVar(&f.searchMemory, "search-memory", "", searchMemoryUsage)
	fl.IntVar(&f.batch, "batch", 0, "leaves mcts/cmcts evaluate per model call (0: 16)")
	fl.IntVar(&f.rollout, "rollout", 0, "mcts/cmcts: continue every evaluated leaf by constrained greedy decoding for up to N actions and value it by where that ends (0: value leaves directly)")
	fl.Float64Var(&f.rolloutTemp, "rollout-temp", 0, "mcts/cmcts with --rollout: sample each rollout token at this temperature instead of taking the most likely (0: greedy)")
	fl.BoolVar(&f.noCollapse, "no-collapse", false, "mcts/cmcts: every token its own node, also where the constraint allows only one")
	fl.Uint64Var(&f.seed, "seed", 0, "sampling and search seed")
	fl.BoolVar(&f.asJSON, "json", false, "print the result as JSON")
	fl.BoolVar(&f.trace, "trace", false, "with --json, include the facts of every state the plan visits")
	fl.Float64Var(&f.temperature, "temperature", 0, "sampling temperature for greedy/cgreedy (0: greedy)")
	fl.Float64Var(&f.topP, "top-p", 0, "nucleus sampling mass (0 or 1: off)")
	fl.IntVar(&f.topK, "top-k", 0, "sample among the k most likely tokens (0: off)")
	fl.IntVar(&f.maxActions, "max-actions", 100, "most actions in a plan (0: no limit)")
	fl.IntVar(&f.maxTokens, "max-tokens", 0, "most tokens in the answer, greedy/cgreedy (0: what the context leaves)")
	fl.StringVar(&f.end, "end", "any", "when the plan may end: any (the model decides) or goal (only once the goal holds)")
	fl.StringVar(&f.endMarker, "end-marker", "", `a line the model writes to end the plan, e.g. "done" (default: the end-of-turn token only)`)
	fl.BoolVar(&f.stopAtGoal, "stop-at-goal", true, "end the plan as soon as the goal holds")
	fl.BoolVar(&f.noRevisit, "no-revisit", false, "never take an action that returns to a state the plan has been in (cgreedy, cmcts; default: on for cgreedy, off otherwise)")
	fl.StringVar(&f.heuristic, "heuristic", "", `mcts/cmcts leaf heuristic, e.g. ff, lmcut, goalcount, "mix(0.5*ff+0.5*lmcut)" (default ff)`)
	fl.BoolVar(&f.think, "think", false, "let a Qwen model think before answering (greedy/cgreedy)")
	fl.IntVar(&f.threads, "threads", 0, "CPU threads (0: all)")
	fl.IntVar(&f.sequences, "sequences", 0, sequencesUsage)
	fl.IntVar(&f.ctx, "ctx", 0, "context length (0: the model's, at most 8192)")
	fl.IntVar(&f.gpuLayers, "gpu-layers", 0, "layers on the GPU (0: all when one is found, -1: none)")
	fl.StringVar(&f.deltaRule, "delta-rule", "auto", deltaRuleUsage)
	fl.BoolVar(&f.fullLogits, "full-logits", false, fullLogitsUsage)
	fl.StringVar(&f.flash, "flash-attention", "auto", "flash attention: auto (on where every layer runs on a GPU, or the KV cache is quantized; off on the CPU, where it slows long prompts), on or off")
	fl.BoolVar(&f.verbose, "verbose", false, "log model loading and engine messages")
	return cmd
}

// planTask is the task to plan for, with its text.
type planTask struct {
	task *pddl.Task
	lex  *lexicon.Bound
	goal string // the goal in words, when the environment has it
}

func runPlan(cmd *cobra.Command, f *planFlags) error {
	out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if f.model == "" {
		f.model = defaultModel
	}
	res := planJSON{Method: f.method, Model: f.model, Plan: []string{}, Actions: []string{}}
	report := func(code int) error {
		if f.asJSON {
			writeJSON(out, res)
		}
		return exitCode(code)
	}
	inputError := func(err error) error {
		printInputError(errw, "plan", err)
		res.Error = err.Error()
		return report(2)
	}

	if err := f.check(); err != nil {
		return inputError(err)
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	pt, err := loadPlanTask(ctx, f)
	if err != nil {
		return inputError(err)
	}
	logLevel := slog.LevelWarn
	if f.verbose {
		logLevel = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: logLevel}))
	// ggml's backend logs through the default logger while loading.
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(logger)
	method, _ := planner.ParseMethod(f.method, false) // checked above
	if !cmd.Flags().Changed("no-revisit") {
		f.noRevisit = planner.DefaultNoRevisit(method)
	}
	mopts := models.Options{Threads: f.threads, ContextLength: f.ctx, GPULayers: f.gpuLayers, FlashAttention: f.flash, DeltaRule: f.deltaRule, FullLogits: f.fullLogits, Logger: logger,
		Sequences: planner.SuggestedSequences(method), FitSequences: f.sequences == 0}
	if f.sequences > 0 {
		mopts.Sequences = f.sequences
	}
	lm, _, err := loadLM(ctx, errw, f.model, "", f.seed, mopts)
	if err != nil {
		return inputError(fmt.Errorf("loading the model: %w", err))
	}
	defer lm.Close()

	end, _ := constraint.ParseEndPolicy(f.end)
	memBytes, _ := parseSearchMemory(f.searchMemory) // checked above
	opts := planner.Options{
		Budgets: planner.Budgets{Time: time.Duration(f.seconds * float64(time.Second)), Simulations: f.simulations,
			GeneratedTokens: f.maxTokens, MaxActions: f.maxActions, MaxNodes: mcts.NodesFor(memBytes)},
		Seed:      f.seed,
		Search:    mcts.Options{Batch: f.batch, NoCollapse: f.noCollapse, Rollout: f.rollout, RolloutTemperature: f.rolloutTemp},
		Sampling:  decoder.Sampling{Temperature: f.temperature, TopK: f.topK, TopP: f.topP},
		Heuristic: f.heuristic, End: end, EndMarker: f.endMarker, KeepGoing: !f.stopAtGoal, NoRevisit: f.noRevisit, Think: f.think,
	}
	if f.maxActions == 0 {
		opts.MaxActions = -1 // the flag's 0 means no limit
	}
	r, err := planner.Run(ctx, lm, planner.Task{Lexicon: pt.lex, Goal: pt.goal}, method, opts)
	if r == nil {
		return inputError(err)
	}
	if err != nil {
		fmt.Fprintf(errw, "nesy plan: %s stopped: %v\n", method, err)
		res.Error = err.Error()
	}
	res.Method = string(r.Method)
	res.Plan, res.Actions = r.Lines, r.Texts
	res.Valid, res.GoalReached, res.GoalError = r.Valid, r.GoalReached, r.Validation.GoalError
	if r.Validation.Error != "" && r.FirstInvalid == nil && res.Error == "" {
		res.Error = r.Validation.Error
	}
	res.GeneratedTokens, res.ThinkingTokens, res.PromptTokens = int(r.GeneratedTokens), int(r.ThinkingTokens), int(r.PromptTokens)
	res.EvaluatedTokens, res.ModelCalls, res.Seconds = r.EvaluatedTokens, r.ModelCalls, r.Seconds
	res.StopReason, res.FirstInvalid, res.StepsWritten, res.Text = string(r.Stop), r.FirstInvalid, r.StepsWritten, r.Text
	res.Search = r.Search
	if d := r.Decode; d != nil && d.Constrained {
		res.Mask = &maskJSON{Steps: d.MaskSteps, Seconds: d.MaskSeconds, MaxSeconds: d.MaskMaxSeconds, Histogram: d.MaskHistogram[:]}
	}
	states := r.Validation.States
	if res.Plan == nil {
		res.Plan, res.Actions = []string{}, []string{}
	}
	if f.trace {
		for _, s := range states {
			res.States = append(res.States, strings.Split(strings.TrimSpace(pt.task.FormatState(s, false)), "\n"))
		}
	}

	if !f.asJSON {
		for _, l := range res.Plan {
			fmt.Fprintln(out, l)
		}
	}
	summarize(errw, &res)
	if res.Valid && res.GoalReached {
		return report(0)
	}
	return report(1)
}

// summarize writes a one-line verdict and the accounting to w.
func summarize(w io.Writer, r *planJSON) {
	switch {
	case r.FirstInvalid != nil:
		fmt.Fprintf(w, "plan invalid at step %d (%q): %s\n", r.FirstInvalid.Step+1, r.FirstInvalid.Text, r.FirstInvalid.Reason)
	case !r.Valid:
		fmt.Fprintf(w, "plan invalid: %s\n", r.Error)
	case !r.GoalReached:
		fmt.Fprintf(w, "plan valid (%d actions) but the goal is not reached (%s): %s\n", len(r.Plan), r.StopReason, r.GoalError)
	default:
		fmt.Fprintf(w, "plan valid, goal reached (%d actions)\n", len(r.Plan))
	}
	fmt.Fprintf(w, "%s: %d prompt tokens, %d generated, %d evaluated, %d model calls, %.2f s\n",
		r.Method, r.PromptTokens, r.GeneratedTokens, r.EvaluatedTokens, r.ModelCalls, r.Seconds)
}

func (f *planFlags) check() error {
	switch {
	case f.problem == "":
		return errors.New("--problem is required")
	case f.seconds < 0 || f.simulations < 0 || f.batch < 0 || f.rollout < 0 || f.rolloutTemp < 0 || f.maxActions < 0 || f.maxTokens < 0:
		return errors.New("--seconds, --simulations, --batch, --rollout, --rollout-temp, --max-actions and --max-tokens must not be negative")
	case strings.Contains(f.endMarker, "\n"):
		return errors.New("--end-marker must be one line")
	}
	if _, err := parseSearchMemory(f.searchMemory); err != nil {
		return err
	}
	if err := models.CheckDeltaRule(f.deltaRule); err != nil {
		return fmt.Errorf("--delta-rule: %w", err)
	}
	m, err := planner.ParseMethod(f.method, false)
	if err != nil {
		return fmt.Errorf("--method: %w", err)
	}
	if m.Search() && f.think {
		return errors.New("--think works with greedy and cgreedy only")
	}
	if _, err := constraint.ParseEndPolicy(f.end); err != nil {
		return fmt.Errorf("--end: %w", err)
	}
	return (decoder.Sampling{Temperature: f.temperature, TopK: f.topK, TopP: f.topP}).Check()
}

// loadPlanTask grounds the task and binds its lexicon: an ALFWorld game
// through package envs (TextWorld's text and goal), anything else through
// pddl.LoadFiles and the built-in lexicon of its domain, or --lexicon.
func loadPlanTask(ctx context.Context, f *planFlags) (*planTask, error) {
	var pt planTask
	if f.domain == "" && strings.HasSuffix(f.problem, ".tw-pddl") {
		ep, err := envs.OpenALFWorldGame(ctx, f.problem)
		if err != nil {
			return nil, err
		}
		pt.task, pt.lex, pt.goal = ep.Task(), ep.Lexicon(), ep.Goal()
	} else {
		task, _, err := pddl.LoadFiles(f.domain, f.problem)
		if err != nil {
			return nil, err
		}
		pt.task = task
	}
	if f.lexicon != "" {
		data, err := os.ReadFile(f.lexicon)
		if err != nil {
			return nil, fmt.Errorf("reading the lexicon: %w", err)
		}
		l, err := lexicon.Parse(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.lexicon, err)
		}
		if pt.lex, err = l.Bind(pt.task); err != nil {
			return nil, fmt.Errorf("%s: %w", f.lexicon, err)
		}
	} else if pt.lex == nil {
		var err error
		if pt.lex, err = lexicon.ForTask(pt.task).Bind(pt.task); err != nil {
			return nil, fmt.Errorf("built-in lexicon: %w", err)
		}
	}
	return &pt, nil
}
