package search

import (
	"math/rand"
	"testing"
)

// TestGreedyOpenOrder checks greedyOpen against openList (the heap that
// orders by key, then insertion) on random pushes and pops mixing bucket
// keys, fractional keys and keys past maxBucketKey.
func TestGreedyOpenOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	keys := []float64{0, 1, 2, 3, 7, 2.5, 0.5, maxBucketKey, maxBucketKey + 3, 40}
	var g greedyOpen
	var ref openList
	id := int32(0)
	for step := 0; step < 20000; step++ {
		if ref.len() == 0 || rng.Intn(3) > 0 {
			k := keys[rng.Intn(len(keys))]
			g.push(k, id, id%7-1)
			ref.push(openEntry{key1: k, node: id, action: id%7 - 1})
			id++
			continue
		}
		want := ref.pop()
		got := g.pop()
		if got.node != want.node || got.action != want.action {
			t.Fatalf("step %d: popped node %d action %d, want node %d action %d (key %v)", step, got.node, got.action, want.node, want.action, want.key1)
		}
		if g.len() != ref.len() {
			t.Fatalf("step %d: len %d, want %d", step, g.len(), ref.len())
		}
	}
	for ref.len() > 0 {
		want, got := ref.pop(), g.pop()
		if got.node != want.node {
			t.Fatalf("drain: popped node %d, want %d", got.node, want.node)
		}
	}
	if g.len() != 0 {
		t.Fatalf("len %d after draining", g.len())
	}
}

// TestFIFOCompaction checks that a bucket which never drains keeps its
// order while its popped prefix is dropped: the prefix never outgrows both
// 1024 entries and the queued ones, whether the queue grows (two pushes a
// pop) or holds steady (one push a pop).
func TestFIFOCompaction(t *testing.T) {
	for _, pushes := range []int{2, 1} {
		var q fifo
		next, want := int32(0), int32(0)
		for i := 0; i < 5000; i++ {
			q.push(greedyEntry{node: next})
			next++
		}
		for i := 0; i < 20000; i++ {
			for j := 0; j < pushes; j++ {
				q.push(greedyEntry{node: next})
				next++
			}
			if e := q.pop(); e.node != want {
				t.Fatalf("%d pushes a pop: popped %d, want %d", pushes, e.node, want)
			}
			want++
			if live := len(q.items) - q.head; live != int(next-want) || q.head > max(1024, live) {
				t.Fatalf("%d pushes a pop, step %d: head %d, %d items, want %d queued and a prefix of at most max(1024, queued)", pushes, i, q.head, len(q.items), next-want)
			}
		}
	}
}
