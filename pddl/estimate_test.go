package pddl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// wideDomain is the 443-byte request of issue 17: an action with n
// parameters, no precondition and a 0-ary effect, so every combination of
// objects is a ground action.
func wideDomain(n int) string {
	var ps strings.Builder
	for i := range n {
		fmt.Fprintf(&ps, "?x%d ", i)
	}
	return fmt.Sprintf(`(define (domain wide) (:requirements :strips :typing) (:types block)
 (:predicates (g))
 (:action a :parameters (%s- block) :precondition (and) :effect (g)))`, ps.String())
}

func blocksProblem(domain string, n int) string {
	var objs strings.Builder
	for i := range n {
		fmt.Fprintf(&objs, "b%d ", i)
	}
	return fmt.Sprintf("(define (problem p) (:domain %s) (:objects %s- block) (:init) (:goal (g)))", domain, objs.String())
}

// linkDomain joins a static relation: (link ?a ?b) holds for 3 of the 10x10
// pairs, so the estimate is 3, not 100.
const linkDomain = `(define (domain links) (:requirements :strips :typing) (:types node)
 (:predicates (link ?a ?b - node) (at ?a - node))
 (:action go :parameters (?a ?b - node) :precondition (and (at ?a) (link ?a ?b))
   :effect (and (not (at ?a)) (at ?b))))`

const linkProblem = `(define (problem l) (:domain links)
 (:objects n0 n1 n2 n3 n4 n5 n6 n7 n8 n9 - node)
 (:init (at n0) (link n0 n1) (link n1 n2) (link n2 n3))
 (:goal (at n3)))`

func parseBoth(t *testing.T, domain, problem string) (*Domain, *Problem) {
	t.Helper()
	d, _, err := ParseDomain("d.pddl", []byte(domain))
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := ParseProblem("p.pddl", []byte(problem))
	if err != nil {
		t.Fatal(err)
	}
	return d, p
}

