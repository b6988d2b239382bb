package pddl

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// groundSrc parses and grounds inline PDDL.
func groundSrc(t *testing.T, domain, problem string) *Task {
	t.Helper()
	d, _, err := ParseDomain("d.pddl", []byte(domain))
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := ParseProblem("p.pddl", []byte(problem))
	if err != nil {
		t.Fatal(err)
	}
	task, err := Ground(d, p)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// run executes a plan text and returns the result.
func run(t *testing.T, task *Task, plan string) ValidationResult {
	t.Helper()
	steps, err := ParsePlan("plan", []byte(plan))
	if err != nil {
		t.Fatal(err)
	}
	return task.Validate(steps)
}

func holdsFact(task *Task, s State, f string) bool {
	for _, id := range s.Facts() {
		if task.Facts[id].String() == f {
			return true
		}
	}
	return false
}

func TestBlocksworldValidation(t *testing.T) {
	task := groundSrc(t, bwDomain, bwProblem)
	tests := []struct {
		name, plan   string
		valid, goal  bool
		failed       int
		errorHas     string
		goalErrorHas string
	}{
		{"solves", "(pick-up a)\n(stack a b)", true, true, -1, "", ""},
		{"misses goal", "(pick-up a)\n(put-down a)", true, false, -1, "", "(on a b) is false"},
		{"fluent precondition", "(pick-up a)\n(pick-up b)", false, false, 1, "plan:2:1: step 2 (pick-up b): precondition (ontable b) is false (d.pddl:8:", ""},
		{"negation shown", "(unstack b c)\n(stack b b)", false, false, 1, "precondition (clear b) is false", ""},
		{"unknown action", "(fly a)", false, false, 0, `step 1 (fly a): unknown action "fly"`, ""},
		{"arity", "(pick-up a b)", false, false, 0, "action pick-up takes 1 argument(s) (?x - block), got 2", ""},
		{"unknown object", "(pick-up z)", false, false, 0, `unknown object "z"`, ""},
		{"empty plan", "", true, false, -1, "", "(on a b) is false"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, task, tc.plan)
			if r.Valid != tc.valid || r.GoalReached != tc.goal || r.FailedStep != tc.failed {
				t.Fatalf("got %+v", r)
			}
			if !strings.Contains(r.Error, tc.errorHas) || (tc.errorHas == "") != (r.Error == "") {
				t.Fatalf("error %q, want it to contain %q", r.Error, tc.errorHas)
			}
			if !strings.Contains(r.GoalError, tc.goalErrorHas) || (tc.goalErrorHas == "") != (r.GoalError == "") {
				t.Fatalf("goal error %q, want it to contain %q", r.GoalError, tc.goalErrorHas)
			}
			if want := r.FailedStep + 1; r.FailedStep >= 0 && len(r.States) != want {
				t.Fatalf("%d states, want %d", len(r.States), want)
			}
		})
	}
}

const semDomain = `(define (domain sem)
 (:requirements :adl :action-costs)
 (:types thing - object light box - thing)
 (:predicates (done ?x - thing) (flag) (on ?l - light) (toggled ?l - light) (p) (q ?x - thing)
              (red ?x - thing) (in ?x - thing ?b - box) (marked ?x - thing) (any-marked) (all-marked))
 (:functions (total-cost) - number (weight ?x - thing) - number)
 (:action once :parameters (?x - thing) :precondition (not (done ?x)) :effect (and (done ?x) (increase (total-cost) (weight ?x))))
 (:action need-no-flag :parameters () :precondition (not (flag)) :effect (p))
 (:action clear-flag :parameters () :precondition (flag) :effect (not (flag)))
 (:action toggle :parameters (?l - light)
   :effect (and (toggled ?l) (when (on ?l) (not (on ?l))) (when (not (on ?l)) (on ?l)) (increase (total-cost) 3)))
 (:action readd :parameters () :precondition (p) :effect (and (not (p)) (p)))
 (:action either-way :parameters (?x - thing) :precondition (or (red ?x) (done ?x)) :effect (q ?x))
 (:action pair :parameters (?x ?y - thing) :precondition (and (not (= ?x ?y)) (red ?x) (red ?y)) :effect (marked ?x))
 (:action mark-all :parameters (?b - box) :precondition (forall (?x - thing) (imply (in ?x ?b) (red ?x)))
   :effect (forall (?x - thing) (when (in ?x ?b) (marked ?x))))
 (:action check-any :parameters () :precondition (exists (?x - thing) (marked ?x)) :effect (any-marked))
)`

