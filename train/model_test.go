package train

import (
	"context"
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Vocab = len(tok.Tokens)
			p, err := NewParams(cfg, 7)
			if err != nil {
				t.Fatal(err)
			}
			// Spread the logits, so a layout error shows.
			for i := range p.Get(outName()).Data {
				p.Get(outName()).Data[i] *= 30
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
