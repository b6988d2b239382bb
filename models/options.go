package models

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/ollama/ollama/ml"
)

// Options configure Load. The zero value of every field is a usable
// default.
type Options struct {
	// ChatTemplate is a chat template in Ollama's Go template syntax (an
	// Ollama store model's template layer) that RenderChat uses instead of
	// the GGUF's own. "" means the GGUF's (a model named from the Ollama
	// store gets its template layer by itself).
	ChatTemplate string
	// Threads is the number of CPU threads ggml uses; 0 means
	// runtime.NumCPU(). ggml's threads spin at barriers, so on a machine
	// other processes load, fewer threads are faster; tests with the tiny
	// generated models should use 1.
	Threads int
	// BatchSize is the most positions one forward pass computes (prompt
	// chunks and merged requests share it); 0 means 512.
	BatchSize int
	// ContextLength is the most positions one sequence may hold; 0 means the
	// model's trained context length, capped at 8192.
	ContextLength int
	// CacheSize is the number of KV-cache cells all sequences share (forks
	// share their common prefix, so many forks of one long prompt fit); 0
	// means 2*ContextLength. It is raised to BatchSize if smaller.
	CacheSize int
	// Sequences is the number of sequence slots; 0 means 32.
	Sequences int
	// StateMemory bounds the bytes the sequence slots' recurrent state may
	// take in the system's memory (models with recurrent layers, Qwen3.5's,
	// hold a full state per slot: about 50 MiB at Qwen3.5-4B's shape), for
	// the layers the CPU runs: 0 means the memory the system reports
	// available less the model file's size, negative no bound. The state of
	// layers on a GPU is bounded by nine tenths of the device's free memory
	// less its layers' weights and KV cache. Load fails with a
	// *StateMemoryError beyond either (a process that touched more would be
	// killed by the kernel's out-of-memory killer, or fail in CUDA's
	// allocator after loading the weights), unless FitSequences.
	StateMemory int64
	// FitSequences makes Load take as many sequence slots as the memories
	// above allow where Sequences would exceed them (at least one; Info
	// says how many), instead of failing.
	FitSequences bool
	// KVCacheType is "f16" (default), "f32", "q8_0" or "q4_0". Quantized
	// caches need flash attention (turned on by FlashAttention "auto").
	KVCacheType string
	// FlashAttention is "auto" (default: on when every layer runs on a GPU
	// that supports it, or when the KV cache is quantized; off on the CPU,
	// where it slows long prompts), "on" or "off".
	FlashAttention string
	// DeltaRule says how a Qwen3.5 model's gated delta-net (its short
	// convolution and recurrence) runs: "kernel" by nesy's own CPU kernels
	// on each sequence's own positions (any head size; where a layer runs
	// on a GPU, as "graph"); "operator" as one ggml operator (RWKV-7's
	// generalized delta rule) for every pass, where the heads are a
	// multiple of 64 (on a GPU: 64 or 128, the sizes of ggml's CUDA
	// kernel), sequences of a pass padded to equal lengths; "graph" as
	// ggml's general operators (per position for short passes, the
	// model's chunked form for long ones); "auto" (default) the kernels
	// where every layer runs on the CPU and the graph otherwise (the CUDA
	// operator has been checked on one GPU run only). Other models ignore it.
	DeltaRule string
	// GPULayers is the number of layers (the output layer counts as one)
	// to run on GPUs, taken from the end of the network: 0 means all of them
	// when ggml found a GPU backend (see docs/gpu.md), -1 means none.
	GPULayers int
	// MaxLogits bounds the logit rows one forward pass returns (the output
	// buffer is reserved for this many); 0 means max(Sequences, 64).
	// Requests asking for more rows are split over several passes.
	MaxLogits int
	// NoMerge disables merging concurrent Eval calls: each call runs alone,
	// first come first served (its own requests still share passes). For
	// comparisons; by default calls are merged when the engine's cost model
	// says it pays (see Engine).
	NoMerge bool
	// EqualPasses makes every multi-sequence pass of a recurrent model
	// (Qwen3.5) advance its sequences by the same count, so that requests
	// of several short lengths (a search's leaves) take a few passes of
	// equal counts (see planRecurrent). By default such requests share one
	// padded pass. For comparisons.
	EqualPasses bool
	// FullLogits makes every pass compute every token's logit, also when
	// its requests name their candidates (EvalRequest.Candidates); by
	// default an engine whose layers all run on the CPU computes only the
	// candidates' rows of the output projection. For comparisons.
	FullLogits bool
	// MergeWindow is how long an idle engine waits after the first Eval
	// arrives for others to join the same forward pass; 0 means no wait
	// (whatever is pending when the engine is free is merged).
	MergeWindow time.Duration
	// Logger receives load and engine messages; nil means slog.Default().
	Logger *slog.Logger

	// noWarmup skips graph reservation and the warm-up pass (benchmarks
	// measure what they save).
	noWarmup bool
	// noHybrid runs a Qwen3.5 model's passes through its own Forward, one
	// sequence a pass, as the engine did before hybridForward (tests
	// compare the two).
	noHybrid bool
}

