package train

import (
	"fmt"
	"testing"
)

// BenchmarkTrainSequence: one forward and backward pass of the training
// graph over one sequence (the unit of a training step's work), for the
// shipped shape (64 wide) and a wider one, at a typical compact-prompt
// length. Reports positions/s.
func BenchmarkTrainSequence(b *testing.B) {
	for _, tc := range []struct {
		dim, heads, ffn, seq int
	}{{64, 2, 192, 384}, {128, 4, 256, 384}} {
		b.Run(fmt.Sprintf("dim=%d/seq=%d", tc.dim, tc.seq), func(b *testing.B) {
			p, err := NewParams(Config{Vocab: 680, Dim: tc.dim, Layers: 2, Heads: tc.heads, FFN: tc.ffn}, 1)
			if err != nil {
				b.Fatal(err)
			}
			ex := Example{ID: "bench", Tokens: make([]int32, tc.seq), PlanStart: tc.seq - 48}
			for i := range ex.Tokens {
				ex.Tokens[i] = int32(i % 680)
			}
			r, err := newRunner(p, tc.seq, 48)
			if err != nil {
				b.Fatal(err)
			}
			defer r.close()
			out := newExOut(p)
			b.ResetTimer()
			for b.Loop() {
				r.sync()
				if _, _, err := r.run(itemOf(ex), 1, out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tc.seq)*float64(b.N)/b.Elapsed().Seconds(), "positions/s")
		})
	}
}

// BenchmarkTrainShippedShape is one ALFWorld-sized example (768
// positions, 60 plan tokens) forward and backward through the shipped
// prior's shape (4 layers, 128 wide, 4 heads, FFN 384, tied, 1,009
// tokens), on each BLAS (BLASOpenBLAS only where it loads).
func BenchmarkTrainShippedShape(b *testing.B) {
	for _, name := range []BLAS{BLASGonum, BLASOpenBLAS} {
		b.Run("blas="+string(name), func(b *testing.B) {
			restore, err := useBLAS(name)
			if err != nil {
				b.Skip(err)
			}
			defer restore()
			p, err := NewParams(Config{Vocab: 1009, Dim: 128, Layers: 4, Heads: 4, FFN: 384, Tied: true}, 1)
			if err != nil {
				b.Fatal(err)
			}
			const seq, plan = 768, 60
			ex := Example{ID: "bench", Tokens: make([]int32, seq), PlanStart: seq - plan}
			for i := range ex.Tokens {
				ex.Tokens[i] = int32(i % 1009)
			}
			r, err := newRunner(p, seq, plan)
			if err != nil {
				b.Fatal(err)
			}
			defer r.close()
			out := newExOut(p)
			for b.Loop() {
				r.sync()
				if _, _, err := r.run(itemOf(ex), 1, out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(seq)*float64(b.N)/b.Elapsed().Seconds(), "positions/s")
		})
	}
}
