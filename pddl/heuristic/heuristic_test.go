package heuristic_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/pddl/heuristic"
	"github.com/nesy-dev/nesy/pddl/heuristic/heuristictest"
)

// values are the expected heuristic values of a hand-made task's initial
// state; -1 means a dead end.
type values struct{ max, add, ff, lmcut, goalcount, hstar float64 }

// handTasks are tiny tasks whose heuristic values are derived by hand in the
// comments.
func handTasks() []struct {
	name string
	task *pddl.Task
	want values
} {
	type tc = struct {
		name string
		task *pddl.Task
		want values
	}
	var out []tc

	// p0 -> p1 -> p2 -> p3 -> p4: every relaxation is exact.
	{
		b := heuristictest.NewBuilder("d", "chain")
		var p []int
		for i := 0; i < 5; i++ {
			p = append(p, b.Fact("p", fmt.Sprint(i)))
		}
		for i := 0; i < 4; i++ {
			b.Action("step", []string{fmt.Sprint(i)}, []int{p[i]}, []int{p[i+1]}, []int{p[i]})
		}
		b.Init(p[0])
		b.Goal(pddl.Conj{Pos: []int{p[4]}})
		out = append(out, tc{"chain", b.Task(), values{4, 4, 4, 4, 1, 4}})
	}
	// r -> m (1); m -> g1 (1); m -> g2 (1); goal g1 & g2. h_add counts m
	// twice (4), FF once (3), h_max takes the longest chain (2), LM-cut
	// finds the landmarks {m}, {g1}, {g2} (3).
	{
		b := heuristictest.NewBuilder("d", "shared")
		r, m, g1, g2 := b.Fact("r"), b.Fact("m"), b.Fact("g1"), b.Fact("g2")
		b.Action("mk", nil, []int{r}, []int{m}, nil)
		b.Action("a1", nil, []int{m}, []int{g1}, nil)
		b.Action("a2", nil, []int{m}, []int{g2}, nil)
		b.Init(r)
		b.Goal(pddl.Conj{Pos: []int{g1, g2}})
		out = append(out, tc{"shared", b.Task(), values{2, 4, 3, 3, 2, 3}})
	}
	// Action costs: x (5) adds a, y (0) adds b from a; goal b. With costs
	// every value is 5; see the unit-cost test for the other mode.
	{
		b := heuristictest.NewBuilder("d", "costs")
		r, a, g := b.Fact("r"), b.Fact("a"), b.Fact("g")
		b.Action("x", nil, []int{r}, []int{a}, nil).Cost = 5
		b.Action("y", nil, []int{a}, []int{g}, nil).Cost = 0
		b.Costs()
		b.Init(r)
		b.Goal(pddl.Conj{Pos: []int{g}})
		out = append(out, tc{"costs", b.Task(), values{5, 5, 5, 5, 1, 5}})
	}
	// Disjunctive goal g1 | (g2 & g3): g1 needs a chain of 3, g2 and g3 one
	// step each. The second disjunct is cheaper in every heuristic except
	// h_max's view... which also prefers it (1 < 3). Goal count: 1 vs 2 -> 1.
	{
		b := heuristictest.NewBuilder("d", "dnf")
		r, c1, c2, g1, g2, g3 := b.Fact("r"), b.Fact("c1"), b.Fact("c2"), b.Fact("g1"), b.Fact("g2"), b.Fact("g3")
		b.Action("s1", nil, []int{r}, []int{c1}, nil)
		b.Action("s2", nil, []int{c1}, []int{c2}, nil)
		b.Action("s3", nil, []int{c2}, []int{g1}, nil)
		b.Action("t2", nil, []int{r}, []int{g2}, nil)
		b.Action("t3", nil, []int{r}, []int{g3}, nil)
		b.Init(r)
		b.Goal(pddl.Conj{Pos: []int{g1}})
		b.Goal(pddl.Conj{Pos: []int{g2, g3}})
		out = append(out, tc{"dnf", b.Task(), values{1, 2, 2, 2, 1, 2}})
	}
	// g has no achiever: a dead end for every relaxation heuristic; goal
	// count still counts 1.
	{
		b := heuristictest.NewBuilder("d", "dead")
		r, g := b.Fact("r"), b.Fact("g")
		b.Action("noop", nil, []int{r}, []int{r}, nil)
		b.Init(r)
		b.Goal(pddl.Conj{Pos: []int{g}})
		out = append(out, tc{"dead", b.Task(), values{-1, -1, -1, -1, 1, -1}})
	}
	// The goal already holds: 0 everywhere.
	{
		b := heuristictest.NewBuilder("d", "done")
		r, g := b.Fact("r"), b.Fact("g")
		b.Action("a", nil, []int{r}, []int{g}, nil)
		b.Init(r, g)
		b.Goal(pddl.Conj{Pos: []int{g}, Neg: []int{}})
		out = append(out, tc{"done", b.Task(), values{0, 0, 0, 0, 0, 0}})
	}
	// One action (cost 1) with two conditional effects whose conditions
	// hold: one application reaches g1 & g2. Compiled with an auxiliary
	// fact: h_add sums the two branches (2), the others count the action
	// once.
	{
		b := heuristictest.NewBuilder("d", "cond2")
		r, c1, c2, g1, g2 := b.Fact("r"), b.Fact("c1"), b.Fact("c2"), b.Fact("g1"), b.Fact("g2")
		a := b.Action("both", nil, []int{r}, nil, nil)
		a.Cond = []pddl.CondEffect{{Cond: pddl.Conj{Pos: []int{c1}}, Add: []int{g1}}, {Cond: pddl.Conj{Pos: []int{c2}}, Add: []int{g2}}}
		b.Init(r, c1, c2)
		b.Goal(pddl.Conj{Pos: []int{g1, g2}})
		out = append(out, tc{"cond2", b.Task(), values{1, 2, 1, 1, 2, 1}})
	}
	// One conditional effect whose condition c must first be made true by
	// another action: h* = 2 and the exact compilation gives 2 everywhere
	// (h_max: c costs 1, then the conditional operator 1 more).
	{
		b := heuristictest.NewBuilder("d", "cond1")
		r, c, g := b.Fact("r"), b.Fact("c"), b.Fact("g")
		a := b.Action("fire", nil, []int{r}, nil, nil)
		a.Cond = []pddl.CondEffect{{Cond: pddl.Conj{Pos: []int{c}, Neg: []int{g}}, Add: []int{g}}}
		b.Action("prep", nil, []int{r}, []int{c}, nil)
		b.Init(r)
		b.Goal(pddl.Conj{Pos: []int{g}})
		out = append(out, tc{"cond1", b.Task(), values{2, 2, 2, 2, 1, 2}})
	}
	// A door: "enter" (adds g) needs the door not locked; it is locked and
	// only "unlock" deletes locked. With complement facts every heuristic
	// sees both steps (h* = 2); TestIgnoreNegative pins the plain
	// relaxation's 1.
	{
		out = append(out, tc{"door", doorTask(), values{2, 2, 2, 2, 1, 2}})
	}
	// No goal disjunct at all: unreachable by definition.
	{
		b := heuristictest.NewBuilder("d", "nogoal")
		r := b.Fact("r")
		b.Init(r)
		out = append(out, tc{"nogoal", b.Task(), values{-1, -1, -1, -1, -1, -1}})
	}
	return out
}

