package heuristic

import (
	"math"

	"github.com/nesy-dev/nesy/pddl"
)

// inf marks an unreached fact or operator.
const inf = int64(math.MaxInt64 / 4)

// opState is an operator's per-evaluation state, kept together for locality.
type opState struct {
	unsat int32 // unsatisfied precondition counter
	pcf   int32 // precondition popped last (largest h_max) once fired
	val   int64 // accumulated precondition cost, then the operator's value
}

// scratch holds the per-evaluation arrays. One scratch serves one Eval at a
// time; they come from relaxed.pool.
type scratch struct {
	factCost []int64 // h_add / h_max value of each fact, inf if unreached
	sup      []int32 // best supporter of each reached fact, -1 for state facts
	ops      []opState
	q        bucketQueue

	// Epoch-stamped marks (a mark is valid iff it equals the epoch).
	epoch    uint32
	factMark []uint32
	opMark   []uint32
	actMark  []uint32
	zoneMark []uint32 // LM-cut goal zone

	init    []int32 // relaxed facts of the evaluated state
	stack   []int32
	planOps []int32
	lmCost  []int32
	cut     []int32
}

func (r *relaxed) newScratch() *scratch {
	nf, no := r.nFacts, r.numOps()
	return &scratch{
		factCost: make([]int64, nf),
		sup:      make([]int32, nf),
		ops:      make([]opState, no),
		factMark: make([]uint32, nf),
		opMark:   make([]uint32, no),
		actMark:  make([]uint32, r.nActions),
		zoneMark: make([]uint32, nf),
		lmCost:   make([]int32, no),
	}
}

func (r *relaxed) getScratch() *scratch {
	if sc, ok := r.pool.Get().(*scratch); ok {
		return sc
	}
	return r.newScratch()
}

func (r *relaxed) putScratch(sc *scratch) { r.pool.Put(sc) }

// nextEpoch starts a fresh set of marks.
func (sc *scratch) nextEpoch() uint32 {
	sc.epoch++
	if sc.epoch == 0 {
		clear(sc.factMark)
		clear(sc.opMark)
		clear(sc.actMark)
		clear(sc.zoneMark)
		sc.epoch = 1
	}
	return sc.epoch
}

// collectInit stores in sc.init the relaxed facts that hold in s: its task
// facts, the complements of the negatively used facts it lacks, and TRUE.
// Bits beyond the task's facts are ignored.
func (r *relaxed) collectInit(s pddl.State, sc *scratch) {
	init := sc.init[:0]
	nt := r.nTaskFacts
words:
	for i, w := range s {
		for w != 0 {
			f := i*64 + trailingZeros(w)
			if f >= nt {
				break words
			}
			init = append(init, int32(f))
			w &= w - 1
		}
	}
	for i, f := range r.negOf {
		if int(f>>6) >= len(s) || s[f>>6]&(1<<(uint(f)&63)) == 0 {
			init = append(init, int32(nt+i))
		}
	}
	sc.init = append(init, r.trueFact)
}

// explore runs the generalized Dijkstra exploration of the relaxed task from
// the facts in sc.init (see collectInit) with operator costs cost: h_max values when useMax, h_add values
// otherwise. When stopAtGoal it stops as soon as GOAL's value is final (the
// values of facts popped so far, supporters and pcf of fired operators are
// then final). It returns GOAL's value (inf when unreachable).
func (r *relaxed) explore(sc *scratch, useMax, stopAtGoal bool, cost []int32) int64 {
	fc := sc.factCost[:r.nFacts]
	for i := range fc {
		fc[i] = inf
	}
	ops := sc.ops[:len(r.opInit)]
	copy(ops, r.opInit)
	sup := sc.sup[:r.nFacts]
	q := &sc.q
	q.reset()

	// Facts of the state (sc.init, from collectInit) cost 0.
	for _, f := range sc.init {
		fc[f] = 0
		sup[f] = -1
		q.push(0, f)
	}

	preOfStart, preOf := r.preOfStart, r.preOf
	info, add := r.info, r.add
	goal := r.goalFact
	for !q.empty() {
		k, f := q.pop()
		c := int64(k)
		if c > fc[f] {
			continue
		}
		if f == goal && stopAtGoal {
			break
		}
		for _, o := range preOf[preOfStart[f]:preOfStart[f+1]] {
			op := &ops[o]
			if useMax {
				if c > op.val {
					op.val = c
				}
			} else {
				op.val += c
			}
			op.unsat--
			if op.unsat != 0 {
				continue
			}
			op.pcf = f
			in := &info[o]
			v := op.val + int64(cost[o])
			op.val = v
			for _, g := range add[in.addLo:in.addHi] {
				if v < fc[g] {
					fc[g] = v
					sup[g] = o
					q.push(uint64(v), g)
				}
			}
		}
	}
	return fc[goal]
}

// extractPlan collects into sc.planOps the operators of the relaxed plan
// given by the best supporters of the last exploration (which must have
// reached GOAL), and returns its cost: the sum of the costs of its distinct
// actions.
func (r *relaxed) extractPlan(sc *scratch) int64 {
	ep := sc.nextEpoch()
	sc.planOps = sc.planOps[:0]
	stack := append(sc.stack[:0], r.goalFact)
	sc.factMark[r.goalFact] = ep
	var h int64
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		o := sc.sup[f]
		if o < 0 || sc.opMark[o] == ep {
			continue
		}
		sc.opMark[o] = ep
		sc.planOps = append(sc.planOps, o)
		if a := r.action[o]; a >= 0 && sc.actMark[a] != ep {
			sc.actMark[a] = ep
			h += int64(r.actCost[a])
		}
		for _, p := range r.pre[r.preStart[o]:r.preStart[o+1]] {
			if sc.factMark[p] != ep {
				sc.factMark[p] = ep
				stack = append(stack, p)
			}
		}
	}
	sc.stack = stack
	return h
}
