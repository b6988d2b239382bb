package models

import (
	"cmp"
	"math"
	"slices"

	"github.com/ollama/ollama/ml"
)

// Choosing what the next forward pass computes.
//
// Merging requests into one pass saves the per-pass cost, but in Ollama's
// KV cache every token of a pass attends over the cell range that spans
// all of the pass's sequences (see cellMap). Sequences stored far apart
// (unrelated prompts) make a merged pass cost tokens x (their combined
// range), which can be many times the separate passes' cost; forks of one
// prompt share its cells, so merging them costs almost nothing extra. And
// a long prompt whose chunks alternate with other sequences' chunks ends
// up scattered over the cache, so every later pass of it spans the others'
// cells too. The planner therefore prices candidate passes with the
// engine's cost model (passCost, fitted to the passes it has run) and
// merges a job only when the merged pass is cheaper per token than running
// it separately.

// planned is one request's share of a pass.
type planned struct {
	r *reqState
	n int // inputs from r.next
}

// plan is a candidate pass: each request's share (take[i] inputs of
// reqs[i]) and the pass's predicted cost; parts is the chosen pass's
// shares in placement order (see layout).
type plan struct {
	reqs   []*reqState
	take   []int
	parts  []planned
	tokens int
	cells  int     // padded cell range the pass spans
	cost   float64 // seconds, by the engine's cost model
	// pad is set for a padded pass of a recurrent model (see
	// planPadded): every part is then placed as pad positions, its own
	// followed by copies of its last input, which hybridForward leaves out
	// of the pass's arithmetic but for the attention layers.
	pad int
}

// takes says whether the pass computes anything of j.
func (p *plan) takes(j *job) bool {
	for i, r := range p.reqs {
		if r.job == j && p.take[i] > 0 {
			return true
		}
	}
	return false
}

// remaining is how many inputs r has left to compute.
func (r *reqState) remaining() int { return len(r.inputs) - r.next }

// unfinished appends j's requests that still have inputs to compute.
func unfinished(dst []*reqState, j *job) []*reqState {
	for _, r := range j.reqs {
		if !r.finished() {
			dst = append(dst, r)
		}
	}
	return dst
}

// planLocked picks the next pass from the active jobs.
//
// Fairness: jobs take turns leading a pass (round-robin; the next pass is
// led by the first job this one left out). The leading job always gets
// in. A request whose input was cut at the end of the previous pass (a
// long prompt) leads the next one, so its chunks stay adjacent in the
// cache; a chunk is at most BatchSize positions, so this streak ends
// within ContextLength/BatchSize passes. The other jobs join in turn
// order when the cost model says merging pays (see join). Within the
// pass, positions are shared as before: every request first gets up to an
// equal share, then the rest goes in order.
func (e *Engine) planLocked(active []*job) plan {
	var jobs []*job
	for _, j := range active {
		for _, r := range j.reqs {
			if !r.finished() {
				jobs = append(jobs, j)
				break
			}
		}
	}
	if len(jobs) == 0 {
		return plan{}
	}
	if e.checkpoints != nil {
		return e.planRecurrent(jobs)
	}
	start := e.rr % len(jobs)
	order := append(slices.Clone(jobs[start:]), jobs[:start]...)
	if c := e.carry; c != nil && !c.finished() {
		if i := slices.Index(order, c.job); i > 0 {
			order = slices.Insert(slices.Delete(order, i, i+1), 0, c.job)
		}
	}
	// Two batches' worth: a job's own pass is priced after the merged one.
	e.free = e.cells.freeCells(2*e.opts.BatchSize, e.free)

	group := unfinished(nil, order[0])
	best := e.price(group, 0)
	// While every request of the group fits whole, a candidate's merged
	// price follows from sums (whole is its state); otherwise the shares
	// are recomputed.
	whole := e.fits(group)
	for _, j := range order[1:] {
		if len(group) >= e.opts.BatchSize {
			break // every position is taken by a request already in
		}
		own := unfinished(e.own[:0], j) // scratch: copied into group when it joins
		e.own = own
		alone := e.price(own, best.tokens)
		var merged plan
		if w := e.fits(own); whole.ok && w.ok && whole.tokens+w.tokens <= e.opts.BatchSize && whole.rows+w.rows <= e.opts.MaxLogits {
			merged = e.priceWhole(whole.add(w))
		} else {
			cand := append(group[:len(group):len(group)], own...)
			merged = e.price(cand, 0)
			if slices.Max(merged.take[len(group):]) == 0 {
				continue // no room left for it
			}
		}
		if !e.join(best, merged, alone) {
			continue
		}
		if merged.take == nil {
			group = append(group, own...)
			whole = whole.add(e.fits(own))
		} else {
			group = merged.reqs
			whole.ok = false
		}
		best = merged
	}
	if best.take == nil {
		best.reqs, best.take = group, make([]int, len(group))
		for i, r := range group {
			best.take[i] = r.remaining()
		}
	}
	e.layout(&best)

	// The next pass is led by the first job this one left out, or the
	// turn moves on by one when every job got a share.
	in := make(map[*job]bool, len(best.parts))
	for _, q := range best.parts {
		in[q.r.job] = true
	}
	e.rr = start + 1
	for _, j := range order {
		if !in[j] {
			e.rr = slices.Index(jobs, j)
			break
		}
	}
	e.carry = nil
	if n := len(best.parts); n > 0 {
		if last := best.parts[n-1]; last.n < last.r.remaining() {
			e.carry = last.r
		}
	}
	return best
}

