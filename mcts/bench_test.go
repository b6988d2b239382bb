package mcts

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nesy-dev/nesy/constraint"
	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
)

// BenchmarkSimulations measures simulations per second with one leaf per
// model call against 16 leaves evaluated in one batched call, same model,
// task and seed. The model is the reference llama (768 wide, 12 layers,
// 32,000-token vocabulary, F32, 134M parameters), where the forward pass
// dominates the search's own work. Each op is one search of 128 simulations
// after a short prompt (prompt evaluation included; it is a small part).
//
//	go test ./mcts -run XXX -bench Simulations -benchtime 5x
//
// NESY_BENCH_MODEL names a GGUF to use instead of the generated model (for
// both benchmarks; scripts/gpu-check.sh passes a larger qwen35 model to
// BenchmarkHybridSimulations this way). NESY_BENCH_PRIOR=flat runs the model
// as usual but gives the search a flat prior (its logits zeroed), so that
// every model grows the same tree and evaluates the same tokens: the batch
// sizes' ratio then compares engines, not the trees two models' random
// weights happen to grow. NESY_BENCH_FULL_LOGITS=1 computes every token's
// logit (models.Options.FullLogits) instead of the candidates' only.
// NESY_BENCH_FLASH=on|off|auto sets models.Options.FlashAttention;
// NESY_BENCH_BATCHES=1,4,8,16,32 the batch sizes (default 1 and 16);
// NESY_BENCH_SIMS the simulations per search (default 128);
// NESY_BENCH_DTYPE=f16|bf16|q8_0|q4_0 the hybrid benchmarks' weight type
// (default f32; bf16 is Qwen3.5's released type). Each batch
// size first runs one search untimed (its buffers' first allocation and
// touch are not the search's steady cost); NESY_BENCH_COLD=1 times it too.
func BenchmarkSimulations(b *testing.B) {
	path := benchModel(b, "reference", func(testing.TB) gguf.Spec { s := gguf.Reference(); s.Seed = 1; return s })
	benchSearches(b, path, models.Options{Sequences: 64, Threads: envInt("NESY_BENCH_THREADS", 1)})
}

// BenchmarkHybridSimulations is BenchmarkSimulations with a Qwen3.5-style
// hybrid model of the reference model's size (qwen35: 768 wide, 12 layers
// of which 9 gated delta-net layers with a recurrent state, 6 value heads
// and 2 key heads of 64, 2048 FFN, 32,000-token vocabulary, F32, about
// 120M parameters; its recurrent state is the same small share of a
// layer's weights as Qwen3.5-4B's), whose leaves share passes only since
// the engine batches several sequences of recurrent models. On a busy
// machine run batch=1 and batch=16 in turn (NESY_BENCH_EQUAL_PASSES=1: the
// engine's passes of equal counts instead of padded ones, for comparison;
// NESY_BENCH_DELTA_RULE=operator|graph the delta rule's path, e.g. the
// operator on a GPU):
//
//	for i in 1 2 3; do for b in 1 16; do
//	  go test ./mcts -run XXX -bench HybridSimulations/batch=$b\$ -benchtime 3x; done; done
func BenchmarkHybridSimulations(b *testing.B) {
	dt := benchDType()
	path := benchModel(b, "qwen35-bench-"+string(dt), func(testing.TB) gguf.Spec {
		s := gguf.Default(gguf.ArchQwen35)
		s.Embd, s.Layers, s.FFN, s.Heads, s.KVHeads, s.HeadDim, s.VocabSize, s.Seed = 768, 12, 2048, 6, 2, 64, 32000, 1
		s.DType = dt
		return s
	})
	benchSearches(b, path, models.Options{Sequences: SuggestedSequences, Threads: envInt("NESY_BENCH_THREADS", 1),
		EqualPasses: os.Getenv("NESY_BENCH_EQUAL_PASSES") == "1", DeltaRule: os.Getenv("NESY_BENCH_DELTA_RULE")})
}

// BenchmarkHybridSimulationsQwenVocab is BenchmarkHybridSimulations with
// Qwen's real vocabulary, padded to its GGUFs' 151,936 rows and tied to the
// embedding as in Qwen3.5's small models (186M parameters): the task's
// actions take the positions they take for a real Qwen3.5 (the synthetic
// vocabulary spells them in 1.3x as many), and the output projection is
// most of the model, as it is for small models with this vocabulary. With
// NESY_BENCH_FULL_LOGITS=1 every pass computes every logit.
func BenchmarkHybridSimulationsQwenVocab(b *testing.B) {
	dt := benchDType()
	path := benchModel(b, "qwen35-qwenvocab-"+string(dt), func(tb testing.TB) gguf.Spec {
		tok, err := gguf.FromHF(testenv.Tokenizer(tb, "qwen3"))
		if err != nil {
			tb.Fatal(err)
		}
		s := gguf.Default(gguf.ArchQwen35)
		s.Embd, s.Layers, s.FFN, s.Heads, s.KVHeads, s.HeadDim, s.Seed = 768, 12, 2048, 6, 2, 64, 1
		s.Tokenizer, s.VocabSize, s.TiedOutput, s.DType = tok, 151936, true, dt
		return s
	})
	benchSearches(b, path, models.Options{Sequences: SuggestedSequences, Threads: envInt("NESY_BENCH_THREADS", 1),
		DeltaRule: os.Getenv("NESY_BENCH_DELTA_RULE")})
}

