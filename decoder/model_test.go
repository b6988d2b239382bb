package decoder

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nesy-dev/nesy/internal/testkit"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
)

// Test models are random-weight GGUFs with the real Qwen3 (byte-level BPE)
// and Llama 2 (SentencePiece, byte fallback) vocabularies, written once per
// test binary run into a temporary folder and loaded once.

var testModels struct {
	mu      sync.Mutex
	dir     string
	engines map[string]*models.Engine
	paths   map[string]string
	decs    map[string]*Decoder
}

func TestMain(m *testing.M) {
	code := m.Run()
	testModels.mu.Lock()
	for _, e := range testModels.engines {
		e.Close()
	}
	if testModels.dir != "" {
		os.RemoveAll(testModels.dir)
	}
	testModels.mu.Unlock()
	os.Exit(code)
}

// modelFamilies are the vocabularies the model tests run on.
var modelFamilies = []string{"qwen3", "llama2"}

// testModelPath writes (once) a tiny random model with a real vocabulary.
func testModelPath(tb testing.TB, family string) string {
	tb.Helper()
	testModels.mu.Lock()
	defer testModels.mu.Unlock()
	if p, ok := testModels.paths[family]; ok {
		return p
	}
	arch := gguf.ArchLlama
	if family == "qwen3" {
		arch = gguf.ArchQwen3
	}
	spec := testkit.ModelSpec{Arch: arch, Tokenizer: family, Seed: 1}.Spec(tb)
	var err error
	if testModels.dir == "" {
		if testModels.dir, err = os.MkdirTemp("", "nesy-decoder-test-"); err != nil {
			tb.Fatal(err)
		}
		testModels.paths = map[string]string{}
		testModels.engines = map[string]*models.Engine{}
		testModels.decs = map[string]*Decoder{}
	}
	p := filepath.Join(testModels.dir, family+".gguf")
	if err := gguf.Write(p, spec); err != nil {
		tb.Fatal(err)
	}
	testModels.paths[family] = p
	return p
}

// testDecoder returns the shared decoder of a tiny model with a real
// vocabulary.
func testDecoder(tb testing.TB, family string) *Decoder {
	tb.Helper()
	p := testModelPath(tb, family)
	testModels.mu.Lock()
	defer testModels.mu.Unlock()
	if d, ok := testModels.decs[family]; ok {
		return d
	}
	e, err := models.Load(context.Background(), p, models.Options{Threads: 1, ContextLength: 8192})
	if err != nil {
		tb.Fatal(err)
	}
	d, err := New(e, nil)
	if err != nil {
		tb.Fatal(err)
	}
	testModels.engines[family] = e
	testModels.decs[family] = d
	return d
}
