package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/pddl"
)

// runNesy runs the root command with args and returns stdout, stderr and the
// exit status main would use.
func runNesy(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := newRootCmd()
	var out, errw bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errw)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	code := 0
	var ee exitError
	switch {
	case errors.As(err, &ee):
		code = ee.code
	case err != nil:
		code = 1
		errw.WriteString(err.Error())
	}
	return out.String(), errw.String(), code
}

const tinyDomain = `(define (domain bw) (:requirements :strips)
 (:predicates (on ?x ?y) (ontable ?x) (clear ?x) (handempty) (holding ?x))
 (:action pick-up :parameters (?x) :precondition (and (clear ?x) (ontable ?x) (handempty))
  :effect (and (not (ontable ?x)) (not (clear ?x)) (not (handempty)) (holding ?x)))
 (:action stack :parameters (?x ?y) :precondition (and (holding ?x) (clear ?y))
  :effect (and (not (holding ?x)) (not (clear ?y)) (clear ?x) (handempty) (on ?x ?y))))`

func writeTask(t *testing.T, goal string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	d, p := filepath.Join(dir, "domain.pddl"), filepath.Join(dir, "problem.pddl")
	prob := `(define (problem p) (:domain bw) (:objects a b c)
 (:init (ontable a) (ontable b) (ontable c) (clear a) (clear b) (clear c) (handempty))
 (:goal ` + goal + `))`
	if err := os.WriteFile(d, []byte(tinyDomain), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(prob), 0o644); err != nil {
		t.Fatal(err)
	}
	return d, p
}

// validates checks a printed plan with the pddl package's own parser and
// validator.
func validates(t *testing.T, domain, problem string, planText string) int {
	t.Helper()
	task, _, err := pddl.LoadFiles(domain, problem)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := pddl.ParsePlan("stdout", []byte(planText))
	if err != nil {
		t.Fatalf("printed plan does not parse: %v\n%s", err, planText)
	}
	if v := task.Validate(steps); !v.Valid || !v.GoalReached {
		t.Fatalf("printed plan does not validate: %s%s\n%s", v.Error, v.GoalError, planText)
	}
	return len(steps)
}

func TestSolveCLI(t *testing.T) {
	d, p := writeTask(t, "(and (on a b) (on b c))")
	for _, c := range []struct {
		search, heuristic string
		extra             []string
	}{
		{"gbfs", "ff", nil}, {"gbfs", "add", nil}, {"gbfs", "goalcount", nil}, {"astar", "lmcut", nil}, {"astar", "max", nil},
		{"gbfs", "ff:noneg", []string{"--preferred"}}, {"gbfs", "mix", []string{"--unit-cost", "--timeout", "1m"}},
		{"astar", "ff", []string{"--weight", "2"}},
		{"lazy", "ff", []string{"--preferred", "--type-based", "--seed", "3"}}, {"gbfs", "ff", []string{"--type-based"}},
		{"portfolio", "ff", nil}, {"portfolio", "add", []string{"--seed", "7", "--timeout", "1m"}},
	} {
		args := append([]string{"solve", "--domain", d, "--problem", p, "--search", c.search, "--heuristic", c.heuristic}, c.extra...)
		out, errw, code := runNesy(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c, code, errw)
		}
		n := validates(t, d, p, out)
		if c.search == "astar" && c.extra == nil && n != 4 { // pick-up b, stack b c, pick-up a, stack a b
			t.Errorf("%v: %d steps, want the optimal 4", c, n)
		}
		jout, _, code := runNesy(t, append(args, "--json")...)
		var res struct {
			Solved   bool     `json:"solved"`
			Plan     []string `json:"plan"`
			Expanded *int     `json:"expanded"`
			Seconds  *float64 `json:"seconds"`
			Search   *float64 `json:"search_seconds"`
			InitialH *float64 `json:"initial_h"`
			Member   string   `json:"portfolio_member"`
		}
		if err := json.Unmarshal([]byte(jout), &res); err != nil || code != 0 {
			t.Fatalf("%v --json: exit %d, %v: %q", c, code, err, jout)
		}
		if !res.Solved || res.Expanded == nil || res.Seconds == nil || res.Search == nil || *res.Search > *res.Seconds || len(res.Plan) != n {
			t.Errorf("%v --json: %s", c, jout)
		}
		validates(t, d, p, strings.Join(res.Plan, "\n"))
		if (c.search == "portfolio") != (res.Member == "lazy" || res.Member == "lazy-type-unit") {
			t.Errorf("%v --json: portfolio_member %q", c, res.Member)
		}
		// Both goal atoms are false in the initial state (all blocks on
		// the table): goal count 2; the others estimate at least 2 steps.
		if h := res.InitialH; h == nil || (c.heuristic == "goalcount" && *h != 2) || *h < 2 {
			t.Errorf("%v --json: initial_h %v, want 2 for goalcount and at least 2 for the others", c, h)
		}
	}
}