func doorTask() *pddl.Task {
	b := heuristictest.NewBuilder("d", "door")
	r, locked, g := b.Fact("r"), b.Fact("locked"), b.Fact("g")
	b.Action("enter", nil, []int{r}, []int{g}, nil).Pre.Neg = []int{locked}
	b.Action("unlock", nil, []int{r}, nil, []int{locked})
	b.Init(r, locked)
	b.Goal(pddl.Conj{Pos: []int{g}})
	return b.Task()
}

// TestIgnoreNegative pins the plain delete relaxation (":noneg"): the door's
// negative precondition is dropped, so enter alone looks enough.
func TestIgnoreNegative(t *testing.T) {
	task := doorTask()
	for _, spec := range []string{"max", "add", "ff", "lmcut"} {
		h, err := heuristic.NewWithOptions(spec, task, heuristic.Options{IgnoreNegative: true})
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := h.Eval(task.Init); v != 1 || h.Name() != spec+":noneg" {
			t.Errorf("%s = %v, want 1", h.Name(), v)
		}
	}
}

func TestHandTasks(t *testing.T) {
	for _, tc := range handTasks() {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				spec string
				want float64
			}{
				{"max", tc.want.max}, {"add", tc.want.add}, {"ff", tc.want.ff},
				{"lmcut", tc.want.lmcut}, {"goalcount", tc.want.goalcount},
			} {
				h, err := heuristic.New(c.spec, tc.task)
				if err != nil {
					t.Fatalf("New(%q): %v", c.spec, err)
				}
				v, dead := h.Eval(tc.task.Init)
				if c.want < 0 {
					if !dead || !math.IsInf(v, 1) {
						t.Errorf("%s = %v (dead end %v), want a dead end", c.spec, v, dead)
					}
					continue
				}
				if dead || v != c.want {
					t.Errorf("%s = %v (dead end %v), want %v", c.spec, v, dead, c.want)
				}
			}
			// The hand-derived h* agrees with exhaustive search.
			ss, err := heuristictest.Explore(tc.task, false, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if got := float64(ss.Dist[0]); got != tc.want.hstar {
				t.Errorf("h* = %v, hand-derived %v", got, tc.want.hstar)
			}
		})
	}
}

