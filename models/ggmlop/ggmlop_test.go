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
			wantY, wantState := wkv7Ref(tc.s, tc.h, tc.n, r, w, k, v, a, bb, state)
			closeTo(t, out.Floats(), append(wantY, wantState...))
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

// deltaRef is DeltaRule's recurrence written out: q, k [d, hK, T], v
// [d, hV, T], logDecay and beta [hV, T], states [d*d*hV, n] as flat
// slices, the sequences' positions one sequence after the other.
func deltaRef(d, hK, hV int, lens []int32, reordered bool, q, k, v, logDecay, beta, state []float32) (y, final []float32) {
	T := len(v) / (d * hV)
	y = make([]float32, d*hV*T)
	final = append([]float32(nil), state...)
	t := 0
	for s, l := range lens {
		for range l {
			for h := range hV {
				kh := h / (hV / hK)
				if reordered {
					kh = h % hK
				}
				m := final[(s*hV+h)*d*d:]
				g := math.Exp(float64(logDecay[t*hV+h]))
				bt := float64(beta[t*hV+h])
				kv := func(j int) float64 { return float64(k[(t*hK+kh)*d+j]) }
				for i := range d {
					var mk float64
					for j := range d {
						mk += float64(m[i*d+j]) * kv(j)
					}
					delta := bt * (float64(v[(t*hV+h)*d+i]) - g*mk)
					var out float64
					for j := range d {
						x := g*float64(m[i*d+j]) + delta*kv(j)
						m[i*d+j] = float32(x)
						out += x * float64(q[(t*hK+kh)*d+j])
					}
					y[(t*hV+h)*d+i] = float32(out)
				}
			}
			t++
		}
	}
	return y, final
}

// convRef is Conv written out: x [C, T], state [K-1, C, n], weight
// [K, C].
func convRef(C, K int, lens []int32, x, state, weight []float32) (y, final []float32) {
	T := len(x) / C
	y = make([]float32, C*T)
	final = make([]float32, len(state))
	t0 := 0
	for s, l := range lens {
		for c := range C {
			e := make([]float64, 0, K-1+int(l))
			for i := range K - 1 {
				e = append(e, float64(state[(s*C+c)*(K-1)+i]))
			}
			for t := range int(l) {
				e = append(e, float64(x[(t0+t)*C+c]))
			}
			for t := range int(l) {
				var sum float64
				for i := range K {
					sum += float64(weight[c*K+i]) * e[t+i]
				}
				y[(t0+t)*C+c] = float32(sum)
			}
			for i := range K - 1 {
				final[(s*C+c)*(K-1)+i] = float32(e[len(e)-(K-1)+i])
			}
		}
		t0 += int(l)
	}
	return y, final
}

