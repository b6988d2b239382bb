package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nesy-dev/nesy/models/gguf"
)

// runMainEnv makes the test binary run nesy's main with its arguments
// instead of the tests: TestHostileCorpus starts a real `nesy serve`
// process this way, under a shell's ulimit, without building another
// binary.
const runMainEnv = "NESY_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Limits of the hostile run: the server process may map at most
// hostileVM bytes of virtual memory (ulimit -v), and its peak resident
// memory must stay under hostileRSS.
const (
	hostileVM  = 4 << 30
	hostileRSS = 1 << 30
)

// bwHostileDomain is PlanBench's 4-operator Blocksworld, for the normal
// requests that run beside the hostile ones.
const bwHostileDomain = `(define (domain bw) (:requirements :strips)
 (:predicates (on ?x ?y) (ontable ?x) (clear ?x) (handempty) (holding ?x))
 (:action pick-up :parameters (?x) :precondition (and (clear ?x) (ontable ?x) (handempty))
  :effect (and (not (ontable ?x)) (not (clear ?x)) (not (handempty)) (holding ?x)))
 (:action put-down :parameters (?x) :precondition (holding ?x)
  :effect (and (not (holding ?x)) (clear ?x) (handempty) (ontable ?x)))
 (:action stack :parameters (?x ?y) :precondition (and (holding ?x) (clear ?y))
  :effect (and (not (holding ?x)) (not (clear ?y)) (clear ?x) (handempty) (on ?x ?y)))
 (:action unstack :parameters (?x ?y) :precondition (and (on ?x ?y) (clear ?x) (handempty))
  :effect (and (holding ?x) (clear ?y) (not (clear ?x)) (not (handempty)) (not (on ?x ?y)))))`

const bwHostileProblem = `(define (problem p) (:domain bw) (:objects a b c)
 (:init (handempty) (on a b) (ontable b) (ontable c) (clear a) (clear c)) (:goal (and (on b c))))`

// hostileCase is one entry of the adversarial corpus: a request body sent
// copies times at once, and the 4xx statuses (and error codes) it may get.
type hostileCase struct {
	name   string
	route  string
	body   func() []byte
	copies int
	status []int
	codes  []string // "" allows any code
}

// planBody is a /v1/plan body.
func planBody(domain, problem string, extra ...any) func() []byte {
	return func() []byte {
		m := map[string]any{"domain": domain, "problem": problem, "method": "cgreedy"}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		b, _ := json.Marshal(m)
		return b
	}
}

// repeat builds a string of n copies of format's expansion of i.
func repeat(n int, format string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, format, i)
	}
	return b.String()
}

