package constraint

import (
	"sync"
	"testing"

	"github.com/nesy-dev/nesy/internal/testkit"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/trie"
)

// testTask is a real task with its lexicon and reference plan.
type testTask = testkit.Task

// datasetTasks loads up to n tasks of each dataset (see testkit).
func datasetTasks(t testing.TB, n int) []testTask { return testkit.DatasetTasks(t, n) }

// fullRun reports whether NESY_FULL=1 asks for the long tests.
func fullRun() bool { return testkit.FullRun() }

// realIndexes caches the vocabulary indexes of the shared tokenizers (they
// take a fraction of a second each to build) across the tests of one run.
var realIndexes sync.Map // family -> *trie.Index

// realIndex returns the (cached) vocabulary index of a shared tokenizer.
func realIndex(t testing.TB, family string) *trie.Index {
	t.Helper()
	if x, ok := realIndexes.Load(family); ok {
		return x.(*trie.Index)
	}
	x := testkit.RealIndex(t, family)
	realIndexes.Store(family, x)
	return x
}

// validatePlanText checks printed plan lines as `nesy validate` does.
func validatePlanText(t testing.TB, task *pddl.Task, lines []string) pddl.ValidationResult {
	return testkit.ValidatePlanText(t, task, lines)
}
