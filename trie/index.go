package trie

import "fmt"

// IndexOptions configure NewIndex. The zero value is valid.
type IndexOptions struct {
	// EndTokens are token ids that end the plan (the model's EOS and
	// end-of-turn tokens). Allowed adds them, with next node EndToken, where
	// the action trie allows ending (at its root, when Spec.EndAllowed).
	// They are never matched as text, even when not flagged special. Nil
	// means none: the caller ends plans by other means.
	EndTokens []int32
}

// Index is a model's vocabulary indexed by token text: a byte trie over the
// decoded bytes of every text token. Tokens are sorted by (text, id) into a
// permutation so that the tokens below any trie node are a contiguous run
// of it. Build it once per model with NewIndex; it is immutable and safe for
// concurrent use.
//
// Text tokens are those not flagged special, with non-empty text, and not
// among IndexOptions.EndTokens; only they can spell plan text.
type Index struct {
	text [][]byte // the caller's decoded token texts, by id
	perm []int32  // text token ids sorted by (text, id)
	tree tree     // trie over text[perm[i]]
	root [256]int32
	end  []int32 // end tokens
	kind []uint8 // by id: kindOther, kindText or kindEnd
}

const (
	kindOther uint8 = iota // special or empty: never allowed
	kindText               // indexed by its text
	kindEnd                // an end token
)

// NewIndex indexes a vocabulary. text[id] is the decoded bytes of token id
// and special[id] marks control tokens (models.Vocab's Text and Special, or
// vocab.Decoded's); both must have the vocabulary's length. The index keeps
// text (it does not copy it): do not modify it afterwards.
func NewIndex(text [][]byte, special []bool, opts IndexOptions) (*Index, error) {
	if len(text) != len(special) {
		return nil, fmt.Errorf("trie: %d token texts but %d special flags", len(text), len(special))
	}
	if len(text) >= 1<<31-1 {
		return nil, fmt.Errorf("trie: vocabulary of %d tokens is too large", len(text))
	}
	x := &Index{text: text, kind: make([]uint8, len(text))}
	for _, id := range opts.EndTokens {
		if id < 0 || int(id) >= len(text) {
			return nil, fmt.Errorf("trie: end token %d outside the vocabulary of %d tokens", id, len(text))
		}
		if x.kind[id] != kindEnd {
			x.kind[id] = kindEnd
			x.end = append(x.end, id)
		}
	}
	for id, t := range text {
		if !special[id] && len(t) > 0 && x.kind[id] != kindEnd {
			x.kind[id] = kindText
			x.perm = append(x.perm, int32(id))
		}
	}
	sortByKey(x.perm, text)
	keys := make([][]byte, len(x.perm))
	for i, id := range x.perm {
		keys[i] = text[id]
	}
	x.tree = buildTree(keys)
	x.tree.parent, x.tree.label = nil, nil // not needed for the vocabulary
	for b := range x.root {
		x.root[b] = x.tree.child(0, byte(b))
	}
	return x, nil
}

// Size is the vocabulary size (len(text) given to NewIndex).
func (x *Index) Size() int { return len(x.text) }

// TextTokens is the number of indexed text tokens.
func (x *Index) TextTokens() int { return len(x.perm) }

// Nodes is the number of byte-trie nodes (a measure of the index's memory:
// about 25 bytes each).
func (x *Index) Nodes() int { return len(x.tree.nodes) }

// Text returns the decoded bytes of token id (nil when out of range). Do not
// modify the result.
func (x *Index) Text(id int32) []byte {
	if id < 0 || int(id) >= len(x.text) {
		return nil
	}
	return x.text[id]
}

// IsText reports whether id is an indexed text token (it may appear in an
// allowed set by its text).
func (x *Index) IsText(id int32) bool {
	return id >= 0 && int(id) < len(x.kind) && x.kind[id] == kindText
}

// EndTokens returns the end tokens (IndexOptions.EndTokens without
// duplicates). Do not modify the result.
func (x *Index) EndTokens() []int32 { return x.end }

// IsEnd reports whether id is one of the end tokens.
func (x *Index) IsEnd(id int32) bool {
	return id >= 0 && int(id) < len(x.kind) && x.kind[id] == kindEnd
}

// child is tree.child with a direct table at the root.
func (x *Index) child(n int32, b byte) int32 {
	if n == 0 {
		return x.root[b]
	}
	return x.tree.child(n, b)
}

// lookup returns the trie node of path s, or -1 when no text token starts
// with s.
func (x *Index) lookup(s []byte) int32 {
	n := int32(0)
	for _, b := range s {
		if n = x.child(n, b); n < 0 {
			return -1
		}
	}
	return n
}

// exact returns the ids whose text is exactly node n's path.
func (x *Index) exact(n int32) []int32 {
	nd := &x.tree.nodes[n]
	return x.perm[nd.lo:nd.exact:nd.exact]
}

// WithPrefix returns the text tokens whose text starts with s (s itself
// included), sorted by (text, id); nil when there are none. The result is a
// view into the index: do not modify it. It costs one trie step per byte of
// s and allocates nothing.
func (x *Index) WithPrefix(s []byte) []int32 {
	n := x.lookup(s)
	if n < 0 {
		return nil
	}
	nd := &x.tree.nodes[n]
	return x.perm[nd.lo:nd.hi:nd.hi]
}

// PrefixesOf appends to dst the text tokens whose text is a non-empty prefix
// of s (s itself included), shortest first, and returns the extended slice.
func (x *Index) PrefixesOf(s []byte, dst []int32) []int32 {
	n := int32(0)
	for _, b := range s {
		if n = x.child(n, b); n < 0 {
			break
		}
		dst = append(dst, x.exact(n)...)
	}
	return dst
}
