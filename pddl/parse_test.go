package pddl

import (
	"errors"
	"strings"
	"testing"
)

const bwDomain = `; blocks
(define (domain BW)
  (:requirements :strips :typing)
  (:types block)
  (:predicates (on ?x ?y - block) (ontable ?x - block) (clear ?x - block)
               (handempty) (holding ?x - block))
  (:action pick-up :parameters (?x - block)
    :precondition (and (clear ?x) (ontable ?x) (handempty))
    :effect (and (not (ontable ?x)) (not (clear ?x)) (not (handempty)) (holding ?x)))
  (:action put-down :parameters (?x - block)
    :precondition (holding ?x)
    :effect (and (not (holding ?x)) (clear ?x) (handempty) (ontable ?x)))
  (:action stack :parameters (?x ?y - block)
    :precondition (and (holding ?x) (clear ?y))
    :effect (and (not (holding ?x)) (not (clear ?y)) (clear ?x) (handempty) (on ?x ?y)))
  (:action unstack :parameters (?x ?y - block)
    :precondition (and (on ?x ?y) (clear ?x) (handempty))
    :effect (and (holding ?x) (clear ?y) (not (clear ?x)) (not (handempty)) (not (on ?x ?y)))))
`

const bwProblem = `(define (problem p1) (:domain bw)
  (:objects A B C - block)
  (:init (clear a) (clear b) (ontable a) (on b c) (ontable c) (handempty))
  (:goal (and (on a b) (on b c))))
`

// errorAt asserts that err is an ErrorList whose errors include one at
// line:col containing want.
func errorAt(t *testing.T, err error, pos, want string) {
	t.Helper()
	var el ErrorList
	if !errors.As(err, &el) {
		t.Fatalf("error %v (%T) is not an ErrorList", err, err)
	}
	for _, e := range el {
		if strings.HasSuffix(e.Pos.String(), ":"+pos) && strings.Contains(e.Msg, want) {
			return
		}
	}
	t.Fatalf("no error at %s containing %q in:\n%s", pos, want, el.Detail())
}

func TestParseDomainErrors(t *testing.T) {
	tests := []struct {
		name, src, pos, want string
	}{
		{"empty", "", "1:1", "empty input"},
		{"unclosed", "(define (domain d)\n (:predicates (p))", "1:1", "never closed"},
		{"extra paren", "(define (domain d)))", "1:20", "unexpected ')'"},
		{"not define", "(domain d)", "1:1", "expected (define"},
		{"problem not domain", "(define (problem p))", "1:9", "expected (domain NAME)"},
		{"unknown requirement", "(define (domain d) (:requirements :strips :magic))", "1:43", "unknown requirement :magic"},
		{"unsupported requirement", "(define (domain d) (:requirements :durative-actions))", "1:35", "not supported"},
		{"unknown section", "(define (domain d) (:foo))", "1:20", "unknown domain section :foo"},
		{"unknown type", "(define (domain d) (:types a) (:predicates (p ?x - b)))", "1:47", "unknown type b"},
		{"unknown predicate", "(define (domain d) (:predicates (p))\n (:action a :parameters () :precondition (q) :effect (p)))", "2:42", "unknown predicate q"},
		{"arity", "(define (domain d) (:predicates (p ?x))\n (:action a :parameters (?x) :precondition (p ?x ?x) :effect (p ?x)))", "2:44", "takes 1 argument(s), found 2"},
		{"undefined variable", "(define (domain d) (:predicates (p ?x))\n (:action a :parameters (?x) :precondition (p ?y) :effect (p ?x)))", "2:47", "undefined variable ?y"},
		{"duplicate action", "(define (domain d) (:predicates (p))\n (:action a :effect (p))\n (:action A :effect (p)))", "3:11", "action a declared twice"},
		{"duplicate parameter", "(define (domain d) (:predicates (p ?x))\n (:action a :parameters (?x ?x) :effect (p ?x)))", "2:29", "parameter ?x declared twice"},
		{"not arity", "(define (domain d) (:predicates (p))\n (:action a :precondition (not (p) (p)) :effect (p)))", "2:27", "(not ...) takes 1"},
		{"bad effect", "(define (domain d) (:predicates (p))\n (:action a :effect (or (p))))", "2:21", "not allowed in an effect"},
		{"numeric effect", "(define (domain d) (:predicates (p))\n (:action a :effect (decrease (total-cost) 1)))", "2:21", "not supported"},
		{"missing type", "(define (domain d) (:types a -))", "1:30", "missing type after '-'"},
		{"bad var", "(define (domain d) (:predicates (p x)))", "1:36", "expected a variable"},
		{"action key", "(define (domain d) (:predicates (p))\n (:action a :pre (p)))", "2:13", "unknown action key :pre"},
		{"type cycle", "(define (domain d) (:types a - b b - a))", "1:28", "its own ancestor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, _, err := ParseDomain("d.pddl", []byte(tc.src))
			if err == nil {
				t.Fatalf("no error, got %+v", d)
			}
			errorAt(t, err, tc.pos, tc.want)
			if !strings.HasPrefix(err.Error(), "d.pddl:") {
				t.Fatalf("error %q does not start with the file name", err)
			}
		})
	}
}

