package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
)

// Blocksworld (PlanBench's 4-operator STRIPS domain) and a small problem,
// written here so the end-to-end tests run without the shared datasets.
const bwDomain = `(define (domain blocksworld-4ops)
  (:requirements :strips)
  (:predicates (clear ?x) (ontable ?x) (handempty) (holding ?x) (on ?x ?y))
  (:action pick-up
    :parameters (?ob)
    :precondition (and (clear ?ob) (ontable ?ob) (handempty))
    :effect (and (holding ?ob) (not (clear ?ob)) (not (ontable ?ob)) (not (handempty))))
  (:action put-down
    :parameters (?ob)
    :precondition (holding ?ob)
    :effect (and (clear ?ob) (handempty) (ontable ?ob) (not (holding ?ob))))
  (:action stack
    :parameters (?ob ?underob)
    :precondition (and (clear ?underob) (holding ?ob))
    :effect (and (handempty) (clear ?ob) (on ?ob ?underob) (not (clear ?underob)) (not (holding ?ob))))
  (:action unstack
    :parameters (?ob ?underob)
    :precondition (and (on ?ob ?underob) (clear ?ob) (handempty))
    :effect (and (holding ?ob) (clear ?underob) (not (on ?ob ?underob)) (not (clear ?ob)) (not (handempty)))))
`

// bwProblem: a on b, c on the table; the goal puts b on c.
const bwProblem = `(define (problem bw-3)
  (:domain blocksworld-4ops)
  (:objects a b c)
  (:init (handempty) (on a b) (ontable b) (ontable c) (clear a) (clear c))
  (:goal (and (on b c))))
`

// An unsolvable task: l2 is not wired, so no action can switch it on
// (h_max is a dead end at the initial state).
const bwUnsolvableDomain = `(define (domain lights)
  (:requirements :strips)
  (:predicates (on ?x) (off ?x) (wired ?x))
  (:action switch-on
    :parameters (?x)
    :precondition (and (off ?x) (wired ?x))
    :effect (and (on ?x) (not (off ?x)))))
`

const bwUnsolvableProblem = `(define (problem dark)
  (:domain lights)
  (:objects l1 l2)
  (:init (off l1) (off l2) (wired l1))
  (:goal (and (on l1) (on l2))))
`

// testModel writes a tiny random-weight model and returns its path.
func testModel(t testing.TB, dir, name, arch string) string {
	t.Helper()
	path := filepath.Join(dir, name+".gguf")
	spec := gguf.Default(arch)
	if err := gguf.Write(path, spec); err != nil {
		t.Fatal(err)
	}
	return path
}

// testServer is a server listening on a loopback port.
type testServer struct {
	t      testing.TB
	s      *Server
	url    string
	cancel context.CancelFunc
	done   chan error
	model  string // the default model's request name
	dir    string // the models folder
}

// startServer writes a qwen3-style test model as the default model (and a
// llama one in the models folder), starts a server with opts on 127.0.0.1
// and stops it when the test ends.
func startServer(t testing.TB, opts Options) *testServer {
	t.Helper()
	dir := t.TempDir()
	modelsDir := filepath.Join(dir, "models")
	if err := os.Mkdir(modelsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	def := testModel(t, dir, "tiny-qwen3", gguf.ArchQwen3)
	testModel(t, modelsDir, "tiny-llama", gguf.ArchLlama)
	if opts.Model == "" {
		opts.Model = def
	}
	if opts.ModelsDir == "" {
		opts.ModelsDir = modelsDir
	}
	if opts.OllamaStore == "" && !opts.NoOllamaStore {
		opts.OllamaStore = filepath.Join(dir, "ollama-empty")
	}
	if opts.Engine.Threads == 0 {
		opts.Engine.Threads = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		if testing.Verbose() {
			opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
	}
	s, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{t: t, s: s, url: "http://" + ln.Addr().String(), cancel: cancel, done: make(chan error, 1),
		model: defaultModelName(opts.Model), dir: modelsDir}
	if opts.Uniform {
		ts.model = models.UniformName
	}
	go func() { ts.done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		ts.stop()
		s.Close()
	})
	return ts
}

// stop shuts the server down gracefully and waits for Serve to return.
func (ts *testServer) stop() error {
	ts.cancel()
	select {
	case err, ok := <-ts.done:
		if ok {
			close(ts.done)
		}
		return err
	case <-time.After(time.Minute):
		ts.t.Error("Serve did not return within a minute of its context ending")
		return errors.New("timeout")
	}
}

// do sends a request and returns the status, headers and body.
func (ts *testServer) do(method, path string, body any, header ...string) (int, http.Header, []byte) {
	ts.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			ts.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, ts.url+path, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, data
}

// apiErr decodes an error body.
func apiErr(t testing.TB, body []byte) apiError {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, body)
	}
	if e.Code == "" || e.Message == "" {
		t.Fatalf("error body lacks code or message: %s", body)
	}
	return e
}

// engine returns the default model's loaded engine.
func (ts *testServer) engine() models.LM {
	ts.t.Helper()
	for _, e := range ts.s.models.engines() {
		return e
	}
	ts.t.Fatal("no engine loaded")
	return nil
}

// metric scrapes /metrics and returns the value of the sample whose line
// starts with prefix (name plus labels), or -1.
func (ts *testServer) metric(prefix string) float64 {
	ts.t.Helper()
	_, _, body := ts.do("GET", "/metrics", nil, "Authorization", "Bearer "+ts.s.opts.Token)
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err == nil {
				return v
			}
		}
	}
	return -1
}

// waitFor polls cond for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
