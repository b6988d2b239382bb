package pddl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nesy-dev/nesy/internal/testenv"
)

// adlProblems returns the problems of an ipc-adl domain folder with their
// domain files (flashfill has one domain per problem, domain-pNN.pddl),
// smallest first: all of them with NESY_PDDL_FULL=1, else the first n.
func adlProblems(t *testing.T, dir string, n int) (problems, domains []string) {
	t.Helper()
	all := ipcProblems(t, dir, 1<<30)
	all = slices.DeleteFunc(all, func(p string) bool {
		b := filepath.Base(p)
		return strings.HasPrefix(b, "domain") || strings.HasPrefix(b, "orig-domain")
	})
	if !fullSweep() && len(all) > n {
		all = all[:n]
	}
	for _, p := range all {
		d := filepath.Join(dir, "domain.pddl")
		if alt := filepath.Join(dir, "domain-"+filepath.Base(p)); fileExists(alt) {
			d = alt
		}
		problems = append(problems, p)
		domains = append(domains, d)
	}
	return problems, domains
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestIPCADLParseAndGround parses and grounds the smallest problems of every
// ipc-adl domain (all of them with NESY_PDDL_FULL=1): derived predicates,
// quantified preconditions and conditional effects included.
func TestIPCADLParseAndGround(t *testing.T) {
	ds := testenv.Datasets(t)
	dirs, _ := filepath.Glob(filepath.Join(ds, "ipc-adl/*"))
	if !testenv.IsSlice() && len(dirs) != 18 {
		t.Fatalf("found %d ipc-adl domains, want 18", len(dirs))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ps, doms := adlProblems(t, dir, 2)
			for i, p := range ps {
				start := time.Now()
				d, pr, _, err := LoadLifted(doms[i], p)
				if err != nil {
					t.Errorf("%v", err)
					continue
				}
				// The full sweep bounds each task at 300,000 ground actions
				// (caldera's largest have 1.1M and take minutes): over it,
				// a LimitError is the expected answer, logged.
				lim := GroundLimits{}
				if fullSweep() {
					lim.MaxActions = 300_000
				}
				task, _, err := GroundContext(context.Background(), d, pr, lim)
				if le := (*LimitError)(nil); errors.As(err, &le) {
					t.Logf("%s: %v (%v)", filepath.Base(p), err, time.Since(start).Round(time.Millisecond))
					continue
				}
				if err != nil {
					t.Errorf("%v", err)
					continue
				}
				if len(task.Goal) == 0 {
					t.Errorf("%s: goal unreachable even ignoring deletes", p)
				}
				t.Logf("%s: %d actions, %d axioms, %d facts, %v", filepath.Base(p), len(task.Actions), len(task.Axioms), len(task.Facts), time.Since(start).Round(time.Millisecond))
			}
		})
	}
}

// TestIPCADLParseAll parses every domain and problem file of ipc-adl (the
// grounding of all of them is TestIPCADLParseAndGround with
// NESY_PDDL_FULL=1). miconic-fulladl/orig-domain.pddl, the original
// domain kept beside the fixed domain.pddl that its problems use, quantifies
// over undeclared types (conflict_A, ...): it must be a positioned error.
func TestIPCADLParseAll(t *testing.T) {
	ds := testenv.Datasets(t)
	files, _ := filepath.Glob(filepath.Join(ds, "ipc-adl/*/*.pddl"))
	if !testenv.IsSlice() && len(files) < 700 {
		t.Fatalf("found %d ipc-adl files, want over 700", len(files))
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b := filepath.Base(f)
		if strings.HasPrefix(b, "domain") || strings.HasPrefix(b, "orig-domain") {
			_, _, err = ParseDomain(f, src)
		} else {
			_, _, err = ParseProblem(f, src)
		}
		if strings.HasSuffix(f, "miconic-fulladl/orig-domain.pddl") {
			if err == nil || !strings.Contains(err.Error(), "orig-domain.pddl:51:10: unknown type conflict_a") {
				t.Errorf("miconic orig-domain.pddl: error %v, want unknown type conflict_a at 51:10", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v", err)
		}
	}
}
