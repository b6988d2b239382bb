package pddl

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nesy-dev/nesy/internal/testenv"
)

// This test checks grounding, successor generation, Apply and the goal test
// against a direct interpretation of the lifted PDDL (the AST evaluated on
// states by brute force over parameter bindings), on random walks over real
// tasks of every dataset.

// liftedApplicable enumerates parameter bindings of every schema, pruning
// with top-level conjuncts as soon as their variables are bound, and returns
// "name a b" of every binding whose precondition holds in s.
func liftedApplicable(t *Task, s State) map[string]bool {
	ev := &evaluator{t: t, s: s}
	out := map[string]bool{}
	for _, a := range t.lifted.d.Actions {
		var conj []*Formula
		if a.Pre != nil {
			if a.Pre.Kind == FAnd {
				conj = a.Pre.Sub
			} else {
				conj = []*Formula{a.Pre}
			}
		}
		// checkAt[k]: conjuncts whose last free parameter is parameter k.
		checkAt := make([][]*Formula, len(a.Params)+1)
		for _, c := range conj {
			vars := map[string]bool{}
			freeVars(c, nil, vars)
			last := 0
			for i, p := range a.Params {
				if vars[p.Name] {
					last = i + 1
				}
			}
			checkAt[last] = append(checkAt[last], c)
		}
		env := map[string]string{}
		args := make([]string, len(a.Params))
		var rec func(k int)
		rec = func(k int) {
			for _, c := range checkAt[k] {
				if !ev.holds(c, env) {
					return
				}
			}
			if k == len(a.Params) {
				out[a.Name+" "+strings.Join(args, " ")] = true
				return
			}
			for _, o := range t.lifted.objectsOf(a.Params[k].Types, t.Objects) {
				env[a.Params[k].Name] = o
				args[k] = o
				rec(k + 1)
			}
			delete(env, a.Params[k].Name)
		}
		rec(0)
	}
	return out
}

