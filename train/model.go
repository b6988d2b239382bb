package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/nesy-dev/nesy/models/gguf"
)

// Config is the shape of the prior: a decoder-only llama transformer
// (RMSNorm, rotary positions as llama.cpp's normal mode applies them,
// SwiGLU feed-forward, an output projection of its own or, Tied, the
// token embedding's transpose) as package models runs it.
type Config struct {
	Vocab  int // tokens
	Dim    int // hidden size
	Layers int // transformer blocks
	Heads  int // attention heads (key/value heads alike)
	FFN    int // feed-forward hidden size
	// Context is the context length written to the GGUF.
	Context  int
	RopeBase float32 // 10000 when 0
	// Tied computes the logits with the token embedding (its transpose)
	// instead of an output projection of its own: what the model attends
	// to can be copied to the output directly (the GGUF's output.weight is
	// then the embedding).
	Tied bool
}

// eps is the RMSNorm epsilon the GGUF writer records
// (attention.layer_norm_rms_epsilon).
const eps = 1e-6

func (c Config) headDim() int { return c.Dim / c.Heads }

func (c Config) ropeBase() float32 {
	if c.RopeBase == 0 {
		return 10000
	}
	return c.RopeBase
}

// check rejects shapes the model cannot have.
func (c Config) check() error {
	switch {
	case c.Vocab <= 0 || c.Dim <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.FFN <= 0:
		return fmt.Errorf("train: model shape %+v: every size must be positive", c)
	case c.Dim%c.Heads != 0 || c.headDim()%2 != 0:
		return fmt.Errorf("train: hidden size %d must split into %d heads of an even size", c.Dim, c.Heads)
	}
	return nil
}

// Param is one weight tensor of the model, row-major in the layout the
// training graph multiplies with: a projection is [in, out] (rows are
// inputs), the transpose of GGUF's.
type Param struct {
	Name  string
	Shape [2]int
	Data  []float32
}

// Params are the model's weights, in a fixed order.
type Params struct {
	Config Config
	List   []*Param
	byName map[string]*Param
}

// Get returns the named parameter (nil when there is none).
func (p *Params) Get(name string) *Param { return p.byName[name] }

// Count returns the number of weights.
func (p *Params) Count() int {
	n := 0
	for _, q := range p.List {
		n += len(q.Data)
	}
	return n
}

// Parameter names. Per-head projections are separate parameters (the
// graph needs no slicing); the GGUF export concatenates them.
func embedName() string                { return "embed" }
func outNormName() string              { return "out_norm" }
func outName() string                  { return "out" }
func layerName(l int, w string) string { return "blk." + strconv.Itoa(l) + "." + w }
func headName(l int, w string, h int) string {
	return layerName(l, w) + "." + strconv.Itoa(h)
}

// NewParams returns freshly initialised weights for c, the same for the
// same seed: projections N(0, 1/fan_in) (the output's scaled down so the
// first logits are near uniform), embeddings N(0, 1), norm weights 1.
func NewParams(c Config, seed uint64) (*Params, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x6e657379))
	p := &Params{Config: c, byName: map[string]*Param{}}
	add := func(name string, rows, cols int, std, mean float64) {
		q := &Param{Name: name, Shape: [2]int{rows, cols}, Data: make([]float32, rows*cols)}
		for i := range q.Data {
			q.Data[i] = float32(mean + std*rng.NormFloat64())
		}
		p.List = append(p.List, q)
		p.byName[name] = q
	}
	hd := c.headDim()
	lin := func(fanIn int) float64 { return 1 / math.Sqrt(float64(fanIn)) }
	embStd := 1.0
	if c.Tied {
		// The output reads the embedding too: rows of norm about 1 keep the
		// first logits near uniform (the inputs are normalised anyway).
		embStd = lin(c.Dim)
	}
	add(embedName(), c.Vocab, c.Dim, embStd, 0)
	for l := range c.Layers {
		add(layerName(l, "attn_norm"), 1, c.Dim, 0, 1)
		for h := range c.Heads {
			add(headName(l, "q", h), c.Dim, hd, lin(c.Dim), 0)
			add(headName(l, "k", h), c.Dim, hd, lin(c.Dim), 0)
			add(headName(l, "v", h), c.Dim, hd, lin(c.Dim), 0)
			add(headName(l, "o", h), hd, c.Dim, lin(c.Dim)/math.Sqrt(float64(2*c.Layers)), 0)
		}
		add(layerName(l, "ffn_norm"), 1, c.Dim, 0, 1)
		add(layerName(l, "gate"), c.Dim, c.FFN, lin(c.Dim), 0)
		add(layerName(l, "up"), c.Dim, c.FFN, lin(c.Dim), 0)
		add(layerName(l, "down"), c.FFN, c.Dim, lin(c.FFN)/math.Sqrt(float64(2*c.Layers)), 0)
	}
	add(outNormName(), 1, c.Dim, 0, 1)
	if !c.Tied {
		add(outName(), c.Dim, c.Vocab, 0.1*lin(c.Dim), 0)
	}
	return p, nil
}

