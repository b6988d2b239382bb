package models

import (
	"github.com/ollama/ollama/ml"
)

// cacheBackend is the backend the engine hands to the KV cache's Init. It
// differs from the model's backend in one respect: a context asked for
// with more tensor slots than the backend's graph-node limit spans several
// contexts instead of panicking.
//
// Why: Ollama's recurrent cache (kvcache.Recurrent at v0.17.4, used by
// qwen35 and qwen35moe) keeps its state checkpoints in one context per
// layer sized for every checkpoint of every sequence slot,
// NewContextSize(24*slots), while the ggml backend caps a context at
// max(1024, 32*tensors in the file) graph nodes. So a model with few
// tensors (a generated test model: 1792) fails to load with more than 74
// slots, and even a real 4B model (about 500 tensors) with more than
// about 650. The checkpoint contexts only create tensors (Zeros, each in
// its own buffer) and are closed with the cache, so spreading their
// tensors over several contexts changes nothing else.
type cacheBackend struct {
	ml.Backend
	maxNodes int // the backend's graph-node (and tensor slot) limit per context
}

// newCacheBackend wraps b; its limit is read from a context of default
// size (NewContext asks for the maximum).
func newCacheBackend(b ml.Backend) *cacheBackend {
	c := b.NewContext()
	defer c.Close()
	return &cacheBackend{Backend: b, maxNodes: c.MaxGraphNodes()}
}

// CacheConfig forwards the wrapped backend's cache requirements (padding,
// permuted values, mask type), which the causal cache reads from the
// backend it is given.
func (b *cacheBackend) CacheConfig() ml.CacheConfig {
	if cc, ok := b.Backend.(ml.BackendCacheConfig); ok {
		return cc.CacheConfig()
	}
	return ml.CacheConfig{}
}

// NewContextSize returns a context for n tensors: the backend's own when
// n is within its limit, otherwise one that spans several.
func (b *cacheBackend) NewContextSize(n int) ml.Context {
	if n <= b.maxNodes {
		return b.Backend.NewContextSize(n)
	}
	g := &spanGroup{b: b.Backend, per: b.maxNodes}
	return &spanContext{Context: g.open(), g: g, layer: -1}
}

// spanGroup is the set of backend contexts one spanning context has
// opened; new tensors go to the last one until it is full.
type spanGroup struct {
	b    ml.Backend
	per  int // tensors per context
	ctxs []ml.Context
	used int // tensors in the last context
}

func (g *spanGroup) open() ml.Context {
	c := g.b.NewContextSize(g.per)
	g.ctxs = append(g.ctxs, c)
	g.used = 0
	return c
}

// next returns the context the next tensor goes to (for layer, or
// unassigned when layer < 0).
func (g *spanGroup) next(layer int) ml.Context {
	c := g.ctxs[len(g.ctxs)-1]
	if g.used >= g.per {
		c = g.open()
	}
	g.used++
	if layer >= 0 {
		return c.Layer(layer)
	}
	return c
}

// spanContext is a context whose tensor-creating calls spread over a
// spanGroup. Graph calls (Forward, Compute) go to the first context;
// the cache never builds graphs in these contexts.
type spanContext struct {
	ml.Context
	g     *spanGroup
	layer int
}

// Layer implements ml.Context.
func (c *spanContext) Layer(i int) ml.Context {
	return &spanContext{Context: c.Context.Layer(i), g: c.g, layer: i}
}

// Empty implements ml.Context.
func (c *spanContext) Empty(dtype ml.DType, shape ...int) ml.Tensor {
	return c.g.next(c.layer).Empty(dtype, shape...)
}

// Zeros implements ml.Context.
func (c *spanContext) Zeros(dtype ml.DType, shape ...int) ml.Tensor {
	return c.g.next(c.layer).Zeros(dtype, shape...)
}

// FromBytes implements ml.Context.
func (c *spanContext) FromBytes(dtype ml.DType, s []byte, shape ...int) ml.Tensor {
	return c.g.next(c.layer).FromBytes(dtype, s, shape...)
}

// FromFloats implements ml.Context.
func (c *spanContext) FromFloats(s []float32, shape ...int) ml.Tensor {
	return c.g.next(c.layer).FromFloats(s, shape...)
}

// FromInts implements ml.Context.
func (c *spanContext) FromInts(s []int32, shape ...int) ml.Tensor {
	return c.g.next(c.layer).FromInts(s, shape...)
}

// Close implements ml.Context: it closes every context of the group.
func (c *spanContext) Close() {
	for _, x := range c.g.ctxs {
		x.Close()
	}
	c.g.ctxs = nil
}
