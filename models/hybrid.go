package models

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/nesy-dev/nesy/models/ggmlop"
	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/ml/nn"
	"github.com/ollama/ollama/model"
	"github.com/ollama/ollama/model/input"
	"github.com/ollama/ollama/model/models/qwen3next"
	"github.com/ollama/ollama/model/models/qwen3vl"
)

// hybridForward builds the graph of a pass over several sequences for
// Qwen3.5 networks (Ollama's qwen3next model, registered as qwen35 and
// qwen35moe), which Ollama's own Model.Forward cannot run at v0.17.4:
//
// FullAttention.Forward reads the pass's sequence layout from the cache
// (k positions for each of n sequences) and checks its input against it,
// treating a 3-d input [hidden, k, n] as laid out by sequence and anything
// else as 2-d; but it tells the two apart by Dim(2), which ggml reports as 1
// (not 0) for a 2-d tensor. Its input is always 2-d (the delta-net layers
// before it return [hidden, k*n]), so every pass with n > 1 fails with
// qwen3next.ErrUnsupportedBatchLayout, while the delta-net layers and the
// recurrent cache support it.
//
// hybridForward is Model.Forward for text passes with two differences: a
// full attention layer's normalised input is reshaped to [hidden, k, n]
// before the operator (the residual stays 2-d), and passes of a few
// positions per sequence (up to passGraph.step) run the delta-net's
// recurrence with deltaStep instead of the model's one-token step or its
// chunked form (see there for why). Everything else (layers, norms, MLPs,
// projections, attention, the chunked delta-net of longer passes) is the
// model's own.
//
// The cache holds the state of each delta-net layer deltaStep can run
// key-major: the transpose of the model's own layout, so that deltaStep's
// products read it as it lies (the model's layout cost deltaStep a
// transposed copy of every state at every position: about 10% of a
// 16-sequence step). A layer the model
// runs itself (a long pass) gets its states transposed to its layout
// before and back after; so every pass of an engine with a
// hybridForward must go through forward, which the engine ensures.
type hybridForward struct {
	m *qwen3next.Model
	// opts is the model's options as loaded: each pass starts from them,
	// which clears the chunk masks the delta-net layers cache in the
	// options (tensors of the previous pass's closed context; Model.Forward
	// clears them the same way).
	opts qwen3next.Options
	eps  float32
	// mrope holds the multi-axis RoPE sections (nil: plain positions).
	mrope []int32
	// merge is the vision tower's spatial merge (patches per token side)
	// for a model loaded with images under multi-axis RoPE, whose image
	// tokens shift the positions after them (see ropePositions); 0 when
	// positions are logical.
	merge int
	// rope are the current pass's rotary time positions where they differ
	// from the logical ones (set by the engine around each pass; nil:
	// they do not).
	rope  []int32
	delta deltaDims
	// ragged says deltaStep runs every delta-net layer, so the engine may
	// plan padded passes (see padded).
	ragged bool
	// rule is how deltaStep runs the convolution and recurrence (see
	// chooseRule): ggml's general operators (ruleGraph), ggml's RWKV-7
	// operator on a padded layout (ruleWKV, deltaWKV), or nesy's own CPU
	// kernels on the own positions only (ruleKernel, deltaKernel).
	rule deltaRule
	// lens is the current pass's positions per sequence, I32 [n] (see
	// lensOf); forward clears it.
	lens ml.Tensor
	// ones is the current pass's tensor of ones [dV, hV, positions] (see
	// onesOf); forward clears it. onesHost holds its values, kept from
	// pass to pass (never written after it is filled).
	ones     ml.Tensor
	onesHost []float32
}

// padded is the layout of a padded pass: its n sequences, longest first,
// each placed as pad positions, its own inputs (lengths[s] of them)
// followed by copies of the last. The matrix products, norms and MLPs run
// on the own positions only ([hidden, T], T the sum of lengths). The
// attention operator needs the pass's [hidden, pad, n] layout: its input
// rows are scattered into it, its output rows gathered back, and the
// pads' keys and values are removed from the cache after the pass. The
// delta-net recurrence runs each position on the sequences that have it
// (a prefix, as they come longest first), so a pad is never computed
// there; the convolution state is gathered from each sequence's last own
// positions.
type padded struct {
	pad     int
	lengths []int32   // own positions per sequence, non-increasing
	active  []int     // active[k]: the sequences with a position k (a prefix)
	inputs  ml.Tensor // the own positions' tokens [T]
	real    ml.Tensor // the own positions' places in the pass [T]
	scatter ml.Tensor // the own row each place of the pass takes [pad*n]
	// valid is 1 at each own position's place in the pass and 0 at the
	// pads [pad*n] (deltaWKV's pads are steps that change nothing); set
	// only with the operator (ruleWKV), active and order only with the
	// graph (ruleGraph, recurrenceOrder); the kernels (ruleKernel) need
	// neither: they take lengths.
	valid ml.Tensor
	// order gives each own position (by sequence, then position) its
	// column in the recurrence's outputs, which come by position, then
	// sequence [T].
	order ml.Tensor
}

// deltaDims are the gated delta-net's sizes, from the same metadata keys
// as qwen3next.New.
type deltaDims struct {
	dK, hK    int // key head size and key heads
	dV, hV    int // value head size and value heads
	convK     int // convolution kernel
	reordered bool
}

