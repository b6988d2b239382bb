// Package testenv locates the shared datasets and tokenizers for tests and
// benchmarks. The folder is taken from NESY_SHARED, else ../shared beside the
// repository root. When it is absent the repository's own slice,
// testdata/shared (a few tasks of each dataset and a reduced Qwen3
// tokenizer, written by internal/mkslice), stands in for it, so a clone on
// its own still tests parsing, grounding, decoding, search and serving on
// real tasks; tests that need the whole sets call Full and skip on the
// slice. Data missing from both skips the test with a message that says so,
// unless NESY_REQUIRE_SHARED=1 (set by .ci/run), in which case the slice is
// never used and anything missing fails.
package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// sharedDir returns the full shared folder and whether it exists.
func sharedDir() (string, bool) {
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

// SliceDir is the repository's slice of the shared folder, relative to the
// repository root.
const SliceDir = "testdata/shared"

// SharedDir returns the folder tests read shared data from: the full
// shared folder when it exists, else the repository's slice (slice true).
// ok is false when neither is there.
func SharedDir() (dir string, slice, ok bool) {
	if d, ok := sharedDir(); ok {
		return d, false, true
	}
	if os.Getenv("NESY_REQUIRE_SHARED") == "1" {
		d, _ := sharedDir()
		return d, false, false
	}
	root, ok := RepoRoot()
	if !ok {
		return "", false, false
	}
	d := filepath.Join(root, SliceDir)
	_, err := os.Stat(d)
	return d, true, err == nil
}

// IsSlice reports whether tests read the repository's slice instead of the
// full shared folder.
func IsSlice() bool {
	_, slice, ok := SharedDir()
	return ok && slice
}

// Full skips the test when only the repository's slice is there: for
// tests that count or sweep whole datasets.
func Full(tb testing.TB) {
	tb.Helper()
	if IsSlice() {
		tb.Skip("needs the full shared datasets (only the repository's slice, " + SliceDir + ", is here)")
	}
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
// "datasets/alfworld" or "tokenizers/qwen3/tokenizer.json"), or inside the
// repository's slice when the shared folder is absent; it skips the test
// (or fails it under NESY_REQUIRE_SHARED=1) when neither has it.
func Shared(tb testing.TB, rel string) string {
	tb.Helper()
	d, _, ok := SharedDir()
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