// TestUnitCost pins the cost switch: with ":unit" (or Options.UnitCost) the
// cost-5-then-cost-0 chain is 2 actions.
func TestUnitCost(t *testing.T) {
	var task *pddl.Task
	for _, tc := range handTasks() {
		if tc.name == "costs" {
			task = tc.task
		}
	}
	for _, spec := range []string{"max", "add", "ff", "lmcut", "blind"} {
		for _, c := range []struct {
			name string
			h    func() (heuristic.Heuristic, error)
			want float64
			cost float64
		}{
			{"suffix", func() (heuristic.Heuristic, error) { return heuristic.New(spec+":unit", task) }, 2, 1},
			{"option", func() (heuristic.Heuristic, error) {
				return heuristic.NewWithOptions(spec, task, heuristic.Options{UnitCost: true})
			}, 2, 1},
			{"cost-overrides-option", func() (heuristic.Heuristic, error) {
				return heuristic.NewWithOptions(spec+":cost", task, heuristic.Options{UnitCost: true})
			}, 5, 0},
		} {
			h, err := c.h()
			if err != nil {
				t.Fatal(err)
			}
			want := c.want
			if spec == "blind" {
				want = c.cost // cheapest action: 1 in unit mode, 0 with costs
			}
			if v, _ := h.Eval(task.Init); v != want {
				t.Errorf("%s (%s, %s) = %v, want %v", spec, c.name, h.Name(), v, want)
			}
		}
	}
}

// propertyTasks are small tasks whose whole state space is enumerated.
func propertyTasks() []*pddl.Task {
	rng := rand.New(rand.NewPCG(1, 2))
	ts := []*pddl.Task{
		heuristictest.Blocks([][]string{{"a", "b", "c"}, {"d"}}, [][]string{{"d", "c", "b", "a"}}),
		heuristictest.Gripper(3),
		heuristictest.Lamps(4),
		heuristictest.Lamps(6),
		heuristictest.Rings(5),
	}
	for i := 0; i < 4; i++ {
		ts = append(ts, heuristictest.RandomBlocks(4+i%2, rng))
	}
	return ts
}

