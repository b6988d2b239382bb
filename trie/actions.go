package trie

import (
	"fmt"
	"slices"
	"strings"
)

// Node is a node of an ActionTrie: the text spelled so far in the current
// step, as a position in the trie. Root (0) is the start of a step (no text
// yet). Nodes are only meaningful for the trie that produced them.
type Node int32

const (
	// Root is the start of a step: the empty partial text.
	Root Node = 0
	// EndToken is the next node reported for an end token (IndexOptions.
	// EndTokens) in an allowed Set: the plan ends without further text.
	EndToken Node = -1
	// NoNode is returned by walks that leave the trie.
	NoNode Node = -2
)

// DefaultSeparator ends every action string unless Spec.Separator says
// otherwise.
const DefaultSeparator = "\n"

// Spec lists what may be written in one step of a plan. The zero value
// (no actions, ending not allowed) allows nothing.
type Spec struct {
	// Actions are the applicable action strings, e.g. "go to countertop 1";
	// the index of a string is the caller's action index. The same string
	// may appear more than once: Completed resolves it to the lowest index.
	// A string must be non-empty and must not contain Separator.
	Actions []string
	// Separator ends every action: a step's text is an action string
	// followed by Separator. Empty means DefaultSeparator ("\n").
	Separator string
	// EndAllowed says the plan may end at this step: by an end token (see
	// IndexOptions.EndTokens) and, when End is not empty, by writing End.
	EndAllowed bool
	// End is the text that ends the plan, matched verbatim (no separator is
	// appended), e.g. "\n" for an empty line or "done\n". It is used only when
	// EndAllowed. It must not be a proper prefix of an action string plus
	// separator, nor have one as a proper prefix; it may equal one (the node
	// is then both Completed and IsEnd; the caller chooses). Empty means no
	// textual end marker.
	End string
}

// ActionTrie is the byte trie of one state's step texts: every applicable
// action string followed by the separator, plus the end marker when ending is
// allowed. Build it with NewActionTrie (or through a Cache); it is
// immutable and safe for concurrent use.
//
// A node's path is the partial text of the current step. Terminal nodes
// (Completed or IsEnd) are leaves: a step ends exactly at its separator, and
// no token may run past it (see Index.Allowed).
type ActionTrie struct {
	actions    []string
	sep        string
	end        string // "" when ending by text is not allowed
	endAllowed bool
	tree       tree
	// order lists the step texts sorted by (text, action index); the end
	// marker sorts after an equal action and is -1. A node's actions are
	// order[lo:hi] (minus the end marker, at endPos, if inside).
	order  []int32
	endPos int32   // position of the end marker in order, or -1
	action []int32 // by node: the lowest action index whose step text is the node's path, or -1
	isEnd  []bool  // by node: the node's path is the end marker
}

// NewActionTrie builds the trie of a step. It costs O(total text length +
// n log n) for n actions: a few microseconds for an ALFWorld state.
func NewActionTrie(spec Spec) (*ActionTrie, error) {
	sep := spec.Separator
	if sep == "" {
		sep = DefaultSeparator
	}
	for i, a := range spec.Actions {
		if a == "" {
			return nil, fmt.Errorf("trie: action %d is empty", i)
		}
		if strings.Contains(a, sep) {
			return nil, fmt.Errorf("trie: action %d %q contains the separator %q", i, a, sep)
		}
	}
	at := &ActionTrie{actions: spec.Actions, sep: sep, endAllowed: spec.EndAllowed, endPos: -1}
	n := len(spec.Actions)
	if spec.EndAllowed && spec.End != "" {
		at.end = spec.End
		n++
	}
	// One buffer holds every step text (action + separator).
	size := len(at.end)
	for _, a := range spec.Actions {
		size += len(a) + len(sep)
	}
	buf := make([]byte, 0, size)
	keys := make([][]byte, n)
	for i, a := range spec.Actions {
		start := len(buf)
		buf = append(append(buf, a...), sep...)
		keys[i] = buf[start:len(buf):len(buf)]
	}
	if at.end != "" {
		start := len(buf)
		buf = append(buf, at.end...)
		keys[n-1] = buf[start:]
	}
	at.order = make([]int32, n)
	for i := range at.order {
		at.order[i] = int32(i)
	}
	endIdx := int32(len(spec.Actions)) // the end marker's key index, if any
	sortByKey(at.order, keys)          // ties by index: the end marker sorts last
	sorted := make([][]byte, n)
	for i, k := range at.order {
		sorted[i] = keys[k]
		if k == endIdx {
			at.order[i] = -1
			at.endPos = int32(i)
		}
	}
	at.tree = buildTree(sorted)
	at.action = make([]int32, len(at.tree.nodes))
	at.isEnd = make([]bool, len(at.tree.nodes))
	for i, nd := range at.tree.nodes {
		at.action[i] = -1
		if nd.exact > nd.lo && at.order[nd.lo] >= 0 {
			at.action[i] = at.order[nd.lo]
		}
		at.isEnd[i] = nd.exact > nd.lo && at.order[nd.exact-1] < 0
	}
	if at.end != "" {
		// The end marker must not overlap an action: no action terminal on
		// its path, and no children below it unless it equals an action.
		n := int32(0)
		for i := 0; i < len(at.end); i++ {
			n = at.tree.child(n, at.end[i])
			if i < len(at.end)-1 && at.action[n] >= 0 {
				return nil, fmt.Errorf("trie: end marker %q starts with action %d's text %q", at.end, at.action[n], spec.Actions[at.action[n]]+sep)
			}
		}
		if nd := at.tree.nodes[n]; nd.hi > nd.exact {
			a := at.order[nd.exact]
			return nil, fmt.Errorf("trie: end marker %q is a prefix of action %d's text %q", at.end, a, spec.Actions[a]+sep)
		}
	}
	return at, nil
}

