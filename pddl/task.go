package pddl

import (
	"math/bits"
	"strings"
)

// This file defines the ground task: the output of grounding and the only
// input of successor generation, heuristics, search and validation.
//
// Names across stages: the lifted Domain/Problem (parse.go, with positions)
// are normalized (quantifiers expanded, conditions in disjunctive normal
// form, static facts folded away) and grounded into a Task whose facts are
// integers 0..len(Facts)-1 and whose states are bitsets over those integers.
// Problem init -> Task.Init; problem goal -> Task.Goal (DNF over fluent
// facts); action schemas -> Task.Actions (one ground action per reachable
// binding and precondition disjunct).

// Fact is a ground atom, e.g. (on a b). Names are lower-cased.
type Fact struct {
	Predicate string
	Args      []string
}

// String returns the fact in PDDL syntax, e.g. "(on a b)".
func (f Fact) String() string {
	if len(f.Args) == 0 {
		return "(" + f.Predicate + ")"
	}
	return "(" + f.Predicate + " " + strings.Join(f.Args, " ") + ")"
}

// Conj is a conjunction of fluent-fact literals: every fact in Pos holds and
// no fact in Neg holds. An empty Conj is true.
type Conj struct {
	Pos []int
	Neg []int
}

// Holds reports whether the conjunction is true in s.
func (c Conj) Holds(s State) bool {
	for _, f := range c.Pos {
		if !s.Has(f) {
			return false
		}
	}
	for _, f := range c.Neg {
		if s.Has(f) {
			return false
		}
	}
	return true
}

// CondEffect is a conditional effect: when Cond holds in the state the action
// is applied in, facts in Del are removed and facts in Add are added.
type CondEffect struct {
	Cond Conj
	Add  []int
	Del  []int
}

// Action is a ground action. Several ground actions may share a name and
// arguments when the schema's precondition is a disjunction (one per
// disjunct); they have the same effects.
type Action struct {
	// Name is the schema name, lower-cased.
	Name string
	// Args are the object names bound to the schema parameters, lower-cased.
	Args []string
	// Pre is the precondition over fluent facts (static facts folded away).
	Pre Conj
	// Add and Del are the unconditional effects.
	Add []int
	Del []int
	// Cond are the conditional effects, evaluated in the state before the action.
	Cond []CondEffect
	// Cost is the action cost: the (increase (total-cost) n) amount (n a
	// number or a function term valued in the problem's :init), 0 for an
	// action without one in a domain with action costs, and 1 for every
	// action when the domain has no action costs. A problem's :metric is
	// ignored.
	Cost int
}

// String returns the action in PDDL plan syntax, e.g. "(stack a b)".
func (a *Action) String() string {
	if len(a.Args) == 0 {
		return "(" + a.Name + ")"
	}
	return "(" + a.Name + " " + strings.Join(a.Args, " ") + ")"
}

// State is a set of fluent facts, a bitset indexed by fact id. States of one
// task all have the same length; treat them as immutable values.
type State []uint64

// NewState returns an empty state for n facts.
func NewState(n int) State { return make(State, (n+63)/64) }

// Has reports whether fact f holds.
func (s State) Has(f int) bool { return s[f>>6]&(1<<(uint(f)&63)) != 0 }

// Set adds fact f (mutates s; use on fresh copies only).
func (s State) Set(f int) { s[f>>6] |= 1 << (uint(f) & 63) }

// Clear removes fact f (mutates s; use on fresh copies only).
func (s State) Clear(f int) { s[f>>6] &^= 1 << (uint(f) & 63) }

// Clone returns a copy of s.
func (s State) Clone() State { return append(State(nil), s...) }

// Equal reports whether s and o hold the same facts.
func (s State) Equal(o State) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// Key returns a compact string usable as a map key.
func (s State) Key() string {
	b := make([]byte, 8*len(s))
	for i, w := range s {
		for j := 0; j < 8; j++ {
			b[8*i+j] = byte(w >> (8 * j))
		}
	}
	return string(b)
}

// Len returns the number of facts that hold.
func (s State) Len() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// Facts returns the ids of the facts that hold, in increasing order.
func (s State) Facts() []int {
	var out []int
	for i, w := range s {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			out = append(out, i*64+b)
			w &= w - 1
		}
	}
	return out
}

