package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The 443-byte request of issue 17: six parameters over 20 blocks, 20^6 =
// 64,000,000 ground actions. It made the server allocate until the OOM
// killer struck.
const (
	wideDomain6 = `(define (domain wide) (:requirements :strips :typing) (:types block)
 (:predicates (g))
 (:action a :parameters (?x0 ?x1 ?x2 ?x3 ?x4 ?x5 - block) :precondition (and) :effect (g)))`
	wideProblem20 = `(define (problem p) (:domain wide)
 (:objects b0 b1 b2 b3 b4 b5 b6 b7 b8 b9 b10 b11 b12 b13 b14 b15 b16 b17 b18 b19 - block)
 (:init) (:goal (g)))`
)

// TestExplosiveGroundingRefused: concurrent copies of requests whose
// grounding explodes are all refused with 422 too_many_actions naming the
// action and the estimate, allocating far less than the 1 GB the issue
// bounds RSS by (they allocated gigabytes each), and a normal plan request
// is served afterwards.
func TestExplosiveGroundingRefused(t *testing.T) {
	ts := startServer(t, Options{MaxConcurrent: 2})
	var objs40 strings.Builder
	for i := range 40 {
		fmt.Fprintf(&objs40, "b%d ", i)
	}
	tests := []struct {
		name            string
		domain, problem string
		copies          int
		want            string // the message, whole
	}{
		{
			// The server's cap is 100,000 actions; the estimate's is 100
			// times that: refused before any join.
			name: "443 bytes", domain: wideDomain6, problem: wideProblem20, copies: 8,
			want: "grounding: domain.pddl:3:11: action a: up to 64000000 ground actions (20 * 20 * 20 * 20 * 20 * 20), over the limit of 10000000",
		},
		{
			// 40^4 = 2,560,000: under the estimate's cap, so the join runs
			// and stops at 4 times the action cap of bindings.
			name:    "4 parameters over 40 objects",
			domain:  strings.Replace(wideDomain6, "?x0 ?x1 ?x2 ?x3 ?x4 ?x5", "?x0 ?x1 ?x2 ?x3", 1),
			problem: fmt.Sprintf("(define (problem p) (:domain wide) (:objects %s- block) (:init) (:goal (g)))", objs40.String()),
			copies:  4,
			want:    "grounding: domain.pddl:3:11: action a: more than 400000 join bindings (estimated up to 2560000 ground actions: 40 * 40 * 40 * 40); the task is too large to ground",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			var wg sync.WaitGroup
			type answer struct {
				status int
				body   []byte
			}
			answers := make([]answer, tc.copies)
			for i := range answers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					status, _, body := ts.do("POST", "/v1/plan", map[string]any{"domain": tc.domain, "problem": tc.problem, "method": "cgreedy"})
					answers[i] = answer{status, body}
				}()
			}
			wg.Wait()
			runtime.ReadMemStats(&after)
			for i, a := range answers {
				if a.status != http.StatusUnprocessableEntity {
					t.Fatalf("request %d: status %d: %s", i, a.status, a.body)
				}
				e := apiErr(t, a.body)
				if e.Code != CodeTooManyActions || e.Message != tc.want {
					t.Fatalf("request %d: %s %q, want too_many_actions %q", i, e.Code, e.Message, tc.want)
				}
				if len(e.Positions) != 1 || e.Positions[0].Line != 3 {
					t.Fatalf("request %d: positions %+v", i, e.Positions)
				}
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<30 {
				t.Fatalf("the %d requests allocated %d MiB", tc.copies, alloc>>20)
			}
		})
	}
	status, _, body := ts.do("POST", "/v1/plan", map[string]any{"domain": bwDomain, "problem": bwShort, "method": "cgreedy"})
	if status != http.StatusOK {
		if e := apiErr(t, body); status != http.StatusUnprocessableEntity || e.Code != CodeBudgetExhausted {
			t.Fatalf("normal request after the refusals: %d %s", status, body)
		}
	}
}

