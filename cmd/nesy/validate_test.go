package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
)

// runValidate runs "nesy validate" with args and returns stdout, stderr and
// the exit code.
func runValidate(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(append([]string{"validate"}, args...))
	err := cmd.Execute()
	code := 0
	if err != nil {
		var e exitError
		if !errors.As(err, &e) {
			t.Fatalf("error %v is not an exit status", err)
		}
		code = e.code
	}
	return out.String(), errb.String(), code
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// bare writes steps as "NAME ARGS" lines, upper-cased, without parentheses.
func bare(steps []string) string {
	var b strings.Builder
	for _, s := range steps {
		b.WriteString(strings.ToUpper(strings.Trim(s, "()")) + "\n")
	}
	return b.String()
}

func TestValidateCLI(t *testing.T) {
	ds := testenv.Datasets(t)
	dir := t.TempDir()
	domain := filepath.Join(ds, "planbench-blocksworld/domain.pddl")
	problem := filepath.Join(ds, "planbench-blocksworld/instances/instance-10.pddl")
	var plans map[string][]string
	raw, err := os.ReadFile(filepath.Join(ds, "planbench-blocksworld/ground_truth_plans.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &plans); err != nil {
		t.Fatal(err)
	}
	gold := plans["instance-10"]
	game, _ := filepath.Glob(filepath.Join(ds, "alfworld/valid_unseen/*/*/game.tw-pddl"))
	if len(game) == 0 {
		t.Fatal("no ALFWorld games")
	}
	badDomain := writeFile(t, dir, "bad.pddl", "(define (domain d)\n  (:predicates (p ?x))\n  (:action a :parameters (?x) :precondition (q ?x) :effect (p ?x)))\n")
	tests := []struct {
		name     string
		args     []string
		plan     string
		code     int
		want     validateJSON
		errorHas string
	}{
		{name: "gold plan", args: []string{"--domain", domain, "--problem", problem}, plan: strings.Join(gold, "\n"), code: 0,
			want: validateJSON{Valid: true, GoalReached: true, Steps: len(gold)}},
		{name: "bare syntax", args: []string{"--domain", domain, "--problem", problem}, plan: bare(gold), code: 0,
			want: validateJSON{Valid: true, GoalReached: true, Steps: len(gold)}},
		{name: "unbalanced", args: []string{"--domain", domain, "--problem", problem}, plan: "(pick-up a\n", code: 2,
			errorHas: ":1:1: '(' is not closed"},
		{name: "step dropped", args: []string{"--domain", domain, "--problem", problem}, plan: strings.Join(gold[1:], "\n"), code: 1,
			want: validateJSON{Steps: len(gold) - 1}, errorHas: "step 1 " + gold[1] + ": precondition"},
		{name: "goal missed", args: []string{"--domain", domain, "--problem", problem}, plan: strings.Join(gold[:2], "\n"), code: 1,
			want: validateJSON{Valid: true, Steps: 2}},
		{name: "unknown action", args: []string{"--domain", domain, "--problem", problem}, plan: "(teleport a)", code: 1,
			want: validateJSON{Steps: 1}, errorHas: `unknown action "teleport"`},
		{name: "malformed domain", args: []string{"--domain", badDomain, "--problem", problem}, plan: "", code: 2,
			errorHas: "bad.pddl:3:45: unknown predicate q"},
		{name: "tw-pddl without domain", args: []string{"--problem", game[0]}, plan: "; nothing yet\n", code: 1,
			want: validateJSON{Valid: true, Steps: 0}},
		{name: "missing plan file", args: []string{"--domain", domain, "--problem", problem, "--plan", filepath.Join(dir, "nope")}, code: 2,
			errorHas: "reading plan"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if !strings.Contains(strings.Join(args, " "), "--plan") {
				args = append(args, "--plan", writeFile(t, dir, "plan"+string(rune('a'+i)), tc.plan))
			}
			out, stderr, code := runValidate(t, append(args, "--json")...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %s stderr %s", code, tc.code, out, stderr)
			}
			var got validateJSON
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("stdout %q is not JSON: %v", out, err)
			}
			if !strings.Contains(got.Error, tc.errorHas) || (tc.errorHas == "") != (got.Error == "") {
				t.Fatalf("error %q, want it to contain %q", got.Error, tc.errorHas)
			}
			got.Error = ""
			if tc.code != 2 && got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			// Without --json the exit status is the same.
			if _, _, code2 := runValidate(t, args...); code2 != code {
				t.Fatalf("exit %d without --json, %d with", code2, code)
			}
		})
	}
}
