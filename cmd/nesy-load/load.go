package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nesy-dev/nesy/examples"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/server"
)

// config is one load run.
type config struct {
	model       string
	requests    int
	concurrency int
	slots       int
	sequences   int
	threads     int
	method      string
	end         string
	temperature float64
	maxActions  int
	simulations int
	seconds     float64
	instances   string
	tasks       int
	noBatch     bool
	timeout     time.Duration
	workload    []task
	log         *slog.Logger
}

// task is one planning problem of the workload.
type task struct {
	name, domain, problem string
	ground                *pddl.Task
}

// report is the outcome of one run.
type report struct {
	Batching      bool               `json:"cross_request_batching"`
	Method        string             `json:"method"`
	Requests      int                `json:"requests"`
	Concurrency   int                `json:"concurrency"`
	Slots         int                `json:"max_concurrent"`
	OK            int                `json:"ok"`
	Errors        int                `json:"errors"`
	ErrorKinds    map[string]int     `json:"error_kinds,omitempty"`
	ErrorSamples  map[string]string  `json:"error_samples,omitempty"` // one message per kind
	Invalid       int                `json:"invalid"`                 // 200 answers whose plan does not validate
	Goal          int                `json:"goal_reached"`
	Actions       int                `json:"actions"`
	Seconds       float64            `json:"seconds"`
	Throughput    float64            `json:"requests_per_second"`
	Latency       map[string]float64 `json:"latency_seconds"` // p50, p90, p99, max
	Evaluated     float64            `json:"evaluated_tokens"`
	Passes        float64            `json:"forward_passes"`
	TokensPerPass float64            `json:"evaluated_tokens_per_pass"`
	TokensPerSec  float64            `json:"evaluated_tokens_per_second"`
}

func (r report) String() string {
	mode := "on"
	if !r.Batching {
		mode = "off"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "batching %-3s  %s  %d requests, %d concurrent, %d slots: %d ok, %d errors %v, %d invalid, %d reached the goal, %d actions\n",
		mode, r.Method, r.Requests, r.Concurrency, r.Slots, r.OK, r.Errors, r.ErrorKinds, r.Invalid, r.Goal, r.Actions)
	fmt.Fprintf(&b, "  %.2f s, %.2f req/s; latency p50 %.2f s, p90 %.2f s, p99 %.2f s, max %.2f s\n",
		r.Seconds, r.Throughput, r.Latency["p50"], r.Latency["p90"], r.Latency["p99"], r.Latency["max"])
	fmt.Fprintf(&b, "  %.0f evaluated tokens in %.0f forward passes (%.1f per pass), %.0f tokens/s",
		r.Evaluated, r.Passes, r.TokensPerPass, r.TokensPerSec)
	for k, m := range r.ErrorSamples {
		fmt.Fprintf(&b, "\n  %s: %s", k, m)
	}
	return b.String()
}