// Task is a grounded planning task.
type Task struct {
	// DomainName and ProblemName are the names from the PDDL files.
	DomainName, ProblemName string
	// Facts are the fluent facts; a fact's id is its index.
	Facts []Fact
	// Actions are the reachable ground actions; an action's id is its index.
	Actions []Action
	// Init is the initial state.
	Init State
	// Goal is the goal in disjunctive normal form: it holds when any disjunct
	// holds. An empty Goal can never be reached.
	Goal []Conj
	// Axioms derive the derived facts (PDDL 2.2 :derived rules, and the
	// conditions grounding compiled into derived predicates), in increasing
	// stratum order. Derived facts are facts of Facts that no action adds
	// or deletes; Init and every state made by Apply hold exactly those the
	// axioms derive (see EvalAxioms).
	Axioms []Axiom
	// Static are the facts that hold in every state (folded out of Facts).
	Static []Fact
	// Objects are all object and constant names, lower-cased, in declaration order.
	Objects []string
	// HasCosts reports whether the domain declared action costs.
	HasCosts bool
	// Params are the parameter names (lower-cased, without '?', in
	// declaration order) of every action schema of the domain, keyed by
	// schema name, including schemas without reachable ground actions. Text
	// templates (package lexicon) name parameters by them.
	Params map[string][]string

	factIndex   map[string]int
	succ        *successorGen
	actionIndex map[string][]int
	axioms      *axiomEval // nil without axioms
	// lifted keeps what validation needs to explain failures in terms of the
	// PDDL (static preconditions, types, unknown names); nil for a Task built
	// by hand.
	lifted *lifted
}

// finish builds the indexes of a grounded task (fact index, action lookup,
// successor generator). Ground calls it; a Task built by hand must call it
// before use by calling Reindex.
func (t *Task) finish() {
	if t.factIndex == nil {
		t.factIndex = make(map[string]int, len(t.Facts))
		for i, f := range t.Facts {
			t.factIndex[f.String()] = i
		}
	}
	t.actionIndex = make(map[string][]int, len(t.Actions))
	for i := range t.Actions {
		k := actionKey(t.Actions[i].Name, t.Actions[i].Args)
		t.actionIndex[k] = append(t.actionIndex[k], i)
	}
	t.succ = newSuccessorGen(t)
	t.axioms = nil
	if len(t.Axioms) > 0 {
		t.axioms = newAxiomEval(t)
	}
}

// Reindex rebuilds the task's indexes (fact lookup, action lookup, successor
// generator, axiom evaluation order) after Facts, Actions, Axioms or Init
// were changed by hand; it does not evaluate the axioms in Init (call
// EvalAxioms). Grounded
// tasks are indexed already. Not safe to call concurrently with readers.
func (t *Task) Reindex() {
	t.factIndex = nil
	t.finish()
}

func actionKey(name string, args []string) string {
	return strings.ToLower(name) + "\x00" + strings.ToLower(strings.Join(args, "\x00"))
}

// LookupAction returns the ids of all ground actions with this name and
// these arguments (case-insensitive), in increasing order: several when the
// schema's precondition is a disjunction. It returns nil when there is none
// (unknown name or objects, or an action that can never be applied).
func (t *Task) LookupAction(name string, args []string) []int {
	return t.actionIndex[actionKey(name, args)]
}

// FactID returns the id of a fluent fact, or -1 if it is not a fluent fact of
// the task (static or unreachable).
func (t *Task) FactID(f Fact) int {
	if id, ok := t.factIndex[f.String()]; ok {
		return id
	}
	return -1
}

// GoalReached reports whether the goal holds in s.
func (t *Task) GoalReached(s State) bool {
	for _, c := range t.Goal {
		if c.Holds(s) {
			return true
		}
	}
	return false
}

// IsApplicable reports whether action a's precondition holds in s.
func (t *Task) IsApplicable(s State, a int) bool { return t.Actions[a].Pre.Holds(s) }

// Apply returns the successor of s under action a (s is not modified). It does
// not check applicability. Conditional effects are evaluated in s; deletes
// are applied before adds, so a fact both added and deleted holds afterwards.
// The derived facts of the successor are then computed by the axioms.
func (t *Task) Apply(s State, a int) State {
	act := &t.Actions[a]
	n := s.Clone()
	for _, f := range act.Del {
		n.Clear(f)
	}
	for i := range act.Cond {
		ce := &act.Cond[i]
		if ce.Cond.Holds(s) {
			for _, f := range ce.Del {
				n.Clear(f)
			}
		}
	}
	for _, f := range act.Add {
		n.Set(f)
	}
	for i := range act.Cond {
		ce := &act.Cond[i]
		if ce.Cond.Holds(s) {
			for _, f := range ce.Add {
				n.Set(f)
			}
		}
	}
	if t.axioms != nil {
		t.EvalAxioms(n)
	}
	return n
}

// Applicable appends to buf the ids of the actions applicable in s, in
// increasing order, and returns it. It uses an index built by Ground (or
// Reindex) and is safe for concurrent use; a Task built by hand and never
// indexed falls back to testing every action.
func (t *Task) Applicable(s State, buf []int) []int {
	if t.succ == nil {
		for a := range t.Actions {
			if t.Actions[a].Pre.Holds(s) {
				buf = append(buf, a)
			}
		}
		return buf
	}
	return t.succ.applicable(s, buf)
}

// FormatState returns the facts of s (and optionally the static facts) in
// PDDL syntax, one per line, sorted by id.
func (t *Task) FormatState(s State, withStatic bool) string {
	var b strings.Builder
	for _, f := range s.Facts() {
		b.WriteString(t.Facts[f].String())
		b.WriteByte('\n')
	}
	if withStatic {
		for _, f := range t.Static {
			b.WriteString(f.String())
			b.WriteByte('\n')
		}
	}
	return b.String()
}