// benchDType is the hybrid benchmarks' weight type: NESY_BENCH_DTYPE, or
// F32 (gguf.Write rejects a type it does not know).
func benchDType() gguf.DType {
	if v := os.Getenv("NESY_BENCH_DTYPE"); v != "" {
		return gguf.DType(strings.ToLower(v))
	}
	return gguf.F32
}

// benchModel is modelPath, or the GGUF named by NESY_BENCH_MODEL.
func benchModel(b *testing.B, name string, spec func(testing.TB) gguf.Spec) string {
	b.Helper()
	if p := os.Getenv("NESY_BENCH_MODEL"); p != "" {
		return p
	}
	return modelPath(b, name, spec)
}

// benchSearches runs 128-simulation searches with one leaf and with 16
// leaves per model call on the model at path, after a short prompt, over
// the first ALFWorld task: simulations per second, batch occupancy, model
// passes per search, positions per search and per second, and CPU time
// per simulation.
func benchSearches(b *testing.B, path string, mopts models.Options) {
	mopts.FullLogits = os.Getenv("NESY_BENCH_FULL_LOGITS") == "1"
	mopts.Sequences = envInt("NESY_BENCH_SEQS", mopts.Sequences)
	mopts.FlashAttention = os.Getenv("NESY_BENCH_FLASH")
	eng, idx := loadModel(b, path, mopts)
	var lm models.LM = eng
	if os.Getenv("NESY_BENCH_PRIOR") == "flat" {
		lm = flatPrior{eng}
	}
	lex := loadTask(b, "", alfworldGames(b)[0])
	sp, err := constraint.New(idx, lex, constraint.Options{StopAtGoal: true})
	if err != nil {
		b.Fatal(err)
	}
	prompt, err := lm.Tokenize("You are a planner. Write a plan for the household task, one action per line.\n", false)
	if err != nil {
		b.Fatal(err)
	}
	batches := []int{1, 16}
	if v := os.Getenv("NESY_BENCH_BATCHES"); v != "" {
		batches = batches[:0]
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("NESY_BENCH_BATCHES: %q is not a batch size", f)
			}
			batches = append(batches, n)
		}
	}
	perSearch := envInt("NESY_BENCH_SIMS", 128)
	for _, batch := range batches {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			sopts := Options{Batch: batch, Simulations: perSearch, Exhaust: true, Seed: 1}
			if os.Getenv("NESY_BENCH_COLD") != "1" {
				// One untimed search first: a process's first searches
				// allocate and first touch the engine's buffers (the
				// graph's, and for recurrent models the state slots and
				// checkpoint tensors the leaves' forks take), which costs
				// a first batch-16 qwen35 search about 0.35 s more than
				// the next ones and a batch-1 search about 0.2 s; the
				// figure is the steady rate of a long run.
				if _, err := Search(context.Background(), lm, sp, prompt, sopts); err != nil {
					b.Fatal(err)
				}
			}
			sims, occ, recomputed := 0, 0.0, int64(0)
			st0 := lm.Stats()
			cpu0 := cpuTime()
			for b.Loop() {
				res, err := Search(context.Background(), lm, sp, prompt, sopts)
				if err != nil {
					b.Fatal(err)
				}
				sims += res.Stats.Simulations
				occ = res.Stats.BatchOccupancy
				recomputed += res.Stats.RecomputedTokens
			}
			b.ReportMetric(float64(sims)/b.Elapsed().Seconds(), "sims/s")
			b.ReportMetric(occ, "occupancy")
			st := lm.Stats()
			b.ReportMetric(float64(st.ModelCalls-st0.ModelCalls)/float64(b.N), "passes/op")
			tokens := float64(st.EvaluatedTokens - st0.EvaluatedTokens)
			b.ReportMetric(tokens/float64(b.N), "tokens/op")
			// Positions per second: the engine's side of the batch sizes'
			// ratio (a batched search's wider tree spends more positions
			// per simulation, which sims/s also counts).
			b.ReportMetric(tokens/b.Elapsed().Seconds(), "tok/s")
			b.ReportMetric(float64(st.PaddedPositions-st0.PaddedPositions)/float64(b.N), "pads/op")
			b.ReportMetric(float64(recomputed)/float64(b.N), "recomputed/op")
			// CPU time per simulation: steadier than sims/s when other
			// processes load the machine (one ggml thread does not spin).
			b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(sims), "cpu-ms/sim")
		})
	}
}

// flatPrior evaluates with its model and zeroes the logits it returns.
type flatPrior struct{ models.LM }

func (f flatPrior) Eval(ctx context.Context, reqs []models.EvalRequest) ([]models.EvalResult, error) {
	res, err := f.LM.Eval(ctx, reqs)
	for _, r := range res {
		for _, row := range r.Logits {
			clear(row)
		}
	}
	return res, err
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
