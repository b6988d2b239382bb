package heuristic_test

import (
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sort"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/pddl/heuristic"
	"github.com/nesy-dev/nesy/pddl/heuristic/heuristictest"
)

func load(tb testing.TB, domain, problem string) *pddl.Task {
	tb.Helper()
	task, _, err := pddl.LoadFiles(domain, problem)
	if err != nil {
		tb.Fatalf("load %s: %v", problem, err)
	}
	return task
}

// TestIPCAdmissible checks h_max <= LM-cut <= h* on states of small IPC
// instances. Where the whole state space is small, h* of every reachable
// state comes from an exhaustive backward Dijkstra (heuristictest.Explore)
// and 300 of them are checked; for logistics, h* of the states along an
// optimal plan found by breadth-first search is the remaining plan length.
func TestIPCAdmissible(t *testing.T) {
	ipc := filepath.Join(testenv.Datasets(t), "ipc")
	rng := rand.New(rand.NewPCG(13, 14))
	for _, c := range []struct {
		domain, problem string
		exhaustive      bool
	}{
		{"blocks", "probBLOCKS-6-0.pddl", true},
		{"gripper", "prob02.pddl", true},
		{"logistics00", "probLOGISTICS-4-2.pddl", false},
	} {
		t.Run(c.domain, func(t *testing.T) {
			task := load(t, filepath.Join(ipc, c.domain, "domain.pddl"), filepath.Join(ipc, c.domain, c.problem))
			var states []pddl.State
			var hstar []int
			if c.exhaustive {
				ss, err := heuristictest.Explore(task, false, 100000)
				if err != nil {
					t.Fatal(err)
				}
				for k := 0; k < 300; k++ {
					i := rng.IntN(len(ss.States))
					states, hstar = append(states, ss.States[i]), append(hstar, ss.Dist[i])
				}
			} else {
				plan := bfsPlan(task)
				if plan == nil {
					t.Fatal("no plan found by breadth-first search")
				}
				s := task.Init
				for i, a := range plan {
					states, hstar = append(states, s), append(hstar, len(plan)-i)
					s = task.Apply(s, a)
				}
			}
			hmax, err := heuristic.New("max", task)
			if err != nil {
				t.Fatal(err)
			}
			lm, err := heuristic.New("lmcut", task)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range states {
				hs := hstar[i]
				a, _ := hmax.Eval(s)
				b, dead := lm.Eval(s)
				if dead && hs >= 0 {
					t.Fatalf("state %d: LM-cut dead end, h* = %d", i, hs)
				}
				if hs >= 0 && !(a <= b && b <= float64(hs)) {
					t.Fatalf("state %d: h_max %v, LM-cut %v, h* %d\n%s", i, a, b, hs, task.FormatState(s, false))
				}
			}
		})
	}
}

// bfsPlan returns a shortest plan by breadth-first search, nil if none.
func bfsPlan(t *pddl.Task) []int {
	type node struct {
		s      pddl.State
		parent int
		action int
	}
	nodes := []node{{t.Init, -1, -1}}
	seen := map[string]bool{t.Init.Key(): true}
	var buf []int
	for i := 0; i < len(nodes); i++ {
		if t.GoalReached(nodes[i].s) {
			var plan []int
			for j := i; nodes[j].parent >= 0; j = nodes[j].parent {
				plan = append([]int{nodes[j].action}, plan...)
			}
			return plan
		}
		buf = t.Applicable(nodes[i].s, buf[:0])
		for _, a := range buf {
			n := t.Apply(nodes[i].s, a)
			if k := n.Key(); !seen[k] {
				seen[k] = true
				nodes = append(nodes, node{n, i, a})
			}
		}
	}
	return nil
}

// alfworldStates loads n ALFWorld tasks (spread over the task types) and
// random-walk states of each.
func alfworldStates(tb testing.TB, n, perTask int) ([]*pddl.Task, [][]pddl.State) {
	dir := filepath.Join(testenv.Datasets(tb), "alfworld")
	games, _ := filepath.Glob(filepath.Join(dir, "valid_unseen", "*", "*", "game.tw-pddl"))
	if len(games) == 0 {
		tb.Fatal("no ALFWorld games found")
	}
	sort.Strings(games)
	rng := rand.New(rand.NewPCG(15, 16))
	var tasks []*pddl.Task
	var states [][]pddl.State
	for i := 0; i < n; i++ {
		task := load(tb, filepath.Join(dir, "alfred.pddl"), games[i*len(games)/n])
		tasks = append(tasks, task)
		states = append(states, heuristictest.RandomWalkStates(task, perTask, 20, rng))
	}
	return tasks, states
}

// TestALFWorldOrder checks on random-walk states of ALFWorld tasks (all
// solvable, with action costs, a disjunctive goal and conditional effects)
// that no heuristic reports a dead end and that h_max <= LM-cut,
// h_max <= FF <= h_add.
func TestALFWorldOrder(t *testing.T) {
	tasks, states := alfworldStates(t, 6, 20)
	for ti, task := range tasks {
		hs := map[string]heuristic.Heuristic{}
		for _, spec := range []string{"max", "add", "ff", "lmcut"} {
			h, err := heuristic.New(spec, task)
			if err != nil {
				t.Fatal(err)
			}
			hs[spec] = h
		}
		for i, s := range states[ti] {
			v := map[string]float64{}
			for spec, h := range hs {
				x, dead := h.Eval(s)
				if dead {
					t.Fatalf("%s state %d: %s dead end in a solvable ALFWorld task", task.ProblemName, i, spec)
				}
				v[spec] = x
			}
			if !(v["max"] <= v["lmcut"] && v["max"] <= v["ff"] && v["ff"] <= v["add"]) {
				t.Fatalf("%s state %d: %v", task.ProblemName, i, v)
			}
		}
	}
}

// BenchmarkALFWorld measures time per state evaluation on random-walk states
// of ALFWorld tasks (six tasks, one per task type order, 32 states each).
func BenchmarkALFWorld(b *testing.B) {
	tasks, states := alfworldStates(b, 6, 32)
	type pair struct {
		h heuristic.Heuristic
		s pddl.State
	}
	for _, spec := range []string{"ff", "ff:noneg", "add", "max", "lmcut", "lmcut:noneg", "goalcount", "mix"} {
		b.Run(spec, func(b *testing.B) {
			var all []pair
			for i, task := range tasks {
				h, err := heuristic.New(spec, task)
				if err != nil {
					b.Fatal(err)
				}
				for _, s := range states[i] {
					all = append(all, pair{h, s})
				}
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			c0, ok := threadCPU()
			n := 0
			for ; b.Loop(); n++ {
				p := all[n%len(all)]
				p.h.Eval(p.s)
			}
			reportCPU(b, c0, ok, n)
		})
	}
}

// BenchmarkNewALFWorld measures building h_FF and LM-cut (compiling the
// relaxed task) for six ALFWorld tasks.
func BenchmarkNewALFWorld(b *testing.B) {
	tasks, _ := alfworldStates(b, 6, 1)
	b.ReportAllocs()
	for b.Loop() {
		for _, task := range tasks {
			if _, err := heuristic.New("mix(1*ff+1*lmcut)", task); err != nil {
				b.Fatal(err)
			}
		}
	}
}
