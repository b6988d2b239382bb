package train

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/chewxy/math32"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// softmaxGraph builds w -> softmax(x*w + mask) (or log-softmax) -> sum of
// its product with c, with either gorgonia's op or rowSoftmaxOp, runs it
// forward and backward, and returns the softmax's output and w's gradient.
func softmaxGraph(t *testing.T, ours, isLog bool, x, w, mask, c []float32, n, k int) (y, dw []float32) {
	t.Helper()
	g := G.NewGraph()
	mat := func(name string, r, cols int, data []float32) *G.Node {
		v := tensor.New(tensor.WithShape(r, cols), tensor.WithBacking(append([]float32(nil), data...)))
		return G.NewMatrix(g, tensor.Float32, G.WithShape(r, cols), G.WithName(name), G.WithValue(v))
	}
	xn, wn := mat("x", n, k, x), mat("w", k, n, w)
	xw, mn := G.Must(G.Mul(xn, wn)), mat("mask", n, n, mask)
	s := G.Must(G.Add(xw, mn))
	var sm *G.Node
	switch {
	case ours:
		sm = G.Must(softmaxRows(xw, mn, isLog))
	case isLog:
		sm = G.Must(G.LogSoftMax(s))
	default:
		sm = G.Must(G.SoftMax(s))
	}
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(sm, mat("c", n, n, c)))))
	grads, err := G.Grad(loss, wn)
	if err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	y = append(y, sm.Value().Data().([]float32)...)
	dw = append(dw, grads[0].Value().Data().([]float32)...)
	return y, dw
}

// TestSoftmaxRowsBitIdentical checks that the training graph's softmax op
// gives gorgonia's SoftMax and LogSoftMax bit for bit, forward and in the
// gradient, on causally masked scores (-1e9, as the graph masks) and on
// scores of widely spread magnitudes, so the shipped recipe still
// reproduces the shipped prior; and that math32.Exp is exactly +0 where
// the op skips it.
func TestSoftmaxRowsBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tc := range []struct {
		name   string
		n, k   int
		scale  float32
		causal bool
	}{
		{"causal 64", 64, 16, 1, true},
		{"causal 300, wide scores", 300, 8, 6, true},
		{"unmasked 40", 40, 16, 1, false},
		{"one row", 1, 4, 1, false},
	} {
		for _, isLog := range []bool{false, true} {
			n, k := tc.n, tc.k
			x, w, c := make([]float32, n*k), make([]float32, k*n), make([]float32, n*n)
			for i := range x {
				x[i] = float32(rng.NormFloat64()) * tc.scale
			}
			for i := range w {
				w[i] = float32(rng.NormFloat64())
			}
			for i := range c {
				c[i] = float32(rng.NormFloat64())
			}
			mask := make([]float32, n*n)
			if tc.causal {
				for i := range n {
					for j := i + 1; j < n; j++ {
						mask[i*n+j] = -1e9
					}
				}
			}
			wantY, wantD := softmaxGraph(t, false, isLog, x, w, mask, c, n, k)
			gotY, gotD := softmaxGraph(t, true, isLog, x, w, mask, c, n, k)
			for i := range wantY {
				if math.Float32bits(gotY[i]) != math.Float32bits(wantY[i]) {
					t.Fatalf("%s, log %v: output %d: %g, gorgonia %g", tc.name, isLog, i, gotY[i], wantY[i])
				}
			}
			for i := range wantD {
				if math.Float32bits(gotD[i]) != math.Float32bits(wantD[i]) {
					t.Fatalf("%s, log %v: gradient %d: %g, gorgonia %g", tc.name, isLog, i, gotD[i], wantD[i])
				}
			}
		}
	}
	// Where expMasked skips the exponential, math32.Exp is exactly +0.
	for z := float32(maskedBelow); z > -1e12; z *= 1.0001 {
		if e := math32.Exp(z); math.Float32bits(e) != 0 {
			t.Fatalf("math32.Exp(%g) = %g, not +0", z, e)
		}
	}
	for _, z := range []float32{-1e9, -1e9 - 50, float32(math.Inf(-1))} {
		if e := math32.Exp(z); math.Float32bits(e) != 0 {
			t.Fatalf("math32.Exp(%g) = %g, not +0", z, e)
		}
	}
}
