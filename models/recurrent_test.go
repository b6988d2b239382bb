package models

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nesy-dev/nesy/models/ggmlthread"
	"github.com/nesy-dev/nesy/models/gguf"
	"github.com/ollama/ollama/ml"
)

// hybridSpecs are generated Qwen3.5 networks of several shapes: the
// defaults (4 value heads reading 2 key heads), wider heads with a key
// head per value head, more layers (two full attention layers), F16
// weights, Q8_0 weights (ggml's quantized kernels: the activations are
// quantized too), value heads reading the key heads in the reordered
// layout, and mixture-of-experts ones.
func hybridSpecs() map[string]gguf.Spec {
	wide := gguf.Default(gguf.ArchQwen35)
	wide.Embd, wide.Heads, wide.KVHeads, wide.FFN = 128, 4, 4, 256 // 32-wide heads, as many key as value heads
	deep := gguf.Default(gguf.ArchQwen35)
	deep.Layers = 8
	half := gguf.Default(gguf.ArchQwen35)
	half.DType = gguf.F16
	q8 := gguf.Default(gguf.ArchQwen35)
	q8.DType = gguf.Q8_0
	// Heads of 64: the delta rule as one operator (deltaWKV).
	h64 := gguf.Default(gguf.ArchQwen35)
	h64.Embd, h64.Heads, h64.KVHeads, h64.HeadDim, h64.FFN = 128, 2, 1, 64, 256
	// Value head h reading key head h mod 2 (ssm.v_head_reordered).
	reordered := gguf.Default(gguf.ArchQwen35)
	reordered.VHeadReordered = true
	// RoPE on a quarter of each head, as Qwen3.5 (64 of 256).
	partial := gguf.Default(gguf.ArchQwen35)
	partial.RopeDim = 4
	moe := gguf.Default(gguf.ArchQwen35MoE)
	moe8 := gguf.Default(gguf.ArchQwen35MoE)
	moe8.Experts, moe8.ExpertsUsed, moe8.Layers = 8, 3, 8
	return map[string]gguf.Spec{
		"qwen35": gguf.Default(gguf.ArchQwen35), "qwen35-wide": wide, "qwen35-deep": deep,
		"qwen35-f16": half, "qwen35-q8_0": q8, "qwen35-h64": h64, "qwen35-reordered": reordered, "qwen35-partial-rope": partial,
		"qwen35moe": moe, "qwen35moe-8x3": moe8,
	}
}

// TestRecurrentShapes: generated qwen35 and qwen35moe models of several
// shapes load and evaluate with the sequence slots, batch sizes and logit
// rows the CLI (plan and bench: 128 slots for the searches), the server
// (64 slots per running request, 4 running: 256; 128 logit rows) and
// larger settings use, a prompt over several 64-token delta-net chunks and
// forks of it included. Loading used to fail above 74 slots (the recurrent
// cache's checkpoint contexts outgrew the graph-node limit).
func TestRecurrentShapes(t *testing.T) {
	settings := []Options{
		{Sequences: 1},
		{},                                // 32 slots, batch 512
		{Sequences: 128},                  // nesy plan/bench --method cmcts
		{Sequences: 256, MaxLogits: 128},  // nesy serve
		{Sequences: 512, BatchSize: 2048}, // large
		{Sequences: 128, BatchSize: 16},   // small batches: prompts in chunks
		{Sequences: 64, BatchSize: 4096, MaxLogits: 512},
	}
	specs := hybridSpecs()
	for _, name := range []string{"qwen35", "qwen35-wide", "qwen35-deep", "qwen35-f16", "qwen35-h64", "qwen35moe", "qwen35moe-8x3"} {
		spec := specs[name]
		for _, o := range settings {
			if testing.Short() && name != "qwen35" && name != "qwen35moe" {
				continue
			}
			t.Run(fmt.Sprintf("%s/seqs=%d/batch=%d", name, o.Sequences, o.BatchSize), func(t *testing.T) {
				e := newTestEngine(t, spec, o)
				v := e.Info().VocabSize
				ctx := context.Background()
				src, err := e.NewSequence()
				if err != nil {
					t.Fatal(err)
				}
				prompt := testTokens(1, 600, v) // a 512-position pass and a shorter one
				res, err := e.Eval(ctx, []EvalRequest{{Seq: src, Tokens: prompt}})
				if err != nil {
					t.Fatal(err)
				}
				finite(t, res[0].Logits[0])
				forks := min(e.Stats().SequenceSlots-1, 16)
				var reqs []EvalRequest
				for i := range forks {
					f, err := e.Fork(src, len(prompt))
					if err != nil {
						t.Fatalf("fork %d: %v", i, err)
					}
					reqs = append(reqs, EvalRequest{Seq: f, Tokens: testTokens(10+i, 1, v)})
				}
				if forks == 0 {
					reqs = []EvalRequest{{Seq: src, Tokens: testTokens(10, 1, v)}}
				}
				calls := e.Stats().ModelCalls
				res, err = e.Eval(ctx, reqs)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range res {
					finite(t, r.Logits[0])
				}
				passes := e.Stats().ModelCalls - calls
				if limit := e.graph.seqs(1, e.maxLen); forks <= limit && passes != 1 {
					t.Errorf("%d one-position forks took %d passes, want 1 (graph allows %d)", forks, passes, limit)
				}
			})
		}
	}
}

