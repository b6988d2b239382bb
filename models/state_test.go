package models

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	fsggml "github.com/ollama/ollama/fs/ggml"
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

// TestStateShares: on a load that offloads layers to GPUs, each memory's
// share of the recurrent state is its own delta-net layers' (the shares
// add up to StateBytes), and a GPU's fixed part is its layers' weights and
// its attention layers' KV cache; fitSlots then bounds the slots by the
// tightest GPU and names it. No GPU is needed: the placement is what
// gpuLayers would hand Load.
func TestStateShares(t *testing.T) {
	spec := gguf.Default(gguf.ArchQwen35)
	spec.Layers, spec.HeadDim = 8, 16 // delta-net layers 0-2 and 4-6, full attention 3 and 7
	meta := readMetaT(t, spec)
	per := statePerLayer(meta.KV())
	if got, want := stateLayers(meta.KV()), []int{0, 1, 2, 4, 5, 6}; !slices.Equal(got, want) {
		t.Fatalf("stateLayers %v, want %v", got, want)
	}
	if stateBytes(meta.KV()) != 6*per || per == 0 {
		t.Fatalf("stateBytes %d, per layer %d", stateBytes(meta.KV()), per)
	}
	var weights [10]int64 // by layer; 8 is the output layer, 9 the rest
	for _, ts := range meta.Tensors().Items() {
		l := 9
		if n, err := fmt.Sscanf(ts.Name, "blk.%d.", &l); n != 1 || err != nil {
			l = 9
			if strings.HasPrefix(ts.Name, "output") {
				l = 8
			}
		}
		weights[l] += int64(ts.Size())
	}
	const cells = 1024
	kvLayer := int64(cells * spec.KVHeads * 2 * spec.HeadDim * 2) // K and V, f16

	gib := int64(1) << 30
	list := ml.GPULayersList{
		{DeviceID: ml.DeviceID{ID: "0"}, Layers: []int{2, 3, 4}},
		{DeviceID: ml.DeviceID{ID: "1"}, Layers: []int{5, 6, 7, 8}},
	}
	devs := []ml.DeviceInfo{{Name: "CUDA0", FreeMemory: uint64(10 * gib)}, {Name: "CUDA1", FreeMemory: uint64(20 * gib)}}
	shares := stateShares(meta, list, devs, 4*gib, cells, ml.DTypeF16)
	want := []stateShare{
		{free: 4 * gib, perSlot: 2 * per},
		{device: "CUDA0", free: 9 * gib, perSlot: 2 * per, fixed: weights[2] + weights[3] + weights[4] + kvLayer},
		{device: "CUDA1", free: 18 * gib, perSlot: 2 * per, fixed: weights[5] + weights[6] + weights[7] + weights[8] + kvLayer},
	}
	if !slices.Equal(shares, want) {
		t.Fatalf("shares\n%+v\nwant\n%+v", shares, want)
	}
	if weights[8] == 0 {
		t.Fatal("no output weights counted")
	}
	if q := stateShares(meta, list, devs, 4*gib, cells, ml.DTypeQ80); q[1].fixed-weights[2]-weights[3]-weights[4] != kvLayer*34/64 {
		t.Errorf("a q8_0 cache's bytes: %d, want %d", q[1].fixed-weights[2]-weights[3]-weights[4], kvLayer*34/64)
	}

	// The tightest GPU bounds the slots: CUDA1 with room for three.
	shares[2].free = shares[2].fixed + 3*shares[2].perSlot + 1
	o, err := Options{Sequences: 8, Logger: slog.New(slog.DiscardHandler)}.withDefaults(0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fitSlots(o, "m", shares)
	var serr *StateMemoryError
	if !errors.As(err, &serr) || serr.Fit() != 3 || serr.Device != "CUDA1" || serr.PerSlot != 2*per {
		t.Fatalf("fitSlots: %v, want CUDA1 fitting 3", err)
	}
	if !strings.Contains(err.Error(), "free for it on CUDA1") || !strings.Contains(err.Error(), "at most 3") {
		t.Errorf("error %q does not name the device and the fit", err)
	}
	o.FitSequences = true
	if n, err := fitSlots(o, "m", shares); n != 3 || err != nil {
		t.Errorf("FitSequences: %d slots, %v; want 3", n, err)
	}
	// A GPU whose weights alone exceed its memory fits no slot.
	shares[1].free = shares[1].fixed / 2
	if _, err := fitSlots(o, "m", shares); !errors.As(err, &serr) || serr.Device != "CUDA0" || serr.Fit() != 0 {
		t.Errorf("weights over the free memory: %v, want CUDA0 fitting none", err)
	}
	// Unknown free memory (0) bounds nothing; the whole model on the CPU
	// is one share of the whole state.
	shares[1].free, shares[2].free = 0, 0
	if n, err := fitSlots(o, "m", shares); n != 8 || err != nil {
		t.Errorf("unknown GPU memory: %d, %v; want 8", n, err)
	}
	if got := stateShares(meta, nil, nil, gib, cells, ml.DTypeF16); !slices.Equal(got, []stateShare{{free: gib, perSlot: 6 * per}}) {
		t.Errorf("CPU only: %+v", got)
	}
	if got := stateShares(readMetaT(t, gguf.Default(gguf.ArchLlama)), list, devs, gib, cells, ml.DTypeF16); got != nil {
		t.Errorf("llama: %+v, want no shares", got)
	}
}

// TestTensorLayer: tensors go to the layers Ollama's backend places them in.
func TestTensorLayer(t *testing.T) {
	for _, c := range []struct {
		name string
		want int
	}{
		{"blk.0.attn_q.weight", 0},
		{"blk.17.ssm_conv1d.weight", 17},
		{"output.weight", 32},
		{"output_norm.weight", 32},
		{"token_embd.weight", -1},
		{"blk.x.attn_q.weight", -1},
		{"blk.3", -1},
		{"rope_freqs.weight", -1},
	} {
		if got := tensorLayer(c.name, 32); got != c.want {
			t.Errorf("tensorLayer(%q) = %d, want %d", c.name, got, c.want)
		}
	}
}

// readMetaT writes spec and reads its metadata back.
func readMetaT(t *testing.T, spec gguf.Spec) *fsggml.GGML {
	t.Helper()
	path := t.TempDir() + "/m.gguf"
	if err := gguf.Write(path, spec); err != nil {
		t.Fatal(err)
	}
	meta, err := readMeta(path)
	if err != nil {
		t.Fatal(err)
	}
	return meta
}
