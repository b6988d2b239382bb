package models

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/nesy-dev/nesy/models/gguf"
)

// TestWeightTypes: a generated model written with F16, BF16, Q8_0 or
// Q4_0 weight matrices loads and computes what its F32 twin (same seed, so the
// same values before rounding) computes, within the rounding of its type,
// and not bit for bit (the weights really are stored in that type, which
// TestWriteWeightTypes checks in the file). The tolerance is relative to
// the spread of the F32 logits at the last of 24 prompt positions;
// measured for llama, qwen3 and qwen35: F16 3e-4 to 8e-4, BF16 3e-3 to
// 6e-3, Q8_0 8e-3 to 2e-2, Q4_0 0.10 to 0.14 (a 4-bit model's logits are
// that far from its F32 twin's; swapping its nibbles gives 0.38-0.68). A
// mixture of experts amplifies the rounding wherever two router scores
// nearly tie (the token takes another expert; qwen35moe measured 0.017 for
// BF16, 0.09 for Q8_0, 0.23 for Q4_0), so qwen35moe gets three times the
// tolerance: a wrongly stored weight is still off by the whole spread.
func TestWeightTypes(t *testing.T) {
	tols := map[gguf.DType]float64{gguf.F16: 0.01, gguf.BF16: 0.06, gguf.Q8_0: 0.06, gguf.Q4_0: 0.25}
	for _, arch := range []string{gguf.ArchLlama, gguf.ArchQwen3, gguf.ArchQwen35, gguf.ArchQwen35MoE} {
		base := gguf.Default(arch)
		want := lastLogits(t, base)
		for _, dt := range []gguf.DType{gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q4_0} {
			t.Run(fmt.Sprintf("%s/%s", arch, dt), func(t *testing.T) {
				s := base
				s.DType = dt
				got := lastLogits(t, s)
				lo, hi := math.Inf(1), math.Inf(-1)
				for _, v := range want {
					lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
				}
				rel, tol := maxAbsDiff(got, want)/(hi-lo), tols[dt]
				if arch == gguf.ArchQwen35MoE {
					tol *= 3
				}
				t.Logf("largest difference from F32: %.2g of the logits' spread %.3g", rel, hi-lo)
				if math.IsNaN(rel) || rel > tol {
					t.Errorf("%s logits differ from F32 by %.3g of their spread, want <= %g", dt, rel, tol)
				}
				if rel == 0 {
					t.Errorf("%s logits equal F32's bit for bit: the weights were not stored as %s", dt, dt)
				}
			})
		}
	}
}

// lastLogits loads spec and returns the logits of the last position of a
// 24-token prompt.
func lastLogits(t *testing.T, spec gguf.Spec) []float32 {
	t.Helper()
	e := newTestEngine(t, spec, Options{Sequences: 1})
	seq, err := e.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Eval(context.Background(), []EvalRequest{{Seq: seq, Tokens: testTokens(3, 24, e.Info().VocabSize)}})
	if err != nil {
		t.Fatal(err)
	}
	return res[0].Logits[len(res[0].Logits)-1]
}

// TestConvWeightTypes: a qwen35 file whose delta-net convolution weights
// are F16 or BF16 (converters keep them F32, but one that casts every
// matrix would not) loads and computes what its F32 twin computes within
// the type's rounding, through nesy's kernels and through ggml's graph
// (whose SSM convolution takes F32 weights only and aborted the process on
// others), for a prompt (the model's own chunked delta-net under the graph
// rule) and a decode step.
func TestConvWeightTypes(t *testing.T) {
	for _, rule := range []string{"kernel", "graph"} {
		want := ruleLogits(t, gguf.Default(gguf.ArchQwen35), rule)
		for _, dt := range []gguf.DType{gguf.F16, gguf.BF16} {
			t.Run(rule+"/"+string(dt), func(t *testing.T) {
				s := gguf.Default(gguf.ArchQwen35)
				s.ConvDType = dt
				got := ruleLogits(t, s, rule)
				for i := range got {
					assertClose(t, fmt.Sprintf("row %d", i), got[i], want[i], 0.01)
				}
			})
		}
	}
}

// ruleLogits runs a 24-token prompt and one decode step under a delta
// rule and returns the last row of each.
func ruleLogits(t *testing.T, spec gguf.Spec, rule string) [][]float32 {
	t.Helper()
	e := newTestEngine(t, spec, Options{Sequences: 1, DeltaRule: rule})
	seq, err := e.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]float32
	for _, toks := range [][]int32{testTokens(3, 24, e.Info().VocabSize), testTokens(4, 1, e.Info().VocabSize)} {
		res, err := e.Eval(context.Background(), []EvalRequest{{Seq: seq, Tokens: toks}})
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, res[0].Logits[len(res[0].Logits)-1])
	}
	return rows
}
