package pddl

import (
	"slices"
	"strings"
	"sync"
)

// Derived predicates (PDDL 2.2 axioms): checking and stratifying the
// (:derived ...) rules of a domain. Grounding turns every rule, and every
// condition too large for disjunctive normal form (ground_axioms.go), into
// ground axioms; Task.EvalAxioms computes the derived facts of a state.

// checkDerived checks the domain's :derived rules: the head predicate is
// declared, its arguments are distinct variables matching the declaration,
// the body only uses those variables, and the rules can be stratified. It
// types untyped head variables by the predicate declaration and sets
// d.Strata.
func (c *checker) checkDerived() {
	d := c.d
	for _, r := range d.Derived {
		c.use(featDerived, r.Pos)
		pd, ok := c.preds[r.Pred]
		if !ok {
			c.p.errorf(r.Pos, "derived predicate %s is not declared in :predicates", r.Pred)
			continue
		}
		if len(r.Params) != len(pd.Params) {
			c.p.errorf(r.Pos, "derived predicate %s takes %d argument(s), found %d", r.Pred, len(pd.Params), len(r.Params))
			continue
		}
		for i := range r.Params {
			// The parser made sure the head's arguments are variables.
			v := &r.Params[i]
			if len(v.Types) == 1 && v.Types[0] == "object" {
				v.Types = pd.Params[i].Types
			} else if !c.types.compatible(v.Types, pd.Params[i].Types) {
				c.p.warnf(v.Pos, "derived predicate %s: %s is of type %s, declared %s", r.Pred, v.Name, typeString(v.Types), typeString(pd.Params[i].Types))
			}
		}
		scope := c.checkParams(r.Params, true)
		c.inEffect = false
		c.checkFormula(r.Body, scope)
	}
	if len(c.p.errs) > 0 {
		return
	}
	// Stratify over the derived predicates, in order of first rule.
	var names []string
	index := map[string]int{}
	for _, r := range d.Derived {
		if _, ok := index[r.Pred]; !ok {
			index[r.Pred] = len(names)
			names = append(names, r.Pred)
		}
	}
	var edges []depEdge
	for _, r := range d.Derived {
		h := index[r.Pred]
		walkPolarity(r.Body, false, func(pred string, neg bool) {
			if b, ok := index[pred]; ok {
				edges = append(edges, depEdge{from: b, to: h, neg: neg})
			}
		})
	}
	strata, cycle := stratify(len(names), edges)
	if cycle != nil {
		var ns []string
		for _, i := range cycle {
			ns = append(ns, names[i])
		}
		pos := d.Derived[0].Pos
		for _, r := range d.Derived {
			if r.Pred == names[cycle[0]] {
				pos = r.Pos
				break
			}
		}
		c.p.errorf(pos, "derived predicates cannot be stratified: %s depend on each other through negation (a derived predicate may only be negated if it does not depend on the predicate being derived)", strings.Join(ns, ", "))
		return
	}
	d.Strata = make(map[string]int, len(names))
	for i, n := range names {
		d.Strata[n] = strata[i]
	}
}

// walkPolarity calls fn for every atom of f with whether it occurs
// negatively (under an odd number of negations, counting the antecedent of
// an implication as negated).
func walkPolarity(f *Formula, neg bool, fn func(pred string, neg bool)) {
	if f == nil {
		return
	}
	switch f.Kind {
	case FAtom:
		fn(f.Pred, neg)
	case FNot:
		walkPolarity(f.Sub[0], !neg, fn)
	case FImply:
		walkPolarity(f.Sub[0], !neg, fn)
		walkPolarity(f.Sub[1], neg, fn)
	default:
		for _, s := range f.Sub {
			walkPolarity(s, neg, fn)
		}
	}
}

// depEdge says that derived predicate to is defined using from, negatively
// when neg.
type depEdge struct {
	from, to int
	neg      bool
}

