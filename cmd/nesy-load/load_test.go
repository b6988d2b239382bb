package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/nesy-dev/nesy/models/gguf"
)

// TestLoad runs a small bounded load (16 concurrent plan requests on
// loopback, with and without cross-request batching) and checks that every
// request is answered 200 with a plan that validates, and that the engine
// counters moved. The full 64-request run is the nesy-load program.
func TestLoad(t *testing.T) {
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := gguf.Write(model, gguf.Default(gguf.ArchQwen3)); err != nil {
		t.Fatal(err)
	}
	work, err := loadWorkload("", 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, noBatch := range []bool{false, true} {
		cfg := config{model: model, requests: 16, concurrency: 16, slots: 8, sequences: 64, threads: 1, method: "cgreedy", end: "any",
			temperature: 0.7, maxActions: 10, seconds: 300, noBatch: noBatch, timeout: 5 * time.Minute, workload: work,
			log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		rep, err := run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(rep.String())
		if rep.OK != cfg.requests || rep.Errors != 0 || rep.Invalid != 0 {
			t.Errorf("batching=%v: %d ok, %d errors %v, %d invalid", !noBatch, rep.OK, rep.Errors, rep.ErrorKinds, rep.Invalid)
		}
		if rep.Passes <= 0 || rep.Evaluated <= 0 || rep.Latency["p50"] <= 0 || rep.Latency["max"] < rep.Latency["p50"] {
			t.Errorf("report %+v", rep)
		}
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tt := range []struct{ p, want float64 }{{50, 5}, {90, 9}, {99, 10}, {100, 10}, {1, 1}} {
		if got := pct(xs, tt.p); got != tt.want {
			t.Errorf("pct(%v) = %v, want %v", tt.p, got, tt.want)
		}
	}
}