// transpose returns the [cols, rows] transpose of a rows x cols matrix.
func transpose(m []float32, rows, cols int) []float32 {
	out := make([]float32, len(m))
	for r := range rows {
		for c := range cols {
			out[c*rows+r] = m[r*cols+c]
		}
	}
	return out
}

// Spec returns the GGUF description of the model with these weights and
// tokenizer tok (llama architecture, F32; with Tied, output.weight is the
// embedding).
func (p *Params) Spec(tok *gguf.Tokenizer, name string) (gguf.Spec, error) {
	c := p.Config
	if len(tok.Tokens) != c.Vocab {
		return gguf.Spec{}, fmt.Errorf("train: the tokenizer has %d tokens, the model %d", len(tok.Tokens), c.Vocab)
	}
	hd := c.headDim()
	w := map[string][]float32{
		// The embedding is [vocab, dim] in both layouts (a row per token).
		"token_embd.weight":  p.Get(embedName()).Data,
		"output_norm.weight": p.Get(outNormName()).Data,
	}
	if c.Tied {
		// Both are [vocab, dim], a row per token.
		w["output.weight"] = p.Get(embedName()).Data
	} else {
		w["output.weight"] = transpose(p.Get(outName()).Data, c.Dim, c.Vocab)
	}
	for l := range c.Layers {
		b := "blk." + strconv.Itoa(l) + "."
		w[b+"attn_norm.weight"] = p.Get(layerName(l, "attn_norm")).Data
		w[b+"ffn_norm.weight"] = p.Get(layerName(l, "ffn_norm")).Data
		// GGUF's attn_q is [dim, heads*hd]: a row of dim inputs per output,
		// head h's outputs at rows h*hd.. (the engine reshapes the
		// projection to [hd, heads]).
		for _, n := range []string{"q", "k", "v"} {
			var rows []float32
			for h := range c.Heads {
				rows = append(rows, transpose(p.Get(headName(l, n, h)).Data, c.Dim, hd)...)
			}
			w[b+"attn_"+n+".weight"] = rows
		}
		// attn_output is [heads*hd, dim]: dim rows of heads*hd inputs.
		o := make([]float32, c.Dim*c.Heads*hd)
		for h := range c.Heads {
			oh := p.Get(headName(l, "o", h)).Data // [hd, dim]
			for i := range hd {
				for j := range c.Dim {
					o[j*c.Heads*hd+h*hd+i] = oh[i*c.Dim+j]
				}
			}
		}
		w[b+"attn_output.weight"] = o
		w[b+"ffn_gate.weight"] = transpose(p.Get(layerName(l, "gate")).Data, c.Dim, c.FFN)
		w[b+"ffn_up.weight"] = transpose(p.Get(layerName(l, "up")).Data, c.Dim, c.FFN)
		w[b+"ffn_down.weight"] = transpose(p.Get(layerName(l, "down")).Data, c.FFN, c.Dim)
	}
	ctx := c.Context
	if ctx <= 0 {
		ctx = 4096
	}
	return gguf.Spec{
		Arch: gguf.ArchLlama, Name: name, Embd: c.Dim, Layers: c.Layers, FFN: c.FFN, Heads: c.Heads,
		KVHeads: c.Heads, HeadDim: hd, ContextLength: ctx, RopeBase: c.ropeBase(), DType: gguf.F32,
		Tokenizer: tok, Weights: w,
	}, nil
}
