package train

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
)

// writeModel writes p with tok as a GGUF and loads it in the engine.
func writeModel(t *testing.T, p *Params, tok *gguf.Tokenizer) *models.Engine {
	t.Helper()
	spec, err := p.Spec(tok, "nesy-prior-test")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "prior.gguf")
	if err := gguf.Write(path, spec); err != nil {
		t.Fatal(err)
	}
	e, err := models.Load(context.Background(), path, models.Options{Threads: 1, Sequences: 1, ContextLength: 256})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestEngineMatchesGraph checks that the engine, loading the exported
// GGUF, computes the logits the training graph computes: the weights'
// layouts, the rotary positions, the norms and the feed-forward agree.
func TestEngineMatchesGraph(t *testing.T) {
	tok := gguf.TrainBPE([]string{"go to shelf 1", "take book 2 from sidetable 1", "use desklamp 1"}, 40, "\n")
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"one layer, two heads", Config{Dim: 32, Layers: 1, Heads: 2, FFN: 48}},
		{"two layers, four heads", Config{Dim: 64, Layers: 2, Heads: 4, FFN: 96, RopeBase: 500}},
		{"tied output", Config{Dim: 64, Layers: 2, Heads: 4, FFN: 96, Tied: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Vocab = len(tok.Tokens)
			p, err := NewParams(cfg, 7)
			if err != nil {
				t.Fatal(err)
			}
			// Spread the logits, so a layout error shows.
			out := p.Get(outName())
			if cfg.Tied {
				out = p.Get(embedName())
			}
			for i := range out.Data {
				out.Data[i] *= 30
			}
			e := writeModel(t, p, tok)
			tokens, err := e.Tokenize("take book 2 from sidetable 1\ngo to shelf 1\nuse desklamp 1\n", false)
			if err != nil {
				t.Fatal(err)
			}
			want, err := forwardLogits(p, tokens)
			if err != nil {
				t.Fatal(err)
			}
			seq, err := e.NewSequence()
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.Eval(context.Background(), []models.EvalRequest{{Seq: seq, Tokens: tokens, AllLogits: true}})
			if err != nil {
				t.Fatal(err)
			}
			got := res[0].Logits
			if len(got) != len(want) {
				t.Fatalf("%d rows from the engine, %d from the graph", len(got), len(want))
			}
			worst, spread := 0.0, 0.0
			for i := range want {
				for j := range want[i] {
					worst = max(worst, math.Abs(float64(got[i][j]-want[i][j])))
					spread = max(spread, math.Abs(float64(want[i][j])))
				}
			}
			if spread < 1 {
				t.Fatalf("logits within %.3g of 0: the test shows nothing", spread)
			}
			if worst > 1e-3*spread {
				t.Fatalf("engine and graph logits differ by up to %.4g (largest logit %.3g)", worst, spread)
			}
			t.Logf("%d positions: largest difference %.3g, largest logit %.3g", len(tokens), worst, spread)
		})
	}
}

