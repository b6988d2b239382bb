package decoder

import (
	"testing"

	"github.com/nesy-dev/nesy/internal/testkit"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/trie"
)

// Test helpers over internal/testkit: real tasks with their lexicons and
// reference plans, the shared tokenizers' indexes, printed-plan checks.
type testTask = testkit.Task

var realIndexes testkit.IndexCache

func datasetTasks(t testing.TB, n int) []testTask { return testkit.DatasetTasks(t, n) }
func fullRun() bool                               { return testkit.FullRun() }
func realIndex(t testing.TB, family string) *trie.Index {
	return realIndexes.Get(t, family)
}
func validatePlanText(t testing.TB, task *pddl.Task, lines []string) pddl.ValidationResult {
	return testkit.ValidatePlanText(t, task, lines)
}
