package heuristic

import (
	"math"
	"slices"

	"github.com/nesy-dev/nesy/pddl"
)

// Heuristic estimates the cost of reaching the goal from a state of the task
// it was built for. Eval returns deadEnd=true (and h=+Inf) when the goal is
// provably unreachable from s. Implementations in this package are safe for
// concurrent use.
type Heuristic interface {
	// Name returns the canonical specification, which New accepts.
	Name() string
	// Eval returns the heuristic value of s.
	Eval(s pddl.State) (h float64, deadEnd bool)
}

// Options tune how heuristics are built. The zero value uses action costs
// when the task declares them and 1 per action otherwise.
type Options struct {
	// UnitCost counts every action as cost 1 even when the task declares
	// action costs.
	UnitCost bool
	// IgnoreNegative drops negative preconditions, effect conditions and
	// goal literals (the plain delete relaxation) instead of compiling them
	// into complement facts. Less informed; kept for comparison.
	IgnoreNegative bool
	// NegatedAxioms also gives derived facts used negatively a complement,
	// reached through negated axioms (Fast Downward's
	// axioms=approximate_negative_cycles; see the package comment) instead
	// of relaxing their negation to true. Better informed, slower per
	// evaluation; ignored with IgnoreNegative.
	NegatedAxioms bool
}

func value(h int64) (float64, bool) {
	if h >= inf {
		return math.Inf(1), true
	}
	return float64(h), false
}

// suffix returns the modifiers that New needs to rebuild r: ":unit" when r
// ignores the task's declared action costs, ":noneg" when it ignores
// negative literals, ":negax" when it negates axioms.
func suffix(r *relaxed) string {
	s := ""
	if r.unit && r.task.HasCosts {
		s += ":unit"
	}
	switch r.neg {
	case negIgnore:
		s += ":noneg"
	case negAxioms:
		s += ":negax"
	}
	return s
}

// HAdd is the additive heuristic h_add: the cost of a fact is the cheapest
// operator cost plus the sum of its preconditions' costs.
type HAdd struct{ r *relaxed }

// Name implements Heuristic.
func (h *HAdd) Name() string { return "add" + suffix(h.r) }

// Eval implements Heuristic.
func (h *HAdd) Eval(s pddl.State) (float64, bool) {
	sc := h.r.getScratch()
	h.r.collectInit(s, sc)
	v := h.r.explore(sc, false, true, h.r.cost)
	h.r.putScratch(sc)
	return value(v)
}

// HMax is the max heuristic h_max: like h_add with the maximum in place of
// the sum. It is admissible.
type HMax struct{ r *relaxed }

// Name implements Heuristic.
func (h *HMax) Name() string { return "max" + suffix(h.r) }

// Eval implements Heuristic.
func (h *HMax) Eval(s pddl.State) (float64, bool) {
	sc := h.r.getScratch()
	h.r.collectInit(s, sc)
	v := h.r.explore(sc, true, true, h.r.cost)
	h.r.putScratch(sc)
	return value(v)
}

// FF is the FF heuristic: the cost of a relaxed plan built from h_add best
// supporters, each action counted once.
type FF struct{ r *relaxed }

// Name implements Heuristic.
func (h *FF) Name() string { return "ff" + suffix(h.r) }

// Eval implements Heuristic.
func (h *FF) Eval(s pddl.State) (float64, bool) {
	sc := h.r.getScratch()
	defer h.r.putScratch(sc)
	h.r.collectInit(s, sc)
	if h.r.explore(sc, false, true, h.r.cost) >= inf {
		return math.Inf(1), true
	}
	return float64(h.r.extractPlan(sc)), false
}

