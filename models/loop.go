package models

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ollama/ollama/kvcache"
	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/model/input"
)

// loop is the engine goroutine: it owns forward passes.
func (e *Engine) loop() {
	defer close(e.done)
	var active []*job
	for {
		e.mu.Lock()
		if e.closed {
			for _, j := range append(active, e.queue...) {
				e.finishLocked(j, ErrClosed)
			}
			e.queue = nil
			e.mu.Unlock()
			return
		}
		if len(active) == 0 && len(e.queue) == 0 {
			e.mu.Unlock()
			<-e.wake
			continue
		}
		if len(active) == 0 && e.opts.MergeWindow > 0 && !e.opts.NoMerge {
			// Collection window: let concurrent callers join this pass.
			e.mu.Unlock()
			time.Sleep(e.opts.MergeWindow)
			e.mu.Lock()
		}
		// Cancelled callers still waiting in the queue leave now.
		e.queue = slices.DeleteFunc(e.queue, func(j *job) bool {
			if err := j.ctx.Err(); err != nil {
				e.finishLocked(j, err)
				return true
			}
			return false
		})
		switch {
		case len(e.queue) == 0:
		case e.opts.NoMerge && len(active) == 0:
			active = append(active, e.queue[0])
			e.queue = e.queue[1:]
		case !e.opts.NoMerge:
			active = append(active, e.queue...)
			e.queue = nil
		}
		// Drop cancelled jobs, prepare new ones.
		active = slices.DeleteFunc(active, func(j *job) bool {
			if err := j.ctx.Err(); err != nil {
				e.finishLocked(j, err)
				return true
			}
			if !j.started {
				j.started = true
				if err := e.prepareLocked(j); err != nil {
					e.finishLocked(j, err)
					return true
				}
			}
			return false
		})
		if len(active) == 0 {
			e.mu.Unlock()
			continue
		}
		tb := time.Now()
		b, err := e.buildLocked(active)
		switch {
		case errors.Is(err, ErrCacheFull) && len(b.jobs()) > 1:
			// No room for everyone: the job that still needs the most
			// positions gives way; the others retry in the next pass.
			e.finishLocked(biggest(b.jobs()), err)
		case err != nil:
			// The graph could not be built: fail the jobs it held, leave
			// the others.
			e.discardLocked(b)
			for _, j := range b.jobs() {
				e.finishLocked(j, err)
			}
		}
		if err != nil {
			active = slices.DeleteFunc(active, func(j *job) bool { return j.err != nil })
			e.mu.Unlock()
			continue
		}
		e.mu.Unlock()

		if e.beforePass != nil {
			e.beforePass()
		}
		rows, err := b.compute()

		e.mu.Lock()
		if err != nil {
			e.discardLocked(b)
			for _, j := range b.jobs() {
				e.finishLocked(j, err)
			}
		} else {
			if e.costs != nil {
				e.costs.observe(b.nInput, b.cells, time.Since(tb).Seconds())
			}
			e.commitLocked(b, rows)
		}
		active = slices.DeleteFunc(active, func(j *job) bool { return j.err != nil || j.pending == 0 })
		e.mu.Unlock()
	}
}

// biggest returns the job with the most positions left to compute.
func biggest(js []*job) *job {
	var best *job
	left := -1
	for _, j := range js {
		n := 0
		for _, r := range j.reqs {
			n += len(r.inputs) - r.next
		}
		if n > left {
			best, left = j, n
		}
	}
	return best
}

// discardLocked forgets the cache cells a failed pass may have claimed
// for its sequences (the positions from valid on). A recurrent state that
// may have been half updated is dropped entirely; the history is
// recomputed on the next Eval.
func (e *Engine) discardLocked(b *batch) {
	for _, p := range b.parts {
		id := p.r.req.Seq
		s := &e.seqs[id]
		from := int32(s.valid)
		if e.checkpoints != nil {
			from, s.valid = 0, 0
		}
		// Removing whole tails does not fail for the engine's caches; a
		// failure here would leave stale cells of a sequence that is
		// about to be cut back anyway.
		unlock := e.lockDevices()
		_ = e.cache.Remove(int(id), from, math.MaxInt32)
		unlock()
		e.cells.removeTail(int(id), from)
	}
}

