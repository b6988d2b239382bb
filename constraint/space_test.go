package constraint

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/internal/testkit"

	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/trie"
)

// realIndexes keeps the shared tokenizers' indexes across the tests.
var realIndexes testkit.IndexCache

// randomWalk follows the constraint with uniformly random token choices
// (end tokens, when allowed, with probability pEnd) until the plan ends,
// checking at every step that the allowed set is non-empty on open cursors,
// that AdvanceToken agrees with Advance, and that completed actions are
// applicable. It returns the final cursor and the tokens written.
func randomWalk(t *testing.T, sp *Space, r *rand.Rand, pEnd float64) (Cursor, []int32) {
	t.Helper()
	c, err := sp.Start()
	if err != nil {
		t.Fatal(err)
	}
	var set trie.Set
	var toks []int32
	for steps := 0; !c.Ended(); steps++ {
		if steps > 100000 {
			t.Fatal("walk does not end")
		}
		sp.Allowed(c, &set)
		if set.Len() == 0 {
			t.Fatalf("open cursor with no allowed token at state with %d actions, partial %q", c.NumApplicable(), c.Partial())
		}
		i := r.IntN(set.Len())
		if pEnd > 0 && set.Next[set.Len()-1] == trie.EndToken && r.Float64() < pEnd {
			i = set.Len() - 1
		}
		next, err := sp.Advance(c, set.Next[i])
		if err != nil {
			t.Fatalf("Advance: %v", err)
		}
		byTok, err := sp.AdvanceToken(c, set.IDs[i])
		if err != nil {
			t.Fatalf("AdvanceToken(%d %q): %v", set.IDs[i], sp.Index().Text(set.IDs[i]), err)
		}
		if byTok.Node() != next.Node() || !byTok.State().Equal(next.State()) || byTok.EndReason() != next.EndReason() {
			t.Fatalf("AdvanceToken and Advance disagree on token %q", sp.Index().Text(set.IDs[i]))
		}
		if a, ok := next.Completed(); ok {
			if !sp.Task().IsApplicable(c.State(), a) {
				t.Fatalf("completed action %s is not applicable", sp.Task().Actions[a].String())
			}
			if next.Len() != c.Len()+1 || next.LastAction() != a {
				t.Fatalf("plan length %d after %d, last %d want %d", next.Len(), c.Len(), next.LastAction(), a)
			}
		}
		toks = append(toks, set.IDs[i])
		c = next
	}
	return c, toks
}

// TestRandomConstrainedWalksValidate follows the constraint with random
// token choices on real tasks and real vocabularies: every plan it allows
// must validate, and the cursor's states and goal flag must match the
// validator's. NESY_FULL=1 runs every task with more seeds.
func TestRandomConstrainedWalksValidate(t *testing.T) {
	perDataset, seeds := 6, 3
	if testkit.FullRun() {
		perDataset, seeds = 0, 10
	}
	tasks := testkit.DatasetTasks(t, perDataset)
	policies := []Options{
		{MaxActions: 12},
		{MaxActions: 12, EndPolicy: EndAtGoal},
		{MaxActions: 8, StopAtGoal: true, End: "done\n"},
		{MaxActions: 12, StopAtGoal: true, NoRevisit: true},
	}
	plans := 0
	for _, family := range []string{"qwen3", "llama2"} {
		idx := realIndexes.Get(t, family)
		for pi, opts := range policies {
			t.Run(fmt.Sprintf("%s/policy%d", family, pi), func(t *testing.T) {
				for ti, tt := range tasks {
					sp, err := New(idx, tt.Lex, opts)
					if err != nil {
						t.Fatal(err)
					}
					for seed := range seeds {
						r := rand.New(rand.NewPCG(uint64(seed), uint64(ti*31+pi)))
						c, toks := randomWalk(t, sp, r, 0.05)
						checkEnded(t, tt, sp, c)
						if c.EndReason() != EndedByToken && c.EndReason() != DeadEnd {
							// The text the model wrote spells the plan: replay it.
							text := []byte{}
							for _, id := range toks {
								text = append(text, sp.Index().Text(id)...)
							}
							re, _ := sp.Start()
							re, n, err := sp.AdvanceText(re, text)
							if err != nil || n != len(text) || !slices.Equal(re.Plan(), c.Plan()) {
								t.Fatalf("%s: replaying %q: %v (consumed %d of %d)", tt.Name, text, err, n, len(text))
							}
						}
						plans++
					}
				}
			})
		}
	}
	t.Logf("%d random constrained plans validated", plans)
}

