package mcts

import (
	"github.com/nesy-dev/nesy/constraint"
	"math"

	"github.com/nesy-dev/nesy/models"
)

// kind says what a node is.
type kind uint8

const (
	open     kind = iota // can be expanded
	goal                 // its plan reaches the goal (terminal)
	terminal             // its plan ended without the goal: end token, max actions, depth limit (terminal)
	dead                 // dead end, invalid text (unconstrained), loop or bound (terminal, a loss)
)

// phase says where an open node is in its life.
type phase uint8

const (
	fresh    phase = iota // created, not evaluated
	pending               // selected for evaluation in the current batch
	expanded              // evaluated: children known
)

// node is a node of the search tree: a position in the plan (symbolic state,
// partial action text: both in cur) reached from the parent by one token or a
// collapsed chain of forced tokens, and the model sequence that holds its
// prefix when one is kept.
type node struct {
	parent *node
	// toks are the tokens of the edge from the parent (more than one for a
	// collapsed forced chain).
	toks []int32
	cur  constraint.Cursor
	// depth is the number of sequence positions after toks (prompt
	// included).
	depth int
	// prior is p(toks[0] | parent): the constrained prior (renormalised
	// over the allowed tokens) or the model's full distribution.
	prior float64
	// static is the node's own raw value (see value.go); unused when kind
	// is dead.
	static float64
	kind   kind
	phase  phase
	// boundary is the nearest node at or above this one whose cursor is at
	// an action boundary (for the loop check).
	boundary *node

	// Statistics. n counts backed-up values, w sums the finite ones (losses
	// counted apart, valued at the tree's current minimum), best is the
	// largest; vl counts virtual losses in flight.
	n, losses, vl int
	w, best       float64
	// rollout is the best rollout value from this node (-Inf: none).
	rollout float64

	children []*node
	// rest are the allowed tokens left out of children, best prior first
	// (constrained search only), for widening.
	rest []cand
	// live counts children not exhausted; unevaluated counts open children
	// not yet evaluated (the node's sequence is kept for their forks).
	live, unevaluated int
	exhausted         bool
	// blocked is the number of the batch in which this node was selected
	// for evaluation or found with nothing left to select (see selectLeaf).
	blocked int

	// The model sequence holding this node's prefix, when kept.
	seq    models.SeqID
	hasSeq bool
	used   int64 // last use, for least-recently-used eviction
	slot   int   // index in searcher.holders

	// For Options.OnTree: the node's number (creation order, the root 0)
	// and what was last reported of it (see observe.go).
	id       int32
	reported report
}

// cand is an allowed next token with its prior.
type cand struct {
	id    int32
	next  int32 // trie node (constrained), unused otherwise
	prior float64
}

// stats keeps the value range the tree has seen, for normalisation.
type valueRange struct {
	lo, hi float64
}

func newRange() valueRange { return valueRange{math.Inf(1), math.Inf(-1)} }

func (r *valueRange) add(v float64) {
	r.lo = min(r.lo, v)
	r.hi = max(r.hi, v)
}

// norm maps a raw value into [0, 1] by the range seen so far (MuZero's
// min-max normalisation); 0.5 while the range is empty or a point.
func (r *valueRange) norm(v float64) float64 {
	if !(r.hi > r.lo) {
		return 0.5
	}
	return min(1, max(0, (v-r.lo)/(r.hi-r.lo)))
}

// q returns the node's normalised value for selection, diluted by pending
// virtual losses (each worth the tree's smallest value): under BackupMax
// the best value among its live children once it is expanded (see
// refresh), under BackupMean the mean of the values backed up through it;
// before that its static value.
func (s *searcher) q(c *node) float64 {
	if c.kind == dead {
		return math.Inf(-1)
	}
	lo := s.vr.lo
	if math.IsInf(lo, 1) {
		lo = c.static
	}
	var stat float64
	k := c.n
	switch {
	case s.opts.Backup == BackupMax:
		stat = c.static
		if c.phase == expanded && !math.IsInf(c.best, -1) {
			stat = c.best
		}
	case c.n == 0:
		stat = c.static
	default:
		stat = (c.w + float64(c.losses)*lo) / float64(c.n)
	}
	if c.vl > 0 {
		stat = (stat*float64(k) + lo*float64(c.vl)) / float64(k+c.vl)
	}
	if s.opts.Normalize == NormalizeUnit {
		return (stat - s.root.static) / s.opts.ValueScale
	}
	return s.vr.norm(stat)
}

