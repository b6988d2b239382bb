package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"sort"
	"strings"
	"time"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/explore"
	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/mcts"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/pddl/heuristic"
	"github.com/nesy-dev/nesy/planner"
)

// runner runs the tasks of one Config.
type runner struct {
	cfg Config
	dec *decoder.Decoder
}

func newRunner(cfg Config) (*runner, error) {
	dec, err := decoder.New(cfg.Model, cfg.Index)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	cfg.Index = dec.Index()
	cfg.Explore.Dialog.Index = dec.Index()
	if cfg.Explore.Dialog.Seed == 0 {
		cfg.Explore.Dialog.Seed = cfg.Seed
	}
	// Rendered views go to models that see images; a text-only model gets
	// the text (its chat template would leave the images out anyway).
	cfg.Explore.Images = cfg.Env.Capabilities().Images && cfg.Model.Info().Vision
	return &runner{cfg: cfg, dec: dec}, nil
}

// outcome is what Phase II produced: a plan in the planning task's terms.
type outcome struct {
	lines, texts []string
	// invalid is the first step of the plan that is not an applicable
	// action of its task ("" when none).
	invalid string
	stop    string
	usage   explore.Usage
	think   int
	sims    int
	seconds float64
}

// task runs one task and returns its record; failures are recorded, not
// returned.
func (r *runner) task(ctx context.Context, info envs.TaskInfo) (rec Record) {
	cfg := &r.cfg
	rec = Record{Task: info.ID, Type: info.Type, Cluster: ClusterOf(cfg.Env.Name(), info),
		Env: cfg.Env.Name(), Method: cfg.Method, Mode: cfg.Mode, Seed: cfg.Seed}
	start := time.Now()
	defer func() {
		rec.Seconds = elapsed(start)
		if rec.Plan == nil {
			rec.Plan = []string{} // "plan": [] rather than null
		}
		if rec.Unsolvable && !rec.Success && rec.FailureStage != StageError {
			rec.FailureStage = StageUnsolvable
			rec.Reason = "the goal is unreachable from the true initial state (" + rec.Reason + ")"
		}
	}()
	fail := func(err error) Record {
		rec.FailureStage, rec.Error = StageError, err.Error()
		return rec
	}
	ep, err := cfg.Env.Open(ctx, info.ID)
	if err != nil {
		return fail(err)
	}
	// For the evaluation only (no method sees it): can the goal be reached
	// at all from the true initial state?
	if h, err := heuristic.New("ff", ep.Task()); err == nil {
		_, rec.Unsolvable = h.Eval(ep.Task().Init)
	}
	if cfg.Method == MethodDirect {
		if err := r.direct(ctx, ep, &rec); err != nil {
			return fail(err)
		}
		return rec
	}

	task, lex := ep.Task(), ep.Lexicon()
	if cfg.Mode == ModeTwoPhase {
		// The agent's side of the episode: text (and images) only; the
		// truth stays here, for scoring.
		agent, err := ep.Agent()
		if err != nil {
			return fail(err)
		}
		xr, err := explore.Explore(ctx, cfg.Model, agent, cfg.Explore)
		if err != nil {
			return fail(fmt.Errorf("exploration: %w", err))
		}
		g := explore.Compare(xr, ep.Task(), ep.State(), ep.Belief())
		ready, grounded := xr.Ready, g.Correct
		rec.Ready, rec.Grounded = &ready, &grounded
		rec.Perception = xr.Perception
		rec.GoalFacts, rec.AllFacts = &g.Goal, &g.All
		rec.InvalidActions += xr.Invalid
		rec.ExploreSteps, rec.ExploreStop = len(xr.Steps), xr.Stop
		rec.ExploreSeconds = xr.Seconds
		rec.add(xr.Usage, 0)
		if !xr.Ready {
			rec.FailureStage = StageExploration
			rec.Stop = "not_grounded"
			rec.Reason = fmt.Sprintf("exploration stopped (%s) after %d steps without grounding the goal", xr.Stop, len(xr.Steps))
			rec.PlanValid = true
			return rec
		}
		task, lex = xr.Task, xr.Lexicon
	} else if _, err := ep.Reset(); err != nil {
		return fail(err)
	}

	out, err := r.plan(ctx, task, lex, ep.Goal())
	if err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
		return fail(fmt.Errorf("planning: %w", err))
	}
	rec.Plan, rec.Stop, rec.PlanSeconds = out.lines, out.stop, out.seconds
	rec.add(out.usage, out.think)
	rec.Simulations = out.sims

	// Execute the plan open-loop in the environment.
	rec.Commands = out.texts
	rec.PlanValid = true
	refused := ""
	for i, cmd := range out.texts {
		sr, err := ep.Step(cmd)
		if err != nil {
			return fail(fmt.Errorf("executing %q: %w", cmd, err))
		}
		rec.Steps++
		if sr.Action < 0 {
			rec.InvalidActions++
			rec.PlanValid = false
			refused = fmt.Sprintf("step %d %q: the environment refused it (%s)", i+1, cmd, sr.Text)
			break
		}
		rec.Executed++
		if sr.Success {
			break
		}
	}
	rec.Success = ep.Success()
	switch {
	case rec.Success:
	case out.invalid != "":
		rec.FailureStage, rec.Reason = StageGrounding, out.invalid
	case refused != "":
		// A plan valid in its task but refused by the environment: the
		// grounded state was wrong (in true-state mode this would be a bug).
		rec.FailureStage, rec.Reason = StageExploration, refused
		if cfg.Mode == ModeTrueState {
			rec.FailureStage = StageGrounding
		}
	default:
		rec.FailureStage = StageGoal
		rec.Reason = "the plan ended (" + out.stop + ") without reaching the goal: " + ep.Task().ExplainGoal(ep.State())
	}
	return rec
}

