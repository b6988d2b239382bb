package server

import (
	"testing"

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
		})
	}
}
