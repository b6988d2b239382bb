package decoder

import (
	"context"
	"github.com/nesy-dev/nesy/constraint"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
	"github.com/nesy-dev/nesy/trie"
)

// Benchmarks. BenchmarkDecode compares constrained with unconstrained greedy
// decoding on the same model, prompt and token count, on an ALFWorld task:
//
//	ref-llama   gguf.Reference(): llama 768x12, 32000-token SentencePiece vocabulary, F32 (134M)
//	mid-qwen3   qwen3 512x8 with the real Qwen3 vocabulary (151,669 tokens), tied output, F32 (~95M)
//	tiny-qwen3  the tests' tiny qwen3 with the real Qwen3 vocabulary (the forward pass is cheap,
//	            so the decoder's own overhead shows)
//
// Environment: NESY_BENCH_THREADS (default: all CPUs), NESY_BENCH_MODEL (a
// GGUF to run instead of the generated ones), NESY_BENCH_TOKENS (tokens per
// decode, default 32). Metrics per decode: tok/s (generated tokens over wall
// time, prefill excluded: the prompt is evaluated once per sub-benchmark),
// mask-us/tok (computing allowed sets and advancing the cursor),
// overhead-us/tok (everything but the forward passes: masks, sampling,
// bookkeeping).

func benchThreads() int {
	if n, err := strconv.Atoi(os.Getenv("NESY_BENCH_THREADS")); err == nil && n > 0 {
		return n
	}
	return runtime.NumCPU()
}

// benchModelSpecs are the generated benchmark models.
func benchModelSpecs(b *testing.B) map[string]func() gguf.Spec {
	return map[string]func() gguf.Spec{
		"ref-llama": gguf.Reference,
		"mid-qwen3": func() gguf.Spec {
			tok, err := gguf.FromHF(testenv.Tokenizer(b, "qwen3"))
			if err != nil {
				b.Fatal(err)
			}
			s := gguf.Default(gguf.ArchQwen3)
			s.Tokenizer, s.Embd, s.Layers, s.FFN, s.Heads, s.KVHeads, s.TiedOutput = tok, 512, 8, 1536, 8, 4, true
			return s
		},
	}
}