// join decides whether a job joins the pass being planned: with it the
// pass is merged; without it the pass is alone and the job runs in a pass
// of its own after it. It joins when the merged pass costs no more per
// position computed than the two separate passes do (when the batch is
// full, joining only changes who gets its positions, so the cost per
// position is the fair comparison).
func (e *Engine) join(alone, merged, own plan) bool {
	if merged.tokens == 0 {
		return false
	}
	sep := (alone.cost + own.cost) / float64(alone.tokens+own.tokens)
	return merged.cost/float64(merged.tokens) <= sep*(1+1e-9)
}

// price shares a pass among reqs (in turn order) and predicts its cost
// with the cache's free cells from offset on (offset > 0 prices a pass
// that would run after another one of offset positions).
//
// The pass's new positions take the first free cells whatever their
// order, so its cell range is that of those cells and of its sequences'
// cells. The order matters for requests whose input is cut (see layout):
// they go last, the one with the most left at the very end, so that its
// next chunk follows on. A cut request that is not last has the later
// positions of the pass between this chunk and its next one at best
// (later passes may put more between): its range grows by at least that
// many cells for each position it has left. The price counts that too
// (frag).
func (e *Engine) price(reqs []*reqState, offset int) plan {
	p := plan{reqs: reqs, take: e.allocate(reqs)}
	lo, hi := math.MaxInt, -1
	type cut struct{ rem, n int }
	var cuts []cut
	for i, r := range reqs {
		n := p.take[i]
		if n == 0 {
			continue
		}
		p.tokens += n
		if l, h, ok := e.cells.seqRange(int(r.req.Seq)); ok {
			lo, hi = min(lo, l), max(hi, h)
		}
		if rem := r.remaining() - n; rem > 0 {
			cuts = append(cuts, cut{rem, n})
		}
	}
	slices.SortStableFunc(cuts, func(a, b cut) int { return a.rem - b.rem })
	frag, after := 0.0, 0
	for k := len(cuts) - 1; k >= 0; k-- {
		frag += float64(cuts[k].rem * after)
		after += cuts[k].n
	}
	p.cells, p.cost = e.rangeCost(p.tokens, lo, hi, offset, frag)
	return p
}