// TestDeltaRule checks the kernel against the recurrence written out:
// sequences of different lengths (one of none), heads of 16 and 64, key
// heads shared by several value heads in both orders, and v read as a
// strided view of a wider tensor (as deltaStep reads the convolution's
// output).
func TestDeltaRule(t *testing.T) {
	b := testkit.OllamaModel(t, gguf.ArchLlama).Backend()
	for _, tc := range []struct {
		d, hK, hV int
		lens      []int32
		reordered bool
	}{
		{16, 2, 2, []int32{1}, false},
		{16, 2, 6, []int32{5, 3, 3, 1}, false},
		{16, 2, 6, []int32{4, 0, 2}, true},
		{64, 1, 3, []int32{2, 2}, false},
		{64, 2, 4, []int32{7, 1, 1}, true},
	} {
		t.Run(fmt.Sprintf("d=%d/hK=%d/hV=%d/lens=%v/reordered=%v", tc.d, tc.hK, tc.hV, tc.lens, tc.reordered), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.d), uint64(tc.hV)))
			T := 0
			for _, l := range tc.lens {
				T += int(l)
			}
			n := len(tc.lens)
			vec := func(n int, lo, hi float32) []float32 {
				x := make([]float32, n)
				for i := range x {
					x[i] = lo + (hi-lo)*rng.Float32()
				}
				return x
			}
			d, hK, hV := tc.d, tc.hK, tc.hV
			q, k := vec(d*hK*T, -0.3, 0.3), vec(d*hK*T, -0.3, 0.3)
			wide := vec(d*(hV+1)*T, -1, 1) // v is heads 1..hV of each position
			v := make([]float32, 0, d*hV*T)
			for p := range T {
				v = append(v, wide[(p*(hV+1)+1)*d:(p+1)*(hV+1)*d]...)
			}
			lg, beta := vec(hV*T, -0.5, 0), vec(hV*T, 0, 1)
			state := vec(d*d*hV*n, -1, 1)
			ctx := b.NewContext()
			defer ctx.Close()
			w := ctx.Input().FromFloats(wide, d, hV+1, T)
			vView := w.View(ctx, d*4, d, w.Stride(1), hV, w.Stride(2), T)
			out, ok := DeltaRule(ctx, ctx.Input().FromFloats(q, d, hK, T), ctx.Input().FromFloats(k, d, hK, T), vView,
				ctx.Input().FromFloats(lg, hV, T), ctx.Input().FromFloats(beta, hV, T),
				ctx.Input().FromFloats(state, d*d*hV, n), ctx.Input().FromInts(tc.lens, n), tc.reordered)
			if !ok {
				t.Fatal("DeltaRule not supported on Ollama's ggml backend")
			}
			if got, want := out.Shape(), []int{d * hV, T + d*n}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("shape %v, want %v", got, want)
			}
			ctx.Forward(out).Compute(out)
			wantY, wantState := deltaRef(d, hK, hV, tc.lens, tc.reordered, q, k, v, lg, beta, state)
			closeTo(t, out.Floats(), append(wantY, wantState...))
		})
	}
}

// TestConv checks the kernel against the convolution written out, for
// sequences of different lengths (one of none), kernels of 2, 4 and 8 and
// channel counts around the kernel's blocks of 64 on two threads' halves.
func TestConv(t *testing.T) {
	b := testkit.OllamaModel(t, gguf.ArchLlama).Backend()
	for _, tc := range []struct {
		C, K int
		lens []int32
	}{{5, 2, []int32{1}}, {40, 4, []int32{6, 3, 0, 1}}, {640, 4, []int32{2, 2, 2}}, {131, 8, []int32{9, 1}}} {
		t.Run(fmt.Sprintf("C=%d/K=%d/lens=%v", tc.C, tc.K, tc.lens), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.C), uint64(tc.K)))
			T := 0
			for _, l := range tc.lens {
				T += int(l)
			}
			n := len(tc.lens)
			vec := func(n int) []float32 {
				x := make([]float32, n)
				for i := range x {
					x[i] = 2*rng.Float32() - 1
				}
				return x
			}
			x, state, weight := vec(tc.C*T), vec((tc.K-1)*tc.C*n), vec(tc.K*tc.C)
			ctx := b.NewContext()
			defer ctx.Close()
			out, ok := Conv(ctx, ctx.Input().FromFloats(x, tc.C, T), ctx.Input().FromFloats(state, tc.K-1, tc.C, n),
				ctx.Input().FromFloats(weight, tc.K, tc.C), ctx.Input().FromInts(tc.lens, n))
			if !ok {
				t.Fatal("Conv not supported on Ollama's ggml backend")
			}
			if got, want := out.Shape(), []int{tc.C, T + (tc.K-1)*n}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("shape %v, want %v", got, want)
			}
			ctx.Forward(out).Compute(out)
			wantY, wantState := convRef(tc.C, tc.K, tc.lens, x, state, weight)
			closeTo(t, out.Floats(), append(wantY, wantState...))
		})
	}
}

// closeTo fails t unless got and want agree within float rounding.
func closeTo(t *testing.T, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("value %d: %g, want %g", i, got[i], want[i])
		}
	}
}

// TestOwnKernelsUnsupported: tensors of another backend are refused, not
// dereferenced.
func TestOwnKernelsUnsupported(t *testing.T) {
	if _, ok := DeltaRule(nil, nil, nil, nil, nil, nil, nil, nil, false); ok {
		t.Fatal("DeltaRule: nil context accepted")
	}
	if _, ok := Conv(nil, nil, nil, nil, nil); ok {
		t.Fatal("Conv: nil context accepted")
	}
}