// NumActions is the number of action strings (duplicates included).
func (at *ActionTrie) NumActions() int { return len(at.actions) }

// Action returns the string of action index i.
func (at *ActionTrie) Action(i int) string { return at.actions[i] }

// Separator returns the separator that ends every action.
func (at *ActionTrie) Separator() string { return at.sep }

// EndAllowed reports whether the plan may end at this step.
func (at *ActionTrie) EndAllowed() bool { return at.endAllowed }

// Nodes is the number of trie nodes.
func (at *ActionTrie) Nodes() int { return len(at.tree.nodes) }

func (at *ActionTrie) valid(n Node) bool { return n >= 0 && int(n) < len(at.tree.nodes) }

// Step follows one byte from node n; it returns NoNode when no step text
// continues that way.
func (at *ActionTrie) Step(n Node, b byte) Node {
	if !at.valid(n) {
		return NoNode
	}
	c := at.tree.child(int32(n), b)
	if c < 0 {
		return NoNode
	}
	return Node(c)
}

// Walk follows text from node n (use Root for a whole partial step) and
// returns the node reached, or NoNode when n+text is not a prefix of any
// step text.
func (at *ActionTrie) Walk(n Node, text []byte) Node {
	for _, b := range text {
		if n = at.Step(n, b); n == NoNode {
			break
		}
	}
	return n
}

// Completed reports whether node n's path is a whole step text (an action
// string plus separator) and returns its action index: the lowest index
// among actions spelled the same, so the choice is deterministic.
func (at *ActionTrie) Completed(n Node) (action int, ok bool) {
	if !at.valid(n) || at.action[n] < 0 {
		return -1, false
	}
	return int(at.action[n]), true
}

// IsEnd reports whether node n's path is the end marker (Spec.End, when
// ending is allowed).
func (at *ActionTrie) IsEnd(n Node) bool { return at.valid(n) && at.isEnd[n] }

// IsLeaf reports whether no text continues past node n (true at every
// completed step).
func (at *ActionTrie) IsLeaf(n Node) bool {
	return at.valid(n) && at.tree.nodes[n].nEdges == 0
}

// NumConsistent is the number of actions (duplicates included, the end
// marker not) whose step text starts with node n's path.
func (at *ActionTrie) NumConsistent(n Node) int {
	if !at.valid(n) {
		return 0
	}
	nd := at.tree.nodes[n]
	k := int(nd.hi - nd.lo)
	if at.endPos >= nd.lo && at.endPos < nd.hi {
		k--
	}
	return k
}

// Consistent appends to dst the indices of the actions whose step text
// starts with node n's path (every action still possible after it), sorted
// by (string, index), and returns the extended slice.
func (at *ActionTrie) Consistent(n Node, dst []int32) []int32 {
	if !at.valid(n) {
		return dst
	}
	nd := at.tree.nodes[n]
	for _, a := range at.order[nd.lo:nd.hi] {
		if a >= 0 {
			dst = append(dst, a)
		}
	}
	return dst
}

// Text appends node n's path (the partial step text) to dst.
func (at *ActionTrie) Text(n Node, dst []byte) []byte {
	if !at.valid(n) {
		return dst
	}
	start := len(dst)
	for m := int32(n); m > 0; m = at.tree.parent[m] {
		dst = append(dst, at.tree.label[m])
	}
	slices.Reverse(dst[start:])
	return dst
}

// Resolve maps a completed action string to the action it names: the lowest
// index among applicable actions spelled exactly s. A trailing separator on
// s is accepted. ok is false when no applicable action is spelled s.
func (at *ActionTrie) Resolve(s string) (action int, ok bool) {
	s = strings.TrimSuffix(s, at.sep)
	n := at.Walk(Root, []byte(s))
	n = at.Walk(n, []byte(at.sep))
	return at.Completed(n)
}

// Lookup appends to dst the indices of every applicable action spelled
// exactly s (a trailing separator accepted), in increasing order, and
// returns the extended slice.
func (at *ActionTrie) Lookup(s string, dst []int32) []int32 {
	s = strings.TrimSuffix(s, at.sep)
	n := at.Walk(at.Walk(Root, []byte(s)), []byte(at.sep))
	if !at.valid(n) {
		return dst
	}
	nd := at.tree.nodes[n]
	for _, a := range at.order[nd.lo:nd.exact] {
		if a >= 0 {
			dst = append(dst, a)
		}
	}
	return dst
}