// finishLocked ends a job: on error its requests' sequences are cut back to
// where they were; on success its results stay. Either way the sequences
// are free again (and released if Release came meanwhile).
func (e *Engine) finishLocked(j *job, err error) {
	select {
	case <-j.done:
		return
	default:
	}
	j.err = err
	for _, r := range j.reqs {
		id := r.req.Seq
		s := &e.seqs[id]
		if err != nil && r.inputs != nil && !e.closed && len(s.hist) > r.start {
			if terr := e.truncateLocked(id, r.start); terr != nil {
				j.err = errors.Join(err, terr)
			}
		}
		if err != nil && r.inputs != nil {
			// A failed request's rotary shift (prepareLocked), whether or
			// not any of its positions were committed.
			s.rope = marksUpTo(s.rope, r.start)
		}
		r.mm.close()
		s.busy = false
		if s.release {
			e.freeLocked(id)
		}
	}
	close(j.done)
}

// prepareLocked turns a job's requests into inputs: pending recomputation,
// images (encoded now) and tokens.
func (e *Engine) prepareLocked(j *job) error {
	for _, r := range j.reqs {
		s := &e.seqs[r.req.Seq]
		r.start = len(s.hist)
		var inputs []*input.Input
		for _, t := range s.hist[s.valid:] {
			if t < 0 {
				return fmt.Errorf("%w: sequence %d must recompute an image position after truncation", ErrUnsupported, r.req.Seq)
			}
			inputs = append(inputs, &input.Input{Token: t})
		}
		r.pre = len(inputs)
		own, text, images, err := e.requestInputs(r)
		if err != nil {
			r.mm.close()
			return err
		}
		r.images = images
		inputs = append(inputs, own...)
		r.text = append(make([]bool, r.pre), text...)
		if n := len(s.hist) + len(own); n > e.opts.ContextLength {
			r.mm.close()
			return fmt.Errorf("%w: sequence %d would hold %d positions, limit %d", ErrContextLength, r.req.Seq, n, e.opts.ContextLength)
		}
		if e.hybrid != nil && e.hybrid.merge > 0 {
			var shift int32
			r.rope, shift = ropePositions(s.rope, inputs, r.pre, r.start, e.hybrid.merge)
			if r.rope != nil && shift != shiftAt(s.rope, r.start) {
				// Dropped with the positions if the request fails
				// later (finishLocked truncates to r.start).
				s.rope = append(s.rope, ropeMark{at: r.start + len(own), shift: shift})
			}
		}
		r.inputs = inputs
	}
	return nil
}

// batch is one forward pass being built or run.
type batch struct {
	e      *Engine
	ctx    ml.Context
	out    ml.Tensor
	parts  []batchPart
	nRows  int
	dummy  bool // one extra output row nobody asked for
	nInput int
	cells  int // padded cell range the pass spans (cellMap's prediction)
	// sel is the output rows the pass computes (see selection); nil for
	// all of them.
	sel []int32
	// pad is the positions per part of a padded pass (0 otherwise): part
	// p's positions from p.n on are pads, removed from the cache when the
	// pass is committed.
	pad int
	// rope are the rotary time positions of the pass's positions where a
	// part's differ from its logical ones (nil: none does; see
	// ropePositions).
	rope []int32
}

// addRope records the rotary position of the pass's next position: input
// i of r, or for a pad (i past r's inputs) the positions after its last.
// It allocates the slice only once some request has positions of its own.
// placed are the pass's positions so far (the logical positions, which are
// the rotary ones of the parts before the first that has its own).
func (b *batch) addRope(r *reqState, i int, logical int32, placed []int32) {
	if r.rope == nil && b.rope == nil {
		return
	}
	if b.rope == nil {
		b.rope = slices.Clone(placed)
	}
	switch {
	case r.rope == nil:
		b.rope = append(b.rope, logical)
	case i < len(r.rope):
		b.rope = append(b.rope, r.rope[i])
	default:
		b.rope = append(b.rope, r.rope[len(r.rope)-1]+int32(i-len(r.rope)+1))
	}
}

