//go:build llamacpp

// Package llamacpp drives llama.cpp's C API (llama.h) as vendored in
// Ollama's module, on the same ggml sources nesy's engine runs, for one
// purpose: the side-by-side benchmarks of models/llamacpp_bench_test.go,
// which measure what nesy's engine and its models API cost against
// llama.cpp itself on the same GGUF, flags and threads.
//
// It builds only with the llamacpp tag and llama.h on the include path
// (scripts/llamacpp-bench.sh sets CGO_CPPFLAGS from the module's folder);
// nothing else in nesy imports it.
package llamacpp

/*
#cgo CXXFLAGS: -std=c++17
#include <stdlib.h>
#include "llama.h"

static struct llama_context_params nesy_ctx_params(int n_ctx, int n_batch, int n_seq, int threads, int flash) {
	struct llama_context_params p = llama_context_default_params();
	p.n_ctx = n_ctx;
	p.n_batch = n_batch;
	p.n_ubatch = n_batch;
	p.n_seq_max = n_seq;
	p.n_threads = threads;
	p.n_threads_batch = threads;
	p.kv_unified = true;
	p.type_k = GGML_TYPE_F16;
	p.type_v = GGML_TYPE_F16;
	p.flash_attn_type = flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
	return p;
}

static void nesy_batch_set(struct llama_batch *b, int i, int tok, int pos, int seq, int logits) {
	b->token[i] = tok;
	b->pos[i] = pos;
	b->n_seq_id[i] = 1;
	b->seq_id[i][0] = seq;
	b->logits[i] = logits;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	// libllama's sources (without Ollama's llama wrapper, whose mtmd
	// part needs headers the module's zip leaves out) and ggml's.
	_ "github.com/ollama/ollama/llama/llama.cpp/src"
	ggml "github.com/ollama/ollama/ml/backend/ggml/ggml/src"
)

// Options configure a context.
type Options struct {
	Context   int  // KV cells, shared by every sequence (kv_unified)
	Batch     int  // most tokens per Decode
	Sequences int  // most sequences
	Threads   int  // CPU threads
	Flash     bool // flash attention
}

// Context is a loaded model and its llama_context.
type Context struct {
	model *C.struct_llama_model
	ctx   *C.struct_llama_context
	batch C.struct_llama_batch
	cap   int
	vocab int
}

// Load loads a GGUF on the CPU and makes a context for it.
func Load(path string, o Options) (*Context, error) {
	ggml.OnceLoad()
	C.llama_backend_init()
	mp := C.llama_model_default_params()
	mp.n_gpu_layers = 0
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	m := C.llama_model_load_from_file(cpath, mp)
	if m == nil {
		return nil, fmt.Errorf("llamacpp: cannot load %s", path)
	}
	flash := 0
	if o.Flash {
		flash = 1
	}
	ctx := C.llama_init_from_model(m, C.nesy_ctx_params(C.int(o.Context), C.int(o.Batch), C.int(o.Sequences), C.int(o.Threads), C.int(flash)))
	if ctx == nil {
		C.llama_model_free(m)
		return nil, errors.New("llamacpp: cannot make a context")
	}
	c := &Context{model: m, ctx: ctx, cap: o.Batch, batch: C.llama_batch_init(C.int32_t(o.Batch), 0, 1)}
	c.vocab = int(C.llama_vocab_n_tokens(C.llama_model_get_vocab(m)))
	return c, nil
}

// Vocab is the vocabulary size.
func (c *Context) Vocab() int { return c.vocab }

// Decode runs one llama_decode over tokens at positions pos of sequences
// seqs; logits[i] asks for row i's logits.
func (c *Context) Decode(tokens, pos, seqs []int32, logits []bool) error {
	if len(tokens) > c.cap {
		return fmt.Errorf("llamacpp: %d tokens in a batch of %d", len(tokens), c.cap)
	}
	for i, t := range tokens {
		l := 0
		if logits[i] {
			l = 1
		}
		C.nesy_batch_set(&c.batch, C.int(i), C.int(t), C.int(pos[i]), C.int(seqs[i]), C.int(l))
	}
	c.batch.n_tokens = C.int32_t(len(tokens))
	if rc := C.llama_decode(c.ctx, c.batch); rc != 0 {
		return fmt.Errorf("llamacpp: llama_decode returned %d", int(rc))
	}
	return nil
}

// Logits copies the logits of batch row i into dst (Vocab floats).
func (c *Context) Logits(i int, dst []float32) {
	p := C.llama_get_logits_ith(c.ctx, C.int32_t(i))
	copy(dst, unsafe.Slice((*float32)(unsafe.Pointer(p)), c.vocab))
}

// Copy makes dst share src's cells at positions [p0, p1) (p1 < 0: all).
func (c *Context) Copy(src, dst, p0, p1 int) {
	C.llama_memory_seq_cp(C.llama_get_memory(c.ctx), C.llama_seq_id(src), C.llama_seq_id(dst), C.llama_pos(p0), C.llama_pos(p1))
}

// Remove drops seq's cells at positions [p0, p1) (p1 < 0: to the end).
func (c *Context) Remove(seq, p0, p1 int) bool {
	return bool(C.llama_memory_seq_rm(C.llama_get_memory(c.ctx), C.llama_seq_id(seq), C.llama_pos(p0), C.llama_pos(p1)))
}

// Close frees the context and the model.
func (c *Context) Close() {
	C.llama_batch_free(c.batch)
	C.llama_free(c.ctx)
	C.llama_model_free(c.model)
}
