// Package graph holds graph algorithms shared by nesy's packages.
package graph

// SCC returns the strongly connected components of the graph reachable
// from roots through succ, by Tarjan's algorithm run iteratively (a chain of
// many thousand nodes needs no deep stack). Components come out in reverse
// topological order: a component's successors' components come before it.
// Roots are visited in the order given, so the result is deterministic
// when succ is.
func SCC[T comparable](roots []T, succ func(T) []T) [][]T {
	index := map[T]int{}
	low := map[T]int{}
	onStack := map[T]bool{}
	var stack []T
	var comps [][]T
	type frame struct {
		v    T
		next []T // successors still to visit
	}
	visit := func(v T, work []frame) []frame {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		return append(work, frame{v, succ(v)})
	}
	for _, root := range roots {
		if _, seen := index[root]; seen {
			continue
		}
		work := visit(root, nil)
		for len(work) > 0 {
			f := &work[len(work)-1]
			if len(f.next) > 0 {
				w := f.next[0]
				f.next = f.next[1:]
				if _, seen := index[w]; !seen {
					work = visit(w, work)
				} else if onStack[w] {
					low[f.v] = min(low[f.v], index[w])
				}
				continue
			}
			v := f.v
			work = work[:len(work)-1]
			if len(work) > 0 {
				u := work[len(work)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] == index[v] {
				i := len(stack) - 1
				for stack[i] != v {
					i--
				}
				comp := append([]T(nil), stack[i:]...)
				for _, x := range comp {
					onStack[x] = false
				}
				stack = stack[:i]
				comps = append(comps, comp)
			}
		}
	}
	return comps
}