// TestGroundingIsAdmitted: a request waits for an admission slot before its
// PDDL is parsed or grounded, so grounding work counts against
// MaxConcurrent.
func TestGroundingIsAdmitted(t *testing.T) {
	ts := startServer(t, Options{MaxConcurrent: 1, MaxQueue: 4})
	release, err := ts.s.adm.acquire(context.Background()) // hold the only slot
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		status, _, _ := ts.do("POST", "/v1/plan", map[string]any{"domain": wideDomain6, "problem": wideProblem20})
		done <- status
	}()
	waitFor(t, "the request to queue", func() bool { _, q := ts.s.adm.stats(); return q == 1 })
	select {
	case status := <-done:
		t.Fatalf("answered %d while the only slot was held: grounded before admission", status)
	default:
	}
	release()
	if status := <-done; status != http.StatusUnprocessableEntity {
		t.Fatalf("status %d, want 422", status)
	}
}

// slowGroundingTask is a domain whose grounding takes long under generous
// limits: a chain of n types and k actions, action i over type t(i), so
// collecting the objects of every action's type walks about k*n type
// steps; one object of the deepest type is of every type.
func slowGroundingTask(n, k int) (domain, problem string) {
	var b strings.Builder
	b.WriteString("(define (domain chain) (:requirements :strips :typing) (:types t0 - object")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, " t%d - t%d", i, i-1)
	}
	b.WriteString(") (:predicates (g))")
	for i := range k {
		fmt.Fprintf(&b, " (:action a%d :parameters (?x - t%d) :effect (g))", i, i)
	}
	b.WriteString(")")
	return b.String(), fmt.Sprintf("(define (problem c) (:domain chain) (:objects o - t%d) (:init) (:goal (g)))", n-1)
}

// cpuTime is the process's user plus system CPU time.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestDisconnectStopsGrounding: when the client goes away during a slow
// grounding, the process's CPU time stops growing within 100 ms. The CPU
// used over a window while grounding runs is compared with the CPU used
// over an equal window starting 100 ms after the disconnect, so a loaded
// machine slows both alike.
func TestDisconnectStopsGrounding(t *testing.T) {
	if testing.Short() {
		// make test's race-detector run is -short: CPU timing under the
		// race detector (every step ten times slower) says nothing here.
		t.Skip("CPU timing: not in -short runs")
	}
	// 8.75e7 type steps: seconds to minutes, depending on the load; the
	// 500 KB domain parses in a fraction of a second.
	domain, problem := slowGroundingTask(20000, 5000)
	ts := startServer(t, Options{MaxGroundSteps: 1 << 40})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		body := fmt.Sprintf(`{"domain": %q, "problem": %q, "method": "cgreedy"}`, domain, problem)
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.url+"/v1/plan", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("answered %s before the client left", resp.Status)
		}
		errc <- err
	}()
	waitFor(t, "the request to be admitted", func() bool { r, _ := ts.s.adm.stats(); return r == 1 })
	const window = 500 * time.Millisecond
	time.Sleep(1500 * time.Millisecond) // past parsing (not cancellable), into grounding
	c0 := cpuTime(t)
	time.Sleep(window)
	busy := cpuTime(t) - c0
	select {
	case err := <-errc:
		t.Fatalf("the grounding ended before the disconnect: %v", err)
	default:
	}
	cancel()
	<-errc
	time.Sleep(100 * time.Millisecond)
	// The collector frees the grounding's garbage on its own schedule:
	// do it now, so that the window measures work, not collection.
	runtime.GC()
	c1 := cpuTime(t)
	time.Sleep(window)
	after := cpuTime(t) - c1
	t.Logf("CPU over %v: %v while grounding, %v from 100 ms after the disconnect", window, busy, after)
	if busy < window/5 {
		t.Skipf("the grounding got only %v of CPU in %v: the machine is too loaded to compare", busy, window)
	}
	if after > busy/4 {
		t.Fatalf("CPU went on after the disconnect: %v in %v (grounding used %v)", after, window, busy)
	}
	waitFor(t, "the slot to be freed", func() bool { r, _ := ts.s.adm.stats(); return r == 0 })
}

