package models

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/models/gguf"
)

// candidateSpecs are models whose output projection passes may narrow to
// candidates: each architecture's output (untied, tied, gemma3's with its
// final softcap, qwen35's hybrid forward with its padded passes, with the
// delta rule as the graph and as one operator).
func candidateSpecs() map[string]gguf.Spec {
	specs := map[string]gguf.Spec{}
	for _, arch := range []string{gguf.ArchLlama, gguf.ArchQwen3, gguf.ArchGemma3, gguf.ArchQwen35} {
		s := gguf.Default(arch)
		if arch != gguf.ArchGemma3 {
			s.VocabSize = 4000
		}
		specs[arch] = s
	}
	tied := specs[gguf.ArchQwen3]
	tied.TiedOutput = true
	specs["qwen3-tied"] = tied
	h64 := hybridSpecs()["qwen35-h64"]
	h64.VocabSize = 4000
	specs["qwen35-h64"] = h64
	return specs
}

// TestCandidateLogits: requests that name their candidates get the same
// logits for them as a full evaluation of the same tokens (float
// tolerance), -Inf for every other token, and passes whose rows all name
// candidates compute only those (CandidatePasses); a pass with a request
// that names none computes the full projection and still masks the rows
// that do; FullLogits computes every pass in full with the same rows;
// requests asking for compact rows (CompactCandidates) get the same
// candidates' logits, one per candidate in their order.
func TestCandidateLogits(t *testing.T) {
	for name, spec := range candidateSpecs() {
		t.Run(name, func(t *testing.T) {
			for _, full := range []bool{false, true} {
				e := newTestEngine(t, spec, Options{FullLogits: full})
				// Only CPU engines narrow the output (a GPU engine's rows
				// are masked all the same).
				narrows := !full && e.Info().Device == "CPU"
				if (e.output != nil) != narrows {
					t.Fatalf("FullLogits %v on %s: output projection found = %v", full, e.Info().Device, e.output != nil)
				}
				v := e.Info().VocabSize
				prompt := testTokens(1, 12, v)
				root, err := e.NewSequence()
				if err != nil {
					t.Fatal(err)
				}
				defer e.Release(root)
				if _, err := e.Eval(context.Background(), []EvalRequest{{Seq: root, Tokens: prompt}}); err != nil {
					t.Fatal(err)
				}
				// Forks continuing by 1 to 4 tokens (a search's leaves: a
				// padded pass for qwen35), each with its own candidates;
				// in the second round one request names none.
				for round := range 2 {
					var reqs []EvalRequest
					for i := range 6 {
						s, err := e.Fork(root, len(prompt))
						if err != nil {
							t.Fatal(err)
						}
						defer e.Release(s)
						r := EvalRequest{Seq: s, Tokens: testTokens(10*round+i+2, 1+i%4, v)}
						if round == 0 || i != 3 {
							r.Candidates = testTokens(100*round+i, 3+5*i, v)
							r.CompactCandidates = i%2 == 1
						}
						reqs = append(reqs, r)
					}
					passes := e.Stats().CandidatePasses
					res, err := e.Eval(context.Background(), reqs)
					if err != nil {
						t.Fatal(err)
					}
					got := e.Stats().CandidatePasses - passes
					switch {
					case !narrows && got != 0:
						t.Errorf("round %d: %d candidate passes with FullLogits or on a GPU", round, got)
					case narrows && round == 0 && got == 0:
						t.Errorf("round %d: no pass computed only the candidates", round)
					case round == 1 && got != 0:
						t.Errorf("round %d: %d candidate passes beside a request without candidates", round, got)
					}
					for i, r := range reqs {
						alone := evalAlone(t, e, append(append([]int32{}, prompt...), r.Tokens...))
						want := alone[len(alone)-1]
						row := res[i].Logits[0]
						if r.Candidates == nil {
							assertClose(t, fmt.Sprintf("round %d request %d", round, i), row, want, tolFor(e))
							continue
						}
						if r.CompactCandidates {
							if len(row) != len(r.Candidates) {
								t.Fatalf("round %d request %d: compact row of %d logits for %d candidates", round, i, len(row), len(r.Candidates))
							}
							row = maskedRow(v, r.Candidates, func(c int32) float32 { return row[slices.Index(r.Candidates, c)] })
						}
						checkCandidateRow(t, fmt.Sprintf("round %d request %d", round, i), row, want, r.Candidates, tolFor(e))
					}
				}
			}
		})
	}
}