const semProblem = `(define (problem s1) (:domain sem)
 (:objects l1 l2 - light b1 b2 - box t1 t2 - thing)
 (:init (flag) (on l1) (red t1) (red t2) (red l1) (in t1 b1) (in t2 b1) (in l2 b2)
        (= (weight t1) 4) (= (weight t2) 0) (= (weight l1) 1) (= (weight l2) 1) (= (weight b1) 1) (= (weight b2) 1))
 (:goal (and (any-marked) (not (flag)))))`

func TestADLSemantics(t *testing.T) {
	task := groundSrc(t, semDomain, semProblem)
	tests := []struct {
		name, plan string
		valid      bool
		holds      []string
		missing    []string
		cost       int
		errorHas   string
	}{
		// (done t1) is never in the initial state: its negation holds.
		{name: "negative precondition on a fact never added", plan: "(once t1)", valid: true, holds: []string{"(done t1)"}, cost: 4},
		{name: "negative precondition after the fact was added", plan: "(once t1)\n(once t1)", errorHas: "precondition (not (done t1)) is false (d.pddl:7:"},
		// (flag) holds initially, so (not (flag)) is false until it is deleted.
		{name: "negative precondition on an initial fact", plan: "(need-no-flag)", errorHas: "(not (flag)) is false"},
		{name: "negative precondition after delete", plan: "(clear-flag)\n(need-no-flag)", valid: true, holds: []string{"(p)"}, missing: []string{"(flag)"}},
		// Conditional effects are evaluated in the state before the action.
		{name: "toggle off", plan: "(toggle l1)", valid: true, holds: []string{"(toggled l1)"}, missing: []string{"(on l1)"}, cost: 3},
		{name: "toggle on", plan: "(toggle l2)", valid: true, holds: []string{"(on l2)", "(toggled l2)"}, cost: 3},
		{name: "toggle twice", plan: "(toggle l1)\n(toggle l1)", valid: true, holds: []string{"(on l1)"}, cost: 6},
		// Add after delete: the fact holds afterwards.
		{name: "add after delete", plan: "(clear-flag)\n(need-no-flag)\n(readd)", valid: true, holds: []string{"(p)"}},
		{name: "disjunction first branch", plan: "(either-way t1)", valid: true, holds: []string{"(q t1)"}},
		{name: "disjunction second branch", plan: "(once b1)\n(either-way b1)", valid: true, holds: []string{"(q b1)"}, cost: 1},
		{name: "disjunction false", plan: "(either-way b1)", errorHas: "precondition (or (red b1) (done b1)) is false"},
		{name: "equality folded", plan: "(pair t1 t1)", errorHas: "precondition (not (= t1 t1)) is false"},
		{name: "inequality", plan: "(pair t1 t2)", valid: true, holds: []string{"(marked t1)"}},
		{name: "static precondition named", plan: "(pair t1 b1)", errorHas: "precondition (red b1) is false"},
		{name: "forall with imply and universal effect", plan: "(mark-all b1)", valid: true, holds: []string{"(marked t1)", "(marked t2)"}, missing: []string{"(marked l2)"}},
		{name: "forall false names the counterexample", plan: "(mark-all b2)", errorHas: "is false for ?x=l2: (imply (in l2 b2) (red l2)) is false"},
		{name: "exists", plan: "(mark-all b1)\n(check-any)", valid: true, holds: []string{"(any-marked)"}},
		{name: "exists false", plan: "(check-any)", errorHas: "(exists (?x - thing) (marked ?x)) is false"},
		{name: "type of argument", plan: "(toggle t1)", errorHas: "object t1 is not of type light (parameter ?l of toggle)"},
		{name: "cost from function", plan: "(once t2)\n(once l1)", valid: true, cost: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, task, tc.plan)
			if r.Valid != tc.valid {
				t.Fatalf("valid=%v, want %v: %s", r.Valid, tc.valid, r.Error)
			}
			if !strings.Contains(r.Error, tc.errorHas) {
				t.Fatalf("error %q, want it to contain %q", r.Error, tc.errorHas)
			}
			if !r.Valid {
				return
			}
			last := r.States[len(r.States)-1]
			for _, f := range tc.holds {
				if !holdsFact(task, last, f) {
					t.Errorf("%s does not hold:\n%s", f, task.FormatState(last, false))
				}
			}
			for _, f := range tc.missing {
				if holdsFact(task, last, f) {
					t.Errorf("%s holds", f)
				}
			}
			if r.Cost != tc.cost {
				t.Errorf("cost %d, want %d", r.Cost, tc.cost)
			}
		})
	}
	// Static facts are folded away; the disjunction gives two ground actions.
	if id := task.FactID(Fact{Predicate: "red", Args: []string{"t1"}}); id != -1 {
		t.Errorf("static fact (red t1) is fluent fact %d", id)
	}
	if !slices.ContainsFunc(task.Static, func(f Fact) bool { return f.String() == "(red t1)" }) {
		t.Errorf("(red t1) missing from Static")
	}
	if ids := task.LookupAction("EITHER-WAY", []string{"T1"}); len(ids) != 2 {
		t.Errorf("either-way t1 has %d ground actions, want 2 (red t1 is static and true, but (done t1) gives a second disjunct)", len(ids))
	}
	if ids := task.LookupAction("pair", []string{"t1", "t1"}); len(ids) != 0 {
		t.Errorf("pair t1 t1 was grounded: equality not folded")
	}
	if !task.HasCosts {
		t.Error("HasCosts is false")
	}
}

