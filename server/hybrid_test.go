package server

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
)

// TestPlanHybridModels: the server loads generated qwen35 and qwen35moe
// models as its default model with its default engine settings (64
// sequence slots per running request, 4 running: 256 slots; 128 logit
// rows), which failed to load before issue 16, and answers cmcts requests
// with valid plans that reach a two-action goal.
func TestPlanHybridModels(t *testing.T) {
	for _, arch := range []string{gguf.ArchQwen35, gguf.ArchQwen35MoE} {
		t.Run(arch, func(t *testing.T) {
			model := testModel(t, t.TempDir(), "tiny-"+arch, arch)
			ts := startServer(t, Options{Model: model})
			planShortCMCTS(t, ts)
		})
	}
}

// TestPlanHybridFittedSlots: where the default slots' recurrent state
// would not fit the engine's state memory, the server (as nesy serve
// without --sequences) loads the slots that fit, says so in /v1/models,
// and still answers cmcts requests with valid plans from its smaller share
// of sequences per request.
func TestPlanHybridFittedSlots(t *testing.T) {
	model := testModel(t, t.TempDir(), "tiny-qwen35", gguf.ArchQwen35)
	probe, err := models.Load(context.Background(), model, models.Options{Sequences: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	per := probe.Info().StateBytes
	probe.Close()
	if per <= 0 {
		t.Fatalf("StateBytes %d", per)
	}
	const fit = 24 // of the default 256
	ts := startServer(t, Options{Model: model, Engine: models.Options{StateMemory: fit*per + per/2, FitSequences: true}})
	planShortCMCTS(t, ts)
	status, _, body := ts.do("GET", "/v1/models", nil)
	var list modelsResponse
	if err := json.Unmarshal(body, &list); status != 200 || err != nil {
		t.Fatalf("/v1/models: %d %v: %s", status, err, body)
	}
	slots, state := 0, int64(0)
	for _, m := range list.Models {
		if m.Loaded {
			slots, state = m.Slots, m.StateBytes
		}
	}
	if slots != fit || state != fit*per {
		t.Errorf("the loaded model has %d sequence slots holding %d bytes of state, want the %d that fit, %d bytes: %s", slots, state, fit, fit*per, body)
	}
}

// planShortCMCTS asks ts for a cmcts plan of the two-action Blocksworld
// task and checks, independently of the server, that it is valid and
// reaches the goal.
func planShortCMCTS(t *testing.T, ts *testServer) {
	t.Helper()
	req := map[string]any{"domain": bwDomain, "problem": bwShort, "method": MethodCMCTS, "max_actions": 8,
		"seconds": 60, "search": map[string]any{"seed": 1}}
	status, _, body := ts.do("POST", "/v1/plan", req)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	r := decodePlan(t, body)
	v := validate(t, bwDomain, bwShort, r.Plan)
	if !r.Valid || !r.GoalReached || !v.Valid || !v.GoalReached {
		t.Errorf("response valid=%v goal=%v, independent validation %+v: %s", r.Valid, r.GoalReached, v, body)
	}
}