// checkEnded validates an ended cursor's plan from its printed text and
// checks the end reason against the options.
func checkEnded(t *testing.T, tt testkit.Task, sp *Space, c Cursor) {
	t.Helper()
	lines := sp.PlanLines(c)
	res := testkit.ValidatePlanText(t, tt.Task(), lines)
	if !res.Valid {
		t.Fatalf("%s: constrained plan invalid: %s\n%s", tt.Name, res.Error, strings.Join(lines, "\n"))
	}
	if res.GoalReached != c.GoalReached() {
		t.Fatalf("%s: validator goal %v, cursor goal %v", tt.Name, res.GoalReached, c.GoalReached())
	}
	if !res.States[len(res.States)-1].Equal(c.State()) {
		t.Fatalf("%s: final state differs from the validator's", tt.Name)
	}
	opts := sp.Options()
	switch c.EndReason() {
	case EndedByToken, EndedByMarker:
		if opts.EndPolicy == EndAtGoal && !c.GoalReached() {
			t.Fatalf("%s: ended by %v without the goal under EndAtGoal", tt.Name, c.EndReason())
		}
	case EndedAtGoal:
		if !opts.StopAtGoal || !c.GoalReached() {
			t.Fatalf("%s: ended at goal wrongly", tt.Name)
		}
	case EndedAtMaxActions:
		if c.Len() != opts.MaxActions {
			t.Fatalf("%s: ended at max actions with %d actions", tt.Name, c.Len())
		}
	case DeadEnd:
		if c.NumApplicable() != 0 {
			t.Fatalf("%s: dead end with %d applicable actions", tt.Name, c.NumApplicable())
		}
	default:
		t.Fatalf("%s: end reason %v", tt.Name, c.EndReason())
	}
	if opts.MaxActions > 0 && c.Len() > opts.MaxActions {
		t.Fatalf("%s: %d actions exceed MaxActions %d", tt.Name, c.Len(), opts.MaxActions)
	}
}