// sums are the totals of requests that fit whole in one pass.
type sums struct {
	ok           bool // every request fits whole (see fits)
	tokens, rows int  // inputs left, logit rows they yield
	lo, hi       int  // cells the requests' sequences span (lo > hi: none)
}

func (a sums) add(b sums) sums {
	return sums{ok: a.ok && b.ok, tokens: a.tokens + b.tokens, rows: a.rows + b.rows, lo: min(a.lo, b.lo), hi: max(a.hi, b.hi)}
}

// fits sums up reqs; ok says they all fit whole in one pass.
func (e *Engine) fits(reqs []*reqState) sums {
	s := sums{lo: math.MaxInt, hi: -1}
	for _, r := range reqs {
		s.tokens += r.remaining()
		s.rows += rowCount(r, r.next, r.remaining())
		if l, h, ok := e.cells.seqRange(int(r.req.Seq)); ok {
			s.lo, s.hi = min(s.lo, l), max(s.hi, h)
		}
	}
	s.ok = s.tokens <= e.opts.BatchSize && s.rows <= e.opts.MaxLogits
	return s
}

// priceWhole prices a pass computing requests whole, from their sums (no
// request is cut, so the order does not matter).
func (e *Engine) priceWhole(s sums) plan {
	p := plan{tokens: s.tokens}
	p.cells, p.cost = e.rangeCost(s.tokens, s.lo, s.hi, 0, 0)
	return p
}

// rangeCost is the padded cell range and the cost of a pass of tokens new
// positions, taking the free cells from offset on, whose sequences span
// the cells [lo, hi] (lo > hi: none).
func (e *Engine) rangeCost(tokens, lo, hi, offset int, frag float64) (int, float64) {
	if tokens == 0 || e.cells == nil || e.costs == nil {
		return 0, 0
	}
	cell := func(i int) int {
		if i += offset; i < len(e.free) {
			return e.free[i]
		}
		return len(e.cells.refs) - 1 // beyond the free cells the mirror knows: assume the end
	}
	cells := e.cells.span(min(lo, cell(0)), max(hi, cell(tokens-1)))
	return cells, e.costs.cur.of(tokens, cells, frag)
}

// layout puts the chosen pass's shares in placement order: a request
// continuing a cut input first (it extends its previous chunk), then the
// others that finish, by where their sequences lie (new sequences last;
// the lowest free cells go to the sequences stored lowest), then the cut
// ones with the one with the most left last (see price).
func (e *Engine) layout(p *plan) {
	type keyed struct {
		planned
		class, key int
	}
	var ks []keyed
	for i, r := range p.reqs {
		n := p.take[i]
		if n == 0 {
			continue
		}
		k := keyed{planned: planned{r: r, n: n}, class: 1, key: math.MaxInt}
		switch rem := r.remaining() - n; {
		case rem > 0:
			k.class, k.key = 2, rem
		case r == e.carry:
			k.class, k.key = 0, 0
		default:
			if lo, _, ok := e.cells.seqRange(int(r.req.Seq)); ok {
				k.key = lo
			}
		}
		ks = append(ks, k)
	}
	slices.SortStableFunc(ks, func(a, b keyed) int {
		if a.class != b.class {
			return a.class - b.class
		}
		return cmp.Compare(a.key, b.key)
	})
	p.parts = p.parts[:0]
	for _, k := range ks {
		p.parts = append(p.parts, k.planned)
	}
}