// stratify assigns strata to n derived predicates with dependencies edges:
// stratum(to) >= stratum(from), and > when the edge is negative, with the
// smallest strata that satisfy these. When no assignment exists it returns
// a cycle through a negative edge instead (predicate indexes, sorted).
func stratify(n int, edges []depEdge) (strata []int, cycle []int) {
	// reach[i][j]: j depends on i through a chain of edges.
	reach := make([][]bool, n)
	for i := range reach {
		reach[i] = make([]bool, n)
	}
	for _, e := range edges {
		reach[e.from][e.to] = true
	}
	for k := 0; k < n; k++ {
		for i := 0; i < n; i++ {
			if !reach[i][k] {
				continue
			}
			for j := 0; j < n; j++ {
				if reach[k][j] {
					reach[i][j] = true
				}
			}
		}
	}
	for _, e := range edges {
		if e.neg && (e.from == e.to || reach[e.to][e.from]) {
			// The cycle: every predicate on a path from e.to to e.from.
			for q := 0; q < n; q++ {
				if q == e.from || q == e.to || reach[e.to][q] && reach[q][e.from] {
					cycle = append(cycle, q)
				}
			}
			slices.Sort(cycle)
			return nil, cycle
		}
	}
	strata = make([]int, n)
	for changed, rounds := true, 0; changed && rounds <= n+1; rounds++ {
		changed = false
		for _, e := range edges {
			want := strata[e.from]
			if e.neg {
				want++
			}
			if strata[e.to] < want {
				strata[e.to] = want
				changed = true
			}
		}
	}
	return strata, nil
}

// Axiom is a ground axiom: Head holds in a state when Body does. Head is a
// derived fact; a derived fact holds exactly when the body of one of its
// axioms holds, evaluated stratum by stratum in increasing Stratum order
// (negated derived facts in a body are of lower strata, so they are final
// when read: negation as failure).
type Axiom struct {
	Head    int
	Body    Conj
	Stratum int
}

// axiomEval is the precomputed evaluation order of a task's axioms.
type axiomEval struct {
	// derived marks the derived facts (cleared before evaluation).
	derived State
	// strata[k] are the axioms of stratum k, in Task.Axioms order.
	strata [][]int32
	// rules[a] is axiom a split for evaluation.
	rules []axiomRule
	// watch[f] are the axioms with fact f in their rec (nil for most
	// facts; indexed by fact).
	watch [][]int32
	// pool holds *axiomScratch: EvalAxioms is safe for concurrent use.
	pool sync.Pool
}

// axiomRule is an axiom's body split by when its facts are final: fixed
// (positive facts not derived in the axiom's own stratum, final when the
// stratum starts), neg (negative facts: lower strata only, so final too)
// and rec (positive facts derived in its own stratum).
type axiomRule struct {
	head       int32
	fixed, neg []int32
	rec        []int32
}

// axiomScratch is the per-evaluation state: count[a] is the number of
// own-stratum body facts axiom a still waits for (0: not waiting).
type axiomScratch struct {
	count   []int32
	waiting []int32
	queue   []int32
}

func newAxiomEval(t *Task) *axiomEval {
	ev := &axiomEval{derived: NewState(len(t.Facts)), watch: make([][]int32, len(t.Facts))}
	stratumOf := map[int]int{}
	for _, ax := range t.Axioms {
		ev.derived.Set(ax.Head)
		stratumOf[ax.Head] = ax.Stratum
	}
	for i, ax := range t.Axioms {
		for len(ev.strata) <= ax.Stratum {
			ev.strata = append(ev.strata, nil)
		}
		ev.strata[ax.Stratum] = append(ev.strata[ax.Stratum], int32(i))
		r := axiomRule{head: int32(ax.Head)}
		for _, f := range ax.Body.Pos {
			if st, ok := stratumOf[f]; ok && st == ax.Stratum {
				r.rec = append(r.rec, int32(f))
				ev.watch[f] = append(ev.watch[f], int32(i))
			} else {
				r.fixed = append(r.fixed, int32(f))
			}
		}
		for _, f := range ax.Body.Neg {
			r.neg = append(r.neg, int32(f))
		}
		ev.rules = append(ev.rules, r)
	}
	n := len(t.Axioms)
	ev.pool.New = func() any { return &axiomScratch{count: make([]int32, n)} }
	return ev
}

