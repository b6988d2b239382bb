package heuristic

import "math/bits"

// radixHeap is a monotone priority queue of (key, fact) pairs: every pushed
// key must be at least the last popped key, which holds for the Dijkstra-like
// explorations here (operator costs are non-negative). Bucket i holds the
// entries whose key first differs from the last popped key at bit i-1
// (bucket 0: equal keys). Pushes are O(1), pops amortized O(log C).
type radixHeap struct {
	last    uint64
	size    int
	buckets [65][]radixEntry
}

type radixEntry struct {
	key  uint64
	fact int32
}

func (h *radixHeap) reset() {
	h.last = 0
	h.size = 0
	for i := range h.buckets {
		h.buckets[i] = h.buckets[i][:0]
	}
}

func (h *radixHeap) bucketOf(key uint64) int { return bits.Len64(key ^ h.last) }

func (h *radixHeap) push(key uint64, fact int32) {
	b := h.bucketOf(key)
	h.buckets[b] = append(h.buckets[b], radixEntry{key, fact})
	h.size++
}

func (h *radixHeap) empty() bool { return h.size == 0 }

// pop removes and returns an entry with the smallest key. The heap must not
// be empty.
func (h *radixHeap) pop() (uint64, int32) {
	if len(h.buckets[0]) == 0 {
		i := 1
		for len(h.buckets[i]) == 0 {
			i++
		}
		b := h.buckets[i]
		min := b[0].key
		for _, e := range b[1:] {
			if e.key < min {
				min = e.key
			}
		}
		h.last = min
		for _, e := range b {
			nb := h.bucketOf(e.key)
			h.buckets[nb] = append(h.buckets[nb], e)
		}
		h.buckets[i] = b[:0]
	}
	b0 := h.buckets[0]
	e := b0[len(b0)-1]
	h.buckets[0] = b0[:len(b0)-1]
	h.size--
	return e.key, e.fact
}

// nearBuckets is the number of keys bucketQueue keeps in plain buckets.
const nearBuckets = 1024

// bucketQueue is a monotone priority queue (see radixHeap) with one plain
// bucket per key below nearBuckets, the common case for unit and small
// action costs, and a radix heap for larger keys.
type bucketQueue struct {
	near     [nearBuckets][]int32
	cur      int // no key below cur is queued
	maxUsed  int // highest near bucket used since reset
	nearSize int
	far      radixHeap
}

func (q *bucketQueue) reset() {
	for i := 0; i <= q.maxUsed; i++ {
		q.near[i] = q.near[i][:0]
	}
	q.cur, q.maxUsed, q.nearSize = 0, 0, 0
	q.far.reset()
}

func (q *bucketQueue) push(key uint64, fact int32) {
	if key < nearBuckets {
		k := int(key)
		q.near[k] = append(q.near[k], fact)
		if k > q.maxUsed {
			q.maxUsed = k
		}
		q.nearSize++
		return
	}
	q.far.push(key, fact)
}

func (q *bucketQueue) empty() bool { return q.nearSize == 0 && q.far.empty() }

// pop removes and returns an entry with the smallest key. The queue must not
// be empty.
func (q *bucketQueue) pop() (uint64, int32) {
	if q.nearSize > 0 {
		for len(q.near[q.cur]) == 0 {
			q.cur++
		}
		b := q.near[q.cur]
		f := b[len(b)-1]
		q.near[q.cur] = b[:len(b)-1]
		q.nearSize--
		return uint64(q.cur), f
	}
	return q.far.pop()
}