// TestPromptTooLong: a prompt longer than the model's context is the
// request's fault: 422 prompt_too_long with the token counts, for every
// method, streamed or not, and on the Ollama routes.
func TestPromptTooLong(t *testing.T) {
	opts := Options{}
	opts.Engine.ContextLength = 64 // the blocksworld prompt has hundreds of tokens
	ts := startServer(t, opts)
	long := strings.Repeat("stack the red block on the blue block. ", 20)
	check := func(t *testing.T, e *apiError) {
		t.Helper()
		if e.Code != CodePromptTooLong || e.ContextLength != 64 || e.PromptTokens <= 64 || !strings.Contains(e.Message, "context holds 64") {
			t.Fatalf("got %+v, want prompt_too_long with the token counts", e)
		}
	}
	for _, method := range []string{MethodGreedy, MethodCGreedy, MethodMCTS, MethodCMCTS} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", method, stream), func(t *testing.T) {
				status, _, body := ts.do("POST", "/v1/plan", map[string]any{"domain": bwDomain, "problem": bwShort, "method": method, "stream": stream})
				if !stream {
					if status != http.StatusUnprocessableEntity {
						t.Fatalf("status %d: %s", status, body)
					}
					e := apiErr(t, body)
					check(t, &e)
					return
				}
				lines := strings.Split(strings.TrimSpace(string(body)), "\n")
				var ev PlanEvent
				if err := json.Unmarshal([]byte(lines[len(lines)-1]), &ev); err != nil || ev.Event != "error" || ev.Error == nil {
					t.Fatalf("last event %q (%v)", lines[len(lines)-1], err)
				}
				check(t, ev.Error)
			})
		}
	}
	for _, tc := range []struct {
		path string
		body map[string]any
	}{
		{"/api/generate", map[string]any{"model": ts.model, "prompt": long}},
		{"/api/generate", map[string]any{"model": ts.model, "prompt": long, "stream": false}},
		{"/api/chat", map[string]any{"model": ts.model, "messages": []map[string]string{{"role": "user", "content": long}}}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			status, _, body := ts.do("POST", tc.path, tc.body)
			if status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d: %s", status, body)
			}
			e := apiErr(t, body)
			check(t, &e)
		})
	}
}

// rawConn dials the test server and sends text.
func rawConn(t *testing.T, ts *testServer, text string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if text != "" {
		if _, err := io.WriteString(c, text); err != nil {
			t.Fatal(err)
		}
	}
	return c, bufio.NewReader(c)
}

// readClosed waits (up to 10 s) for the server to close c: end of file, or
// a reset when the client was still writing.
func readClosed(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ne net.Error
	if _, err := io.ReadAll(br); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server did not close the connection: %v", err)
	}
}

