package models

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fsggml "github.com/ollama/ollama/fs/ggml"

	"github.com/nesy-dev/nesy/models/gguf"
)

func TestParseModelName(t *testing.T) {
	cases := []struct {
		in   string
		want string // short form; "" = must fail
	}{
		{"qwen3", "qwen3:latest"},
		{"qwen3:4b", "qwen3:4b"},
		{"qwen3.5:9b-q4_K_M", "qwen3.5:9b-q4_K_M"},
		{"user/model:tag", "user/model:tag"},
		{"example.com/ns/model:v1", "example.com/ns/model:v1"},
		{"", ""},
		{"..", ""},
		{"../etc/passwd", ""},
		{"a/../../b", ""},
		{"/etc/passwd", ""},
		{"a/b/c/d", ""},
		{"model:../../x", ""},
		{"model:", ""},
		{"ns/..:tag", ""},
		{"a\\b", ""},
		{"model:tag/x", ""},
		{".hidden", ""},
	}
	for _, c := range cases {
		n, err := ParseModelName(c.in)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("ParseModelName(%q) = %v, want an error", c.in, n)
		case c.want != "" && err != nil:
			t.Errorf("ParseModelName(%q): %v", c.in, err)
		case c.want != "" && n.String() != c.want:
			t.Errorf("ParseModelName(%q) = %q, want %q", c.in, n.String(), c.want)
		}
	}
}

