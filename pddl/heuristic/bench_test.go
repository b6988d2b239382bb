package heuristic_test

import (
	"math/rand/v2"
	"testing"

	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/pddl/heuristic"
	"github.com/nesy-dev/nesy/pddl/heuristic/heuristictest"
)

// benchStates evaluates spec over states, reporting time per state.
func benchStates(b *testing.B, task *pddl.Task, states []pddl.State, spec string) {
	b.Helper()
	h, err := heuristic.New(spec, task)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		h.Eval(states[i%len(states)])
	}
}

// BenchmarkSynthetic measures the heuristics on random-walk states of
// generated blocksworld (15 blocks) and gripper (20 balls) tasks.
func BenchmarkSynthetic(b *testing.B) {
	rng := rand.New(rand.NewPCG(11, 12))
	tasks := map[string]*pddl.Task{
		"blocks15":  heuristictest.RandomBlocks(15, rng),
		"gripper20": heuristictest.Gripper(20),
	}
	for _, name := range []string{"blocks15", "gripper20"} {
		task := tasks[name]
		states := heuristictest.RandomWalkStates(task, 64, 30, rng)
		for _, spec := range []string{"ff", "add", "max", "lmcut", "goalcount"} {
			b.Run(name+"/"+spec, func(b *testing.B) { benchStates(b, task, states, spec) })
		}
	}
}
