package heuristic_test

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

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
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	c0, ok := threadCPU()
	n := 0
	for ; b.Loop(); n++ {
		h.Eval(states[n%len(states)])
	}
	reportCPU(b, c0, ok, n)
}

// reportCPU adds a "cpu-ns/op" metric: the benchmark thread's CPU time per
// iteration since c0 (see threadCPU).
func reportCPU(b *testing.B, c0 time.Duration, ok bool, n int) {
	if c1, ok1 := threadCPU(); ok && ok1 && n > 0 {
		b.ReportMetric(float64(c1-c0)/float64(n), "cpu-ns/op")
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
