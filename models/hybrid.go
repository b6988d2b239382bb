package models

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/model"
	"github.com/ollama/ollama/model/input"
	"github.com/ollama/ollama/model/models/qwen3next"
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
// hybridForward is Model.Forward for text passes with the one difference
// that a full attention layer's normalised input is reshaped to
// [hidden, k, n] before the operator (the residual stays 2-d); every
// tensor operation is the model's own (layers, norms, MLPs, operators), so
// the weights and the arithmetic are those of Ollama's implementation.
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
}

// newHybridForward returns the multi-sequence forward of a Qwen3.5 model,
// or nil for any other model. The engine uses it for models loaded
// without a vision encoder only (image passes run alone through
// Model.Forward).
func newHybridForward(m model.Model) *hybridForward {
	qm, ok := m.(*qwen3next.Model)
	if !ok || qm.Options == nil {
		return nil
	}
	if _, ok := qm.Cache.(*qwen3next.HybridCache); !ok {
		return nil
	}
	c := m.Backend().Config()
	h := &hybridForward{m: qm, opts: *qm.Options, eps: c.Float("attention.layer_norm_rms_epsilon")}
	// The same keys, in the same order, as qwen3next.New.
	for _, key := range []string{"mrope_sections", "rope.mrope_section", "rope.dimension_sections"} {
		if h.mrope = c.Ints(key, nil); len(h.mrope) > 0 {
			break
		}
	}
	return h
}

// positions is the model's position input: the positions, or for
// multi-axis RoPE the time, height and width axes (all the position for
// text) and a zero fourth axis.
func (h *hybridForward) positions(ctx ml.Context, b input.Batch) ml.Tensor {
	if len(h.mrope) == 0 {
		return ctx.Input().FromInts(b.Positions, len(b.Positions))
	}
	n := len(b.Positions)
	p := make([]int32, 4*n)
	for axis := range 3 {
		copy(p[axis*n:], b.Positions)
	}
	return ctx.Input().FromInts(p, len(p))
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

// forward builds the graph of a text pass of k positions for each of n > 1
// sequences (the cache's StartForward has run).
func (h *hybridForward) forward(ctx ml.Context, b input.Batch, k, n int) (ml.Tensor, error) {
	m := h.m
	*m.Options = h.opts
	cache, ok := m.Cache.(*qwen3next.HybridCache)
	if !ok {
		return nil, fmt.Errorf("models: qwen3next cache is a %T", m.Cache)
	}
	positions := h.positions(ctx, b)
	x := m.TokenEmbedding.Forward(ctx, b.Inputs)
	for i := range m.Layers {
		l := &m.Layers[i]
		cache.SetLayer(i)
		var outputs ml.Tensor
		if i == len(m.Layers)-1 {
			outputs = b.Outputs
		}
		var err error
		if _, full := l.Operator.(*qwen3next.FullAttention); !full {
			if x, err = l.Forward(ctx, i, x, positions, outputs, cache, m.Options); err != nil {
				return nil, fmt.Errorf("models: layer %d: %w", i, err)
			}
			continue
		}
		// qwen3next.Layer.Forward, with the operator's input 3-d.
		residual := x
		y := l.AttentionNorm.Forward(ctx, x, h.eps)
		y = y.Reshape(ctx, y.Dim(0), k, n)
		if y, err = l.Operator.Forward(ctx, y, positions, cache, m.Options); err != nil {
			return nil, fmt.Errorf("models: layer %d: %w", i, err)
		}
		if outputs != nil {
			y = y.Rows(ctx, outputs)
			residual = residual.Rows(ctx, outputs)
		}
		y = y.Add(ctx, residual)
		ffnResidual := y
		y = l.AttentionPostNorm.Forward(ctx, y, h.eps)
		y = l.MLP.Forward(ctx, y, m.Options)
		x = y.Add(ctx, ffnResidual)
	}
	x = m.OutputNorm.Forward(ctx, x, h.eps)
	return m.Output.Forward(ctx, x), nil
}