// RelaxedPlan appends to buf the distinct actions of the relaxed plan from s
// (ordered so that each action's relaxed precondition is reached by the
// state and the actions before it) and returns it with the plan's cost, or
// deadEnd=true when the goal is unreachable even in the relaxation.
func (h *FF) RelaxedPlan(s pddl.State, buf []int) (plan []int, cost float64, deadEnd bool) {
	sc := h.r.getScratch()
	defer h.r.putScratch(sc)
	h.r.collectInit(s, sc)
	if h.r.explore(sc, false, true, h.r.cost) >= inf {
		return buf, math.Inf(1), true
	}
	c := h.r.extractPlan(sc)
	ops := sc.planOps
	slices.SortFunc(ops, func(a, b int32) int {
		if va, vb := sc.ops[a].val, sc.ops[b].val; va != vb {
			if va < vb {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
	ep := sc.nextEpoch()
	for _, o := range ops {
		if a := h.r.action[o]; a >= 0 && sc.actMark[a] != ep {
			sc.actMark[a] = ep
			buf = append(buf, int(a))
		}
	}
	return buf, float64(c), false
}

// Preferred appends to buf Fast Downward's preferred operators in s: the
// actions with an operator in the relaxed plan all of whose preconditions
// hold in s. For an action with conditional effects the relaxed plan may
// use one of them, and then its condition counts as a precondition: an
// action that is applicable but whose effect in the plan would not fire in
// s is not preferred (FD's unary operator for the effect has the condition
// among its preconditions), unlike in Helpful. The actions are in relaxed
// plan order, each once; cost and deadEnd are as in RelaxedPlan.
func (h *FF) Preferred(s pddl.State, buf []int) (pref []int, cost float64, deadEnd bool) {
	r := h.r
	sc := r.getScratch()
	defer r.putScratch(sc)
	r.collectInit(s, sc)
	if r.explore(sc, false, true, r.cost) >= inf {
		return buf, math.Inf(1), true
	}
	c := r.extractPlan(sc)
	planEp := sc.epoch // facts the plan needs have factMark == planEp
	ep := sc.nextEpoch()
	for _, o := range sc.planOps {
		a := r.action[o]
		if a < 0 || sc.actMark[a] == ep || !r.supportsNeeded(sc, o, planEp) || !r.preInState(sc, o, a) {
			continue
		}
		sc.actMark[a] = ep
		buf = append(buf, int(a))
	}
	return buf, float64(c), false
}

// supportsNeeded reports whether operator o is the plan's supporter of a
// fact the plan needs other than an auxiliary applied(a) fact: an action's
// main operator that is in the plan only to enable its conditional effects
// has no counterpart among Fast Downward's unary operators.
func (r *relaxed) supportsNeeded(sc *scratch, o int32, planEp uint32) bool {
	auxLo := int32(r.nTaskFacts + len(r.negOf))
	for _, f := range r.add[r.addStart[o]:r.addStart[o+1]] {
		if (f < auxLo || f >= r.trueFact) && sc.factMark[f] == planEp && sc.sup[f] == o {
			return true
		}
	}
	return false
}

// preInState reports whether every precondition of operator o of action a
// held in the evaluated state (its facts are the exploration's sources,
// with no supporter). An auxiliary fact applied(a) counts as holding when
// it was reached by a's main operator and that operator's preconditions
// held.
func (r *relaxed) preInState(sc *scratch, o, a int32) bool {
	auxLo := int32(r.nTaskFacts + len(r.negOf))
	for _, p := range r.pre[r.preStart[o]:r.preStart[o+1]] {
		sp := sc.sup[p]
		if sp < 0 {
			continue
		}
		if p < auxLo || p >= r.trueFact || r.action[sp] != a || sp == o || !r.preInState(sc, sp, a) {
			return false
		}
	}
	return true
}

// Helpful appends to buf the actions of the relaxed plan from s that are
// applicable in s (FF's helpful actions; Fast Downward's preferred
// operators, which also need the planned conditional effect to fire, are
// Preferred), in increasing id order.
func (h *FF) Helpful(s pddl.State, buf []int) []int {
	start := len(buf)
	buf, _, dead := h.RelaxedPlan(s, buf)
	if dead {
		return buf
	}
	out := buf[:start]
	t := h.r.task
	for _, a := range buf[start:] {
		if t.IsApplicable(s, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out[start:])
	return out
}

// GoalCount counts the goal literals that do not hold in s (the smallest
// count over the goal's disjuncts). It ignores action costs.
type GoalCount struct{ t *pddl.Task }

// Name implements Heuristic.
func (h *GoalCount) Name() string { return "goalcount" }

// Eval implements Heuristic.
func (h *GoalCount) Eval(s pddl.State) (float64, bool) {
	best := -1
	for _, c := range h.t.Goal {
		n := 0
		for _, f := range c.Pos {
			if !has(s, f) {
				n++
			}
		}
		for _, f := range c.Neg {
			if has(s, f) {
				n++
			}
		}
		if best < 0 || n < best {
			best = n
		}
	}
	if best < 0 {
		return math.Inf(1), true
	}
	return float64(best), false
}

// has is State.Has that treats facts beyond the state's length as false.
func has(s pddl.State, f int) bool {
	if f < 0 || f>>6 >= len(s) {
		return false
	}
	return s.Has(f)
}

// Blind is 0 in goal states and the cheapest action cost elsewhere; A* with
// it is uniform-cost search.
type Blind struct{ r *relaxed }

// Name implements Heuristic.
func (h *Blind) Name() string { return "blind" + suffix(h.r) }

// Eval implements Heuristic.
func (h *Blind) Eval(s pddl.State) (float64, bool) {
	if len(h.r.task.Goal) == 0 {
		return math.Inf(1), true
	}
	if h.r.task.GoalReached(s) {
		return 0, false
	}
	return float64(h.r.minCost), false
}
