package server

import (
	"github.com/nesy-dev/nesy/internal/sysmem"
	"github.com/nesy-dev/nesy/mcts"
)

// The per-request memory budget (Options.RequestMemory) is spent on the
// task and on the search. These are the costs it is counted in; the tests
// (memory_test.go, mcts's TestNodeBytes) measure that each bounds the live
// heap it stands for.
const (
	// ActionBytes bounds the memory of one ground action of a request:
	// the action, its share of the heuristic's tables, its lexicon text
	// and its share of the token trie the constraint builds over the
	// action texts.
	ActionBytes = 4096
	// bindingBytes is what pddl's grounding holds per join binding until
	// the task is built (pddl.GroundLimits.MaxBindings).
	bindingBytes = 250
)

// DefaultRequestMemory is the default per-request memory budget: half the
// machine's physical memory shared by maxConcurrent running requests (1 GiB
// of 8 GiB assumed where the memory cannot be read).
func DefaultRequestMemory(maxConcurrent int) int64 {
	return sysmem.Half() / int64(max(maxConcurrent, 1))
}

// memActions is the most ground actions a request's budget holds.
func memActions(budget int64) int {
	return int(min(budget/ActionBytes, 1<<40))
}

// searchNodes is the most search-tree nodes the budget leaves after a task
// of nActions ground actions (at least 1,000, so that a task that fits
// can always be searched a little).
func searchNodes(budget int64, nActions int) int {
	left := budget - int64(nActions)*ActionBytes
	return int(max(left/mcts.NodeBytes, 1000))
}