func TestGroundLimits(t *testing.T) {
	chainD := `(define (domain chain) (:requirements :strips :typing) (:types node)
 (:predicates (link ?a ?b - node) (at ?a - node))
 (:action hop3 :parameters (?a ?b ?c ?d - node)
   :precondition (and (at ?a) (link ?a ?b) (link ?b ?c) (link ?c ?d))
   :effect (and (not (at ?a)) (at ?d))))`
	var objs, init strings.Builder
	for i := range 400 {
		fmt.Fprintf(&objs, "n%d ", i)
		if i+1 < 400 {
			fmt.Fprintf(&init, "(link n%d n%d) ", i, i+1)
		}
	}
	chainP := fmt.Sprintf("(define (problem c) (:domain chain) (:objects %s - node) (:init (at n0) %s) (:goal (at n399)))", objs.String(), init.String())

	tests := []struct {
		name            string
		domain, problem string
		lim             GroundLimits
		// wantErr is "" for success, else a substring of the error.
		wantErr  string
		what     string  // LimitError.What
		estimate float64 // LimitError.Estimate
		counted  bool    // LimitError.Count > 0
		actions  int     // ground actions on success
	}{
		{
			// 20^6 = 64,000,000 ground actions, refused before any join.
			name: "443-byte request refused by the estimate", domain: wideDomain(6), problem: blocksProblem("wide", 20),
			lim:     GroundLimits{MaxEstimate: 1e7},
			wantErr: "d.pddl:3:11: action a: up to 64000000 ground actions (20 * 20 * 20 * 20 * 20 * 20), over the limit of 10000000",
			what:    "ground actions", estimate: 64e6,
		},
		{
			// 40^4 = 2,560,000 under the estimate cap: the join runs and
			// stops at the binding cap, naming the estimate.
			name: "bindings counted", domain: wideDomain(4), problem: blocksProblem("wide", 40),
			lim:     GroundLimits{MaxBindings: 1000},
			wantErr: "action a: more than 1000 join bindings (estimated up to 2560000 ground actions: 40 * 40 * 40 * 40); the task is too large to ground",
			what:    "join bindings", estimate: 2560000, counted: true,
		},
		{
			// 3 parameters over 5 objects: 125 ground actions, the count
			// cap refuses them when built.
			name: "ground actions counted", domain: wideDomain(3), problem: blocksProblem("wide", 5),
			lim:     GroundLimits{MaxActions: 100},
			wantErr: "more than 100 ground actions", what: "ground actions", estimate: 125, counted: true,
		},
		{name: "at the limits", domain: wideDomain(3), problem: blocksProblem("wide", 5),
			lim: GroundLimits{MaxActions: 125, MaxBindings: 125, MaxEstimate: 125}, actions: 125},
		{
			// (= ?x0 ?x1) makes two parameters one: 5*5, not 5*5*5.
			name: "equality unifies variables", domain: strings.Replace(wideDomain(3), ":precondition (and)", ":precondition (= ?x0 ?x1)", 1),
			problem: blocksProblem("wide", 5), lim: GroundLimits{MaxEstimate: 24},
			wantErr: "action a: up to 25 ground actions (5 * 5), over the limit of 24", what: "ground actions", estimate: 25,
		},
		{name: "equality at the limit", domain: strings.Replace(wideDomain(3), ":precondition (and)", ":precondition (= ?x0 ?x1)", 1),
			problem: blocksProblem("wide", 5), lim: GroundLimits{MaxEstimate: 25}, actions: 25},
		{
			// (= ?x2 b1): one object for ?x2.
			name: "equality with an object", domain: strings.Replace(wideDomain(3), ":precondition (and)", ":precondition (= ?x2 b1)", 1),
			problem: blocksProblem("wide", 5), lim: GroundLimits{MaxEstimate: 24},
			wantErr: "action a: up to 25 ground actions (5 * 5 * 1), over the limit of 24", what: "ground actions", estimate: 25,
		},
		{
			// The static relation prunes: 3 links, not 10*10 pairs.
			name: "static relation bounds the estimate", domain: linkDomain, problem: linkProblem,
			lim: GroundLimits{MaxEstimate: 2}, wantErr: "action go: up to 3 ground actions (3 (link)), over the limit of 2",
			what: "ground actions", estimate: 3,
		},
		{name: "static relation at the limit", domain: linkDomain, problem: linkProblem, lim: GroundLimits{MaxEstimate: 3}, actions: 3},
		{
			// A chain of 399 links n0-n1 ... n398-n399. Pruning twice by
			// the places the variables take: ?b in n1..n397, ?c in
			// n2..n398, so (link ?b ?c) keeps 397 atoms; given ?b and ?c,
			// the other two links extend a binding in at most one way
			// (their degree).
			name: "degree bounds a chain join", domain: chainD, problem: chainP,
			lim: GroundLimits{MaxEstimate: 396}, wantErr: "up to 397 ground actions (397 (link) * 1 (link) * 1 (link))",
			what: "ground actions", estimate: 397,
		},
		{name: "chain join at the limit", domain: chainD, problem: chainP, lim: GroundLimits{MaxEstimate: 397}, actions: 133},
		{
			name: "step budget", domain: chainD, problem: chainP, lim: GroundLimits{MaxSteps: 500},
			wantErr: "more than 500 grounding steps (at ", what: "grounding steps", counted: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, p := parseBoth(t, tc.domain, tc.problem)
			task, _, err := GroundContext(context.Background(), d, p, tc.lim)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(task.Actions) != tc.actions {
					t.Fatalf("%d ground actions, want %d", len(task.Actions), tc.actions)
				}
				return
			}
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("error %v (%T), want a *LimitError", err, err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q, want it to contain %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "grounding: ") {
				t.Fatalf("error %q says grounding: itself (the caller adds it)", err)
			}
			if le.What != tc.what || le.Estimate != tc.estimate || (le.Count > 0) != tc.counted {
				t.Fatalf("got What %q Estimate %g Count %d, want %q %g counted %v", le.What, le.Estimate, le.Count, tc.what, tc.estimate, tc.counted)
			}
		})
	}
}

// cancelAfter is a context whose Err reports cancellation from its n-th
// call on: it stops a grounding at a chosen point without timing.
type cancelAfter struct {
	context.Context
	n, calls int
}

func (c *cancelAfter) Err() error {
	c.calls++
	if c.calls >= c.n {
		return context.Canceled
	}
	return nil
}

func TestGroundContextCancelled(t *testing.T) {
	d, p := parseBoth(t, wideDomain(4), blocksProblem("wide", 30)) // 810,000 ground actions
	for _, n := range []int{1, 2, 10} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx := &cancelAfter{Context: context.Background(), n: n}
			task, _, err := GroundContext(ctx, d, p, GroundLimits{})
			if !errors.Is(err, context.Canceled) || task != nil {
				t.Fatalf("got %v, %v; want context.Canceled", task, err)
			}
			// Polled every ctxEvery steps: stopped after n polls, not after
			// the 810,000 bindings.
			if ctx.calls != n {
				t.Fatalf("Err called %d times, want %d", ctx.calls, n)
			}
		})
	}
}

