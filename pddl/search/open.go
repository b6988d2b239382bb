package search

import (
	"math"
	"math/rand/v2"
)

// maxBucketKey bounds the integral keys greedyOpen keeps in plain buckets;
// larger or fractional keys go to its heap.
const maxBucketKey = 1 << 16

// greedyEntry is an entry of greedyOpen: a node and, in lazy search, the
// action to apply to it (-1 in eager GBFS).
type greedyEntry struct{ node, action int32 }

// fifoBlock is the number of entries in one block of a fifo.
const fifoBlock = 1024

// fifo is a first-in first-out queue of greedyEntry in fixed-size blocks,
// so a growing queue never copies its entries (a bucket of a lazy search
// can hold millions) and a drained block is reused through free.
type fifo struct {
	blocks [][]greedyEntry // entries: blocks[0][head:], blocks[1], ...
	head   int
}

// blockPool holds drained blocks for reuse by the fifos of one open list.
type blockPool struct{ free [][]greedyEntry }

func (p *blockPool) get() []greedyEntry {
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		return b[:0]
	}
	return make([]greedyEntry, 0, fifoBlock)
}

func (q *fifo) push(e greedyEntry, p *blockPool) {
	n := len(q.blocks)
	if n == 0 || len(q.blocks[n-1]) == fifoBlock {
		q.blocks = append(q.blocks, p.get())
		n++
	}
	q.blocks[n-1] = append(q.blocks[n-1], e)
}

// pop removes and returns the first entry. The queue must not be empty.
func (q *fifo) pop(p *blockPool) greedyEntry {
	b := q.blocks[0]
	e := b[q.head]
	q.head++
	if q.head == len(b) {
		q.head = 0
		if len(q.blocks) == 1 {
			q.blocks[0] = b[:0]
		} else {
			p.free = append(p.free, b)
			q.blocks[0] = nil
			q.blocks = q.blocks[1:]
		}
	}
	return e
}

func (q *fifo) empty() bool {
	return len(q.blocks) == 0 || (len(q.blocks) == 1 && q.head == len(q.blocks[0]))
}

// greedyOpen is the open list of the greedy searches (GBFS and lazy GBFS):
// entries come out by increasing key, first in first out among equal keys,
// the order openList gives with key2 = 0, as Fast Downward's bucket-based
// open lists do. Integral keys in [0, maxBucketKey) (every h_FF, h_add,
// goal-count value) go to one FIFO bucket each, pushed and popped in O(1)
// with 8-byte entries; other keys (weighted mixes) go to a heap.
type greedyOpen struct {
	buckets []fifo
	min     int // no non-empty bucket below min
	n       int // entries in buckets
	other   openList
	pool    blockPool
}

func (o *greedyOpen) len() int { return o.n + o.other.len() }

func (o *greedyOpen) push(key float64, node, action int32) {
	if key >= 0 && key < maxBucketKey && key == math.Trunc(key) {
		k := int(key)
		for len(o.buckets) <= k {
			o.buckets = append(o.buckets, fifo{})
		}
		o.buckets[k].push(greedyEntry{node, action}, &o.pool)
		if k < o.min {
			o.min = k
		}
		o.n++
		return
	}
	o.other.push(openEntry{key1: key, node: node, action: action})
}

// pop removes and returns the first entry. The list must not be empty.
func (o *greedyOpen) pop() greedyEntry {
	if o.n > 0 {
		for o.buckets[o.min].empty() {
			o.min++
		}
		// Keys in the heap are never integral keys below maxBucketKey, so
		// they never equal a bucket's key.
		if o.other.len() == 0 || float64(o.min) < o.other.items[0].key1 {
			o.n--
			return o.buckets[o.min].pop(&o.pool)
		}
	}
	e := o.other.pop()
	return greedyEntry{e.node, e.action}
}

// typeKey is the type of an entry of typeOpen: the heuristic value it was
// pushed under and its g.
type typeKey struct {
	h float64
	g int64
}

// typeOpen is the type-based exploration list of Xie, Müller, Holte and
// Imai ("Type-based exploration with multiple search queues for satisficing
// planning", AAAI 2014; Fast Downward's type_based open list): entries are
// bucketed by their type, and pop takes a uniformly random non-empty
// bucket, then a uniformly random entry of it. Alternated with the greedy
// lists, it escapes the plateaus and misleading minima on which greedy
// search's tie-breaking decides everything: every (h, g) region the search
// has touched keeps an equal chance of being continued. The random source
// is seeded, so a search stays reproducible.
type typeOpen struct {
	index   map[typeKey]int // the bucket of each type with entries
	keys    []typeKey
	buckets [][]greedyEntry // non-empty buckets, in no particular order
	n       int
	rng     *rand.Rand
}

func newTypeOpen(seed uint64) *typeOpen {
	return &typeOpen{index: map[typeKey]int{}, rng: rand.New(rand.NewPCG(seed, 0x6e657379))}
}

func (o *typeOpen) len() int { return o.n }

func (o *typeOpen) push(k typeKey, e greedyEntry) {
	i, ok := o.index[k]
	if !ok {
		i = len(o.buckets)
		o.index[k] = i
		o.keys = append(o.keys, k)
		o.buckets = append(o.buckets, nil)
	}
	o.buckets[i] = append(o.buckets[i], e)
	o.n++
}

// pop removes and returns a random entry of a random bucket. The list must
// not be empty.
func (o *typeOpen) pop() greedyEntry {
	i := o.rng.IntN(len(o.buckets))
	b := o.buckets[i]
	j := o.rng.IntN(len(b))
	e := b[j]
	b[j] = b[len(b)-1]
	b = b[:len(b)-1]
	o.n--
	if len(b) > 0 {
		o.buckets[i] = b
		return e
	}
	// Drop the empty bucket: the last one takes its place.
	last := len(o.buckets) - 1
	delete(o.index, o.keys[i])
	if i != last {
		o.buckets[i], o.keys[i] = o.buckets[last], o.keys[last]
		o.index[o.keys[i]] = i
	}
	o.buckets[last], o.keys = nil, o.keys[:last]
	o.buckets = o.buckets[:last]
	return e
}
