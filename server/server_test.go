package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/nesy-dev/nesy/models/gguf"
)

func TestRoutes(t *testing.T) {
	ts := startServer(t, Options{})
	tests := []struct {
		method, path string
		status       int
		check        func(t *testing.T, body []byte)
	}{
		{"GET", "/healthz", 200, func(t *testing.T, body []byte) {
			var h healthResponse
			mustJSON(t, body, &h)
			if h.Status != "ok" || h.LoadedModels != 1 || !strings.Contains(h.System, "ggml CPU") {
				t.Errorf("health = %+v", h)
			}
		}},
		{"GET", "/v1/models", 200, func(t *testing.T, body []byte) {
			var m modelsResponse
			mustJSON(t, body, &m)
			byName := map[string]modelInfo{}
			for _, mi := range m.Models {
				byName[mi.Name] = mi
			}
			if d, ok := byName[ts.model]; !ok || !d.Loaded || d.Source != "default" || d.Arch != gguf.ArchQwen3 || d.Slots == 0 {
				t.Errorf("default model %q: %+v (all: %s)", ts.model, d, body)
			}
			if l, ok := byName["tiny-llama"]; !ok || l.Loaded || l.Source != "models_dir" || l.Size == 0 {
				t.Errorf("models-dir model: %+v (all: %s)", l, body)
			}
		}},
		{"GET", "/openapi.json", 200, func(t *testing.T, body []byte) {
			var doc struct {
				OpenAPI string                    `json:"openapi"`
				Paths   map[string]map[string]any `json:"paths"`
			}
			mustJSON(t, body, &doc)
			if !strings.HasPrefix(doc.OpenAPI, "3.") {
				t.Errorf("openapi version %q", doc.OpenAPI)
			}
			for _, route := range []string{"POST /v1/plan", "GET /v1/models", "GET /healthz", "GET /metrics", "GET /openapi.json",
				"GET /api/version", "GET /api/tags", "POST /api/generate", "POST /api/chat",
				"POST /v1/chat/completions", "POST /v1/completions"} {
				m, p, _ := strings.Cut(route, " ")
				if _, ok := doc.Paths[p][strings.ToLower(m)]; !ok {
					t.Errorf("openapi.json does not describe %s", route)
				}
			}
		}},
		{"GET", "/metrics", 200, func(t *testing.T, body []byte) {
			for _, name := range []string{"nesy_http_requests_total", "nesy_engine_kv_sequences_in_use", "nesy_engine_loaded_models 1",
				"nesy_scheduler_queue_depth", "nesy_model_tokens_total", "nesy_decoder_mask_duration_seconds", "nesy_mcts_simulations_total"} {
				if !strings.Contains(string(body), name) {
					t.Errorf("metrics lack %s", name)
				}
			}
		}},
		{"GET", "/api/version", 200, func(t *testing.T, body []byte) {
			var v map[string]string
			mustJSON(t, body, &v)
			if v["version"] == "" {
				t.Errorf("version body %s", body)
			}
		}},
		{"GET", "/nope", 404, func(t *testing.T, body []byte) { wantCode(t, body, CodeNotFound) }},
		{"GET", "/v1/plan", 405, func(t *testing.T, body []byte) { wantCode(t, body, CodeMethod) }},
		{"DELETE", "/api/tags", 405, func(t *testing.T, body []byte) { wantCode(t, body, CodeMethod) }},
	}
	for _, tt := range tests {
		t.Run(tt.method+tt.path, func(t *testing.T) {
			status, hdr, body := ts.do(tt.method, tt.path, nil)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			if ct := hdr.Get("Content-Type"); tt.path != "/metrics" && !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
			tt.check(t, body)
		})
	}
	// Every request above was counted under its route pattern.
	if v := ts.metric(`nesy_http_requests_total{code="200",method="GET",route="/v1/models"}`); v != 1 {
		t.Errorf("requests_total for /v1/models = %v, want 1", v)
	}
	if v := ts.metric(`nesy_http_requests_total{code="404",method="GET",route="other"}`); v != 1 {
		t.Errorf("requests_total for unmatched routes = %v, want 1", v)
	}
}

func mustJSON(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("bad JSON %v: %s", err, body)
	}
}

func wantCode(t *testing.T, body []byte, code string) {
	t.Helper()
	if e := apiErr(t, body); e.Code != code {
		t.Errorf("code %q, want %q (%s)", e.Code, code, e.Message)
	}
}

