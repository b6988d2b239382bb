package heuristic_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/pddl/heuristic"
	"github.com/nesy-dev/nesy/pddl/search"
)

// roomsDomain: reach is derived (the rooms connected to the robot's by
// open doors, positive recursion); opening a door needs its near side
// reached.
const roomsDomain = `(define (domain rooms) (:requirements :adl :derived-predicates)
 (:types room)
 (:predicates (at ?r - room) (door ?a ?b - room) (open ?a ?b - room) (reach ?r - room))
 (:derived (reach ?r - room) (or (at ?r) (exists (?q - room) (and (reach ?q) (open ?q ?r)))))
 (:action open-door :parameters (?a ?b - room) :precondition (and (door ?a ?b) (reach ?a)) :effect (open ?a ?b)))`

func roomsTask(t *testing.T, goal string) *pddl.Task {
	t.Helper()
	return groundText(t, roomsDomain, `(define (problem p) (:domain rooms) (:objects r1 r2 r3 - room)
 (:init (at r1) (door r1 r2) (door r2 r3)) (:goal `+goal+`))`)
}

// groundText parses and grounds a domain and a problem given as text.
func groundText(t *testing.T, domain, problem string) *pddl.Task {
	t.Helper()
	d, _, err := pddl.ParseDomain("d.pddl", []byte(domain))
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := pddl.ParseProblem("p.pddl", []byte(problem))
	if err != nil {
		t.Fatal(err)
	}
	task, err := pddl.Ground(d, p)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// TestHeuristicsOverAxioms: axioms are zero-cost relaxed rules. For the goal
// (reach r3), by hand: (open r1 r2) costs 1 (its precondition (reach r1)
// holds), so (reach r2) costs 1 through its axiom (h_add 0+1, h_max 1);
// (open r2 r3) then costs 1+1 = 2; (reach r3) = (reach r2) + (open r2 r3)
// = 3 under h_add, max(1, 2) = 2 under h_max; the relaxed plan is the two
// open-door actions, h_FF 2. Adding (not (reach r2)) to the goal makes the
// real task unsolvable (nothing undoes reach), but a negated derived
// condition is relaxed to true: the same values, no dead end.
func TestHeuristicsOverAxioms(t *testing.T) {
	for _, goal := range []string{"(reach r3)", "(and (reach r3) (not (reach r2)))"} {
		task := roomsTask(t, goal)
		if len(task.Axioms) == 0 {
			t.Fatal("no axioms")
		}
		for _, c := range []struct {
			spec string
			want float64
		}{{"add", 3}, {"max", 2}, {"ff", 2}, {"goalcount", 1}} {
			h, err := heuristic.New(c.spec, task)
			if err != nil {
				t.Fatal(err)
			}
			if v, dead := h.Eval(task.Init); dead || v != c.want {
				t.Errorf("goal %s: %s = %v (dead end %v), want %v", goal, c.spec, v, dead, c.want)
			}
		}
		for _, spec := range []string{"lmcut", "mix(1*ff+1*lmcut)"} {
			if _, err := heuristic.New(spec, task); err == nil || !strings.Contains(err.Error(), "lmcut does not support axioms") {
				t.Errorf("%s: error %v", spec, err)
			}
		}
	}
	task := roomsTask(t, "(reach r3)")
	helpful, err := search.HelpfulActions(task, false)
	if err != nil {
		t.Fatal(err)
	}
	want := task.LookupAction("open-door", []string{"r1", "r2"})
	if got := helpful(task.Init, nil); !slices.Equal(got, want) {
		t.Errorf("helpful actions %v, want %v (open-door r1 r2)", got, want)
	}
	for _, alg := range []string{search.GBFS, search.Lazy, search.AStar} {
		opts := search.Options{Algorithm: alg, PreferredOperators: alg != search.AStar}
		if alg == search.AStar {
			h, _ := heuristic.New("max", task)
			opts.Heuristic = h
		}
		r, err := search.Solve(context.Background(), task, opts)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != search.Solved || len(r.Plan) != 2 || math.IsInf(r.InitialH, 0) {
			t.Errorf("%s: %v, plan %v", alg, r.Status, r.Plan)
		}
	}
}

// gatesDomain: finish needs (not (bad)), bad holds while some object has
// both x and y; clearing x or y needs the object clearable. finish2 needs
// (not (p)), where p and q derive each other (a cycle).
const gatesDomain = `(define (domain gates) (:requirements :adl :derived-predicates)
 (:types obj)
 (:predicates (x ?o - obj) (y ?o - obj) (clearable ?o - obj) (bad) (done) (done2) (p) (q) (c))
 (:derived (bad) (exists (?o - obj) (and (x ?o) (y ?o))))
 (:derived (p) (q))
 (:derived (q) (or (p) (c)))
 (:action clear-x :parameters (?o - obj) :precondition (and (clearable ?o) (x ?o)) :effect (not (x ?o)))
 (:action clear-y :parameters (?o - obj) :precondition (and (clearable ?o) (y ?o)) :effect (not (y ?o)))
 (:action clear-c :precondition (c) :effect (not (c)))
 (:action finish :precondition (not (bad)) :effect (done))
 (:action finish2 :precondition (not (p)) :effect (done2)))`

// gatesTask grounds gatesDomain with n objects o1..on, each with x and y,
// all but the first `stuck` clearable.
func gatesTask(t *testing.T, n, stuck int, goal string) *pddl.Task {
	t.Helper()
	var objs, init strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&objs, " o%d", i)
		fmt.Fprintf(&init, " (x o%d) (y o%d)", i, i)
		if i > stuck {
			fmt.Fprintf(&init, " (clearable o%d)", i)
		}
	}
	return groundText(t, gatesDomain, `(define (problem p) (:domain gates) (:objects`+objs.String()+` - obj)
 (:init (c)`+init.String()+`) (:goal `+goal+`))`)
}