// resolved are Options with defaults applied, in engine terms.
type resolved struct {
	Options
	kvType    ml.DType
	flash     ml.FlashAttentionType
	cacheCaps int // capacity argument of kvcache.Init (cells per sequence slot)
}

func (o Options) withDefaults(trainedCtx int) (resolved, error) {
	r := resolved{Options: o}
	if r.Threads <= 0 {
		r.Threads = runtime.NumCPU()
	}
	if r.BatchSize <= 0 {
		r.BatchSize = 512
	}
	if r.ContextLength <= 0 {
		r.ContextLength = 8192
		if trainedCtx > 0 {
			r.ContextLength = min(trainedCtx, 8192)
		}
	}
	if r.Sequences <= 0 {
		r.Sequences = 32
	}
	if r.CacheSize <= 0 {
		r.CacheSize = 2 * r.ContextLength
	}
	r.CacheSize = max(r.CacheSize, r.BatchSize)
	if r.MaxLogits <= 0 {
		r.MaxLogits = max(r.Sequences, 64)
	}
	r.MaxLogits = min(r.MaxLogits, r.BatchSize)
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	if r.MergeWindow < 0 {
		return r, fmt.Errorf("models: negative merge window %v", r.MergeWindow)
	}
	// kvcache.Init sizes the cache as slots*capacity cells; sequences share
	// cells, so only the product matters.
	r.cacheCaps = (r.CacheSize + r.Sequences - 1) / r.Sequences
	switch r.KVCacheType {
	case "", "f16":
		r.KVCacheType, r.kvType = "f16", ml.DTypeF16
	case "f32":
		r.kvType = ml.DTypeF32
	case "q8_0":
		r.kvType = ml.DTypeQ80
	case "q4_0":
		r.kvType = ml.DTypeQ40
	default:
		return r, fmt.Errorf("models: unknown KV cache type %q (f16, f32, q8_0 or q4_0)", r.KVCacheType)
	}
	switch r.FlashAttention {
	case "", "auto":
		r.FlashAttention, r.flash = "auto", ml.FlashAttentionAuto
	case "on":
		r.flash = ml.FlashAttentionEnabled
	case "off":
		r.flash = ml.FlashAttentionDisabled
	default:
		return r, fmt.Errorf("models: flash attention must be auto, on or off, not %q", r.FlashAttention)
	}
	if r.DeltaRule == "" {
		r.DeltaRule = "auto"
	}
	if err := CheckDeltaRule(r.DeltaRule); err != nil {
		return r, err
	}
	if r.GPULayers < -1 {
		return r, fmt.Errorf("models: GPU layers must be -1 (none), 0 (all) or a count, not %d", r.GPULayers)
	}
	return r, nil
}

// CheckDeltaRule returns an error unless s is a value of Options.DeltaRule
// ("auto", "kernel", "operator" or "graph"; "" is auto).
func CheckDeltaRule(s string) error {
	switch s {
	case "", "auto", "kernel", "operator", "graph":
		return nil
	}
	return fmt.Errorf("models: delta rule must be auto, kernel, operator or graph, not %q", s)
}