func TestParseProblemErrors(t *testing.T) {
	tests := []struct {
		name, src, pos, want string
	}{
		{"no goal", "(define (problem p) (:domain bw) (:init))", "1:41", "no (:goal"},
		{"goal arity", "(define (problem p) (:domain bw) (:goal))", "1:34", "one formula"},
		{"variable in init", "(define (problem p) (:domain bw) (:init (on ?x a)) (:goal (on a b)))", "1:45", "variable ?x in :init"},
		{"numeric condition", "(define (problem p) (:domain bw) (:goal (> (f) 1)))", "1:41", "numeric conditions"},
		{"bad section", "(define (problem p) (:domain bw) (:goals (a)))", "1:34", "unknown problem section :goals"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseProblem("p.pddl", []byte(tc.src))
			if err == nil {
				t.Fatal("no error")
			}
			errorAt(t, err, tc.pos, tc.want)
		})
	}
}

// TestGroundProblemErrors checks a problem against its domain: names, arity
// and contradictions are errors with the problem's positions.
func TestGroundProblemErrors(t *testing.T) {
	tests := []struct {
		name, src, pos, want string
	}{
		{"unknown object in init", "(define (problem p) (:domain bw) (:objects a - block) (:init (clear z)) (:goal (clear a)))", "1:62", "unknown object z"},
		{"unknown predicate in init", "(define (problem p) (:domain bw) (:objects a - block) (:init (red a)) (:goal (clear a)))", "1:62", "unknown predicate red"},
		{"arity in goal", "(define (problem p) (:domain bw) (:objects a - block) (:init) (:goal (on a)))", "1:70", "takes 2 argument(s), found 1"},
		{"unknown type", "(define (problem p) (:domain bw) (:objects a - brick) (:init) (:goal (clear a)))", "1:44", "unknown type brick"},
		{"unknown object in goal", "(define (problem p) (:domain bw) (:objects a - block) (:init) (:goal (and (clear a) (clear q))))", "1:92", "unknown object q"},
		{"contradictory goal", "(define (problem p) (:domain bw) (:objects a - block) (:init) (:goal (and (clear a) (not (clear A)))))", "1:70", "contradictory"},
		{"undefined goal variable", "(define (problem p) (:domain bw) (:objects a - block) (:init) (:goal (clear ?x)))", "1:77", "undefined variable ?x"},
	}
	d, _, err := ParseDomain("d.pddl", []byte(bwDomain))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _, err := ParseProblem("p.pddl", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Ground(d, p)
			if err == nil {
				t.Fatal("no error")
			}
			var pe *Error
			var el ErrorList
			if errors.As(err, &pe) {
				el = ErrorList{pe}
			} else if !errors.As(err, &el) {
				t.Fatalf("error %v has no position", err)
			}
			errorAt(t, el, tc.pos, tc.want)
		})
	}
}

