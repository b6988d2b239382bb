package testkit

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/model"

	"github.com/nesy-dev/nesy/models/gguf"
)

// OllamaModel writes gguf.Default(arch) and loads it into Ollama's engine
// with two CPU threads (the architectures must be registered, by importing
// github.com/ollama/ollama/model/models); the backend closes with the
// test. For tests of code that works on Ollama's backend directly.
func OllamaModel(tb testing.TB, arch string) model.Model {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), arch+".gguf")
	if err := gguf.Write(path, gguf.Default(arch)); err != nil {
		tb.Fatal(err)
	}
	m, err := model.New(path, ml.BackendParams{AllocMemory: true, NumThreads: 2})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Backend().Close() })
	if err := m.Backend().Load(context.Background(), nil); err != nil {
		tb.Fatal(err)
	}
	return m
}