// newHybridForward returns the hybridForward of a Qwen3.5 model,
// or nil for any other model; rule is Options.DeltaRule and onGPU says
// some layer runs on a GPU (see useWKV). The engine runs every pass of the
// model through it, image passes of a model with its vision tower
// included (their vision embeddings placed as the model's Forward places
// them).
func newHybridForward(m model.Model, rule string, onGPU bool) *hybridForward {
	qm, ok := m.(*qwen3next.Model)
	if !ok || qm.Options == nil {
		return nil
	}
	if _, ok := qm.Cache.(*qwen3next.HybridCache); !ok {
		return nil
	}
	c := m.Backend().Config()
	h := &hybridForward{m: qm, opts: *qm.Options, eps: c.Float("attention.layer_norm_rms_epsilon")}
	h.delta = deltaDims{
		dK: int(c.Uint("ssm.state_size")), hK: int(c.Uint("ssm.group_count")), hV: int(c.Uint("ssm.time_step_rank")),
		convK: int(c.Uint("ssm.conv_kernel")), reordered: c.Bool("ssm.v_head_reordered", false),
	}
	if h.delta.hV > 0 {
		h.delta.dV = int(c.Uint("ssm.inner_size")) / h.delta.hV
	}
	// The same keys, in the same order, as qwen3next.New.
	for _, key := range []string{"mrope_sections", "rope.mrope_section", "rope.dimension_sections"} {
		if h.mrope = c.Ints(key, nil); len(h.mrope) > 0 {
			break
		}
	}
	if qm.Vision != nil && len(h.mrope) > 0 {
		h.merge = int(c.Uint("vision.spatial_merge_size", 2))
		if h.merge == 0 {
			h.merge = 2 // as qwen3next.New
		}
	}
	h.ragged = true
	for _, l := range qm.Layers {
		if g, ok := l.Operator.(*qwen3next.GatedDeltaNet); ok && !h.stepSupported(g) {
			h.ragged = false
		}
	}
	// The kernels take convolutions of up to ggmlop.MaxConvKernel (their
	// weights F32, as convWeight gives them).
	kernels := h.ragged && h.delta.convK <= ggmlop.MaxConvKernel
	for _, l := range qm.Layers {
		if g, ok := l.Operator.(*qwen3next.GatedDeltaNet); ok && (g.SSMConv1D == nil || g.SSMConv1D.Weight == nil) {
			kernels = false
		}
	}
	h.rule = chooseRule(rule, onGPU, h.ragged, kernels, h.delta.dV)
	return h
}

// deltaRule is how deltaStep runs a delta-net layer's convolution and
// recurrence (see hybridForward.rule).
type deltaRule int

const (
	ruleGraph  deltaRule = iota // ggml's general operators (deltaSteps)
	ruleWKV                     // ggml's RWKV-7 operator, padded layout (deltaWKV)
	ruleKernel                  // nesy's own CPU kernels, own positions (deltaKernel)
)

// String is the rule's Options.DeltaRule name.
func (r deltaRule) String() string {
	return [...]string{"graph", "operator", "kernel"}[r]
}

// modelConv gives a delta-net layer the model runs itself F32 convolution
// weights (see convWeight) until restore is called.
func modelConv(ctx ml.Context, l *qwen3next.Layer) (restore func()) {
	g, ok := l.Operator.(*qwen3next.GatedDeltaNet)
	if !ok || g.SSMConv1D == nil || g.SSMConv1D.Weight == nil || g.SSMConv1D.Weight.DType() == ml.DTypeF32 {
		return func() {}
	}
	old := g.SSMConv1D.Weight
	g.SSMConv1D.Weight = convWeight(ctx, g)
	return func() { g.SSMConv1D.Weight = old }
}

// convWeight is a delta-net layer's convolution weights as F32: ggml's SSM
// convolution (CPU and CUDA) and nesy's kernels take no other type, and
// while converters keep these weights F32, a file that stores them as F16
// or BF16 would abort the process inside ggml; those are cast in the pass
// (kernel x channels values a layer).
func convWeight(ctx ml.Context, g *qwen3next.GatedDeltaNet) ml.Tensor {
	w := g.SSMConv1D.Weight
	if w.DType() != ml.DTypeF32 {
		w = w.Cast(ctx, ml.DTypeF32)
	}
	return w
}

// oneOp says the recurrence is one graph node whatever the positions (see
// passGraph.wkv).
func (r deltaRule) oneOp() bool { return r != ruleGraph }

// chooseRule decides Options.DeltaRule for a model with value heads of d
// whose delta-net layers deltaStep runs (ragged; kernels: its kernels too):
// "graph" always the general operators; "kernel" nesy's kernels on the CPU
// (where a layer runs on a GPU: the graph); "operator" ggml's operator
// wherever its kernel takes d (ggml's CPU kernel steps through a head in
// four SIMD widths, so a multiple of 64 covers AVX-512's; its CUDA kernel
// takes heads of 64 and 128 only and asserts on others after claiming the
// operator), else the graph; "auto" the kernels on the CPU and the graph
// on a GPU. The kernels run any head size and no pads (see deltaKernel),
// so on the CPU they replace the operator.
func chooseRule(rule string, onGPU, ragged, kernels bool, d int) deltaRule {
	switch {
	case !ragged || rule == "graph":
		return ruleGraph
	case rule == "operator" && onGPU:
		if d == 64 || d == 128 {
			return ruleWKV
		}
		return ruleGraph
	case rule == "operator":
		if d%64 == 0 {
			return ruleWKV
		}
		return ruleGraph
	case onGPU || !kernels: // auto and kernel
		return ruleGraph
	default:
		return ruleKernel
	}
}

