package decoder

import (
	"fmt"
	"sort"
	"strings"

	"github.com/nesy-dev/nesy/constraint"
	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl"
)

// DefaultSystemPrompt is the system message of the planning prompt.
const DefaultSystemPrompt = "You are a planner for an embodied agent. Given the actions the agent can take, " +
	"the current state of its world and a goal, you write a plan: a sequence of actions that, " +
	"executed in order from the current state, achieves the goal. You answer with the plan only."

// DefaultGoalAlternatives is how many alternatives of a disjunctive goal the
// prompt lists when PromptOptions.GoalAlternatives is 0.
const DefaultGoalAlternatives = 6

// PromptOptions configure the planning prompt. The zero value gives the
// default prompt: the action forms, the objects, the whole initial state
// (static facts included), the goal from the task, one action per line.
type PromptOptions struct {
	// System replaces DefaultSystemPrompt when not empty.
	System string
	// Goal is the goal in words (e.g. ALFWorld's "put a clean apple in
	// fridge."); "" describes the task's goal from its facts.
	Goal string
	// Observation is text shown before the state (e.g. an environment's
	// first observation); "" shows none.
	Observation string
	// OmitStatic leaves facts that never change (types, fixed locations)
	// out of the state description.
	OmitStatic bool
	// OmitState leaves the state description out entirely (for
	// environments whose Observation already describes it).
	OmitState bool
	// GoalAlternatives bounds the alternatives of a disjunctive goal that are
	// listed; 0 means DefaultGoalAlternatives.
	GoalAlternatives int
	// End is the end marker the model is told to write after the last
	// action (constraint.Options.End, e.g. "done\n"); "" tells it to stop.
	End string
	// Think renders the chat with Qwen's thinking mode on (models whose
	// template has the switch); off by default.
	Think bool
	// Compact is the short prompt a small trained prior reads (see
	// PromptCompact): one user message holding the goal, the state's
	// fluent facts and the goal again, without a system message, action
	// forms, object list or instructions. System, Observation, OmitStatic,
	// OmitState and End are ignored.
	Compact bool
	// StateFirst, with Compact, leaves out the first goal line: the state,
	// then the goal, then "Plan:" (PromptCompactStateFirst). The prompts of
	// several goals on one scene then share every token up to the goal, so
	// a trainer can pack them on one copy of the state, and a server can
	// reuse the state's KV cache across goals.
	StateFirst bool
	// UpperGoal, with Compact, writes the goal's lines in capitals, so
	// that the goal's words are tokens of their own, never the state's or
	// the plan's: a small prior finds them by what they are, wherever the
	// goal stands (PromptUpperGoal).
	UpperGoal bool
	// GoalTrace, with Compact, has the constraint write after every action
	// the goal's facts still to reach in the state it leads to, on the
	// action's line (constraint.GoalTrace, forced tokens: Trace): a small
	// prior then reads which goal facts hold instead of tracking the state
	// through its own actions. Tasks whose goal is not one conjunction
	// (most of ALFWorld's, whose goals have alternatives) have no trace.
	GoalTrace bool
	// GoalTraceAll, with GoalTrace, traces every task: the facts left of
	// the goal's nearest alternatives, merged (constraint.NearestGoalTrace;
	// the same text as GoalTrace's for a goal of one conjunction).
	GoalTraceAll bool
}

// PromptCompact is the models.Info.Prompt of a model trained on the
// compact prompt (PromptOptions.Compact): the planner selects it for such
// a model, so the prompt a prior is used with is the one it was trained on.
const PromptCompact = "compact"

// PromptCompactStateFirst is the models.Info.Prompt of a model trained on
// the compact prompt with the state before the goal
// (PromptOptions.StateFirst).
const PromptCompactStateFirst = "compact-state-first"

// PromptUpperGoal is the suffix of the models.Info.Prompt of a model
// trained on a compact prompt whose goal is in capitals
// (PromptOptions.UpperGoal), e.g. "compact-state-first-upper-goal".
const PromptUpperGoal = "-upper-goal"

// PromptGoalTrace is the suffix of the models.Info.Prompt of a model
// trained with the goal trace (PromptOptions.GoalTrace), after
// PromptUpperGoal when both are on, e.g.
// "compact-state-first-upper-goal-goal-trace".
const PromptGoalTrace = "-goal-trace"

// PromptGoalTraceAll is the suffix of the models.Info.Prompt of a model
// trained with the goal trace on every task (PromptOptions.GoalTraceAll),
// in place of PromptGoalTrace, e.g.
// "compact-state-first-upper-goal-goal-trace-all".
const PromptGoalTraceAll = "-goal-trace-all"

