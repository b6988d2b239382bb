package pddl

import (
	"math/bits"
	"slices"
)

// successorGen answers "which actions apply in s" without visiting every
// action. Each action with a positive precondition is filed under one of its
// positive precondition facts, its key: the one least likely to hold,
// estimated from how many facts of the same predicate hold initially. A(s)
// visits only the buckets of facts true in s. Actions without a positive
// precondition are grouped by one negative precondition fact and skipped as a
// group when that fact holds. Preconditions are stored flat for locality.
// It is built once by Ground and only read afterwards, so Task.Applicable is
// safe for concurrent use.
type successorGen struct {
	// bucket[f] lists the actions keyed on fact f.
	bucket [][]int32
	// negGroups hold actions without positive preconditions; fact -1 means
	// the group has no negative precondition to test either.
	negGroups []negGroup
	// pre is every action's precondition flattened: for action a,
	// pre[preOff[a]:preOff[a+1]] holds positive facts f as f and negative
	// ones as ^f.
	pre    []int32
	preOff []int32
}

type negGroup struct {
	fact    int
	actions []int32
}

func newSuccessorGen(t *Task) *successorGen {
	n := len(t.Facts)
	g := &successorGen{bucket: make([][]int32, n), preOff: make([]int32, len(t.Actions)+1)}
	// Estimate of how likely each fact holds: (facts of its predicate true
	// initially + 1) / (facts of its predicate + 1).
	predTotal := map[string]int{}
	predInit := map[string]int{}
	for f, fact := range t.Facts {
		predTotal[fact.Predicate]++
		if t.Init != nil && f < 64*len(t.Init) && t.Init.Has(f) {
			predInit[fact.Predicate]++
		}
	}
	prob := make([]float64, n)
	for f, fact := range t.Facts {
		prob[f] = float64(predInit[fact.Predicate]+1) / float64(predTotal[fact.Predicate]+1)
	}
	negIndex := map[int]int{}
	for a := range t.Actions {
		pre := &t.Actions[a].Pre
		for _, f := range pre.Pos {
			g.pre = append(g.pre, int32(f))
		}
		for _, f := range pre.Neg {
			g.pre = append(g.pre, ^int32(f))
		}
		g.preOff[a+1] = int32(len(g.pre))
		if len(pre.Pos) > 0 {
			key := pre.Pos[0]
			for _, f := range pre.Pos[1:] {
				if prob[f] < prob[key] || prob[f] == prob[key] && len(g.bucket[f]) < len(g.bucket[key]) {
					key = f
				}
			}
			g.bucket[key] = append(g.bucket[key], int32(a))
			continue
		}
		key := -1
		if len(pre.Neg) > 0 {
			key = pre.Neg[0]
		}
		i, ok := negIndex[key]
		if !ok {
			i = len(g.negGroups)
			negIndex[key] = i
			g.negGroups = append(g.negGroups, negGroup{fact: key})
		}
		g.negGroups[i].actions = append(g.negGroups[i].actions, int32(a))
	}
	return g
}

// holds checks action a's flattened precondition in s.
func (g *successorGen) holds(s State, a int32) bool {
	for _, f := range g.pre[g.preOff[a]:g.preOff[a+1]] {
		if f >= 0 {
			if s[f>>6]&(1<<(uint32(f)&63)) == 0 {
				return false
			}
		} else if f = ^f; s[f>>6]&(1<<(uint32(f)&63)) != 0 {
			return false
		}
	}
	return true
}

func (g *successorGen) applicable(s State, buf []int) []int {
	start := len(buf)
	for i, w := range s {
		for w != 0 {
			f := i<<6 + bits.TrailingZeros64(w)
			w &= w - 1
			if f >= len(g.bucket) {
				break
			}
			for _, a := range g.bucket[f] {
				if g.holds(s, a) {
					buf = append(buf, int(a))
				}
			}
		}
	}
	for i := range g.negGroups {
		ng := &g.negGroups[i]
		if ng.fact >= 0 && s.Has(ng.fact) {
			continue
		}
		for _, a := range ng.actions {
			if g.holds(s, a) {
				buf = append(buf, int(a))
			}
		}
	}
	slices.Sort(buf[start:])
	return buf
}
