package pddl

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestStratify checks strata and cycles on hand-drawn dependency graphs.
func TestStratify(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		edges  []depEdge
		strata []int
		cycle  []int
	}{
		{name: "none", n: 2, strata: []int{0, 0}},
		{name: "positive chain", n: 3, edges: []depEdge{{0, 1, false}, {1, 2, false}}, strata: []int{0, 0, 0}},
		{name: "negative chain", n: 3, edges: []depEdge{{0, 1, true}, {1, 2, true}}, strata: []int{0, 1, 2}},
		// 2 uses 0 positively and 1 negatively; 1 negates 0.
		{name: "diamond", n: 3, edges: []depEdge{{0, 2, false}, {1, 2, true}, {0, 1, true}}, strata: []int{0, 1, 2}},
		{name: "positive recursion", n: 2, edges: []depEdge{{0, 0, false}, {0, 1, true}}, strata: []int{0, 1}},
		{name: "positive cycle", n: 3, edges: []depEdge{{0, 1, false}, {1, 0, false}, {1, 2, true}}, strata: []int{0, 0, 1}},
		{name: "negative self loop", n: 2, edges: []depEdge{{1, 1, true}}, cycle: []int{1}},
		{name: "negative cycle", n: 4, edges: []depEdge{{0, 1, false}, {1, 2, false}, {2, 0, true}, {2, 3, true}}, cycle: []int{0, 1, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			strata, cycle := stratify(tc.n, tc.edges)
			if !slices.Equal(strata, tc.strata) || !slices.Equal(cycle, tc.cycle) {
				t.Fatalf("strata %v cycle %v, want %v %v", strata, cycle, tc.strata, tc.cycle)
			}
		})
	}
}

// graphDomain: a robot on a graph of rooms. reach is the transitive closure
// of open doors from the robot (positive recursion, stratum 0); cut-off
// negates it (stratum 1); isolated needs cut-off and no neighbour to be
// derived (stratum 1, with positive use of stratum 1 and negation of 0);
// alarm negates isolated (stratum 2).
const graphDomain = `(define (domain graph) (:requirements :adl :derived-predicates)
 (:types room)
 (:predicates (at ?r - room) (door ?a ?b - room) (open ?a ?b - room)
   (reach ?r - room) (cut-off ?r - room) (isolated ?r - room) (alarm) (done))
 (:derived (reach ?r - room) (or (at ?r) (exists (?q - room) (and (reach ?q) (open ?q ?r)))))
 (:derived (cut-off ?r - room) (not (reach ?r)))
 (:derived (isolated ?r) (and (cut-off ?r) (not (exists (?q - room) (and (reach ?q) (door ?q ?r))))))
 (:derived (alarm) (exists (?r - room) (isolated ?r)))
 (:action open-door :parameters (?a ?b - room) :precondition (and (door ?a ?b) (reach ?a)) :effect (open ?a ?b))
 (:action close-door :parameters (?a ?b - room) :precondition (open ?a ?b) :effect (not (open ?a ?b)))
 (:action finish :parameters () :precondition (and (not (alarm)) (forall (?r - room) (reach ?r))) :effect (done)))`

const graphProblem = `(define (problem g) (:domain graph)
 (:objects r1 r2 r3 r4 - room)
 (:init (at r1) (door r1 r2) (door r2 r3))
 (:goal (done)))`

func TestDomainStrata(t *testing.T) {
	d, _, err := ParseDomain("d.pddl", []byte(graphDomain))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"reach": 0, "cut-off": 1, "isolated": 1, "alarm": 1}
	if !maps.Equal(d.Strata, want) {
		t.Fatalf("strata %v, want %v", d.Strata, want)
	}
	// The untyped head variable of isolated takes the declared type.
	if r := d.Derived[2]; r.Pred != "isolated" || !slices.Equal(r.Params[0].Types, []string{"room"}) {
		t.Fatalf("isolated rule %+v", r)
	}
}

// derivedNow returns the derived facts of s, sorted, as strings.
func derivedNow(task *Task, s State) []string {
	var out []string
	for _, f := range s.Facts() {
		if task.IsDerived(f) {
			out = append(out, task.Facts[f].String())
		}
	}
	slices.Sort(out)
	return out
}

