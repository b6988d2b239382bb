package mcts

import (
	"errors"
	"fmt"
	"slices"

	"github.com/nesy-dev/nesy/models"
)

// Model sequences. The engine has a fixed number of sequence slots and a
// finite KV cache, far fewer than tree nodes. A node keeps the sequence
// that evaluated it (prompt plus its path) while its children may still
// need forks of it; the root keeps the prompt for the whole search. A leaf is
// evaluated on a fork of its nearest ancestor that still holds a sequence,
// with the tokens from that ancestor down to the leaf (normally just the
// leaf's own edge). When the engine runs out of slots (models.ErrNoSequences)
// or cells (models.ErrCacheFull), the least recently used holders other than
// the root are released; their descendants then recompute the lost tokens,
// which count as evaluated (and recomputed) tokens.

// hold records that n keeps seq.
func (s *searcher) hold(n *node, seq models.SeqID) {
	n.seq, n.hasSeq = seq, true
	s.tick++
	n.used = s.tick
	n.slot = len(s.holders)
	s.holders = append(s.holders, n)
}

// release frees n's sequence.
func (s *searcher) release(n *node) {
	if !n.hasSeq {
		return
	}
	s.lm.Release(n.seq)
	n.hasSeq = false
	last := s.holders[len(s.holders)-1]
	s.holders[n.slot] = last
	last.slot = n.slot
	s.holders = s.holders[:len(s.holders)-1]
}

// releaseAll frees every sequence the search holds.
func (s *searcher) releaseAll() {
	for len(s.holders) > 0 {
		s.release(s.holders[len(s.holders)-1])
	}
}

// releaseSubtree frees the sequences of n and its descendants (n was
// exhausted: none of them can be chosen again).
func (s *searcher) releaseSubtree(n *node) {
	for i := 0; i < len(s.holders); {
		h := s.holders[i]
		if h != s.root && isUnder(h, n) {
			s.release(h) // moves the last holder into slot i
			continue
		}
		i++
	}
}

func isUnder(h, n *node) bool {
	for x := h; x != nil; x = x.parent {
		if x == n {
			return true
		}
	}
	return false
}

// maybeReleaseParent frees p's sequence once no child of p awaits a fork.
func (s *searcher) maybeReleaseParent(p *node) {
	if p != s.root && p.unevaluated == 0 {
		s.release(p)
	}
}

// evictOne releases the least recently used holder other than the root and
// the nodes in keep; it reports whether there was one.
func (s *searcher) evictOne(keep ...*node) bool {
	var victim *node
	for _, h := range s.holders {
		if h == s.root || slices.Contains(keep, h) {
			continue
		}
		if victim == nil || h.used < victim.used {
			victim = h
		}
	}
	if victim == nil {
		return false
	}
	s.release(victim)
	s.stats.Evictions++
	return true
}

// source returns the nearest ancestor of leaf that holds a sequence (the
// root always does).
func source(leaf *node) *node {
	src := leaf.parent
	for !src.hasSeq {
		src = src.parent
	}
	return src
}

// request is one leaf's evaluation.
type request struct {
	leaf *node
	seq  models.SeqID
	toks []int32
}

// prepare forks a sequence for the leaf from its nearest holding ancestor
// and gathers the tokens to evaluate. It returns false when no slot could
// be freed (the leaf waits for a later batch).
//
// keep are the sources of the batch's leaves (src among them): evicting one
// would make its leaf recompute its path from an older ancestor (with a
// small share of slots, a batch that evicts its own sources thrashes). When
// the batch is still empty (first) and only kept sources hold sequences,
// any of them but src may go, so that the batch gets at least one leaf.
func (s *searcher) prepare(leaf *node, keep []*node, first bool) (request, bool, error) {
	src := source(leaf)
	var path []*node
	for x := leaf; x != src; x = x.parent {
		path = append(path, x)
	}
	var toks []int32
	for i := len(path) - 1; i >= 0; i-- {
		toks = append(toks, path[i].toks...)
	}
	for {
		seq, err := s.lm.Fork(src.seq, src.depth)
		if err == nil {
			s.tick++
			src.used = s.tick
			s.stats.Forks++
			return request{leaf: leaf, seq: seq, toks: toks}, true, nil
		}
		if !errors.Is(err, models.ErrNoSequences) {
			return request{}, false, fmt.Errorf("mcts: fork: %w", err)
		}
		if !s.evictOne(keep...) && (!first || !s.evictOne(src)) {
			return request{}, false, nil
		}
	}
}

