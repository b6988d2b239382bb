package explore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
)

// The tests share one tiny random-weight qwen3 model (synthetic byte-level
// BPE vocabulary with Qwen's chat template): it loads in milliseconds, and
// a random model is exactly the chooser the harness must be robust to.
var (
	modelDir  string
	modelOnce sync.Once
	modelLM   models.LM
	modelErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "explore-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	modelDir = dir
	code := m.Run()
	if modelLM != nil {
		modelLM.Close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// tinyModel returns the shared test model.
func tinyModel(t testing.TB) models.LM {
	t.Helper()
	modelOnce.Do(func() {
		path := filepath.Join(modelDir, "tiny-qwen3.gguf")
		if modelErr = gguf.Write(path, gguf.Default(gguf.ArchQwen3)); modelErr != nil {
			return
		}
		modelLM, modelErr = models.Load(context.Background(), path, models.Options{Threads: 1})
	})
	if modelErr != nil {
		t.Fatal(modelErr)
	}
	return modelLM
}

// loadModel loads a fresh copy of the tiny model with other options (for
// tests that need a short context).
func loadModel(t testing.TB, opts models.Options) models.LM {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := gguf.Write(path, gguf.Default(gguf.ArchQwen3)); err != nil {
		t.Fatal(err)
	}
	if opts.Threads == 0 {
		opts.Threads = 1
	}
	lm, err := models.Load(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lm.Close() })
	return lm
}