// allocate shares BatchSize positions and MaxLogits rows among reqs in
// order: every request first gets up to an equal share, what is left goes
// to the requests in the same order. Inputs that must share a pass (an
// image and its placeholders) are not split (see span).
func (e *Engine) allocate(reqs []*reqState) []int {
	take := make([]int, len(reqs))
	if len(reqs) == 0 {
		return take
	}
	room, rowRoom := e.opts.BatchSize, e.opts.MaxLogits
	share := max(1, room/len(reqs))
	used := 0
	for pass := 0; pass < 2 && room > 0; pass++ {
		for i, r := range reqs {
			if room == 0 {
				break
			}
			from := r.next + take[i]
			limit := room
			if pass == 0 {
				limit = min(share, room)
			}
			n := span(r, from, limit, rowRoom, used == 0)
			if n == 0 {
				continue
			}
			take[i] += n
			rowRoom -= rowCount(r, from, n)
			room = max(0, room-n)
			used += n
		}
	}
	return take
}

// Passes of recurrent models (Qwen3.5: gated delta-net layers with a
// per-sequence state, plus full attention layers).
//
// Ollama's recurrent cache (kvcache.Recurrent, v0.17.4) runs several
// sequences in one pass only when each advances by the same number of
// positions, laid out sequence by sequence (it reshapes the pass to
// [positions per sequence, sequences]); anything else fails with
// kvcache.ErrNotSupported. So a pass takes k positions from each of m
// requests. Forks share their source's state copy-on-write: the pass that
// first advances a fork copies the state (and the checkpoints the source
// holds) to a slot of its own, inside the same graph.
//
// The graph of such a pass has a bounded number of nodes (the ggml
// backend's per-context limit, max(1024, 32 x tensors in the file)): the
// delta-net's chunked form adds nodes per 64 positions of a sequence, and
// every sequence adds its state copy and checkpoint captures per recurrent
// layer. recurrentSeqTokens and passGraph keep both within it;
// exceeding it aborts the process inside ggml.

// recurrentSeqTokens is the most positions one sequence advances in a pass
// of a recurrent model: 8 of the delta-net's 64-position chunks, the batch
// Ollama's runner uses for these models.
const recurrentSeqTokens = 512

// passTokens is the most positions the largest single-sequence pass holds.
func (e *Engine) passTokens() int {
	if e.checkpoints != nil {
		return min(e.opts.BatchSize, recurrentSeqTokens)
	}
	return e.opts.BatchSize
}

