package pddl

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
)

// alfworldGame is the first ALFWorld task (sorted by path).
func alfworldGame(b *testing.B) string {
	ds := testenv.Datasets(b)
	games, _ := filepath.Glob(filepath.Join(ds, "alfworld/valid_unseen/*/*/game.tw-pddl"))
	if len(games) == 0 {
		b.Fatal("no ALFWorld games")
	}
	return games[0]
}

// BenchmarkParseGroundALFWorld parses the domain and problem of one ALFWorld
// task (already read into memory) and grounds them.
func BenchmarkParseGroundALFWorld(b *testing.B) {
	g, err := LoadTWGame(alfworldGame(b))
	if err != nil {
		b.Fatal(err)
	}
	dsrc, psrc := []byte(g.Domain), []byte(g.Problem)
	b.ReportAllocs()
	for b.Loop() {
		d, _, err := ParseDomain("d", dsrc)
		if err != nil {
			b.Fatal(err)
		}
		p, _, err := ParseProblem("p", psrc)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Ground(d, p); err != nil {
			b.Fatal(err)
		}
	}
}

// alfworldStates returns states of an ALFWorld task reached by random walks.
func alfworldStates(b *testing.B) (*Task, []State) {
	task, _, err := LoadFiles("", alfworldGame(b))
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var states []State
	for w := 0; w < 8; w++ {
		s := task.Init
		for i := 0; i < 16; i++ {
			states = append(states, s)
			app := task.Applicable(s, nil)
			if len(app) == 0 {
				break
			}
			s = task.Apply(s, app[rng.IntN(len(app))])
		}
	}
	return task, states
}

// BenchmarkApplicableALFWorld computes A(s) on ALFWorld states from random
// walks (reported per state).
func BenchmarkApplicableALFWorld(b *testing.B) {
	task, states := alfworldStates(b)
	buf := make([]int, 0, 256)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		buf = task.Applicable(states[i%len(states)], buf[:0])
		i++
	}
	b.ReportMetric(float64(len(task.Actions)), "actions")
}

// BenchmarkApplicableScanALFWorld is the baseline A(s) computed by testing
// every ground action's precondition.
func BenchmarkApplicableScanALFWorld(b *testing.B) {
	task, states := alfworldStates(b)
	buf := make([]int, 0, 256)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		s := states[i%len(states)]
		buf = buf[:0]
		for a := range task.Actions {
			if task.IsApplicable(s, a) {
				buf = append(buf, a)
			}
		}
		i++
	}
}

// BenchmarkLoadFilesALFWorld reads, parses and grounds one game.tw-pddl file.
func BenchmarkLoadFilesALFWorld(b *testing.B) {
	path := alfworldGame(b)
	if _, err := os.Stat(path); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := LoadFiles("", path); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGroundQuantified1000 parses and grounds the containers domain
// (axioms_test.go) over 1,000 items: a universal precondition whose DNF
// would have 2^1000 disjuncts, compiled into derived predicates after the
// first grounding stops at 4,096 disjuncts (both groundings are timed).
func BenchmarkGroundQuantified1000(b *testing.B) {
	for i := 0; i < b.N; i++ {
		task := groundContainers(b, 1000)
		if len(task.Axioms) != 1500 {
			b.Fatalf("%d axioms", len(task.Axioms))
		}
	}
}
