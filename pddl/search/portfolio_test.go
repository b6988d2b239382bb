package search_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nesy-dev/nesy/pddl/heuristic"
	"github.com/nesy-dev/nesy/pddl/heuristic/heuristictest"
	"github.com/nesy-dev/nesy/pddl/search"
)

// TestTypeBased runs GBFS and lazy GBFS with type-based exploration, with
// and without preferred operators: plans replay with the reported cost, a
// seed reproduces a search, and the exploration changes some search (the
// list is really taken from).
func TestTypeBased(t *testing.T) {
	changed := 0
	for _, task := range smallTasks() {
		for _, alg := range []string{search.GBFS, search.Lazy} {
			for _, pref := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/pref=%v", task.ProblemName, alg, pref)
				base, err := search.Solve(context.Background(), task, search.Options{Algorithm: alg, PreferredOperators: pref})
				if err != nil {
					t.Fatal(err)
				}
				var prev *search.Result
				for _, seed := range []uint64{1, 1, 2} {
					res, err := search.Solve(context.Background(), task, search.Options{Algorithm: alg, PreferredOperators: pref, TypeBased: true, Seed: seed})
					if err != nil {
						t.Fatal(err)
					}
					if res.Status != search.Solved {
						t.Fatalf("%s seed %d: %v", name, seed, res.Status)
					}
					cost, err := replay(task, res.Plan, false)
					if err != nil {
						t.Fatalf("%s seed %d: %v", name, seed, err)
					}
					if cost != res.Cost {
						t.Fatalf("%s seed %d: plan cost %d, reported %d", name, seed, cost, res.Cost)
					}
					if prev != nil && seed == 1 && (fmt.Sprint(prev.Plan) != fmt.Sprint(res.Plan) || prev.Expanded != res.Expanded || prev.Generated != res.Generated) {
						t.Fatalf("%s: seed 1 twice gave %v (%d expanded) and %v (%d)", name, prev.Plan, prev.Expanded, res.Plan, res.Expanded)
					}
					if seed == 1 && prev == nil && (res.Generated != base.Generated || fmt.Sprint(res.Plan) != fmt.Sprint(base.Plan)) {
						changed++
					}
					prev = &res
				}
			}
		}
	}
	if changed == 0 {
		t.Fatal("type-based exploration never changed a search: the list is not taken from")
	}
	t.Logf("%d of %d searches changed by the exploration", changed, 4*len(smallTasks()))
}

// TestPortfolio checks the portfolio's contract: one member is Solve itself
// (same plan, same counts); two members give a valid plan whose cost is
// counted as the first member counts it, and counters that add up the
// members'; unsolvable, cancelled, limited and invalid runs report as Solve
// does.
func TestPortfolio(t *testing.T) {
	ctx := context.Background()
	for _, task := range smallTasks() {
		lazy := search.Options{Algorithm: search.Lazy, PreferredOperators: true}
		one, err := search.Solve(ctx, task, lazy)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := search.Portfolio(ctx, task, []search.Options{lazy})
		if err != nil {
			t.Fatal(err)
		}
		if pr.Member != 0 || pr.Status != one.Status || fmt.Sprint(pr.Plan) != fmt.Sprint(one.Plan) || pr.Expanded != one.Expanded || pr.Generated != one.Generated || pr.Cost != one.Cost {
			t.Fatalf("%s: portfolio of one %+v, Solve %+v", task.ProblemName, pr.Result, one)
		}

		hu, err := heuristic.NewWithOptions("ff", task, heuristic.Options{UnitCost: true})
		if err != nil {
			t.Fatal(err)
		}
		typed := search.Options{Algorithm: search.Lazy, PreferredOperators: true, TypeBased: true, UnitCost: true, Heuristic: hu}
		pr, err = search.Portfolio(ctx, task, []search.Options{lazy, typed})
		if err != nil {
			t.Fatal(err)
		}
		if pr.Status != search.Solved || pr.Member < 0 || pr.Member > 1 || len(pr.Members) != 2 {
			t.Fatalf("%s: %v, member %d", task.ProblemName, pr.Status, pr.Member)
		}
		cost, err := replay(task, pr.Plan, false)
		if err != nil {
			t.Fatalf("%s: %v", task.ProblemName, err)
		}
		if cost != pr.Cost {
			t.Fatalf("%s: plan cost %d, reported %d (member %d)", task.ProblemName, cost, pr.Cost, pr.Member)
		}
		sum := 0
		for _, m := range pr.Members {
			sum += m.Expanded
		}
		if sum != pr.Expanded {
			t.Fatalf("%s: expanded %d, members' sum %d", task.ProblemName, pr.Expanded, sum)
		}
	}

	cyclic := heuristictest.Blocks([][]string{{"a"}, {"b"}, {"c"}}, [][]string{{"a", "b"}, {"b", "a"}})
	gripper := heuristictest.Gripper(6)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	lazy := search.Options{Algorithm: search.Lazy, PreferredOperators: true}
	typed := search.Options{Algorithm: search.Lazy, PreferredOperators: true, TypeBased: true}
	limit := func(o search.Options) search.Options { o.MaxExpansions = 2; return o }
	for _, c := range []struct {
		name       string
		ctx        context.Context
		members    []search.Options
		want       search.Status
		wantMember bool
	}{
		{"unsolvable", ctx, []search.Options{lazy, typed}, search.Unsolvable, true},
		{"canceled", canceled, []search.Options{lazy, typed}, search.Canceled, false},
		{"limits", ctx, []search.Options{limit(lazy), limit(typed)}, search.ExpansionLimit, false},
	} {
		task := gripper
		if c.name == "unsolvable" {
			task = cyclic
		}
		pr, err := search.Portfolio(c.ctx, task, c.members)
		if err != nil {
			t.Fatal(err)
		}
		if pr.Status != c.want || pr.Plan != nil || (pr.Member >= 0) != c.wantMember {
			t.Errorf("%s: status %v member %d, want %v", c.name, pr.Status, pr.Member, c.want)
		}
	}
	if _, err := search.Portfolio(ctx, gripper, nil); err == nil {
		t.Error("empty portfolio accepted")
	}
	if _, err := search.Portfolio(ctx, gripper, []search.Options{lazy, {Algorithm: "dfs"}}); err == nil {
		t.Error("a member with an unknown algorithm accepted")
	}
}