// hostileCorpus is the adversarial corpus: exponential grounding, deep type
// chains, deep nesting, prompts longer than the context, duplicate and
// mismatched names, oversized and malformed bodies.
func hostileCorpus() []hostileCase {
	const tooMany = "too_many_actions"
	wide := func(params, objects int) (string, string) {
		vars := strings.TrimSpace(repeat(params, "?x%d "))
		return fmt.Sprintf(`(define (domain wide) (:requirements :strips :typing) (:types block)
 (:predicates (g))
 (:action a :parameters (%s - block) :precondition (and) :effect (g)))`, vars),
			fmt.Sprintf("(define (problem p) (:domain wide) (:objects %s- block) (:init) (:goal (g)))", repeat(objects, "b%d "))
	}
	d6, p6 := wide(6, 20) // the 443-byte request: 20^6 bindings
	d4, p4 := wide(4, 40) // 2.56M bindings, under the estimate's cap
	var types strings.Builder
	for i := 1; i < 20000; i++ {
		fmt.Fprintf(&types, " t%d - t%d", i, i-1)
	}
	dc := fmt.Sprintf("(define (domain chain) (:requirements :strips :typing) (:types t0 - object%s) (:predicates (g ?x)) (:action a :parameters (?x - t0) :precondition (and) :effect (g ?x)))", types.String())
	pc := fmt.Sprintf("(define (problem c) (:domain chain) (:objects %s- t19999) (:init) (:goal (g o0)))", repeat(200, "o%d "))
	nest := strings.Repeat("(and ", 100000) + "(g)" + strings.Repeat(")", 100000)
	dNest := `(define (domain n) (:requirements :strips) (:predicates (g)) (:action a :parameters () :precondition ` + nest + ` :effect (g)))`
	// A long prompt: 3,600 static facts, all listed in the prompt's state,
	// over the tiny model's 8,192-token context; the task itself is small.
	dLong := `(define (domain bw) (:requirements :strips) (:predicates (near ?x ?y) (g ?x)) (:action a :parameters (?x ?y) :precondition (near ?x ?y) :effect (g ?x)))`
	pLong := fmt.Sprintf("(define (problem p) (:domain bw) (:objects %s) (:init %s) (:goal (g o1)))", repeat(60, "o%d "), longInit(60))
	return []hostileCase{
		{name: "443-byte six parameters", route: "/v1/plan", body: planBody(d6, p6), copies: 8, status: []int{422}, codes: []string{tooMany}},
		{name: "four parameters over 40 objects", route: "/v1/plan", body: planBody(d4, p4), copies: 4, status: []int{422}, codes: []string{tooMany}},
		// Grounds in a second or two (each object has 20,000 types); the
		// random model then loops until its action budget runs out.
		{name: "20,000-type chain", route: "/v1/plan", body: planBody(dc, pc, "max_actions", 5), copies: 2, status: []int{200, 422}, codes: []string{"", tooMany, "budget_exhausted"}},
		{name: "nesting 100,000 deep", route: "/v1/plan", body: planBody(dNest, "(define (problem p) (:domain n) (:init) (:goal (g)))"), copies: 2, status: []int{413, 422}},
		{name: "prompt over the context", route: "/v1/plan", body: planBody(dLong, pLong), copies: 2, status: []int{422}, codes: []string{"prompt_too_long"}},
		{name: "object declared twice", route: "/v1/plan", body: planBody(bwHostileDomain, strings.Replace(bwHostileProblem, "a b c", "a b c a", 1)), copies: 1, status: []int{422}, codes: []string{"bad_pddl"}},
		{name: "problem of another domain", route: "/v1/plan", body: planBody(bwHostileDomain, strings.Replace(bwHostileProblem, "(:domain bw)", "(:domain other)", 1)), copies: 1, status: []int{422}, codes: []string{"bad_pddl"}},
		{name: "body over 8 MiB", route: "/v1/plan", body: func() []byte { return append([]byte(`{"domain":"`), bytes.Repeat([]byte("x"), 9<<20)...) }, copies: 2, status: []int{413}},
		{name: "not JSON", route: "/v1/plan", body: func() []byte { return []byte("\x00\xff{{{") }, copies: 1, status: []int{400}},
		{name: "chat over the context", route: "/v1/chat/completions", body: func() []byte {
			b, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": strings.Repeat("plan ", 20000)}}})
			return b
		}, copies: 2, status: []int{400, 422}},
		{name: "ollama generate over the context", route: "/api/generate", body: func() []byte {
			b, _ := json.Marshal(map[string]any{"prompt": strings.Repeat("plan ", 20000), "stream": false})
			return b
		}, copies: 2, status: []int{400, 422}},
	}
}

// longInit is the init of the long-prompt problem: every pair of n objects
// near each other (n^2 static facts, each a line of the prompt's state).
func longInit(n int) string {
	var b strings.Builder
	for i := range n {
		for j := range n {
			fmt.Fprintf(&b, "(near o%d o%d) ", i, j)
		}
	}
	return b.String()
}

// hostileServer is a `nesy serve` child process.
type hostileServer struct {
	cmd *exec.Cmd
	url string
}