func benchEngine(b *testing.B, name string) *models.Engine {
	b.Helper()
	var path string
	switch {
	case os.Getenv("NESY_BENCH_MODEL") != "":
		path = os.Getenv("NESY_BENCH_MODEL")
	case name == "tiny-qwen3":
		path = testModelPath(b, "qwen3")
	default:
		path = filepath.Join(b.TempDir(), name+".gguf")
		if err := gguf.Write(path, benchModelSpecs(b)[name]()); err != nil {
			b.Fatal(err)
		}
	}
	// NESY_BENCH_FULL_LOGITS=1: every token's logit at every step (by
	// default constrained steps compute only the allowed tokens').
	e, err := models.Load(context.Background(), path, models.Options{Threads: benchThreads(), ContextLength: 8192,
		FullLogits: os.Getenv("NESY_BENCH_FULL_LOGITS") == "1"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	b.Logf("%s: %d parameters, vocabulary %d, %s; %s", name, e.Info().Params, e.Info().VocabSize, e.Info().Device, models.SystemInfo())
	return e
}

func BenchmarkDecode(b *testing.B) {
	tokens := 32
	if n, err := strconv.Atoi(os.Getenv("NESY_BENCH_TOKENS")); err == nil && n > 0 {
		tokens = n
	}
	tt := datasetTasks(b, 1)[0] // an ALFWorld task
	for _, name := range []string{"tiny-qwen3", "ref-llama", "mid-qwen3"} {
		b.Run(name, func(b *testing.B) {
			e := benchEngine(b, name)
			d, err := New(e, nil)
			if err != nil {
				b.Fatal(err)
			}
			// Ending only at the goal and no action limit: both modes write
			// exactly `tokens` tokens.
			sess, err := d.Prepare(context.Background(), Request{Lexicon: tt.Lex, Space: constraint.Options{EndPolicy: constraint.EndAtGoal}})
			if err != nil {
				b.Fatal(err)
			}
			defer sess.Close()
			b.Logf("prompt: %d tokens (%s)", len(sess.Prompt().Tokens), tt.Name)
			for _, constrained := range []bool{false, true} {
				mode := map[bool]string{false: "unconstrained", true: "constrained"}[constrained]
				b.Run(mode, func(b *testing.B) {
					var gen int
					var mask, over float64
					for b.Loop() {
						res, err := sess.Decode(context.Background(), Options{Constrained: constrained, MaxTokens: tokens})
						if err != nil {
							b.Fatal(err)
						}
						gen += res.GeneratedTokens
						mask += res.MaskSeconds
						over += res.Seconds - res.ModelSeconds
					}
					b.ReportMetric(float64(gen)/b.Elapsed().Seconds(), "tok/s")
					b.ReportMetric(mask/float64(gen)*1e6, "mask-us/tok")
					b.ReportMetric(over/float64(gen)*1e6, "overhead-us/tok")
				})
			}
		})
	}
}

// BenchmarkDecodePaired decodes with and without the constraint in turn
// (alternating which goes first) from the same prompt, so that both modes
// see the same machine load, and reports each mode's tokens per second of
// decode time and the constrained mode's slowdown in percent (negative:
// faster).
func BenchmarkDecodePaired(b *testing.B) {
	tokens := 32
	if n, err := strconv.Atoi(os.Getenv("NESY_BENCH_TOKENS")); err == nil && n > 0 {
		tokens = n
	}
	tt := datasetTasks(b, 1)[0] // an ALFWorld task
	for _, name := range []string{"tiny-qwen3", "ref-llama", "mid-qwen3"} {
		b.Run(name, func(b *testing.B) {
			e := benchEngine(b, name)
			d, err := New(e, nil)
			if err != nil {
				b.Fatal(err)
			}
			sess, err := d.Prepare(context.Background(), Request{Lexicon: tt.Lex, Space: constraint.Options{EndPolicy: constraint.EndAtGoal}})
			if err != nil {
				b.Fatal(err)
			}
			defer sess.Close()
			sess.TakePrefill()
			var secs, model [2]float64
			var toks [2]int
			i := 0
			for b.Loop() {
				for k := range 2 {
					constrained := (i+k)%2 == 1
					res, err := sess.Decode(context.Background(), Options{Constrained: constrained, MaxTokens: tokens})
					if err != nil {
						b.Fatal(err)
					}
					secs[btoi(constrained)] += res.Seconds
					model[btoi(constrained)] += res.ModelSeconds
					toks[btoi(constrained)] += res.GeneratedTokens
				}
				i++
			}
			u, c := float64(toks[0])/secs[0], float64(toks[1])/secs[1]
			b.ReportMetric(u, "u-tok/s")
			b.ReportMetric(c, "c-tok/s")
			b.ReportMetric((u/c-1)*100, "slowdown-%")
			b.ReportMetric((secs[0]-model[0])/float64(toks[0])*1e6, "u-overhead-us/tok")
			b.ReportMetric((secs[1]-model[1])/float64(toks[1])*1e6, "c-overhead-us/tok")
		})
	}
}

// BenchmarkStep measures the decoder's own work per token without a model,
// given a logit row, on ALFWorld tasks with the real Qwen3 and Llama 2
// vocabularies: constrained (Allowed, an argmax over the allowed tokens,
// Advance, with state transitions and per-state tries cached as in a decode)
// and unconstrained (an argmax over the whole vocabulary, the line parser).
// It reports the thread's CPU time per step (cpu-ns/op) besides wall time,
// and the slowest constrained step (max-us).
func BenchmarkStep(b *testing.B) {
	tasks := datasetTasks(b, 8)[:8] // ALFWorld
	for _, family := range []string{"qwen3", "llama2"} {
		idx := realIndex(b, family)
		r := rand.New(rand.NewPCG(1, 2))
		logits := make([]float32, idx.Size())
		for i := range logits {
			logits[i] = r.Float32()
		}
		spaces := make([]*constraint.Space, len(tasks))
		for i, tt := range tasks {
			var err error
			if spaces[i], err = constraint.New(idx, tt.Lex, constraint.Options{MaxActions: 30}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(family+"/constrained", func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var set trie.Set
			sm := NewSampler(Sampling{})
			k := 0
			cur, _ := spaces[0].Start()
			var worst time.Duration
			cpu0, _ := threadCPU()
			for b.Loop() {
				t0 := time.Now()
				sp := spaces[k%len(spaces)]
				sp.Allowed(cur, &set)
				i := sm.Pick(logits, set.IDs)
				if r.IntN(4) == 0 { // vary the path: argmax alone repeats itself
					i = r.IntN(set.Len())
				}
				next, err := sp.Advance(cur, set.Next[i])
				if err != nil {
					b.Fatal(err)
				}
				worst = max(worst, time.Since(t0))
				cur = next
				if cur.Ended() {
					k++
					cur, _ = spaces[k%len(spaces)].Start()
				}
			}
			reportCPU(b, cpu0)
			b.ReportMetric(float64(worst.Microseconds()), "max-us")
		})
		b.Run(family+"/unconstrained", func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			sm := NewSampler(Sampling{})
			lp := newLineParser(spaces[0].Lexicon(), spaces[0].Options(), func(Event) {})
			cpu0, _ := threadCPU()
			for b.Loop() {
				tok := int32(sm.Pick(logits, nil))
				lp.write(idx.Text(tok))
				if len(lp.line) > 200 {
					lp.line = lp.line[:0]
				}
			}
			reportCPU(b, cpu0)
		})
	}
}

// reportCPU reports the calling thread's CPU time per op since cpu0.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	if cpu1, ok := threadCPU(); ok {
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