// positions is the model's position input: the positions, or for
// multi-axis RoPE the time, height and width axes (all the rotary time
// position for text, see rope) and a zero fourth axis; an image's tokens
// take their row and column in the merged patch grid on the height and
// width axes, as the model's Forward places them.
func (h *hybridForward) positions(ctx ml.Context, b input.Batch) ml.Tensor {
	if len(h.mrope) == 0 {
		return ctx.Input().FromInts(b.Positions, len(b.Positions))
	}
	n := len(b.Positions)
	time := b.Positions
	if h.rope != nil {
		time = h.rope
	}
	p := make([]int32, 4*n)
	for axis := range 3 {
		copy(p[axis*n:], time)
	}
	if h.merge > 0 {
		for _, mi := range b.Multimodal {
			grid, ok := mi.Multimodal[0].Data.(*qwen3vl.Grid)
			if !ok {
				continue
			}
			w := max(1, grid.Width/h.merge)
			for i := range mi.Multimodal[0].Tensor.Dim(1) {
				p[n+mi.Index+i] += int32(i / w)
				p[2*n+mi.Index+i] += int32(i % w)
			}
		}
	}
	return ctx.Input().FromInts(p, len(p))
}

// visionInputs places a pass's image embeddings as the model's Forward
// does: each image's vision output over its tokens' embeddings, and its
// deepstack outputs (added after the first layers) in tensors of the
// embeddings' shape, zero elsewhere.
func visionInputs(ctx ml.Context, b input.Batch, x ml.Tensor) (ml.Tensor, []ml.Tensor) {
	x = x.Duplicate(ctx)
	var deep []ml.Tensor
	for _, mi := range b.Multimodal {
		vis := mi.Multimodal[0].Tensor
		ctx.Forward(vis.Copy(ctx, x.View(ctx, mi.Index*x.Stride(1), vis.Dim(0)*vis.Dim(1))))
		for i, mm := range mi.Multimodal[1:] {
			if i >= len(deep) {
				deep = append(deep, ctx.Input().Zeros(mm.Tensor.DType(), x.Shape()...))
			}
			ctx.Forward(mm.Tensor.Copy(ctx, deep[i].View(ctx, mi.Index*deep[i].Stride(1), mm.Tensor.Dim(0)*mm.Tensor.Dim(1))))
		}
	}
	return x, deep
}

// errLayout reports a pass that is not k positions of each of n
// sequences, laid out sequence by sequence.
var errLayout = errors.New("models: internal error: a multi-sequence pass of a recurrent model must advance every sequence by the same count, one sequence after the other")

// layout returns the pass's positions per sequence and sequence count.
func layout(seqs []int) (k, n int, err error) {
	if len(seqs) == 0 {
		return 0, 0, errLayout
	}
	k = 1
	for k < len(seqs) && seqs[k] == seqs[0] {
		k++
	}
	if len(seqs)%k != 0 {
		return 0, 0, errLayout
	}
	n = len(seqs) / k
	seen := make([]int, 0, n)
	for i := 0; i < len(seqs); i += k {
		s := seqs[i]
		if slices.Contains(seen, s) {
			return 0, 0, errLayout
		}
		seen = append(seen, s)
		for _, t := range seqs[i : i+k] {
			if t != s {
				return 0, 0, errLayout
			}
		}
	}
	return k, n, nil
}