// pick returns the child of n with the highest PUCB score among those
// neither exhausted nor blocked in the current batch, or nil.
func (s *searcher) pick(n *node) *node {
	visits := float64(n.n + n.vl)
	c := s.opts.C
	if s.opts.Base > 0 {
		c += math.Log((1 + visits + s.opts.Base) / s.opts.Base)
	}
	u := c * math.Sqrt(visits)
	var best *node
	bestScore := math.Inf(-1)
	for _, ch := range n.children {
		if ch.exhausted || ch.blocked == s.batch {
			continue
		}
		score := s.q(ch) + u*ch.prior/float64(1+ch.n+ch.vl)
		if score > bestScore {
			best, bestScore = ch, score
		}
	}
	return best
}

// selectLeaf walks from the root by PUCB to a fresh node (not expanded,
// not pending). Within a batch, pending leaves and nodes whose live
// children are all blocked are blocked: the walk skips them, and when it
// reaches a node with nothing left to choose it blocks that node and starts
// again from the root (counted in Stats.Collisions). It returns nil when
// the root is exhausted or blocked.
func (s *searcher) selectLeaf() *node {
	n := s.root
	for {
		if n.exhausted || n.blocked == s.batch {
			return nil
		}
		if n.phase != expanded {
			return n
		}
		c := s.pick(n)
		if c == nil {
			if n.live == 0 {
				s.exhaust(n) // (cannot happen: exhausted when the last child was)
			} else {
				n.blocked = s.batch
				s.stats.Collisions++
			}
			n = s.root
			continue
		}
		n = c
	}
}

func (s *searcher) addVirtualLoss(leaf *node, k int) {
	for x := leaf; x != nil; x = x.parent {
		x.vl += k
	}
}

// backup records a leaf value (a loss when lossy) on the path to the root
// and removes the leaf's virtual loss. Under BackupMax the value is the
// leaf's rollout, if any; the path's maxima are recomputed from the
// children (see refresh).
func (s *searcher) backup(leaf *node, v float64, loss bool) {
	for x := leaf; x != nil; x = x.parent {
		x.vl -= s.opts.VirtualLoss
		x.n++
		if loss {
			x.losses++
			continue
		}
		x.w += v
	}
	if !loss {
		s.vr.add(v)
		if s.opts.Rollout > 0 {
			leaf.rollout = max(leaf.rollout, v)
		}
	}
	if s.opts.Backup == BackupMax {
		s.refresh(leaf)
	}
}

// refresh recomputes the max-backup value of n and its ancestors: the best
// value among a node's live children (a child's own max once it is
// expanded, else its static value) and its rollouts. A node's own static
// value is an estimate that its children replace once they are known, so
// an optimistic estimate does not linger over children that all fall
// short of it.
func (s *searcher) refresh(n *node) {
	for x := n; x != nil; x = x.parent {
		b := x.rollout
		for _, c := range x.children {
			if c.exhausted {
				continue
			}
			v := c.static
			if c.phase == expanded {
				v = c.best
			}
			b = max(b, v)
		}
		if b == x.best && x != n {
			return
		}
		x.best = b
	}
}

// exhaust marks n as fully searched: it is never selected again, its
// sequences are released, and its parent is widened or exhausted in turn
// when n was its last live child.
func (s *searcher) exhaust(n *node) {
	for n != nil && !n.exhausted {
		n.exhausted = true
		if n.phase == expanded {
			s.releaseSubtree(n)
		}
		p := n.parent
		if p == nil {
			return
		}
		p.live--
		if s.opts.Backup == BackupMax && p.phase == expanded {
			s.refresh(p)
		}
		if n.phase == fresh && n.kind == open {
			p.unevaluated--
			s.maybeReleaseParent(p)
		}
		if p.live > 0 {
			return
		}
		if s.widen(p) {
			return
		}
		n = p
	}
}
