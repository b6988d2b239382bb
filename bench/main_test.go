package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
)

// The tests share one tiny random-weight qwen3 model (synthetic vocabulary,
// Qwen's chat template with the thinking switch), loaded once.
var (
	modelDir  string
	modelOnce sync.Once
	modelLM   models.LM
	modelErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bench-test-")
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

func openEnv(t testing.TB, name string) envs.Env {
	t.Helper()
	env, err := envs.New(name, testenv.Datasets(t))
	if err != nil {
		t.Fatal(err)
	}
	return env
}