// finite fails the test when a logit row is empty or not finite.
func finite(t *testing.T, row []float32) {
	t.Helper()
	if len(row) == 0 {
		t.Fatal("empty logit row")
	}
	for i, x := range row {
		if x != x || x > 1e30 || x < -1e30 {
			t.Fatalf("logit %d is %v", i, x)
		}
	}
}

// TestRecurrentPassLimit: passes of as many sequences as passGraph allows
// build and run (exceeding the backend's graph-node limit would abort the
// process) for one-position steps, the longest deltaStep passes, one-chunk
// and 512-position passes, with sources holding one and several
// recurrent-state checkpoints.
func TestRecurrentPassLimit(t *testing.T) {
	specs := hybridSpecs()
	cases := []struct {
		spec   string
		prompt int
	}{
		{"qwen35", 150}, {"qwen35", 3500}, {"qwen35-deep", 150}, {"qwen35moe", 150}, {"qwen35moe-8x3", 3500},
	}
	for _, c := range cases {
		for _, k := range []int{1, 0, 64, 512} { // 0: the longest deltaStep pass
			t.Run(fmt.Sprintf("%s/prompt=%d/k=%d", c.spec, c.prompt, k), func(t *testing.T) {
				e := newTestEngine(t, specs[c.spec], Options{Sequences: 200, BatchSize: 4096, MaxLogits: 4096})
				if k == 0 { // a one-node recurrence (the default on the CPU) runs the engine's longest pass
					if k = min(e.graph.step(e.maxLen+c.prompt), e.passTokens()); k < 2 {
						t.Skipf("deltaStep runs one position only (step %d)", k)
					}
				}
				v := e.Info().VocabSize
				ctx := context.Background()
				src, _ := e.NewSequence()
				if _, err := e.Eval(ctx, []EvalRequest{{Seq: src, Tokens: testTokens(1, c.prompt, v)}}); err != nil {
					t.Fatal(err)
				}
				m := min(e.graph.seqs(k, e.maxLen+k), 4096/k, 199)
				var reqs []EvalRequest
				for i := range m {
					f, err := e.Fork(src, c.prompt)
					if err != nil {
						t.Fatal(err)
					}
					reqs = append(reqs, EvalRequest{Seq: f, Tokens: testTokens(10+i, k, v)})
				}
				calls := e.Stats().ModelCalls
				if _, err := e.Eval(ctx, reqs); err != nil {
					t.Fatal(err)
				}
				if passes := e.Stats().ModelCalls - calls; passes != 1 {
					t.Errorf("%d forks of %d positions took %d passes, want 1", m, k, passes)
				}
				t.Logf("%d sequences of %d positions in one pass", m, k)
			})
		}
	}
}