// IsDerived reports whether fact f is derived by the task's axioms.
func (t *Task) IsDerived(f int) bool {
	return t.axioms != nil && f >= 0 && f < len(t.Facts) && t.axioms.derived.Has(f)
}

// EvalAxioms sets the derived facts of s (in place) to their values given
// the other facts of s: it clears them, then applies the axioms stratum by
// stratum to a fixpoint. A task without axioms leaves s unchanged. States
// made by Task.Apply and Task.Init are evaluated already; call it on a
// state assembled by hand.
func (t *Task) EvalAxioms(s State) {
	ev := t.axioms
	if ev == nil {
		return
	}
	for i := range s {
		s[i] &^= ev.derived[i]
	}
	sc := ev.pool.Get().(*axiomScratch)
	defer ev.pool.Put(sc)
	queue := sc.queue[:0]
	for _, axs := range ev.strata {
		for _, a := range axs {
			r := &ev.rules[a]
			if s.Has(int(r.head)) || !r.holds(s) {
				continue
			}
			// The body without its own-stratum facts is final now.
			n := int32(0)
			for _, f := range r.rec {
				if !s.Has(int(f)) {
					n++
				}
			}
			if n == 0 {
				s.Set(int(r.head))
				queue = append(queue, r.head)
				continue
			}
			sc.count[a] = n
			sc.waiting = append(sc.waiting, a)
		}
		for len(queue) > 0 {
			f := queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			for _, a := range ev.watch[f] {
				if sc.count[a] == 0 {
					continue
				}
				if sc.count[a]--; sc.count[a] > 0 {
					continue
				}
				if h := int(ev.rules[a].head); !s.Has(h) {
					s.Set(h)
					queue = append(queue, int32(h))
				}
			}
		}
		for _, a := range sc.waiting {
			sc.count[a] = 0
		}
		sc.waiting = sc.waiting[:0]
	}
	sc.queue = queue
}

// holds reports whether the rule's final facts hold in s: every fixed
// fact and no negative one.
func (r *axiomRule) holds(s State) bool {
	for _, f := range r.fixed {
		if !s.Has(int(f)) {
			return false
		}
	}
	for _, f := range r.neg {
		if s.Has(int(f)) {
			return false
		}
	}
	return true
}

// relevantAxioms returns the axioms of t (in their order) whose heads are
// needed: derived facts of the goal, of an action's precondition or of an
// effect condition (either sign), and, to a fixpoint, the derived facts of
// the bodies of the axioms of needed heads (GroundLimits.RelevantAxioms).
func relevantAxioms(t *Task) []Axiom {
	byHead := map[int][]int{}
	for i, ax := range t.Axioms {
		byHead[ax.Head] = append(byHead[ax.Head], i)
	}
	needed := map[int]bool{}
	var queue []int
	need := func(c Conj) {
		for _, fs := range [][]int{c.Pos, c.Neg} {
			for _, f := range fs {
				if _, derived := byHead[f]; derived && !needed[f] {
					needed[f] = true
					queue = append(queue, f)
				}
			}
		}
	}
	for _, c := range t.Goal {
		need(c)
	}
	for i := range t.Actions {
		a := &t.Actions[i]
		need(a.Pre)
		for _, ce := range a.Cond {
			need(ce.Cond)
		}
	}
	for len(queue) > 0 {
		f := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, i := range byHead[f] {
			need(t.Axioms[i].Body)
		}
	}
	kept := t.Axioms[:0:0]
	for _, ax := range t.Axioms {
		if needed[ax.Head] {
			kept = append(kept, ax)
		}
	}
	return kept
}
