package ggmlthread_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/model"
	"github.com/ollama/ollama/model/input"
	_ "github.com/ollama/ollama/model/models" // registers the architectures

	"github.com/nesy-dev/nesy/internal/testkit"
	"github.com/nesy-dev/nesy/models/ggmlthread"
	"github.com/nesy-dev/nesy/models/gguf"
)

// load generates a small model of arch and loads it into Ollama's engine
// with a KV cache for 128 sequences.
func load(t *testing.T, arch string) model.Model {
	t.Helper()
	m := testkit.OllamaModel(t, arch)
	m.Config().Cache.Init(m.Backend(), ml.DTypeF16, 128, 2048, 64)
	t.Cleanup(func() { m.Config().Cache.Close() })
	return m
}

// forward builds the graph of toks on sequence seq from position 0, with
// every row as an output.
func forward(t *testing.T, m model.Model, seq int, toks []int32) (ml.Context, ml.Tensor) {
	t.Helper()
	ctx, out := forwardErr(m, seq, toks)
	if ctx == nil {
		t.Fatal("building the pass failed")
	}
	return ctx, out
}

// forwardErr is forward for any goroutine: a nil context on failure.
func forwardErr(m model.Model, seq int, toks []int32) (ml.Context, ml.Tensor) {
	ctx := m.Backend().NewContext()
	pos := make([]int32, len(toks))
	seqs := make([]int, len(toks))
	outs := make([]int32, len(toks))
	for i := range toks {
		pos[i], seqs[i], outs[i] = int32(i), seq, int32(i)
	}
	b := input.Batch{
		Inputs:    ctx.Input().FromInts(toks, len(toks)),
		Outputs:   ctx.Input().FromInts(outs, len(outs)),
		Positions: pos, Sequences: seqs,
	}
	if err := m.Config().Cache.StartForward(ctx, b, false); err != nil {
		ctx.Close()
		return nil, nil
	}
	out, err := m.Forward(ctx, b)
	if err != nil {
		ctx.Close()
		return nil, nil
	}
	ctx.SetBatchSize(len(toks))
	ctx.Forward(out)
	return ctx, out
}

// TestSameLogits computes the same prompt on two sequences, once with
// Ollama's Context.Compute and once on the Runner's thread: the logits
// must be bit-identical (same graph, same kernels), and the pinned Ollama
// context must have the layout the Runner reads (else it would silently
// fall back to the Go thread).
func TestSameLogits(t *testing.T) {
	for _, arch := range []string{gguf.ArchQwen3, gguf.ArchLlama, gguf.ArchQwen35} {
		t.Run(arch, func(t *testing.T) {
			m := load(t, arch)
			r, err := ggmlthread.New(2)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for round := range 3 { // the thread is reused
				// Different tokens each round, on fresh sequences, the
				// Runner first: a pass that did not run would read the
				// previous round's buffer.
				toks := []int32{1, 7, 42, 3, 99, 5, 11, 64}
				for i := range toks {
					toks[i] += int32(round)
				}
				ctx, out := forward(t, m, 2*round, toks)
				if !r.Supported(ctx, out) {
					t.Fatal("Ollama's ggml context no longer has the fields the Runner reads (b, graph, batchSize; sched, schedMu; t)")
				}
				got, err := r.Compute(ctx, out)
				ctx.Close()
				if err != nil {
					t.Fatal(err)
				}
				ctx, out = forward(t, m, 2*round+1, toks)
				ctx.Compute(out)
				want := out.Floats()
				ctx.Close()
				if len(want) == 0 || !slices.Equal(got, want) {
					t.Fatalf("round %d: %d logits on the runner's thread differ from Context.Compute's %d", round, len(got), len(want))
				}
			}
		})
	}
}

// TestClosed: Close is idempotent and a closed Runner refuses work.
func TestClosed(t *testing.T) {
	m := load(t, gguf.ArchQwen3)
	r, err := ggmlthread.New(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, out := forward(t, m, 0, []int32{1, 2})
	defer ctx.Close()
	if _, err := r.Compute(ctx, out); !errors.Is(err, ggmlthread.ErrClosed) {
		t.Fatalf("Compute after Close: %v, want ErrClosed", err)
	}
}

// TestConcurrentModels: two models in one process share Ollama's ggml
// CPU backend; passes of both computed at once (each model on its own
// Runner, as two engines) must give every logit they give alone. Without
// the device locks the two passes share the backend's work buffer and
// this fails within a few rounds.
func TestConcurrentModels(t *testing.T) {
	const rounds = 60
	ms := []model.Model{load(t, gguf.ArchQwen3), load(t, gguf.ArchLlama)}
	toks := func(m, r int) []int32 {
		ts := []int32{1, 7, 42, 3, 99, 5, 11, 64, 8, 13, 21, 34}
		for i := range ts {
			ts[i] += int32(3*r + m)
		}
		return ts
	}
	// Alone: the first half of the sequences.
	want := make([][][]float32, len(ms))
	for i, m := range ms {
		r, err := ggmlthread.New(1)
		if err != nil {
			t.Fatal(err)
		}
		for k := range rounds {
			ctx, out := forward(t, m, k, toks(i, k))
			got, err := r.Compute(ctx, out)
			ctx.Close()
			if err != nil {
				t.Fatal(err)
			}
			want[i] = append(want[i], got)
		}
		r.Close()
	}
	// At once: the second half, both models' passes interleaved.
	var wg sync.WaitGroup
	errs := make([]error, len(ms))
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := ggmlthread.New(1 + i)
			if err != nil {
				errs[i] = err
				return
			}
			defer r.Close()
			for k := range rounds {
				ctx, out := forwardErr(m, rounds+k, toks(i, k))
				if ctx == nil {
					errs[i] = fmt.Errorf("building pass %d failed", k)
					return
				}
				got, err := r.Compute(ctx, out)
				ctx.Close()
				if err != nil {
					errs[i] = err
					return
				}
				if !slices.Equal(got, want[i][k]) {
					errs[i] = fmt.Errorf("model %d, pass %d: logits computed beside the other model differ from those computed alone", i, k)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