// typeChain is a domain whose types form a chain t0 <- t1 <- ... <- t(n-1)
// and an action on the root type; the problem has one object of the
// deepest type.
func typeChain(n int) (string, string) {
	var b strings.Builder
	b.WriteString("(define (domain chain) (:requirements :strips :typing) (:types t0 - object")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, " t%d - t%d", i, i-1)
	}
	b.WriteString(") (:predicates (p ?x - t0)) (:action a :parameters (?x - t0) :precondition (p ?x) :effect (not (p ?x))))")
	return b.String(), fmt.Sprintf("(define (problem c) (:domain chain) (:objects o - t%d) (:init (p o)) (:goal (not (p o))))", n-1)
}

// TestDeepTypeChain grounds a chain of 20,000 types (issue 17: its cycle
// check was quadratic, 19 s of CPU); the object of the deepest type is of
// the root type.
func TestDeepTypeChain(t *testing.T) {
	dsrc, psrc := typeChain(20000)
	d, p := parseBoth(t, dsrc, psrc)
	task, err := Ground(d, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(task.Actions) != 1 || task.Actions[0].String() != "(a o)" {
		t.Fatalf("actions %v, want (a o)", task.Actions)
	}
}

func TestTypeCycles(t *testing.T) {
	tests := []struct {
		types string
		want  []string // the types reported as their own ancestors
	}{
		{"a - b b - c c", nil},
		{"a - a", []string{"a"}},
		{"a - b b - a c - a", []string{"a", "b"}},
		{"a - b b - c c - a d - c", []string{"a", "b", "c"}},
		{"a - (either b c) c - a", []string{"a", "c"}},
	}
	for _, tc := range tests {
		t.Run(tc.types, func(t *testing.T) {
			_, _, err := ParseDomain("d.pddl", []byte("(define (domain x) (:requirements :typing) (:types "+tc.types+"))"))
			var got []string
			var list ErrorList
			if errors.As(err, &list) {
				for _, e := range list {
					name, ok := strings.CutPrefix(e.Msg, "type ")
					name, ok2 := strings.CutSuffix(name, " is its own ancestor")
					if !ok || !ok2 {
						t.Fatalf("unexpected error %v", e)
					}
					got = append(got, name)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("cyclic %v, want %v", got, tc.want)
			}
		})
	}
}

// BenchmarkEstimateRefusal measures the refusal of the 443-byte request: the
// estimate alone, no join.
func BenchmarkEstimateRefusal(b *testing.B) {
	d, _, _ := ParseDomain("d.pddl", []byte(wideDomain(6)))
	p, _, _ := ParseProblem("p.pddl", []byte(blocksProblem("wide", 20)))
	for b.Loop() {
		if _, _, err := GroundContext(context.Background(), d, p, GroundLimits{MaxEstimate: 1e7}); err == nil {
			b.Fatal("not refused")
		}
	}
}

func TestIsSubtype(t *testing.T) {
	tests := []struct {
		name  string
		types string
		sub   []string // pairs sub anc that hold
		not   []string // pairs that do not
	}{
		{"tree", "car truck - vehicle vehicle - thing place - thing", []string{"car thing", "truck vehicle", "thing object", "car car"},
			[]string{"thing car", "car truck", "place vehicle", "car nosuch"}},
		{"either parents", "a - (either b c) b c - d", []string{"a b", "a c", "a d"}, []string{"b a", "b c"}},
		{"declared twice", "a - b a - c", []string{"a b", "a c"}, []string{"b c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, _, err := ParseDomain("d.pddl", []byte("(define (domain x) (:requirements :typing) (:types "+tc.types+"))"))
			if err != nil {
				t.Fatal(err)
			}
			tt := newTypeTree(d, nil)
			for _, want := range []bool{true, false} {
				pairs := tc.sub
				if !want {
					pairs = tc.not
				}
				for _, pair := range pairs {
					sub, anc, _ := strings.Cut(pair, " ")
					if got := tt.isSubtype(sub, anc); got != want {
						t.Errorf("isSubtype(%s, %s) = %v, want %v", sub, anc, got, want)
					}
				}
			}
		})
	}
}