type batchPart struct {
	r     *reqState
	from  int // first input
	n     int // inputs
	rows  []int
	first int // index of the part's first row in the output
}

func (b *batch) jobs() []*job {
	var out []*job
	for _, p := range b.parts {
		if !slices.Contains(out, p.r.job) {
			out = append(out, p.r.job)
		}
	}
	return out
}

// span returns how many inputs of r starting at from may join a batch with
// room positions and rowRoom logit rows: inputs that must share a batch
// (an image and its placeholders) are not split, except that an empty
// batch takes such a group even when it is larger than the room.
func span(r *reqState, from, room, rowRoom int, empty bool) int {
	n, rows := 0, 0
	for i := from; i < len(r.inputs); {
		group := 1 + r.inputs[i].SameBatch
		group = min(group, len(r.inputs)-i)
		gRows := 0
		for k := i; k < i+group; k++ {
			if r.wantsRow(k) {
				gRows++
			}
		}
		if n+group > room || rows+gRows > rowRoom {
			if n == 0 && empty {
				n, rows = group, gRows
			}
			break
		}
		n += group
		rows += gRows
		i += group
	}
	return n
}

// buildLocked plans the next pass from the active jobs (see planLocked)
// and builds its graph.
func (e *Engine) buildLocked(active []*job) (*batch, error) {
	b := &batch{e: e}
	p := e.planLocked(active)
	b.cells = p.cells
	ctx := e.model.Backend().NewContext()
	b.ctx = ctx
	var ib input.Batch
	var tokens, outputs []int32
	if p.pad > 0 {
		b.pad = p.pad
		return b, e.buildPadded(b, p)
	}
	for _, q := range p.parts {
		r, n := q.r, q.n
		s := &e.seqs[r.req.Seq]
		p := batchPart{r: r, from: r.next, n: n, first: len(outputs)}
		for k := 0; k < n; k++ {
			i := r.next + k
			in := r.inputs[i]
			tokens = append(tokens, in.Token)
			if in.Multimodal != nil {
				mm, err := r.mm.tensors(ctx, in.Multimodal)
				if err != nil {
					ctx.Close()
					b.parts = append(b.parts, p)
					return b, err
				}
				ib.Multimodal = append(ib.Multimodal, input.MultimodalIndex{Index: len(tokens) - 1, Multimodal: mm})
			}
			b.addRope(r, i, int32(s.valid+k), ib.Positions)
			ib.Positions = append(ib.Positions, int32(s.valid+k))
			ib.Sequences = append(ib.Sequences, int(r.req.Seq))
			if r.wantsRow(i) {
				p.rows = append(p.rows, i)
				outputs = append(outputs, int32(len(tokens)-1))
			}
		}
		b.parts = append(b.parts, p)
	}
	if len(tokens) == 0 {
		ctx.Close()
		return b, errors.New("models: internal error: empty batch")
	}
	b.setInputs(ctx, &ib, tokens, outputs, len(tokens))
	// Building the graph may compute (a recurrent cache's copy on write).
	unlock := e.lockDevices()
	err := e.forward(ctx, ib, b, nil)
	unlock()
	if err != nil {
		ctx.Close()
		return b, err
	}
	return b, nil
}

// setInputs sets the pass's tokens (the positions placed) and logit rows:
// outputs are the rows asked for, indices into the computed positions;
// when none is asked for, the last computed position's row is taken as a
// dummy (a pass must return one).
func (b *batch) setInputs(ctx ml.Context, ib *input.Batch, tokens, outputs []int32, computed int) {
	if len(outputs) == 0 {
		outputs = append(outputs, int32(computed-1))
		b.dummy = true
	}
	b.nRows = len(outputs)
	b.nInput = computed
	ib.Inputs = ctx.Input().FromInts(tokens, len(tokens))
	ib.Outputs = ctx.Input().FromInts(outputs, len(outputs))
}

