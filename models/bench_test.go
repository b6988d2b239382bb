package models

import (
	"context"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/model"
	"github.com/ollama/ollama/model/input"

	"github.com/nesy-dev/nesy/models/gguf"
)

// The benchmarks run on the reference model (gguf.Reference: llama,
// 768x12, 2048 FFN, 32000 vocabulary, F32), generated once per test binary
// run into a temporary folder (about 540 MB, a few seconds).
//
// Environment: NESY_BENCH_THREADS (default: all CPUs), NESY_BENCH_GPU_LAYERS
// (Options.GPULayers; default 0 = all layers on a GPU when ggml found one),
// NESY_BENCH_MODEL (a GGUF to use instead of the reference model), NESY_BENCH_FLASH
// (Options.FlashAttention: auto, on or off; default auto), NESY_BENCH_LOG
// (debug: the engine's and ggml's debug lines on stderr, among them ggml's
// CUDA backend saying when and why it does not use CUDA graphs).
//
// Each benchmark reports tok/s. The Raw* benchmarks drive Ollama's engine
// directly (model.New, cache, Forward, Compute) with the same shapes, as
// the baseline the models API is compared with.

var refModel struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	if os.Getenv("NESY_BENCH_LOG") == "debug" {
		slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})))
	}
	code := m.Run()
	if refModel.dir != "" {
		os.RemoveAll(refModel.dir)
	}
	os.Exit(code)
}