// checkCandidateRow checks a row masked to candidates against the full
// row want: the candidates' logits within tol of want's spread, -Inf
// elsewhere.
func checkCandidateRow(t *testing.T, what string, row, want []float32, cands []int32, tol float64) {
	t.Helper()
	if len(row) != len(want) {
		t.Fatalf("%s: %d logits, want %d", what, len(row), len(want))
	}
	keep := map[int32]bool{}
	for _, c := range cands {
		keep[c] = true
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, w := range want {
		lo, hi = math.Min(lo, float64(w)), math.Max(hi, float64(w))
	}
	for j, l := range row {
		if !keep[int32(j)] {
			if !math.IsInf(float64(l), -1) {
				t.Fatalf("%s: token %d is not a candidate but has logit %v", what, j, l)
			}
			continue
		}
		if d := math.Abs(float64(l - want[j])); math.IsNaN(d) || d > tol*(hi-lo) {
			t.Fatalf("%s: candidate %d has logit %v, full evaluation %v", what, j, l, want[j])
		}
	}
}

// TestCandidateErrors: a candidate outside the vocabulary is refused by
// the engine and by the uniform model, and the uniform model masks its
// rows (and makes them compact) as the engine does.
func TestCandidateErrors(t *testing.T) {
	e := newTestEngine(t, gguf.Default(gguf.ArchLlama), Options{})
	u := NewUniform(e, 4)
	for _, lm := range []LM{e, u} {
		v := lm.Info().VocabSize
		s, err := lm.NewSequence()
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []int32{-1, int32(v)} {
			_, err := lm.Eval(context.Background(), []EvalRequest{{Seq: s, Tokens: []int32{5}, Candidates: []int32{3, bad}}})
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("candidate token %d outside the vocabulary", bad)) {
				t.Errorf("%T: candidate %d: %v", lm, bad, err)
			}
		}
		if lm.Len(s) != 0 {
			t.Errorf("%T: a refused request changed the sequence (%d positions)", lm, lm.Len(s))
		}
		res, err := lm.Eval(context.Background(), []EvalRequest{{Seq: s, Tokens: []int32{5}, Candidates: []int32{3, 7}}})
		if err != nil {
			t.Fatal(err)
		}
		for j, l := range res[0].Logits[0] {
			if isInf := math.IsInf(float64(l), -1); isInf == (j == 3 || j == 7) {
				t.Fatalf("%T: token %d has logit %v", lm, j, l)
			}
		}
		res, err = lm.Eval(context.Background(), []EvalRequest{{Seq: s, Tokens: []int32{6}, Candidates: []int32{7, 3, 9}, CompactCandidates: true}})
		if err != nil {
			t.Fatal(err)
		}
		if row := res[0].Logits[0]; len(row) != 3 || slices.ContainsFunc(row, func(l float32) bool { return math.IsInf(float64(l), 0) || l != l }) {
			t.Fatalf("%T: compact row %v, want 3 finite logits", lm, row)
		}
		lm.Release(s)
	}
}

// TestCandidateLogitsIgnored: an architecture whose forward does not use
// the projection the engine narrows (simulated with a copy of it) returns
// whole rows; the engine reads them as such, gives the right logits, and
// narrows no more passes.
func TestCandidateLogitsIgnored(t *testing.T) {
	spec := gguf.Default(gguf.ArchLlama)
	spec.VocabSize = 4000
	e := newTestEngine(t, spec, Options{})
	if e.output == nil {
		t.Skip("this engine does not narrow the output (not on the CPU)")
	}
	copied := *e.output
	e.output = &copied
	v := e.Info().VocabSize
	toks, cands := testTokens(1, 9, v), testTokens(2, 5, v)
	s, err := e.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Eval(context.Background(), []EvalRequest{{Seq: s, Tokens: toks, Candidates: cands}})
	if err != nil {
		t.Fatal(err)
	}
	full := evalAlone(t, e, toks)
	checkCandidateRow(t, "ignored narrowing", res[0].Logits[0], full[len(full)-1], cands, tolFor(e))
	if e.output != nil || e.Stats().CandidatePasses != 0 {
		t.Errorf("after a pass that ignored the narrowing: output %v, %d candidate passes", e.output != nil, e.Stats().CandidatePasses)
	}
}
