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

// request is one leaf's evaluation.
type request struct {
	leaf *node
	seq  models.SeqID
	toks []int32
}

// prepare forks a sequence for the leaf from its nearest holding ancestor
// and gathers the tokens to evaluate. It returns false when no slot could
// be freed (the leaf waits for a later batch).
func (s *searcher) prepare(leaf *node) (request, bool, error) {
	src := leaf.parent
	for !src.hasSeq {
		src = src.parent
	}
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
		if !s.evictOne(src) {
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
	for i, leaf := range leaves {
		r, ok, err := s.prepare(leaf)
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
	res, err := s.evalRetry(batch)
	if err != nil {
		s.drop(batch)
		return nil, err
	}
	for k, r := range batch {
		rows[at[k]] = lastRow(res[k])
		s.stats.EvaluatedTokens += int64(res[k].Positions)
		s.stats.RecomputedTokens += int64(len(r.toks) - len(r.leaf.toks))
		s.hold(r.leaf, r.seq)
	}
	s.leaves += len(batch)
	s.calls++
	s.stats.ModelCalls++
	return rows, nil
}

// evalRetry runs one Eval for the batch; when the cache is full it evicts
// holders and retries, and when nothing more can be evicted it fails.
func (s *searcher) evalRetry(batch []request) ([]models.EvalResult, error) {
	reqs := make([]models.EvalRequest, len(batch))
	for i, r := range batch {
		reqs[i] = models.EvalRequest{Seq: r.seq, Tokens: r.toks}
	}
	for {
		res, err := s.lm.Eval(s.ctx, reqs)
		if err == nil {
			return res, nil
		}
		if !errors.Is(err, models.ErrCacheFull) || !s.evictOne() {
			return nil, fmt.Errorf("mcts: evaluating %d leaves: %w", len(reqs), err)
		}
		// Free more than one holder per retry: a batch needs room for all
		// its tokens.
		for i := 0; i < len(batch) && s.evictOne(); i++ {
		}
	}
}

// drop releases the forks of a failed batch.
func (s *searcher) drop(batch []request) {
	for _, r := range batch {
		s.lm.Release(r.seq)
	}
}
