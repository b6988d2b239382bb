package models

import (
	"math"
	"slices"
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

// plan is a candidate pass: shares in placement order (the order the
// cache gives out free cells in) and their predicted cost.
type plan struct {
	parts  []planned
	tokens int
	cells  int     // padded cell range the pass spans
	cost   float64 // seconds, by the engine's cost model
}

func (p *plan) takes(j *job) bool {
	for _, q := range p.parts {
		if q.r.job == j {
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
		return e.planSingle(jobs)
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
	for _, j := range order[1:] {
		if len(group) >= e.opts.BatchSize {
			break // every position is taken by a request already in
		}
		own := unfinished(nil, j)
		cand := append(slices.Clone(group), own...)
		merged := e.price(cand, 0)
		if !merged.takes(j) {
			continue
		}
		if e.join(best, merged, e.price(own, best.tokens)) {
			group, best = cand, merged
		}
	}

	// The next pass is led by the first job this one left out, or by the
	// one after this pass's leader when every job got a share.
	next := order[0]
	for _, j := range order {
		if !best.takes(j) {
			next = j
			break
		}
	}
	e.rr = slices.Index(jobs, next)
	if next == order[0] {
		e.rr++
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
// Placement: requests that finish in this pass come first (a request
// continuing a cut input first of all, so it extends its previous chunk),
// requests that will be cut again last, the one with the most left at the
// very end, so that its next chunk follows on. A cut request that is not
// last has later positions of this pass between its chunk and its next
// one: its range grows by them, which every one of its remaining positions
// pays; the price counts that too (frag).
func (e *Engine) price(reqs []*reqState, offset int) plan {
	take := e.allocate(reqs)
	var p plan
	for i, r := range reqs {
		if take[i] > 0 {
			p.parts = append(p.parts, planned{r: r, n: take[i]})
			p.tokens += take[i]
		}
	}
	if p.tokens == 0 {
		return p
	}
	slices.SortStableFunc(p.parts, func(a, b planned) int {
		ka, ra := e.placeKey(a)
		kb, rb := e.placeKey(b)
		if ka != kb {
			return ka - kb
		}
		return ra - rb
	})
	if e.cells == nil || e.costs == nil {
		return p
	}
	last := len(e.cells.refs) - 1
	cell := func(i int) int {
		if i += offset; i < len(e.free) {
			return e.free[i]
		}
		return last // beyond the free cells the mirror knows: assume the end
	}
	lo, hi := cell(0), cell(p.tokens-1)
	frag := 0.0
	k := 0
	for i, q := range p.parts {
		slo, shi := cell(k), cell(k+q.n-1)
		k += q.n
		if l, h, ok := e.cells.seqRange(int(q.r.req.Seq)); ok {
			slo, shi = min(slo, l), max(shi, h)
		}
		lo, hi = min(lo, slo), max(hi, shi)
		if rem := q.r.remaining() - q.n; rem > 0 && i < len(p.parts)-1 {
			// Its next chunk lands after the later parts' cells at best
			// (later passes may put more between), so its range grows
			// by at least that many cells for each position it has left.
			frag += float64(rem * (p.tokens - k))
		}
	}
	p.cells = e.cells.span(lo, hi)
	p.cost = e.costs.cur.of(p.tokens, p.cells, frag)
	return p
}

// placeKey orders a pass's shares for placement (see price). Requests
// that finish go by where their sequences lie (new sequences last), so
// that the lowest free cells go to the sequences stored lowest.
func (e *Engine) placeKey(q planned) (class, key int) {
	rem := q.r.remaining() - q.n
	switch {
	case rem > 0:
		return 2, rem
	case q.r == e.carry:
		return 0, 0
	}
	if lo, _, ok := e.cells.seqRange(int(q.r.req.Seq)); ok {
		return 1, lo
	}
	return 1, math.MaxInt
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

// planSingle picks a pass for recurrent models (Qwen3.5): one sequence per
// pass, the first request in round-robin order, as much of it as fits.
// Ollama's engine (v0.17.4) cannot batch several sequences there: its
// recurrent cache needs every sequence of a pass to advance by the same
// count, and its full-attention layers (qwen3next FullAttention) reject
// any pass with more than one sequence.
func (e *Engine) planSingle(jobs []*job) plan {
	var rs []*reqState
	for _, j := range jobs {
		rs = unfinished(rs, j)
	}
	start := e.rr % len(rs)
	r := rs[start]
	var p plan
	if n := span(r, r.next, e.opts.BatchSize, e.opts.MaxLogits, true); n > 0 {
		p.parts, p.tokens = []planned{{r: r, n: n}}, n
	}
	e.rr = start + 1
	return p
}
