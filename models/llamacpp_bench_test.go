//go:build llamacpp

package models

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/nesy-dev/nesy/internal/llamacpp"
	"github.com/nesy-dev/nesy/models/gguf"
)

// Side by side with llama.cpp (issue 16): the same shapes as
// BenchmarkPrefill, BenchmarkDecode and BenchmarkForked16Batched, run by
// llama.cpp's C API (as vendored in Ollama's module, on the same ggml
// sources and flags) on the same reference GGUF, with one KV cache shared
// by every sequence (kv_unified), NESY_BENCH_THREADS threads and
// NESY_BENCH_FLASH=on|off. Build with the llamacpp tag and llama.h on the
// include path: scripts/llamacpp-bench.sh does both and interleaves the
// rounds.

func benchLlamaCpp(tb testing.TB, path string) *llamacpp.Context {
	tb.Helper()
	c, err := llamacpp.Load(path, llamacpp.Options{
		Context: 4096, Batch: benchPrompt, Sequences: benchWidth + 1,
		Threads: envInt("NESY_BENCH_THREADS", runtime.NumCPU()), Flash: os.Getenv("NESY_BENCH_FLASH") == "on",
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// decodeSeq runs toks on seq from position from, asking for the last
// row's logits (copied into dst, as the models API copies them out).
func decodeSeq(b *testing.B, c *llamacpp.Context, seq int, toks []int32, from int, dst []float32) {
	pos := make([]int32, len(toks))
	seqs := make([]int32, len(toks))
	logits := make([]bool, len(toks))
	for i := range toks {
		pos[i], seqs[i] = int32(from+i), int32(seq)
	}
	logits[len(toks)-1] = true
	if err := c.Decode(toks, pos, seqs, logits); err != nil {
		b.Fatal(err)
	}
	c.Logits(len(toks)-1, dst)
}

// BenchmarkLlamaCppPrefill is BenchmarkPrefill by llama.cpp.
func BenchmarkLlamaCppPrefill(b *testing.B) {
	c := benchLlamaCpp(b, referenceModel(b))
	toks := testTokens(1, benchPrompt, c.Vocab())
	row := make([]float32, c.Vocab())
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		decodeSeq(b, c, 0, toks, 0, row)
		b.StopTimer()
		c.Remove(0, 0, -1)
		b.StartTimer()
	}
	reportTokens(b, b.N*benchPrompt, cpu0)
}

// BenchmarkLlamaCppDecode is BenchmarkDecode by llama.cpp.
func BenchmarkLlamaCppDecode(b *testing.B) {
	c := benchLlamaCpp(b, referenceModel(b))
	row := make([]float32, c.Vocab())
	decodeSeq(b, c, 0, testTokens(1, 64, c.Vocab()), 0, row)
	next := testTokens(2, 256, c.Vocab())
	i := 0
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		decodeSeq(b, c, 0, next[i:i+1], 64+i, row)
		if i++; i == len(next) {
			b.StopTimer()
			i = 0
			if !c.Remove(0, 64, -1) {
				b.Fatal("cannot cut the sequence back")
			}
			b.StartTimer()
		}
	}
	reportTokens(b, b.N, cpu0)
}

// BenchmarkLlamaCppForked16 is BenchmarkForked16Batched by llama.cpp: 16
// sequences share a 64-token prompt's cells; one step of all 16 is one
// llama_decode, and every row's logits are copied out.
func BenchmarkLlamaCppForked16(b *testing.B) {
	c := benchLlamaCpp(b, referenceModel(b))
	v := c.Vocab()
	row := make([]float32, v)
	decodeSeq(b, c, 0, testTokens(3, 64, v), 0, row)
	for i := 1; i <= benchWidth; i++ {
		c.Copy(0, i, 0, -1)
	}
	toks := testTokens(4, benchWidth, v)
	pos := make([]int32, benchWidth)
	seqs := make([]int32, benchWidth)
	logits := make([]bool, benchWidth)
	rows := make([][]float32, benchWidth)
	for i := range rows {
		rows[i], seqs[i], logits[i] = make([]float32, v), int32(i+1), true
	}
	steps := 0
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		for i := range pos {
			pos[i] = int32(64 + steps)
		}
		if err := c.Decode(toks, pos, seqs, logits); err != nil {
			b.Fatal(err)
		}
		for i := range rows {
			c.Logits(i, rows[i])
		}
		if steps++; steps == 128 {
			b.StopTimer()
			for i := 1; i <= benchWidth; i++ {
				c.Remove(i, 64, -1)
			}
			steps = 0
			b.StartTimer()
		}
	}
	reportTokens(b, b.N*benchWidth, cpu0)
}

// TestLlamaCppSameLogits: on the same GGUF (NESY_BENCH_MODEL, else a
// generated llama model) and
// tokens, llama.cpp's logits after a 64-token prompt and after one more
// token equal nesy's engine's within float tolerance, with flash
// attention as NESY_BENCH_FLASH says: the benchmarks compare the same
// computation.
func TestLlamaCppSameLogits(t *testing.T) {
	path := os.Getenv("NESY_BENCH_MODEL")
	if path == "" {
		path = filepath.Join(t.TempDir(), "llama.gguf")
		if err := gguf.Write(path, gguf.Default("llama")); err != nil {
			t.Fatal(err)
		}
	}
	c := benchLlamaCpp(t, path)
	e, err := Load(context.Background(), path, Options{
		ContextLength: 4096, Threads: envInt("NESY_BENCH_THREADS", 0), FlashAttention: os.Getenv("NESY_BENCH_FLASH"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	v := c.Vocab()
	if v != e.Info().VocabSize {
		t.Fatalf("vocabularies %d and %d", v, e.Info().VocabSize)
	}
	prompt, next := testTokens(3, 64, v), testTokens(4, 1, v)
	s, _ := e.NewSequence()
	for i, toks := range [][]int32{prompt, next} {
		res, err := e.Eval(context.Background(), []EvalRequest{{Seq: s, Tokens: toks}})
		if err != nil {
			t.Fatal(err)
		}
		from := 0
		if i > 0 {
			from = len(prompt)
		}
		row := make([]float32, v)
		pos := make([]int32, len(toks))
		seqs := make([]int32, len(toks))
		logits := make([]bool, len(toks))
		for j := range toks {
			pos[j] = int32(from + j)
		}
		logits[len(toks)-1] = true
		if err := c.Decode(toks, pos, seqs, logits); err != nil {
			t.Fatal(err)
		}
		c.Logits(len(toks)-1, row)
		assertClose(t, fmt.Sprintf("step %d", i), res[0].Logits[len(res[0].Logits)-1], row, logitTol)
	}
}