// planRecurrent picks a pass for a recurrent model: the first request in
// round-robin order leads; the pass advances it and the requests that
// join it by the same count k, chosen to compute the most positions (k
// times the requests with at least k left, within BatchSize positions,
// MaxLogits rows and the sequences the graph allows, see passGraph). Decode steps of many forks
// (one position each) thus share one pass, and a long prompt runs in
// passes of its own instead of being cut to the shortest request's
// length. When every request has a few positions left (at most
// maxCoverLen) in several lengths, as a search's leaves do, they share one
// padded pass (planPadded) where deltaStep can run it; otherwise (or with
// Options.EqualPasses) k is one of the counts of coverCounts that the
// leader's length uses, and only the requests whose length uses it join:
// the requests then finish in the fewest passes of equal counts. Requests
// with images run alone (their image positions must share one pass).
func (e *Engine) planRecurrent(jobs []*job) plan {
	var rs []*reqState
	for _, j := range jobs {
		rs = unfinished(rs, j)
	}
	start := e.rr % len(rs)
	e.rr = start + 1
	lead := rs[start]
	var p plan
	if lead.images > 0 || e.hybrid == nil {
		if n := span(lead, lead.next, e.passTokens(), e.opts.MaxLogits, true); n > 0 {
			p.reqs, p.take = []*reqState{lead}, []int{n}
			p.parts, p.tokens = []planned{{r: lead, n: n}}, n
		}
		return p
	}
	others := make([]*reqState, 0, len(rs)-1)
	for i := 1; i < len(rs); i++ {
		if r := rs[(start+i)%len(rs)]; r.images == 0 {
			others = append(others, r)
		}
	}
	// Short requests of several lengths (a search's leaves: forced chains
	// of 1 to 8 tokens) take the fewest passes when the pass counts are a
	// fewest set whose subset sums give every length: each request joins
	// the passes of its own sum (coverCounts).
	cover := coverCounts(lead, others)
	var sumOf map[*reqState]uint64 // each request's counts (bit i: cover[i])
	if cover != nil {
		sumOf = map[*reqState]uint64{lead: decompose(cover, lead.remaining())}
		for _, r := range others {
			sumOf[r] = decompose(cover, r.remaining())
		}
	}
	joins := func(r *reqState, k int) bool { return sumOf[r]&(1<<slices.Index(cover, k)) != 0 }
	// members returns the requests a pass of k positions each takes, the
	// leader first, then the others in turn order.
	members := func(k int, dst []*reqState) []*reqState {
		dst = append(dst[:0], lead)
		limit := e.graph.seqs(k, e.maxLen)
		rows := rowCount(lead, lead.next, k)
		for _, r := range others {
			if (len(dst)+1)*k > e.opts.BatchSize || len(dst) >= limit {
				break
			}
			if r.remaining() < k || (cover != nil && !joins(r, k)) {
				continue
			}
			if rr := rowCount(r, r.next, k); rows+rr <= e.opts.MaxLogits {
				dst, rows = append(dst, r), rows+rr
			}
		}
		return dst
	}
	if (cover != nil || severalShort(lead, others)) && e.hybrid.ragged && !e.opts.EqualPasses {
		if p, ok := e.planPadded(lead, others); ok {
			return p
		}
	}
	kMax := min(lead.remaining(), e.passTokens())
	if rows := rowCount(lead, lead.next, kMax); rows > e.opts.MaxLogits {
		kMax = span(lead, lead.next, kMax, e.opts.MaxLogits, true)
	}
	best, bestK := []*reqState{lead}, kMax
	var scratch []*reqState
	tried := map[int]bool{}
	if cover != nil {
		// The passes of the leader's sum, the one computing the most
		// positions first.
		best, bestK = nil, 0
		for _, k := range cover {
			if !joins(lead, k) || k > kMax {
				continue
			}
			scratch = members(k, scratch)
			if len(scratch)*k > len(best)*bestK {
				best, bestK = append(best[:0:0], scratch...), k
			}
		}
		if best == nil { // the leader's rows do not fit: the greedy plan
			cover, best, bestK = nil, []*reqState{lead}, kMax
		}
	}
	if cover == nil {
		for _, r := range append([]*reqState{lead}, others...) {
			k := min(r.remaining(), kMax)
			if tried[k] || k <= 0 {
				continue
			}
			tried[k] = true
			scratch = members(k, scratch)
			if len(scratch)*k > len(best)*bestK || (len(scratch)*k == len(best)*bestK && k > bestK) {
				best, bestK = append(best[:0:0], scratch...), k
			}
		}
	}
	for _, r := range best {
		p.reqs = append(p.reqs, r)
		p.take = append(p.take, bestK)
		p.parts = append(p.parts, planned{r: r, n: bestK})
		p.tokens += bestK
	}
	return p
}