func TestSolveCLIFailures(t *testing.T) {
	d, p := writeTask(t, "(and (on a b) (on b a))")
	for _, c := range []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"unsolvable", []string{"--domain", d, "--problem", p, "--json"}, 1, `"status":"unsolvable"`},
		{"unsolvable portfolio", []string{"--domain", d, "--problem", p, "--json", "--search", "portfolio"}, 1, `"status":"unsolvable"`},
		{"portfolio limit", []string{"--domain", d, "--problem", p, "--json", "--search", "portfolio", "--max-expansions", "1"}, 1, `"status":"expansion limit"`},
		{"expansion limit", []string{"--domain", d, "--problem", p, "--json", "--max-expansions", "1"}, 1, `"status":"expansion limit"`},
		{"bad heuristic", []string{"--domain", d, "--problem", p, "--heuristic", "nope"}, 2, `unknown heuristic "nope"`},
		{"bad search", []string{"--domain", d, "--problem", p, "--search", "dfs"}, 2, `--search "dfs"`},
		{"missing problem", []string{"--domain", d}, 2, "--problem is required"},
		{"missing file", []string{"--domain", d, "--problem", p + ".none"}, 2, "problem"},
	} {
		out, errw, code := runNesy(t, append([]string{"solve"}, c.args...)...)
		if code != c.code || !strings.Contains(out+errw, c.contains) {
			t.Errorf("%s: exit %d (want %d), output %q %q (want %q)", c.name, code, c.code, out, errw, c.contains)
		}
		if c.code == 1 && strings.Contains(out, `"solved":true`) {
			t.Errorf("%s: reported solved", c.name)
		}
	}
}

// TestSolveCLIALFWorld solves one ALFWorld game through the CLI, with the
// domain embedded in the game file.
func TestSolveCLIALFWorld(t *testing.T) {
	games, _ := filepath.Glob(filepath.Join(testenv.Datasets(t), "alfworld", "valid_unseen", "pick_heat*", "*", "game.tw-pddl"))
	if len(games) == 0 {
		t.Fatal("no ALFWorld pick_heat game found")
	}
	out, errw, code := runNesy(t, "solve", "--problem", games[0])
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errw)
	}
	validates(t, "", games[0], out)
}

// On a domain with quantified preconditions (miconic-fulladl), solve
// compiles them into derived predicates by default; lmcut, which cannot
// handle axioms, keeps the DNF copies unless --compile-bound (or
// --compile-foralls) is given, and then says why it refuses.
func TestSolveCLICompileBound(t *testing.T) {
	dir := filepath.Join(testenv.Datasets(t), "ipc-adl", "miconic-fulladl")
	d, p := filepath.Join(dir, "domain.pddl"), filepath.Join(dir, "f2-1.pddl")
	for _, c := range []struct {
		args     []string
		code     int
		contains string
	}{
		{[]string{"--search", "lazy", "--preferred"}, 0, ""},
		{[]string{"--compile-bound", "0"}, 0, ""},
		{[]string{"--search", "astar", "--heuristic", "lmcut"}, 0, ""},
		{[]string{"--search", "astar", "--heuristic", "lmcut", "--compile-bound", "1"}, 2, "lmcut does not support axioms"},
		// Fast Downward's shape: the foralls compiled, the rest in DNF.
		{[]string{"--search", "lazy", "--preferred", "--compile-foralls", "--compile-bound", "0", "--heuristic", "ff:negax"}, 0, ""},
		{[]string{"--search", "astar", "--heuristic", "lmcut", "--compile-foralls"}, 2, "lmcut does not support axioms"},
	} {
		out, errw, code := runNesy(t, append([]string{"solve", "--domain", d, "--problem", p}, c.args...)...)
		if code != c.code || !strings.Contains(out+errw, c.contains) {
			t.Fatalf("%v: exit %d (want %d), output %q %q (want %q)", c.args, code, c.code, out, errw, c.contains)
		}
		if code == 0 {
			validates(t, d, p, out)
		}
	}
}
