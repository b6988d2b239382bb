package train

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/constraint"
	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/models"
)

// TestGoalTraceDemos: with the goal trace, every action of a Blocksworld
// or VirtualHome demonstration (goals of one conjunction) carries the trace
// of the state it leads to, the last one "left: none"; the DAgger
// demonstrations of a prior rolled out with the trace carry it on their
// prefix and plan alike; and the constraint built from the GGUF's prompt
// kind follows every plan token, while a model whose kind has no trace
// leaves the traced examples unconstrained (so the kind is what decides).
func TestGoalTraceDemos(t *testing.T) {
	ctx := context.Background()
	prompt := decoder.PromptOptions{Compact: true, StateFirst: true, UpperGoal: true, GoalTrace: true}
	opts := DemoOptions{Prompt: prompt, Limit: 4}
	bw, demos := blocksDemos(t, 4, 3, opts)
	vh := virtualHomeTrain(t)
	opts.Limit = 2
	vd, _, err := VirtualHomeDemos(ctx, vh, opts)
	if err != nil || len(vd) == 0 {
		t.Fatalf("VirtualHome: %d demonstrations, %v", len(vd), err)
	}
	demos = append(demos, vd...)
	checkTraced := func(d Demo, lines []string) {
		t.Helper()
		for i, l := range lines {
			text, tr, ok := strings.Cut(l, constraint.TraceSep)
			if !ok || text == "" || !strings.HasPrefix(tr, "left: ") {
				t.Fatalf("%s: action %d %q has no goal trace", d.ID, i, l)
			}
			if facts := strings.TrimPrefix(tr, "left: "); facts != "none" && facts != strings.ToUpper(facts) {
				t.Fatalf("%s: trace %q not in the goal's capitals", d.ID, tr)
			}
		}
	}
	for _, d := range demos {
		checkTraced(d, d.Plan)
		if last := d.Plan[len(d.Plan)-1]; !strings.HasSuffix(last, "left: none") {
			t.Fatalf("%s: the last action %q does not reach the goal's trace", d.ID, last)
		}
	}

	_, path := tinyPriorKind(t, demos, 800, prompt.Kind())
	lm, err := models.Load(ctx, path, models.Options{Threads: 1, Sequences: 2, ContextLength: 2048})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lm.Close() })
	src := Sources{Blocksworld: bw, VirtualHome: vh}
	dd, _, err := DAggerDemos(ctx, []models.LM{lm}, src, demos, DAggerOptions{Points: 2, MaxActions: 10, Prompt: prompt})
	if err != nil || len(dd) == 0 {
		t.Fatalf("DAgger: %d demonstrations, %v", len(dd), err)
	}
	for _, d := range dd {
		checkTraced(d, d.Prefix)
		checkTraced(d, d.Plan)
	}
	all := append(slices.Clone(demos), dd...)
	ex, err := Tokenize(lm, all)
	if err != nil {
		t.Fatal(err)
	}
	left, err := ConstrainedSets(ctx, lm, src, all, ex)
	if err != nil || left != 0 {
		t.Fatalf("constrained sets: %d of %d examples left the constraint, %v", left, len(ex), err)
	}

	_, plain := tinyPriorKind(t, demos, 800, decoder.PromptOptions{Compact: true, StateFirst: true, UpperGoal: true}.Kind())
	lp, err := models.Load(ctx, plain, models.Options{Threads: 1, Sequences: 1, ContextLength: 2048})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lp.Close() })
	ex, err = Tokenize(lp, demos)
	if err != nil {
		t.Fatal(err)
	}
	if left, err := ConstrainedSets(ctx, lp, src, demos, ex); err != nil || left != len(demos) {
		t.Fatalf("a model without the trace: %d of %d traced examples left the constraint, %v", left, len(demos), err)
	}
}

// TestGoalTraceAllDemos: with GoalTraceAll every action of an ALFWorld
// demonstration carries a trace, the last one "left: none", also where the
// goal has alternatives, which GoalTrace alone leaves untraced (the
// first games of the training split include such goals).
func TestGoalTraceAllDemos(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(testenv.Datasets(t), "alfworld", "valid_train")
	prompt := decoder.PromptOptions{Compact: true, StateFirst: true, UpperGoal: true, GoalTrace: true}
	conj, _, err := ALFWorldDemos(ctx, dir, DemoOptions{Prompt: prompt, Limit: 6})
	if err != nil {
		t.Fatal(err)
	}
	prompt.GoalTraceAll = true
	all, _, err := ALFWorldDemos(ctx, dir, DemoOptions{Prompt: prompt, Limit: 6})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(conj) || len(all) == 0 {
		t.Fatalf("%d demonstrations with GoalTraceAll, %d without", len(all), len(conj))
	}
	untraced := 0
	for i, d := range all {
		if !strings.Contains(conj[i].Plan[0], constraint.TraceSep) {
			untraced++
		}
		for j, l := range d.Plan {
			text, tr, ok := strings.Cut(l, constraint.TraceSep)
			if !ok || text == "" || !strings.HasPrefix(tr, "left: ") {
				t.Fatalf("%s: action %d %q has no goal trace", d.ID, j, l)
			}
			if plain, _, _ := strings.Cut(conj[i].Plan[j], constraint.TraceSep); plain != text {
				t.Fatalf("%s: action %d %q, without GoalTraceAll %q: the trace changed the plan", d.ID, j, text, plain)
			}
		}
		if last := d.Plan[len(d.Plan)-1]; !strings.HasSuffix(last, "left: none") {
			t.Fatalf("%s: the last action %q does not reach the goal's trace", d.ID, last)
		}
	}
	if untraced == 0 {
		t.Fatal("every demonstration is traced without GoalTraceAll: no goal with alternatives was tried")
	}
}
