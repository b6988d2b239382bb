package server

import (
	"bytes"
	"image"
	"image/png"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/models/gguf"
)

// TestOllamaBadImage: an image the model cannot take (a strip thinner than
// a Qwen3.5 vision tower's patch grid, or bytes that are no image) is the
// client's error, 400 naming it, and the server keeps answering.
func TestOllamaBadImage(t *testing.T) {
	dir := t.TempDir()
	spec := gguf.Default(gguf.ArchQwen35)
	spec.Vision = true
	path := filepath.Join(dir, "vision.gguf")
	if err := gguf.Write(path, spec); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, Options{Model: path})
	strip := image.NewRGBA(image.Rect(0, 0, 600, 8))
	var buf bytes.Buffer
	if err := png.Encode(&buf, strip); err != nil {
		t.Fatal(err)
	}
	for name, img := range map[string][]byte{"thin strip": buf.Bytes(), "not an image": []byte("no picture here")} {
		body := map[string]any{"model": ts.model, "stream": false, "options": map[string]any{"num_predict": 2},
			"messages": []map[string]any{{"role": "user", "content": "what is it?", "images": [][]byte{img}}}}
		code, _, out := ts.do("POST", "/api/chat", body)
		if code != http.StatusBadRequest || !strings.Contains(string(out), "unusable image") {
			t.Errorf("%s: %d %s, want 400 naming the image", name, code, out)
		}
	}
	body := map[string]any{"model": ts.model, "stream": false, "options": map[string]any{"num_predict": 2},
		"messages": []map[string]any{{"role": "user", "content": "hello"}}}
	if code, _, out := ts.do("POST", "/api/chat", body); code != http.StatusOK {
		t.Errorf("a plain chat after them: %d %s", code, out)
	}
}
