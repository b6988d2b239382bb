// Package ggmlop builds ggml operators that Ollama's ml.Tensor interface
// does not offer, on the contexts and tensors of Ollama's ggml backend.
//
// Ollama's ggml Context and Tensor keep their ggml pointers unexported:
// they are read (and a new Tensor's set) by reflection from the pinned
// version, as package ggmlthread reads the scheduler; an operator returns
// ok false when they are not where that version keeps them, and the
// caller then builds the graph without it.
package ggmlop

/*
#cgo CFLAGS: -fopenmp-simd
#include <stdint.h>
#include <stdbool.h>
#include "delta.h"

// ggml's own declarations (ggml.h): the headers live in Ollama's module,
// outside this package's reach; the symbols are linked from Ollama's ggml
// package.
struct ggml_context;
struct ggml_tensor;
struct ggml_tensor *ggml_rwkv_wkv7(struct ggml_context *ctx, struct ggml_tensor *r, struct ggml_tensor *w,
	struct ggml_tensor *k, struct ggml_tensor *v, struct ggml_tensor *a, struct ggml_tensor *b, struct ggml_tensor *state);
struct ggml_tensor *ggml_cont(struct ggml_context *ctx, struct ggml_tensor *a);
bool ggml_is_contiguous(const struct ggml_tensor *tensor);
*/
import "C"

import (
	"reflect"
	"unsafe"

	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/ml/backend/ggml"
)

// field returns the address of v's field name when it is a pointer.
func field(v reflect.Value, name string) (unsafe.Pointer, bool) {
	f := v.FieldByName(name)
	if !f.IsValid() || f.Kind() != reflect.Pointer {
		return nil, false
	}
	return unsafe.Pointer(f.UnsafeAddr()), true
}

// ptr reads the ggml pointer that Ollama keeps in x's field name (x a
// pointer to a struct; false for a nil one).
func ptr(x any, name string) (unsafe.Pointer, bool) {
	v := reflect.ValueOf(x)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil, false
	}
	p, ok := field(v.Elem(), name)
	if !ok || *(*unsafe.Pointer)(p) == nil {
		return nil, false
	}
	return *(*unsafe.Pointer)(p), true
}

// contextPtr is ctx's ggml_context.
func contextPtr(ctx ml.Context) (*C.struct_ggml_context, bool) {
	c, isGGML := ctx.(*ggml.Context)
	p, ok := ptr(c, "ctx")
	return (*C.struct_ggml_context)(p), isGGML && ok
}

// tensorPtr is t's ggml_tensor.
func tensorPtr(t ml.Tensor) (*C.struct_ggml_tensor, bool) {
	gt, isGGML := t.(*ggml.Tensor)
	p, ok := ptr(gt, "t")
	return (*C.struct_ggml_tensor)(p), isGGML && ok
}

// wrap returns a Tensor of like's backend holding t.
func wrap(like ml.Tensor, t *C.struct_ggml_tensor) (ml.Tensor, bool) {
	lt, ok := like.(*ggml.Tensor)
	if !ok || lt == nil || t == nil {
		return nil, false
	}
	nt := new(ggml.Tensor)
	src, dst := reflect.ValueOf(lt).Elem(), reflect.ValueOf(nt).Elem()
	pb, ok1 := field(src, "b")
	qb, ok2 := field(dst, "b")
	qt, ok3 := field(dst, "t")
	if !ok1 || !ok2 || !ok3 {
		return nil, false
	}
	*(*unsafe.Pointer)(qb) = *(*unsafe.Pointer)(pb)
	*(*unsafe.Pointer)(qt) = unsafe.Pointer(t)
	return nt, true
}

// contiguous returns t, or a contiguous copy of it.
func contiguous(ctx *C.struct_ggml_context, t *C.struct_ggml_tensor) *C.struct_ggml_tensor {
	if C.ggml_is_contiguous(t) {
		return t
	}
	return C.ggml_cont(ctx, t)
}

