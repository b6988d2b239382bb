package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
)

// fuzzServer is a server on a generated tiny model with budgets small
// enough that one fuzzed request runs in milliseconds: a few tokens, a few
// simulations, a small grounding cap. Its handler is called in process
// (no listener), so a panic that escaped the recovery middleware would crash
// the fuzz worker and be recorded.
func fuzzServer(f *testing.F) http.Handler {
	f.Helper()
	dir := f.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	if err := gguf.Write(model, gguf.Default(gguf.ArchQwen3)); err != nil {
		f.Fatal(err)
	}
	modelsDir := filepath.Join(dir, "models")
	if err := os.Mkdir(modelsDir, 0o755); err != nil {
		f.Fatal(err)
	}
	// A truncated model in the folder: requests naming it must get 422.
	if err := os.WriteFile(filepath.Join(modelsDir, "broken.gguf"), []byte("GGUF\x03\x00"), 0o644); err != nil {
		f.Fatal(err)
	}
	s, err := New(context.Background(), Options{
		Model: model, ModelsDir: modelsDir, OllamaStore: filepath.Join(dir, "ollama-empty"),
		MaxConcurrent: 2, MaxTokens: 12, MaxSimulations: 24, MaxSeconds: 2, MaxActions: 8,
		MaxGroundActions: 5000, MaxGroundSteps: 2_000_000, MaxLoadedModels: 1,
		Engine: models.Options{Threads: 1},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	return s.Handler()
}

// fuzzRoute sends body to route through h and fails on what no input may
// cause: a 5xx other than 501/503 (the request's fault must be a 4xx), an
// error body without a code and message, or a request that runs for more
// than 30 s (the worker panics so the engine saves the input).
func fuzzRoute(t *testing.T, h http.Handler, route string, body []byte) {
	tm := time.AfterFunc(30*time.Second, func() {
		buf := make([]byte, 1<<20)
		panic(fmt.Sprintf("POST %s ran over 30s with %q:\n%s", route, body, buf[:runtime.Stack(buf, true)]))
	})
	defer tm.Stop()
	req := httptest.NewRequest(http.MethodPost, route, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	status := rec.Code
	if testing.Verbose() {
		t.Logf("POST %s: %d %.200s", route, status, rec.Body.Bytes())
	}
	if status >= 500 && status != http.StatusNotImplemented && status != http.StatusServiceUnavailable {
		t.Fatalf("POST %s %q: status %d: %s", route, body, status, rec.Body.Bytes())
	}
	if status < 400 || strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") ||
		strings.HasPrefix(rec.Header().Get("Content-Type"), "application/x-ndjson") {
		return
	}
	// Every error body names a code and a message (OpenAI's routes nest
	// them under "error", the others do not).
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Error   any    `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("POST %s %q: status %d with a body that is not JSON: %s", route, body, status, rec.Body.Bytes())
	}
	if e.Message == "" && e.Error == nil {
		t.Fatalf("POST %s %q: status %d with no error message: %s", route, body, status, rec.Body.Bytes())
	}
}

// planBodies are seed bodies of POST /v1/plan: every method, a stream,
// budgets, the 443-byte exploding domain, bad fields.
func planBodies() []string {
	enc := func(v map[string]any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	var out []string
	for _, m := range []string{"greedy", "cgreedy", "mcts", "cmcts", "thinking", "direct", "nope"} {
		out = append(out, enc(map[string]any{"domain": bwDomain, "problem": bwProblem, "method": m}))
	}
	return append(out,
		enc(map[string]any{"domain": bwDomain, "problem": bwShort, "method": "cmcts", "stream": true, "tree": true, "simulations": 5}),
		enc(map[string]any{"domain": bwDomain, "problem": bwProblem, "seconds": -1, "max_actions": 1e9}),
		enc(map[string]any{"domain": wideDomain6, "problem": wideProblem20, "method": "cgreedy"}),
		enc(map[string]any{"domain": bwUnsolvableDomain, "problem": bwUnsolvableProblem}),
		enc(map[string]any{"env": "alfworld", "task": "../../etc/passwd"}),
		enc(map[string]any{"domain": bwDomain, "problem": bwProblem, "model": "broken"}),
		enc(map[string]any{"domain": bwDomain, "problem": bwProblem, "model": "/etc/passwd"}),
		`{"domain": 3}`, `[]`, `{`, ``, `{"domain":"(define","problem":"("}`,
	)
}

// FuzzPlanRoute feeds whole JSON bodies (with PDDL inside) to POST /v1/plan
// on a real engine. Run: go test ./server/ -run '^$' -fuzz FuzzPlanRoute
// -fuzztime 10m.
func FuzzPlanRoute(f *testing.F) {
	for _, b := range planBodies() {
		f.Add([]byte(b))
	}
	h := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) { fuzzRoute(t, h, "/v1/plan", body) })
}

// openAIRoutes are the OpenAI-compatible routes FuzzOpenAIRoutes picks from.
var openAIRoutes = [...]string{"/v1/chat/completions", "/v1/completions"}

// FuzzOpenAIRoutes feeds JSON bodies to the OpenAI-compatible routes (the
// route is the first input): plain and streamed chats and completions,
// sampling fields, and the pddl extension. Run: go test ./server/ -run '^$'
// -fuzz FuzzOpenAIRoutes -fuzztime 10m.
func FuzzOpenAIRoutes(f *testing.F) {
	chat := func(extra string) string {
		return `{"model":"tiny","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]` + extra + `}`
	}
	pddlExt, _ := json.Marshal(map[string]any{"domain": bwDomain, "problem": bwProblem, "method": "cgreedy"})
	for _, b := range []string{
		chat(``), chat(`,"stream":true`), chat(`,"max_tokens":4,"temperature":0.7,"top_p":0.9,"seed":3`),
		chat(`,"n":2,"logprobs":true,"top_logprobs":3,"stop":["\n"]`), chat(`,"max_tokens":-5`),
		chat(`,"pddl":` + string(pddlExt)), chat(`,"pddl":{"domain":"(define"}`), chat(`,"stream":true,"pddl":` + string(pddlExt)),
		`{"model":"tiny","messages":[{"role":"tool","content":"42","tool_call_id":"x"}]}`,
		`{"model":"broken","messages":[{"role":"user","content":"hi"}]}`, `{"messages":"nope"}`, `{`, ``,
	} {
		f.Add(uint8(0), []byte(b))
	}
	for _, b := range []string{
		`{"model":"tiny","prompt":"Once upon a time","max_tokens":4}`, `{"prompt":["a","b"],"stream":true,"max_tokens":3}`,
		`{"prompt":"x","echo":true,"logprobs":2}`, `{"prompt":"x","suffix":"y"}`, `{"prompt":"x","pddl":` + string(pddlExt) + `}`, `{"prompt":3}`,
	} {
		f.Add(uint8(1), []byte(b))
	}
	h := fuzzServer(f)
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		fuzzRoute(t, h, openAIRoutes[int(route)%len(openAIRoutes)], body)
	})
}

// ollamaRoutes are the Ollama-compatible routes FuzzOllamaRoutes picks from.
var ollamaRoutes = [...]string{"/api/generate", "/api/chat", "/api/show"}

// FuzzOllamaRoutes feeds JSON bodies to the Ollama-compatible POST routes
// (the route is the first input): generate (raw, templated, with options,
// keep_alive, format), chat (tool messages, images) and show. Run: go test
// ./server/ -run '^$' -fuzz FuzzOllamaRoutes -fuzztime 10m.
func FuzzOllamaRoutes(f *testing.F) {
	for _, b := range []string{
		`{"model":"tiny","prompt":"hi","stream":false,"options":{"num_predict":4}}`,
		`{"model":"tiny","prompt":"hi","raw":true,"options":{"num_predict":3,"temperature":0.5,"seed":2,"top_k":5,"stop":["x"]}}`,
		`{"model":"tiny","prompt":"hi","system":"s","template":"{{ .Prompt }}","keep_alive":0}`,
		`{"model":"tiny","keep_alive":"5m"}`, `{"model":"tiny","prompt":"hi","format":"json","images":["aGk="]}`,
		`{"model":"broken","prompt":"hi"}`, `{"model":"../x","prompt":"hi"}`, `{"prompt":{}}`, `{`, ``,
	} {
		f.Add(uint8(0), []byte(b))
	}
	for _, b := range []string{
		`{"model":"tiny","messages":[{"role":"user","content":"hi"}],"stream":false,"options":{"num_predict":4}}`,
		`{"model":"tiny","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{}}}]},{"role":"tool","content":"1"}],"options":{"num_predict":2}}`,
		`{"model":"tiny","messages":[],"keep_alive":0}`, `{"model":"tiny","messages":[{"role":"wizard","content":"hi"}]}`,
		`{"model":"tiny","messages":[{"role":"user","content":"hi","images":["!!"]}]}`, `{"messages":null}`,
	} {
		f.Add(uint8(1), []byte(b))
	}
	for _, b := range []string{`{"model":"tiny"}`, `{"name":"tiny","verbose":true}`, `{"model":"broken"}`, `{"model":"nope:latest"}`, `{}`} {
		f.Add(uint8(2), []byte(b))
	}
	h := fuzzServer(f)
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		fuzzRoute(t, h, ollamaRoutes[int(route)%len(ollamaRoutes)], body)
	})
}