// buildPadded builds a padded pass of a recurrent model (see planPadded):
// each part's inputs followed by copies of its last input up to p.pad
// positions, placed in the cache as one pass of p.pad positions per
// sequence; hybridForward computes the parts' own positions (padded.real)
// and gives the pads no effect on the recurrent states. The logit rows
// and nInput count the parts' own positions only.
func (e *Engine) buildPadded(b *batch, p plan) error {
	ctx := b.ctx
	var ib input.Batch
	var tokens, own, outputs, real, scatter, lengths []int32
	var valid []float32
	for _, q := range p.parts {
		r, n := q.r, q.n
		s := &e.seqs[r.req.Seq]
		part := batchPart{r: r, from: r.next, n: n, first: len(outputs)}
		for k := 0; k < p.pad; k++ {
			i := r.next + min(k, n-1)
			t := r.inputs[i].Token
			tokens = append(tokens, t)
			b.addRope(r, r.next+k, int32(s.valid+k), ib.Positions)
			ib.Positions = append(ib.Positions, int32(s.valid+k))
			ib.Sequences = append(ib.Sequences, int(r.req.Seq))
			if k < n {
				own = append(own, t)
				real = append(real, int32(len(tokens)-1))
				if r.wantsRow(i) {
					part.rows = append(part.rows, i)
					outputs = append(outputs, int32(len(own)-1))
				}
			}
			scatter = append(scatter, int32(len(own)-1))
			valid = append(valid, float32(min(1, max(0, n-k))))
		}
		lengths = append(lengths, int32(n))
		b.parts = append(b.parts, part)
	}
	b.setInputs(ctx, &ib, tokens, outputs, len(own))
	pd := &padded{
		pad: p.pad, lengths: lengths,
		inputs:  ctx.Input().FromInts(own, len(own)),
		real:    ctx.Input().FromInts(real, len(real)),
		scatter: ctx.Input().FromInts(scatter, len(scatter)),
	}
	switch e.hybrid.rule {
	case ruleKernel: // the delta-net layers see the own positions only
	case ruleWKV:
		pd.valid = ctx.Input().FromFloats(valid, len(valid))
	default:
		var order []int32
		pd.active, order = recurrenceOrder(lengths, p.pad, len(own))
		pd.order = ctx.Input().FromInts(order, len(order))
	}
	unlock := e.lockDevices()
	err := e.forward(ctx, ib, b, pd)
	unlock()
	if err != nil {
		ctx.Close()
	}
	return err
}

// recurrenceOrder lays out the per-position recurrence of a padded pass
// (hybridForward.deltaSteps) of sequences of lengths (longest first) and
// pad positions: active[k] is how many sequences have a position k (a
// prefix), and order gives each of the own positions, by sequence then
// position, its column in the recurrence's outputs, which come by
// position, then sequence (position k of sequence s: the active counts of
// the positions before k, plus s).
func recurrenceOrder(lengths []int32, pad, own int) (active []int, order []int32) {
	active = make([]int, pad)
	offset := make([]int32, pad+1)
	for k := range pad {
		for _, l := range lengths {
			if int(l) > k {
				active[k]++
			}
		}
		offset[k+1] = offset[k] + int32(active[k])
	}
	order = make([]int32, 0, own)
	for s, l := range lengths {
		for k := range int(l) {
			order = append(order, offset[k]+int32(s))
		}
	}
	return active, order
}

func rowCount(r *reqState, from, n int) int {
	c := 0
	for i := from; i < from+n; i++ {
		if r.wantsRow(i) {
			c++
		}
	}
	return c
}