// forward builds the graph of a pass of k positions for each of n
// sequences (the cache's StartForward has run); deltaStep runs the
// delta-net layers when k <= maxStep (or k is 1), the model's chunked
// delta-net the longer passes. The engine uses it for every pass (see
// Engine.buildForward); a pass with images (one sequence, not padded)
// gets their embeddings as the model's Forward places them (visionInputs,
// positions). With the recurrence as one operator (ruleWKV, ruleKernel)
// maxStep covers every pass.
//
// pd is the layout of a padded pass (k is then pd.pad), nil otherwise.
func (h *hybridForward) forward(ctx ml.Context, b input.Batch, k, n, maxStep int, pd *padded) (ml.Tensor, error) {
	m := h.m
	*m.Options = h.opts
	cache, ok := m.Cache.(*qwen3next.HybridCache)
	if !ok {
		return nil, fmt.Errorf("models: qwen3next cache is a %T", m.Cache)
	}
	if pd != nil && (!h.ragged || k != pd.pad || k > max(1, maxStep)) {
		return nil, errors.New("models: internal error: a padded pass the delta-net layers cannot run")
	}
	h.ones, h.lens = nil, nil
	positions := h.positions(ctx, b)
	inputs := b.Inputs
	if pd != nil {
		inputs = pd.inputs
	}
	x := m.TokenEmbedding.Forward(ctx, inputs)
	var deep []ml.Tensor // deepstack embeddings, added after the first layers
	if len(b.Multimodal) > 0 {
		if pd != nil {
			return nil, errors.New("models: internal error: a padded pass with images")
		}
		x, deep = visionInputs(ctx, b, x)
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		cache.SetLayer(i)
		var outputs ml.Tensor
		if i == len(m.Layers)-1 {
			outputs = b.Outputs
		}
		var op func(y ml.Tensor) (ml.Tensor, error)
		modelDelta := false // the model runs this delta-net layer itself
		switch o := l.Operator.(type) {
		case *qwen3next.FullAttention:
			op = func(y ml.Tensor) (ml.Tensor, error) {
				if pd == nil {
					return o.Forward(ctx, y.Reshape(ctx, y.Dim(0), k, n), positions, cache, m.Options)
				}
				ownOut, restore := projectOwnRows(ctx, o, y, pd)
				out, err := o.Forward(ctx, y.Rows(ctx, pd.scatter).Reshape(ctx, y.Dim(0), k, n), positions, cache, m.Options)
				restore()
				if err != nil {
					return nil, err
				}
				if *ownOut {
					return out, nil // the output projection took the own rows
				}
				return out.Rows(ctx, pd.real), nil
			}
		case *qwen3next.GatedDeltaNet:
			switch {
			case !h.stepSupported(o): // the model's layout, always the model's code
			case k <= max(1, maxStep):
				op = func(y ml.Tensor) (ml.Tensor, error) { return h.deltaStep(ctx, o, y, cache, i, k, n, pd) }
			default:
				modelDelta = true
			}
		}
		var err error
		switch {
		case modelDelta:
			if err = h.transposeState(ctx, cache, i); err == nil {
				restore := modelConv(ctx, l)
				x, err = l.Forward(ctx, i, x, positions, outputs, cache, m.Options)
				restore()
				if err == nil {
					err = h.transposeState(ctx, cache, i)
				}
			}
		case op == nil:
			restore := modelConv(ctx, l)
			x, err = l.Forward(ctx, i, x, positions, outputs, cache, m.Options)
			restore()
		default:
			x, err = h.layer(ctx, l, x, outputs, op)
		}
		if err != nil {
			return nil, fmt.Errorf("models: layer %d: %w", i, err)
		}
		if i < len(deep) {
			x = x.Add(ctx, deep[i])
		}
	}
	x = m.OutputNorm.Forward(ctx, x, h.eps)
	return m.Output.Forward(ctx, x), nil
}

// projectOwnRows makes the attention layer's projections of a padded pass
// skip the pads (see padded): until the returned restore is called, the
// query, key and value weights multiply the own rows (own, [hidden, T])
// and scatter the products into the pass's layout, which equals
// multiplying the scattered rows (a product is column by column), and the
// output weight multiplies the own rows of its input only, giving
// [hidden, T] in own-row order; ownOut reports whether it did. The pads'
// projections were half or more of an attention layer's arithmetic in a
// batched search step. The model's Forward runs unchanged around them (its
// RoPE, norms, gate and cache writes).
func projectOwnRows(ctx ml.Context, a *qwen3next.FullAttention, own ml.Tensor, pd *padded) (ownOut *bool, restore func()) {
	var undo []func()
	swap := func(l *nn.Linear, wrap func(ml.Tensor) ml.Tensor) {
		if l == nil || l.Weight == nil {
			return
		}
		old := l.Weight
		l.Weight = wrap(old)
		undo = append(undo, func() { l.Weight = old })
	}
	ownOut = new(bool)
	for _, l := range []*nn.Linear{a.Query, a.Key, a.Value} {
		swap(l, func(w ml.Tensor) ml.Tensor {
			return scatteredProduct{Tensor: w, own: own, scatter: pd.scatter, hidden: own.Dim(0)}
		})
	}
	swap(a.Output, func(w ml.Tensor) ml.Tensor { return ownRowsProduct{Tensor: w, real: pd.real, applied: ownOut} })
	return ownOut, func() {
		for _, f := range undo {
			f()
		}
	}
}

// scatteredProduct is a projection weight whose product with a padded
// pass's scattered input (any tensor of the input's width) is computed on
// the own rows and then scattered: W own, then the rows scatter names.
type scatteredProduct struct {
	ml.Tensor
	own, scatter ml.Tensor
	hidden       int
}

// Mulmat implements ml.Tensor.
func (w scatteredProduct) Mulmat(ctx ml.Context, t ml.Tensor) ml.Tensor {
	if t.Dim(0) != w.hidden {
		return w.Tensor.Mulmat(ctx, t)
	}
	return w.Tensor.Mulmat(ctx, w.own).Rows(ctx, w.scatter)
}

// ownRowsProduct is a projection weight that multiplies only the own rows
// (real) of its padded-pass input [in, pad*n]: [out, T] in own-row order
// instead of [out, pad*n]; applied records that it did.
type ownRowsProduct struct {
	ml.Tensor
	real    ml.Tensor
	applied *bool
}

// Mulmat implements ml.Tensor.
func (w ownRowsProduct) Mulmat(ctx ml.Context, t ml.Tensor) ml.Tensor {
	if t.Dim(2) > 1 || t.Dim(3) > 1 {
		return w.Tensor.Mulmat(ctx, t)
	}
	*w.applied = true
	return w.Tensor.Mulmat(ctx, t.Rows(ctx, w.real))
}

