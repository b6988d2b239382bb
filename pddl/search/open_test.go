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

// TestFIFOBlocks checks that a queue which never drains keeps its order
// and holds no more blocks than its entries need, whether it grows (two
// pushes a pop) or holds steady (one push a pop), and that drained blocks
// are reused.
func TestFIFOBlocks(t *testing.T) {
	for _, pushes := range []int{2, 1} {
		var q fifo
		var p blockPool
		next, want := int32(0), int32(0)
		for i := 0; i < 5000; i++ {
			q.push(greedyEntry{node: next}, &p)
			next++
		}
		for i := 0; i < 20000; i++ {
			for j := 0; j < pushes; j++ {
				q.push(greedyEntry{node: next}, &p)
				next++
			}
			if e := q.pop(&p); e.node != want {
				t.Fatalf("%d pushes a pop: popped %d, want %d", pushes, e.node, want)
			}
			want++
			if live := int(next - want); len(q.blocks) > live/fifoBlock+2 {
				t.Fatalf("%d pushes a pop, step %d: %d blocks for %d entries", pushes, i, len(q.blocks), live)
			}
		}
		if pushes == 1 && len(p.free) > 1 {
			t.Fatalf("steady queue: %d free blocks, want drained blocks reused", len(p.free))
		}
		for !q.empty() {
			if e := q.pop(&p); e.node != want {
				t.Fatalf("drain: popped %d, want %d", e.node, want)
			}
			want++
		}
		if want != next {
			t.Fatalf("drained %d of %d entries", want, next)
		}
	}
}

// TestTypeOpen checks the type-based list: every pushed entry comes out
// exactly once, and a pop picks a bucket uniformly, whatever the buckets'
// sizes (one entry of type A beside 99 of type B: A first about half the
// time, not 1%).
func TestTypeOpen(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	o := newTypeOpen(5)
	want := map[greedyEntry]int{}
	for i := 0; i < 2000; i++ {
		e := greedyEntry{int32(rng.Intn(300)), int32(rng.Intn(50))}
		o.push(typeKey{float64(rng.Intn(7)), int64(rng.Intn(5))}, e)
		want[e]++
		if rng.Intn(3) == 0 {
			got := o.pop()
			if want[got] == 0 {
				t.Fatalf("popped %v, not in the list", got)
			}
			want[got]--
		}
	}
	for o.len() > 0 {
		got := o.pop()
		if want[got] == 0 {
			t.Fatalf("popped %v, not in the list", got)
		}
		want[got]--
	}
	for e, n := range want {
		if n != 0 {
			t.Fatalf("entry %v: %d never popped", e, n)
		}
	}
	if len(o.buckets) != 0 || len(o.index) != 0 || len(o.keys) != 0 {
		t.Fatalf("empty list keeps %d buckets, %d index entries", len(o.buckets), len(o.index))
	}

	first := 0
	const seeds = 400
	for seed := uint64(0); seed < seeds; seed++ {
		o := newTypeOpen(seed)
		o.push(typeKey{1, 0}, greedyEntry{0, 0})
		for i := 1; i < 100; i++ {
			o.push(typeKey{2, 0}, greedyEntry{int32(i), 0})
		}
		if o.pop().node == 0 {
			first++
		}
	}
	if first < seeds*35/100 || first > seeds*65/100 {
		t.Fatalf("the single-entry bucket came first %d of %d times, want about half", first, seeds)
	}
}