// TestAdmissibilityAndOrder checks, on every reachable state of small tasks,
// in both cost modes and with negative literals compiled or ignored: h_max <= LM-cut <= h*, h_max <= FF <= h_add, all
// are 0 on goal states, dead ends are real, and the relaxed plan reaches the
// goal in the relaxation and costs what FF says.
func TestAdmissibilityAndOrder(t *testing.T) {
	for _, task := range propertyTasks() {
		for _, mode := range []struct{ unit, noneg bool }{{false, false}, {true, false}, {false, true}} {
			unit := mode.unit
			name := fmt.Sprintf("%s/unit=%v/noneg=%v", task.ProblemName, unit, mode.noneg)
			t.Run(name, func(t *testing.T) {
				ss, err := heuristictest.Explore(task, unit, 50000)
				if err != nil {
					t.Fatal(err)
				}
				opts := heuristic.Options{UnitCost: unit, IgnoreNegative: mode.noneg}
				hs := map[string]heuristic.Heuristic{}
				for _, spec := range []string{"max", "add", "ff", "lmcut", "goalcount", "blind"} {
					h, err := heuristic.NewWithOptions(spec, task, opts)
					if err != nil {
						t.Fatal(err)
					}
					hs[spec] = h
				}
				ff := hs["ff"].(*heuristic.FF)
				checked := 0
				for i, s := range ss.States {
					hstar := ss.Dist[i]
					v := map[string]float64{}
					for spec, h := range hs {
						x, dead := h.Eval(s)
						if dead && hstar >= 0 {
							t.Fatalf("state %d: %s says dead end but h* = %d", i, spec, hstar)
						}
						if dead != math.IsInf(x, 1) {
							t.Fatalf("state %d: %s returned %v with deadEnd=%v", i, spec, x, dead)
						}
						v[spec] = x
					}
					if hstar < 0 {
						continue
					}
					checked++
					if hstar == 0 {
						for spec, x := range v {
							if x != 0 && spec != "blind" {
								t.Fatalf("goal state %d: %s = %v", i, spec, x)
							}
						}
					}
					if !(v["max"] <= v["lmcut"] && v["lmcut"] <= float64(hstar)) {
						t.Fatalf("state %d: h_max %v, LM-cut %v, h* %d: want h_max <= LM-cut <= h*\n%s",
							i, v["max"], v["lmcut"], hstar, task.FormatState(s, false))
					}
					if !(v["max"] <= v["ff"] && v["ff"] <= v["add"]) {
						t.Fatalf("state %d: h_max %v, FF %v, h_add %v: want h_max <= FF <= h_add", i, v["max"], v["ff"], v["add"])
					}
					if v["blind"] > float64(hstar) {
						t.Fatalf("state %d: blind %v > h* %d", i, v["blind"], hstar)
					}
					plan, cost, dead := ff.RelaxedPlan(s, nil)
					if dead || cost != v["ff"] {
						t.Fatalf("state %d: relaxed plan cost %v (dead %v), FF %v", i, cost, dead, v["ff"])
					}
					checkRelaxedPlan(t, task, s, plan, unit)
				}
				if checked == 0 {
					t.Fatal("no solvable state checked")
				}
			})
		}
	}
}

// checkRelaxedPlan applies plan in the delete relaxation from s (each action
// applicable ignoring negative literals, adding its adds and the adds of
// conditional effects whose positive condition holds) and requires a goal
// disjunct's positive facts to hold at the end. Since the compilation may fire
// a conditional effect after its action, the plan is replayed to a fixpoint.
func checkRelaxedPlan(t *testing.T, task *pddl.Task, s pddl.State, plan []int, unit bool) {
	t.Helper()
	cur := s.Clone()
	holds := func(ids []int) bool {
		for _, f := range ids {
			if !cur.Has(f) {
				return false
			}
		}
		return true
	}
	for _, a := range plan {
		if !holds(task.Actions[a].Pre.Pos) {
			t.Fatalf("relaxed plan action %s not relaxed-applicable in order", task.Actions[a].String())
		}
		for _, f := range task.Actions[a].Add {
			cur.Set(f)
		}
	}
	for changed := true; changed; {
		changed = false
		for _, a := range plan {
			for _, ce := range task.Actions[a].Cond {
				if holds(ce.Cond.Pos) {
					for _, f := range ce.Add {
						if !cur.Has(f) {
							cur.Set(f)
							changed = true
						}
					}
				}
			}
		}
	}
	for _, g := range task.Goal {
		if holds(g.Pos) {
			return
		}
	}
	t.Fatalf("relaxed plan %v does not reach the goal in the relaxation", plan)
}

// TestHelpful checks that helpful actions are applicable relaxed-plan actions.
func TestHelpful(t *testing.T) {
	task := heuristictest.Gripper(4)
	h, err := heuristic.New("ff", task)
	if err != nil {
		t.Fatal(err)
	}
	ff := h.(*heuristic.FF)
	for _, s := range heuristictest.RandomWalkStates(task, 50, 10, rand.New(rand.NewPCG(3, 4))) {
		plan, _, dead := ff.RelaxedPlan(s, nil)
		if dead {
			t.Fatal("gripper state is a dead end")
		}
		help := ff.Helpful(s, nil)
		inPlan := map[int]bool{}
		for _, a := range plan {
			inPlan[a] = true
		}
		for _, a := range help {
			if !inPlan[a] || !task.IsApplicable(s, a) {
				t.Fatalf("helpful action %s: in plan %v, applicable %v", task.Actions[a].String(), inPlan[a], task.IsApplicable(s, a))
			}
		}
		if !task.GoalReached(s) && len(help) == 0 {
			t.Fatalf("no helpful action in a non-goal state; relaxed plan %v", plan)
		}
	}
}

