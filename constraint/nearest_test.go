package constraint

import (
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/pddl"
)

// TestNearestGoalTrace checks NearestGoalTrace on hand-checked states: the
// same text as GoalTrace for a goal of one conjunction, the nearest of
// several alternatives, tied alternatives merged word by word with the
// wildcard, the first of tied alternatives that differ in shape, and none
// at the goal.
func TestNearestGoalTrace(t *testing.T) {
	withGoal := func(goal string) func(pddl.State, ...string) (string, string) {
		lex := boundTask(t, roomsDomain, strings.Replace(roomsProblem, "(:goal (and (at c) (on)))", "(:goal "+goal+")", 1))
		task := lex.Task()
		return func(s pddl.State, plan ...string) (string, string) {
			if s == nil {
				s = task.Init
			}
			for _, text := range plan {
				a, ok := lex.Lookup(s, text)
				if !ok {
					t.Fatalf("%q is not applicable", text)
				}
				s = task.Apply(s, a)
			}
			var conj string
			if tr := GoalTrace(lex, false); tr != nil {
				conj = tr(s)
			}
			return NearestGoalTrace(lex, false)(s), conj
		}
	}
	one := withGoal("(and (at c) (on))")
	tied := withGoal("(or (and (at c) (on)) (and (at b) (on)))")
	nearest := withGoal("(or (and (at c) (on)) (at b))")
	shapes := withGoal("(or (and (at c) (on)) (and (at b) (at c)))")
	upper := func(goal string) string {
		lex := boundTask(t, roomsDomain, strings.Replace(roomsProblem, "(:goal (and (at c) (on)))", "(:goal "+goal+")", 1))
		return NearestGoalTrace(lex, true)(lex.Task().Init)
	}
	for _, tc := range []struct {
		name      string
		got, conj string
		want      string
	}{
		{"one conjunction, start", first(one(nil)), second(one(nil)), "left: at c; on"},
		{"one conjunction, switched on", first(one(nil, "flip-on")), second(one(nil, "flip-on")), "left: at c"},
		{"one conjunction, goal", first(one(nil, "flip-on", "move a b", "move b c")), second(one(nil, "flip-on", "move a b", "move b c")), "left: none"},
		{"tied alternatives merged", first(tied(nil)), "", "left: at ?; on"},
		{"tied after the shared fact", first(tied(nil, "flip-on")), "", "left: at ?"},
		{"one alternative reached", first(tied(nil, "flip-on", "move a b")), "", "left: none"},
		{"the nearest alternative", first(nearest(nil)), "", "left: at b"},
		{"alternatives of other sizes tied", first(nearest(nil, "flip-on")), "", "left: at ?"},
		{"tied in other shapes after moving: the first", first(nearest(nil, "move a b", "move b c")), "", "left: on"},
		{"tied in other shapes: the first", first(shapes(nil)), "", "left: at c; on"},
		{"capitals", upper("(or (and (at c) (on)) (and (at b) (on)))"), "", "left: AT ?; ON"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: trace %q, want %q", tc.name, tc.got, tc.want)
		}
		if tc.conj != "" && tc.conj != tc.got {
			t.Errorf("%s: %q, GoalTrace writes %q", tc.name, tc.got, tc.conj)
		}
	}
}

func first(a, _ string) string  { return a }
func second(_, b string) string { return b }