// WKV7 is ggml_rwkv_wkv7: RWKV-7's generalized delta rule, run position
// after position for n sequences of T/n positions each (T the positions of
// r, w, k, v, a, b, which are [S, H, T], a sequence's positions
// consecutive). The state of head h of a sequence is an S x S matrix M
// (state [S*S*H, n], row i of M contiguous); at each position, per head,
//
//	M[i][j] <- M[i][j] w[j] + v[i] k[j] + (sum_l a[l] M[i][l]) b[j]
//	y[i]     = sum_j M[i][j] r[j]
//
// It returns [S*H, T + S*n]: the outputs y, then the final states. ggml's
// CPU kernel steps through the head in vectors of its SIMD width times
// four, so S must be a multiple of 64 on every CPU it runs on. Inputs that
// are not contiguous are copied. ok is false when the tensors are not
// those of Ollama's ggml backend of the known layout.
func WKV7(ctx ml.Context, r, w, k, v, a, b, state ml.Tensor) (out ml.Tensor, ok bool) {
	c, ok := contextPtr(ctx)
	if !ok {
		return nil, false
	}
	ps, ok := tensorPtrs(r, w, k, v, a, b, state)
	if !ok {
		return nil, false
	}
	for i, p := range ps {
		ps[i] = contiguous(c, p)
	}
	return wrap(r, C.ggml_rwkv_wkv7(c, ps[0], ps[1], ps[2], ps[3], ps[4], ps[5], ps[6]))
}

// DeltaRule is the gated delta rule of Qwen3.5's delta-net layers, run by
// nesy's own CPU kernel over n sequences of different lengths: lens
// (I32 [n]) gives each sequence's positions, which come sequence after
// sequence in q, k ([d, hK, T]), v ([d, hV, T]), logDecay and beta
// ([hV, T]); T is the sum of lens. The state of value head h of a sequence
// is a d x d matrix M (state [d*d*hV, n], row i contiguous: value index i,
// key indices j); at each position, with g = exp(logDecay),
//
//	delta = beta (v - g M k)
//	M'    = g M + delta k^T
//	y     = M' q
//
// where value head h reads key head h mod hK when reordered, else h/(hV/hK)
// (no broadcast copies). Operands may be strided views (unit stride
// within a head). It returns [d*hV, T + d*n]: the outputs y, then the
// final states. Unlike WKV7 no sequence is padded to another's length and
// any head size runs; the kernel runs on the CPU backend only. ok is false
// when the tensors are not those of Ollama's ggml backend of the known
// layout or the shapes do not fit.
func DeltaRule(ctx ml.Context, q, k, v, logDecay, beta, state, lens ml.Tensor, reordered bool) (out ml.Tensor, ok bool) {
	c, ok := contextPtr(ctx)
	if !ok {
		return nil, false
	}
	ps, ok := tensorPtrs(q, k, v, logDecay, beta, state, lens)
	if !ok {
		return nil, false
	}
	r := C.int(0)
	if reordered {
		r = 1
	}
	t := C.nesy_delta_rule(c, ps[0], ps[1], ps[2], ps[3], ps[4], ps[5], ps[6], r)
	if t == nil {
		return nil, false
	}
	return wrap(q, t)
}

// Conv is the short causal convolution of Qwen3.5's delta-net layers, run
// by nesy's own CPU kernel over n sequences of different lengths (lens,
// I32 [n]): x is [C, T], the positions sequence after sequence; state
// [K-1, C, n] holds each sequence's last K-1 inputs before the pass;
// weight is [K, C] (K at most 8). Position t of a channel gives
// sum_i weight[i] e[t+i], e the state's inputs followed by the sequence's
// (ggml_ssm_conv's sum, without its padding to equal lengths). It returns
// [C, T + (K-1)*n]: the outputs, then the new states (each sequence's
// last K-1 inputs) laid out as state. ok as for DeltaRule.
func Conv(ctx ml.Context, x, state, weight, lens ml.Tensor) (out ml.Tensor, ok bool) {
	c, ok := contextPtr(ctx)
	if !ok {
		return nil, false
	}
	ps, ok := tensorPtrs(x, state, weight, lens)
	if !ok {
		return nil, false
	}
	t := C.nesy_conv(c, ps[0], ps[1], ps[2], ps[3])
	if t == nil {
		return nil, false
	}
	return wrap(x, t)
}

// MaxConvKernel is the longest convolution Conv takes.
const MaxConvKernel = 8

// tensorPtrs returns the ggml tensors of ts.
func tensorPtrs(ts ...ml.Tensor) ([]*C.struct_ggml_tensor, bool) {
	ps := make([]*C.struct_ggml_tensor, len(ts))
	for i, t := range ts {
		p, ok := tensorPtr(t)
		if !ok {
			return nil, false
		}
		ps[i] = p
	}
	return ps, true
}