// TestRecurrentBatchedForks: forks of one prompt stepped together in
// passes over several sequences (the recurrent state copied on first
// write) give the logits each gets evaluated alone from scratch, step
// after step; truncating some of them (to a point inside the shared
// prompt and inside their own continuation) and continuing them together
// with untouched ones equals a fresh evaluation too.
func TestRecurrentBatchedForks(t *testing.T) {
	for _, name := range []string{"qwen35", "qwen35-wide", "qwen35-h64", "qwen35-reordered", "qwen35-q8_0", "qwen35moe"} {
		t.Run(name, func(t *testing.T) {
			e, src, prompt := promptedEngine(t, hybridSpecs()[name], 64, 3, 40)
			v := e.Info().VocabSize
			ctx := context.Background()
			const n = 16
			hist := make([][]int32, n)
			ids := make([]SeqID, n)
			for i := range ids {
				f, err := e.Fork(src, len(prompt))
				if err != nil {
					t.Fatal(err)
				}
				ids[i], hist[i] = f, append([]int32{}, prompt...)
			}
			// step evaluates cont[i] on fork i, all in one Eval call, and
			// compares every row with a fresh evaluation of its history.
			// Continuations of k positions each must share passes as far
			// as the graph allows (k 0: unequal, not checked).
			step := func(what string, cont [][]int32, k int) {
				t.Helper()
				wantPasses := 0
				if k > 0 {
					limit := e.graph.seqs(k, e.maxLen+k)
					wantPasses = (len(cont) + limit - 1) / limit
				}
				var reqs []EvalRequest
				for i, c := range cont {
					if len(c) > 0 {
						reqs = append(reqs, EvalRequest{Seq: ids[i], Tokens: c, AllLogits: true})
					}
				}
				calls := e.Stats().ModelCalls
				res, err := e.Eval(ctx, reqs)
				if err != nil {
					t.Fatal(err)
				}
				if passes := e.Stats().ModelCalls - calls; k > 0 && passes != int64(wantPasses) {
					t.Errorf("%s: %d passes, want %d", what, passes, wantPasses)
				}
				r := 0
				for i, c := range cont {
					if len(c) == 0 {
						continue
					}
					hist[i] = append(hist[i], c...)
					want := evalAlone(t, e, hist[i])[len(hist[i])-len(c):]
					for k := range c {
						assertClose(t, fmt.Sprintf("%s: fork %d position %d", what, i, k), res[r].Logits[k], want[k], tolFor(e))
					}
					r++
				}
			}
			one := func(seed int) [][]int32 {
				out := make([][]int32, n)
				for i := range out {
					out[i] = testTokens(seed+i, 1, v)
				}
				return out
			}
			step("first step (state copied on write)", one(100), 1)
			step("second step", one(200), 1)
			three := make([][]int32, n)
			for i := range three {
				three[i] = testTokens(300+i, 3, v)
			}
			step("three positions each", three, 3)
			// Cut fork 0 inside the prompt, fork 1 inside its own
			// continuation; the others go on unchanged.
			for i, at := range map[int]int{0: 25, 1: len(prompt) + 2} {
				if err := e.Truncate(ids[i], at); err != nil {
					t.Fatal(err)
				}
				hist[i] = hist[i][:at]
			}
			step("after truncating two forks", one(400), 0)
			step("after catching up", one(500), 1)
		})
	}
}

// TestRecurrentConcurrentForks: searches of several callers at once, each
// stepping its own forks of a shared prompt with its own Eval calls; the
// engine merges their steps into passes over several sequences. Every
// step's logits equal a fresh evaluation of the fork's history.
func TestRecurrentConcurrentForks(t *testing.T) {
	for _, name := range []string{"qwen35", "qwen35-h64"} {
		t.Run(name, func(t *testing.T) { testRecurrentConcurrentForks(t, hybridSpecs()[name]) })
	}
}

