package search

import "math"

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