// layer is qwen3next.Layer.Forward with the operator replaced by op: pre-
// norm, operator, residual, post-attention norm, MLP, residual.
func (h *hybridForward) layer(ctx ml.Context, l *qwen3next.Layer, x, outputs ml.Tensor, op func(ml.Tensor) (ml.Tensor, error)) (ml.Tensor, error) {
	residual := x
	y, err := op(l.AttentionNorm.Forward(ctx, x, h.eps))
	if err != nil {
		return nil, err
	}
	if outputs != nil {
		y = y.Rows(ctx, outputs)
		residual = residual.Rows(ctx, outputs)
	}
	y = y.Add(ctx, residual)
	ffnResidual := y
	y = l.AttentionPostNorm.Forward(ctx, y, h.eps)
	y = l.MLP.Forward(ctx, y, h.m.Options)
	return y.Add(ctx, ffnResidual), nil
}

// transposeState transposes the delta-net states of the pass's sequences
// in the cache's layer (each head's d x d matrix), between deltaStep's
// key-major layout and the model's own. The states are read, transposed
// into a new tensor and written back by nodes added to the graph in that
// order, before the nodes of whatever is built next: ggml runs a graph's
// nodes in the order they were added.
func (h *hybridForward) transposeState(ctx ml.Context, cache *qwen3next.HybridCache, layer int) error {
	d, hV := h.delta.dV, h.delta.hV
	state, err := cache.DeltaState(ctx, layer, d, hV)
	if err != nil {
		return fmt.Errorf("recurrent state: %w", err)
	}
	n := state.Dim(2) // [d, d*hV, n]
	t := state.Reshape(ctx, d, d, hV, n).Permute(ctx, 1, 0, 2, 3).Contiguous(ctx, d, d*hV, n)
	cache.UpdateDeltaState(ctx, layer, t)
	return nil
}

// stepSupported says whether deltaStep can run the layer: Qwen3.5's
// separate beta and alpha projections and equal key and value head sizes.
func (h *hybridForward) stepSupported(g *qwen3next.GatedDeltaNet) bool {
	d := h.delta
	return g.SSMQKV != nil && g.SSMQKVGate != nil && g.SSMBeta != nil && g.SSMAlpha != nil && g.SSMConv1D != nil &&
		d.dK > 0 && d.dK == d.dV && d.hK > 0 && d.hV%d.hK == 0 && d.convK > 1
}

// onesOf returns the pass's tensor of ones [d, hV, t], made once per pass
// (h.ones). A product with it broadcasts a smaller tensor as Repeat4D
// would (ggml's rules: each of its dimensions divides the result's, index
// i of a dimension reads i mod its size), but on every thread: ggml's CPU
// repeat runs on one thread while the others wait, and a 16-sequence step
// broadcast the decay and the key heads of every delta-net layer that way.
func (h *hybridForward) onesOf(ctx ml.Context, d, hV, t int) ml.Tensor {
	if h.ones == nil || h.ones.Dim(0) != d || h.ones.Dim(1) != hV || h.ones.Dim(2) != t {
		if len(h.onesHost) < d*hV*t {
			h.onesHost = make([]float32, d*hV*t)
			for i := range h.onesHost {
				h.onesHost[i] = 1
			}
		}
		h.ones = ctx.Input().FromFloats(h.onesHost[:d*hV*t], d, hV, t)
	}
	return h.ones
}