// add accounts a phase's model work.
func (rec *Record) add(u explore.Usage, think int) {
	rec.PromptTokens += u.PromptTokens
	rec.GeneratedTokens += u.GeneratedTokens
	rec.EvaluatedTokens += u.EvaluatedTokens
	rec.ModelCalls += u.ModelCalls
	rec.Images += u.Images
	rec.ThinkingTokens += think
}

// plan runs Phase II: the method's planner on task (its Init is where
// planning starts), with goal as the goal's words.
func (r *runner) plan(ctx context.Context, task *pddl.Task, lex *lexicon.Bound, goal string) (out outcome, err error) {
	cfg := &r.cfg
	start := time.Now()
	defer func() { out.seconds = elapsed(start) }()
	res, err := planner.Run(ctx, cfg.Model, planner.Task{Lexicon: lex, Goal: goal}, planner.Method(cfg.Method), planner.Options{
		Budgets: planner.Budgets{Time: time.Duration(cfg.Seconds * float64(time.Second)), Simulations: cfg.Simulations,
			GeneratedTokens: cfg.MaxTokens, MaxActions: cfg.MaxActions, MaxNodes: mcts.NodesFor(cfg.SearchMemory)},
		Search: mcts.Options{Batch: cfg.Batch, NoCollapse: cfg.NoCollapse, Rollout: cfg.Rollout, RolloutTemperature: cfg.RolloutTemperature},
		Seed:   cfg.Seed, Heuristic: cfg.Heuristic, OmitStatic: cfg.OmitStatic, NoRevisit: cfg.NoRevisit, End: cfg.End, Index: r.dec.Index(),
	})
	if res == nil {
		return out, err
	}
	out.lines, out.texts, out.stop = res.Lines, res.Texts, string(res.Stop)
	switch {
	case res.FirstInvalid != nil:
		out.invalid = fmt.Sprintf("step %d %q: %s", res.FirstInvalid.Step+1, res.FirstInvalid.Text, res.FirstInvalid.Reason)
	case !res.Valid:
		out.invalid = res.Validation.Error
	}
	out.usage = explore.Usage{PromptTokens: int(res.PromptTokens), GeneratedTokens: int(res.GeneratedTokens),
		EvaluatedTokens: int(res.EvaluatedTokens), ModelCalls: int(res.ModelCalls)}
	out.think = int(res.ThinkingTokens)
	out.sims = int(res.Simulations)
	return out, err
}

