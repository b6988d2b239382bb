// Package testenv locates the shared datasets and tokenizers for tests and
// benchmarks. The folder is taken from NESY_SHARED, else ../shared beside the
// repository root. When it is absent, tests skip with a message that says so,
// unless NESY_REQUIRE_SHARED=1 (set by .ci/run), in which case they fail.
package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// SharedDir returns the shared folder and whether it exists.
func SharedDir() (string, bool) {
	if d := os.Getenv("NESY_SHARED"); d != "" {
		_, err := os.Stat(d)
		return d, err == nil
	}
	root, ok := RepoRoot()
	if !ok {
		return "", false
	}
	d := filepath.Join(filepath.Dir(root), "shared")
	_, err := os.Stat(d)
	return d, err == nil
}

// RepoRoot returns the directory holding go.mod, searching upward from the
// working directory.
func RepoRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// Shared returns the path of rel inside the shared folder (for example
// "datasets/alfworld" or "tokenizers/qwen3/tokenizer.json"), skipping the
// test (or failing it under NESY_REQUIRE_SHARED=1) when it is absent.
func Shared(tb testing.TB, rel string) string {
	tb.Helper()
	d, ok := SharedDir()
	p := filepath.Join(d, rel)
	if ok {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	msg := "shared data " + rel + " not found (set NESY_SHARED to the folder holding datasets/ and tokenizers/, or put it at ../shared beside the repository)"
	if os.Getenv("NESY_REQUIRE_SHARED") == "1" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// Datasets returns the shared datasets folder (see Shared).
func Datasets(tb testing.TB) string { tb.Helper(); return Shared(tb, "datasets") }

// Tokenizer returns the path of a shared tokenizer.json, e.g. Tokenizer(t, "qwen3").
func Tokenizer(tb testing.TB, family string) string {
	tb.Helper()
	return Shared(tb, filepath.Join("tokenizers", family, "tokenizer.json"))
}
