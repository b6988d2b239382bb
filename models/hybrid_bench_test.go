package models

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nesy-dev/nesy/models/gguf"
)

// hybridBenchSpec is the qwen35 model of the hybrid benchmarks: 512 wide,
// 8 layers (6 gated delta-net, 2 full attention), 1536 FFN, 4 value heads
// and 2 key heads of 64, a 32,000-token vocabulary, F32 (about 57M
// parameters, 230 MB): large enough that the forward pass dominates, and
// with Qwen3.5-4B's ratio of recurrent state to layer weights (0.5%:
// 128x128x32 state values per layer against about 110M weights), which
// sets how much of a step is per-sequence state work that batching does
// not share. NESY_BENCH_HYBRID_HEADS sets the value heads (8 doubles the
// state's share).
func hybridBenchSpec() gguf.Spec {
	s := gguf.Default(gguf.ArchQwen35)
	s.Embd, s.Layers, s.FFN, s.Heads, s.KVHeads, s.HeadDim, s.VocabSize, s.Seed = 512, 8, 1536, 4, 2, 64, 32000, 1
	s.Heads = envInt("NESY_BENCH_HYBRID_HEADS", s.Heads)
	return s
}

// hybridBenchEngine writes the benchmark's qwen35 model into a temporary
// folder and loads it, or loads the GGUF NESY_BENCH_MODEL names (e.g. the
// MCTS benchmarks' model, to compare a search's passes with a prefill of
// the same model) (NESY_BENCH_THREADS threads, default 1;
// NESY_BENCH_DELTA_RULE the delta-rule path, default auto;
// NESY_BENCH_FLASH the attention path, default auto).
func hybridBenchEngine(b *testing.B) *Engine {
	b.Helper()
	path := os.Getenv("NESY_BENCH_MODEL")
	if path == "" {
		dir, err := os.MkdirTemp("", "nesy-hybrid-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		path = filepath.Join(dir, "qwen35.gguf")
		if err := gguf.Write(path, hybridBenchSpec()); err != nil {
			b.Fatal(err)
		}
	}
	e, err := Load(context.Background(), path, Options{Threads: envInt("NESY_BENCH_THREADS", 1), ContextLength: 4096, Sequences: 64,
		DeltaRule: os.Getenv("NESY_BENCH_DELTA_RULE"), FlashAttention: os.Getenv("NESY_BENCH_FLASH"),
		// NESY_BENCH_NO_HYBRID=1: the model's own Forward, one sequence a pass
		// (how a Qwen3.5 file with its vision tower ran before 2026-12-06).
		noHybrid: os.Getenv("NESY_BENCH_NO_HYBRID") == "1"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e
}

// BenchmarkHybridForked16 is one decoding step of 16 forks of a 64-token
// prompt of a qwen35 model: "batched" evaluates the 16 tokens in one Eval
// call (one forward pass over 16 sequences), "single" in 16 calls in a
// row, "padded" one pass where four forks take 2 or 3 tokens and the rest
// one (a search step whose leaves spell different numbers of forced
// tokens: a padded pass of 3 positions per fork, 22 own, 26 pads). The
// first step copies each fork's recurrent state (copy on write); every 128
// steps the forks are cut back to the prompt (restoring its checkpoint),
// off the clock. "fresh" is "batched" with 16 new forks at every step (see
// benchFreshForks): what a search pays for its leaves. On a busy machine
// run the modes in turn, e.g.
//
//	for i in 1 2 3 4 5 6; do for m in batched single; do
//	  go test ./models -run XXX -bench HybridForked16/$m; done; done
func BenchmarkHybridForked16(b *testing.B) {
	e := hybridBenchEngine(b)
	seqs, toks := forkedSetup(b, e)
	ctx := context.Background()
	v := e.Info().VocabSize
	for _, mode := range []string{"batched", "single", "padded", "fresh"} {
		b.Run(mode, func(b *testing.B) {
			if mode == "fresh" {
				benchFreshForks(b, e, seqs[0], toks)
				return
			}
			reqs := make([]EvalRequest, len(seqs))
			tokens := 0
			for i, s := range seqs {
				n := 1
				if mode == "padded" && i%4 == 0 {
					n = 3 - (i/4)%2 // 3, 2, 3, 2
				}
				reqs[i] = EvalRequest{Seq: s, Tokens: toks[i : i+1]}
				if n > 1 {
					reqs[i].Tokens = testTokens(5+i, n, v)
				}
				tokens += n
			}
			steps, calls := 0, e.Stats().ModelCalls
			cpu0 := cpuTime()
			for b.Loop() {
				if mode != "single" {
					if _, err := e.Eval(ctx, reqs); err != nil {
						b.Fatal(err)
					}
				} else {
					for _, r := range reqs {
						if _, err := e.Eval(ctx, []EvalRequest{r}); err != nil {
							b.Fatal(err)
						}
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
			reportTokens(b, b.N*tokens, cpu0)
			b.ReportMetric(float64(e.Stats().ModelCalls-calls)/float64(b.N), "passes/op")
		})
	}
}

// BenchmarkHybridPrefill is BenchmarkPrefill on the hybrid benchmark
// model: a 512-token prompt on a fresh sequence, warm (with heads of 64 the
// delta rule runs as one operator; before, the model's chunked delta-net
// ran it).
func BenchmarkHybridPrefill(b *testing.B) { benchPrefill(b, hybridBenchEngine(b)) }

// benchFreshForks times one step of 16 new forks of src (at its end) in one
// Eval, as a search's leaves are: each fork shares src's recurrent state
// until the pass, whose copy on write then copies it (and src's state
// checkpoints) into the fork's own slot. Forking and releasing are off the
// clock; against "batched" (forks that already own their states) it
// measures those copies.
func benchFreshForks(b *testing.B, e *Engine, src SeqID, toks []int32) {
	ctx := context.Background()
	reqs := make([]EvalRequest, len(toks))
	var forks []SeqID
	release := func() {
		for _, f := range forks {
			e.Release(f)
		}
		forks = forks[:0]
	}
	defer release()
	cpu0 := cpuTime()
	for b.Loop() {
		b.StopTimer()
		release()
		for i := range reqs {
			f, err := e.Fork(src, e.Len(src))
			if err != nil {
				b.Fatal(err)
			}
			forks = append(forks, f)
			reqs[i] = EvalRequest{Seq: f, Tokens: toks[i : i+1]}
		}
		b.StartTimer()
		if _, err := e.Eval(ctx, reqs); err != nil {
			b.Fatal(err)
		}
	}
	reportTokens(b, b.N*len(reqs), cpu0)
}

// BenchmarkLoad times Load of the GGUF NESY_BENCH_MODEL names (the hybrid
// benchmark model when unset) with NESY_BENCH_SEQS sequence slots (default
// 128, the searches'), NESY_BENCH_THREADS threads (default 2): reading the
// weights, and for a recurrent model allocating and zeroing every slot's
// state. Whether the buffers take huge pages is the process's environment:
// compare GLIBC_TUNABLES unset with glibc.malloc.hugetlb=1 (what nesy
// re-executes itself with; see internal/hugepages), e.g.
//
//	go test -c -o models.test ./models
//	for t in "" glibc.malloc.hugetlb=1; do GLIBC_TUNABLES=$t NESY_BENCH_MODEL=m.gguf \
//	  ./models.test -test.run XXX -test.bench '^BenchmarkLoad$' -test.benchtime 1x; done
func BenchmarkLoad(b *testing.B) {
	path := os.Getenv("NESY_BENCH_MODEL")
	if path == "" {
		path = filepath.Join(b.TempDir(), "qwen35.gguf")
		if err := gguf.Write(path, hybridBenchSpec()); err != nil {
			b.Fatal(err)
		}
	}
	opts := Options{Threads: envInt("NESY_BENCH_THREADS", 2), Sequences: envInt("NESY_BENCH_SEQS", 128)}
	for b.Loop() {
		e, err := Load(context.Background(), path, opts)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		e.Close()
		b.StartTimer()
	}
}