func referenceModel(b *testing.B) string {
	b.Helper()
	if p := os.Getenv("NESY_BENCH_MODEL"); p != "" {
		return p
	}
	refModel.once.Do(func() {
		refModel.dir, refModel.err = os.MkdirTemp("", "nesy-bench-")
		if refModel.err != nil {
			return
		}
		refModel.path = filepath.Join(refModel.dir, "reference.gguf")
		refModel.err = gguf.Write(refModel.path, gguf.Reference())
	})
	if refModel.err != nil {
		b.Fatal(refModel.err)
	}
	return refModel.path
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func benchEngine(b *testing.B, opts Options) *Engine {
	b.Helper()
	path := referenceModel(b)
	opts.Threads = envInt("NESY_BENCH_THREADS", 0)
	opts.GPULayers = envInt("NESY_BENCH_GPU_LAYERS", 0)
	if opts.FlashAttention == "" {
		// NESY_BENCH_FLASH=on|off|auto measures either attention path.
		opts.FlashAttention = os.Getenv("NESY_BENCH_FLASH")
	}
	// NESY_BENCH_DELTA_RULE=operator|graph|auto: either delta-rule path of
	// a Qwen3.5 model (NESY_BENCH_MODEL), e.g. the operator on a GPU.
	opts.DeltaRule = os.Getenv("NESY_BENCH_DELTA_RULE")
	if opts.ContextLength == 0 {
		opts.ContextLength = 4096
	}
	e, err := Load(context.Background(), path, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	b.Logf("%s on %s; %s", e.Info().Name, e.Info().Device, SystemInfo())
	return e
}

const (
	benchPrompt = 512 // prefill length (one batch)
	benchWidth  = 16  // forked sequences
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportTokens reports throughput, and CPU time per token since cpu0 (the
// figure to compare when other processes load the machine: wall time then
// mostly measures waiting; with one thread no CPU time is spent spinning).
func reportTokens(b *testing.B, tokens int, cpu0 time.Duration) {
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(tokens), "cpu-us/tok")
}

// BenchmarkPrefill: a 512-token prompt on a fresh sequence, warm.
func BenchmarkPrefill(b *testing.B) { benchPrefill(b, benchEngine(b, Options{})) }

// benchPrefill evaluates a benchPrompt-token prompt on a fresh sequence of
// e, timing only the evaluation.
func benchPrefill(b *testing.B, e *Engine) { benchPrefillN(b, e, benchPrompt) }

// BenchmarkPrefillLong is BenchmarkPrefill with a 2,560-token prompt, the
// length of the datasets' planning prompts (ALFWorld's true-state prompts
// take about 2,500 Qwen tokens): where attention's share of a prefill grows
// (e.g. NESY_BENCH_FLASH=on against off).
func BenchmarkPrefillLong(b *testing.B) { benchPrefillN(b, benchEngine(b, Options{}), 5*benchPrompt) }

// benchPrefillN evaluates an n-token prompt on a fresh sequence of e,
// timing only the evaluation.
func benchPrefillN(b *testing.B, e *Engine, n int) {
	toks := testTokens(1, n, e.Info().VocabSize)
	s, _ := e.NewSequence()
	ctx := context.Background()
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := e.Eval(ctx, []EvalRequest{{Seq: s, Tokens: toks}}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := e.Truncate(s, 0); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	reportTokens(b, b.N*n, cpu0)
}

// BenchmarkDecode: one token at a time on one sequence after a 64-token
// prompt (the sequence is cut back every 256 tokens).
func BenchmarkDecode(b *testing.B) {
	e := benchEngine(b, Options{})
	v := e.Info().VocabSize
	s, _ := e.NewSequence()
	ctx := context.Background()
	if _, err := e.Eval(ctx, []EvalRequest{{Seq: s, Tokens: testTokens(1, 64, v)}}); err != nil {
		b.Fatal(err)
	}
	next := testTokens(2, 256, v)
	i := 0
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := e.Eval(ctx, []EvalRequest{{Seq: s, Tokens: next[i : i+1]}}); err != nil {
			b.Fatal(err)
		}
		if i++; i == len(next) {
			b.StopTimer()
			i = 0
			if err := e.Truncate(s, 64); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	reportTokens(b, b.N, cpu0)
}

// forkedSetup evaluates a 64-token prompt and forks it 16 times.
func forkedSetup(b *testing.B, e *Engine) ([]SeqID, []int32) {
	b.Helper()
	v := e.Info().VocabSize
	root, _ := e.NewSequence()
	prompt := testTokens(3, 64, v)
	if _, err := e.Eval(context.Background(), []EvalRequest{{Seq: root, Tokens: prompt}}); err != nil {
		b.Fatal(err)
	}
	seqs := make([]SeqID, benchWidth)
	for i := range seqs {
		var err error
		if seqs[i], err = e.Fork(root, len(prompt)); err != nil {
			b.Fatal(err)
		}
	}
	return seqs, testTokens(4, benchWidth, v)
}

// BenchmarkForked16Batched: one step of 16 forked sequences in one Eval
// (one forward pass); tok/s counts the 16 tokens.
func BenchmarkForked16Batched(b *testing.B) {
	e := benchEngine(b, Options{})
	seqs, toks := forkedSetup(b, e)
	ctx := context.Background()
	reqs := make([]EvalRequest, len(seqs))
	steps := 0
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		for i, s := range seqs {
			reqs[i] = EvalRequest{Seq: s, Tokens: toks[i : i+1]}
		}
		if _, err := e.Eval(ctx, reqs); err != nil {
			b.Fatal(err)
		}
		if steps++; steps == 128 {
			b.StopTimer()
			for _, s := range seqs {
				if err := e.Truncate(s, 64); err != nil {
					b.Fatal(err)
				}
			}
			steps = 0
			b.StartTimer()
		}
	}
	reportTokens(b, b.N*len(seqs), cpu0)
}

// BenchmarkForked16Single: the same step as 16 single-sequence Eval calls
// in a row (16 forward passes).
func BenchmarkForked16Single(b *testing.B) {
	e := benchEngine(b, Options{})
	seqs, toks := forkedSetup(b, e)
	ctx := context.Background()
	steps := 0
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		for i, s := range seqs {
			if _, err := e.Eval(ctx, []EvalRequest{{Seq: s, Tokens: toks[i : i+1]}}); err != nil {
				b.Fatal(err)
			}
		}
		if steps++; steps == 128 {
			b.StopTimer()
			for _, s := range seqs {
				if err := e.Truncate(s, 64); err != nil {
					b.Fatal(err)
				}
			}
			steps = 0
			b.StartTimer()
		}
	}
	reportTokens(b, b.N*len(seqs), cpu0)
}

// BenchmarkForked16Concurrent: 16 goroutines, one per forked sequence, each
// calling Eval for its own token; the engine merges them.
func BenchmarkForked16Concurrent(b *testing.B) {
	e := benchEngine(b, Options{})
	seqs, toks := forkedSetup(b, e)
	ctx := context.Background()
	steps := 0
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		var wg sync.WaitGroup
		for i, s := range seqs {
			wg.Go(func() {
				if _, err := e.Eval(ctx, []EvalRequest{{Seq: s, Tokens: toks[i : i+1]}}); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		if steps++; steps == 128 {
			b.StopTimer()
			for _, s := range seqs {
				if err := e.Truncate(s, 64); err != nil {
					b.Fatal(err)
				}
			}
			steps = 0
			b.StartTimer()
		}
	}
	reportTokens(b, b.N*len(seqs), cpu0)
}

// rawEngine drives Ollama's engine without the models API.
type rawEngine struct {
	m model.Model
}

func newRawEngine(b *testing.B) *rawEngine {
	b.Helper()
	path := referenceModel(b)
	o, err := Options{GPULayers: envInt("NESY_BENCH_GPU_LAYERS", 0), Threads: envInt("NESY_BENCH_THREADS", 0)}.withDefaults(4096)
	if err != nil {
		b.Fatal(err)
	}
	params := ml.BackendParams{AllocMemory: true, NumThreads: o.Threads}
	if o.GPULayers != -1 {
		meta, err := readMeta(path)
		if err != nil {
			b.Fatal(err)
		}
		if params.GPULayers, _, _, err = gpuLayers(path, o, int(meta.KV().BlockCount())); err != nil {
			b.Fatal(err)
		}
	}
	m, err := model.New(path, params)
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Backend().Load(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	m.Config().Cache.Init(m.Backend(), ml.DTypeF16, benchWidth+1, 4096, 512)
	b.Cleanup(func() { m.Config().Cache.Close(); m.Backend().Close() })
	return &rawEngine{m: m}
}

// step runs one forward pass of toks at positions for seqs, returning
// the last row's logits.
func (r *rawEngine) step(b *testing.B, toks []int32, pos []int32, seqs []int, outputs []int32) []float32 {
	ctx := r.m.Backend().NewContext()
	defer ctx.Close()
	batch := input.Batch{
		Inputs:    ctx.Input().FromInts(toks, len(toks)),
		Outputs:   ctx.Input().FromInts(outputs, len(outputs)),
		Positions: pos, Sequences: seqs,
	}
	if err := r.m.Config().Cache.StartForward(ctx, batch, false); err != nil {
		b.Fatal(err)
	}
	t, err := r.m.Forward(ctx, batch)
	if err != nil {
		b.Fatal(err)
	}
	ctx.Forward(t).Compute(t)
	return t.Floats()
}

func (r *rawEngine) prompt(b *testing.B, seq int, toks []int32, from int) {
	pos := make([]int32, len(toks))
	seqs := make([]int, len(toks))
	for i := range toks {
		pos[i], seqs[i] = int32(from+i), seq
	}
	r.step(b, toks, pos, seqs, []int32{int32(len(toks) - 1)})
}

func BenchmarkRawPrefill(b *testing.B) {
	r := newRawEngine(b)
	toks := testTokens(1, benchPrompt, 32000)
	r.prompt(b, 0, toks, 0) // warm
	r.m.Config().Cache.Remove(0, 0, math.MaxInt32)
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		r.prompt(b, 0, toks, 0)
		b.StopTimer()
		r.m.Config().Cache.Remove(0, 0, math.MaxInt32)
		b.StartTimer()
	}
	reportTokens(b, b.N*benchPrompt, cpu0)
}

func BenchmarkRawDecode(b *testing.B) {
	r := newRawEngine(b)
	r.prompt(b, 0, testTokens(1, 64, 32000), 0)
	next := testTokens(2, 256, 32000)
	i := 0
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		r.step(b, next[i:i+1], []int32{int32(64 + i)}, []int{0}, []int32{0})
		if i++; i == len(next) {
			b.StopTimer()
			i = 0
			r.m.Config().Cache.Remove(0, 64, math.MaxInt32)
			b.StartTimer()
		}
	}
	reportTokens(b, b.N, cpu0)
}

func BenchmarkRawForked16Batched(b *testing.B) {
	r := newRawEngine(b)
	cache := r.m.Config().Cache
	r.prompt(b, 0, testTokens(3, 64, 32000), 0)
	for i := 1; i <= benchWidth; i++ {
		cache.CopyPrefix(0, i, 64)
	}
	toks := testTokens(4, benchWidth, 32000)
	pos := make([]int32, benchWidth)
	seqs := make([]int, benchWidth)
	outs := make([]int32, benchWidth)
	steps := 0
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		for i := range seqs {
			pos[i], seqs[i], outs[i] = int32(64+steps), i+1, int32(i)
		}
		r.step(b, toks, pos, seqs, outs)
		if steps++; steps == 128 {
			b.StopTimer()
			for i := 1; i <= benchWidth; i++ {
				cache.Remove(i, 64, math.MaxInt32)
			}
			steps = 0
			b.StartTimer()
		}
	}
	reportTokens(b, b.N*benchWidth, cpu0)
}

// BenchmarkFirstStep: the first decode step after Load against later ones,
// with the warm-up (graph reservation and a first pass at load) and
// without it. Reports milliseconds and the first/steady ratio.
func BenchmarkFirstStep(b *testing.B) {
	for _, warm := range []bool{true, false} {
		name := "warm"
		if !warm {
			name = "cold"
		}
		b.Run(name, func(b *testing.B) {
			var first, steady time.Duration
			for b.Loop() {
				e := benchEngine(b, Options{noWarmup: !warm})
				s, _ := e.NewSequence()
				toks := testTokens(9, 12, e.Info().VocabSize)
				ctx := context.Background()
				t0 := time.Now()
				if _, err := e.Eval(ctx, []EvalRequest{{Seq: s, Tokens: toks[:1]}}); err != nil {
					b.Fatal(err)
				}
				first += time.Since(t0)
				t0 = time.Now()
				for _, tok := range toks[1:] {
					if _, err := e.Eval(ctx, []EvalRequest{{Seq: s, Tokens: []int32{tok}}}); err != nil {
						b.Fatal(err)
					}
				}
				steady += time.Since(t0) / time.Duration(len(toks)-1)
				e.Close()
			}
			b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "first-ms")
			b.ReportMetric(float64(steady.Microseconds())/1000/float64(b.N), "steady-ms")
			b.ReportMetric(float64(first)/float64(steady), "first/steady")
		})
	}
}
