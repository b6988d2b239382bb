package heuristic

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestQueues drives the radix heap and the bucket queue through random
// monotone push/pop sequences (keys below and above the bucket range) and
// checks every pop against a sorted reference.
func TestQueues(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, maxStep := range []uint64{0, 1, 5, 100, 5000, 1 << 40} {
		var rh radixHeap
		var bq bucketQueue
		for round := 0; round < 3; round++ {
			rh.reset()
			bq.reset()
			var ref []uint64
			last := uint64(0)
			for i := 0; i < 2000; i++ {
				if len(ref) == 0 || rng.IntN(3) > 0 {
					k := last + rng.Uint64N(maxStep+1)
					rh.push(k, int32(i))
					bq.push(k, int32(i))
					ref = append(ref, k)
					continue
				}
				slices.Sort(ref)
				want := ref[0]
				ref = ref[1:]
				k1, _ := rh.pop()
				k2, _ := bq.pop()
				if k1 != want || k2 != want {
					t.Fatalf("maxStep %d: popped %d (radix) and %d (buckets), want %d", maxStep, k1, k2, want)
				}
				last = want
			}
			if rh.empty() != (len(ref) == 0) || bq.empty() != (len(ref) == 0) {
				t.Fatalf("emptiness disagrees with %d queued", len(ref))
			}
		}
	}
}