// planPadded plans a padded pass for short requests of several lengths (a
// search's leaves): the leader and then the others in turn order, each
// whole, as long as the pass stays within the positions deltaStep runs, the
// sequences the graph allows, BatchSize and MaxLogits. Every request is
// padded to the longest one's length: the pads only cost the attention
// layers' work and cache cells (hybridForward computes the rest on the
// requests' own positions, the recurrence only on the sequences that have
// a position), so one such pass replaces the
// two to four passes of equal counts the covering plan takes, each of which
// reads all the weights again. ok is false when the leader alone does not
// fit or no other request fits beside it.
func (e *Engine) planPadded(lead *reqState, others []*reqState) (plan, bool) {
	step := e.graph.step(e.maxLen)
	fits := func(members []*reqState, pad, rows int) bool {
		return pad <= step && len(members)*pad <= e.opts.BatchSize && rows <= e.opts.MaxLogits &&
			len(members) <= e.graph.paddedSeqs(pad, e.maxLen)
	}
	members := []*reqState{lead}
	pad := lead.remaining()
	rows := rowCount(lead, lead.next, pad)
	if !fits(members, pad, rows) {
		return plan{}, false
	}
	for _, r := range others {
		n := r.remaining()
		np, nr := max(pad, n), rows+rowCount(r, r.next, n)
		if fits(append(members, r), np, nr) {
			members, pad, rows = append(members, r), np, nr
		}
	}
	if len(members) < 2 { // nothing to share the pass with: the covering plan
		return plan{}, false
	}
	// Longest first: the recurrence's steps then run on a prefix of the
	// pass's sequences (see padded).
	slices.SortStableFunc(members, func(a, b *reqState) int { return b.remaining() - a.remaining() })
	var p plan
	for _, r := range members {
		n := r.remaining()
		p.reqs = append(p.reqs, r)
		p.take = append(p.take, n)
		p.parts = append(p.parts, planned{r: r, n: n})
		p.tokens += n
	}
	p.pad = pad
	return p, true
}

// Bounds of coverCounts: requests longer than maxCoverLen (a prompt, a
// long recompute) or length sets needing more than maxCover counts keep
// the greedy plan.
const (
	maxCoverLen = 16
	maxCover    = 4
)

// coverCounts returns the pass counts for the requests of a recurrent
// model's next passes when every one is at most maxCoverLen long: a fewest
// set of counts (at most maxCover, ascending, the first such set in
// lexicographic order) such that every request's remaining length is the
// sum of some of them. A pass then advances by one count the requests
// whose sum uses it (decompose), so the requests finish in as many passes
// as there are counts: lengths 1, 2, 3 and 6 take passes of 1, 2 and 3,
// where the greedy plan (most positions first) took four. nil when the
// requests have one length, or lengths outside the bounds.
func coverCounts(lead *reqState, others []*reqState) []int {
	var need uint64 // bit n: some request has n positions left
	top := 0
	for _, r := range append([]*reqState{lead}, others...) {
		n := r.remaining()
		if n <= 0 || n > maxCoverLen {
			return nil
		}
		need |= 1 << n
		top = max(top, n)
	}
	return coverLengths(need, top)
}

// severalShort reports whether every request has at most maxCoverLen
// positions left and they have several lengths: what a padded pass takes
// whether or not coverCounts finds counts for them.
func severalShort(lead *reqState, others []*reqState) bool {
	n := lead.remaining()
	several := false
	for _, r := range others {
		m := r.remaining()
		if m <= 0 || m > maxCoverLen {
			return false
		}
		several = several || m != n
	}
	return n > 0 && n <= maxCoverLen && several
}

// coverLengths is coverCounts over the set of lengths need (bit n: length
// n), the longest top.
func coverLengths(need uint64, top int) []int {
	if need == 1<<top { // one length: one pass, as the greedy plan does
		return nil
	}
	counts := make([]int, 0, maxCover)
	var search func(from, size int) bool
	search = func(from, size int) bool {
		if len(counts) == size {
			return subsetSums(counts)&need == need
		}
		for c := from; c <= top; c++ {
			counts = append(counts, c)
			if search(c+1, size) {
				return true
			}
			counts = counts[:len(counts)-1]
		}
		return false
	}
	for size := 2; size <= maxCover; size++ {
		if search(1, size) {
			return counts
		}
	}
	return nil
}

// subsetSums returns the subset sums of counts as a bit set (bit n: some
// subset sums to n; the counts sum to less than 64).
func subsetSums(counts []int) uint64 {
	s := uint64(1) // the empty sum
	for _, c := range counts {
		s |= s << c
	}
	return s
}