// forward places the batch in the cache and builds the graph (pd: a padded
// pass's layout, nil for any other).
func (e *Engine) forward(ctx ml.Context, ib input.Batch, b *batch, pd *padded) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(r)
		}
	}()
	if err := e.cache.StartForward(ctx, ib, false); err != nil {
		if errors.Is(err, kvcache.ErrKvCacheFull) {
			return fmt.Errorf("%w (%d cells; release or truncate sequences): %v", ErrCacheFull, e.stats.CacheCells, err)
		}
		return err
	}
	if e.forks != nil {
		e.forks.copy(ctx)
	}
	e.cells.place(ib.Sequences, ib.Positions)
	b.sel = e.selection(b)
	restore := e.selectOutput(ctx, b.sel)
	if e.hybrid != nil {
		// This pass's rotary positions, for its graph only (cleared even
		// when building panics).
		e.hybrid.rope = b.rope
		defer func() { e.hybrid.rope = nil }()
	}
	t, err := e.buildForward(ctx, ib, pd)
	restore()
	if err != nil {
		return err
	}
	ctx.SetBatchSize(len(ib.Positions))
	ctx.Forward(t)
	if e.inspect != nil {
		e.inspect(ctx)
	}
	b.out = t
	return nil
}

// buildForward builds the graph of a pass placed in the cache: through
// hybridForward for every pass of a model that has one (it keeps the
// delta-net states in its own layout, so no pass may bypass it; image
// passes included), else the model's Forward.
func (e *Engine) buildForward(ctx ml.Context, ib input.Batch, pd *padded) (ml.Tensor, error) {
	if e.hybrid == nil {
		return e.model.Forward(ctx, ib)
	}
	k, n, err := layout(ib.Sequences)
	if err != nil {
		return nil, err
	}
	return e.hybrid.forward(ctx, ib, k, n, max(1, e.graph.step(e.maxLen)), pd)
}

// compute runs the pass and returns its logit rows (without the engine
// lock: other goroutines may fork, release or queue meanwhile).
func (b *batch) compute() (rows []float32, err error) {
	defer b.ctx.Close()
	defer func() {
		if r := recover(); r != nil {
			err = panicError(r)
		}
	}()
	return b.e.runner.Compute(b.ctx, b.out)
}

// commitLocked records a computed batch: sequence lengths, histories,
// logit rows, finished jobs.
func (e *Engine) commitLocked(b *batch, rows []float32) {
	width := e.tok.vocabSize
	if b.nRows > 0 {
		width = len(rows) / b.nRows
	}
	if b.sel != nil && width != len(b.sel) {
		// The model's forward did not go through the projection it
		// exposes (an architecture that multiplies by another tensor):
		// its rows are whole; narrow no more passes.
		e.opts.Logger.Warn("models: the model ignored the narrowed output projection; computing every logit from now on", "rows", width, "selected", len(b.sel))
		b.sel, e.output = nil, nil
	}
	e.stats.ModelCalls++
	e.stats.EvaluatedTokens += int64(b.nInput)
	if b.sel != nil {
		e.stats.CandidatePasses++
	}
	if b.pad > 0 {
		e.stats.PaddedPositions += int64(b.pad*len(b.parts) - b.nInput)
	}
	for _, p := range b.parts {
		r := p.r
		s := &e.seqs[r.req.Seq]
		for k := 0; k < p.n; k++ {
			i := p.from + k
			if i >= r.pre {
				t := r.inputs[i].Token
				if r.images > 0 {
					t = -1 // image prompts are not recomputable
				}
				s.hist = append(s.hist, t)
			}
		}
		s.valid += p.n
		if b.pad > p.n {
			e.removePadsLocked(r.req.Seq, b.pad-p.n)
		}
		e.maxLen = max(e.maxLen, len(s.hist))
		for k, i := range p.rows {
			r.logits = append(r.logits, e.rowOf(rows, p.first+k, width, b.sel, r, i))
		}
		r.next += p.n
		if r.finished() {
			e.stats.Images += int64(r.images)
			r.job.pending--
			if r.job.pending == 0 {
				e.finishLocked(r.job, nil)
			}
		}
	}
}

