package search_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/pddl/heuristic"
	"github.com/nesy-dev/nesy/pddl/heuristic/heuristictest"
	"github.com/nesy-dev/nesy/pddl/search"
)

// replay applies plan from the initial state with the task's transition
// model and returns its cost, or an error naming the first inapplicable step
// or a missed goal.
func replay(t *pddl.Task, plan []int, unit bool) (int, error) {
	s := t.Init
	cost := 0
	for i, a := range plan {
		if a < 0 || a >= len(t.Actions) {
			return 0, fmt.Errorf("step %d: action id %d out of range", i+1, a)
		}
		if !t.IsApplicable(s, a) {
			return 0, fmt.Errorf("step %d: %s not applicable", i+1, t.Actions[a].String())
		}
		s = t.Apply(s, a)
		if t.HasCosts && !unit {
			cost += t.Actions[a].Cost
		} else {
			cost++
		}
	}
	if !t.GoalReached(s) {
		return 0, fmt.Errorf("goal not reached after %d steps", len(plan))
	}
	return cost, nil
}

func smallTasks() []*pddl.Task {
	rng := rand.New(rand.NewPCG(7, 8))
	ts := []*pddl.Task{
		heuristictest.Blocks([][]string{{"a", "b", "c"}, {"d"}}, [][]string{{"d", "c", "b", "a"}}),
		heuristictest.Gripper(3),
		heuristictest.Lamps(5),
		heuristictest.Rings(5),
	}
	for i := 0; i < 3; i++ {
		ts = append(ts, heuristictest.RandomBlocks(5, rng))
	}
	return ts
}

// TestAStarOptimal compares A*'s plan cost with each admissible heuristic
// against the exact distance from an exhaustive backward Dijkstra over the
// whole state space, in both cost modes.
func TestAStarOptimal(t *testing.T) {
	for _, task := range smallTasks() {
		for _, unit := range []bool{false, true} {
			ss, err := heuristictest.Explore(task, unit, 100000)
			if err != nil {
				t.Fatal(err)
			}
			for _, spec := range []string{"lmcut", "max", "blind"} {
				t.Run(fmt.Sprintf("%s/unit=%v/%s", task.ProblemName, unit, spec), func(t *testing.T) {
					h, err := heuristic.NewWithOptions(spec, task, heuristic.Options{UnitCost: unit})
					if err != nil {
						t.Fatal(err)
					}
					res, err := search.Solve(context.Background(), task, search.Options{Algorithm: search.AStar, Heuristic: h, UnitCost: unit})
					if err != nil {
						t.Fatal(err)
					}
					if ss.Dist[0] < 0 {
						if res.Status != search.Unsolvable {
							t.Fatalf("status %v, want unsolvable", res.Status)
						}
						return
					}
					if res.Status != search.Solved {
						t.Fatalf("status %v", res.Status)
					}
					cost, err := replay(task, res.Plan, unit)
					if err != nil {
						t.Fatal(err)
					}
					if cost != res.Cost || cost != ss.Dist[0] {
						t.Fatalf("plan cost %d, reported %d, optimal %d", cost, res.Cost, ss.Dist[0])
					}
				})
			}
		}
	}
}

// TestGBFSValidPlans runs GBFS with every heuristic and checks the plan by
// replaying it.
func TestGBFSValidPlans(t *testing.T) {
	for _, task := range smallTasks() {
		for _, spec := range []string{"ff", "add", "max", "lmcut", "goalcount", "mix", "blind"} {
			for _, alg := range []string{search.GBFS, search.Lazy} {
				t.Run(task.ProblemName+"/"+spec+"/"+alg, func(t *testing.T) {
					h, err := heuristic.New(spec, task)
					if err != nil {
						t.Fatal(err)
					}
					res, err := search.Solve(context.Background(), task, search.Options{Algorithm: alg, Heuristic: h})
					if err != nil {
						t.Fatal(err)
					}
					if res.Status != search.Solved {
						t.Fatalf("status %v", res.Status)
					}
					cost, err := replay(task, res.Plan, false)
					if err != nil {
						t.Fatal(err)
					}
					if cost != res.Cost {
						t.Fatalf("plan cost %d, reported %d", cost, res.Cost)
					}
					if res.Generated < res.Expanded || res.Evaluated == 0 {
						t.Fatalf("counts: expanded %d generated %d evaluated %d", res.Expanded, res.Generated, res.Evaluated)
					}
				})
			}
		}
	}
}

func TestUnsolvable(t *testing.T) {
	// a on b and b on a: relaxed-reachable, really unsolvable; the search
	// must exhaust the space.
	cyclic := heuristictest.Blocks([][]string{{"a"}, {"b"}, {"c"}}, [][]string{{"a", "b"}, {"b", "a"}})
	// A goal fact nobody adds: the initial state is a dead end.
	b := heuristictest.NewBuilder("d", "dead")
	r, g := b.Fact("r"), b.Fact("g")
	b.Action("noop", nil, []int{r}, []int{r}, nil)
	b.Init(r)
	b.Goal(pddl.Conj{Pos: []int{g}})
	dead := b.Task()
	for _, c := range []struct {
		task         *pddl.Task
		wantExpanded bool
	}{{cyclic, true}, {dead, false}} {
		for _, alg := range []string{search.GBFS, search.Lazy, search.AStar} {
			res, err := search.Solve(context.Background(), c.task, search.Options{Algorithm: alg})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != search.Unsolvable || res.Plan != nil {
				t.Errorf("%s/%s: status %v plan %v, want unsolvable", c.task.ProblemName, alg, res.Status, res.Plan)
			}
			if (res.Expanded > 0) != c.wantExpanded {
				t.Errorf("%s/%s: expanded %d", c.task.ProblemName, alg, res.Expanded)
			}
		}
	}
}

