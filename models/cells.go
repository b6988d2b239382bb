package models

// cachePadding is the multiple Ollama's ggml backend pads a pass's cell
// range to (ml/backend/ggml CacheConfig: 256 with and without flash
// attention).
const cachePadding = 256

// cellMap mirrors the KV cache's cell bookkeeping (Ollama's kvcache.Causal
// at v0.17.4, which keeps it private) so the loop can predict which cells
// a forward pass will span before building it.
//
// The causal cache stores each position of each sequence in a cell; forks
// share cells. A pass's new positions take the lowest free cells, in batch
// order. Attention then runs over one contiguous cell range per pass: from
// the lowest to the highest cell of every sequence in the pass (new cells
// included), padded to the backend's cache padding, and every token of the
// pass computes scores over all of it (a mask hides other sequences' cells).
// So a pass costs roughly tokens x range, and merging passes of sequences
// stored far apart makes every token pay for the other's cells.
//
// The mirror only advises the batching policy: if it ever drifts from the
// cache, passes are grouped less well, never computed wrongly. It follows
// the engine's calls: place (StartForward), copyPrefix (CopyPrefix) and
// removeTail (Remove of a tail, the only Remove the engine issues).
type cellMap struct {
	pad   int      // the cache pads a pass's range to multiples of this
	words int      // bitset words per cell
	seqs  []uint64 // cells*words: which sequences hold each cell
	pos   []int32  // position stored in each cell
	refs  []int32  // number of sequences holding each cell (0: free)
	lo    []int    // lowest cell of each sequence, -1 when it has none
	hi    []int    // highest cell of each sequence
	free  int      // free cells
	first int      // no free cell lies below this index
}

func newCellMap(cells, sequences, pad int) *cellMap {
	m := &cellMap{
		pad:   max(1, pad),
		words: (sequences + 63) / 64,
		pos:   make([]int32, cells),
		refs:  make([]int32, cells),
		lo:    make([]int, sequences),
		hi:    make([]int, sequences),
		free:  cells,
	}
	m.seqs = make([]uint64, cells*m.words)
	for i := range m.lo {
		m.lo[i], m.hi[i] = -1, -1
	}
	return m
}

func (m *cellMap) has(cell, seq int) bool {
	return m.seqs[cell*m.words+seq/64]&(1<<(seq%64)) != 0
}

func (m *cellMap) set(cell, seq int) {
	m.seqs[cell*m.words+seq/64] |= 1 << (seq % 64)
	if m.refs[cell] == 0 {
		m.free--
	}
	m.refs[cell]++
}

func (m *cellMap) clear(cell, seq int) {
	m.seqs[cell*m.words+seq/64] &^= 1 << (seq % 64)
	m.refs[cell]--
	if m.refs[cell] == 0 {
		m.free++
		m.first = min(m.first, cell)
	}
}

// freeCells returns the first n free cells in ascending order (fewer when
// the cache has fewer): the cells the next pass's positions will take.
func (m *cellMap) freeCells(n int, dst []int) []int {
	dst = dst[:0]
	for i := m.first; i < len(m.refs) && len(dst) < n; i++ {
		if m.refs[i] == 0 {
			dst = append(dst, i)
		}
	}
	return dst
}

// place records a pass: position positions[i] of sequence seqs[i] takes
// the i-th free cell. It reports false (and changes nothing) when the
// cache has too few free cells, as StartForward fails then.
func (m *cellMap) place(seqs []int, positions []int32) bool {
	if m == nil {
		return true
	}
	if len(seqs) > m.free {
		return false
	}
	cell := m.first
	for i, s := range seqs {
		for m.refs[cell] != 0 {
			cell++
		}
		m.set(cell, s)
		m.pos[cell] = positions[i]
		m.extend(s, cell)
		cell++
	}
	m.first = cell
	for m.first < len(m.refs) && m.refs[m.first] != 0 {
		m.first++
	}
	return true
}

func (m *cellMap) extend(seq, cell int) {
	if m.lo[seq] < 0 {
		m.lo[seq], m.hi[seq] = cell, cell
		return
	}
	m.lo[seq] = min(m.lo[seq], cell)
	m.hi[seq] = max(m.hi[seq], cell)
}

// removeTail drops the cells of seq holding positions from on.
func (m *cellMap) removeTail(seq int, from int32) {
	if m == nil {
		return
	}
	if m.lo[seq] < 0 {
		return
	}
	lo, hi := -1, -1
	for c := m.lo[seq]; c <= m.hi[seq]; c++ {
		if !m.has(c, seq) {
			continue
		}
		if m.pos[c] >= from {
			m.clear(c, seq)
			continue
		}
		if lo < 0 {
			lo = c
		}
		hi = c
	}
	m.lo[seq], m.hi[seq] = lo, hi
}

// copyPrefix makes dst share the cells of src holding positions below n
// (dst's own cells are dropped first).
func (m *cellMap) copyPrefix(src, dst int, n int32) {
	if m == nil {
		return
	}
	m.removeTail(dst, 0)
	if m.lo[src] < 0 {
		return
	}
	for c := m.lo[src]; c <= m.hi[src]; c++ {
		if m.has(c, src) && m.pos[c] < n {
			m.set(c, dst)
			m.extend(dst, c)
		}
	}
}

// seqRange returns the cells [lo, hi] of seq, ok false when it has none.
func (m *cellMap) seqRange(seq int) (lo, hi int, ok bool) {
	if m == nil {
		return 0, 0, false
	}
	return m.lo[seq], m.hi[seq], m.lo[seq] >= 0
}

// span is the padded number of cells a pass covers whose sequences span
// the cells [lo, hi].
func (m *cellMap) span(lo, hi int) int {
	if lo > hi {
		return 0
	}
	lo = lo / m.pad * m.pad
	hi = (hi/m.pad + 1) * m.pad
	return hi - lo
}

// used returns the number of cells some sequence holds.
func (m *cellMap) used() int { return len(m.refs) - m.free }

// seqCells counts the cells seq holds (for tests and diagnostics).
func (m *cellMap) seqCells(seq int) int {
	n := 0
	if m.lo[seq] < 0 {
		return 0
	}
	for c := m.lo[seq]; c <= m.hi[seq]; c++ {
		if m.has(c, seq) {
			n++
		}
	}
	return n
}
