package search

import (
	"math/bits"

	"github.com/nesy-dev/nesy/pddl"
)

// nodeStore holds the search nodes: states packed in one arena of words,
// per-node data in parallel slices, and an open-addressing hash table from
// state to node for duplicate detection.
type nodeStore struct {
	words  int      // words per state
	arena  []uint64 // state of node i: arena[i*words : (i+1)*words]
	hashes []uint64
	parent []int32
	action []int32
	g      []int64
	h      []float64
	closed []bool
	dead   []bool

	table []int32 // node index + 1; 0 is empty
	mask  uint64
}

func newNodeStore(words int) *nodeStore {
	ns := &nodeStore{words: words}
	ns.table = make([]int32, 1024)
	ns.mask = uint64(len(ns.table) - 1)
	return ns
}

func (ns *nodeStore) len() int { return len(ns.parent) }

// state returns node n's state (a view into the arena; do not modify).
func (ns *nodeStore) state(n int32) pddl.State {
	i := int(n) * ns.words
	return pddl.State(ns.arena[i : i+ns.words : i+ns.words])
}

func hashState(s pddl.State) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, w := range s {
		h ^= w
		h *= 0xff51afd7ed558ccd
		h = bits.RotateLeft64(h, 31)
	}
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 29
	return h
}

func (ns *nodeStore) equal(n int32, s pddl.State) bool {
	i := int(n) * ns.words
	for j, w := range s {
		if ns.arena[i+j] != w {
			return false
		}
	}
	return true
}

// insert returns the node holding s, adding it with the given parent, action
// and g when it is new (isNew reports which).
func (ns *nodeStore) insert(s pddl.State, parent, action int32, g int64) (n int32, isNew bool) {
	hv := hashState(s)
	for i := hv & ns.mask; ; i = (i + 1) & ns.mask {
		e := ns.table[i]
		if e == 0 {
			n = int32(len(ns.parent))
			ns.table[i] = n + 1
			break
		}
		if ns.hashes[e-1] == hv && ns.equal(e-1, s) {
			return e - 1, false
		}
	}
	ns.arena = append(ns.arena, s...)
	ns.hashes = append(ns.hashes, hv)
	ns.parent = append(ns.parent, parent)
	ns.action = append(ns.action, action)
	ns.g = append(ns.g, g)
	ns.h = append(ns.h, 0)
	ns.closed = append(ns.closed, false)
	ns.dead = append(ns.dead, false)
	if 2*len(ns.parent) > len(ns.table) {
		ns.grow()
	}
	return n, true
}

func (ns *nodeStore) grow() {
	ns.table = make([]int32, 2*len(ns.table))
	ns.mask = uint64(len(ns.table) - 1)
	for n, hv := range ns.hashes {
		i := hv & ns.mask
		for ns.table[i] != 0 {
			i = (i + 1) & ns.mask
		}
		ns.table[i] = int32(n) + 1
	}
}

// openEntry is an open-list entry: ordered by key1, then key2, then seq
// (insertion order), all ascending.
type openEntry struct {
	key1, key2 float64
	seq        uint64
	g          int64
	node       int32
	// action is the action to apply to node (lazy search's entries stand
	// for a successor not generated yet; -1 in the eager searches).
	action int32
}

func (a *openEntry) less(b *openEntry) bool {
	if a.key1 != b.key1 {
		return a.key1 < b.key1
	}
	if a.key2 != b.key2 {
		return a.key2 < b.key2
	}
	return a.seq < b.seq
}

// openList is a binary min-heap of openEntry.
type openList struct {
	items []openEntry
	seq   uint64
}

func (o *openList) len() int { return len(o.items) }

func (o *openList) push(e openEntry) {
	e.seq = o.seq
	o.seq++
	o.items = append(o.items, e)
	i := len(o.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !o.items[i].less(&o.items[p]) {
			break
		}
		o.items[i], o.items[p] = o.items[p], o.items[i]
		i = p
	}
}

func (o *openList) pop() openEntry {
	top := o.items[0]
	last := len(o.items) - 1
	o.items[0] = o.items[last]
	o.items = o.items[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= last {
			break
		}
		c := l
		if r := l + 1; r < last && o.items[r].less(&o.items[l]) {
			c = r
		}
		if !o.items[c].less(&o.items[i]) {
			break
		}
		o.items[i], o.items[c] = o.items[c], o.items[i]
		i = c
	}
	return top
}