func TestGoalInitiallyTrue(t *testing.T) {
	task := heuristictest.Blocks([][]string{{"a", "b"}}, [][]string{{"a", "b"}})
	for _, alg := range []string{search.GBFS, search.Lazy, search.AStar} {
		res, err := search.Solve(context.Background(), task, search.Options{Algorithm: alg})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != search.Solved || res.Plan == nil || len(res.Plan) != 0 || res.Expanded != 0 {
			t.Errorf("%s: %+v, want solved with an empty plan", alg, res)
		}
	}
}

func TestLimitsAndCancel(t *testing.T) {
	task := heuristictest.Gripper(6)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		opts search.Options
		want search.Status
	}{
		{"expansions", context.Background(), search.Options{MaxExpansions: 3}, search.ExpansionLimit},
		{"states", context.Background(), search.Options{MaxStates: 10}, search.StateLimit},
		{"timeout", context.Background(), search.Options{Timeout: time.Nanosecond}, search.TimeLimit},
		{"canceled", canceled, search.Options{}, search.Canceled},
	} {
		for _, alg := range []string{search.GBFS, search.Lazy, search.AStar} {
			c.opts.Algorithm = alg
			res, err := search.Solve(c.ctx, task, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != c.want || res.Plan != nil {
				t.Errorf("%s/%s: status %v, want %v", c.name, alg, res.Status, c.want)
			}
			if c.name == "expansions" && res.Expanded != 3 {
				t.Errorf("%s/%s: expanded %d, want 3", c.name, alg, res.Expanded)
			}
		}
	}
}

func TestBadOptions(t *testing.T) {
	task := heuristictest.Gripper(1)
	for _, c := range []struct {
		name string
		task *pddl.Task
		opts search.Options
	}{
		{"nil task", nil, search.Options{}},
		{"algorithm", task, search.Options{Algorithm: "dfs"}},
		{"limit", task, search.Options{MaxExpansions: -1}},
		{"state limit", task, search.Options{MaxStates: -1}},
	} {
		if _, err := search.Solve(context.Background(), c.task, c.opts); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// TestDeterministic runs each search twice and requires identical results.
func TestDeterministic(t *testing.T) {
	task := heuristictest.RandomBlocks(7, rand.New(rand.NewPCG(9, 10)))
	for _, alg := range []string{search.GBFS, search.Lazy, search.AStar} {
		var prev *search.Result
		for i := 0; i < 2; i++ {
			h, err := heuristic.New("lmcut", task)
			if err != nil {
				t.Fatal(err)
			}
			res, err := search.Solve(context.Background(), task, search.Options{Algorithm: alg, Heuristic: h})
			if err != nil {
				t.Fatal(err)
			}
			if prev != nil && (fmt.Sprint(prev.Plan) != fmt.Sprint(res.Plan) || prev.Expanded != res.Expanded || prev.Generated != res.Generated) {
				t.Fatalf("%s: run 1 %v (%d expanded), run 2 %v (%d expanded)", alg, prev.Plan, prev.Expanded, res.Plan, res.Expanded)
			}
			prev = &res
		}
	}
}

// TestWeightedAStarBound checks weighted A*'s guarantee: with an admissible
// heuristic its plan costs at most Weight times the optimum.
func TestWeightedAStarBound(t *testing.T) {
	for _, task := range smallTasks() {
		ss, err := heuristictest.Explore(task, false, 100000)
		if err != nil {
			t.Fatal(err)
		}
		if ss.Dist[0] < 0 {
			continue
		}
		for _, w := range []float64{1.5, 3} {
			h, err := heuristic.New("lmcut", task)
			if err != nil {
				t.Fatal(err)
			}
			res, err := search.Solve(context.Background(), task, search.Options{Algorithm: search.AStar, Heuristic: h, Weight: w})
			if err != nil {
				t.Fatal(err)
			}
			cost, err := replay(task, res.Plan, false)
			if err != nil || res.Status != search.Solved {
				t.Fatalf("%s w=%v: %v %v", task.ProblemName, w, res.Status, err)
			}
			if float64(cost) > w*float64(ss.Dist[0]) {
				t.Errorf("%s w=%v: cost %d > %v * optimal %d", task.ProblemName, w, cost, w, ss.Dist[0])
			}
		}
	}
	if _, err := search.Solve(context.Background(), smallTasks()[0], search.Options{Algorithm: search.AStar, Weight: -1}); err == nil {
		t.Error("negative weight accepted")
	}
}

// TestPreferredOperators runs GBFS with helpful actions, with the FF
// heuristic itself and with another heuristic (an FF is then built for the
// helpful actions), and replays the plans.
func TestPreferredOperators(t *testing.T) {
	for _, task := range smallTasks() {
		for _, spec := range []string{"ff", "goalcount"} {
			for _, alg := range []string{search.GBFS, search.Lazy} {
				h, err := heuristic.New(spec, task)
				if err != nil {
					t.Fatal(err)
				}
				res, err := search.Solve(context.Background(), task, search.Options{Algorithm: alg, Heuristic: h, PreferredOperators: true})
				if err != nil {
					t.Fatal(err)
				}
				if res.Status != search.Solved {
					t.Fatalf("%s/%s: %v", task.ProblemName, spec, res.Status)
				}
				if _, err := replay(task, res.Plan, false); err != nil {
					t.Fatalf("%s/%s/%s: %v", task.ProblemName, spec, alg, err)
				}
			}
		}
	}
}