// deltaStep runs k positions of a gated delta-net layer for each of n
// sequences, one position after the other within the graph: x is the
// normalised input [hidden, k*n], laid out sequence by sequence; it
// returns the layer's output [hidden, k*n] and updates the convolution and
// recurrent states in the cache.
//
// The recurrence per value head and position, with state M (d x d, stored
// key-major: the key index first, see hybridForward), decay g, step size
// beta, normalised key k, scaled query q and value v:
//
//	delta = beta (v - g M k)
//	M'    = g M + delta k^T
//	out   = M' q = g M q + delta (k . q)
//
// qwen3next's one-token step computes the same, but through products with
// tensors broadcast along the state's first dimension (one vector
// operation per element in ggml's CPU kernels) and permuted copies summed
// by rows, for every sequence: on CPU that was most of a 16-sequence
// pass; and its chunked form for longer passes pads every sequence to 64
// positions, which short multi-position passes (a fork recomputing a few
// positions) pay in full. Here M k and M q are one matrix product per head
// and sequence, read from the key-major state as it lies, the decay
// broadcasts along whole rows, the outer product is a matrix product (its
// inner size padded to 16 so ggml's blocked kernels take it) and the
// output needs no second pass over M'. The results agree with the model's
// own within float rounding; the graph grows with k (see passGraph).
//
// In a padded pass (pd not nil) x holds the own positions only; the
// projections run on them and are scattered into the pass's layout.
func (h *hybridForward) deltaStep(ctx ml.Context, g *qwen3next.GatedDeltaNet, x ml.Tensor, cache *qwen3next.HybridCache, layer, k, n int, pd *padded) (ml.Tensor, error) {
	if h.rule == ruleKernel {
		return h.deltaKernel(ctx, g, x, cache, layer, k, n, pd)
	}
	dm := h.delta
	d, hV := dm.dV, dm.hV
	keys := dm.dK * dm.hK
	qkvDim := 2*keys + d*hV

	qkv := g.SSMQKV.Forward(ctx, x)     // [qkvDim, k*n]
	z := g.SSMQKVGate.Forward(ctx, x)   // [d*hV, k*n]
	beta := g.SSMBeta.Forward(ctx, x)   // [hV, k*n]
	alpha := g.SSMAlpha.Forward(ctx, x) // [hV, k*n]
	if pd != nil {
		qkv, beta, alpha = qkv.Rows(ctx, pd.scatter), beta.Rows(ctx, pd.scatter), alpha.Rows(ctx, pd.scatter)
	}
	logDecay := alpha.Add(ctx, g.SSMDT).Softplus(ctx).Mul(ctx, g.SSMA)
	beta = beta.Sigmoid(ctx).Reshape(ctx, hV, k, n)

	// Short causal convolution over the last convK positions.
	conv, err := cache.ConvState(ctx, layer)
	if err != nil {
		return nil, fmt.Errorf("convolution state: %w", err)
	}
	in := conv.Reshape(ctx, dm.convK-1, qkvDim, n).Concat(ctx, qkv.Reshape(ctx, qkvDim, k, n).Permute(ctx, 1, 0, 2, 3), 0)
	if pd == nil {
		cache.UpdateConvState(ctx, layer, in.Slice(ctx, 0, k, k+dm.convK-1, 1))
	} else {
		cache.UpdateConvState(ctx, layer, h.convTail(ctx, in, pd, qkvDim, n))
	}
	mixed := in.SSMConv(ctx, convWeight(ctx, g)).SILU(ctx) // [qkvDim, k, n]
	// heads views the channels of mixed from off on as [d, nh, k*n], each
	// position's heads where the convolution left them (no copy: the norms
	// and products below read strided rows).
	heads := func(off, nh int) ml.Tensor {
		f := mixed.Stride(0)
		return mixed.View(ctx, off*f, d, d*f, nh, mixed.Stride(1), k*n)
	}
	// Queries and keys normalised per key head (each head's vector on its
	// own), then shared by the value heads that read it.
	q := heads(0, dm.hK).L2Norm(ctx, h.eps).Scale(ctx, 1/math.Sqrt(float64(d))).Reshape(ctx, d, dm.hK, k, n)
	kk := heads(keys, dm.hK).L2Norm(ctx, h.eps).Reshape(ctx, d, dm.hK, k, n)
	v := heads(2*keys, hV) // deltaWKV takes the view; deltaSteps slices v by position
	if h.rule != ruleWKV {
		v = v.Contiguous(ctx, d, hV, k, n)
	}
	if r := hV / dm.hK; r > 1 {
		ones := h.onesOf(ctx, d, hV, k*n)
		if dm.reordered {
			// Value head h reads key head h mod hK.
			q = ones.Mul(ctx, q.Reshape(ctx, d, dm.hK, k*n)).Reshape(ctx, d, hV, k, n)
			kk = ones.Mul(ctx, kk.Reshape(ctx, d, dm.hK, k*n)).Reshape(ctx, d, hV, k, n)
		} else {
			// Value head h reads key head h / r.
			ones = ones.Reshape(ctx, d, r, dm.hK*k*n)
			q = ones.Mul(ctx, q.Reshape(ctx, d, 1, dm.hK*k*n)).Reshape(ctx, d, hV, k, n)
			kk = ones.Mul(ctx, kk.Reshape(ctx, d, 1, dm.hK*k*n)).Reshape(ctx, d, hV, k, n)
		}
	}

	state, err := cache.DeltaState(ctx, layer, d, hV)
	if err != nil {
		return nil, fmt.Errorf("recurrent state: %w", err)
	}
	var out ml.Tensor
	t := k * n // positions computed
	if h.rule == ruleWKV {
		out, err = h.deltaWKV(ctx, q, kk, v, logDecay, beta, state, cache, layer, k, n, pd)
		if err != nil {
			return nil, err
		}
		t = out.Dim(1)
	} else {
		out, t = h.deltaSteps(ctx, q, kk, v, logDecay.Exp(ctx).Reshape(ctx, hV, k, n), beta, state, cache, layer, k, n, pd)
	}

	// Gated RMS norm and output projection.
	o := g.SSMNorm.Forward(ctx, out.Reshape(ctx, d, hV*t), h.eps)
	o = o.Mul(ctx, z.Reshape(ctx, d, hV*t).SILU(ctx))
	return g.SSMOut.Forward(ctx, o.Reshape(ctx, d*hV, t)), nil
}