// startHostileServer starts `nesy serve` (this test binary running main)
// under `ulimit -v`, on a loopback port, with the tiny model, and waits
// until it listens.
func startHostileServer(t *testing.T, args ...string) *hostileServer {
	t.Helper()
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	if err := gguf.Write(model, gguf.Default(gguf.ArchQwen3)); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args = append([]string{"-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, hostileVM/1024), self,
		"serve", "--addr", "127.0.0.1:0", "--model", model, "--no-ollama", "--threads", "1", "--log-level", "info"}, args...)
	cmd := exec.Command("sh", args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	hs := &hostileServer{cmd: cmd}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := make(chan string, 1)
	var logTail struct {
		sync.Mutex
		lines []string
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		re := regexp.MustCompile(`msg=listening addr=(\S+)`)
		for sc.Scan() {
			line := sc.Text()
			logTail.Lock()
			logTail.lines = append(logTail.lines, line)
			if len(logTail.lines) > 50 {
				logTail.lines = logTail.lines[1:]
			}
			logTail.Unlock()
			if m := re.FindStringSubmatch(line); m != nil {
				addr <- m[1]
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			logTail.Lock()
			defer logTail.Unlock()
			t.Fatalf("nesy serve exited before listening:\n%s", strings.Join(logTail.lines, "\n"))
		}
		hs.url = "http://" + a
	case <-time.After(2 * time.Minute):
		t.Fatal("nesy serve did not listen within 2 minutes")
	}
	t.Cleanup(func() {
		if t.Failed() {
			logTail.Lock()
			t.Logf("server log tail:\n%s", strings.Join(logTail.lines, "\n"))
			logTail.Unlock()
		}
	})
	return hs
}

// peakRSS is the process's peak resident memory (VmHWM) in bytes.
func (hs *hostileServer) peakRSS(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", hs.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("reading the server's memory: %v", err)
	}
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("no VmHWM in /proc status:\n%s", data)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// post sends body and returns the status, the error code (if the body is
// an error) and the time taken.
func (hs *hostileServer) post(route string, body []byte) (int, string, time.Duration, error) {
	start := time.Now()
	resp, err := http.Post(hs.url+route, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, "", time.Since(start), err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var e struct {
		Code  any `json:"code"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(data, &e)
	code, _ := e.Code.(string)
	if code == "" {
		code = e.Error.Code
	}
	return resp.StatusCode, code, time.Since(start), nil
}

// TestHostileCorpus runs the adversarial corpus against a real `nesy serve`
// process under `ulimit -v` (4 GiB): every request gets the 4xx its case
// allows, the process's peak RSS stays under 1 GiB, it keeps serving
// (/healthz and a normal plan afterwards), and normal plan requests sent
// while the hostile ones run all succeed (their latency before and during
// is logged; BENCHMARKS.md records it).
func TestHostileCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process and sends the adversarial corpus")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc to read the server's memory")
	}
	hs := startHostileServer(t, "--max-concurrent", "4", "--max-ground-steps", "50000000", "--request-memory", "256MiB")
	normal := planBody(bwHostileDomain, bwHostileProblem)()
	sendNormal := func() time.Duration {
		status, code, d, err := hs.post("/v1/plan", normal)
		if err != nil || status != http.StatusOK {
			t.Errorf("normal request: %d %s %v", status, code, err)
		}
		return d
	}
	var before []time.Duration
	for range 10 {
		before = append(before, sendNormal())
	}

	// The hostile requests, each case's copies at once, all cases at once,
	// while normal requests keep coming.
	var during []time.Duration
	stop := make(chan struct{})
	var normals sync.WaitGroup
	normals.Add(1)
	go func() {
		defer normals.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			during = append(during, sendNormal())
		}
	}()
	var wg sync.WaitGroup
	for _, tc := range hostileCorpus() {
		body := tc.body()
		for c := range tc.copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, code, d, err := hs.post(tc.route, body)
				if err != nil {
					t.Errorf("%s (copy %d): %v", tc.name, c, err)
					return
				}
				if !slices.Contains(tc.status, status) || (tc.codes != nil && !slices.Contains(tc.codes, code)) {
					t.Errorf("%s (copy %d): %d %s, want one of %v %v", tc.name, c, status, code, tc.status, tc.codes)
				}
				if c == 0 {
					t.Logf("%-34s %d %-18s %6.2fs (%d bytes)", tc.name, status, code, d.Seconds(), len(body))
				}
			}()
		}
	}
	wg.Wait()
	close(stop)
	normals.Wait()

	sendNormal()
	if resp, err := http.Get(hs.url + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz after the corpus: %v %v", resp, err)
	}
	rss := hs.peakRSS(t)
	t.Logf("peak RSS %d MiB (limit %d MiB, ulimit -v %d MiB)", rss>>20, hostileRSS>>20, hostileVM>>20)
	if rss >= hostileRSS {
		t.Errorf("peak RSS %d MiB, want under %d MiB", rss>>20, hostileRSS>>20)
	}
	med := func(d []time.Duration) time.Duration {
		if len(d) == 0 {
			return 0
		}
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	t.Logf("normal plan requests: median %v over %d before, %v over %d during the hostile ones",
		med(before).Round(time.Millisecond), len(before), med(during).Round(time.Millisecond), len(during))
	if len(during) == 0 {
		t.Error("no normal request completed while the hostile ones ran")
	}
}