// TestNegatedAxioms checks the ":negax" relaxation (Fast Downward's
// approximate_negative_cycles) against values worked out by hand. With n
// objects, not(bad) <- for every o, not(x o) or not(y o): 2^n disjuncts of
// n complements, each complement one clear action away, so reaching done
// costs n+1 under h_add and h_FF (the real optimum) and 2 under h_max;
// without :negax (not (bad)) is relaxed to true and every value is 1. Past
// 512 disjuncts (n = 10: 1,024) the negation is relaxed to true again. An
// object that cannot be cleared makes done unreachable: a dead end that
// only :negax sees. p is on a cycle (p <- q <- p), so not(p) stays true
// under :negax too, although done2 is unreachable while c holds.
func TestNegatedAxioms(t *testing.T) {
	for _, c := range []struct {
		n, stuck int
		goal     string
		spec     string
		want     float64 // +Inf: a dead end
	}{
		{3, 0, "(done)", "add", 1},
		{3, 0, "(done)", "ff", 1},
		{3, 0, "(done)", "add:negax", 4},
		{3, 0, "(done)", "max:negax", 2},
		{3, 0, "(done)", "ff:negax", 4},
		{5, 0, "(done)", "ff:negax", 6},
		{10, 0, "(done)", "ff:negax", 1},
		{3, 1, "(done)", "ff", 1},
		{3, 1, "(done)", "ff:negax", math.Inf(1)},
		{3, 1, "(done)", "max:negax", math.Inf(1)},
		{3, 0, "(done2)", "ff:negax", 1},
		{3, 0, "(done2)", "add:negax", 1},
	} {
		task := gatesTask(t, c.n, c.stuck, c.goal)
		h, err := heuristic.New(c.spec, task)
		if err != nil {
			t.Fatal(err)
		}
		if v, dead := h.Eval(task.Init); v != c.want || dead != math.IsInf(c.want, 1) {
			t.Errorf("n=%d stuck=%d goal %s: %s = %v (dead end %v), want %v", c.n, c.stuck, c.goal, c.spec, v, dead, c.want)
		}
		if !strings.Contains(c.spec, ":negax") {
			continue
		}
		// Once every clearable object is cleared, bad is false and not(bad)
		// holds in the state: done is one action away.
		s := task.Init.Clone()
		for i := c.stuck + 1; i <= c.n; i++ {
			act := task.LookupAction("clear-x", []string{fmt.Sprintf("o%d", i)})
			if len(act) != 1 || !task.IsApplicable(s, act[0]) {
				t.Fatalf("clear-x o%d: not applicable", i)
			}
			s = task.Apply(s, act[0])
		}
		if c.stuck == 0 && c.goal == "(done)" {
			if v, dead := h.Eval(s); dead || v != 1 {
				t.Errorf("n=%d: %s after clearing = %v (dead end %v), want 1", c.n, c.spec, v, dead)
			}
		}
	}
}