// decompose returns the subset of counts (bit i: counts[i]) that sums to n,
// preferring the larger counts, or 0 when none does.
func decompose(counts []int, n int) uint64 {
	for m := uint64(1)<<len(counts) - 1; m > 0; m-- { // the largest count's bit is the highest
		sum := 0
		for i, c := range counts {
			if m&(1<<i) != 0 {
				sum += c
			}
		}
		if sum == n {
			return m
		}
	}
	return 0
}

// passGraph estimates the graph objects (tensors, views included) of a
// pass of a recurrent model against the backend's per-context limit, to
// bound the sequences of a pass (exceeding the limit aborts inside ggml).
//
// The estimate, counted on generated qwen35 and qwen35moe models of 4 to
// 12 layers (TestPassGraphBound checks it against the objects of real
// passes at the bounds it allows, read with ggmlthread.Objects): the
// layers of a pass of one position per sequence take at most 150 objects
// per layer and 100 more (measured: 81 to 110 per layer); deltaStep adds
// stepNodes per position and recurrent layer (measured: 32) up to step
// positions; beyond that the model's chunked delta-net and the transposes
// around it take 80 per recurrent layer and 24 per 64-position chunk and
// recurrent layer (and 4 more per sequence and recurrent layer for the
// transposes' checkpoint captures); each sequence adds its copy-on-write
// state copy (2 + 2 per recurrent layer), its checkpoint captures (4 per
// recurrent layer: 2 + 6 per recurrent layer measured without checkpoints
// to copy) and the copies of the checkpoints its source's slot holds (2
// per recurrent layer and checkpoint) — or, where the engine copies its
// forks' states itself (passGraph.ownCopies), only its captures, and the
// pass 4 + 4 per recurrent layer for all forks' copies; a padded pass adds paddedNodes per
// layer (measured: 12). A tenth of the limit stays free. (Until
// 2026-12-03 the layers were estimated at 70% of the limit, three to four
// times what they take, which held passes to a third of the sequences
// they can hold and deltaStep to about 4 positions.)
type passGraph struct {
	maxNodes  int // the backend's per-context limit
	layers    int
	recurrent int // delta-net layers
	// wkv says deltaStep runs the recurrence as one node (ggml's operator,
	// hybridForward.deltaWKV, or nesy's kernels, deltaKernel): its graph
	// takes at most wkvNodes per recurrent layer whatever the positions,
	// instead of stepNodes per position and a padded pass's
	// paddedStepNodes.
	wkv bool
	// ownCopies says the engine copies the states of a pass's new forks
	// itself (forkCopier): a read and a write per buffer for the whole
	// pass, and no checkpoint copies, instead of the cache's per fork.
	ownCopies bool
}

// wkvNodes bounds the graph objects deltaWKV adds per recurrent layer
// (the gates' and inputs' shaping, the operator, its two views and the
// gather of a padded pass; measured by TestPassGraphBound).
const wkvNodes = 40

// stepNodes bounds the graph objects deltaStep adds per position and
// recurrent layer (measured 32: the position's slices, the products, the
// state update).
const stepNodes = 36

// maxDeltaStep caps the passes deltaStep runs (see passGraph.step).
const maxDeltaStep = 16

// maxWKVStep caps the passes deltaStep runs as one operator (deltaWKV):
// any pass, a prompt included, since its graph does not grow with the
// positions; the model's chunked delta-net then never runs.
const maxWKVStep = 1 << 20

// newPassGraph reads the limit from the backend and the layer kinds from
// the model's metadata as the backend holds it (per-layer KV head counts,
// 0 for a delta-net layer; Load's own metadata read skips arrays). When
// the counts cannot be read every layer counts as recurrent.
func newPassGraph(b ml.Backend) passGraph {
	g := passGraph{maxNodes: newCacheBackend(b).maxNodes}
	c := b.Config()
	g.layers = int(c.Uint("block_count"))
	g.recurrent = g.layers
	if hc, ok := c.(interface{ HeadCountKV() []uint64 }); ok {
		g.recurrent = 0
		for _, h := range hc.HeadCountKV() {
			if h == 0 {
				g.recurrent++
			}
		}
	}
	return g
}