// Trace returns the constraint.Options.Trace of a plan for lex's task
// under these options: constraint.GoalTrace (in capitals with UpperGoal,
// as the prompt writes its goal) when the prompt is Compact with
// GoalTrace, constraint.NearestGoalTrace with GoalTraceAll too, else nil.
func (o PromptOptions) Trace(lex *lexicon.Bound) func(pddl.State) string {
	if !o.Compact || !o.GoalTrace {
		return nil
	}
	if o.GoalTraceAll {
		return constraint.NearestGoalTrace(lex, o.UpperGoal)
	}
	return constraint.GoalTrace(lex, o.UpperGoal)
}

// Kind returns the models.Info.Prompt value of a model trained on the
// prompts o builds: PromptCompact or PromptCompactStateFirst, with
// PromptUpperGoal appended for UpperGoal and then PromptGoalTrace for
// GoalTrace (PromptGoalTraceAll with GoalTraceAll), or "" for the full
// prompt.
func (o PromptOptions) Kind() string {
	if !o.Compact {
		return ""
	}
	kind := PromptCompact
	if o.StateFirst {
		kind = PromptCompactStateFirst
	}
	if o.UpperGoal {
		kind += PromptUpperGoal
	}
	if o.GoalTrace && o.GoalTraceAll {
		kind += PromptGoalTraceAll
	} else if o.GoalTrace {
		kind += PromptGoalTrace
	}
	return kind
}

// WithKind returns o set up for a model whose models.Info.Prompt is kind
// (a Kind value): Compact, StateFirst, UpperGoal, GoalTrace and
// GoalTraceAll as the kind says (the full prompt for any other value, as
// for models not trained by nesy).
func (o PromptOptions) WithKind(kind string) PromptOptions {
	base, all := strings.CutSuffix(kind, PromptGoalTraceAll)
	trace := all
	if !all {
		base, trace = strings.CutSuffix(base, PromptGoalTrace)
	}
	base, upper := strings.CutSuffix(base, PromptUpperGoal)
	o.Compact = base == PromptCompact || base == PromptCompactStateFirst
	o.StateFirst = base == PromptCompactStateFirst
	o.UpperGoal = o.Compact && upper
	o.GoalTrace = o.Compact && trace
	o.GoalTraceAll = o.GoalTrace && all
	return o
}

// Prompt is a rendered, tokenized planning prompt.
type Prompt struct {
	Messages []models.Message
	// Text is the chat rendered with the model's template, ending with the
	// assistant turn's opening.
	Text string
	// Tokens are Text's tokens (chat markup as special tokens).
	Tokens []int32
	// Think reports whether the model will think before answering (thinking
	// was asked for and the model's template has the switch).
	Think bool
}

// Messages returns the planning chat for the task lex is bound to: a system
// message and a user message holding the action forms, the objects, the
// state, the goal and the output format.
func Messages(lex *lexicon.Bound, opts PromptOptions) []models.Message {
	task := lex.Task()
	var b strings.Builder
	if opts.Compact {
		goal := strings.TrimSpace(opts.Goal)
		if goal == "" {
			goal = strings.TrimSpace(goalText(lex, opts.GoalAlternatives))
		}
		if opts.UpperGoal {
			goal = strings.ToUpper(goal)
		}
		if !opts.StateFirst {
			b.WriteString("Goal: " + goal + "\n")
		}
		b.WriteString("State:\n")
		for _, line := range compactState(lex) {
			b.WriteString("- " + line + "\n")
		}
		b.WriteString("Goal: " + goal + "\nPlan:")
		return []models.Message{{Role: "user", Content: b.String()}}
	}

	b.WriteString("Actions you can take, one per line, written exactly in one of these forms " +
		"(<...> stands for an object's name):\n")
	for _, f := range lex.ActionForms() {
		b.WriteString("- " + f + "\n")
	}

	if names := objectNames(lex); len(names) > 0 {
		b.WriteString("\nObjects: " + strings.Join(names, ", ") + ".\n")
	}

	if opts.Observation != "" {
		b.WriteString("\n" + strings.TrimSpace(opts.Observation) + "\n")
	}
	if !opts.OmitState {
		b.WriteString("\nCurrent state:\n")
		for _, line := range stateLines(lex, task.Init, !opts.OmitStatic) {
			b.WriteString("- " + line + "\n")
		}
	}

	b.WriteString("\nGoal: ")
	if opts.Goal != "" {
		b.WriteString(strings.TrimSpace(opts.Goal) + "\n")
	} else {
		b.WriteString(goalText(lex, opts.GoalAlternatives))
	}

	b.WriteString("\nWrite the plan: one action per line, each exactly in one of the forms above " +
		"with the objects' names, without numbering or any other text.")
	if end := strings.TrimSpace(opts.End); end != "" {
		fmt.Fprintf(&b, " After the last action, write %q on its own line.", end)
	} else {
		b.WriteString(" Stop after the last action.")
	}

	sys := opts.System
	if sys == "" {
		sys = DefaultSystemPrompt
	}
	return []models.Message{{Role: "system", Content: sys}, {Role: "user", Content: b.String()}}
}