// TestSlowClients: a client that trickles its body (slow loris) gets 408
// body_timeout and its connection closed; an idle keep-alive connection is
// closed; a client over its connection bound gets 429 and is closed.
func TestSlowClients(t *testing.T) {
	t.Run("slow body", func(t *testing.T) {
		ts := startServer(t, Options{BodyTimeout: 300 * time.Millisecond})
		c, br := rawConn(t, ts, "POST /v1/plan HTTP/1.1\r\nHost: nesy\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
		stop := make(chan struct{})
		defer close(stop)
		go func() { // one byte every 100 ms: never idle, never done
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				if _, err := io.WriteString(c, " "); err != nil {
					return
				}
			}
		}()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer to the slow body: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout || apiErr(t, body).Code != CodeBodyTimeout {
			t.Fatalf("got %d %s, want 408 body_timeout", resp.StatusCode, body)
		}
		readClosed(t, c, br)
	})
	t.Run("idle", func(t *testing.T) {
		ts := startServer(t, Options{IdleTimeout: 200 * time.Millisecond})
		c, br := rawConn(t, ts, "GET /healthz HTTP/1.1\r\nHost: nesy\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("healthz: %v %v", resp, err)
		}
		io.Copy(io.Discard, resp.Body)
		readClosed(t, c, br)
	})
	t.Run("connections per client", func(t *testing.T) {
		ts := startServer(t, Options{MaxConnsPerClient: 2})
		healthy := func(c net.Conn, br *bufio.Reader) error {
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: nesy\r\n\r\n"); err != nil {
				return err
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		}
		var held []net.Conn
		for range 2 {
			c, br := rawConn(t, ts, "")
			if err := healthy(c, br); err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
		}
		c, br := rawConn(t, ts, "")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("the third connection: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusTooManyRequests || apiErr(t, body).Code != CodeTooManyConns {
			t.Fatalf("the third connection got %d %s", resp.StatusCode, body)
		}
		readClosed(t, c, br)
		held[0].Close()
		waitFor(t, "a connection after one closed", func() bool {
			c, br := rawConn(t, ts, "")
			return healthy(c, br) == nil
		})
	})
}

// TestProblemNames: a problem naming another domain, or declaring an object
// twice, is refused with the positions (package pddl only warns).
func TestProblemNames(t *testing.T) {
	ts := startServer(t, Options{})
	for _, tc := range []struct {
		name, problem string
		want          []Position
	}{
		{"other domain", "(define (problem p)\n (:domain logistics)\n (:objects a b)\n (:init (handempty) (ontable a) (ontable b) (clear a) (clear b))\n (:goal (on a b)))",
			[]Position{{"problem.pddl", 2, 11, "the problem is for domain logistics, but the domain is blocksworld-4ops"}}},
		{"duplicate object", "(define (problem p)\n (:domain blocksworld-4ops)\n (:objects a b\n  a)\n (:init (handempty) (ontable a) (ontable b) (clear a) (clear b))\n (:goal (on a b)))",
			[]Position{{"problem.pddl", 4, 3, "object a declared twice (first at problem.pddl:3:12)"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := ts.do("POST", "/v1/plan", map[string]any{"domain": bwDomain, "problem": tc.problem, "method": "cgreedy"})
			if status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d: %s", status, body)
			}
			e := apiErr(t, body)
			if e.Code != CodeBadPDDL || fmt.Sprint(e.Positions) != fmt.Sprint(tc.want) {
				t.Fatalf("got %s %+v, want bad_pddl at %+v", e.Code, e.Positions, tc.want)
			}
		})
	}
}

// TestNoServerPaths: errors about the datasets folder name it as
// <datasets>, not by its absolute path.
func TestNoServerPaths(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-datasets")
	ts := startServer(t, Options{Datasets: missing})
	status, _, body := ts.do("POST", "/v1/plan", map[string]any{"env": "blocksworld", "task": "instance-2", "method": "cgreedy"})
	if status < 400 || status >= 500 || strings.Contains(string(body), missing) {
		t.Fatalf("got %d %s: want a 4xx without the path %s", status, body, missing)
	}
}

// TestDrainNotice: during the drain notice the server still listens and
// /healthz says draining (503), so that a load balancer sees it.
func TestDrainNotice(t *testing.T) {
	ts := startServer(t, Options{DrainNotice: 3 * time.Second})
	ts.cancel() // Serve's context ends: the notice starts
	waitFor(t, "/healthz to say draining", func() bool {
		status, _, body := ts.do("GET", "/healthz", nil)
		return status == http.StatusServiceUnavailable && strings.Contains(string(body), `"draining"`)
	})
	status, _, body := ts.do("POST", "/v1/plan", map[string]any{"domain": bwDomain, "problem": bwShort, "method": "cgreedy"})
	if status != http.StatusServiceUnavailable || apiErr(t, body).Code != CodeShuttingDown {
		t.Fatalf("new work during the notice: %d %s", status, body)
	}
}