// TestPreferredConditional checks Fast Downward's preferred operators on
// hand-made tasks with conditional effects: an applicable action whose
// effect in the relaxed plan needs a condition that does not hold yet is
// helpful (FF) but not preferred (FD), with one conditional effect (merged
// into one relaxed operator) and with two (the applied(a) compilation).
func TestPreferredConditional(t *testing.T) {
	for _, c := range []struct {
		name     string
		cHolds   bool
		twoConds bool
		want     string // preferred actions
		helpful  string
	}{
		{"one effect, condition false", false, false, "setc", "flip setc"},
		{"one effect, condition true", true, false, "flip", "flip"},
		{"two effects, condition false", false, true, "setc", "flip setc"},
		{"two effects, condition true", true, true, "flip", "flip"},
	} {
		b := heuristictest.NewBuilder("d", "cond")
		r, cf, g, k, h := b.Fact("r"), b.Fact("c"), b.Fact("g"), b.Fact("k"), b.Fact("h")
		flip := b.Action("flip", nil, []int{r}, nil, nil)
		flip.Cond = []pddl.CondEffect{{Cond: pddl.Conj{Pos: []int{cf}}, Add: []int{g}}}
		if c.twoConds {
			flip.Cond = append(flip.Cond, pddl.CondEffect{Cond: pddl.Conj{Pos: []int{k}}, Add: []int{h}})
		}
		b.Action("setc", nil, []int{r}, []int{cf}, nil)
		if c.cHolds {
			b.Init(r, k, cf)
		} else {
			b.Init(r, k)
		}
		b.Goal(pddl.Conj{Pos: []int{g}})
		task := b.Task()
		hf, err := heuristic.New("ff", task)
		if err != nil {
			t.Fatal(err)
		}
		ff := hf.(*heuristic.FF)
		names := func(ids []int) string {
			var out []string
			for _, a := range ids {
				out = append(out, task.Actions[a].Name)
			}
			slices.Sort(out)
			return strings.Join(out, " ")
		}
		pref, cost, dead := ff.Preferred(task.Init, nil)
		wantCost := 2.0
		if c.cHolds {
			wantCost = 1
		}
		if dead || cost != wantCost || names(pref) != c.want {
			t.Errorf("%s: Preferred = [%s], cost %v, dead %v; want [%s], cost %v", c.name, names(pref), cost, dead, c.want, wantCost)
		}
		if got := names(ff.Helpful(task.Init, nil)); got != c.helpful {
			t.Errorf("%s: Helpful = [%s], want [%s]", c.name, got, c.helpful)
		}
	}
}

// TestPreferredSubsetOfHelpful checks on gripper states that FD's preferred
// operators are helpful actions with the relaxed plan's cost.
func TestPreferredSubsetOfHelpful(t *testing.T) {
	task := heuristictest.Gripper(4)
	h, err := heuristic.New("ff", task)
	if err != nil {
		t.Fatal(err)
	}
	ff := h.(*heuristic.FF)
	for _, s := range heuristictest.RandomWalkStates(task, 50, 10, rand.New(rand.NewPCG(5, 6))) {
		_, cost, _ := ff.RelaxedPlan(s, nil)
		pref, pcost, dead := ff.Preferred(s, nil)
		if dead || pcost != cost {
			t.Fatalf("Preferred cost %v dead %v, RelaxedPlan cost %v", pcost, dead, cost)
		}
		help := map[int]bool{}
		for _, a := range ff.Helpful(s, nil) {
			help[a] = true
		}
		for _, a := range pref {
			if !help[a] {
				t.Fatalf("preferred %s is not helpful", task.Actions[a].String())
			}
		}
		if !task.GoalReached(s) && len(pref) == 0 {
			t.Fatal("no preferred action in a non-goal state")
		}
	}
}