func TestGoalForms(t *testing.T) {
	tests := []struct {
		name, goal string
		disjuncts  int
		initGoal   bool
		errorHas   string
	}{
		{name: "empty goal holds everywhere", goal: "(and)", disjuncts: 1, initGoal: true},
		{name: "static goal true", goal: "(red t1)", disjuncts: 1, initGoal: true},
		{name: "static goal false", goal: "(red b1)", disjuncts: 0},
		{name: "unreachable goal", goal: "(in t1 b2)", disjuncts: 0},
		{name: "disjunctive", goal: "(or (any-marked) (p) (red b1))", disjuncts: 2},
		{name: "existential", goal: "(exists (?x - thing) (and (red ?x) (marked ?x)))", disjuncts: 3},
		{name: "universal", goal: "(forall (?x - thing) (imply (in ?x b1) (marked ?x)))", disjuncts: 1},
		{name: "contradiction", goal: "(and (p) (not (p)))", errorHas: "p.pddl:2:8: the goal is contradictory"},
		// 2^17 disjuncts: disjunctions are compiled into derived predicates
		// (one at a time, largest first) until 2^8 = 256 are left.
		{name: "too many disjuncts", goal: manyDisjuncts(17), disjuncts: 256},
	}
	d, _, err := ParseDomain("d.pddl", []byte(semDomain))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var objs, weights strings.Builder
			for i := 3; i <= 20; i++ {
				fmt.Fprintf(&objs, " x%d", i)
				fmt.Fprintf(&weights, " (= (weight x%d) 1)", i)
			}
			src := "(define (problem g) (:domain sem) (:objects l1 l2 - light b1 b2 - box t1 t2" + objs.String() + " - thing) (:init (red t1) (red t2) (red l1) (in t1 b1) (flag) (= (weight t1) 1) (= (weight t2) 1) (= (weight l1) 1) (= (weight l2) 1) (= (weight b1) 1) (= (weight b2) 1)" + weights.String() + ") (:goal " + tc.goal + "))"
			src = strings.Replace(src, "(:goal", "\n(:goal", 1)
			p, _, err := ParseProblem("p.pddl", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			task, err := Ground(d, p)
			if tc.errorHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errorHas) {
					t.Fatalf("error %v, want %q", err, tc.errorHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(task.Goal) != tc.disjuncts || task.GoalReached(task.Init) != tc.initGoal {
				t.Fatalf("goal %v (reached initially: %v)", task.Goal, task.GoalReached(task.Init))
			}
		})
	}
}

// manyDisjuncts is a goal whose DNF has 2^n disjuncts.
func manyDisjuncts(n int) string {
	var b strings.Builder
	b.WriteString("(and")
	for i := 3; i < 3+n; i++ {
		fmt.Fprintf(&b, " (or (q x%d) (done x%d))", i, i)
	}
	return b.String() + ")"
}

// TestGroundingJoinsIncrementally grounds an action with four parameters
// over 400 objects whose precondition is a chain of links: enumerating the
// 400^4 parameter combinations would exceed the join budget (and take
// hours), joining against reachable facts finds the 397 chains directly.
func TestGroundingJoinsIncrementally(t *testing.T) {
	const n = 400
	domain := `(define (domain chain) (:requirements :strips :typing) (:types node)
 (:predicates (link ?a ?b - node) (at ?a - node) (seen ?a ?b ?c ?d - node))
 (:action hop3 :parameters (?a ?b ?c ?d - node)
   :precondition (and (at ?a) (link ?a ?b) (link ?b ?c) (link ?c ?d))
   :effect (and (not (at ?a)) (at ?d) (seen ?a ?b ?c ?d))))`
	var objs, init strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&objs, "n%d ", i)
		if i+1 < n {
			fmt.Fprintf(&init, "(link n%d n%d) ", i, i+1)
		}
	}
	problem := fmt.Sprintf("(define (problem c) (:domain chain) (:objects %s - node) (:init (at n0) %s) (:goal (at n%d)))", objs.String(), init.String(), n-1)
	task := groundSrc(t, domain, problem)
	// From n0, hops of 3 reach n0, n3, n6, ...
	if want := (n - 1) / 3; len(task.Actions) != want {
		t.Fatalf("%d ground actions, want %d", len(task.Actions), want)
	}
	if len(task.Goal) != 1 {
		t.Fatalf("goal %v", task.Goal)
	}
}

