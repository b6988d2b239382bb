package heuristic

import (
	"math"

	"github.com/nesy-dev/nesy/pddl"
)

// LMCut is the landmark-cut heuristic (Helmert and Domshlak, 2009). It is
// admissible: h_max <= LM-cut <= h+ <= h*.
//
// Each round computes h_max under the current operator costs, picks for every
// operator its precondition with the largest h_max (ties: the one reached
// last), finds the goal zone (facts from which GOAL is reached through
// zero-cost operators of that justification graph) and the cut (operators
// from the part reachable from the state without entering the goal zone into
// the goal zone), adds the cheapest cut cost to h and subtracts it from every
// cut operator, until h_max(GOAL) is 0.
//
// Conditional effects: LM-cut runs on the relaxed compilation described in
// the package comment. An action with one conditional effect (beyond those
// implied by its precondition) becomes two operators at the action's cost,
// one without and one with the effect, which is exact for the relaxation; an
// action with several becomes its main operator plus one zero-cost operator
// per conditional effect, conditioned on an auxiliary "applied(a)" fact the
// main operator adds. That compilation is a further relaxation, so LM-cut on
// it remains admissible (a lower bound on the original task's h+), at the
// price of some precision on such actions.
type LMCut struct{ r *relaxed }

// Name implements Heuristic.
func (h *LMCut) Name() string { return "lmcut" + suffix(h.r) }

// Eval implements Heuristic.
func (h *LMCut) Eval(s pddl.State) (float64, bool) {
	sc := h.r.getScratch()
	v := h.r.lmcut(s, sc)
	h.r.putScratch(sc)
	if v >= inf {
		return math.Inf(1), true
	}
	return float64(v), false
}

func (r *relaxed) lmcut(s pddl.State, sc *scratch) int64 {
	costs := sc.lmCost[:len(r.cost)]
	copy(costs, r.cost)
	var h int64
	r.collectInit(s, sc)
	g := r.explore(sc, true, false, costs)
	if g >= inf {
		return inf
	}
	for {
		g = sc.factCost[r.goalFact]
		if g == 0 {
			return h
		}
		ep := sc.nextEpoch()
		// Goal zone, backwards from GOAL over zero-cost justification edges.
		zone := sc.zoneMark
		stack := append(sc.stack[:0], r.goalFact)
		zone[r.goalFact] = ep
		for len(stack) > 0 {
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, o := range r.adders[r.adderStart[f]:r.adderStart[f+1]] {
				if sc.ops[o].unsat != 0 || costs[o] != 0 {
					continue
				}
				if p := sc.ops[o].pcf; zone[p] != ep {
					zone[p] = ep
					stack = append(stack, p)
				}
			}
		}
		// Forward from the state's relaxed facts (TRUE included) without entering the goal
		// zone; operators crossing into it form the cut.
		reach := sc.factMark
		stack = stack[:0]
		for _, f := range sc.init {
			reach[f] = ep
			stack = append(stack, f)
		}
		cut := sc.cut[:0]
		m := int32(math.MaxInt32)
		for len(stack) > 0 {
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, o := range r.preOf[r.preOfStart[f]:r.preOfStart[f+1]] {
				if op := &sc.ops[o]; op.unsat != 0 || op.pcf != f {
					continue
				}
				for _, e := range r.add[r.addStart[o]:r.addStart[o+1]] {
					if zone[e] == ep {
						if sc.opMark[o] != ep {
							sc.opMark[o] = ep
							cut = append(cut, o)
							if costs[o] < m {
								m = costs[o]
							}
						}
					} else if reach[e] != ep {
						reach[e] = ep
						stack = append(stack, e)
					}
				}
			}
		}
		sc.stack, sc.cut = stack, cut
		if len(cut) == 0 || m <= 0 {
			// Cannot happen for a correct cut (cut operators have positive
			// cost); stop rather than loop forever.
			return h
		}
		h += int64(m)
		r.reduceCosts(sc, costs, cut, m)
	}
}

// reduceCosts lowers the cost of the cut operators by m and updates the h_max
// values (and precondition choices) of the last exploration incrementally:
// values only decrease, and an operator's value can only decrease when its
// chosen precondition does.
func (r *relaxed) reduceCosts(sc *scratch, costs []int32, cut []int32, m int32) {
	fc, ops := sc.factCost, sc.ops
	q := &sc.q
	q.reset()
	for _, o := range cut {
		costs[o] -= m
		v := fc[ops[o].pcf] + int64(costs[o])
		ops[o].val = v
		for _, e := range r.add[r.addStart[o]:r.addStart[o+1]] {
			if v < fc[e] {
				fc[e] = v
				q.push(uint64(v), e)
			}
		}
	}
	for !q.empty() {
		k, f := q.pop()
		if int64(k) > fc[f] {
			continue
		}
		for _, o := range r.preOf[r.preOfStart[f]:r.preOfStart[f+1]] {
			op := &ops[o]
			if op.unsat != 0 || op.pcf != f {
				continue
			}
			best, bv := f, fc[f]
			for _, p := range r.pre[r.preStart[o]:r.preStart[o+1]] {
				if fc[p] > bv {
					best, bv = p, fc[p]
				}
			}
			op.pcf = best
			v := bv + int64(costs[o])
			if v >= op.val {
				continue
			}
			op.val = v
			for _, e := range r.add[r.addStart[o]:r.addStart[o+1]] {
				if v < fc[e] {
					fc[e] = v
					q.push(uint64(v), e)
				}
			}
		}
	}
}