// TestConcurrentEval evaluates every heuristic from several goroutines at
// once (run with -race) and compares with sequential values.
func TestConcurrentEval(t *testing.T) {
	task := heuristictest.Lamps(6)
	states := heuristictest.RandomWalkStates(task, 200, 12, rand.New(rand.NewPCG(5, 6)))
	for _, spec := range []string{"ff", "add", "max", "lmcut", "goalcount", "blind", "mix"} {
		h, err := heuristic.New(spec, task)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float64, len(states))
		for i, s := range states {
			want[i], _ = h.Eval(s)
		}
		var wg sync.WaitGroup
		errs := make(chan string, 4)
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for k := range states {
					i := (k + g*37) % len(states)
					if v, _ := h.Eval(states[i]); v != want[i] {
						errs <- fmt.Sprintf("%s state %d: concurrent %v, sequential %v", spec, i, v, want[i])
						return
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
}

func TestNewSpecs(t *testing.T) {
	task := heuristictest.Lamps(3)
	s := task.Init
	eval := func(spec string) float64 {
		h, err := heuristic.New(spec, task)
		if err != nil {
			t.Fatalf("New(%q): %v", spec, err)
		}
		v, _ := h.Eval(s)
		return v
	}
	ff, lm, gc := eval("ff"), eval("lmcut"), eval("goalcount")
	for _, c := range []struct {
		spec, name string
		want       float64
	}{
		{"ff", "ff", ff},
		{" FF ", "ff", ff},
		{"hff", "ff", ff},
		{"lm-cut", "lmcut", lm},
		{"gc", "goalcount", gc},
		{"hmax", "max", eval("max")},
		{"hadd", "add", eval("add")},
		{"ff:unit", "ff:unit", eval("ff:unit")},
		{"ff:noneg:unit", "ff:unit:noneg", eval("ff:unit:noneg")},
		{"mix(ff:noneg)", "mix(1*ff:noneg)", eval("ff:noneg")},
		{"mix", "mix(0.5*ff+0.5*lmcut)", 0.5*ff + 0.5*lm},
		{"mix(1*ff+1*lmcut+0.5*goalcount)", "mix(1*ff+1*lmcut+0.5*goalcount)", ff + lm + 0.5*gc},
		{"mix(ff, 2*lmcut:unit)", "mix(1*ff+2*lmcut:unit)", ff + 2*eval("lmcut:unit")},
	} {
		h, err := heuristic.New(c.spec, task)
		if err != nil {
			t.Errorf("New(%q): %v", c.spec, err)
			continue
		}
		if h.Name() != c.name {
			t.Errorf("New(%q).Name() = %q, want %q", c.spec, h.Name(), c.name)
		}
		if v, _ := h.Eval(s); v != c.want {
			t.Errorf("New(%q) = %v, want %v", c.spec, v, c.want)
		}
		// The canonical name parses back to the same heuristic.
		h2, err := heuristic.New(h.Name(), task)
		if err != nil || h2.Name() != h.Name() {
			t.Errorf("New(%q) (canonical name of %q): %v, %v", h.Name(), c.spec, h2, err)
		}
	}
	for _, c := range []struct{ spec, errPart string }{
		{"", "unknown heuristic"},
		{"fastforward", "unknown heuristic \"fastforward\""},
		{"ff:fast", "unknown modifier"},
		{"goalcount:unit", "no modifier"},
		{"ff:unit:fast", "unknown modifier \"fast\""},
		{"mix()", "empty mix"},
		{"mix(ff", "parentheses"},
		{"mix(x*ff)", "bad weight"},
		{"mix(-1*ff)", "bad weight"},
		{"mix(ff+nope)", "unknown heuristic \"nope\""},
	} {
		_, err := heuristic.New(c.spec, task)
		if err == nil || !strings.Contains(err.Error(), c.errPart) {
			t.Errorf("New(%q) error = %v, want one containing %q", c.spec, err, c.errPart)
		}
	}
	if _, err := heuristic.New("ff", nil); err == nil {
		t.Error("New on a nil task: no error")
	}
}

// TestBadTask checks that out-of-range fact ids are reported, not panicked on.
func TestBadTask(t *testing.T) {
	b := heuristictest.NewBuilder("d", "bad")
	r := b.Fact("r")
	b.Action("oops", []string{"x"}, []int{r}, []int{7}, nil)
	b.Init(r)
	b.Goal(pddl.Conj{Pos: []int{r}})
	_, err := heuristic.New("ff", b.Task())
	if err == nil || !strings.Contains(err.Error(), "(oops x) add effect refers to fact 7") {
		t.Errorf("error = %v, want one naming the action and the fact", err)
	}
}
