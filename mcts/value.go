package mcts

import (
	"github.com/nesy-dev/nesy/constraint"
	"math"

	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/trie"
)

// maskKey identifies a (state, partial action) position: the state's action
// trie (one per state in the Space's cache) and the node of the partial text.
type maskKey struct {
	at   *trie.ActionTrie
	node trie.Node
}

// mask is what the tree keeps per (state, partial): the allowed tokens with
// their next nodes, and the best heuristic value among the actions the
// partial text can still become.
type mask struct {
	ids  []int32
	next []trie.Node
	// hmin is min over consistent actions a of h(apply(s, a)); +Inf when
	// every one leads to a dead end. Computed on first use (hminOK).
	hmin   float64
	hminOK bool
	// into[i] is the index of the token that dominates token i (see
	// dominance), i itself for a token kept as a child.
	into []int32
}

// maxMasks bounds the mask cache; it is cleared when full (the Space's own
// per-state trie cache keeps rebuilding cheap).
const maxMasks = 1 << 16

// mask returns the cached mask of the open cursor c.
func (s *searcher) mask(c constraint.Cursor) *mask {
	k := maskKey{c.Trie(), c.Node()}
	if m, ok := s.masks[k]; ok {
		s.stats.MaskHits++
		return m
	}
	s.sp.Allowed(c, &s.set)
	m := &mask{
		ids:  append([]int32(nil), s.set.IDs...),
		next: append([]trie.Node(nil), s.set.Next...),
	}
	m.into = dominance(s.idx, c.Trie(), m.ids, m.next)
	if len(s.masks) >= maxMasks {
		clear(s.masks)
	}
	s.masks[k] = m
	s.stats.MaskMisses++
	return m
}

// forced returns the one token a node at this mask can go on with: the
// only allowed one, or, unless all (Options.AllTokens), the one every
// allowed token folds into (inside a goal trace the text is forced but the
// vocabulary spells it several ways: the node would have one child).
func (m *mask) forced(all bool) (int, bool) {
	switch {
	case len(m.ids) == 1:
		return 0, true
	case all || len(m.ids) == 0:
		return 0, false
	}
	t := m.into[0]
	for _, v := range m.into[1:] {
		if v != t {
			return 0, false
		}
	}
	return int(t), m.next[t] >= 0
}

// h returns the heuristic value of a state (cached by state).
func (s *searcher) h(st pddl.State) float64 {
	k := st.Key()
	if v, ok := s.hcache[k]; ok {
		return v
	}
	v, deadEnd := s.heur.Eval(st)
	if deadEnd {
		v = math.Inf(1)
	}
	s.hcache[k] = v
	s.stats.HeuristicEvals++
	return v
}

// hmin returns the best heuristic value among the successors by the
// applicable actions whose text still starts with c's partial text, less
// the helpful-action bonus for actions FF's relaxed plan uses.
func (s *searcher) hmin(c constraint.Cursor, m *mask) float64 {
	if m.hminOK {
		return m.hmin
	}
	at, st := c.Trie(), c.State()
	helpful := s.helpful(st)
	best := math.Inf(1)
	s.idxBuf = at.Consistent(c.Node(), s.idxBuf[:0])
	for _, i := range s.idxBuf {
		// By the cursor's action id, not by looking the trie's text up in
		// the lexicon: with a Trace the text carries it.
		a := c.TrieAction(int(i))
		h := s.h(s.task.Apply(st, a))
		if helpful[a] {
			h -= s.opts.Helpful
		}
		best = min(best, h)
	}
	m.hmin, m.hminOK = best, true
	return best
}

// helpful returns FF's helpful actions in st (the applicable actions of
// its relaxed plan), cached by state; nil when the bonus is off.
func (s *searcher) helpful(st pddl.State) map[int]bool {
	if s.ff == nil {
		return nil
	}
	k := st.Key()
	if m, ok := s.hcache2[k]; ok {
		return m
	}
	s.actBuf = s.ff.Helpful(st, s.actBuf[:0])
	m := make(map[int]bool, len(s.actBuf))
	for _, a := range s.actBuf {
		m[a] = true
	}
	s.hcache2[k] = m
	return m
}

// staticValue returns the raw value of an open node at cursor c, and false
// when it is a dead end: at an action boundary -h(s) - lambda*|plan|; inside
// an action (unless NoLookahead) the best completion's value,
// -min_a h(s·a) - lambda*(|plan|+1).
func (s *searcher) staticValue(c constraint.Cursor) (float64, bool) {
	lam := s.opts.Lambda
	if c.AtBoundary() || s.opts.NoLookahead {
		h := s.h(c.State())
		return -h - lam*float64(c.Len()), !math.IsInf(h, 1)
	}
	h := s.hmin(c, s.mask(c))
	return -h - lam*float64(c.Len()+1), !math.IsInf(h, 1)
}

// planValue is the value of a plan that ended at c without the goal:
// -h(s) - lambda*|plan| (false for a dead-end state).
func (s *searcher) planValue(c constraint.Cursor) (float64, bool) {
	h := s.h(c.State())
	return -h - s.opts.Lambda*float64(c.Len()), !math.IsInf(h, 1)
}

// dominance finds, for each allowed token, the longest allowed token that
// extends its text and leaves the same actions possible: writing the longer
// one loses no plan, so the shorter one is folded into it (its prior added)
// unless Options.AllTokens. ids are sorted by text, so the extensions of a
// token's text follow it.
func dominance(idx *trie.Index, at *trie.ActionTrie, ids []int32, next []trie.Node) []int32 {
	into := make([]int32, len(ids))
	for i := range ids {
		into[i] = int32(i)
		if next[i] < 0 {
			continue
		}
		ti := idx.Text(ids[i])
		ni := at.NumConsistent(next[i])
		best, bestLen := i, len(ti)
		for j := i + 1; j < len(ids) && next[j] >= 0; j++ {
			tj := idx.Text(ids[j])
			if len(tj) < len(ti) || string(tj[:len(ti)]) != string(ti) {
				break
			}
			if len(tj) > bestLen && at.NumConsistent(next[j]) == ni {
				best, bestLen = j, len(tj)
			}
		}
		into[i] = int32(best)
	}
	return into
}