// TestMaskedLoss: with Allowed sets the training graph's loss is
// -log softmax over the allowed tokens of the logits at the target,
// computed here from the reference logits; without them it is over the
// whole vocabulary.
func TestMaskedLoss(t *testing.T) {
	const vocab = 12
	p, err := NewParams(Config{Vocab: vocab, Dim: 16, Layers: 1, Heads: 2, FFN: 16}, 5)
	if err != nil {
		t.Fatal(err)
	}
	toks := []int32{1, 4, 7, 2, 9, 3, 5}
	allowed := [][]int32{{2, 3, 9}, {9}, {3, 5, 8, 11}, {5, 6}}
	ex := Example{ID: "masked", Tokens: toks, PlanStart: 3}
	logits, err := forwardLogits(p, toks)
	if err != nil {
		t.Fatal(err)
	}
	want := func(masked bool) float64 {
		sum := 0.0
		for k := range len(toks) - ex.PlanStart {
			row := logits[ex.PlanStart-1+k]
			set := allowed[k]
			if !masked {
				set = nil
				for v := range vocab {
					set = append(set, int32(v))
				}
			}
			z := 0.0
			for _, v := range set {
				z += math.Exp(float64(row[v]))
			}
			sum -= float64(row[toks[ex.PlanStart+k]]) - math.Log(z)
		}
		return sum
	}
	r, err := newRunner(p, len(toks), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	for _, masked := range []bool{false, true} {
		x := ex
		if masked {
			x.Allowed = allowed
		}
		got, n, err := r.run(itemOf(x), 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n != 4 || math.Abs(got-want(masked)) > 1e-3*math.Max(1, math.Abs(want(masked))) {
			t.Errorf("masked %v: loss %.5f over %d rows, want %.5f over 4", masked, got, n, want(masked))
		}
	}
	if want(true) >= want(false) {
		t.Errorf("the masked loss %.4f is not below the full one %.4f", want(true), want(false))
	}
}

// TestGradients checks the training graph's gradient of every parameter
// against central finite differences of its loss (three entries each, one
// and two layers, with and without the constraint's mask). It caught
// gorgonia v0.9.18's InverseSqrt derivative, -g/(2y^3) where -g*y^3/2 is
// right, which skewed every gradient below an RMSNorm and made training
// drift back up after a few hundred steps.
func TestGradients(t *testing.T) {
	tests := []struct {
		layers, heads int
		masked, tied  bool
	}{{1, 1, false, false}, {1, 1, true, false}, {2, 2, false, false}, {2, 2, true, false}, {1, 1, false, true}, {2, 2, true, true}}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("layers%d-heads%d-masked%v-tied%v", tc.layers, tc.heads, tc.masked, tc.tied), func(t *testing.T) {
			p, err := NewParams(Config{Vocab: 12, Dim: 16, Layers: tc.layers, Heads: tc.heads, FFN: 16, Tied: tc.tied}, 5)
			if err != nil {
				t.Fatal(err)
			}
			ex := Example{ID: "grad", Tokens: []int32{1, 4, 7, 2, 9, 3, 5, 6, 7, 8}, PlanStart: 5}
			if tc.masked {
				ex.Allowed = [][]int32{{3, 4, 6}, {5, 1}, {6, 2, 7}, {7, 1}, {8, 9}}
			}
			r, err := newRunner(p, len(ex.Tokens), 5)
			if err != nil {
				t.Fatal(err)
			}
			defer r.close()
			grads := make([][]float32, len(p.List))
			for i, q := range p.List {
				grads[i] = make([]float32, len(q.Data))
			}
			out := newExOut(p)
			r.sync()
			if _, _, err := r.run(itemOf(ex), 1, out); err != nil {
				t.Fatal(err)
			}
			out.addTo(grads, p.Config.Dim)
			loss := func() float64 {
				r.sync()
				l, _, err := r.run(itemOf(ex), 1, nil)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			const h = 1e-2
			for i, q := range p.List {
				for k, j := range []int{0, len(q.Data) / 2, len(q.Data) - 1} {
					if q.Name == embedName() {
						j = 4*p.Config.Dim + j%p.Config.Dim // a token of the example
						if tc.tied && k == 2 {
							j = 10*p.Config.Dim + 3 // a token only the tied output reads
						}
					}
					old := q.Data[j]
					q.Data[j] = old + h
					up := loss()
					q.Data[j] = old - h
					down := loss()
					q.Data[j] = old
					fd, g := (up-down)/(2*h), float64(grads[i][j])
					if math.Abs(fd-g) > 0.05*math.Max(math.Abs(fd), math.Abs(g))+1e-3 {
						t.Errorf("%s[%d]: gradient %.5f, finite difference %.5f", q.Name, j, g, fd)
					}
				}
			}
		})
	}
}
