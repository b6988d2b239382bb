package pddl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
)

// Fuzz targets: the parsers and grounding must never panic, whatever the
// input; errors must carry positions. Crashers found are kept under
// testdata/fuzz/<target>/ as regression seeds.

// seedFiles adds real dataset files as seeds when the datasets are present.
func seedFiles(f *testing.F, rel ...string) [][]byte {
	var out [][]byte
	dir, _, ok := testenv.SharedDir()
	if !ok {
		return nil
	}
	for _, r := range rel {
		b, err := os.ReadFile(filepath.Join(dir, "datasets", r))
		if err == nil {
			out = append(out, b)
		}
	}
	return out
}

func FuzzParseDomain(f *testing.F) {
	f.Add([]byte(bwDomain))
	f.Add([]byte(semDomain))
	f.Add([]byte("(define (domain d) (:types a - (either b c)) (:predicates (p ?x, ?y - a)))"))
	f.Add([]byte(graphDomain))
	f.Add([]byte(containerDomain))
	f.Add([]byte("(define (domain d) (:requirements :derived-predicates) (:predicates (p ?x) (q ?x) (r))\n (:derived (q ?x) (exists (?y) (r)))\n (:derived (r) (forall (?x) (imply (q ?x) (p ?x)))))"))
	for _, b := range seedFiles(f, "alfworld/alfred.pddl", "virtualhome/virtualhome.pddl", "ipc/elevators-opt08-strips/domain.pddl",
		"ipc-adl/psr-middle/domain.pddl", "ipc-adl/philosophers/domain.pddl", "ipc-adl/optical-telegraphs/domain.pddl") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		d, _, err := ParseDomain("f.pddl", src)
		if err == nil && d == nil {
			t.Fatal("nil domain without error")
		}
		checkErrorPositions(t, err)
	})
}

func FuzzParseProblem(f *testing.F) {
	f.Add([]byte(bwProblem))
	f.Add([]byte(semProblem))
	for _, b := range seedFiles(f, "planbench-blocksworld/instances/instance-10.pddl", "virtualhome/problems/Drink/156_1.pddl") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		p, _, err := ParseProblem("f.pddl", src)
		if err == nil && (p == nil || p.Goal == nil) {
			t.Fatal("problem without goal and without error")
		}
		checkErrorPositions(t, err)
	})
}

func FuzzParsePlan(f *testing.F) {
	f.Add([]byte("(pick-up a)\nstack a b ; c\n\n0: (x) [1]\n"))
	f.Add([]byte("(a (b)\n)"))
	f.Fuzz(func(t *testing.T, src []byte) {
		steps, err := ParsePlan("f.plan", src)
		checkErrorPositions(t, err)
		for _, s := range steps {
			if s.Name == "" || !s.Pos.IsValid() {
				t.Fatalf("bad step %+v", s)
			}
		}
	})
}

// FuzzGround parses, grounds and validates a plan, for a fuzzed domain,
// problem and plan.
func FuzzGround(f *testing.F) {
	f.Add([]byte(bwDomain), []byte(bwProblem), []byte("(pick-up a)\n(stack a b)"))
	f.Add([]byte(semDomain), []byte(semProblem), []byte("(toggle l1)\n(mark-all b1)\n(check-any)"))
	f.Add([]byte(graphDomain), []byte(graphProblem), []byte("(open-door r1 r2)\n(open-door r2 r3)\n(close-door r1 r2)"))
	f.Add([]byte(containerDomain), []byte(containerProblem(5)), []byte("(open i1)\n(grasp i0)\n(open i0)\n(open i2)\n(grasp i3)\n(open i4)\n(leave)"))
	f.Fuzz(func(t *testing.T, dsrc, psrc, plan []byte) {
		d, _, err := ParseDomain("d.pddl", dsrc)
		if err != nil {
			return
		}
		p, _, err := ParseProblem("p.pddl", psrc)
		if err != nil {
			return
		}
		task, err := Ground(d, p)
		if err != nil {
			if strings.Contains(err.Error(), "internal error") {
				t.Fatal(err)
			}
			return
		}
		app := task.Applicable(task.Init, nil)
		for _, a := range app {
			if !task.IsApplicable(task.Init, a) {
				t.Fatalf("action %d listed but not applicable", a)
			}
			task.Apply(task.Init, a)
		}
		steps, err := ParsePlan("f.plan", plan)
		if err != nil {
			return
		}
		r := task.Validate(steps)
		if !r.Valid && r.Error == "" {
			t.Fatal("invalid plan without an error")
		}
		task.ExplainGoal(task.Init)
	})
}

// checkErrorPositions asserts that every error of a list has a position.
func checkErrorPositions(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	el, ok := err.(ErrorList)
	if !ok || len(el) == 0 {
		t.Fatalf("error %v is not a non-empty ErrorList", err)
	}
	for _, e := range el {
		if !e.Pos.IsValid() {
			t.Fatalf("error without position: %v", e)
		}
	}
}

// FuzzGroundProblem grounds fuzzed problems (and validates fuzzed plans) on
// fixed domains, so that mutations mostly keep the domain valid and reach
// grounding, successor generation and validation.
func FuzzGroundProblem(f *testing.F) {
	domains := []string{bwDomain, semDomain, graphDomain}
	f.Add(uint8(0), []byte(bwProblem), []byte("(pick-up a)\n(stack a b)\n"))
	f.Add(uint8(1), []byte(semProblem), []byte("(toggle l1)\n(mark-all b1)\n(check-any)\n(pair t1 t1)\n"))
	f.Add(uint8(2), []byte(graphProblem), []byte("(open-door r1 r2)\n(open-door r2 r3)\n"))
	f.Add(uint8(1), []byte("(define (problem g) (:domain sem) (:objects t1 t2 - thing b - box) (:init (red t1) (in t1 b) (= (weight t1) 1) (= (weight t2) 2) (= (weight b) 3)) (:goal (forall (?x - thing) (or (marked ?x) (not (red ?x))))))"), []byte("(mark-all b)"))
	parsed := make([]*Domain, len(domains))
	for i, src := range domains {
		d, _, err := ParseDomain("d.pddl", []byte(src))
		if err != nil {
			f.Fatal(err)
		}
		parsed[i] = d
	}
	f.Fuzz(func(t *testing.T, which uint8, psrc, plan []byte) {
		d := parsed[int(which)%len(parsed)]
		p, _, err := ParseProblem("p.pddl", psrc)
		if err != nil {
			return
		}
		task, err := Ground(d, p)
		if err != nil {
			if strings.Contains(err.Error(), "internal error") {
				t.Fatal(err)
			}
			return
		}
		s := task.Init
		for i := 0; i < 4; i++ {
			app := task.Applicable(s, nil)
			var scan []int
			for a := range task.Actions {
				if task.IsApplicable(s, a) {
					scan = append(scan, a)
				}
			}
			if len(app) != len(scan) {
				t.Fatalf("Applicable %v, scan %v", app, scan)
			}
			if len(app) == 0 {
				break
			}
			s = task.Apply(s, app[int(which)%len(app)])
		}
		steps, err := ParsePlan("f.plan", plan)
		if err != nil {
			return
		}
		r := task.Validate(steps)
		if !r.Valid && (r.Error == "" || strings.Contains(r.Error, "internal error")) {
			t.Fatalf("bad validation error %q", r.Error)
		}
		task.ExplainGoal(s)
	})
}
