package decoder

import (
	"github.com/nesy-dev/nesy/constraint"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/pddl"
)

// TestParseOutput maps free text to actions on PlanBench tasks with
// reference plans, rewritten in the lexicon's words and then spoiled in
// the ways a model spoils them.
func TestParseOutput(t *testing.T) {
	var tt testTask
	for _, c := range datasetTasks(t, 40) {
		if strings.HasPrefix(c.Name, "planbench/") && len(c.Gold) >= 4 {
			tt = c
			break
		}
	}
	if tt.Lex == nil {
		t.Fatal("no PlanBench task with a reference plan of 4 steps")
	}
	task := tt.Task()
	steps, err := pddl.ParsePlan("gold", []byte(strings.Join(tt.Gold, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	s := task.Init
	for _, st := range steps {
		next, a, err := task.Execute(s, st.Name, st.Args)
		if err != nil {
			t.Fatalf("reference plan: %v", err)
		}
		texts = append(texts, tt.Lex.Text(a))
		s = next
	}
	join := func(lines ...string) string { return strings.Join(lines, "\n") }
	// The reference plan as a goal-traced prior writes it (the traces as
	// the constraint would force them).
	trace := constraint.GoalTrace(tt.Lex, true)
	var traced []string
	s = task.Init
	for i, st := range steps {
		s, _, _ = task.Execute(s, st.Name, st.Args)
		traced = append(traced, texts[i]+constraint.TraceSep+trace(s))
	}
	swapped := append([]string{texts[1], texts[0]}, texts[2:]...)
	tests := []struct {
		name       string
		text       string
		opts       constraint.Options
		wantPlan   int // valid steps
		wantSteps  int
		invalidAt  int // -1: none
		reasonHas  string
		wantEnd    string
		wantGoalOK bool
	}{
		{"reference plan", join(texts...) + "\n", constraint.Options{}, len(texts), len(texts), -1, "", "", true},
		{"no final newline, blank lines and indentation", "  " + join(texts[:2]...) + "\n\n" + join(texts[2:]...), constraint.Options{}, len(texts), len(texts), -1, "", "", true},
		{"swapped steps name the failing precondition", join(swapped...), constraint.Options{}, 0, len(texts), 0, "precondition", "", false},
		{"unknown text", join(texts[0], "fly to the moon", texts[1]), constraint.Options{}, 1, 3, 1, "not the text of any action", "", false},
		{"end marker stops reading", join(texts[0], "done", "garbage"), constraint.Options{End: "done\n"}, 1, 1, -1, "", "end_marker", false},
		{"empty line as end marker", join(texts[0], "", texts[1]), constraint.Options{End: "\n"}, 1, 1, -1, "", "end_marker", false},
		{"max actions", join(texts...), constraint.Options{MaxActions: 2}, 2, 2, -1, "", "max_actions", false},
		{"goal traces are not part of the actions", join(traced...) + "\n", constraint.Options{Trace: trace}, len(texts), len(texts), -1, "", "", true},
		{"stop at goal ignores the rest", join(texts...) + "\n" + "fly to the moon", constraint.Options{StopAtGoal: true}, len(texts), len(texts), -1, "", "goal", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ParseOutput(tt.Lex, tc.text, tc.opts)
			if len(p.Plan) != tc.wantPlan || p.Steps != tc.wantSteps || p.EndReason != tc.wantEnd {
				t.Fatalf("plan %d steps %d end %q, want %d %d %q", len(p.Plan), p.Steps, p.EndReason, tc.wantPlan, tc.wantSteps, tc.wantEnd)
			}
			if tc.invalidAt < 0 {
				if p.FirstInvalid != nil {
					t.Fatalf("unexpected invalid step %+v", p.FirstInvalid)
				}
			} else if p.FirstInvalid == nil || p.FirstInvalid.Step != tc.invalidAt || !strings.Contains(p.FirstInvalid.Reason, tc.reasonHas) {
				t.Fatalf("first invalid %+v, want step %d with %q", p.FirstInvalid, tc.invalidAt, tc.reasonHas)
			}
			lines := make([]string, len(p.Plan))
			for i, a := range p.Plan {
				lines[i] = task.Actions[a].String()
			}
			vr := validatePlanText(t, task, lines)
			if !vr.Valid || vr.GoalReached != tc.wantGoalOK {
				t.Fatalf("validator: valid %v goal %v (%s)", vr.Valid, vr.GoalReached, vr.Error)
			}
			if p.FirstInvalid != nil && p.FirstInvalid.Reason != "" && tc.reasonHas == "precondition" {
				// Same reason as the validator gives for the spoiled step.
				bad, _ := pddl.ParsePlan("bad", []byte(task.Actions[tt.Lex.Actions(p.FirstInvalid.Text)[0]].String()))
				if r := task.Validate(bad); !strings.Contains(r.Error, strings.SplitN(p.FirstInvalid.Reason, ": ", 2)[1]) {
					t.Fatalf("reason %q differs from the validator's %q", p.FirstInvalid.Reason, r.Error)
				}
			}
		})
	}
}
