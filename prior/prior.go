// Package prior ships nesy's trained planning prior: a small llama-shaped
// GGUF written by `nesy train` from training splits only (ALFWorld's
// valid_train games, generated Blocksworld problems, VirtualHome's train
// split; never an evaluation split), embedded in the binary so that
// plan, bench and serve have a model that adds something without a
// download. Commands load it by path: Ensure writes it once into a cache
// folder, named by its content's hash, and returns that path.
package prior

import (
	"crypto/sha256"
	_ "embed" // the shipped GGUF
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// Name is the --model value that selects the embedded prior (also the
// default where --model is omitted).
const Name = "prior"

// gguf is the shipped model, as `nesy train` wrote it (see README:
// "The trained prior" for the command that reproduces it).
//
//go:embed prior.gguf
var gguf string

// Size is the embedded GGUF's size in bytes.
func Size() int { return len(gguf) }

// SHA256 is the hex SHA-256 of the embedded GGUF.
func SHA256() string {
	h := sha256.Sum256([]byte(gguf))
	return hex.EncodeToString(h[:])
}

// Ensure returns the path of the embedded prior inside dir
// (prior-<first 12 hex digits of its hash>.gguf), writing it first when
// no file of the right size is there. The write goes through a temporary
// file renamed into place, so a concurrent or interrupted run never leaves
// a half-written model under the final name.
func Ensure(dir string) (string, error) {
	sum := SHA256()
	path := filepath.Join(dir, "prior-"+sum[:12]+".gguf")
	if st, err := os.Stat(path); err == nil && st.Size() == int64(len(gguf)) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("prior: %w", err)
	}
	f, err := os.CreateTemp(dir, "prior-*.tmp")
	if err != nil {
		return "", fmt.Errorf("prior: %w", err)
	}
	tmp := f.Name()
	_, werr := f.WriteString(gguf)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("prior: writing %s: %w", path, werr)
	}
	return path, nil
}