// TestReferencePlansFollowConstraint writes the datasets' reference plans
// (PlanBench, VirtualHome) in the lexicon's words through AdvanceText: the
// constraint must accept every one and end at the goal.
func TestReferencePlansFollowConstraint(t *testing.T) {
	n := 25
	if testkit.FullRun() {
		n = 0
	}
	idx := realIndexes.Get(t, "qwen3")
	checked := 0
	for _, tt := range testkit.DatasetTasks(t, n) {
		if tt.Gold == nil {
			continue
		}
		task := tt.Task()
		steps, err := pddl.ParsePlan(tt.Name, []byte(strings.Join(tt.Gold, "\n")))
		if err != nil {
			t.Fatalf("%s: %v", tt.Name, err)
		}
		if r := task.Validate(steps); !r.GoalReached {
			continue // a reference plan the task itself rejects says nothing about the constraint
		}
		var text strings.Builder
		s := task.Init
		for _, st := range steps {
			next, a, err := task.Execute(s, st.Name, st.Args)
			if err != nil {
				t.Fatalf("%s: %v", tt.Name, err)
			}
			text.WriteString(tt.Lex.Text(a) + "\n")
			s = next
		}
		sp, err := New(idx, tt.Lex, Options{StopAtGoal: true})
		if err != nil {
			t.Fatal(err)
		}
		c, _ := sp.Start()
		c, used, err := sp.AdvanceText(c, []byte(text.String()))
		if err != nil {
			t.Fatalf("%s: reference plan rejected after %d bytes: %v\n%s", tt.Name, used, err, text.String())
		}
		if c.EndReason() != EndedAtGoal {
			t.Fatalf("%s: reference plan ends with %v, goal %v", tt.Name, c.EndReason(), c.GoalReached())
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no reference plan checked")
	}
	t.Logf("%d reference plans accepted", checked)
}

// oneShotPDDL is a task whose single action can be taken once, after which
// nothing applies and the goal (unreachable) is false: a dead end.
const oneShotDomain = `(define (domain oneshot) (:requirements :strips :negative-preconditions)
  (:predicates (used) (won))
  (:action press :parameters () :precondition (not (used)) :effect (used)))`

const oneShotProblem = `(define (problem p) (:domain oneshot) (:init) (:goal (won)))`

func oneShotTask(t *testing.T) *lexicon.Bound { return boundTask(t, oneShotDomain, oneShotProblem) }

// boundTask grounds a domain and problem given as text and binds the
// default lexicon to the task.
func boundTask(t *testing.T, domain, problem string) *lexicon.Bound {
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
	b, err := (&lexicon.Lexicon{}).Bind(task)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEndsAndDeadEnds pins down how plans end: by end token, end marker,
// at the goal, at the action limit, and at a dead end, depending on the
// options.
func TestEndsAndDeadEnds(t *testing.T) {
	idx := realIndexes.Get(t, "qwen3")
	lex := oneShotTask(t)
	eos := idx.EndTokens()[0]
	tests := []struct {
		name    string
		opts    Options
		text    string
		eos     bool // then write an end token
		want    EndReason
		wantErr error
	}{
		{"end token any time", Options{}, "press\n", true, EndedByToken, nil},
		{"end token before any action", Options{}, "", true, EndedByToken, nil},
		{"dead end when only the goal may end", Options{EndPolicy: EndAtGoal}, "press\n", false, DeadEnd, nil},
		{"end token refused before the goal", Options{EndPolicy: EndAtGoal}, "", true, NotEnded, ErrNotAllowed},
		{"max actions", Options{MaxActions: 1}, "press\n", false, EndedAtMaxActions, nil},
		{"end marker", Options{End: "done\n"}, "press\ndone\n", false, EndedByMarker, nil},
		{"text past the end", Options{End: "done\n"}, "done\npress\n", false, EndedByMarker, ErrEnded},
		{"off the constraint", Options{}, "pres!", false, NotEnded, ErrNotAllowed},
		{"no end token mid-action", Options{}, "pre", true, NotEnded, ErrNotAllowed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := New(idx, lex, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			c, err := sp.Start()
			if err != nil {
				t.Fatal(err)
			}
			c, _, err = sp.AdvanceText(c, []byte(tc.text))
			if err == nil && tc.eos {
				c, err = sp.AdvanceToken(c, eos)
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if c.EndReason() != tc.want {
				t.Fatalf("end %v, want %v", c.EndReason(), tc.want)
			}
			var set trie.Set
			sp.Allowed(c, &set)
			if c.Ended() != (set.Len() == 0) {
				t.Fatalf("ended %v but %d tokens allowed", c.Ended(), set.Len())
			}
			if c.DeadEnd() != (tc.want == DeadEnd) {
				t.Fatalf("DeadEnd() = %v", c.DeadEnd())
			}
		})
	}
}

// roomsDomain: a robot moves along a corridor a - b - c and can flip a
// switch, only in room a.
const roomsDomain = `(define (domain rooms) (:requirements :strips :negative-preconditions)
  (:predicates (at ?r) (link ?x ?y) (on))
  (:action move :parameters (?x ?y) :precondition (and (at ?x) (link ?x ?y)) :effect (and (not (at ?x)) (at ?y)))
  (:action flip-on :parameters () :precondition (and (at a) (not (on))) :effect (on))
  (:action flip-off :parameters () :precondition (and (at a) (on)) :effect (not (on))))`

const roomsProblem = `(define (problem p) (:domain rooms) (:objects a b c)
  (:init (at a) (link a b) (link b a) (link b c) (link c b)) (:goal (and (at c) (on))))`

// TestNoRevisit checks NoRevisit's allowed actions after hand-checked
// plans: an action returning to any state of the plan so far is left out,
// unless every applicable action would (then those whose state the plan
// has been in least often stay), and without the option nothing is left
// out.
func TestNoRevisit(t *testing.T) {
	idx := realIndexes.Get(t, "qwen3")
	lex := boundTask(t, roomsDomain, roomsProblem)
	tests := []struct {
		name    string
		off     bool // without NoRevisit
		plan    string
		want    []string // allowed actions after plan, sorted
		wantErr error
	}{
		{"start", false, "", []string{"flip-on", "move a b"}, nil},
		{"no way back", false, "move a b\n", []string{"move b c"}, nil},
		{"way back without the option", true, "move a b\n", []string{"move b a", "move b c"}, nil},
		{"no undoing the switch", false, "flip-on\n", []string{"move a b"}, nil},
		{"switch changes the state", false, "flip-on\nmove a b\n", []string{"move b c"}, nil},
		{"all lead back: all stay", false, "move a b\nmove b c\n", []string{"move c b"}, nil},
		{"back again after a forced return", false, "move a b\nmove b c\nmove c b\n", []string{"move b a", "move b c"}, nil},
		{"all lead back: the least visited stay", false, "move a b\nmove b c\nmove c b\nmove b c\nmove c b\n", []string{"move b a"}, nil},
		{"a more visited state is not allowed", false, "move a b\nmove b c\nmove c b\nmove b c\nmove c b\nmove b c\n", nil, ErrNotAllowed},
		{"an undo is not allowed", false, "flip-on\nflip-off\n", nil, ErrNotAllowed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := New(idx, lex, Options{NoRevisit: !tc.off})
			if err != nil {
				t.Fatal(err)
			}
			c, err := sp.Start()
			if err != nil {
				t.Fatal(err)
			}
			c, _, err = sp.AdvanceText(c, []byte(tc.plan))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			var got []string
			for _, a := range c.st.actions {
				got = append(got, lex.Text(a))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("allowed %q, want %q", got, tc.want)
			}
			if c.NumApplicable() != len(tc.want) {
				t.Fatalf("NumApplicable %d, want %d", c.NumApplicable(), len(tc.want))
			}
		})
	}
}

// TestRevisitAll: with RevisitAll, where every action leads back, all stay
// allowed whatever their visit counts (the rule the shipped prior's DAgger
// rollouts were made with); where some action leads somewhere new it
// changes nothing.
func TestRevisitAll(t *testing.T) {
	idx := realIndexes.Get(t, "qwen3")
	lex := boundTask(t, roomsDomain, roomsProblem)
	tests := []struct {
		plan string
		want []string
	}{
		{"move a b\n", []string{"move b c"}},
		{"move a b\nmove b c\nmove c b\nmove b c\nmove c b\n", []string{"move b a", "move b c"}},
	}
	for _, tc := range tests {
		sp, err := New(idx, lex, Options{NoRevisit: true, RevisitAll: true})
		if err != nil {
			t.Fatal(err)
		}
		c, err := sp.Start()
		if err != nil {
			t.Fatal(err)
		}
		if c, _, err = sp.AdvanceText(c, []byte(tc.plan)); err != nil {
			t.Fatalf("%q: %v", tc.plan, err)
		}
		var got []string
		for _, a := range c.st.actions {
			got = append(got, lex.Text(a))
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("after %q: allowed %q, want %q", tc.plan, got, tc.want)
		}
	}
}

// TestGoalTrace checks GoalTrace's text on hand-checked states and that a
// Space with it forces the trace after every action: the action completes
// only once its trace is written, and the plan ends at the goal after the
// trace of "none".
func TestGoalTrace(t *testing.T) {
	idx := realIndexes.Get(t, "qwen3")
	lex := boundTask(t, roomsDomain, roomsProblem)
	tr := GoalTrace(lex, false)
	if tr == nil {
		t.Fatal("no trace for a goal of one conjunction")
	}
	task := lex.Task()
	apply := func(s pddl.State, text string) pddl.State {
		a, ok := lex.Lookup(s, text)
		if !ok {
			t.Fatalf("%q is not applicable", text)
		}
		return task.Apply(s, a)
	}
	s0 := task.Init
	s1 := apply(s0, "flip-on")
	s2 := apply(apply(s1, "move a b"), "move b c")
	for _, tc := range []struct {
		s     pddl.State
		upper bool
		want  string
	}{
		{s0, false, "left: at c; on"},
		{s0, true, "left: AT C; ON"},
		{s1, false, "left: at c"},
		{s2, false, "left: none"},
	} {
		if got := GoalTrace(lex, tc.upper)(tc.s); got != tc.want {
			t.Errorf("trace %q, want %q", got, tc.want)
		}
	}
	neg := boundTask(t, roomsDomain, strings.Replace(roomsProblem, "(on))", "(not (on)))", 1))
	if got := GoalTrace(neg, false)(apply(neg.Task().Init, "flip-on")); got != "left: at c; not: on" {
		t.Errorf("negated goal fact: trace %q", got)
	}
	or := boundTask(t, roomsDomain, strings.Replace(roomsProblem, "(:goal (and (at c) (on)))", "(:goal (or (at c) (on)))", 1))
	if GoalTrace(or, false) != nil {
		t.Error("a trace for a disjunctive goal")
	}

	sp, err := New(idx, lex, Options{StopAtGoal: true, Trace: tr})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := sp.Start()
	if _, _, err := sp.AdvanceText(c, []byte("move a b\n")); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("an action without its trace: error %v, want ErrNotAllowed", err)
	}
	c, _, err = sp.AdvanceText(c, []byte("move a b"))
	if err != nil {
		t.Fatal(err)
	}
	// From the end of the action's text only the trace may follow.
	rest := " => left: at c; on\n"
	var set trie.Set
	sp.Allowed(c, &set)
	for _, id := range set.IDs {
		if !strings.HasPrefix(rest, string(sp.Index().Text(id))) {
			t.Fatalf("token %q allowed after the action's text, want a prefix of %q", sp.Index().Text(id), rest)
		}
	}
	c, _, err = sp.AdvanceText(c, []byte(rest+"move b c => left: on\nmove c b => left: at c; on\nmove b a => left: at c; on\nflip-on => left: at c\nmove a b => left: at c\nmove b c => left: none\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.EndReason() != EndedAtGoal || c.Len() != 7 {
		t.Fatalf("end %v after %d actions, want the goal after 7", c.EndReason(), c.Len())
	}

	// With NoRevisit the successors the traces were made from decide what
	// is masked: back to the start is refused, onwards allowed.
	nr, err := New(idx, lex, Options{StopAtGoal: true, NoRevisit: true, Trace: tr})
	if err != nil {
		t.Fatal(err)
	}
	c, _ = nr.Start()
	if c, _, err = nr.AdvanceText(c, []byte("move a b => left: at c; on\n")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := nr.AdvanceText(c, []byte("move b a")); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("back to the start with NoRevisit: error %v, want ErrNotAllowed", err)
	}
	if _, _, err := nr.AdvanceText(c, []byte("move b c => left: on\n")); err != nil {
		t.Fatalf("onwards with NoRevisit: %v", err)
	}
}