func testRecurrentConcurrentForks(t *testing.T, spec gguf.Spec) {
	e := newTestEngine(t, spec, Options{Sequences: 64, MergeWindow: time.Millisecond})
	v := e.Info().VocabSize
	ctx := context.Background()
	prompt := testTokens(7, 30, v)
	src, _ := e.NewSequence()
	if _, err := e.Eval(ctx, []EvalRequest{{Seq: src, Tokens: prompt}}); err != nil {
		t.Fatal(err)
	}
	const callers, steps = 6, 4
	got := make([][][]float32, callers)
	hist := make([][]int32, callers)
	errs := make([]error, callers)
	forks := make([]SeqID, callers)
	for i := range forks {
		f, err := e.Fork(src, len(prompt))
		if err != nil {
			t.Fatal(err)
		}
		forks[i], hist[i] = f, append([]int32{}, prompt...)
	}
	calls := e.Stats().ModelCalls
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range steps {
				tok := testTokens(1000+10*i+s, 1, v)
				res, err := e.Eval(ctx, []EvalRequest{{Seq: forks[i], Tokens: tok}})
				if err != nil {
					errs[i] = err
					return
				}
				hist[i] = append(hist[i], tok...)
				got[i] = append(got[i], res[0].Logits[0])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d steps in %d passes", callers*steps, e.Stats().ModelCalls-calls)
	for i := range callers {
		want := evalAlone(t, e, hist[i])
		for s := range steps {
			assertClose(t, fmt.Sprintf("caller %d step %d", i, s), got[i][s], want[len(prompt)+s], tolFor(e))
		}
	}
}

// TestCoverCounts: the fewest pass counts whose subset sums give every
// length, worked out by hand, and the subsets decompose picks.
func TestCoverCounts(t *testing.T) {
	tests := []struct {
		lengths []int
		want    []int
	}{
		{[]int{1, 2, 3, 6}, []int{1, 2, 3}}, // 6 = 1+2+3; no two counts give four lengths
		{[]int{1, 3, 4}, []int{1, 3}},
		{[]int{1, 2, 4}, []int{1, 2, 3}}, // {1,x} gives 1, x, 1+x: never both 2 and 4
		{[]int{2, 4}, []int{2, 4}},
		{[]int{1, 2, 3, 4, 5, 6, 7, 8}, []int{1, 2, 3, 4}},                  // three counts give at most seven sums
		{[]int{5, 5, 5}, nil},                                               // one length: one pass
		{[]int{1, 17}, nil},                                                 // longer than maxCoverLen
		{[]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, nil}, // needs five counts
	}
	for _, tc := range tests {
		var need uint64
		top := 0
		for _, n := range tc.lengths {
			need |= 1 << n
			top = max(top, n)
		}
		var got []int
		if top <= maxCoverLen {
			got = coverLengths(need, top)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("lengths %v: counts %v, want %v", tc.lengths, got, tc.want)
		}
		for _, n := range tc.lengths {
			if got == nil {
				break
			}
			m, sum := decompose(got, n), 0
			for i, c := range got {
				if m&(1<<i) != 0 {
					sum += c
				}
			}
			if sum != n {
				t.Errorf("lengths %v: decompose(%v, %d) = %b sums to %d", tc.lengths, got, n, m, sum)
			}
		}
	}
	if m := decompose([]int{2, 4}, 3); m != 0 {
		t.Errorf("decompose([2 4], 3) = %b, want none", m)
	}
	if m := decompose([]int{1, 2, 3}, 3); m != 0b100 {
		t.Errorf("decompose([1 2 3], 3) = %b, want the larger count alone", m)
	}
}

// TestRecurrentCoverPasses: forks continued by 1, 3 and 4 tokens in one
// Eval call finish in two passes (counts 1 and 3), whichever request leads
// the pass (six rounds, the lengths rotated each round; the plan that
// computes the most positions first takes three when a one-token request
// leads), and every row equals a fresh evaluation of the fork's history.
func TestRecurrentCoverPasses(t *testing.T) {
	e, src, prompt := promptedEngineOpts(t, hybridSpecs()["qwen35"], Options{Sequences: 16, EqualPasses: true}, 7, 20)
	v := e.Info().VocabSize
	ctx := context.Background()
	lengths := []int{1, 3, 4, 1, 3, 4, 1}
	for round := range 6 {
		var reqs []EvalRequest
		lengths = append(lengths[1:], lengths[0]) // another request in the leader's place
		for i, n := range lengths {
			f, err := e.Fork(src, len(prompt))
			if err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, EvalRequest{Seq: f, Tokens: testTokens(50+10*round+i, n, v), AllLogits: true})
		}
		calls := e.Stats().ModelCalls
		res, err := e.Eval(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		if passes := e.Stats().ModelCalls - calls; passes != 2 {
			t.Errorf("round %d: %d passes for lengths %v, want 2", round, passes, lengths)
		}
		for i, r := range reqs {
			hist := append(append([]int32{}, prompt...), r.Tokens...)
			want := evalAlone(t, e, hist)[len(prompt):]
			for k := range r.Tokens {
				assertClose(t, fmt.Sprintf("round %d fork %d (%d tokens) position %d", round, i, len(r.Tokens), k), res[i].Logits[k], want[k], tolFor(e))
			}
			e.Release(r.Seq)
		}
	}
}

// promptedEngine loads spec with the given sequence slots and evaluates a
// prompt of n test tokens (seed seed) on a new sequence: the source the
// recurrent tests fork.
func promptedEngine(t *testing.T, spec gguf.Spec, sequences, seed, n int) (*Engine, SeqID, []int32) {
	t.Helper()
	return promptedEngineOpts(t, spec, Options{Sequences: sequences}, seed, n)
}

// promptedEngineOpts is promptedEngine with the engine's options.
func promptedEngineOpts(t *testing.T, spec gguf.Spec, opts Options, seed, n int) (*Engine, SeqID, []int32) {
	t.Helper()
	e := newTestEngine(t, spec, opts)
	prompt := testTokens(seed, n, e.Info().VocabSize)
	src, err := e.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Eval(context.Background(), []EvalRequest{{Seq: src, Tokens: prompt}}); err != nil {
		t.Fatal(err)
	}
	return e, src, prompt
}

// TestRecurrentPaddedPasses: forks of one prompt continued by requests of
// several lengths in one Eval share one padded pass (not the two to four
// of the covering plan), every row equals the fork's history evaluated
// alone, and the forks go on (a second padded pass, then a long pass)
// exactly as a fresh evaluation of their histories: the pads left neither
// cache cells, nor recurrent or convolution state behind.
func TestRecurrentPaddedPasses(t *testing.T) {
	for _, name := range []string{"qwen35", "qwen35-wide", "qwen35-h64", "qwen35-reordered", "qwen35-q8_0", "qwen35moe"} {
		t.Run(name, func(t *testing.T) {
			e, src, prompt := promptedEngine(t, hybridSpecs()[name], 16, 7, 20)
			v := e.Info().VocabSize
			ctx := context.Background()
			lengths := []int{1, 3, 4, 1, 2, 4, 1}
			hist := make([][]int32, len(lengths))
			ids := make([]SeqID, len(lengths))
			for i := range ids {
				f, err := e.Fork(src, len(prompt))
				if err != nil {
					t.Fatal(err)
				}
				ids[i], hist[i] = f, slices.Clone(prompt)
			}
			round := func(what string, lengths []int, wantPasses int64) {
				t.Helper()
				var reqs []EvalRequest
				var own int
				for i, n := range lengths {
					reqs = append(reqs, EvalRequest{Seq: ids[i], Tokens: testTokens(100*len(hist[i])+i, n, v), AllLogits: true})
					own += n
				}
				before := e.Stats()
				res, err := e.Eval(ctx, reqs)
				if err != nil {
					t.Fatal(err)
				}
				after := e.Stats()
				if passes := after.ModelCalls - before.ModelCalls; wantPasses > 0 && passes != wantPasses {
					t.Errorf("%s: %d passes for lengths %v, want %d", what, passes, lengths, wantPasses)
				}
				if wantPasses == 1 {
					pad := slices.Max(lengths)
					if got, want := after.PaddedPositions-before.PaddedPositions, int64(pad*len(lengths)-own); got != want {
						t.Errorf("%s: %d padded positions, want %d", what, got, want)
					}
					if got := after.EvaluatedTokens - before.EvaluatedTokens; got != int64(own) {
						t.Errorf("%s: %d evaluated tokens, want %d", what, got, own)
					}
				}
				for i, r := range reqs {
					hist[i] = append(hist[i], r.Tokens...)
					want := evalAlone(t, e, hist[i])[len(hist[i])-len(r.Tokens):]
					for k := range r.Tokens {
						assertClose(t, fmt.Sprintf("%s: fork %d (%d tokens) position %d", what, i, len(r.Tokens), k), res[i].Logits[k], want[k], tolFor(e))
					}
				}
			}
			round("first", lengths, 1)
			round("second", []int{4, 1, 1, 3, 2, 1, 3}, 1)
			round("long", []int{40, 1, 30, 2, 1, 1, 1}, 0)
			if got := e.Stats().CacheCells; got <= 0 {
				t.Errorf("cache cells %d", got)
			}
		})
	}
}

// TestRecurrentPaddedCheckpoint: a padded pass that reaches the recurrent
// cache's first checkpoint position captures a checkpoint at a pad, which
// the pads' removal must drop: truncating the padded sequence afterwards
// and continuing equals a fresh evaluation.
func TestRecurrentPaddedCheckpoint(t *testing.T) {
	for _, name := range []string{"qwen35", "qwen35-h64"} {
		t.Run(name, func(t *testing.T) { testRecurrentPaddedCheckpoint(t, hybridSpecs()[name]) })
	}
}

func testRecurrentPaddedCheckpoint(t *testing.T, spec gguf.Spec) {
	e := newTestEngine(t, spec, Options{Sequences: 8})
	v := e.Info().VocabSize
	ctx := context.Background()
	a, err := e.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	ha, hb := testTokens(1, 13, v), testTokens(2, 13, v)
	if _, err := e.Eval(ctx, []EvalRequest{{Seq: a, Tokens: ha}, {Seq: b, Tokens: hb}}); err != nil {
		t.Fatal(err)
	}
	// Positions 13-16 of a, 13-14 of b padded to 16: the pass ends at
	// position 16, where the cache plans a first checkpoint.
	ta, tb := testTokens(3, 4, v), testTokens(4, 2, v)
	calls := e.Stats().ModelCalls
	if _, err := e.Eval(ctx, []EvalRequest{{Seq: a, Tokens: ta}, {Seq: b, Tokens: tb}}); err != nil {
		t.Fatal(err)
	}
	if n := e.Stats().ModelCalls - calls; n != 1 {
		t.Fatalf("%d passes, want one padded pass", n)
	}
	hb = append(hb, tb...)
	more := testTokens(5, 20, v)
	for _, cut := range []int{len(hb), 14, 13, 3} {
		if err := e.Truncate(b, cut); err != nil {
			t.Fatal(err)
		}
		res, err := e.Eval(ctx, []EvalRequest{{Seq: b, Tokens: more, AllLogits: true}})
		if err != nil {
			t.Fatal(err)
		}
		h := append(slices.Clone(hb[:cut]), more...)
		want := evalAlone(t, e, h)[cut:]
		for k := range more {
			assertClose(t, fmt.Sprintf("cut %d position %d", cut, k), res[0].Logits[k], want[k], tolFor(e))
		}
		if err := e.Truncate(b, len(hb)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPassGraphBound: passGraph's estimate bounds the graph objects of
// real passes at the sizes it allows (the most sequences of k positions
// each, equal and padded, k up to the deltaStep bound), read from the
// built graph's context; a pass beyond the backend's limit would abort
// inside ggml. The passes run on forks of a prompt whose slot holds a
// checkpoint, so each fork copies it.
func TestPassGraphBound(t *testing.T) {
	for _, name := range []string{"qwen35", "qwen35-wide", "qwen35-deep", "qwen35-f16", "qwen35-h64", "qwen35moe", "qwen35moe-8x3"} {
		t.Run(name, func(t *testing.T) {
			e, src, prompt := promptedEngine(t, hybridSpecs()[name], 128, 7, 20)
			var tensors, nodes int
			e.inspect = func(c ml.Context) { tensors, nodes, _ = ggmlthread.Objects(c) }
			v := e.Info().VocabSize
			// The longest pass deltaStep runs (the one-operator
			// recurrence runs any: the engine's longest pass).
			step := min(e.graph.step(e.maxLen), e.passTokens())
			want := ruleKernel // on the CPU; the graph on a GPU
			if e.Info().Device != "CPU" {
				want = ruleGraph
			}
			if e.hybrid.rule != want || e.graph.wkv != want.oneOp() {
				t.Fatalf("delta rule on %s: %v (graph one node %v), want %v", e.Info().Device, e.hybrid.rule, e.graph.wkv, want)
			}
			if step < 4 {
				t.Fatalf("deltaStep bound %d positions: the estimate leaves no room", step)
			}
			// The longest padded pass planned (at least two sequences).
			kp := 2
			for kp < min(step, maxCoverLen) && e.graph.paddedSeqs(kp+1, e.maxLen+kp+1) >= 2 {
				kp++
			}
			for _, k := range []int{1, 2, kp, step} {
				for _, padded := range []bool{false, true} {
					if padded && k == 1 {
						continue
					}
					n := e.graph.seqs(k, e.maxLen+k)
					est := e.graph.base(k, step) + n*e.graph.perSeq(checkpoints(e.maxLen+k))
					if padded {
						if n = e.graph.paddedSeqs(k, e.maxLen+k); n < 2 {
							continue // no padded pass is planned at this length
						}
						est = e.graph.base(k, step) + e.graph.paddedExtra(k) + n*e.graph.perSeq(checkpoints(e.maxLen+k))
					}
					n = min(n, 127, e.opts.BatchSize/k)
					var reqs []EvalRequest
					for i := range n {
						f, err := e.Fork(src, len(prompt))
						if err != nil {
							t.Fatal(err)
						}
						l := k
						if padded && i > 0 {
							l = 1 + i%(k-1)
						}
						reqs = append(reqs, EvalRequest{Seq: f, Tokens: testTokens(i, l, v)})
					}
					calls := e.Stats().ModelCalls
					if _, err := e.Eval(context.Background(), reqs); err != nil {
						t.Fatal(err)
					}
					if passes := e.Stats().ModelCalls - calls; passes != 1 {
						t.Errorf("k %d padded %v: %d sequences took %d passes", k, padded, n, passes)
					}
					t.Logf("k %d padded %v: %d sequences, %d objects, %d nodes, estimate %d, limit %d", k, padded, n, tensors, nodes, est, e.graph.maxNodes)
					if tensors == 0 || tensors > est || nodes > est || est > e.graph.maxNodes {
						t.Errorf("k %d padded %v, %d sequences: %d objects and %d nodes, estimate %d, limit %d", k, padded, n, tensors, nodes, est, e.graph.maxNodes)
					}
					for _, r := range reqs {
						e.Release(r.Seq)
					}
				}
			}
		})
	}
}

// TestDeltaRuleOperator: an engine that runs the delta rule as one node
// (ggml's operator for heads of 64, nesy's kernels for any) gives the
// logits of the same engine with DeltaRule "graph", which runs prompts
// through the model's chunked delta-net and short passes through the
// per-position graph: a 600-token prompt (a 512-position pass and a
// shorter one), one step of 16 forks, and a padded pass of leaves of
// several lengths.
func TestDeltaRuleOperator(t *testing.T) {
	for _, tc := range []struct {
		spec, rule string
		want       deltaRule
	}{
		{"qwen35-h64", "operator", ruleWKV},
		{"qwen35-h64", "auto", ruleKernel},
		{"qwen35", "kernel", ruleKernel},
		{"qwen35-reordered", "auto", ruleKernel},
		{"qwen35moe", "kernel", ruleKernel},
	} {
		t.Run(tc.spec+"/"+tc.rule, func(t *testing.T) { testDeltaRule(t, hybridSpecs()[tc.spec], tc.rule, tc.want) })
	}
}

// testDeltaRule is TestDeltaRuleOperator for one model and rule (both
// engines on the CPU for the kernels, which run there only).
func testDeltaRule(t *testing.T, spec gguf.Spec, rule string, want deltaRule) {
	opts := Options{Sequences: 32, DeltaRule: rule}
	if want == ruleKernel {
		opts.GPULayers = -1
	}
	on := newTestEngine(t, spec, opts)
	opts.DeltaRule = "graph"
	off := newTestEngine(t, spec, opts)
	if on.hybrid.rule != want || !on.graph.wkv || off.hybrid.rule != ruleGraph || off.graph.wkv {
		t.Fatalf("rule %q: %v (one node %v), graph: %v (%v); want %v", rule, on.hybrid.rule, on.graph.wkv, off.hybrid.rule, off.graph.wkv, want)
	}
	v := on.Info().VocabSize
	ctx := context.Background()
	type engine struct {
		e    *Engine
		src  SeqID
		seqs []SeqID
	}
	es := []*engine{{e: on}, {e: off}}
	prompt := testTokens(1, 600, v)
	lengths := []int{1, 3, 16, 2, 1, 9, 4, 1}
	var got [2][][][]float32 // per engine: per round, the rows in order
	for i, x := range es {
		x.src, _ = x.e.NewSequence()
		res, err := x.e.Eval(ctx, []EvalRequest{{Seq: x.src, Tokens: prompt, AllLogits: true}})
		if err != nil {
			t.Fatal(err)
		}
		got[i] = append(got[i], [][]float32{res[0].Logits[0], res[0].Logits[300], res[0].Logits[599]})
		for range 16 {
			f, err := x.e.Fork(x.src, len(prompt))
			if err != nil {
				t.Fatal(err)
			}
			x.seqs = append(x.seqs, f)
		}
		var reqs []EvalRequest
		for j, s := range x.seqs {
			reqs = append(reqs, EvalRequest{Seq: s, Tokens: testTokens(10+j, 1, v)})
		}
		if res, err = x.e.Eval(ctx, reqs); err != nil {
			t.Fatal(err)
		}
		var rows [][]float32
		for _, r := range res {
			rows = append(rows, r.Logits[0])
		}
		got[i] = append(got[i], rows)
		reqs = reqs[:0]
		for j, n := range lengths {
			reqs = append(reqs, EvalRequest{Seq: x.seqs[j], Tokens: testTokens(50+j, n, v), AllLogits: true})
		}
		if res, err = x.e.Eval(ctx, reqs); err != nil {
			t.Fatal(err)
		}
		rows = nil
		for _, r := range res {
			rows = append(rows, r.Logits...)
		}
		got[i] = append(got[i], rows)
	}
	for round, name := range []string{"prompt", "16 forks", "padded leaves"} {
		if len(got[0][round]) != len(got[1][round]) {
			t.Fatalf("%s: %d rows against %d", name, len(got[0][round]), len(got[1][round]))
		}
		for r := range got[0][round] {
			assertClose(t, fmt.Sprintf("%s, row %d", name, r), got[0][round][r], got[1][round][r], tolFor(on))
		}
	}
}

// TestChooseRule: how engines run the delta rule, by DeltaRule, device and
// head size (the GPU cases cannot run here).
func TestChooseRule(t *testing.T) {
	for _, tc := range []struct {
		rule                   string
		onGPU, ragged, kernels bool
		d                      int
		want                   deltaRule
	}{
		{"auto", false, true, true, 64, ruleKernel},
		{"auto", false, true, true, 128, ruleKernel},
		{"auto", false, true, true, 16, ruleKernel},
		{"auto", false, true, false, 128, ruleGraph},
		{"auto", false, false, false, 128, ruleGraph},
		{"auto", true, true, true, 128, ruleGraph},
		{"kernel", false, true, true, 16, ruleKernel},
		{"kernel", true, true, true, 128, ruleGraph},
		{"kernel", false, false, false, 64, ruleGraph},
		{"graph", false, true, true, 128, ruleGraph},
		{"operator", false, true, true, 128, ruleWKV},
		{"operator", false, true, false, 256, ruleWKV},
		{"operator", false, true, true, 32, ruleGraph},
		{"operator", false, false, false, 64, ruleGraph},
		{"operator", true, true, true, 64, ruleWKV},
		{"operator", true, true, true, 128, ruleWKV},
		{"operator", true, true, true, 256, ruleGraph},
	} {
		if got := chooseRule(tc.rule, tc.onGPU, tc.ragged, tc.kernels, tc.d); got != tc.want {
			t.Errorf("chooseRule(%q, GPU %v, ragged %v, kernels %v, heads %d) = %v, want %v", tc.rule, tc.onGPU, tc.ragged, tc.kernels, tc.d, got, tc.want)
		}
	}
}
