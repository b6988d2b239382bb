package models

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ollama/ollama/ml"

	"github.com/nesy-dev/nesy/models/gguf"
)

// TestStateBytes: the recurrent state per sequence slot that Load reports
// (from the file's metadata, before anything is allocated) is what Ollama's
// cache then allocates per slot: the sum over its convolution and delta
// state buffers, read from the cache (forkCopier's view of it). Models
// without recurrent layers report none.
func TestStateBytes(t *testing.T) {
	specs := hybridSpecs()
	for _, name := range []string{"qwen35", "qwen35-wide", "qwen35-deep", "qwen35-h64", "qwen35-reordered", "qwen35moe"} {
		t.Run(name, func(t *testing.T) {
			const slots = 8
			e := newTestEngine(t, specs[name], Options{Sequences: slots})
			if e.forks == nil {
				t.Fatal("no view of the recurrent cache (forkCopier)")
			}
			var allocated int64
			layers := 0
			for _, bufs := range []map[int]ml.Tensor{*e.forks.convStates, *e.forks.recurrentStates} {
				for _, b := range bufs {
					if b.Dim(1) != slots || b.DType() != ml.DTypeF32 {
						t.Fatalf("a state buffer is %v [%d, %d], want F32 with %d slots", b.DType(), b.Dim(0), b.Dim(1), slots)
					}
					allocated += int64(b.Dim(0)) * 4
					layers++
				}
			}
			info := e.Info()
			t.Logf("%d buffers, %d bytes per slot", layers, allocated)
			if info.StateBytes != allocated || allocated == 0 {
				t.Errorf("Info().StateBytes = %d, the cache allocates %d per slot", info.StateBytes, allocated)
			}
			if info.Sequences != slots {
				t.Errorf("Info().Sequences = %d, want %d", info.Sequences, slots)
			}
		})
	}
	if b := newTestEngine(t, gguf.Default(gguf.ArchLlama), Options{}).Info().StateBytes; b != 0 {
		t.Errorf("llama: StateBytes %d, want 0", b)
	}
}

// TestStateMemory: slots whose recurrent state exceeds Options.StateMemory
// fail to load with a *StateMemoryError naming the sizes and the slots that
// fit, or, with FitSequences, load as many as fit; no bound (negative)
// loads them all, and an attention model has no state to bound.
func TestStateMemory(t *testing.T) {
	spec := gguf.Default(gguf.ArchQwen35)
	per := newTestEngine(t, spec, Options{Sequences: 1}).Info().StateBytes
	if per <= 0 {
		t.Fatalf("StateBytes %d", per)
	}
	limit := 3*per + per/2 // three slots fit

	_, err := loadSpec(t, spec, Options{Sequences: 8, StateMemory: limit})
	var serr *StateMemoryError
	if !errors.As(err, &serr) || serr.Fit() != 3 || serr.PerSlot != per || serr.Sequences != 8 {
		t.Fatalf("8 slots in room for 3: %v, want a StateMemoryError fitting 3", err)
	}
	for _, want := range []string{"8 sequence slots", "at most 3", "--sequences"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	e, err := loadSpec(t, spec, Options{Sequences: 8, StateMemory: limit, FitSequences: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Info().Sequences; got != 3 {
		t.Fatalf("FitSequences loaded %d slots, want 3", got)
	}
	ctx := context.Background()
	for i := range 3 {
		s, err := e.NewSequence()
		if err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
		if _, err := e.Eval(ctx, []EvalRequest{{Seq: s, Tokens: testTokens(i, 5, e.Info().VocabSize)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.NewSequence(); err == nil {
		t.Error("a fourth sequence on three slots")
	}

	// Slots whose state overflows int64 (1<<60 of them) are refused, not
	// wrapped around into a small product.
	if _, err := loadSpec(t, spec, Options{Sequences: 1 << 60, StateMemory: limit}); !errors.As(err, &serr) || serr.Fit() != 3 {
		t.Errorf("1<<60 slots: %v, want a StateMemoryError fitting 3", err)
	}
	if _, err := loadSpec(t, spec, Options{Sequences: 1, StateMemory: per / 2, FitSequences: true}); !errors.As(err, &serr) || serr.Fit() != 0 {
		t.Errorf("not one slot fits, FitSequences: %v, want a StateMemoryError", err)
	}
	if e, err := loadSpec(t, spec, Options{Sequences: 8, StateMemory: -1}); err != nil || e.Info().Sequences != 8 {
		t.Errorf("no bound: %v", err)
	}
	if e, err := loadSpec(t, gguf.Default(gguf.ArchLlama), Options{Sequences: 8, StateMemory: 1}); err != nil || e.Info().Sequences != 8 {
		t.Errorf("llama with a 1-byte state bound: %v", err)
	}
}

// loadSpec writes spec and loads it (one thread), returning Load's error.
func loadSpec(t *testing.T, spec gguf.Spec, opts Options) (*Engine, error) {
	t.Helper()
	path := t.TempDir() + "/model.gguf"
	if err := gguf.Write(path, spec); err != nil {
		t.Fatal(err)
	}
	opts.Threads = 1
	e, err := Load(context.Background(), path, opts)
	if err == nil {
		t.Cleanup(func() { e.Close() })
	}
	return e, err
}
