package prior

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/models"
)

// TestEnsureWritesTheEmbeddedModel: the file Ensure returns holds exactly
// the embedded bytes, a second call reuses it, and a truncated file under
// the final name is replaced.
func TestEnsureWritesTheEmbeddedModel(t *testing.T) {
	dir := t.TempDir()
	p, err := Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	if got := hex.EncodeToString(h[:]); got != SHA256() || len(b) != Size() {
		t.Fatalf("written file: %d bytes, sha256 %s; want %d, %s", len(b), got, Size(), SHA256())
	}
	if err := os.WriteFile(p, b[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	p2, err := Ensure(dir)
	if err != nil || p2 != p {
		t.Fatalf("second Ensure: %q, %v; want %q", p2, err, p)
	}
	if st, _ := os.Stat(p); st.Size() != int64(Size()) {
		t.Fatalf("truncated file not replaced: %d bytes", st.Size())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("folder holds %d entries, want the model only", len(ents))
	}
}

// TestShippedModelLoads: the embedded GGUF loads in the engine, is small
// enough to embed (issue 11: at most 16 MB), selects the prompt it was
// trained on, and has room in its context for a long ALFWorld prompt.
func TestShippedModelLoads(t *testing.T) {
	if Size() > 16<<20 {
		t.Errorf("embedded prior is %d bytes, over 16 MB", Size())
	}
	p, err := Ensure(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lm, err := models.Load(context.Background(), p, models.Options{Threads: 1, Sequences: 1, ContextLength: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	info := lm.Info()
	// The planner builds the prompt the GGUF names: a compact kind the
	// decoder knows (an unknown kind would fall back to the full prompt).
	if po := (decoder.PromptOptions{}).WithKind(info.Prompt); !po.Compact || po.Kind() != info.Prompt {
		t.Errorf("prompt %q: the decoder builds %q from it, want that compact kind (the prompt the prior was trained on)", info.Prompt, po.Kind())
	}
	if info.ContextLength < 4096 {
		t.Errorf("context %d, want at least 4096", info.ContextLength)
	}
	toks, err := lm.Tokenize("go to countertop 1", false)
	if err != nil || len(toks) == 0 {
		t.Fatalf("tokenize: %v, %v", toks, err)
	}
}