// BuildPrompt renders the planning chat (Messages) with the model's chat
// template and tokenizes it.
func BuildPrompt(lm models.LM, lex *lexicon.Bound, opts PromptOptions) (*Prompt, error) {
	return RenderPrompt(lm, Messages(lex, opts), opts.Think)
}

// RenderPrompt renders msgs (a planning chat from Messages) with the
// model's chat template and tokenizes it, as BuildPrompt does: package
// train renders its demonstrations with it, so a prior is trained on the
// prompt it is used with.
func RenderPrompt(lm models.LM, msgs []models.Message, think bool) (*Prompt, error) {
	text, err := lm.RenderChat(msgs, models.ChatOptions{Think: think})
	if err != nil {
		return nil, fmt.Errorf("decoder: rendering the prompt: %w", err)
	}
	toks, err := lm.Tokenize(text, true)
	if err != nil {
		return nil, fmt.Errorf("decoder: tokenizing the prompt: %w", err)
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("decoder: the prompt has no tokens")
	}
	return &Prompt{Messages: msgs, Text: text, Tokens: toks, Think: think && lm.Info().Thinking}, nil
}

// compactState describes the initial state for the compact prompt: its
// fluent facts whose every argument is an object some action's text names
// (facts about unnamed objects, such as ALFWorld's locations, tell a
// planner that writes action texts nothing it can use), sorted.
func compactState(lex *lexicon.Bound) []string {
	task := lex.Task()
	named := map[string]bool{}
	for a := range task.Actions {
		text := lex.Text(a)
		for _, o := range task.Actions[a].Args {
			if !named[o] && strings.Contains(text, lex.Name(o)) {
				named[o] = true
			}
		}
	}
	var out []string
	for _, f := range task.Init.Facts() {
		fact := task.Facts[f]
		keep := true
		for _, a := range fact.Args {
			keep = keep && named[a]
		}
		if keep {
			out = append(out, lex.FactText(fact))
		}
	}
	sort.Strings(out)
	return out
}

// objectNames returns the display names of the objects the model may write:
// those named in the text of some ground action (so types, constants and
// objects a template leaves out are not listed), in natural order ("drawer
// 2" before "drawer 10"), without duplicates.
func objectNames(lex *lexicon.Bound) []string {
	task := lex.Task()
	seen := map[string]bool{}
	var out []string
	for a := range task.Actions {
		text := lex.Text(a)
		for _, o := range task.Actions[a].Args {
			if n := lex.Name(o); !seen[n] && strings.Contains(text, n) {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return naturalLess(out[i], out[j]) })
	return out
}

// naturalLess orders strings with digit runs compared as numbers.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

// digits returns the length of the run of ASCII digits s starts with.
func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// stateLines describes state s in the lexicon's fact sentences (or "pred a
// b" with display names), fluent facts first, then static ones, each group
// sorted.
func stateLines(lex *lexicon.Bound, s pddl.State, static bool) []string {
	task := lex.Task()
	var fluent, fixed []string
	for _, f := range s.Facts() {
		fluent = append(fluent, lex.FactText(task.Facts[f]))
	}
	if static {
		for _, f := range task.Static {
			fixed = append(fixed, lex.FactText(f))
		}
	}
	sort.Strings(fluent)
	sort.Strings(fixed)
	return append(fluent, fixed...)
}

// goalText describes the task's goal (a DNF over fluent facts): the facts of
// a single conjunction, one per line, or up to max alternatives.
func goalText(lex *lexicon.Bound, max int) string {
	task := lex.Task()
	if max <= 0 {
		max = DefaultGoalAlternatives
	}
	conj := func(c pddl.Conj) []string {
		var out []string
		for _, f := range c.Pos {
			out = append(out, lex.FactText(task.Facts[f]))
		}
		for _, f := range c.Neg {
			out = append(out, "not: "+lex.FactText(task.Facts[f]))
		}
		return out
	}
	var b strings.Builder
	switch len(task.Goal) {
	case 0:
		b.WriteString("(none: the goal cannot be reached)\n")
	case 1:
		b.WriteString("reach a state where all of these hold:\n")
		for _, l := range conj(task.Goal[0]) {
			b.WriteString("- " + l + "\n")
		}
	default:
		fmt.Fprintf(&b, "reach a state where one of these %d alternatives holds:\n", len(task.Goal))
		for i, c := range task.Goal {
			if i == max {
				fmt.Fprintf(&b, "(and %d more alternatives of the same kind)\n", len(task.Goal)-max)
				break
			}
			fmt.Fprintf(&b, "Alternative %d: %s.\n", i+1, strings.Join(conj(c), "; "))
		}
	}
	return b.String()
}