// deltaKernel is deltaStep with the convolution and the recurrence run by
// nesy's own CPU kernels (ggmlop.Conv, ggmlop.DeltaRule) on the
// pass's own positions only: x is [hidden, T], the positions sequence
// after sequence (k of each of n sequences, or a padded pass's own
// positions, pd.lengths of each), and so are the projections, the
// convolution, the recurrence and the output. A padded pass's pads never
// reach a delta-net layer, the value heads read their key heads where
// they lie (no broadcast copies of q and k, none of the decay and step
// size), and the convolution and its state need no transposed copies. The
// graph does not grow with k (see passGraph.wkv).
func (h *hybridForward) deltaKernel(ctx ml.Context, g *qwen3next.GatedDeltaNet, x ml.Tensor, cache *qwen3next.HybridCache, layer, k, n int, pd *padded) (ml.Tensor, error) {
	dm := h.delta
	d, hV := dm.dV, dm.hV
	keys := dm.dK * dm.hK
	qkvDim := 2*keys + d*hV

	qkv := g.SSMQKV.Forward(ctx, x)                // [qkvDim, T]
	z := g.SSMQKVGate.Forward(ctx, x)              // [d*hV, T]
	beta := g.SSMBeta.Forward(ctx, x).Sigmoid(ctx) // [hV, T]
	logDecay := g.SSMAlpha.Forward(ctx, x).Add(ctx, g.SSMDT).Softplus(ctx).Mul(ctx, g.SSMA)
	t := qkv.Dim(1)
	lens := h.lensOf(ctx, k, n, pd)

	conv, err := cache.ConvState(ctx, layer) // [convK-1, qkvDim, n]
	if err != nil {
		return nil, fmt.Errorf("convolution state: %w", err)
	}
	c, ok := ggmlop.Conv(ctx, qkv, conv, convWeight(ctx, g), lens)
	if !ok {
		return nil, errors.New("models: internal error: the convolution kernel is not available")
	}
	w := dm.convK - 1
	cache.UpdateConvState(ctx, layer, c.View(ctx, qkvDim*t*4, w, w*4, qkvDim, w*qkvDim*4, n))
	mixed := c.View(ctx, 0, qkvDim, c.Stride(1), t).SILU(ctx) // [qkvDim, T]
	heads := func(off, nh int) ml.Tensor {
		f := mixed.Stride(0)
		return mixed.View(ctx, off*f, d, d*f, nh, mixed.Stride(1), t)
	}
	q := heads(0, dm.hK).L2Norm(ctx, h.eps).Scale(ctx, 1/math.Sqrt(float64(d))) // [d, hK, T]
	kk := heads(keys, dm.hK).L2Norm(ctx, h.eps)

	state, err := cache.DeltaState(ctx, layer, d, hV)
	if err != nil {
		return nil, fmt.Errorf("recurrent state: %w", err)
	}
	y, ok := ggmlop.DeltaRule(ctx, q, kk, heads(2*keys, hV), logDecay, beta, state.Reshape(ctx, d*d*hV, n), lens, dm.reordered)
	if !ok {
		return nil, errors.New("models: internal error: the delta rule kernel is not available")
	}
	cache.UpdateDeltaState(ctx, layer, y.View(ctx, d*hV*t*4, d, d*4, d*hV, d*d*hV*4, n))

	// Gated RMS norm and output projection.
	o := g.SSMNorm.Forward(ctx, y.View(ctx, 0, d, d*4, hV*t), h.eps)
	o = o.Mul(ctx, z.Reshape(ctx, d, hV*t).SILU(ctx))
	return g.SSMOut.Forward(ctx, o.Reshape(ctx, d*hV, t)), nil
}

// lensOf returns the pass's positions per sequence, I32 [n] (h.lens, made
// once per pass): a padded pass's own lengths, else k for each sequence.
func (h *hybridForward) lensOf(ctx ml.Context, k, n int, pd *padded) ml.Tensor {
	if h.lens == nil {
		lens := make([]int32, n)
		for i := range lens {
			lens[i] = int32(k)
			if pd != nil {
				lens[i] = pd.lengths[i]
			}
		}
		h.lens = ctx.Input().FromInts(lens, n)
	}
	return h.lens
}

// deltaWKV runs deltaStep's recurrence as one ggml operator, RWKV-7's
// generalized delta rule (ggmlop.WKV7), over all k positions of the n
// sequences: with the state M stored key-major (row i of WKV7's state is
// value index i, its key indices contiguous), w = g, a = -g beta k, b = k
// and v scaled by beta give M' = g M + beta (v - g M k) k^T, and r = q
// gives M' q. A pad of a padded pass gets g = 1 and beta = 0, a step that
// leaves the state exactly as it was (M 1 + 0 + 0), so each sequence's
// final state is the one after its last own position; its outputs are
// gathered at the own positions (padded.real). Its graph does not grow
// with k (see passGraph.wkv). v is [d, hV, k*n], possibly a strided view;
// q and kk are contiguous. It returns the outputs [d*hV, T].
func (h *hybridForward) deltaWKV(ctx ml.Context, q, kk, v, logDecay, beta, state ml.Tensor, cache *qwen3next.HybridCache, layer, k, n int, pd *padded) (ml.Tensor, error) {
	d, hV := h.delta.dV, h.delta.hV
	t := k * n
	lg := logDecay.Reshape(ctx, 1, hV, t)
	bt := beta.Reshape(ctx, 1, hV, t)
	if pd != nil {
		valid := pd.valid.Reshape(ctx, 1, 1, t)
		lg, bt = lg.Mul(ctx, valid), bt.Mul(ctx, valid)
	}
	gt := lg.Exp(ctx) // [1, hV, t]
	kt := kk.Reshape(ctx, d, hV, t)
	y, ok := ggmlop.WKV7(ctx,
		q.Reshape(ctx, d, hV, t),
		h.onesOf(ctx, d, hV, t).Mul(ctx, gt),
		kt,
		v.Mul(ctx, bt),
		kt.Mul(ctx, gt.Mul(ctx, bt).Scale(ctx, -1)),
		kt,
		state.Reshape(ctx, d*d*hV, n))
	if !ok {
		return nil, errors.New("models: internal error: the delta rule operator is not available")
	}
	out := y.View(ctx, 0, d*hV, 4*d*hV, t)
	cache.UpdateDeltaState(ctx, layer, y.View(ctx, 4*d*hV*t, d*d*hV*n).Reshape(ctx, d, d*hV, n))
	if pd != nil {
		out = out.Rows(ctx, pd.real)
	}
	return out, nil
}