// reserve allocates the worst-case graphs (a full batch with MaxLogits
// rows, with an image for vision models, then a single token) so later
// passes never allocate, as Ollama's runner does.
func (e *Engine) reserve() error {
	if err := e.reserveGraph(e.passTokens(), e.opts.MaxLogits, true); err != nil {
		return err
	}
	return e.reserveGraph(1, 1, false)
}

// reserveGraph reserves the graph of a pass of n positions with rows logit
// rows. For recurrent caches it builds the pass on a scratch sequence
// (removed afterwards) instead of in the cache's reserve mode: reserve mode
// allocates every recurrent-state checkpoint of every sequence slot (24
// per slot and layer, each a full copy of the layer's state), which
// multiplies the state memory by 25 and, worse, makes every later
// copy-on-write fork copy all 24 checkpoints. Built on a real sequence,
// checkpoints are allocated when first captured. The graph differs from
// the worst case only in the attention cell range (the scratch
// sequence's cells instead of the whole cache), so the first long pass
// may still grow the compute buffer once.
func (e *Engine) reserveGraph(n, rows int, image bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(r)
		}
	}()
	ctx := e.model.Backend().NewContext()
	defer ctx.Close()
	scratch := -1
	if e.checkpoints != nil {
		id, err := e.allocLocked()
		if err != nil {
			return err
		}
		scratch = int(id)
		defer e.freeLocked(id)
	}
	inputs := make([]*input.Input, n)
	for i := range inputs {
		inputs[i] = &input.Input{}
	}
	var store *mmStore
	if image && e.mm != nil {
		store = newMMStore(e.model.Backend(), e.runner)
		defer store.close()
		if in, ok := store.reserveImage(e.mm, n); ok {
			inputs = in
		}
	}
	var ib input.Batch
	toks := make([]int32, len(inputs))
	ib.Positions = make([]int32, len(inputs))
	ib.Sequences = make([]int, len(inputs))
	for i, in := range inputs {
		toks[i] = in.Token
		ib.Positions[i] = int32(i)
		ib.Sequences[i] = max(scratch, 0)
		if in.Multimodal != nil {
			mm, err := store.tensors(ctx, in.Multimodal)
			if err != nil {
				return err
			}
			ib.Multimodal = append(ib.Multimodal, input.MultimodalIndex{Index: i, Multimodal: mm})
		}
	}
	ib.Inputs = ctx.Input().FromInts(toks, len(toks))
	ib.Outputs = ctx.Input().Empty(ml.DTypeI32, rows)
	if err := e.cache.StartForward(ctx, ib, scratch < 0); err != nil {
		return err
	}
	t, err := e.buildForward(ctx, ib, nil)
	if err != nil {
		return err
	}
	ctx.SetBatchSize(len(inputs))
	ctx.Forward(t).Reserve()
	return nil
}

// warmup runs one real pass on a scratch sequence and removes it, so the
// first request does not pay for first-use costs (thread start, buffer
// placement). It is not counted in Stats.
func (e *Engine) warmup() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	id, err := e.allocLocked()
	if err != nil {
		return err
	}
	defer e.freeLocked(id)
	j := &job{ctx: nil, done: make(chan struct{}), started: true}
	toks := make([]int32, min(8, e.opts.BatchSize))
	if e.tok.vocab.BOS >= 0 {
		toks[0] = e.tok.vocab.BOS
	}
	r := &reqState{job: j, req: EvalRequest{Seq: id, Tokens: toks}}
	for _, t := range toks {
		r.inputs = append(r.inputs, &input.Input{Token: t})
	}
	r.text = make([]bool, len(toks))
	j.reqs, j.pending = []*reqState{r}, 1
	e.seqs[id].busy = true
	b, err := e.buildLocked([]*job{j})
	if err != nil {
		return err
	}
	if _, err := b.compute(); err != nil {
		return err
	}
	e.seqs[id].busy = false
	e.seqs[id].valid = len(toks)
	return nil
}
