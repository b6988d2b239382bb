package ggmlthread_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/model"
	"github.com/ollama/ollama/model/input"
	_ "github.com/ollama/ollama/model/models" // registers the architectures

	"github.com/nesy-dev/nesy/models/ggmlthread"
	"github.com/nesy-dev/nesy/models/gguf"
)

// load generates a small model of arch and loads it into Ollama's engine
// with a KV cache for six sequences.
func load(t *testing.T, arch string) model.Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), arch+".gguf")
	if err := gguf.Write(path, gguf.Default(arch)); err != nil {
		t.Fatal(err)
	}
	m, err := model.New(path, ml.BackendParams{AllocMemory: true, NumThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Backend().Close() })
	if err := m.Backend().Load(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	m.Config().Cache.Init(m.Backend(), ml.DTypeF16, 6, 256, 64)
	t.Cleanup(func() { m.Config().Cache.Close() })
	return m
}

// forward builds the graph of toks on sequence seq from position 0, with
// every row as an output.
func forward(t *testing.T, m model.Model, seq int, toks []int32) (ml.Context, ml.Tensor) {
	t.Helper()
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
		t.Fatal(err)
	}
	out, err := m.Forward(ctx, b)
	if err != nil {
		t.Fatal(err)
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
			r, err := ggmlthread.New()
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
				if !ggmlthread.Supported(ctx, out) {
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
	r, err := ggmlthread.New()
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
