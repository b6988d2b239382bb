package train

import (
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Options configure Train.
type Options struct {
	Steps int     // optimiser steps
	Batch int     // sequences per step (gradients summed)
	LR    float64 // peak learning rate (Adam); 0: 3e-3
	// Clip bounds the global norm of a step's gradient (scaled down to it
	// when larger); 0: DefaultClip, negative: no clipping.
	Clip      float64
	Warmup    int    // steps of linear warm-up; 0: Steps/20
	Seed      uint64 // data order (the weights' seed is NewParams')
	EvalEvery int    // steps between held-out evaluations; 0: Steps/10
	// Seq is the positions of the training graph: longer examples are
	// left out (counted in Result.Skipped).
	Seq int
	// Pack is the most training examples one sequence holds (0 or 1: one):
	// examples of one scene whose prompts share their first tokens (the
	// state-first compact prompt's state, decoder.PromptOptions.StateFirst)
	// are packed on one copy of those tokens, each continuing in a branch
	// of its own that sees the shared tokens and its own (pack), up to Seq
	// positions. Each example's loss and gradient are those it has alone;
	// a step then covers several examples for little more than one's cost.
	// The held-out loss is always on single examples.
	Pack int
	// Checkpoint is a file written every EvalEvery steps and at the end;
	// with Resume, training continues from it. "" writes none.
	Checkpoint string
	Resume     bool
	// Workers is how many examples of a step (and of the held-out
	// evaluation) are evaluated at once, each on a graph of its own; 0 or
	// 1: one at a time. The gradients are summed in example order as one
	// worker sums them, so every worker count trains bit-identical weights.
	Workers int
	// GraphMemory bounds the memory of the training graphs kept between
	// examples, in bytes as graphBytes estimates it (0: no bound). Before a
	// graph is built, the least recently used graphs no worker holds are
	// dropped until the new one fits (the one a worker needs is built even
	// when it alone passes the bound). A graph holds no state between
	// examples, so the bound changes no bit of the weights, only how often
	// graphs are rebuilt.
	GraphMemory int64
	// Progress is called after every step (nil: none).
	Progress func(Progress)
	// Snapshot is called after every held-out evaluation, when the
	// checkpoint is written (nil: none): Run writes the GGUF there, so a
	// long run's model can be tried before it ends.
	Snapshot func() error
	// Rotate, when above 0 and below the number of training sequences
	// RotateMatch selects, holds only Rotate of those sequences in each
	// epoch, taken in turn (epoch e holds the Rotate after epoch e-1's,
	// wrapping around): a large pool of one kind (generated Blocksworld
	// problems) is all seen over the epochs while its share of each epoch
	// stays that of Rotate sequences. 0, or a pool no larger: every
	// sequence in every epoch (the data order is then as without it).
	Rotate int
	// RotateMatch selects the rotated sequences by the ID of their first
	// example (nil: none).
	RotateMatch func(id string) bool
	// BLAS is the matrix products' implementation ("" or BLASGonum: gonum's,
	// the same bits on every machine; BLASOpenBLAS: about 3 times faster
	// per core, see BLASOpenBLAS). It is gorgonia's process-wide setting,
	// held for the run, so two runs in one process must agree on it.
	BLAS BLAS
}

// Progress is the state of a running Train.
type Progress struct {
	Step, Steps int
	Loss        float64 // the step's mean loss per plan token
	HeldOut     float64 // the last held-out loss (NaN before the first)
}

// Point is one point of a loss curve.
type Point struct {
	Step int
	Loss float64
}

// Result is what Train did.
type Result struct {
	Train, HeldOut []Point
	Skipped        int // examples longer than Options.Seq
	// Sequences are the training sequences the examples make (fewer than
	// the examples when Options.Pack packs them).
	Sequences int
}

// checkpoint is the state Train resumes from.
type checkpoint struct {
	Config  Config
	Names   []string
	Data    [][]float32
	M, V    [][]float32
	Step    int
	Train   []Point
	HeldOut []Point
}

// adam is the optimiser's state, one moment pair per parameter.
type adam struct {
	m, v [][]float32
	t    int
}

func newAdam(p *Params) *adam {
	a := &adam{}
	for _, q := range p.List {
		a.m = append(a.m, make([]float32, len(q.Data)))
		a.v = append(a.v, make([]float32, len(q.Data)))
	}
	return a
}

// step applies one Adam update with gradient grads (same order as p.List).
func (a *adam) step(p *Params, grads [][]float32, lr float64) {
	const b1, b2, e = 0.9, 0.95, 1e-8
	a.t++
	c1 := 1 - math.Pow(b1, float64(a.t))
	c2 := 1 - math.Pow(b2, float64(a.t))
	for i, q := range p.List {
		m, v, g := a.m[i], a.v[i], grads[i]
		for j := range q.Data {
			gj := float64(g[j])
			mj := b1*float64(m[j]) + (1-b1)*gj
			vj := b2*float64(v[j]) + (1-b2)*gj*gj
			m[j], v[j] = float32(mj), float32(vj)
			q.Data[j] -= float32(lr * (mj / c1) / (math.Sqrt(vj/c2) + e))
		}
	}
}

// DefaultClip is the gradient norm Train clips to by default: without it
// the 128-wide prior's held-out loss jumped from 0.6 to 3.1 nats at a peak
// learning rate of 1e-3 (batch 4).
const DefaultClip = 1.0

// clipGrads scales grads down to a global norm of at most clip and returns
// their norm before.
func clipGrads(grads [][]float32, clip float64) float64 {
	sum := 0.0
	for _, g := range grads {
		for _, v := range g {
			sum += float64(v) * float64(v)
		}
	}
	norm := math.Sqrt(sum)
	if clip > 0 && norm > clip {
		f := float32(clip / norm)
		for _, g := range grads {
			for j := range g {
				g[j] *= f
			}
		}
	}
	return norm
}

// bucket rounds the training graphs' positions up to a multiple of it.
const bucket = 128

// runner evaluates the training graph on one example at a time.
type runner struct {
	p      *Params
	gr     *graph
	vm     G.VM
	rows   int
	x, sel []float32
	target []float32
	allow  []float32
	gx     *G.Node            // the loss's gradient with respect to x
	grad   map[*Param]*G.Node // and to each parameter
	bytes  int64              // graphBytes of gr's graph
}

func newRunner(p *Params, seq, rows int) (*runner, error) {
	gr, err := newGraph(p, seq, rows, true)
	if err != nil {
		return nil, err
	}
	wrt := append([]*G.Node{gr.x}, gr.params...)
	gs, err := G.Grad(gr.loss, wrt...)
	if err != nil {
		return nil, fmt.Errorf("train: gradients: %w", err)
	}
	r := &runner{p: p, gr: gr, rows: rows, vm: G.NewTapeMachine(gr.g),
		sel: make([]float32, rows*seq), target: make([]float32, rows*p.Config.Vocab), allow: make([]float32, rows*p.Config.Vocab),
		gx: gs[0], grad: map[*Param]*G.Node{}}
	for i, n := range gr.params {
		for q, m := range gr.byParam {
			if m == n {
				r.grad[q] = gs[i+1]
			}
		}
	}
	return r, nil
}

func (r *runner) close() { r.vm.Close() }

// runnerPool holds one training graph per length bucket, built on first
// need and lent to one worker at a time: a worker that needs a bucket whose
// graph is lent waits for it. So several workers take the memory of one
// (a graph of the longest packed sequences holds gigabytes, and two per
// bucket passed 24 GiB), and run at once while their examples' buckets
// differ. With a memory bound (Options.GraphMemory) the least recently
// used graphs are dropped to make room: one graph's attention memory grows
// with the square of its positions, so the sum over every bucket grows
// with the cube of the longest example's.
type runnerPool struct {
	p     *Params
	rows  int
	limit int64 // bytes; 0: no bound

	mu      sync.Mutex
	changed *sync.Cond      // a graph came back or was built
	graphs  map[int]*runner // by positions
	lent    map[int]bool    // graphs lent now, and buckets being built
	used    map[int]int64   // by positions: the tick of the last loan
	tick    int64
	bytes   int64 // graphBytes of the graphs kept
	// largest is the positions and bytes of the largest graph built, to
	// estimate a graph before it is built.
	largestSeq   int
	largestBytes int64
	// building serialises graph construction (gorgonia's graph building
	// is not safe to run concurrently).
	building sync.Mutex
}

func newRunnerPool(p *Params, rows int, limit int64) *runnerPool {
	pl := &runnerPool{p: p, rows: rows, limit: limit, graphs: map[int]*runner{}, lent: map[int]bool{}, used: map[int]int64{}}
	pl.changed = sync.NewCond(&pl.mu)
	return pl
}

// graphBytes estimates the memory of a training graph: every node's value
// (the forward pass's and the gradients') as float32.
func graphBytes(g *G.ExprGraph) int64 {
	var n int64
	for _, x := range g.AllNodes() {
		n += int64(max(1, x.Shape().TotalSize())) * 4
	}
	return n
}

// estimate is the bytes a graph of seq positions will take: the largest
// graph built so far scaled by the square of the positions (attention's
// share, an overestimate for the rest), or 0 before any was built.
func (pl *runnerPool) estimate(seq int) int64 {
	if pl.largestSeq == 0 {
		return 0
	}
	f := float64(seq) / float64(pl.largestSeq)
	return int64(float64(pl.largestBytes) * f * f)
}

// evict drops the least recently used graphs no worker holds until need
// more bytes fit under the bound. pl.mu is held.
func (pl *runnerPool) evict(need int64) {
	if pl.limit <= 0 {
		return
	}
	for pl.bytes+need > pl.limit {
		victim, oldest := -1, int64(math.MaxInt64)
		for seq := range pl.graphs {
			if !pl.lent[seq] && pl.used[seq] < oldest {
				victim, oldest = seq, pl.used[seq]
			}
		}
		if victim < 0 {
			return
		}
		r := pl.graphs[victim]
		delete(pl.graphs, victim)
		pl.bytes -= r.bytes
		r.close()
	}
}

// get lends the graph of seq positions, building it on first need (or
// again after evict dropped it), or waits while it is lent.
func (pl *runnerPool) get(seq int) (*runner, error) {
	pl.mu.Lock()
	for pl.lent[seq] {
		pl.changed.Wait()
	}
	pl.lent[seq] = true
	pl.tick++
	pl.used[seq] = pl.tick
	if r := pl.graphs[seq]; r != nil {
		pl.mu.Unlock()
		return r, nil
	}
	pl.evict(pl.estimate(seq))
	pl.mu.Unlock()
	pl.building.Lock()
	r, err := newRunner(pl.p, seq, pl.rows)
	pl.building.Unlock()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if err != nil {
		pl.lent[seq] = false
		pl.changed.Broadcast()
		return nil, err
	}
	r.bytes = graphBytes(r.gr.g)
	if r.bytes > pl.largestBytes {
		pl.largestSeq, pl.largestBytes = seq, r.bytes
	}
	pl.graphs[seq] = r
	pl.bytes += r.bytes
	return r, nil
}

// put returns the graph of seq positions get lent.
func (pl *runnerPool) put(seq int) {
	pl.mu.Lock()
	pl.lent[seq] = false
	pl.changed.Broadcast()
	pl.mu.Unlock()
}

// close frees every graph.
func (pl *runnerPool) close() {
	for _, r := range pl.graphs {
		r.close()
	}
}

// sync copies the parameters' current values into the graph.
func (r *runner) sync() {
	for q, n := range r.gr.byParam {
		copy(n.Value().Data().([]float32), q.Data)
	}
}

// exOut holds the gradients of one example, kept apart so that the
// examples of a step can run at once and still be summed in order.
type exOut struct {
	grads  [][]float32 // per parameter (p.List order); has[i] false: none
	has    []bool
	gx     []float32 // the loss's gradient with respect to the gathered input
	tokens []int32
}

func newExOut(p *Params) *exOut {
	o := &exOut{grads: make([][]float32, len(p.List)), has: make([]bool, len(p.List))}
	for i, q := range p.List {
		o.grads[i] = make([]float32, len(q.Data))
	}
	return o
}

// addTo adds o's gradients to grads: parameter by parameter, then the
// embedding rows of o's tokens in position order (the embedding is the
// first parameter), the order every worker count shares.
func (o *exOut) addTo(grads [][]float32, dim int) {
	for i, g := range o.grads {
		if !o.has[i] {
			continue
		}
		for j, v := range g {
			grads[i][j] += v
		}
	}
	emb := grads[0]
	for i, t := range o.tokens {
		row := emb[int(t)*dim : (int(t)+1)*dim]
		for j := range row {
			row[j] += o.gx[i*dim+j]
		}
	}
}

// run computes the loss of it (its rows weighted by w each) and, when out
// is not nil, stores its gradients there (exOut.addTo adds them up). It
// returns the summed loss and the number of rows.
func (r *runner) run(it item, w float32, out *exOut) (float64, int, error) {
	c := r.p.Config
	seq := r.gr.seq
	if len(it.tokens) > seq || len(it.rows) > r.rows {
		return 0, 0, fmt.Errorf("train: %s has %d tokens and %d rows, the graph %d and %d", it.id, len(it.tokens), len(it.rows), seq, r.rows)
	}
	clear(r.sel)
	clear(r.target)
	clear(r.allow)
	for n, row := range it.rows {
		r.sel[n*seq+row.at] = 1
		r.target[n*c.Vocab+int(row.target)] = w
		if row.allowed != nil {
			a := r.allow[n*c.Vocab : (n+1)*c.Vocab]
			for j := range a {
				a[j] = -1e9
			}
			for _, t := range row.allowed {
				a[t] = 0
			}
		}
	}
	r.gr.setLayout(it.pos, it.branch)
	hd := c.headDim()
	x := gather(r.p, it.tokens, seq)
	for _, in := range []struct {
		node *G.Node
		data []float32
		rows int
		cols int
	}{{r.gr.x, x, seq, c.Dim}, {r.gr.sel, r.sel, r.rows, seq}, {r.gr.target, r.target, r.rows, c.Vocab}, {r.gr.allow, r.allow, r.rows, c.Vocab},
		{r.gr.mask, r.gr.maskData, seq, seq}, {r.gr.cosK, r.gr.cosKData, seq, hd}, {r.gr.sinK, r.gr.sinKData, seq, hd},
		{r.gr.cosQ, r.gr.cosQData, seq, hd}, {r.gr.sinQ, r.gr.sinQData, seq, hd}} {
		if err := G.Let(in.node, tensor.New(tensor.WithShape(in.rows, in.cols), tensor.WithBacking(in.data))); err != nil {
			return 0, 0, fmt.Errorf("train: %w", err)
		}
	}
	defer r.vm.Reset()
	if err := r.vm.RunAll(); err != nil {
		return 0, 0, fmt.Errorf("train: %s: %w", it.id, err)
	}
	loss := float64(r.gr.loss.Value().Data().(float32))
	if out == nil {
		return loss, len(it.rows), nil
	}
	for i, q := range r.p.List {
		gn, ok := r.grad[q]
		out.has[i] = ok // not for the untied embedding: its gradient is only x's
		if ok {
			copy(out.grads[i], gn.Value().Data().([]float32))
		}
	}
	gd := r.gx.Value().Data().([]float32)
	out.gx = append(out.gx[:0], gd[:len(it.tokens)*c.Dim]...)
	out.tokens = it.tokens
	return loss, len(it.rows), nil
}

// Train trains p on train (held out: held) and returns the loss curves.
// The same parameters, examples and options give the same weights. When
// ctx is cancelled it stops after the running step, writes the checkpoint
// (so --resume continues from there) and returns ctx's error.
func Train(ctx context.Context, p *Params, train, held []Example, o Options) (*Result, error) {
	if o.Steps <= 0 || o.Batch <= 0 || o.Seq <= 0 {
		return nil, fmt.Errorf("train: steps %d, batch %d and sequence length %d must be positive", o.Steps, o.Batch, o.Seq)
	}
	if p.List[0].Name != embedName() {
		return nil, errors.New("train: the embedding must be the first parameter")
	}
	if o.LR == 0 {
		o.LR = 3e-3
	}
	if o.Clip == 0 {
		o.Clip = DefaultClip
	}
	if o.Warmup == 0 {
		o.Warmup = max(1, o.Steps/20)
	}
	if o.EvalEvery == 0 {
		o.EvalEvery = max(1, o.Steps/10)
	}
	restore, err := useBLAS(o.BLAS)
	if err != nil {
		return nil, err
	}
	defer restore()
	res := &Result{}
	fit := func(xs []Example) []Example {
		var out []Example
		for _, x := range xs {
			if len(x.Tokens) <= o.Seq && x.PlanStart > 0 && x.PlanStart < len(x.Tokens) {
				out = append(out, x)
			} else {
				res.Skipped++
			}
		}
		return out
	}
	train, held = fit(train), fit(held)
	if len(train) == 0 {
		return nil, fmt.Errorf("train: no example fits %d positions", o.Seq)
	}
	items := pack(train, o.Seq, o.Pack)
	res.Sequences = len(items)
	ep := newEpochs(items, o.Rotate, o.RotateMatch)
	heldItems := make([]item, len(held))
	for i, x := range held {
		heldItems[i] = itemOf(x)
	}
	rows := 0
	for _, it := range append(append([]item(nil), items...), heldItems...) {
		rows = max(rows, len(it.rows))
	}
	opt := newAdam(p)
	start := 0
	if o.Resume && o.Checkpoint != "" {
		ck, err := readCheckpoint(o.Checkpoint)
		if err != nil {
			return nil, fmt.Errorf("train: resuming: %w", err)
		}
		if err := ck.restore(p, opt); err != nil {
			return nil, fmt.Errorf("train: resuming from %s: %w", o.Checkpoint, err)
		}
		start, res.Train, res.HeldOut = ck.Step, ck.Train, ck.HeldOut
	}
	// One graph per length bucket (attention costs the square of the
	// positions, and most prompts are far shorter than the longest), in a
	// pool the workers borrow from (runnerPool). A graph holds no state
	// between examples (run clears its inputs, sync copies the
	// parameters), so which worker runs an example does not change a bit
	// of the result.
	workers := max(1, min(o.Workers, max(o.Batch, len(held))))
	pool := newRunnerPool(p, rows, o.GraphMemory)
	defer pool.close()
	run := func(it item, wt float32, out *exOut) (float64, int, error) {
		n := min(o.Seq, (len(it.tokens)+bucket-1)/bucket*bucket)
		r, err := pool.get(n)
		if err != nil {
			return 0, 0, err
		}
		defer pool.put(n)
		r.sync()
		return r.run(it, wt, out)
	}
	// forEach calls f(i) for every i < n, worker w taking i = w,
	// w+workers, ... in turn; it returns the first worker's error.
	forEach := func(n int, f func(i int) error) error {
		errs := make([]error, workers)
		var wg sync.WaitGroup
		for w := range min(workers, n) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += workers {
					if err := f(i); err != nil {
						errs[w] = err
						return
					}
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}

	heldLoss, heldN := make([]float64, len(held)), make([]int, len(held))
	heldOut := func() (float64, error) {
		err := forEach(len(held), func(i int) (err error) {
			heldLoss[i], heldN[i], err = run(heldItems[i], 1, nil)
			return err
		})
		if err != nil {
			return 0, err
		}
		sum, n := 0.0, 0
		for i := range held {
			sum += heldLoss[i]
			n += heldN[i]
		}
		if n == 0 {
			return math.NaN(), nil
		}
		return sum / float64(n), nil
	}
	last := math.NaN()
	if len(res.HeldOut) > 0 {
		last = res.HeldOut[len(res.HeldOut)-1].Loss
	}
	grads := make([][]float32, len(p.List))
	for i, q := range p.List {
		grads[i] = make([]float32, len(q.Data))
	}
	outs, losses := make([]*exOut, o.Batch), make([]float64, o.Batch)
	for b := range outs {
		outs[b] = newExOut(p)
	}
	for step := start; step < o.Steps; step++ {
		if err := ctx.Err(); err != nil {
			if o.Checkpoint != "" && step > start {
				if werr := writeCheckpoint(o.Checkpoint, p, opt, step, res); werr != nil {
					return nil, werr
				}
			}
			return res, fmt.Errorf("train: stopped at step %d: %w", step, err)
		}
		// The batch of a step depends on the seed and the step only, so a
		// resumed run sees the examples a straight one would.
		batch := make([]item, o.Batch)
		for b := range batch {
			k := step*o.Batch + b
			epoch, at := k/ep.size, k%ep.size
			perm := rand.New(rand.NewPCG(o.Seed, uint64(epoch))).Perm(ep.size)
			batch[b] = ep.at(epoch, perm[at])
		}
		tokens := 0
		for _, it := range batch {
			tokens += len(it.rows)
		}
		for _, g := range grads {
			clear(g)
		}
		err := forEach(len(batch), func(b int) (err error) {
			losses[b], _, err = run(batch[b], 1/float32(tokens), outs[b])
			return err
		})
		if err != nil {
			return nil, err
		}
		sum := 0.0
		for b := range batch {
			outs[b].addTo(grads, p.Config.Dim)
			sum += losses[b]
		}
		clipGrads(grads, o.Clip)
		opt.step(p, grads, lr(o, step))
		res.Train = append(res.Train, Point{step + 1, sum})
		if (step+1)%o.EvalEvery == 0 || step+1 == o.Steps {
			h, err := heldOut()
			if err != nil {
				return nil, err
			}
			last = h
			res.HeldOut = append(res.HeldOut, Point{step + 1, last})
			if o.Checkpoint != "" {
				if err := writeCheckpoint(o.Checkpoint, p, opt, step+1, res); err != nil {
					return nil, err
				}
			}
			if o.Snapshot != nil {
				if err := o.Snapshot(); err != nil {
					return nil, err
				}
			}
		}
		if o.Progress != nil {
			o.Progress(Progress{Step: step + 1, Steps: o.Steps, Loss: sum, HeldOut: last})
		}
	}
	return res, nil
}

// lr is the learning rate of a step: linear warm-up, then a cosine decay
// to a tenth.
func lr(o Options, step int) float64 {
	if step < o.Warmup {
		return o.LR * float64(step+1) / float64(o.Warmup)
	}
	f := float64(step-o.Warmup) / float64(max(1, o.Steps-o.Warmup))
	return o.LR * (0.1 + 0.9*0.5*(1+math.Cos(math.Pi*f)))
}

func writeCheckpoint(path string, p *Params, a *adam, step int, res *Result) error {
	ck := checkpoint{Config: p.Config, M: a.m, V: a.v, Step: step, Train: res.Train, HeldOut: res.HeldOut}
	for _, q := range p.List {
		ck.Names = append(ck.Names, q.Name)
		ck.Data = append(ck.Data, q.Data)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".checkpoint-*")
	if err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	if err := gob.NewEncoder(tmp).Encode(ck); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	return nil
}

// readCheckpoint reads the checkpoint at path.
func readCheckpoint(path string) (*checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ck checkpoint
	if err := gob.NewDecoder(f).Decode(&ck); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &ck, nil
}

// check reports whether the checkpoint holds weights of p's model: the
// same shape, parameter by parameter.
func (ck *checkpoint) check(p *Params) error {
	if ck.Config != p.Config || len(ck.Names) != len(p.List) || len(ck.Data) != len(p.List) {
		return fmt.Errorf("the checkpoint is of another model (%+v)", ck.Config)
	}
	for i, q := range p.List {
		if ck.Names[i] != q.Name || len(ck.Data[i]) != len(q.Data) {
			return fmt.Errorf("the checkpoint's %s does not match the model's", ck.Names[i])
		}
	}
	return nil
}

// restore loads the checkpoint's weights and optimiser state into p and a.
func (ck *checkpoint) restore(p *Params, a *adam) error {
	if err := ck.check(p); err != nil {
		return err
	}
	if len(ck.M) != len(p.List) || len(ck.V) != len(p.List) {
		return fmt.Errorf("the checkpoint's optimiser state does not match the model")
	}
	for i, q := range p.List {
		if len(ck.M[i]) != len(q.Data) || len(ck.V[i]) != len(q.Data) {
			return fmt.Errorf("the checkpoint's optimiser state for %s does not match the model", q.Name)
		}
	}
	for i, q := range p.List {
		copy(q.Data, ck.Data[i])
	}
	a.m, a.v, a.t = ck.M, ck.V, ck.Step
	return nil
}

// AverageCheckpoints sets p's weights to the mean of its own and those of
// the checkpoints at paths (checkpoint averaging: the weights of several
// points along one run, e.g. the ends of DAgger's rounds, averaged
// element by element). Each checkpoint must be of p's model; on an error
// p is left as it was.
func AverageCheckpoints(p *Params, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	sum := make([][]float64, len(p.List))
	for i, q := range p.List {
		sum[i] = make([]float64, len(q.Data))
		for j, v := range q.Data {
			sum[i][j] = float64(v)
		}
	}
	for _, path := range paths {
		ck, err := readCheckpoint(path)
		if err != nil {
			return fmt.Errorf("train: averaging: %w", err)
		}
		if err := ck.check(p); err != nil {
			return fmt.Errorf("train: averaging %s: %w", path, err)
		}
		for i := range p.List {
			for j, v := range ck.Data[i] {
				sum[i][j] += float64(v)
			}
		}
	}
	n := float64(len(paths) + 1)
	for i, q := range p.List {
		for j := range q.Data {
			q.Data[j] = float32(sum[i][j] / n)
		}
	}
	return nil
}

// epochs says which training sequences an epoch holds: every sequence,
// or (Options.Rotate) the fixed ones and a turn of the rotated pool.
type epochs struct {
	fixed, pool []item
	turn        int // rotated sequences per epoch (0: none rotate)
	size        int // sequences per epoch
}

// newEpochs splits items into fixed sequences and the pool match selects,
// when rotating (turn above 0 and below the pool's size) changes anything.
func newEpochs(items []item, turn int, match func(id string) bool) epochs {
	e := epochs{fixed: items, size: len(items)}
	if turn <= 0 || match == nil {
		return e
	}
	var fixed, pool []item
	for _, it := range items {
		if match(it.id) {
			pool = append(pool, it)
		} else {
			fixed = append(fixed, it)
		}
	}
	if len(pool) <= turn {
		return e
	}
	return epochs{fixed: fixed, pool: pool, turn: turn, size: len(fixed) + turn}
}

// at returns the i-th sequence (0 <= i < size) of epoch n: the fixed
// sequences in their order, then epoch n's turn of the pool.
func (e epochs) at(n, i int) item {
	if i < len(e.fixed) {
		return e.fixed[i]
	}
	return e.pool[(n*e.turn+i-len(e.fixed))%len(e.pool)]
}
