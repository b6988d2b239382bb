// Command nesy-load is a bounded load test of nesy's HTTP server. It starts
// a server in-process on 127.0.0.1 (with a generated tiny model unless
// --model is given), sends a fixed number of concurrent POST /v1/plan
// requests over loopback, checks every answer (status, and the returned plan
// re-validated independently with package pddl), and reports throughput and
// latency percentiles, once with cross-request batching and once without
// (--modes). It never talks to anything but the loopback server it started,
// and stops by itself: the request count is fixed and every request has a
// timeout.
//
//	go run ./cmd/nesy-load --requests 64 --concurrency 64
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nesy-dev/nesy/models/gguf"
)

func main() {
	var cfg config
	var modes, out, arch string
	flag.StringVar(&cfg.model, "model", "", "GGUF model to serve (default: a generated tiny random-weight model)")
	flag.StringVar(&arch, "arch", gguf.ArchQwen3, "architecture of the generated model")
	var size string
	flag.StringVar(&size, "size", "tiny", "size of the generated model: tiny (gguf.Default, ~0.5M parameters) or reference (gguf.Reference, 134M parameters, 540 MB)")
	flag.IntVar(&cfg.requests, "requests", 64, "plan requests to send")
	flag.IntVar(&cfg.concurrency, "concurrency", 64, "requests in flight at once")
	flag.IntVar(&cfg.slots, "max-concurrent", 16, "the server's --max-concurrent (requests running on the engine at once)")
	flag.IntVar(&cfg.sequences, "sequences", 0, "the server's --sequences (KV-cache sequence slots, shared by all requests; each request may hold sequences/max-concurrent); 0: the server's default, 64 per --max-concurrent request")
	flag.IntVar(&cfg.threads, "threads", 0, "engine threads (0: all cores)")
	flag.StringVar(&cfg.method, "method", "cgreedy", "planning method")
	flag.StringVar(&cfg.end, "end", "any", "end policy of constrained plans (any or goal)")
	flag.Float64Var(&cfg.temperature, "temperature", 0.7, "sampling temperature (each request gets its own seed)")
	flag.IntVar(&cfg.maxActions, "max-actions", 20, "plan length budget")
	flag.IntVar(&cfg.simulations, "simulations", 0, "MCTS simulation budget")
	flag.Float64Var(&cfg.seconds, "seconds", 60, "planner seconds budget per request")
	flag.StringVar(&cfg.instances, "instances", "", "PlanBench Blocksworld folder (domain.pddl, instances/); default $NESY_SHARED/datasets/planbench-blocksworld or ../shared beside the repository; the example task examples/blocks when absent")
	flag.IntVar(&cfg.tasks, "tasks", 16, "distinct instances to cycle through")
	flag.StringVar(&modes, "modes", "on,off", "cross-request batching modes to run, in order: on, off")
	flag.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "per-request timeout")
	flag.StringVar(&out, "json", "", "also write the reports as JSON to this file")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.log = log
	if cfg.model == "" {
		dir, err := os.MkdirTemp("", "nesy-load")
		if err != nil {
			fatal(err)
		}
		defer os.RemoveAll(dir)
		spec := gguf.Default(arch)
		switch size {
		case "tiny":
		case "reference":
			spec = gguf.Reference()
		default:
			fatal(fmt.Errorf("--size: %q is not tiny or reference", size))
		}
		cfg.model = filepath.Join(dir, size+"-"+spec.Arch+".gguf")
		if err := gguf.Write(cfg.model, spec); err != nil {
			fatal(err)
		}
	}
	var err error
	if cfg.workload, err = loadWorkload(cfg.instances, cfg.tasks); err != nil {
		fatal(err)
	}
	var reports []report
	for _, mode := range strings.Split(modes, ",") {
		mode = strings.TrimSpace(mode)
		if mode != "on" && mode != "off" {
			fatal(fmt.Errorf("--modes: %q is not on or off", mode))
		}
		cfg.noBatch = mode == "off"
		rep, err := run(context.Background(), cfg)
		if err != nil {
			fatal(err)
		}
		fmt.Println(rep.String())
		reports = append(reports, rep)
	}
	if out != "" {
		data, _ := json.MarshalIndent(reports, "", "  ")
		if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
			fatal(err)
		}
	}
	for _, r := range reports {
		if r.Errors > 0 || r.Invalid > 0 {
			os.Exit(1)
		}
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "nesy-load:", err)
	os.Exit(2)
}
