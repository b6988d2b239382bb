package trie

import "bytes"

// tree is a byte trie over a sorted list of keys, stored flat. Nodes are
// numbered in preorder (node 0 is the root, the empty path); the children of
// a node are a contiguous run of edges sorted by byte. Because the keys are
// sorted, the keys below a node are a contiguous run of key positions:
// keys[lo:hi] have the node's path as a prefix, and the first of them,
// keys[lo:exact], are equal to it.
type tree struct {
	nodes    []node
	edgeByte []byte  // edge labels, grouped by parent, sorted within a group
	edgeNode []int32 // edge targets, parallel to edgeByte
	parent   []int32 // parent of every node (-1 for the root); nil when dropped
	label    []byte  // byte of the edge into every node; nil when dropped
}

// node is one trie node.
type node struct {
	edges  int32 // index of the first outgoing edge
	nEdges int32 // number of outgoing edges
	lo     int32 // first key with this path as prefix
	exact  int32 // keys[lo:exact] equal the path
	hi     int32 // keys[lo:hi] have the path as prefix
}

// buildTree builds the trie of keys, which must be sorted (bytes.Compare
// order, duplicates allowed). It runs in time linear in the total key length.
func buildTree(keys [][]byte) tree {
	// Count nodes first so every array is allocated once: a key adds one node
	// per byte past its common prefix with the previous key.
	total := 1
	common := make([]int32, len(keys)) // common prefix length with the previous key
	var prev []byte
	for i, k := range keys {
		common[i] = int32(lcp(prev, k))
		total += len(k) - int(common[i])
		prev = k
	}
	// Locals rather than fields of t keep the hot loop free of write barriers.
	nodes := make([]node, total)
	parent := make([]int32, total)
	label := make([]byte, total)
	parent[0] = -1
	n := int32(1)                 // nodes made so far
	stack := make([]int32, 1, 64) // stack[d] is the node at depth d on the current key's path
	for i, k := range keys {
		l := int(common[i])
		for len(stack)-1 > l {
			nodes[stack[len(stack)-1]].hi = int32(i)
			stack = stack[:len(stack)-1]
		}
		for d := l; d < len(k); d++ {
			nodes[n] = node{lo: int32(i), exact: int32(i)}
			parent[n] = stack[len(stack)-1]
			label[n] = k[d]
			stack = append(stack, n)
			n++
		}
		// Keys equal to this path come first among the keys below it, so every
		// key since lo equals it.
		nodes[stack[len(stack)-1]].exact = int32(i + 1)
	}
	for _, s := range stack {
		nodes[s].hi = int32(len(keys))
	}
	// Group the edges by parent (a counting sort). Children were created in
	// increasing byte order per parent, so each group comes out sorted.
	for c := 1; c < total; c++ {
		nodes[parent[c]].nEdges++
	}
	next := int32(0)
	for i := range nodes {
		nodes[i].edges = next
		next += nodes[i].nEdges
	}
	edgeByte := make([]byte, total-1)
	edgeNode := make([]int32, total-1)
	fill := make([]int32, total) // edges placed so far, per parent
	for c := 1; c < total; c++ {
		p := parent[c]
		e := nodes[p].edges + fill[p]
		fill[p]++
		edgeByte[e] = label[c]
		edgeNode[e] = int32(c)
	}
	return tree{nodes: nodes, edgeByte: edgeByte, edgeNode: edgeNode, parent: parent, label: label}
}

// child returns the child of n along byte b, or -1.
func (t *tree) child(n int32, b byte) int32 {
	nd := &t.nodes[n]
	lo, hi := int(nd.edges), int(nd.edges+nd.nEdges)
	if hi-lo <= 8 {
		for e := lo; e < hi; e++ {
			if t.edgeByte[e] == b {
				return t.edgeNode[e]
			}
		}
		return -1
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.edgeByte[m] < b {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < int(nd.edges+nd.nEdges) && t.edgeByte[lo] == b {
		return t.edgeNode[lo]
	}
	return -1
}

// lcp is the length of the longest common prefix of a and b.
func lcp(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// sortByKey sorts perm by (key[id], id): an MSD radix sort, linear in the
// total key length. perm must hold distinct ids in increasing order on entry
// (the bucket passes are stable, which keeps equal keys in id order).
func sortByKey(perm []int32, key [][]byte) {
	tmp := make([]int32, len(perm))
	radixSort(perm, tmp, key, 0)
}

func radixSort(ids, tmp []int32, key [][]byte, depth int) {
	if len(ids) > 1 {
		// Skip the bytes every key shares (action strings share long
		// prefixes such as "put apple 1 in ").
		first := key[ids[0]]
		common := len(first)
		for _, id := range ids[1:] {
			if common = min(common, depth+lcp(first[depth:common], key[id][depth:])); common == depth {
				break
			}
		}
		depth = common
	}
	if len(ids) <= 32 {
		// Insertion sort on the remaining bytes; ties keep id order.
		for i := 1; i < len(ids); i++ {
			id := ids[i]
			k := key[id][depth:]
			j := i
			for j > 0 && bytes.Compare(key[ids[j-1]][depth:], k) > 0 {
				ids[j] = ids[j-1]
				j--
			}
			ids[j] = id
		}
		return
	}
	// Bucket 0 holds keys that end at depth (they sort first); bucket b+1
	// holds keys whose byte at depth is b.
	var count [257]int32
	for _, id := range ids {
		if k := key[id]; len(k) > depth {
			count[int(k[depth])+1]++
		} else {
			count[0]++
		}
	}
	var pos [257]int32
	sum := int32(0)
	for b, c := range count {
		pos[b] = sum
		sum += c
	}
	for _, id := range ids {
		b := 0
		if k := key[id]; len(k) > depth {
			b = int(k[depth]) + 1
		}
		tmp[pos[b]] = id
		pos[b]++
	}
	copy(ids, tmp[:len(ids)])
	start := count[0]
	for b := 1; b < 257; b++ {
		if c := count[b]; c > 1 {
			radixSort(ids[start:start+c], tmp[start:start+c], key, depth+1)
		}
		start += count[b]
	}
}
