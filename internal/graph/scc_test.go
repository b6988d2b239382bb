package graph

import (
	"fmt"
	"slices"
	"testing"
)

// TestSCC checks components and their order on graphs worked out by hand,
// and a 100,000-node chain (no deep recursion).
func TestSCC(t *testing.T) {
	for _, c := range []struct {
		name  string
		edges map[int][]int
		roots []int
		want  [][]int // each component sorted, in the order returned
	}{
		{"dag", map[int][]int{1: {2, 3}, 2: {3}}, []int{1}, [][]int{{3}, {2}, {1}}},
		{"cycle", map[int][]int{1: {2}, 2: {3}, 3: {1, 4}}, []int{1}, [][]int{{4}, {1, 2, 3}}},
		{"self loop", map[int][]int{1: {1, 2}}, []int{1}, [][]int{{2}, {1}}},
		{"two roots", map[int][]int{1: {2}, 2: {1}, 3: {1}}, []int{3, 1}, [][]int{{1, 2}, {3}}},
		{"unreachable stays out", map[int][]int{1: {2}, 5: {1}}, []int{1}, [][]int{{2}, {1}}},
	} {
		got := SCC(c.roots, func(v int) []int { return c.edges[v] })
		for _, comp := range got {
			slices.Sort(comp)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	const n = 100000
	got := SCC([]int{0}, func(v int) []int {
		if v+1 < n {
			return []int{v + 1}
		}
		return []int{0} // closes the chain into one cycle
	})
	if len(got) != 1 || len(got[0]) != n {
		t.Fatalf("a %d-node cycle: %d components, the first of %d", n, len(got), len(got[0]))
	}
}