func TestParseWarnings(t *testing.T) {
	src := `(define (domain d) (:requirements :typing)
 (:types agent loc)
 (:predicates (at ?a - agent ?l - loc) (seen ?l - loc))
 (:action look :parameters (?a - agent, ?l - loc)
   :precondition (exists (?m - loc, ?n - loc) (at ?a ?m))
   :effect (seen ?a)))`
	d, warns, err := ParseDomain("d.pddl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range warns {
		got = append(got, w.String())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		"d.pddl:4:39: warning: comma",
		"d.pddl:5:35: warning: comma",
		"d.pddl:6:18: warning: seen: argument 1 (?a) is of type agent, declared loc",
		"warning: domain uses :existential-preconditions",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing warning %q in:\n%s", want, all)
		}
	}
	if n := len(d.Actions[0].Params); n != 2 {
		t.Fatalf("comma-separated parameters: got %d, want 2", n)
	}
}

func TestParseByteOrderMarkAndCRLF(t *testing.T) {
	src := "\ufeff" + strings.ReplaceAll(bwDomain, "\n", "\r\n")
	d, _, err := ParseDomain("d.pddl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "bw" || len(d.Actions) != 4 {
		t.Fatalf("parsed %q with %d actions", d.Name, len(d.Actions))
	}
	_, _, err = ParseDomain("d.pddl", []byte("\ufeff(define (domain d)\r\n (:predicates (p))\r\n (:action a :effect (q)))"))
	errorAt(t, err, "3:21", "unknown predicate q")
}

func TestParseCaseInsensitiveAndTyped(t *testing.T) {
	src := `(DEFINE (DOMAIN Dom) (:REQUIREMENTS :ADL :Action-Costs)
 (:TYPES Truck Car - Vehicle Vehicle Place - Object)
 (:CONSTANTS Depot - Place)
 (:PREDICATES (At ?V - Vehicle ?P - Place) (Fast ?V - (EITHER Truck Car)))
 (:FUNCTIONS (Total-Cost) - Number)
 (:ACTION Drive :PARAMETERS (?V - Vehicle ?From ?To - Place)
   :PRECONDITION (AND (At ?V ?From) (NOT (= ?From ?To)))
   :EFFECT (AND (At ?V ?To) (NOT (At ?V ?From)) (INCREASE (TOTAL-COST) 2))))`
	d, warns, err := ParseDomain("d.pddl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Fatalf("unexpected warnings %v", warns)
	}
	if d.Name != "dom" || d.Action("drive") == nil || d.Predicate("fast") == nil || !d.HasCosts {
		t.Fatalf("names not lower-cased or costs missed: %+v", d)
	}
	if got := d.Predicate("fast").Params[0].Types; len(got) != 2 || got[0] != "truck" || got[1] != "car" {
		t.Fatalf("either type parsed as %v", got)
	}
	if d.Constants[0].Name != "depot" || d.Constants[0].Types[0] != "place" {
		t.Fatalf("constants %v", d.Constants)
	}
}

func TestParsePlan(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
		errPos    string
		errMsg    string
	}{
		{name: "both forms", src: "(pick-up A)\n; comment\n\nSTACK a b ; trailing\n  (put-down b)  \n", want: []string{"(pick-up a)", "(stack a b)", "(put-down b)"}},
		{name: "planner output", src: "0: (pick-up a) [1]\n1.000: (stack a b) [1]\n; cost = 2 (unit cost)\n", want: []string{"(pick-up a)", "(stack a b)"}},
		{name: "no args", src: "(handempty)\nnoop\n", want: []string{"(handempty)", "(noop)"}},
		{name: "empty", src: "; nothing\n", want: nil},
		{name: "unclosed", src: "(pick-up a\n", errPos: "1:1", errMsg: "not closed"},
		{name: "nested", src: "(pick-up (a))\n", errPos: "1:1", errMsg: "nested"},
		{name: "stray paren", src: "  pick-up a)\n", errPos: "1:3", errMsg: "unbalanced"},
		{name: "empty action", src: "(a)\n()\n", errPos: "2:1", errMsg: "empty action"},
		{name: "variable", src: "(pick-up ?x)\n", errPos: "1:1", errMsg: "invalid name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			steps, err := ParsePlan("plan.txt", []byte(tc.src))
			if tc.errMsg != "" {
				if err == nil {
					t.Fatalf("no error, got %v", steps)
				}
				errorAt(t, err, tc.errPos, tc.errMsg)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range steps {
				got = append(got, s.String())
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
