// Package archtest holds the tests of the import graph: the data flow of
// DESIGN.md ("(server | bench | cmd) -> planner -> (decoder | mcts) ->
// constraint -> (models, trie, pddl)") checked with `go list -deps`.
package archtest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/nesy-dev/nesy/"

// deps returns the module's packages that pkg imports, directly or not
// (test files excluded), without the module prefix.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", module+pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var ds []string
	for _, l := range strings.Fields(string(out)) {
		if d, ok := strings.CutPrefix(l, module); ok && d != pkg {
			ds = append(ds, d)
		}
	}
	return ds
}

// TestImportGraph: each package imports none of the packages listed
// beside it.
func TestImportGraph(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", module+"...").Output()
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, l := range strings.Fields(string(out)) {
		all = append(all, strings.TrimPrefix(l, module))
	}
	tests := []struct {
		pkg       string
		forbidden []string
	}{
		// The two users of the constraint are peers.
		{"decoder", []string{"mcts", "planner"}},
		{"mcts", []string{"decoder", "planner"}},
		{"constraint", []string{"decoder", "mcts", "planner"}},
		// The symbolic side knows nothing of models, the engine nothing of
		// PDDL.
		{"pddl", []string{"models", "trie", "lexicon"}},
		{"trie", []string{"models", "pddl"}},
		{"models", []string{"pddl", "trie", "lexicon", "constraint"}},
		{"planner", []string{"server", "bench", "envs", "explore"}},
	}
	for _, tt := range tests {
		ds := deps(t, tt.pkg)
		for _, f := range tt.forbidden {
			if slices.Contains(ds, f) {
				t.Errorf("%s imports %s", tt.pkg, f)
			}
		}
	}
	// The test-model writer is for the commands that generate models
	// (mkmodel, --model tiny, the load test, nesy train's package train)
	// and for tests; no other library package depends on it.
	for _, p := range all {
		if strings.HasPrefix(p, "cmd/") || strings.HasPrefix(p, "internal/") || p == "models/gguf" || p == "train" {
			continue
		}
		if slices.Contains(deps(t, p), "models/gguf") {
			t.Errorf("library package %s imports models/gguf", p)
		}
	}
	// gorgonia (training) stays in package train and the command that
	// runs it: the server, the planner and the engine never load it.
	for _, p := range all {
		if strings.HasPrefix(p, "cmd/") || p == "train" {
			continue
		}
		out, err := exec.Command("go", "list", "-deps", module+p).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", p, err)
		}
		if slices.ContainsFunc(strings.Fields(string(out)), func(d string) bool { return strings.HasPrefix(d, "gorgonia.org/") }) {
			t.Errorf("package %s imports gorgonia", p)
		}
	}
}