// TestAxiomEvaluation follows a plan on graphDomain and checks the derived
// facts of every state against values worked out by hand.
func TestAxiomEvaluation(t *testing.T) {
	d, _, err := ParseDomain("d.pddl", []byte(graphDomain))
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := ParseProblem("p.pddl", []byte(graphProblem))
	if err != nil {
		t.Fatal(err)
	}
	task, err := Ground(d, p)
	if err != nil {
		t.Fatal(err)
	}
	// r4 has no door: it can never be reached, so (reach r4) is not even a
	// fact, (cut-off r4) always holds, (isolated r4) too (no reached
	// neighbour), hence alarm always holds; finish, which needs (reach
	// r4), is not even grounded.
	steps := []struct {
		action  string
		args    []string
		derived []string
	}{
		{"", nil, []string{"(alarm)", "(cut-off r2)", "(cut-off r3)", "(cut-off r4)", "(isolated r3)", "(isolated r4)", "(reach r1)"}},
		// r2 reached; r3 now has a reached neighbour: no longer isolated.
		{"open-door", []string{"r1", "r2"}, []string{"(alarm)", "(cut-off r3)", "(cut-off r4)", "(isolated r4)", "(reach r1)", "(reach r2)"}},
		{"open-door", []string{"r2", "r3"}, []string{"(alarm)", "(cut-off r4)", "(isolated r4)", "(reach r1)", "(reach r2)", "(reach r3)"}},
		// Closing r1->r2 cuts r2 and r3 off again (reach is recomputed
		// from scratch, not kept).
		{"close-door", []string{"r1", "r2"}, []string{"(alarm)", "(cut-off r2)", "(cut-off r3)", "(cut-off r4)", "(isolated r3)", "(isolated r4)", "(reach r1)"}},
	}
	s := task.Init
	for i, st := range steps {
		if st.action != "" {
			if s, _, err = task.Execute(s, st.action, st.args); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		if got := derivedNow(task, s); !slices.Equal(got, st.derived) {
			t.Fatalf("step %d (%s %v): derived %v, want %v", i, st.action, st.args, got, st.derived)
		}
		// EvalAxioms on a copy with stale derived facts gives the same state.
		c := s.Clone()
		for f := range task.Facts {
			if task.IsDerived(f) {
				c.Set(f)
			}
		}
		task.EvalAxioms(c)
		if !c.Equal(s) {
			t.Fatalf("step %d: EvalAxioms from all-true derived facts differs", i)
		}
		if fin := task.LookupAction("finish", nil); len(fin) != 0 {
			t.Fatalf("step %d: finish grounded as %v, but (reach r4) is unreachable", i, fin)
		}
	}
	if task.FactID(Fact{Predicate: "reach", Args: []string{"r4"}}) != -1 {
		t.Error("(reach r4) is a fact, but no door leads to r4")
	}
	// Without r4 the alarm is off once every room is reached: the goal is
	// reachable, and the plan is validated through the axioms.
	p2, _, err := ParseProblem("p.pddl", []byte(strings.Replace(graphProblem, " r4 - room", " - room", 1)))
	if err != nil {
		t.Fatal(err)
	}
	task2, err := Ground(d, p2)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := ParsePlan("plan", []byte("(open-door r1 r2)\n(open-door r2 r3)\n(finish)\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := task2.Validate(plan); !r.Valid || !r.GoalReached {
		t.Fatalf("plan rejected: %+v", r.Error)
	}
	plan, _ = ParsePlan("plan", []byte("(open-door r1 r2)\n(finish)\n"))
	if r := task2.Validate(plan); r.Valid || !strings.Contains(r.Error, "step 2 (finish)") {
		t.Fatalf("plan finishing with r3 unreached: valid=%v error %q", r.Valid, r.Error)
	}
}

func TestDerivedErrors(t *testing.T) {
	const head = "(define (domain d) (:requirements :adl :derived-predicates) (:predicates (p ?x) (q ?x) (r))\n"
	tests := []struct {
		name, src, pos, want string
	}{
		{"undeclared", head + " (:derived (s ?x) (p ?x)))", "2:13", "derived predicate s is not declared in :predicates"},
		{"arity", head + " (:derived (q ?x ?y) (p ?x)))", "2:13", "derived predicate q takes 1 argument(s), found 2"},
		{"constant head", head + " (:derived (q a) (p a)))", "2:15", "expected a variable such as ?x, found 'a'"},
		{"free variable", head + " (:derived (q ?x) (p ?y)))", "2:22", "undefined variable ?y"},
		{"shape", head + " (:derived (q ?x)))", "2:2", "expected (:derived (PREDICATE ?x ...) FORMULA)"},
		{"effect", head + " (:derived (q ?x) (p ?x))\n (:action a :parameters (?x) :effect (q ?x)))", "3:38", "effect changes derived predicate q"},
		{"self negation", head + " (:derived (r) (not (r))))", "2:13", "cannot be stratified: r depend on each other through negation"},
		{"negative cycle", head + " (:derived (q ?x) (exists (?y) (r)))\n (:derived (r) (forall (?x) (imply (q ?x) (p ?x)))))", "2:13", "cannot be stratified: q, r depend"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, _, err := ParseDomain("d.pddl", []byte(tc.src))
			if err == nil {
				t.Fatalf("no error, got %+v", d)
			}
			errorAt(t, err, tc.pos, tc.want)
		})
	}
	// A head variable of another type than declared is a warning.
	_, warns, err := ParseDomain("d.pddl", []byte("(define (domain d) (:requirements :adl :derived-predicates) (:types a b) (:predicates (p ?x - a) (q ?x - a))\n (:derived (q ?x - b) (p ?x)))"))
	if err != nil || len(warns) == 0 || !strings.Contains(warns[0].String(), "d.pddl:2:15: warning: derived predicate q: ?x is of type b, declared a") {
		t.Fatalf("warnings %v, error %v", warns, err)
	}
	// A derived predicate in :init is an error at grounding.
	d, _, err := ParseDomain("d.pddl", []byte(head+" (:derived (q ?x) (p ?x)))"))
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := ParseProblem("p.pddl", []byte("(define (problem x) (:domain d) (:objects a)\n (:init (q a)) (:goal (q a)))"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Ground(d, p); err == nil || !strings.Contains(err.Error(), "p.pddl:2:9: derived predicate q in :init") {
		t.Fatalf("error %v", err)
	}
}

// containerDomain is the embodied example: an object can be grasped
// unless it is inside something closed, a negated existential; and the
// room is left tidy when every item is open or held, a universal whose DNF
// has 2^n disjuncts over n items. Grasp alone grounds in DNF (each item is
// inside at most one reachable container: 2 disjuncts); leave's 2^n make
// the grounder compile both into derived predicates.
const containerDomain = `(define (domain containers) (:requirements :adl)
 (:types item)
 (:predicates (inside ?x ?o - item) (open ?o - item) (held ?x - item) (left))
 (:action open :parameters (?o - item) :precondition (not (open ?o)) :effect (open ?o))
 (:action take-out :parameters (?x ?o - item) :precondition (and (inside ?x ?o) (open ?o)) :effect (not (inside ?x ?o)))
 (:action grasp :parameters (?x - item)
   :precondition (not (exists (?o - item) (and (inside ?x ?o) (not (open ?o)))))
   :effect (held ?x))
 (:action leave :parameters ()
   :precondition (forall (?o - item) (or (open ?o) (held ?o)))
   :effect (left)))`

// containerProblem has n items; item i is inside item i+1 for even i.
func containerProblem(n int) string {
	var objs, init strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&objs, " i%d", i)
		if i%2 == 0 && i+1 < n {
			fmt.Fprintf(&init, " (inside i%d i%d)", i, i+1)
		}
	}
	return "(define (problem c) (:domain containers) (:objects" + objs.String() + " - item) (:init" + init.String() + ") (:goal (left)))"
}

func groundContainers(tb testing.TB, n int) *Task {
	tb.Helper()
	d, _, err := ParseDomain("d.pddl", []byte(containerDomain))
	if err != nil {
		tb.Fatal(err)
	}
	p, _, err := ParseProblem("p.pddl", []byte(containerProblem(n)))
	if err != nil {
		tb.Fatal(err)
	}
	task, err := Ground(d, p)
	if err != nil {
		tb.Fatal(err)
	}
	return task
}

// TestQuantifiedPrecondition1000 grounds the containers domain over 1,000
// items. Compiled: grasp ?x is one ground action (not new-axiom@0(?x),
// new-axiom@0(?x) :- (inside ?x ?o) (not (open ?o)): one axiom per initial
// inside, 500), leave one ground action (not new-axiom@1, new-axiom@1 :-
// (not (open ?o)) (not (held ?o)): one axiom per item, 1,000).
func TestQuantifiedPrecondition1000(t *testing.T) {
	task := groundContainers(t, 1000)
	if n := len(task.Axioms); n != 1500 {
		t.Errorf("%d axioms, want 1500", n)
	}
	for _, a := range []struct {
		name string
		args []string
	}{{"grasp", []string{"i0"}}, {"grasp", []string{"i1"}}, {"grasp", []string{"i999"}}, {"leave", nil}} {
		if n := len(task.LookupAction(a.name, a.args)); n != 1 {
			t.Errorf("%s %v: %d ground actions, want 1", a.name, a.args, n)
		}
	}
	can := func(s State, name string, args ...string) bool {
		return task.IsApplicable(s, task.LookupAction(name, args)[0])
	}
	s := task.Init
	if can(s, "grasp", "i0") || !can(s, "grasp", "i1") || !can(s, "grasp", "i999") || can(s, "leave") {
		t.Fatal("initially: i0 (inside closed i1) graspable, or i1/i999 not, or leave applicable")
	}
	s, _, err := task.Execute(s, "open", []string{"i1"})
	if err != nil {
		t.Fatal(err)
	}
	if !can(s, "grasp", "i0") || can(s, "grasp", "i2") {
		t.Fatal("after (open i1): i0 not graspable, or i2 (inside closed i3) graspable")
	}
	// Open every item but i500, which is then grasped: only then can the
	// robot leave.
	for i := 0; i < 1000; i++ {
		if i == 1 || i == 500 {
			continue
		}
		if s, _, err = task.Execute(s, "open", []string{fmt.Sprintf("i%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if can(s, "leave") {
		t.Fatal("leave applicable with i500 neither open nor held")
	}
	if s, _, err = task.Execute(s, "grasp", []string{"i500"}); err != nil {
		t.Fatal(err)
	}
	if !can(s, "leave") || !task.GoalReached(task.Apply(s, task.LookupAction("leave", nil)[0])) {
		t.Fatal("leave not applicable, or not reaching the goal, with every item open or held")
	}
}

// TestSparseQuantifierStaysDNF: over 12 items leave's DNF has 4,096
// disjuncts, within the bound: the task grounds as before, without axioms
// (grasp i0 has two ground actions, one per disjunct).
func TestSparseQuantifierStaysDNF(t *testing.T) {
	task := groundContainers(t, 12)
	if len(task.Axioms) != 0 || len(task.LookupAction("grasp", []string{"i0"})) != 2 || len(task.LookupAction("leave", nil)) != 4096 {
		t.Fatalf("%d axioms, %d grasp i0, %d leave", len(task.Axioms), len(task.LookupAction("grasp", []string{"i0"})), len(task.LookupAction("leave", nil)))
	}
}

// TestRelevantAxioms: GroundLimits.RelevantAxioms keeps the axioms whose
// heads a goal, a precondition or an effect condition needs, directly or
// through kept bodies. On graphProblem finish is not grounded (r4 has no
// door), and open-door's preconditions name (reach r1) and (reach r2) only
// (no door leaves r3): their axioms stay, all others go, and along any
// actions the facts preconditions name hold as with every axiom. With a
// door to r4, finish needs alarm and, through it, every derived fact.
func TestRelevantAxioms(t *testing.T) {
	d, _, err := ParseDomain("d.pddl", []byte(graphDomain))
	if err != nil {
		t.Fatal(err)
	}
	heads := func(task *Task) []string {
		var hs []string
		for _, ax := range task.Axioms {
			if h := task.Facts[ax.Head].String(); !slices.Contains(hs, h) {
				hs = append(hs, h)
			}
		}
		slices.Sort(hs)
		return hs
	}
	for _, tt := range []struct {
		name, problem string
		want          []string
	}{
		{"finish unreachable", graphProblem, []string{"(reach r1)", "(reach r2)"}},
		{"finish grounded", strings.Replace(graphProblem, "(door r2 r3)", "(door r2 r3) (door r3 r4)", 1), []string{
			"(alarm)", "(cut-off r1)", "(cut-off r2)", "(cut-off r3)", "(cut-off r4)",
			"(isolated r1)", "(isolated r2)", "(isolated r3)", "(isolated r4)",
			"(reach r1)", "(reach r2)", "(reach r3)", "(reach r4)"}},
	} {
		p, _, err := ParseProblem("p.pddl", []byte(tt.problem))
		if err != nil {
			t.Fatal(err)
		}
		all, _, err := GroundContext(context.Background(), d, p, GroundLimits{})
		if err != nil {
			t.Fatal(err)
		}
		rel, _, err := GroundContext(context.Background(), d, p, GroundLimits{RelevantAxioms: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := heads(rel); !slices.Equal(got, tt.want) {
			t.Errorf("%s: kept the axioms of %v, want %v", tt.name, got, tt.want)
		}
		if len(rel.Actions) != len(all.Actions) {
			t.Fatalf("%s: %d actions, %d with every axiom", tt.name, len(rel.Actions), len(all.Actions))
		}
		named := map[int]bool{}
		for _, a := range all.Actions {
			for _, f := range append(slices.Clone(a.Pre.Pos), a.Pre.Neg...) {
				named[f] = true
			}
		}
		// Every action in turn where applicable: the named facts agree.
		sa, sr := all.Init, rel.Init
		for i := range all.Actions {
			if all.IsApplicable(sa, i) != rel.IsApplicable(sr, i) {
				t.Fatalf("%s: action %d applicable in one task only", tt.name, i)
			}
			if all.IsApplicable(sa, i) {
				sa, sr = all.Apply(sa, i), rel.Apply(sr, i)
			}
			for f := range named {
				if sa.Has(f) != sr.Has(f) {
					t.Fatalf("%s, after action %d: %s differs", tt.name, i, all.Facts[f])
				}
			}
		}
	}
}