// fakeStore builds an Ollama store holding a generated model under name.
func fakeStore(t *testing.T, names ...string) (Store, string) {
	t.Helper()
	root := t.TempDir()
	model := filepath.Join(t.TempDir(), "m.gguf")
	if err := gguf.Write(model, gguf.Default(gguf.ArchLlama)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	blob := filepath.Join(root, "blobs", "sha256-"+digest)
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blob, data, 0o644); err != nil {
		t.Fatal(err)
	}
	tsum := sha256.Sum256([]byte(fakeTemplate))
	tdigest := hex.EncodeToString(tsum[:])
	if err := os.WriteFile(filepath.Join(root, "blobs", "sha256-"+tdigest), []byte(fakeTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		n, err := ParseModelName(name)
		if err != nil {
			t.Fatal(err)
		}
		writeManifest(t, root, n, "sha256:"+digest, int64(len(data)), "sha256:"+tdigest)
	}
	return Store{Root: root}, blob
}

// fakeTemplate is the fake store's chat template layer.
const fakeTemplate = "{{ range .Messages }}<{{ .Role }}>{{ .Content }}{{ end }}<assistant>"

func writeManifest(t *testing.T, root string, n ModelName, digest string, size int64, template string) {
	t.Helper()
	m := map[string]any{
		"schemaVersion": 2,
		"layers": []map[string]any{
			{"mediaType": mediaModel, "digest": digest, "size": size},
			{"mediaType": "application/vnd.ollama.image.template", "digest": template, "size": len(fakeTemplate)},
		},
	}
	data, _ := json.Marshal(m)
	p := filepath.Join(root, "manifests", n.Host, n.Namespace, n.Model, n.Tag)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestStoreLookupAndList(t *testing.T) {
	s, blob := fakeStore(t, "tiny", "tiny:2b", "someone/planner:v1")
	for _, name := range []string{"tiny", "tiny:latest", "registry.ollama.ai/library/tiny:latest", "tiny:2b", "someone/planner:v1"} {
		m, err := s.Lookup(name)
		if err != nil {
			t.Errorf("Lookup(%q): %v", name, err)
			continue
		}
		if m.Path != blob || m.Template != fakeTemplate {
			t.Errorf("Lookup(%q) = path %s template %q, want %s and the template layer", name, m.Path, m.Template, blob)
		}
	}
	if _, err := s.Lookup("absent:1b"); !errors.Is(err, ErrModelNotFound) {
		t.Errorf("Lookup(absent): %v", err)
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list {
		names = append(names, m.Name)
		if m.Size <= 0 || m.Path != blob {
			t.Errorf("listed %+v", m)
		}
	}
	if got, want := strings.Join(names, ","), "someone/planner:v1,tiny:2b,tiny:latest"; got != want {
		t.Errorf("List names = %s, want %s", got, want)
	}
	empty, err := Store{Root: filepath.Join(t.TempDir(), "missing")}.List()
	if err != nil || len(empty) != 0 {
		t.Errorf("List of a missing store = %v, %v", empty, err)
	}
}

func TestStoreRejectsBadDigest(t *testing.T) {
	s, _ := fakeStore(t)
	n, _ := ParseModelName("evil")
	writeManifest(t, s.Root, n, "sha256:../../../../etc/passwd", 1, "sha256:"+strings.Repeat("0", 64))
	if _, err := s.Lookup("evil"); err == nil || !strings.Contains(err.Error(), "bad digest") {
		t.Errorf("Lookup with a traversing digest: %v", err)
	}
	if list, _ := s.List(); len(list) != 0 {
		t.Errorf("List included a manifest with a bad digest: %v", list)
	}
}

func TestResolve(t *testing.T) {
	s, blob := fakeStore(t, "tiny")
	t.Setenv("OLLAMA_MODELS", s.Root)
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "notes.gguf")
	os.WriteFile(notGGUF, []byte("hello, this is text"), 0o644)
	empty := filepath.Join(dir, "empty.gguf")
	os.WriteFile(empty, nil, 0o644)
	cases := []struct {
		name string
		want string
		err  error
	}{
		{"tiny", blob, nil},
		{blob, blob, nil},
		{"missing:7b", "", ErrModelNotFound},
		{filepath.Join(dir, "nope.gguf"), "", ErrModelNotFound},
		{"./nope.gguf", "", ErrModelNotFound},
		{notGGUF, "", ErrNotGGUF},
		{empty, "", ErrNotGGUF},
	}
	for _, c := range cases {
		got, err := Resolve(c.name)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("Resolve(%q): %v, want %v", c.name, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", c.name, got, err, c.want)
		}
	}
	if _, err := Resolve(dir); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("Resolve(directory): %v", err)
	}
	if _, err := Resolve("../../etc/passwd"); err == nil {
		t.Error("Resolve of a traversing name succeeded")
	}
	// Loading by store name works end to end.
	e, err := Load(context.Background(), "tiny", Options{Threads: 1, Sequences: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Info().Path != blob || e.Info().Name != "tiny" || e.Info().Arch != "llama" {
		t.Errorf("Info = %+v", e.Info())
	}
	// A store model renders chats with its template layer, as Ollama does.
	if got, err := e.RenderChat([]Message{{Role: "user", Content: "Hi"}}, ChatOptions{}); err != nil || got != "<user>Hi<assistant>" {
		t.Errorf("RenderChat = %q, %v; want the template layer's rendering", got, err)
	}
}

func TestLoadUnsupportedArchitecture(t *testing.T) {
	path := filepath.Join(t.TempDir(), "odd.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsggml.WriteGGUF(f, fsggml.KV{"general.architecture": "frobnicator", "tokenizer.ggml.model": "gpt2"}, nil); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = Load(context.Background(), path, Options{Threads: 1})
	if err == nil || !strings.Contains(err.Error(), `unsupported architecture "frobnicator"`) {
		t.Errorf("Load: %v", err)
	}
	// A truncated GGUF fails cleanly too.
	src := filepath.Join(t.TempDir(), "m.gguf")
	if err := gguf.Write(src, gguf.Default(gguf.ArchLlama)); err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.gguf")
	in, _ := os.Open(src)
	out, _ := os.Create(cut)
	io.CopyN(out, in, 4000)
	in.Close()
	out.Close()
	if _, err := Load(context.Background(), cut, Options{Threads: 1}); err == nil {
		t.Error("Load of a truncated file succeeded")
	}
}