// TestOllamaClient drives the compatibility routes with Ollama's own client.
func TestOllamaClient(t *testing.T) {
	ts := startServer(t, Options{})
	base, _ := url.Parse(ts.url)
	c := api.NewClient(base, http.DefaultClient)
	ctx := context.Background()

	if err := c.Heartbeat(ctx); err != nil {
		t.Errorf("Heartbeat (HEAD /): %v", err)
	}
	if v, err := c.Version(ctx); err != nil || v != ts.s.opts.Version {
		t.Errorf("Version = %q, %v", v, err)
	}
	list, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list.Models {
		names = append(names, m.Name)
	}
	if !slices.Contains(names, ts.model) || !slices.Contains(names, "tiny-llama") {
		t.Errorf("List = %v", names)
	}
	for _, m := range list.Models {
		// tiny-llama is not loaded yet: its family comes from its file.
		if m.Name == "tiny-llama" && m.Details.Family != gguf.ArchLlama {
			t.Errorf("List: tiny-llama's details %+v", m.Details)
		}
	}

	greedy := map[string]any{"temperature": 0, "num_predict": 12}
	no := false
	for _, model := range []string{ts.model, "tiny-llama"} {
		t.Run("generate/"+model, func(t *testing.T) {
			// Streamed pieces concatenate to the non-streamed answer.
			var whole api.GenerateResponse
			err := c.Generate(ctx, &api.GenerateRequest{Model: model, Prompt: "pick up the red block", Options: greedy, Stream: &no},
				func(r api.GenerateResponse) error { whole = r; return nil })
			if err != nil {
				t.Fatal(err)
			}
			var pieces strings.Builder
			var last api.GenerateResponse
			chunks := 0
			err = c.Generate(ctx, &api.GenerateRequest{Model: model, Prompt: "pick up the red block", Options: greedy},
				func(r api.GenerateResponse) error { pieces.WriteString(r.Response); last = r; chunks++; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if !whole.Done || !last.Done || whole.Model != model {
				t.Errorf("done flags %v %v, model %q", whole.Done, last.Done, whole.Model)
			}
			if pieces.String() != whole.Response {
				t.Errorf("streamed %q, whole %q", pieces.String(), whole.Response)
			}
			if whole.EvalCount == 0 || whole.EvalCount > 12 || (whole.EvalCount < 12) != (whole.DoneReason == "stop") {
				t.Errorf("eval count %d, done reason %q", whole.EvalCount, whole.DoneReason)
			}
			if len(whole.Context) != whole.PromptEvalCount+whole.EvalCount {
				t.Errorf("context has %d tokens, want %d+%d", len(whole.Context), whole.PromptEvalCount, whole.EvalCount)
			}
			if whole.EvalCount > 1 && chunks < 2 {
				t.Errorf("streamed in %d chunks", chunks)
			}
			// Ollama's clients divide eval_count by eval_duration.
			if whole.EvalDuration <= 0 || last.EvalDuration <= 0 || whole.PromptEvalDuration <= 0 {
				t.Errorf("eval_duration %v (streamed %v), prompt_eval_duration %v: want > 0", whole.EvalDuration, last.EvalDuration, whole.PromptEvalDuration)
			}
		})
	}
	t.Run("chat", func(t *testing.T) {
		msgs := []api.Message{{Role: "system", Content: "You are a planner."}, {Role: "user", Content: "stack a on b"}}
		var whole api.ChatResponse
		if err := c.Chat(ctx, &api.ChatRequest{Model: ts.model, Messages: msgs, Options: greedy, Stream: &no},
			func(r api.ChatResponse) error { whole = r; return nil }); err != nil {
			t.Fatal(err)
		}
		var pieces strings.Builder
		if err := c.Chat(ctx, &api.ChatRequest{Model: ts.model, Messages: msgs, Options: greedy},
			func(r api.ChatResponse) error { pieces.WriteString(r.Message.Content); return nil }); err != nil {
			t.Fatal(err)
		}
		if whole.Message.Role != "assistant" || !whole.Done || whole.PromptEvalCount == 0 || whole.EvalCount == 0 {
			t.Errorf("chat answer %+v", whole)
		}
		if whole.EvalDuration <= 0 {
			t.Errorf("chat eval_duration %v, want > 0", whole.EvalDuration)
		}
		if pieces.String() != whole.Message.Content {
			t.Errorf("streamed %q, whole %q", pieces.String(), whole.Message.Content)
		}
	})
	t.Run("tool message", func(t *testing.T) {
		msgs := []api.Message{{Role: "user", Content: "where is a?"}, {Role: "assistant", Content: "look"},
			{Role: "tool", Content: "a is on b"}}
		var got api.ChatResponse
		if err := c.Chat(ctx, &api.ChatRequest{Model: ts.model, Messages: msgs, Options: greedy, Stream: &no},
			func(r api.ChatResponse) error { got = r; return nil }); err != nil {
			t.Fatal(err)
		}
		if !got.Done || got.PromptEvalCount == 0 {
			t.Errorf("chat with a tool message: %+v", got)
		}
	})
	t.Run("load only", func(t *testing.T) {
		// An empty prompt loads the model and answers at once, as Ollama does.
		var got []api.GenerateResponse
		if err := c.Generate(ctx, &api.GenerateRequest{Model: "tiny-llama"}, func(r api.GenerateResponse) error { got = append(got, r); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !got[0].Done || got[0].DoneReason != "load" || got[0].EvalCount != 0 {
			t.Errorf("load-only answer %+v", got)
		}
		var chat []api.ChatResponse
		if err := c.Chat(ctx, &api.ChatRequest{Model: ts.model}, func(r api.ChatResponse) error { chat = append(chat, r); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(chat) != 1 || !chat[0].Done || chat[0].DoneReason != "load" {
			t.Errorf("load-only chat answer %+v", chat)
		}
	})
	t.Run("show", func(t *testing.T) {
		// From the files' metadata (show never loads a model).
		for _, tc := range []struct{ model, family string }{{ts.model, gguf.ArchQwen3}, {"tiny-llama", gguf.ArchLlama}} {
			sr, err := c.Show(ctx, &api.ShowRequest{Model: tc.model})
			if err != nil {
				t.Fatal(err)
			}
			if sr.Details.Family != tc.family || sr.ModelInfo["general.architecture"] != tc.family ||
				sr.ModelInfo[tc.family+".context_length"] == nil || !slices.Contains(sr.Capabilities, "completion") {
				t.Errorf("show %s: %+v", tc.model, sr)
			}
		}
		_, err := c.Show(ctx, &api.ShowRequest{Model: "no-such-model"})
		var se api.StatusError
		if !errors.As(err, &se) || se.StatusCode != http.StatusNotFound {
			t.Errorf("show of an unknown model: %v", err)
		}
	})
	t.Run("ps", func(t *testing.T) {
		ps, err := c.ListRunning(ctx)
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]api.ProcessModelResponse{}
		for _, m := range ps.Models {
			byName[m.Name] = m
		}
		def, llama := byName[ts.model], byName["tiny-llama"]
		if len(ps.Models) != 2 || def.Details.Family != gguf.ArchQwen3 || def.ContextLength == 0 || !def.ExpiresAt.IsZero() {
			t.Errorf("ps: default model %+v (all %+v)", def, ps.Models)
		}
		if llama.Details.Family != gguf.ArchLlama || !llama.ExpiresAt.After(time.Now()) {
			t.Errorf("ps: tiny-llama %+v", llama)
		}
	})
	t.Run("keep_alive 0 unloads", func(t *testing.T) {
		// As `ollama stop` does; the server's default model stays loaded.
		if n := len(ts.s.models.engines()); n != 2 {
			t.Fatalf("%d engines loaded before, want the default and tiny-llama", n)
		}
		for _, model := range []string{"tiny-llama", ts.model} {
			var got []api.GenerateResponse
			if err := c.Generate(ctx, &api.GenerateRequest{Model: model, KeepAlive: &api.Duration{}},
				func(r api.GenerateResponse) error { got = append(got, r); return nil }); err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || !got[0].Done || got[0].DoneReason != "unload" {
				t.Fatalf("%s: answer %+v", model, got)
			}
		}
		if n := len(ts.s.models.engines()); n != 1 {
			t.Fatalf("%d engines loaded after, want the default alone", n)
		}
	})
	t.Run("errors", func(t *testing.T) {
		err := c.Generate(ctx, &api.GenerateRequest{Model: "no-such-model", Prompt: "x"}, func(api.GenerateResponse) error { return nil })
		var se api.StatusError
		if !errors.As(err, &se) || se.StatusCode != http.StatusNotFound || !strings.Contains(se.ErrorMessage, "no-such-model") {
			t.Errorf("unknown model: %#v", err)
		}
		err = c.Chat(ctx, &api.ChatRequest{Model: ts.model, Messages: []api.Message{{Role: "user", Content: "x"}}, Format: json.RawMessage(`"json"`)}, func(api.ChatResponse) error { return nil })
		if !errors.As(err, &se) || se.StatusCode != http.StatusBadRequest {
			t.Errorf("format: %#v", err)
		}
	})
	// Tokens were counted.
	if v := ts.metric(`nesy_model_tokens_total{kind="generated"}`); v <= 0 {
		t.Errorf("generated tokens metric %v", v)
	}
}

// TestModelNamesStayInside checks that model names reach only the models
// folder and the Ollama store.
func TestModelNamesStayInside(t *testing.T) {
	ts := startServer(t, Options{})
	outside := testModel(t, t.TempDir(), "outside", gguf.ArchLlama)
	if err := os.Symlink(outside, filepath.Join(ts.dir, "link.gguf")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts.dir, "junk.gguf"), []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	// /v1/models lists only what can load: not the link out, not the junk.
	_, _, body := ts.do("GET", "/v1/models", nil)
	var listed modelsResponse
	mustJSON(t, body, &listed)
	var names []string
	for _, mi := range listed.Models {
		names = append(names, mi.Name)
	}
	if slices.Contains(names, "link") || slices.Contains(names, "junk") || !slices.Contains(names, "tiny-llama") {
		t.Errorf("/v1/models lists %v", names)
	}
	for _, name := range []string{"../tiny-qwen3", "../tiny-qwen3.gguf", outside, "link", "link.gguf", "/etc/passwd", "..", "a/../../tiny-qwen3"} {
		t.Run(name, func(t *testing.T) {
			status, _, body := ts.do("POST", "/api/generate", map[string]any{"model": name, "prompt": "x", "stream": false})
			if status != http.StatusNotFound {
				t.Fatalf("status %d: %s", status, body)
			}
			wantCode(t, body, CodeModelNotFound)
		})
	}
	if n := len(ts.s.models.engines()); n != 1 {
		t.Errorf("%d engines loaded, want only the default", n)
	}
}

// TestGPUMetrics: GPU readings given by Options.GPUStats are exported,
// unknown ones are left out.
func TestGPUMetrics(t *testing.T) {
	stats := []GPUStat{
		{Index: 0, Utilization: 0.25, MemoryUsed: 3 << 30, MemoryTotal: 80 << 30, TemperatureC: 41},
		{Index: 1, Utilization: -1, MemoryUsed: 0, MemoryTotal: 0, TemperatureC: -1},
	}
	ts := startServer(t, Options{GPUStats: func() []GPUStat { return stats }})
	for _, tt := range []struct {
		sample string
		want   float64
	}{
		{`nesy_gpu_utilization_ratio{gpu="0"}`, 0.25},
		{`nesy_gpu_memory_used_bytes{gpu="0"}`, 3 << 30},
		{`nesy_gpu_memory_total_bytes{gpu="0"}`, 80 << 30},
		{`nesy_gpu_temperature_celsius{gpu="0"}`, 41},
		{`nesy_gpu_utilization_ratio{gpu="1"}`, -1},
		{`nesy_gpu_temperature_celsius{gpu="1"}`, -1},
		{`nesy_gpu_memory_total_bytes{gpu="1"}`, -1},
	} {
		if got := ts.metric(tt.sample); got != tt.want {
			t.Errorf("%s = %v, want %v (-1: absent)", tt.sample, got, tt.want)
		}
	}
}

// writeOllamaStore lays out an Ollama store holding one model (the GGUF at
// src) under name library/<model>:<tag>, as `ollama pull` does.
func writeOllamaStore(t *testing.T, root, model, tag, src string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	blobs := filepath.Join(root, "blobs")
	manifests := filepath.Join(root, "manifests", "registry.ollama.ai", "library", model)
	for _, d := range []string{blobs, manifests} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(blobs, "sha256-"+digest), data, 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := map[string]any{"schemaVersion": 2, "layers": []map[string]any{
		{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:" + digest, "size": len(data)}}}
	mdata, _ := json.Marshal(manifest)
	if err := os.WriteFile(filepath.Join(manifests, tag), mdata, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOllamaStoreModels: models of an Ollama store are listed (by /v1/models
// and /api/tags) and load on first use by their Ollama name.
func TestOllamaStoreModels(t *testing.T) {
	store := t.TempDir()
	writeOllamaStore(t, store, "tinyplanner", "7b", testModel(t, t.TempDir(), "src", gguf.ArchLlama))
	ts := startServer(t, Options{OllamaStore: store})
	_, _, body := ts.do("GET", "/v1/models", nil)
	var m modelsResponse
	mustJSON(t, body, &m)
	found := false
	for _, mi := range m.Models {
		if mi.Name == "tinyplanner:7b" {
			found = mi.Source == "ollama" && !mi.Loaded && strings.HasPrefix(mi.Digest, "sha256:")
		}
	}
	if !found {
		t.Fatalf("the store's model is not listed right: %s", body)
	}
	base, _ := url.Parse(ts.url)
	c := api.NewClient(base, http.DefaultClient)
	no := false
	var res api.GenerateResponse
	err := c.Generate(context.Background(), &api.GenerateRequest{Model: "tinyplanner:7b", Prompt: "hello", Stream: &no,
		Options: map[string]any{"num_predict": 3, "temperature": 0}}, func(r api.GenerateResponse) error { res = r; return nil })
	if err != nil || !res.Done || res.EvalCount == 0 {
		t.Fatalf("generate with the store's model: %v %+v", err, res)
	}
	list, err := c.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, lm := range list.Models {
		if lm.Name == "tinyplanner:7b" && (lm.Details.Family != gguf.ArchLlama || lm.Details.ParameterSize == "") {
			t.Errorf("loaded store model details %+v", lm.Details)
		}
	}
	if n := len(ts.s.models.engines()); n != 2 {
		t.Errorf("%d engines loaded, want the default and the store's", n)
	}
}

// TestDefaultModelFromOllamaStore: the startup model (nesy serve --model
// NAME) is looked up in the server's Ollama store (--ollama-models), not in
// the default one; with the store disabled a name is refused.
func TestDefaultModelFromOllamaStore(t *testing.T) {
	t.Setenv("OLLAMA_MODELS", t.TempDir()) // the default store: empty
	store := t.TempDir()
	writeOllamaStore(t, store, "tinyplanner", "7b", testModel(t, t.TempDir(), "src", gguf.ArchLlama))
	ts := startServer(t, Options{Model: "tinyplanner:7b", OllamaStore: store})
	if ts.model != "tinyplanner:7b" {
		t.Fatalf("default model %q", ts.model)
	}
	status, _, body := ts.do("POST", "/api/generate", map[string]any{"prompt": "hello", "stream": false, "options": map[string]any{"num_predict": 2}})
	if status != http.StatusOK {
		t.Fatalf("generate with the default model: %d %s", status, body)
	}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := New(context.Background(), Options{Model: "tinyplanner:7b", NoOllamaStore: true, Logger: quiet}); err == nil {
		t.Fatal("a store name loaded with the store disabled")
	}
}

// TestTruncatedModel: a truncated GGUF in the models folder answers 422
// bad_model, without the server's paths, and the idle model that a load
// would have made room for stays loaded.
func TestTruncatedModel(t *testing.T) {
	ts := startServer(t, Options{MaxLoadedModels: 2})
	// Load tiny-llama: with the default model, the registry is full.
	if status, _, body := ts.do("POST", "/api/generate", map[string]any{"model": "tiny-llama", "prompt": "x", "stream": false,
		"options": map[string]any{"num_predict": 1}}); status != http.StatusOK {
		t.Fatalf("loading tiny-llama: %d %s", status, body)
	}
	full, err := os.ReadFile(filepath.Join(ts.dir, "tiny-llama.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		size int
	}{
		{"in-metadata", 100},          // "reading GGUF metadata: EOF"
		{"in-tensors", len(full) - 1}, // the metadata is whole, the tensor data is not
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(ts.dir, tc.name+".gguf"), full[:tc.size], 0o644); err != nil {
				t.Fatal(err)
			}
			status, _, body := ts.do("POST", "/api/generate", map[string]any{"model": tc.name, "prompt": "x", "stream": false})
			if status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d: %s", status, body)
			}
			e := apiErr(t, body)
			if e.Code != CodeBadModel || strings.Contains(e.Message, ts.dir) {
				t.Fatalf("got %+v: want bad_model without the folder's path", e)
			}
			if n := len(ts.s.models.engines()); n != 2 {
				t.Fatalf("%d engines loaded after the failed load, want 2 (nothing unloaded)", n)
			}
		})
	}
}

func TestBuildVersion(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "dev"},
		{"tagged", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.1"}, Settings: rev}, "v0.3.1"},
		{"revision", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: rev}, "dev-0123456789ab"},
		{"dirty", &debug.BuildInfo{Settings: append(rev, debug.BuildSetting{Key: "vcs.modified", Value: "true"})}, "dev-0123456789ab-dirty"},
		{"nothing known", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := buildVersion(tc.bi); got != tc.want {
				t.Fatalf("buildVersion = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFolderModelDigest: /api/tags gives a models-folder file the sha256
// digest of its bytes, as Ollama gives store models theirs (computed in the
// background: the first listing may not have it yet), and hashes it again
// when the file changes.
func TestFolderModelDigest(t *testing.T) {
	ts := startServer(t, Options{})
	path := filepath.Join(ts.dir, "tiny-llama.gguf")
	fileDigest := func() string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	base, _ := url.Parse(ts.url)
	c := api.NewClient(base, http.DefaultClient)
	listed := func() string {
		list, err := c.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range list.Models {
			if m.Name == "tiny-llama" {
				return m.Digest
			}
		}
		t.Fatal("tiny-llama is not listed")
		return ""
	}
	want := fileDigest()
	waitFor(t, "the folder model's digest", func() bool { return listed() == want })

	// A changed file gets its new digest.
	spec := gguf.Default(gguf.ArchLlama)
	spec.Seed = 99
	if err := gguf.Write(path, spec); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Minute)
	os.Chtimes(path, future, future)
	want2 := fileDigest()
	if want2 == want {
		t.Fatal("the rewritten model has the same bytes")
	}
	waitFor(t, "the changed model's digest", func() bool { return listed() == want2 })
}

// TestDefaultModelName: Options.ModelName is how requests and the model
// list name the default model (nesy serve's "prior"), in place of its file
// name.
func TestDefaultModelName(t *testing.T) {
	ts := startServer(t, Options{ModelName: "prior"})
	for _, c := range []struct {
		model  string
		status int
	}{{"", http.StatusOK}, {"prior", http.StatusOK}, {"tiny-qwen3", http.StatusNotFound}} {
		req := map[string]any{"domain": bwDomain, "problem": bwShort, "method": MethodCGreedy, "max_actions": 8}
		if c.model != "" {
			req["model"] = c.model
		}
		status, _, body := ts.do("POST", "/v1/plan", req)
		if status != c.status {
			t.Fatalf("model %q: status %d, want %d: %s", c.model, status, c.status, body)
		}
		if status == http.StatusOK {
			if r := decodePlan(t, body); r.Model != "prior" {
				t.Errorf("model %q: answered by %q, want prior", c.model, r.Model)
			}
		}
	}
	status, _, body := ts.do("GET", "/v1/models", nil)
	var list modelsResponse
	if status != http.StatusOK || json.Unmarshal(body, &list) != nil {
		t.Fatalf("/v1/models: %d %s", status, body)
	}
	var names []string
	for _, m := range list.Models {
		names = append(names, m.Name)
		if m.Source == "default" && m.Name != "prior" {
			t.Errorf("default model listed as %q", m.Name)
		}
	}
	if !slices.Contains(names, "prior") {
		t.Errorf("models listed: %v, want prior among them", names)
	}
}

// TestTwoModelsAtOnce: two loaded models share Ollama's ggml CPU backend
// (one per device per process); plan requests on both at once must get
// the plans each model gives alone. Before the engines took turns per
// device (models/ggmlthread), concurrent passes read each other's
// intermediate values and decoded different tokens.
func TestTwoModelsAtOnce(t *testing.T) {
	ts := startServer(t, Options{})
	names := []string{ts.model, "tiny-llama"}
	plan := func(model string) (string, error) {
		req := map[string]any{"domain": bwDomain, "problem": bwShort, "method": MethodCGreedy, "max_actions": 12, "model": model}
		status, _, body := ts.do("POST", "/v1/plan", req)
		if status != http.StatusOK {
			return "", fmt.Errorf("%s: status %d: %s", model, status, body)
		}
		var r PlanResponse
		if err := json.Unmarshal(body, &r); err != nil {
			return "", err
		}
		return strings.Join(r.Plan, ";") + fmt.Sprintf(" (%d tokens) %s", r.GeneratedTokens, r.Text), nil
	}
	alone := map[string]string{}
	for _, m := range names {
		p, err := plan(m)
		if err != nil {
			t.Fatal(err)
		}
		alone[m] = p
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 4 {
		m := names[g%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				p, err := plan(m)
				if err == nil && p != alone[m] {
					err = fmt.Errorf("%s at once with the other model: %q, alone: %q", m, p, alone[m])
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
