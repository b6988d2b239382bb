package trie

import (
	"math"
	"math/bits"
)

// Set is the result of Index.Allowed: the allowed token ids and, for each,
// the action-trie node its text leads to. A Set is reused across calls (one
// per goroutine): Allowed overwrites it and, once its buffers have grown,
// allocates nothing. The zero value is ready to use.
type Set struct {
	// IDs are the allowed token ids, each once, sorted by token text
	// (bytes; equal texts by id), end tokens last.
	IDs []int32
	// Next[i] is the node reached after IDs[i]: pass it to the next Allowed
	// call, or ask the ActionTrie whether it is Completed (the token ends an
	// action: apply it and start the next step at the new state's Root) or
	// IsEnd. For an end token it is EndToken.
	Next []Node

	bits  []uint64 // bit id set iff id is in IDs
	stack []pair   // Allowed's work stack
}

// pair is a position in the simultaneous walk: an action-trie node and the
// vocabulary-trie node spelling the same text since the walk's start.
type pair struct{ a, v int32 }

// reset empties s for a vocabulary of size ids.
func (s *Set) reset(size int) {
	words := (size + 63) / 64
	if len(s.bits) != words {
		s.bits = make([]uint64, words)
	} else {
		for _, id := range s.IDs {
			s.bits[id>>6] = 0
		}
	}
	s.IDs = s.IDs[:0]
	s.Next = s.Next[:0]
}

func (s *Set) add(id int32, next Node) {
	s.IDs = append(s.IDs, id)
	s.Next = append(s.Next, next)
	s.bits[id>>6] |= 1 << (uint(id) & 63)
}

// Len is the number of allowed tokens.
func (s *Set) Len() int { return len(s.IDs) }

// Has reports whether token id is allowed. It costs one bit test.
func (s *Set) Has(id int32) bool {
	return id >= 0 && int(id>>6) < len(s.bits) && s.bits[id>>6]&(1<<(uint(id)&63)) != 0
}

// NextOf returns the node reached after token id, or NoNode when id is not
// allowed. It scans IDs (sets are small); use Next[i] when the position is
// known.
func (s *Set) NextOf(id int32) Node {
	if !s.Has(id) {
		return NoNode
	}
	for i, v := range s.IDs {
		if v == id {
			return s.Next[i]
		}
	}
	return NoNode
}

// Bits returns the set as a bitset over the vocabulary (bit id%64 of word
// id/64). It is a view: do not modify it; the next Allowed call changes it.
func (s *Set) Bits() []uint64 { return s.bits }

// Mask sets every logit whose token is not in the set to -Inf, in place
// (logits has one entry per token id). It touches every logit: use IDs
// directly when only the allowed logits are needed (softmax, top-k).
func (s *Set) Mask(logits []float32) {
	inf := float32(math.Inf(-1))
	for w := 0; w*64 < len(logits); w++ {
		base := w * 64
		end := min(base+64, len(logits))
		var word uint64
		if w < len(s.bits) {
			word = s.bits[w]
		}
		if word == 0 {
			for i := base; i < end; i++ {
				logits[i] = inf
			}
			continue
		}
		for i := base; i < end; i++ {
			if word&(1<<uint(i-base)) == 0 {
				logits[i] = inf
			}
		}
	}
}

// count returns the number of set bits (tests check it equals Len).
func (s *Set) count() int {
	n := 0
	for _, w := range s.bits {
		n += bits.OnesCount64(w)
	}
	return n
}

// Allowed computes into out the exact set of tokens v such that the partial
// step text at node from, followed by text(v), is a prefix of some step text
// of at: an applicable action string plus separator, or the end marker when
// ending is allowed. Any tokenization qualifies, canonical or not, and
// tokens are compared as bytes, so a token holding part of a multi-byte
// UTF-8 character (or a single byte-fallback byte) is allowed wherever its
// bytes fit. A token may end exactly at a separator but never run past it:
// a step never spills into the next one (whose actions depend on the state
// the completed action leads to). At Root, when at allows ending, the end
// tokens (IndexOptions.EndTokens) are added with next node EndToken. An
// invalid from (NoNode, EndToken, out of range) gives an empty set; so does
// a dead end (no applicable action and ending not allowed), which the caller
// must handle.
//
// It walks the action trie below from and the vocabulary trie together,
// visiting only texts that are both a continuation of the partial step and
// a prefix of some token, so its cost does not grow with the vocabulary.
func (x *Index) Allowed(at *ActionTrie, from Node, out *Set) {
	out.reset(len(x.text))
	if !at.valid(from) {
		return
	}
	// Depth-first, children pushed in reverse byte order so that tokens come
	// out sorted by text. A pair is pushed when its vocabulary node has
	// tokens ending there, or longer tokens and the action trie continues.
	st := append(out.stack[:0], pair{int32(from), 0})
	an, aEdgeByte, aEdgeNode := at.tree.nodes, at.tree.edgeByte, at.tree.edgeNode
	for len(st) > 0 {
		p := st[len(st)-1]
		st = st[:len(st)-1]
		vn := &x.tree.nodes[p.v]
		for _, id := range x.perm[vn.lo:vn.exact] { // none at the start pair: the root has no tokens
			out.add(id, Node(p.a))
		}
		if vn.hi == vn.exact {
			continue // no longer tokens
		}
		nd := an[p.a]
		for e := nd.edges + nd.nEdges - 1; e >= nd.edges; e-- {
			vc := x.child(p.v, aEdgeByte[e])
			if vc < 0 {
				continue
			}
			ac := aEdgeNode[e]
			if c := &x.tree.nodes[vc]; c.exact > c.lo || an[ac].nEdges > 0 {
				st = append(st, pair{ac, vc})
			}
		}
	}
	out.stack = st
	if from == Root && at.endAllowed {
		for _, id := range x.end {
			out.add(id, EndToken)
		}
	}
}

// AllowedAfter is Allowed from the node that partial (the step text written
// so far) leads to from Root; it returns that node, or NoNode (and an empty
// set) when partial is not a prefix of any step text.
func (x *Index) AllowedAfter(at *ActionTrie, partial []byte, out *Set) Node {
	n := at.Walk(Root, partial)
	x.Allowed(at, n, out)
	return n
}