// evaluate evaluates the leaves in one Eval call (each a fork of its
// parent's sequence plus its edge tokens) and returns each leaf's logits,
// nil for leaves deferred for want of a sequence slot (their virtual loss
// is removed and they are fresh again).
func (s *searcher) evaluate(leaves []*node) ([][]float32, error) {
	rows := make([][]float32, len(leaves))
	var batch []request
	var at []int
	keep := make([]*node, 0, len(leaves))
	for _, leaf := range leaves {
		keep = append(keep, source(leaf))
	}
	for i, leaf := range leaves {
		r, ok, err := s.prepare(leaf, keep, len(batch) == 0)
		if err != nil {
			s.drop(batch)
			return nil, err
		}
		if !ok {
			leaf.phase = fresh
			s.addVirtualLoss(leaf, -s.opts.VirtualLoss)
			continue
		}
		batch = append(batch, r)
		at = append(at, i)
	}
	if len(batch) == 0 {
		return nil, errors.New("mcts: no sequence slot free for any leaf (the engine's slots are held elsewhere)")
	}
	res, done, err := s.evalFit(batch)
	if err != nil {
		s.drop(batch)
		return nil, err
	}
	for k, r := range batch {
		if !done[k] {
			// It did not fit in the cache beside the others: it waits.
			s.lm.Release(r.seq)
			r.leaf.phase = fresh
			s.addVirtualLoss(r.leaf, -s.opts.VirtualLoss)
			continue
		}
		rows[at[k]] = lastRow(res[k])
		s.stats.EvaluatedTokens += int64(res[k].Positions)
		s.stats.RecomputedTokens += int64(len(r.toks) - len(r.leaf.toks))
		s.hold(r.leaf, r.seq)
	}
	for _, d := range done {
		if d {
			s.leaves++
		}
	}
	return rows, nil
}

// evalFit evaluates the batch. When the KV cache is full it evicts
// holders and retries; when nothing more can be evicted it evaluates the
// batch in halves, and a part that still does not fit is left out (done
// false). It fails only when not even one leaf fits.
func (s *searcher) evalFit(batch []request) ([]models.EvalResult, []bool, error) {
	res := make([]models.EvalResult, len(batch))
	done := make([]bool, len(batch))
	var run func(lo, hi int) error
	run = func(lo, hi int) error {
		reqs := make([]models.EvalRequest, 0, hi-lo)
		for _, r := range batch[lo:hi] {
			reqs = append(reqs, models.EvalRequest{Seq: r.seq, Tokens: r.toks, Candidates: s.candidateIDs(r.leaf.cur), CompactCandidates: true})
		}
		for {
			before := s.lm.Stats()
			out, err := s.lm.Eval(s.ctx, reqs)
			if err == nil {
				copy(res[lo:hi], out)
				for i := lo; i < hi; i++ {
					done[i] = true
				}
				s.calls++
				s.stats.ModelCalls++
				return nil
			}
			if !errors.Is(err, models.ErrCacheFull) {
				return fmt.Errorf("mcts: evaluating %d leaves: %w", len(reqs), err)
			}
			// The passes that ran before the cache filled were computed and
			// thrown away: count them (from the engine's totals, which
			// other users of the engine may inflate meanwhile).
			after := s.lm.Stats()
			s.stats.EvaluatedTokens += after.EvaluatedTokens - before.EvaluatedTokens
			s.stats.RecomputedTokens += after.EvaluatedTokens - before.EvaluatedTokens
			s.stats.ModelCalls++
			if !s.evictOne() {
				if hi-lo == 1 {
					return nil // left out
				}
				mid := (lo + hi) / 2
				if err := run(lo, mid); err != nil {
					return err
				}
				return run(mid, hi)
			}
			// A batch needs room for all its tokens: free a few more.
			for i := 0; i < hi-lo && s.evictOne(); i++ {
			}
		}
	}
	if err := run(0, len(batch)); err != nil {
		return nil, nil, err
	}
	if !slices.Contains(done, true) {
		return nil, nil, fmt.Errorf("mcts: %w: not even one leaf fits beside the prompt (give the engine a larger CacheSize)", models.ErrCacheFull)
	}
	return res, done, nil
}

// drop releases the forks of a failed batch.
func (s *searcher) drop(batch []request) {
	for _, r := range batch {
		s.lm.Release(r.seq)
	}
}