// liftedApply applies schema a under env to s by interpreting its effect.
func liftedApply(t *Task, a *ActionSchema, env map[string]string, s State) []string {
	ev := &evaluator{t: t, s: s}
	adds, dels := map[string]bool{}, map[string]bool{}
	var walk func(e *Effect, env map[string]string)
	walk = func(e *Effect, env map[string]string) {
		if e == nil {
			return
		}
		switch e.Kind {
		case EAnd:
			for _, x := range e.Sub {
				walk(x, env)
			}
		case EAdd, EDel:
			f := Fact{Predicate: e.Pred}
			for _, x := range e.Args {
				f.Args = append(f.Args, ev.term(x, env))
			}
			if e.Kind == EAdd {
				adds[f.String()] = true
			} else {
				dels[f.String()] = true
			}
		case EForall:
			ev.forAll(e.Vars, env, func(env map[string]string) bool { walk(e.Sub[0], env); return true })
		case EWhen:
			if ev.holds(e.Cond, env) {
				walk(e.Sub[0], env)
			}
		}
	}
	walk(a.Effect, env)
	var out []string
	for _, f := range s.Facts() {
		k := t.Facts[f].String()
		if t.IsDerived(f) {
			continue // recomputed by the axioms, compared separately
		}
		if !dels[k] || adds[k] {
			out = append(out, k)
		}
	}
	for k := range adds {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func stateStrings(t *Task, s State) []string {
	var out []string
	for _, f := range s.Facts() {
		if !t.IsDerived(f) {
			out = append(out, t.Facts[f].String())
		}
	}
	sort.Strings(out)
	return out
}

// liftedDerived computes the derived facts of the domain's :derived rules
// in s from its other facts by brute force: stratum by stratum, every rule
// under every binding of its head's variables, evaluated on the lifted
// body, repeated until nothing changes. Facts of predicates compiled by
// grounding (new-axiom@N) are left out (the lifted formulas they replace
// are evaluated directly by liftedApplicable and the goal check).
func liftedDerived(tb testing.TB, t *Task, s State) []string {
	d := t.lifted.d
	if len(d.Derived) == 0 {
		return nil
	}
	sv := s.Clone()
	for f := range t.Facts {
		if t.IsDerived(f) {
			sv.Clear(f)
		}
	}
	ev := &evaluator{t: t, s: sv}
	top := 0
	for _, k := range d.Strata {
		top = max(top, k)
	}
	var out []string
	for k := 0; k <= top; k++ {
		for changed := true; changed; {
			changed = false
			for _, r := range d.Derived {
				if d.Strata[r.Pred] != k {
					continue
				}
				ev.forAll(r.Params, map[string]string{}, func(env map[string]string) bool {
					f := Fact{Predicate: r.Pred}
					for _, p := range r.Params {
						f.Args = append(f.Args, env[p.Name])
					}
					id := t.FactID(f)
					if id >= 0 && sv.Has(id) || !ev.holds(r.Body, env) {
						return true
					}
					if id < 0 {
						tb.Fatalf("derived %s holds but is not a fact of the task", f)
					}
					sv.Set(id)
					out = append(out, f.String())
					changed = true
					return true
				})
			}
		}
	}
	sort.Strings(out)
	return out
}

// groundDerived returns the facts of domain-derived predicates in s.
func groundDerived(t *Task, s State) []string {
	var out []string
	for _, f := range s.Facts() {
		if _, ok := t.lifted.d.Strata[t.Facts[f].Predicate]; ok && t.IsDerived(f) {
			out = append(out, t.Facts[f].String())
		}
	}
	sort.Strings(out)
	return out
}

func crossCheckWalk(t *testing.T, task *Task, name string, steps int, rng *rand.Rand) {
	t.Helper()
	s := task.Init
	for step := 0; step <= steps; step++ {
		if w, g := liftedDerived(t, task, s), groundDerived(task, s); !slices.Equal(w, g) {
			t.Fatalf("%s step %d: derived facts:\nground %v\nlifted %v", name, step, g, w)
		}
		app := task.Applicable(s, nil)
		got := map[string]bool{}
		for _, a := range app {
			got[task.Actions[a].Name+" "+strings.Join(task.Actions[a].Args, " ")] = true
		}
		// Applicable agrees with a scan of all ground preconditions.
		var scan []int
		for a := range task.Actions {
			if task.IsApplicable(s, a) {
				scan = append(scan, a)
			}
		}
		if !slices.Equal(app, scan) {
			t.Fatalf("%s step %d: Applicable %v, scan %v", name, step, app, scan)
		}
		want := liftedApplicable(task, s)
		for k := range want {
			if !got[k] {
				t.Fatalf("%s step %d: (%s) applicable in the lifted task but not grounded as applicable\nstate:\n%s", name, step, k, task.FormatState(s, false))
			}
		}
		for k := range got {
			if !want[k] {
				t.Fatalf("%s step %d: ground action (%s) applicable but its lifted precondition is false", name, step, k)
			}
		}
		ev := &evaluator{t: task, s: s}
		if g := ev.holds(task.lifted.p.Goal, map[string]string{}); g != task.GoalReached(s) {
			t.Fatalf("%s step %d: GoalReached %v, lifted goal %v", name, step, task.GoalReached(s), g)
		}
		if len(app) == 0 || step == steps {
			return
		}
		a := app[rng.IntN(len(app))]
		act := &task.Actions[a]
		schema := task.lifted.d.Action(act.Name)
		env := map[string]string{}
		for i, p := range schema.Params {
			env[p.Name] = act.Args[i]
		}
		next := task.Apply(s, a)
		if w, g := liftedApply(task, schema, env, s), stateStrings(task, next); !slices.Equal(w, g) {
			t.Fatalf("%s step %d: applying %s:\nground %v\nlifted %v", name, step, act, g, w)
		}
		s = next
	}
}

func TestGroundingAgreesWithLiftedSemantics(t *testing.T) {
	ds := testenv.Datasets(t)
	type tc struct{ domain, problem string }
	var cases []tc
	// add takes every stride-th problem matching pattern, at most n.
	add := func(domain string, pattern string, stride, n int) {
		ps, _ := filepath.Glob(filepath.Join(ds, pattern))
		sort.Strings(ps)
		ps = slices.DeleteFunc(ps, func(p string) bool { return filepath.Base(p) == "domain.pddl" })
		if len(ps) == 0 {
			if testenv.IsSlice() {
				return // the repository's slice has a few domains only
			}
			t.Fatalf("no problems match %s", pattern)
		}
		if testenv.IsSlice() {
			stride = 1
		}
		for i := 0; i < len(ps) && i/stride < n; i += stride {
			cases = append(cases, tc{domain, ps[i]})
		}
	}
	add(filepath.Join(ds, "planbench-blocksworld/domain.pddl"), "planbench-blocksworld/instances/*.pddl", 50, 10)
	add("", "alfworld/valid_unseen/*/*/game.tw-pddl", 17, 8)
	add(filepath.Join(ds, "virtualhome/virtualhome.pddl"), "virtualhome/problems/*/*.pddl", 6, 60)
	for _, d := range []string{"blocks", "gripper", "logistics00", "depot", "miconic", "rovers", "satellite", "elevators-opt08-strips", "sokoban-opt08-strips", "visitall-opt11-strips"} {
		add(filepath.Join(ds, "ipc", d, "domain.pddl"), "ipc/"+d+"/*.pddl", 7, 2)
	}
	// ipc-adl: derived predicates (optical-telegraphs, philosophers,
	// psr-middle) and quantified conditions compiled into axioms.
	for _, d := range []string{"optical-telegraphs", "philosophers", "psr-middle", "miconic-fulladl", "assembly", "schedule", "trucks", "openstacks-sat08-adl"} {
		add(filepath.Join(ds, "ipc-adl", d, "domain.pddl"), "ipc-adl/"+d+"/[fpP]*.pddl", 50, 1)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 0
	for _, c := range cases {
		task, _, err := LoadFiles(c.domain, c.problem)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(ds, c.problem)
		st := time.Now()
		steps := 25
		if strings.HasPrefix(rel, "alfworld") {
			steps = 10 // the brute-force enumeration is slow on ALFWorld's 300 objects
		}
		crossCheckWalk(t, task, rel, steps, rng)
		if el := time.Since(st); el > 500*time.Millisecond {
			t.Logf("%s: %v", rel, el)
		}
		n++
	}
	t.Logf("%d tasks checked", n)
}

// TestCompiledQuantifierAgreesWithLiftedSemantics walks the containers
// domain over 13 items, whose leave precondition (2^13 disjuncts) makes
// grounding compile the quantified preconditions into derived predicates,
// against the lifted formulas.
func TestCompiledQuantifierAgreesWithLiftedSemantics(t *testing.T) {
	task := groundContainers(t, 13)
	if len(task.Axioms) == 0 {
		t.Fatal("the precondition was not compiled into axioms")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 5; i++ {
		crossCheckWalk(t, task, "containers", 30, rng)
	}
}

// TestCompiledShapesAgreeWithLiftedSemantics grounds ipc-adl problems with
// quantified conditions in each shape a planner may ask for (nesy solve's
// compile bound, Fast Downward's shape with every forall compiled, that
// shape with the rest in DNF) and walks each against the lifted formulas:
// compiling changes the representation, never which actions apply.
func TestCompiledShapesAgreeWithLiftedSemantics(t *testing.T) {
	ds := testenv.Datasets(t)
	shapes := []struct {
		name string
		lim  GroundLimits
	}{
		{"bound2", GroundLimits{CompileBound: TranslateCompileBound}},
		{"foralls", GroundLimits{CompileForalls: true}},
		{"foralls+bound2", GroundLimits{CompileForalls: true, CompileBound: TranslateCompileBound, RelevantAxioms: true}},
	}
	problems := []string{"miconic-fulladl/f3-3.pddl", "assembly/prob01.pddl", "schedule/probschedule-2-0.pddl", "airport-adl/p01-airport1-p1.pddl", "trucks/p01.pddl"}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, rel := range problems {
		prob := filepath.Join(ds, "ipc-adl", rel)
		dom := filepath.Join(filepath.Dir(prob), "domain.pddl")
		for _, sh := range shapes {
			t.Run(rel+"/"+sh.name, func(t *testing.T) {
				task, _, err := LoadFilesLimits(dom, prob, sh.lim)
				if err != nil {
					if testenv.IsSlice() {
						t.Skip(err)
					}
					t.Fatal(err)
				}
				// stop's preconditions quantify over passengers.
				if sh.lim.CompileForalls && strings.HasPrefix(rel, "miconic") && len(task.Axioms) == 0 {
					t.Fatal("no forall was compiled into axioms")
				}
				crossCheckWalk(t, task, rel, 25, rng)
			})
		}
	}
}
