package search

import "math"

// maxBucketKey bounds the integral keys greedyOpen keeps in plain buckets;
// larger or fractional keys go to its heap.
const maxBucketKey = 1 << 16

// greedyEntry is an entry of greedyOpen: a node and, in lazy search, the
// action to apply to it (-1 in eager GBFS).
type greedyEntry struct{ node, action int32 }

// fifo is a first-in first-out queue of greedyEntry.
type fifo struct {
	items []greedyEntry
	head  int
}

func (q *fifo) push(e greedyEntry) { q.items = append(q.items, e) }

func (q *fifo) pop() greedyEntry {
	e := q.items[q.head]
	q.head++
	switch {
	case q.head == len(q.items):
		q.items, q.head = q.items[:0], 0
	case q.head >= 1024 && 2*q.head >= len(q.items):
		// Drop the popped prefix so a bucket that never drains does not
		// keep it.
		n := copy(q.items, q.items[q.head:])
		q.items, q.head = q.items[:n], 0
	}
	return e
}

func (q *fifo) empty() bool { return q.head == len(q.items) }

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
}

func (o *greedyOpen) len() int { return o.n + o.other.len() }

func (o *greedyOpen) push(key float64, node, action int32) {
	if key >= 0 && key < maxBucketKey && key == math.Trunc(key) {
		k := int(key)
		for len(o.buckets) <= k {
			o.buckets = append(o.buckets, fifo{})
		}
		o.buckets[k].push(greedyEntry{node, action})
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
			return o.buckets[o.min].pop()
		}
	}
	e := o.other.pop()
	return greedyEntry{e.node, e.action}
}