// step is the longest pass deltaStep may run when no sequence has held
// more than maxLen positions: one sequence of it fits (0 or 1: the model's
// chunked delta-net for every pass of more than one position).
func (g passGraph) step(maxLen int) int {
	if g.recurrent == 0 {
		return 0
	}
	room := g.avail() - g.base(1, 0) - g.perSeq(checkpoints(maxLen))
	if g.wkv {
		if room < wkvNodes*g.recurrent {
			return 0
		}
		return maxWKVStep
	}
	return max(0, min(maxDeltaStep, room/(stepNodes*g.recurrent)))
}

// stepCost is what deltaStep adds to the layers' estimate for a pass of k
// positions per sequence.
func (g passGraph) stepCost(k int) int {
	if g.wkv {
		return g.recurrent * wkvNodes
	}
	return g.recurrent * stepNodes * k
}

// paddedExtra is what a padded pass of k positions per sequence adds to
// base.
func (g passGraph) paddedExtra(k int) int {
	extra := paddedNodes * g.layers
	if !g.wkv {
		extra += paddedStepNodes * g.recurrent * k
	}
	return extra
}

// checkpoints bounds the checkpoints a cache slot holds when no sequence
// has held more than maxLen positions: one per checkpointInterval
// positions, plus the first and one restored.
func checkpoints(maxLen int) int { return min(24, maxLen/checkpointInterval+2) }

// checkpointInterval is the recurrent cache's spacing of state checkpoints
// (kvcache.DefaultCheckpointInterval at v0.17.4).
const checkpointInterval = 1664

// base is the estimate for the layers of a pass of k positions per
// sequence, whatever the sequences, where deltaStep runs passes of up to
// step positions.
func (g passGraph) base(k, step int) int {
	b := 100 + 150*g.layers
	if g.ownCopies {
		b += 4 + 4*g.recurrent // the pass's fork copies
	}
	switch {
	case k <= 1:
	case k <= step:
		b += g.stepCost(k)
	default: // the model's chunked delta-net, between two transposes of the states
		b += g.recurrent * (80 + 24*((k+63)/64))
	}
	return b
}

// perSeq is the estimate for one sequence whose slot holds checkpoints
// checkpoints.
func (g passGraph) perSeq(checkpoints int) int {
	if g.ownCopies {
		return 2 + 6*g.recurrent // no copies of its own: its captures
	}
	return 2 + 6*g.recurrent + 2*g.recurrent*checkpoints
}

// paddedNodes bounds the graph objects a padded pass adds per layer (the
// rows gathered and scattered around each operator, the convolution
// state's gather; measured 12), and paddedStepNodes those it adds per
// position and recurrent layer (the views of the sequences a position
// runs on, the finished sequences' states).
const (
	paddedNodes     = 16
	paddedStepNodes = 8
)

// paddedSeqs is seqs for a padded pass of k positions per sequence; 0
// when not even one fits (a padded pass always has room for a sequence
// less than seqs allows).
func (g passGraph) paddedSeqs(k, maxLen int) int {
	per := g.perSeq(checkpoints(maxLen))
	return max(0, (g.avail()-g.base(k, g.step(maxLen))-g.paddedExtra(k))/per)
}

// avail is the part of the limit the estimate may fill.
func (g passGraph) avail() int { return g.maxNodes * 9 / 10 }

// seqs is the most sequences a pass of k positions each may hold when no
// sequence has held more than maxLen positions.
func (g passGraph) seqs(k, maxLen int) int {
	step := g.step(maxLen)
	per := g.perSeq(checkpoints(maxLen))
	if k > max(1, step) {
		per += 4 * g.recurrent // the transposes' writes capture checkpoints too
	}
	return max(1, (g.avail()-g.base(k, step))/per)
}
