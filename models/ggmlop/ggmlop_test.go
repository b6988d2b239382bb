package ggmlop

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ollama/ollama/ml"
	_ "github.com/ollama/ollama/ml/backend"   // registers the ggml backend
	_ "github.com/ollama/ollama/model/models" // registers the architectures

	"github.com/nesy-dev/nesy/internal/testkit"
	"github.com/nesy-dev/nesy/models/gguf"
)

// wkv7Ref is WKV7's recurrence written out: inputs [S, H, T] and states
// [S*S*H, n] as flat slices.
func wkv7Ref(s, h, n int, r, w, k, v, a, b, state []float32) (y, final []float32) {
	T := len(r) / (s * h)
	per := T / n
	y = make([]float32, s*h*T)
	final = make([]float32, len(state))
	copy(final, state)
	for seq := range n {
		for t := seq * per; t < (seq+1)*per; t++ {
			for hd := range h {
				m := final[seq*s*s*h+hd*s*s:]
				in := func(x []float32, j int) float64 { return float64(x[t*s*h+hd*s+j]) }
				for i := range s {
					var sa float64
					for j := range s {
						sa += in(a, j) * float64(m[i*s+j])
					}
					var out float64
					for j := range s {
						nv := float64(m[i*s+j])*in(w, j) + in(v, i)*in(k, j) + sa*in(b, j)
						m[i*s+j] = float32(nv)
						out += nv * in(r, j)
					}
					y[t*s*h+hd*s+i] = float32(out)
				}
			}
		}
	}
	return y, final
}

// TestWKV7 checks ggml's operator through WKV7 against the recurrence
// written out, for one and several sequences, heads of 64 and 128, and a
// state given as a non-contiguous view (copied first).
func TestWKV7(t *testing.T) {
	b := testkit.OllamaModel(t, gguf.ArchLlama).Backend()
	for _, tc := range []struct{ s, h, n, per int }{{64, 2, 1, 1}, {64, 3, 4, 5}, {128, 2, 3, 2}} {
		t.Run(fmt.Sprintf("S=%d/H=%d/seqs=%d/positions=%d", tc.s, tc.h, tc.n, tc.per), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.s), uint64(tc.n)))
			T := tc.n * tc.per
			vec := func(n int, lo, hi float32) []float32 {
				x := make([]float32, n)
				for i := range x {
					x[i] = lo + (hi-lo)*rng.Float32()
				}
				return x
			}
			m := tc.s * tc.h * T
			r, w, k, v := vec(m, -1, 1), vec(m, 0.5, 1), vec(m, -0.3, 0.3), vec(m, -1, 1)
			a, bb := vec(m, -0.1, 0.1), vec(m, -0.3, 0.3)
			state := vec(tc.s*tc.s*tc.h*tc.n, -1, 1)
			ctx := b.NewContext()
			defer ctx.Close()
			in := func(x []float32) ml.Tensor { return ctx.Input().FromFloats(x, tc.s, tc.h, T) }
			// The state as the transpose of a transpose: a view that is
			// not contiguous, which WKV7 must copy.
			st := ctx.Input().FromFloats(state, tc.s*tc.s*tc.h, tc.n)
			stView := st.Reshape(ctx, tc.s*tc.s*tc.h, tc.n).Permute(ctx, 1, 0, 2, 3).Contiguous(ctx).Permute(ctx, 1, 0, 2, 3)
			out, ok := WKV7(ctx, in(r), in(w), in(k), in(v), in(a), in(bb), stView)
			if !ok {
				t.Fatal("WKV7 not supported on Ollama's ggml backend")
			}
			if got, want := out.Shape(), []int{tc.s * tc.h, T + tc.s*tc.n}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("shape %v, want %v", got, want)
			}
			ctx.Forward(out).Compute(out)
			got := out.Floats()
			wantY, wantState := wkv7Ref(tc.s, tc.h, tc.n, r, w, k, v, a, bb, state)
			want := append(wantY, wantState...)
			if len(got) != len(want) {
				t.Fatalf("%d values, want %d", len(got), len(want))
			}
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*(1+math.Abs(float64(want[i]))) {
					t.Fatalf("value %d: %g, want %g", i, got[i], want[i])
				}
			}
		})
	}
}

// TestWKV7Unsupported: tensors of another backend are refused, not
// dereferenced.
func TestWKV7Unsupported(t *testing.T) {
	if _, ok := WKV7(nil, nil, nil, nil, nil, nil, nil, nil); ok {
		t.Fatal("nil context accepted")
	}
}
