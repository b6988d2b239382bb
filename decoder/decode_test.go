package decoder

import (
	"context"
	"errors"
	"fmt"
	"github.com/nesy-dev/nesy/constraint"
	"slices"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/models"
)

// decodeCase is one way of decoding.
type decodeCase struct {
	name  string
	space constraint.Options
	opts  Options
}

// constrainedCases cover greedy and sampled decoding under the end
// policies. Seeds are set per run.
var constrainedCases = []decodeCase{
	{"greedy", constraint.Options{MaxActions: 10}, Options{Constrained: true}},
	{"greedy/each-token", constraint.Options{MaxActions: 10}, Options{Constrained: true, FeedEachToken: true}},
	{"greedy/goal-end", constraint.Options{MaxActions: 10, EndPolicy: constraint.EndAtGoal}, Options{Constrained: true}},
	{"sample", constraint.Options{MaxActions: 10}, Options{Constrained: true, Sampling: Sampling{Temperature: 1}}},
	{"sample/top", constraint.Options{MaxActions: 10, StopAtGoal: true, End: "done\n"},
		Options{Constrained: true, Sampling: Sampling{Temperature: 0.8, TopK: 20, TopP: 0.9}}},
}

// checkResult checks the invariants of every result: the plan validates from
// its printed text, the accounting adds up, the text is the tokens' text.
//
// batched says that constrained tokens were fed as Options.FeedEachToken
// false feeds them: a forced run in one call when the next choice needs the
// logits, so fewer tokens and calls than one per token.
func checkResult(t *testing.T, name string, d *Decoder, tt testTask, sess *Session, res *Result, prefilled, batched bool) {
	t.Helper()
	task := tt.Task()
	vr := validatePlanText(t, task, res.Lines)
	if res.Constrained {
		if !res.Valid || !vr.Valid || res.FirstInvalid != nil || res.ValidationError != "" {
			t.Fatalf("%s: constrained plan invalid: %+v %s\n%s", name, res.FirstInvalid, vr.Error, strings.Join(res.Lines, "\n"))
		}
		if res.DeadEnd != (res.EndReason == "dead_end") {
			t.Fatalf("%s: constraint.DeadEnd %v with end %q", name, res.DeadEnd, res.EndReason)
		}
		// The answer text is exactly the actions' texts, each followed by the
		// separator, plus the end marker when the model wrote it.
		want := ""
		for _, s := range res.Texts {
			want += s + "\n"
		}
		if res.EndReason == "end_marker" {
			want += sess.Space().Options().End
		}
		if res.EndReason != "max_tokens" && res.Text != want {
			t.Fatalf("%s: text %q, want %q", name, res.Text, want)
		}
		if !strings.HasPrefix(res.Text, strings.TrimSuffix(want, sess.Space().Options().End)) {
			t.Fatalf("%s: text %q does not start with the plan %q", name, res.Text, want)
		}
	}
	if res.GoalReached != (res.Valid && vr.GoalReached) {
		t.Fatalf("%s: goal %v, validator %v", name, res.GoalReached, vr.GoalReached)
	}
	if len(res.States) != len(res.Plan)+1 {
		t.Fatalf("%s: %d states for %d actions", name, len(res.States), len(res.Plan))
	}
	if res.GeneratedTokens != len(res.Tokens) {
		t.Fatalf("%s: %d generated tokens, %d kept", name, res.GeneratedTokens, len(res.Tokens))
	}
	var text strings.Builder
	for _, id := range res.Tokens {
		text.Write(d.Index().Text(id))
	}
	if text.String() != res.Text {
		t.Fatalf("%s: text %q is not its tokens' %q", name, res.Text, text.String())
	}
	// Every kept token is fed back, except the last one when it ended the
	// plan (an end token is neither kept nor fed); the prompt is counted by
	// the decode that evaluated it.
	fed := res.GeneratedTokens + res.ThinkingTokens
	switch res.EndReason {
	case "end_marker", "goal", "max_actions", "dead_end":
		if res.GeneratedTokens > 0 {
			fed--
		}
	}
	prompt := 0
	if prefilled {
		prompt = res.PromptTokens
	}
	if batched {
		// Tokens after the last choice are never fed; a call feeds at least
		// one token, and there are calls exactly when tokens were fed.
		ev, calls := res.EvaluatedTokens-prompt, res.ModelCalls-btoi(prefilled)
		if ev < 0 || ev > fed || calls < 0 || calls > ev || (calls == 0) != (ev == 0) {
			t.Fatalf("%s: %d evaluated tokens in %d calls, want %d prompt + at most %d fed in at most as many calls (end %s)",
				name, res.EvaluatedTokens, res.ModelCalls, prompt, fed, res.EndReason)
		}
	} else {
		if res.EvaluatedTokens != prompt+fed {
			t.Fatalf("%s: %d evaluated tokens, want %d prompt + %d fed (end %s)", name, res.EvaluatedTokens, prompt, fed, res.EndReason)
		}
		if calls := fed + btoi(prefilled); res.ModelCalls != calls {
			t.Fatalf("%s: %d model calls, want %d", name, res.ModelCalls, calls)
		}
	}
	if res.Constrained && res.MaskSteps != res.GeneratedTokens+btoi(res.EndReason == "end_token") {
		t.Fatalf("%s: %d mask steps for %d tokens", name, res.MaskSteps, res.GeneratedTokens)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestConstrainedPlansValidate decodes plans with tiny random models (real
// Qwen3 and Llama 2 vocabularies) on real ALFWorld, PlanBench and
// VirtualHome tasks, greedy and sampled over many seeds: every plan must
// validate from its printed text. NESY_FULL=1 runs every task.
func TestConstrainedPlansValidate(t *testing.T) {
	perDataset, seeds, cases := 3, 2, constrainedCases
	if fullRun() {
		// Every task, sampled with several seeds from one prompt (the
		// prefill is the cost).
		perDataset, seeds, cases = 0, 4, []decodeCase{constrainedCases[3]}
	}
	tasks := datasetTasks(t, perDataset)
	total, goals, deadEnds := 0, 0, 0
	for _, family := range modelFamilies {
		d := testDecoder(t, family)
		t.Run(family, func(t *testing.T) {
			for _, tt := range tasks {
				for _, dc := range cases {
					// Static facts left out: shorter prompts, same constraint.
					sess, err := d.Prepare(context.Background(), Request{Lexicon: tt.Lex, Space: dc.space, Prompt: PromptOptions{OmitStatic: true}})
					if err != nil {
						t.Fatalf("%s: %v", tt.Name, err)
					}
					n := seeds
					if dc.opts.Sampling.Greedy() {
						n = 1
					}
					for seed := range n {
						opts := dc.opts
						opts.Sampling.Seed = uint64(seed)
						res, err := sess.Decode(context.Background(), opts)
						if err != nil {
							t.Fatalf("%s %s: %v", tt.Name, dc.name, err)
						}
						checkResult(t, fmt.Sprintf("%s %s seed %d", tt.Name, dc.name, seed), d, tt, sess, res, seed == 0, !opts.FeedEachToken)
						total++
						goals += btoi(res.GoalReached)
						deadEnds += btoi(res.DeadEnd)
					}
					sess.Close()
				}
			}
		})
	}
	t.Logf("%d constrained plans validated (%d reach the goal, %d dead ends)", total, goals, deadEnds)
}

// TestForcedRunsFedAtOnce: constrained decoding with forced runs fed in one
// call (and only the allowed tokens' logits computed, where the engine can)
// writes the plans that feeding every token alone with every logit writes
// (the logits differ only by float rounding, far below these models'
// margins), greedy and sampled with a seed, in fewer model calls over
// fewer fed tokens.
func TestForcedRunsFedAtOnce(t *testing.T) {
	tasks := datasetTasks(t, 3)
	for _, family := range modelFamilies {
		d := testDecoder(t, family)
		same, n, callsAtOnce, callsEach := 0, 0, 0, 0
		for _, tt := range tasks {
			sess, err := d.Prepare(context.Background(), Request{Lexicon: tt.Lex, Space: constraint.Options{MaxActions: 10}, Prompt: PromptOptions{OmitStatic: true}})
			if err != nil {
				t.Fatal(err)
			}
			for _, sampling := range []Sampling{{}, {Temperature: 1, Seed: 3}} {
				each, err := sess.Decode(context.Background(), Options{Constrained: true, FeedEachToken: true, Sampling: sampling})
				if err != nil {
					t.Fatal(err)
				}
				once, err := sess.Decode(context.Background(), Options{Constrained: true, Sampling: sampling})
				if err != nil {
					t.Fatal(err)
				}
				n++
				same += btoi(slices.Equal(each.Tokens, once.Tokens))
				callsEach += each.ModelCalls
				callsAtOnce += once.ModelCalls
			}
			sess.Close()
		}
		t.Logf("%s: %d of %d plans the same; %d model calls against %d", family, same, n, callsAtOnce, callsEach)
		if same != n {
			t.Errorf("%s: %d of %d plans differ with forced runs fed at once", family, n-same, n)
		}
		if callsAtOnce >= callsEach {
			t.Errorf("%s: %d model calls with forced runs fed at once, %d one by one", family, callsAtOnce, callsEach)
		}
	}
}

// TestUnconstrainedReportsFirstInvalid decodes the same tasks without the
// constraint: the random model writes invalid plans, and the result says
// which step failed and why, consistently with the validator.
func TestUnconstrainedReportsFirstInvalid(t *testing.T) {
	tasks := datasetTasks(t, 2)
	invalid, total := 0, 0
	for _, family := range modelFamilies {
		d := testDecoder(t, family)
		for _, tt := range tasks {
			sess, err := d.Prepare(context.Background(), Request{Lexicon: tt.Lex, Space: constraint.Options{MaxActions: 10}, Prompt: PromptOptions{OmitStatic: true}})
			if err != nil {
				t.Fatal(err)
			}
			for seed := range 2 {
				res, err := sess.Decode(context.Background(), Options{MaxTokens: 40, Sampling: Sampling{Temperature: float64(seed), Seed: uint64(seed)}})
				if err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("%s/%s seed %d", family, tt.Name, seed)
				checkResult(t, name, d, tt, sess, res, seed == 0, false)
				total++
				if res.FirstInvalid == nil {
					if !res.Valid {
						t.Fatalf("%s: invalid without a first invalid step", name)
					}
					continue
				}
				invalid++
				fi := res.FirstInvalid
				if res.Valid || res.GoalReached {
					t.Fatalf("%s: invalid step but valid %v goal %v", name, res.Valid, res.GoalReached)
				}
				if fi.Step != len(res.Plan) || fi.Reason == "" || fi.Text == "" {
					t.Fatalf("%s: first invalid %+v after %d valid steps", name, fi, len(res.Plan))
				}
				// The validator agrees: the step's text is no applicable
				// action in the state the valid prefix reaches.
				if _, ok := tt.Lex.Lookup(res.States[len(res.States)-1], fi.Text); ok {
					t.Fatalf("%s: %q reported invalid but applies", name, fi.Text)
				}
				if !strings.Contains(res.Text, fi.Text) {
					t.Fatalf("%s: invalid step %q not in the output %q", name, fi.Text, res.Text)
				}
			}
			sess.Close()
		}
	}
	if invalid == 0 {
		t.Fatalf("no invalid plan among %d unconstrained ones from a random model", total)
	}
	t.Logf("%d of %d unconstrained plans invalid", invalid, total)
}

// TestSamplingDeterministic: a seed fixes the plan; different seeds explore.
func TestSamplingDeterministic(t *testing.T) {
	d := testDecoder(t, "qwen3")
	tt := datasetTasks(t, 1)[0]
	sess, err := d.Prepare(context.Background(), Request{Lexicon: tt.Lex, Space: constraint.Options{MaxActions: 6}, Prompt: PromptOptions{OmitStatic: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for _, constrained := range []bool{true, false} {
		texts := map[string]bool{}
		for seed := range 4 {
			opts := Options{Constrained: constrained, MaxTokens: 16, Sampling: Sampling{Temperature: 1.5, Seed: uint64(seed)}}
			a, err := sess.Decode(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			b, err := sess.Decode(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if a.Text != b.Text {
				t.Fatalf("constrained=%v seed %d: %q then %q", constrained, seed, a.Text, b.Text)
			}
			texts[a.Text] = true
		}
		if len(texts) < 2 {
			t.Fatalf("constrained=%v: four seeds gave one text", constrained)
		}
	}
}

// TestDecodeLimitsEventsAndCancel pins down token limits, the event stream,
// cancellation and that every sequence is released.
func TestDecodeLimitsEventsAndCancel(t *testing.T) {
	d := testDecoder(t, "qwen3")
	e := d.Model()
	tt := datasetTasks(t, 1)[0]
	before := e.Stats().SequencesInUse
	// The plan may end only at the goal, so that no random model's end
	// token cuts these decodes short.
	req := Request{Lexicon: tt.Lex, Space: constraint.Options{MaxActions: 4, EndPolicy: constraint.EndAtGoal}, Prompt: PromptOptions{OmitStatic: true}}

	t.Run("max tokens", func(t *testing.T) {
		res, err := d.Decode(context.Background(), req, Options{Constrained: true, MaxTokens: 3})
		if err != nil {
			t.Fatal(err)
		}
		if res.EndReason != "max_tokens" || res.GeneratedTokens != 3 {
			t.Fatalf("end %q after %d tokens", res.EndReason, res.GeneratedTokens)
		}
	})
	t.Run("events", func(t *testing.T) {
		var toks, actions, ends int
		var lines []string
		res, err := d.Decode(context.Background(), req, Options{Constrained: true, OnEvent: func(ev Event) {
			switch ev.Kind {
			case EventToken:
				toks++
			case EventAction:
				if ev.Step != actions {
					t.Errorf("action event step %d, want %d", ev.Step, actions)
				}
				actions++
				lines = append(lines, ev.Line)
			case EventEnd:
				ends++
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		if toks != res.GeneratedTokens || ends != 1 || strings.Join(lines, "|") != strings.Join(res.Lines, "|") {
			t.Fatalf("%d token events for %d tokens, %d end events, actions %v vs %v", toks, res.GeneratedTokens, ends, lines, res.Lines)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		res, err := d.Decode(ctx, req, Options{Constrained: true, OnEvent: func(ev Event) {
			if ev.Kind == EventToken {
				if n++; n == 5 {
					cancel()
				}
			}
		}})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
		if res == nil || !res.Valid || res.EndReason != "interrupted" || res.GeneratedTokens != 5 {
			t.Fatalf("partial result %+v", res)
		}
	})
	if after := e.Stats().SequencesInUse; after != before {
		t.Fatalf("%d sequences in use after the decodes, %d before", after, before)
	}
}

// TestThinking lets a Qwen model think under a small budget, then decode
// the plan under the constraint.
func TestThinking(t *testing.T) {
	d := testDecoder(t, "qwen3")
	if !d.Model().Info().Thinking {
		t.Fatal("the Qwen3 test model's template has no thinking switch")
	}
	tt := datasetTasks(t, 1)[0]
	res, err := d.Decode(context.Background(), Request{Lexicon: tt.Lex, Prompt: PromptOptions{Think: true}, Space: constraint.Options{MaxActions: 3}},
		Options{Constrained: true, MaxThinkTokens: 5, Sampling: Sampling{Temperature: 1, Seed: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(res.Thinking, "</think>\n\n") && !strings.Contains(res.Thinking, "</think>") {
		t.Fatalf("thinking %q not closed", res.Thinking)
	}
	if res.ThinkingTokens == 0 || res.ThinkingTokens > 5 {
		t.Fatalf("%d thinking tokens under a budget of 5", res.ThinkingTokens)
	}
	if res.EndReason == "end_token" && res.GeneratedTokens == 0 {
		return // the model ended while thinking
	}
	if !res.Valid {
		t.Fatalf("plan after thinking invalid: %+v", res)
	}
}

// TestPromptContents checks the planning prompt names every action form, the
// objects, the state and the goal, and renders with the chat template.
func TestPromptContents(t *testing.T) {
	tasks := datasetTasks(t, 2)
	for _, family := range modelFamilies {
		d := testDecoder(t, family)
		for _, tt := range tasks {
			for _, think := range []bool{false, true} {
				p, err := BuildPrompt(d.Model(), tt.Lex, PromptOptions{Think: think, End: "done\n"})
				if err != nil {
					t.Fatal(err)
				}
				user := p.Messages[1].Content
				task := tt.Task()
				for schema := range task.Params {
					found := false
					for _, f := range tt.Lex.ActionForms() {
						found = found || strings.Contains(user, "- "+f+"\n")
					}
					if !found {
						t.Fatalf("%s: no action form for %s", tt.Name, schema)
					}
				}
				// Every applicable action's text must fit one of the listed forms
				// (same words where the form has no placeholder).
				for _, ch := range tt.Lex.Applicable(task.Init) {
					if !fitsSomeForm(ch.Text, tt.Lex.ActionForms()) {
						t.Fatalf("%s: %q fits no listed form %v", tt.Name, ch.Text, tt.Lex.ActionForms())
					}
				}
				for _, f := range task.Init.Facts() {
					if !strings.Contains(user, "- "+tt.Lex.FactText(task.Facts[f])+"\n") {
						t.Fatalf("%s: state fact %s missing", tt.Name, task.Facts[f])
					}
				}
				if len(task.Goal) > 0 && len(task.Goal[0].Pos) > 0 &&
					!strings.Contains(user, tt.Lex.FactText(task.Facts[task.Goal[0].Pos[0]])) {
					t.Fatalf("%s: goal fact missing", tt.Name)
				}
				if !strings.Contains(user, `write "done" on its own line`) {
					t.Fatalf("%s: end marker not explained", tt.Name)
				}
				if !strings.Contains(p.Text, p.Messages[0].Content) {
					t.Fatalf("%s: system message not rendered", tt.Name)
				}
				wantThink := think && family == "qwen3"
				if p.Think != wantThink {
					t.Fatalf("%s: Think %v", tt.Name, p.Think)
				}
				if family == "qwen3" && strings.HasSuffix(p.Text, "<think>\n\n</think>\n\n") == think {
					t.Fatalf("%s: think=%v rendered %q", tt.Name, think, p.Text[max(0, len(p.Text)-60):])
				}
				toks, _ := d.Model().Tokenize(p.Text, true)
				if len(toks) != len(p.Tokens) {
					t.Fatalf("%s: %d prompt tokens, tokenizing again gives %d", tt.Name, len(p.Tokens), len(toks))
				}
			}
		}
	}
}

// fitsSomeForm reports whether text matches a form where every <...> slot
// stands for one or more words.
func fitsSomeForm(text string, forms []string) bool {
	for _, f := range forms {
		if matchForm(text, f) {
			return true
		}
	}
	return false
}

func matchForm(text, form string) bool {
	i := strings.Index(form, "<")
	if i < 0 {
		return text == form
	}
	j := strings.Index(form[i:], ">")
	if !strings.HasPrefix(text, form[:i]) || j < 0 {
		return false
	}
	rest := form[i+j+1:]
	for k := i + 1; k <= len(text); k++ {
		if matchForm(text[k:], rest) {
			return true
		}
	}
	return false
}

var _ models.LM = (*models.Engine)(nil)

// TestCompactPrompt: the compact prompt is one user message with the goal
// before and after the state, whose lines are fluent facts about objects
// that actions name, and none of the default prompt's furniture.
func TestCompactPrompt(t *testing.T) {
	for _, tt := range datasetTasks(t, 4) {
		full := Messages(tt.Lex, PromptOptions{Goal: "reach the goal.", OmitStatic: true})
		msgs := Messages(tt.Lex, PromptOptions{Goal: "reach the goal.", Compact: true, System: "ignored"})
		if len(msgs) != 1 || msgs[0].Role != "user" {
			t.Fatalf("%s: %d messages, want one user message", tt.Name, len(msgs))
		}
		text := msgs[0].Content
		if !strings.HasPrefix(text, "Goal: reach the goal.\nState:\n") || !strings.HasSuffix(text, "Goal: reach the goal.\nPlan:") {
			t.Fatalf("%s: compact prompt %q", tt.Name, text)
		}
		if strings.Contains(text, "ignored") || strings.Contains(text, "Actions you can take") || strings.Contains(text, "Objects:") {
			t.Fatalf("%s: the compact prompt has the default prompt's parts:\n%s", tt.Name, text)
		}
		// Every compact state line is a line of the default prompt's state.
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "- ") && !strings.Contains(full[1].Content, "\n"+line+"\n") {
				t.Fatalf("%s: %q is not a state line of the default prompt", tt.Name, line)
			}
		}
		if len(text) >= len(full[1].Content) {
			t.Errorf("%s: the compact prompt (%d bytes) is not shorter than the default (%d)", tt.Name, len(text), len(full[1].Content))
		}
	}
}

// TestStateFirstPrompt: the state-first compact prompt is the compact
// prompt without its first goal line, so the prompts of two goals on one
// task share every byte up to the goal; Kind and WithKind round-trip.
func TestStateFirstPrompt(t *testing.T) {
	for _, tt := range datasetTasks(t, 4) {
		compact := Messages(tt.Lex, PromptOptions{Goal: "reach the goal.", Compact: true})[0].Content
		a := Messages(tt.Lex, PromptOptions{Goal: "reach the goal.", Compact: true, StateFirst: true})[0].Content
		b := Messages(tt.Lex, PromptOptions{Goal: "reach another goal.", Compact: true, StateFirst: true})[0].Content
		if want := strings.TrimPrefix(compact, "Goal: reach the goal.\n"); a != want {
			t.Fatalf("%s: state-first prompt\n%q\nwant\n%q", tt.Name, a, want)
		}
		cut := strings.LastIndex(a, "Goal: ")
		if cut < 0 || !strings.HasPrefix(b, a[:cut]) || strings.Count(a, "Goal:") != 1 {
			t.Fatalf("%s: the two goals' prompts do not share the state:\n%q\n%q", tt.Name, a, b)
		}
	}
	up := Messages(datasetTasks(t, 1)[0].Lex, PromptOptions{Goal: "put a clean apple in fridge.", Compact: true, StateFirst: true, UpperGoal: true})[0].Content
	if !strings.HasSuffix(up, "\nGoal: PUT A CLEAN APPLE IN FRIDGE.\nPlan:") || strings.Count(up, "Goal:") != 1 {
		t.Errorf("upper-goal prompt %q", up)
	}
	for _, kind := range []string{"", PromptCompact, PromptCompactStateFirst, PromptCompact + PromptUpperGoal, PromptCompactStateFirst + PromptUpperGoal,
		PromptCompact + PromptGoalTrace, PromptCompactStateFirst + PromptUpperGoal + PromptGoalTrace,
		PromptCompact + PromptGoalTraceAll, PromptCompactStateFirst + PromptUpperGoal + PromptGoalTraceAll} {
		if got := (PromptOptions{}).WithKind(kind).Kind(); got != kind {
			t.Errorf("WithKind(%q).Kind() = %q", kind, got)
		}
	}
	if o := (PromptOptions{Compact: true, StateFirst: true, UpperGoal: true, GoalTrace: true}).WithKind("llama-chat" + PromptUpperGoal + PromptGoalTrace); o.Compact || o.StateFirst || o.UpperGoal || o.GoalTrace {
		t.Errorf("WithKind of an unknown kind keeps the compact prompt: %+v", o)
	}
}

// TestPromptTrace: the goal trace is on only for a compact, goal-traced
// prompt, in capitals where the goal is, and its facts are the goal's as
// the prompt writes them.
func TestPromptTrace(t *testing.T) {
	var lex, alts *lexicon.Bound // a PlanBench task, a task whose goal has alternatives
	for _, tt := range datasetTasks(t, 40) {
		if lex == nil && strings.HasPrefix(tt.Name, "planbench/") {
			lex = tt.Lex
		}
		if alts == nil && len(tt.Task().Goal) > 1 {
			alts = tt.Lex
		}
	}
	if lex == nil || alts == nil {
		t.Fatal("no PlanBench task, or no goal with alternatives")
	}
	kind := PromptCompactStateFirst + PromptUpperGoal + PromptGoalTrace
	tr := PromptOptions{}.WithKind(kind).Trace(lex)
	if tr == nil {
		t.Fatalf("no trace for %s and a goal of facts", kind)
	}
	got := tr(lex.Task().Init)
	if !strings.HasPrefix(got, "left: ") || got != "left: "+strings.ToUpper(strings.TrimPrefix(got, "left: ")) {
		t.Errorf("trace %q: want the goal's facts in capitals", got)
	}
	// Every goal fact not in the initial state is in the trace, as the
	// prompt's goal writes it.
	prompt := Messages(lex, PromptOptions{}.WithKind(kind))[0].Content
	for _, f := range strings.Split(strings.TrimPrefix(got, "left: "), "; ") {
		if !strings.Contains(prompt, "- "+f+"\n") {
			t.Errorf("trace fact %q is not a goal line of the prompt", f)
		}
	}
	// Every task is traced with -goal-trace-all, a goal of one conjunction
	// as with -goal-trace.
	all := PromptOptions{}.WithKind(PromptCompactStateFirst + PromptUpperGoal + PromptGoalTraceAll)
	if got := all.Trace(lex)(lex.Task().Init); got != tr(lex.Task().Init) {
		t.Errorf("-goal-trace-all on one conjunction: %q, want -goal-trace's %q", got, tr(lex.Task().Init))
	}
	if PromptOptions.WithKind(PromptOptions{}, kind).Trace(alts) != nil {
		t.Error("-goal-trace traces a goal with alternatives")
	}
	if tra := all.Trace(alts); tra == nil || !strings.HasPrefix(tra(alts.Task().Init), "left: ") {
		t.Error("-goal-trace-all: no trace for a goal with alternatives")
	}
	for name, o := range map[string]PromptOptions{
		"no goal trace": PromptOptions{}.WithKind(PromptCompactStateFirst + PromptUpperGoal),
		"full prompt":   {GoalTrace: true},
	} {
		if o.Trace(lex) != nil {
			t.Errorf("%s: a trace", name)
		}
	}
}