// deltaSteps is deltaStep's recurrence built position by position from
// ggml's general operators (see deltaStep), for heads deltaWKV cannot
// run. It returns the outputs [d*hV, t] and t.
func (h *hybridForward) deltaSteps(ctx ml.Context, q, kk, v, decay, beta, state ml.Tensor, cache *qwen3next.HybridCache, layer, k, n int, pd *padded) (ml.Tensor, int) {
	d, hV := h.delta.dV, h.delta.hV
	m := state.Reshape(ctx, d, d, hV, n) // m[j, i]: key index j (contiguous), value index i
	const pad = 15                       // outer products with inner size 16: one register of floats
	// step advances the states m of the first nt sequences by position t
	// and returns their outputs [d, hV, 1, nt] and new states.
	step := func(m ml.Tensor, t, nt int) (ml.Tensor, ml.Tensor) {
		at := func(x ml.Tensor, rows int) ml.Tensor { // position t of [rows, hV, k, n], first nt sequences, as [rows, 1, hV, nt]
			if k == 1 && nt == n {
				return x.Reshape(ctx, rows, 1, hV, n)
			}
			if nt < n {
				x = x.Slice(ctx, 3, 0, nt, 1)
			}
			return x.Slice(ctx, 2, t, t+1, 1).Contiguous(ctx, rows, 1, hV, nt)
		}
		qt, kt, vt := at(q, d), at(kk, d), at(v, d)
		gt := at(decay.Reshape(ctx, 1, hV, k, n), 1)
		bt := at(beta.Reshape(ctx, 1, hV, k, n), 1)

		mkq := m.Mulmat(ctx, kt.Concat(ctx, qt, 1)) // [d, 2, hV, nt]: M k and M q
		delta := vt.Sub(ctx, mkq.Slice(ctx, 1, 0, 1, 1).Mul(ctx, gt)).Mul(ctx, bt)
		kq := kt.Mul(ctx, qt).SumRows(ctx) // [1, 1, hV, nt]
		o := mkq.Slice(ctx, 1, 1, 2, 1).Mul(ctx, gt).Add(ctx, delta.Mul(ctx, kq)).Reshape(ctx, d, hV, 1, nt)
		outer := kt.Reshape(ctx, 1, d, hV, nt).Pad(ctx, pad, 0, 0, 0).
			Mulmat(ctx, delta.Reshape(ctx, 1, d, hV, nt).Pad(ctx, pad, 0, 0, 0)) // [d, d, hV, nt]: k[j] delta[i]
		return o, m.Mul(ctx, gt.Repeat4D(ctx, d, 1, hV, nt)).Add(ctx, outer)
	}
	t := k * n // positions computed
	var out ml.Tensor
	if pd == nil {
		for i := range k {
			var o ml.Tensor
			o, m = step(m, i, n)
			if out == nil {
				out = o
			} else {
				out = out.Concat(ctx, o, 2) // [d, hV, i+1, n]
			}
		}
		out = out.Contiguous(ctx, d, hV*t)
	} else {
		// The sequences come longest first (planPadded), so those with a
		// position i are the first pd.active[i]; a pad is never computed.
		// Each step's outputs are appended by position ([d*hV, sum of
		// active] = [d*hV, T]) and put in the own positions' order by
		// pd.order; a sequence's final state is taken from the step of
		// its last position.
		var done ml.Tensor // final states of the sequences after the active ones
		for i := range k {
			nt := pd.active[i]
			if nt < m.Dim(3) {
				rest := m.Slice(ctx, 3, nt, m.Dim(3), 1)
				if done == nil {
					done = rest
				} else {
					done = rest.Concat(ctx, done, 3)
				}
				m = m.Slice(ctx, 3, 0, nt, 1)
			}
			o, mt := step(m, i, nt)
			m = mt
			o = o.Reshape(ctx, d*hV, nt)
			if out == nil {
				out = o
			} else {
				out = out.Concat(ctx, o, 1)
			}
		}
		if done != nil {
			m = m.Concat(ctx, done, 3)
		}
		out = out.Rows(ctx, pd.order)
		t = out.Dim(1)
	}
	cache.UpdateDeltaState(ctx, layer, m.Reshape(ctx, d, d*hV, n))
	return out, t
}

// convTail returns the convolution state after a padded pass: for each
// sequence the convK-1 inputs that end at its last own position, taken
// from in, the convolution's input [convK-1+pad, qkvDim, n] (the state
// before the pass, then the pass's positions).
func (h *hybridForward) convTail(ctx ml.Context, in ml.Tensor, pd *padded, qkvDim, n int) ml.Tensor {
	w := h.delta.convK - 1
	span := w + pd.pad
	idx := make([]int32, 0, w*n)
	for s, l := range pd.lengths {
		for j := range w {
			idx = append(idx, int32(s*span)+l+int32(j))
		}
	}
	rows := ctx.Input().FromInts(idx, len(idx))
	byPos := in.Permute(ctx, 1, 0, 2, 3).Contiguous(ctx, qkvDim, span*n) // [qkvDim, span*n]
	tail := byPos.Rows(ctx, rows)                                        // [qkvDim, w*n]
	return tail.Reshape(ctx, qkvDim, w, n).Permute(ctx, 1, 0, 2, 3).Contiguous(ctx, w, qkvDim, n)
}