// loadWorkload reads n PlanBench instances (instance-1 ... instance-n), or
// the example task (examples/blocks) when the folder is absent.
func loadWorkload(dir string, n int) ([]task, error) {
	if dir == "" {
		shared := os.Getenv("NESY_SHARED")
		if shared == "" {
			if wd, err := os.Getwd(); err == nil {
				for d := wd; ; d = filepath.Dir(d) {
					if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
						shared = filepath.Join(filepath.Dir(d), "shared")
						break
					}
					if filepath.Dir(d) == d {
						break
					}
				}
			}
		}
		dir = filepath.Join(shared, "datasets", "planbench-blocksworld")
	}
	var out []task
	domain, err := os.ReadFile(filepath.Join(dir, "domain.pddl"))
	if err != nil {
		out = append(out, task{name: "examples/blocks", domain: examples.BlocksDomain, problem: examples.BlocksProblem})
	} else {
		for i := 1; len(out) < n && i <= 10*n; i++ {
			name := fmt.Sprintf("instance-%d", i)
			prob, err := os.ReadFile(filepath.Join(dir, "instances", name+".pddl"))
			if err != nil {
				continue
			}
			out = append(out, task{name: name, domain: string(domain), problem: string(prob)})
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("no instances in %s", dir)
		}
	}
	for i := range out {
		d, _, err := pddl.ParseDomain("domain.pddl", []byte(out[i].domain))
		if err != nil {
			return nil, err
		}
		p, _, err := pddl.ParseProblem(out[i].name, []byte(out[i].problem))
		if err != nil {
			return nil, err
		}
		if out[i].ground, err = pddl.Ground(d, p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// run starts a server on loopback, sends the requests and reports.
func run(ctx context.Context, cfg config) (report, error) {
	srv, err := server.New(ctx, server.Options{
		Model: cfg.model, NoOllamaStore: true, MaxConcurrent: cfg.slots, MaxQueue: cfg.requests,
		QueueTimeout: cfg.timeout, Logger: cfg.log,
		Engine: models.Options{Threads: cfg.threads, NoMerge: cfg.noBatch, Sequences: cfg.sequences, Logger: cfg.log},
	})
	if err != nil {
		return report{}, err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return report{}, err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	defer func() { stop(); <-served }()
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.concurrency}}

	ev0, passes0, err := engineCounters(client, base)
	if err != nil {
		return report{}, err
	}
	rep := report{Batching: !cfg.noBatch, Method: cfg.method, Requests: cfg.requests, Concurrency: cfg.concurrency,
		Slots: cfg.slots, ErrorKinds: map[string]int{}, ErrorSamples: map[string]string{}}
	var mu sync.Mutex // protects rep and lat
	var lat []float64
	sem := make(chan struct{}, cfg.concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range cfg.requests {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			tk := cfg.workload[i%len(cfg.workload)]
			t0 := time.Now()
			res, kind, msg := planOnce(ctx, client, base, cfg, tk, uint64(i+1))
			d := time.Since(t0).Seconds()
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, d)
			if kind != "" {
				rep.Errors++
				rep.ErrorKinds[kind]++
				rep.ErrorSamples[kind] = msg
				return
			}
			rep.OK++
			steps, err := pddl.ParsePlan("plan", []byte(strings.Join(res.Plan, "\n")))
			v := tk.ground.Validate(steps)
			if err != nil || !v.Valid || v.GoalReached != res.GoalReached || !res.Valid {
				rep.Invalid++
			}
			if v.GoalReached {
				rep.Goal++
			}
			rep.Actions += len(res.Plan)
		}()
	}
	wg.Wait()
	rep.Seconds = time.Since(start).Seconds()
	rep.Throughput = float64(cfg.requests) / rep.Seconds
	slices.Sort(lat)
	rep.Latency = map[string]float64{"p50": pct(lat, 50), "p90": pct(lat, 90), "p99": pct(lat, 99), "max": lat[len(lat)-1]}
	ev1, passes1, err := engineCounters(client, base)
	if err != nil {
		return rep, err
	}
	rep.Evaluated, rep.Passes = ev1-ev0, passes1-passes0
	if rep.Passes > 0 {
		rep.TokensPerPass = rep.Evaluated / rep.Passes
	}
	rep.TokensPerSec = rep.Evaluated / rep.Seconds
	return rep, nil
}

// pct is the p-th percentile of sorted xs (nearest rank).
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	k := int(math.Ceil(p/100*float64(len(xs)))) - 1
	return xs[max(0, min(k, len(xs)-1))]
}

// planOnce sends one plan request; kind is "" on success, else what failed
// (with the error message).
func planOnce(ctx context.Context, client *http.Client, base string, cfg config, tk task, seed uint64) (*server.PlanResponse, string, string) {
	body := server.PlanRequest{Domain: tk.domain, Problem: tk.problem, Method: cfg.method, End: cfg.end,
		MaxActions: cfg.maxActions, Simulations: cfg.simulations, Seconds: cfg.seconds,
		Sampling: &server.SamplingParams{Temperature: cfg.temperature, Seed: seed}}
	data, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/plan", bytes.NewReader(data))
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, "timeout", err.Error()
		}
		return nil, "transport", err.Error()
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "read", err.Error()
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Code    string `json:"code"`
			Message string `json:"error"`
		}
		json.Unmarshal(raw, &e)
		return nil, fmt.Sprintf("%d %s", resp.StatusCode, e.Code), e.Message
	}
	var res server.PlanResponse
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, "bad json", err.Error()
	}
	return &res, "", ""
}

// engineCounters scrapes the engine's evaluated tokens and forward passes.
func engineCounters(client *http.Client, base string) (evaluated, passes float64, err error) {
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "nesy_engine_evaluated_tokens_total "); ok {
			fmt.Sscan(v, &evaluated)
		}
		if v, ok := strings.CutPrefix(line, "nesy_engine_forward_passes_total "); ok {
			fmt.Sscan(v, &passes)
		}
	}
	return evaluated, passes, sc.Err()
}
