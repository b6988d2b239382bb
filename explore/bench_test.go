package explore

import (
	"context"
	"testing"
)

// BenchmarkExploreALFWorld explores one ALFWorld task (the first of each of
// three types) per op with the tiny random model: the harness's own cost
// (belief, skills, Ready checks) plus a small model's choices.
func BenchmarkExploreALFWorld(b *testing.B) {
	lm := tinyModel(b)
	env := openEnv(b, "alfworld")
	tasks := oneOfEachType(env)[:3]
	steps, evaluated := 0, 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, ti := range tasks {
			ep, err := env.Open(context.Background(), ti.ID)
			if err != nil {
				b.Fatal(err)
			}
			res, err := Explore(context.Background(), lm, agentOf(b, ep), Options{})
			if err != nil {
				b.Fatal(err)
			}
			steps += len(res.Steps)
			evaluated += res.Usage.EvaluatedTokens
		}
	}
	b.ReportMetric(float64(steps)/float64(b.N*len(tasks)), "steps/task")
	b.ReportMetric(float64(evaluated)/float64(b.N*len(tasks)), "evaluated/task")
}
