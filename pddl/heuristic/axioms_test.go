package heuristic_test

import (
	"context"
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
	d, _, err := pddl.ParseDomain("d.pddl", []byte(roomsDomain))
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := pddl.ParseProblem("p.pddl", []byte(`(define (problem p) (:domain rooms) (:objects r1 r2 r3 - room)
 (:init (at r1) (door r1 r2) (door r2 r3)) (:goal `+goal+`))`))
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
