package mcts

import (
	"context"
	"fmt"
	"github.com/nesy-dev/nesy/constraint"
	"testing"

	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
)

// BenchmarkSimulations measures simulations per second with one leaf per
// model call against 16 leaves evaluated in one batched call, same model,
// task and seed. The model is the reference llama (768 wide, 12 layers,
// 32,000-token vocabulary, F32, 134M parameters), where the forward pass
// dominates the search's own work. Each op is one search of 128 simulations
// after a short prompt (prompt evaluation included; it is a small part).
//
//	go test ./mcts -run XXX -bench Simulations -benchtime 5x
func BenchmarkSimulations(b *testing.B) {
	path := modelPath(b, "reference", func(testing.TB) gguf.Spec { s := gguf.Reference(); s.Seed = 1; return s })
	lm, idx := loadModel(b, path, models.Options{Sequences: 64, Threads: envInt("NESY_BENCH_THREADS", 1)})
	lex := loadTask(b, "", alfworldGames(b)[0])
	sp, err := constraint.New(idx, lex, constraint.Options{StopAtGoal: true})
	if err != nil {
		b.Fatal(err)
	}
	prompt, err := lm.Tokenize("You are a planner. Write a plan for the household task, one action per line.\n", false)
	if err != nil {
		b.Fatal(err)
	}
	for _, batch := range []int{1, 16} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			sims, occ := 0, 0.0
			for b.Loop() {
				res, err := Search(context.Background(), lm, sp, prompt, Options{Batch: batch, Simulations: 128, Exhaust: true, Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				sims += res.Stats.Simulations
				occ = res.Stats.BatchOccupancy
			}
			b.ReportMetric(float64(sims)/b.Elapsed().Seconds(), "sims/s")
			b.ReportMetric(occ, "occupancy")
		})
	}
}