// DirectSystem is the direct policy's system message.
const DirectSystem = "You are an embodied agent in a household. Each turn, answer with exactly one " +
	"command, written in one of the forms you are given, to make progress on your task. " +
	"You will see what happens after each command."

// direct runs the direct policy: one free command per turn with the
// environment's feedback (in true-state mode the first message also
// describes the whole true state).
func (r *runner) direct(ctx context.Context, ep *envs.Episode, rec *Record) error {
	cfg := &r.cfg
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, time.Duration(cfg.Seconds*float64(time.Second)))
	defer cancel()
	obs, err := ep.Reset()
	if err != nil {
		return err
	}
	lex := ep.Lexicon()
	var b strings.Builder
	b.WriteString("Commands you can give, written exactly in one of these forms (<...> stands for an object's name):\n")
	for _, f := range lex.ActionForms() {
		b.WriteString("- " + f + "\n")
	}
	b.WriteString("\n" + strings.TrimSpace(obs.Text) + "\n")
	if cfg.Mode == ModeTrueState {
		b.WriteString("\nThe whole current state:\n")
		var lines []string
		for _, f := range ep.State().Facts() {
			lines = append(lines, lex.FactText(ep.Task().Facts[f]))
		}
		sort.Strings(lines)
		for _, l := range lines {
			b.WriteString("- " + l + "\n")
		}
	}
	if g := strings.TrimSpace(obs.Goal); g != "" && !strings.Contains(obs.Text, g) {
		b.WriteString("\n" + g + "\n")
	}
	b.WriteString("\nWhat is your first command?")
	first := models.Message{Role: "user", Content: b.String()}
	// Where the environment renders the agent's view, each observation's
	// image goes with its message; the dialog counts those a vision model
	// saw.
	attach := func(m *models.Message) {
		if !cfg.Explore.Images {
			return
		}
		if img, err := ep.Image(); err == nil {
			var buf bytes.Buffer
			if png.Encode(&buf, img) == nil {
				m.Images = [][]byte{buf.Bytes()}
			}
		}
	}
	attach(&first)
	d, err := explore.NewDialog(cfg.Model, []models.Message{{Role: "system", Content: DirectSystem}, first},
		explore.DialogOptions{Index: r.dec.Index(), Seed: cfg.Seed})
	if err != nil {
		return err
	}
	defer d.Close()
	rec.PlanValid = true
	rec.Stop = "steps"
	task := ep.Task()
	for rec.Steps < cfg.MaxSteps {
		line, err := d.Reply(dctx, 0)
		if err != nil {
			if dctx.Err() != nil {
				rec.Stop = "time"
				break
			}
			return err
		}
		sr, err := ep.Step(line)
		if err != nil {
			return err
		}
		rec.Steps++
		rec.Commands = append(rec.Commands, line)
		if sr.Action >= 0 {
			rec.Executed++
			rec.Plan = append(rec.Plan, task.Actions[sr.Action].String())
		} else {
			rec.PlanValid = false
			rec.InvalidActions++
		}
		if sr.Success {
			rec.Stop = "success"
			break
		}
		m := models.Message{Role: "user", Content: sr.Text}
		attach(&m)
		d.Add(m)
	}
	u := d.Usage()
	rec.add(u, 0)
	rec.PlanSeconds = elapsed(start)
	rec.Success = ep.Success()
	if !rec.Success {
		if rec.Executed < rec.Steps {
			rec.FailureStage = StageGrounding
			rec.Reason = fmt.Sprintf("%d of %d commands were not valid actions", rec.Steps-rec.Executed, rec.Steps)
		} else {
			rec.FailureStage = StageGoal
			rec.Reason = "stopped (" + rec.Stop + ") without reaching the goal: " + task.ExplainGoal(ep.State())
		}
	}
	return nil
}
