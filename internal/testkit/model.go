package testkit

import (
	"path/filepath"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/models/gguf"
)

// ModelSpec says which tiny random-weight model to write: an architecture
// of package gguf (gguf.ArchQwen3, ...) with, optionally, the vocabulary of
// a shared tokenizer ("qwen3", "llama2", ...; "" keeps gguf.Default's
// synthetic one).
type ModelSpec struct {
	Arch      string
	Tokenizer string
	Seed      uint64
	// ContextLength overrides gguf.Default's when positive.
	ContextLength int
}

// Spec returns the gguf.Spec of s (skipping the test when its tokenizer is
// absent, see testenv).
func (s ModelSpec) Spec(tb testing.TB) gguf.Spec {
	tb.Helper()
	spec := gguf.Default(s.Arch)
	if s.Tokenizer != "" {
		tok, err := gguf.FromHF(testenv.Tokenizer(tb, s.Tokenizer))
		if err != nil {
			tb.Fatal(err)
		}
		spec.Tokenizer = tok
	}
	spec.Seed = s.Seed
	if s.ContextLength > 0 {
		spec.ContextLength = s.ContextLength
	}
	return spec
}

// Model writes the model of s as dir/name.gguf and returns its path.
func Model(tb testing.TB, dir, name string, s ModelSpec) string {
	tb.Helper()
	path := filepath.Join(dir, name+".gguf")
	if err := gguf.Write(path, s.Spec(tb)); err != nil {
		tb.Fatal(err)
	}
	return path
}