// TestApplicableConcurrent runs successor generation and validation from
// several goroutines (run with -race to check that they only read the task).
func TestApplicableConcurrent(t *testing.T) {
	task := groundSrc(t, semDomain, semProblem)
	want := task.Applicable(task.Init, nil)
	plan, err := ParsePlan("plan", []byte("(mark-all b1)\n(toggle l1)\n(pair t1 b1)\n"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if got := task.Applicable(task.Init, nil); !slices.Equal(got, want) {
					t.Errorf("concurrent Applicable %v, want %v", got, want)
					return
				}
				// Validation (and its explanations) only reads the task too.
				if r := task.Validate(plan); r.Valid || !strings.Contains(r.Error, "(red b1) is false") {
					t.Errorf("concurrent Validate: %+v", r)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestCostsDefault(t *testing.T) {
	// Without action costs every action costs 1.
	task := groundSrc(t, bwDomain, bwProblem)
	for _, a := range task.Actions {
		if a.Cost != 1 {
			t.Fatalf("%s costs %d", a.String(), a.Cost)
		}
	}
	if task.HasCosts {
		t.Fatal("HasCosts")
	}
	// With action costs, an action without an increase costs 0.
	sem := groundSrc(t, semDomain, semProblem)
	if ids := sem.LookupAction("clear-flag", nil); len(ids) != 1 || sem.Actions[ids[0]].Cost != 0 {
		t.Fatalf("clear-flag: %v", ids)
	}
	// A cost function without a value is an error at its position.
	d, _, _ := ParseDomain("d.pddl", []byte(semDomain))
	p, _, _ := ParseProblem("p.pddl", []byte(strings.Replace(semProblem, "(= (weight t1) 4)", "", 1)))
	if _, err := Ground(d, p); err == nil || !strings.Contains(err.Error(), "d.pddl:7:") || !strings.Contains(err.Error(), "(weight t1) has no initial value") {
		t.Fatalf("error %v", err)
	}
}

// TestPreconditionDNFCompiled: a precondition whose ground DNF explodes
// (2^n disjuncts for n objects) is expanded while it fits (n = 10: 1024
// ground finish actions, as before) and beyond 4096 disjuncts compiled
// into a derived predicate, as Fast Downward's translator does: one ground
// finish action whose precondition is the negation of new-axiom@0 (some ?x
// has neither p nor q), with one axiom per object. Either way finish applies
// exactly when every object has p or q.
func TestPreconditionDNFCompiled(t *testing.T) {
	domain := `(define (domain big) (:requirements :adl)
 (:predicates (p ?x) (q ?x) (done))
 (:action flip-p :parameters (?x) :effect (p ?x))
 (:action flip-q :parameters (?x) :effect (q ?x))
 (:action finish :parameters () :precondition (forall (?x) (or (p ?x) (q ?x))) :effect (done)))`
	for _, n := range []int{10, 13, 200} {
		var objs strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&objs, " o%d", i)
		}
		d, _, err := ParseDomain("d.pddl", []byte(domain))
		if err != nil {
			t.Fatal(err)
		}
		p, _, err := ParseProblem("p.pddl", []byte("(define (problem b) (:domain big) (:objects"+objs.String()+") (:init) (:goal (done)))"))
		if err != nil {
			t.Fatal(err)
		}
		task, err := Ground(d, p)
		if err != nil {
			t.Fatal(err)
		}
		fin := task.LookupAction("finish", nil)
		wantFin, wantAxioms := 1, n
		if n == 10 {
			wantFin, wantAxioms = 1<<n, 0
		}
		if len(fin) != wantFin || len(task.Axioms) != wantAxioms {
			t.Fatalf("%d objects: %d ground finish actions and %d axioms, want %d and %d", n, len(fin), len(task.Axioms), wantFin, wantAxioms)
		}
		applicable := func(s State) bool {
			for _, a := range fin {
				if task.IsApplicable(s, a) {
					return true
				}
			}
			return false
		}
		s := task.Init
		for i := 0; i < n; i++ {
			if applicable(s) {
				t.Fatalf("%d objects: finish applicable with %d of them covered", n, i)
			}
			name := "flip-p"
			if i%2 == 1 {
				name = "flip-q"
			}
			if s, _, err = task.Execute(s, name, []string{fmt.Sprintf("o%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		if !applicable(s) {
			t.Fatalf("%d objects: finish not applicable with all of them covered", n)
		}
	}
}
