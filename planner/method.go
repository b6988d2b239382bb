package planner

import (
	"fmt"
	"strings"
	"time"

	"github.com/nesy-dev/nesy/mcts"
)

// Method is a way of generating a plan with a language model.
type Method string

// The methods. Direct (one free command per turn, with an environment's
// feedback) is named here so that every entry point spells it alike, but it
// needs an environment to talk to: Run refuses it and package bench runs it.
const (
	// Greedy: the model writes freely (greedy, or sampled); the output is
	// read line by line and the first invalid step is reported.
	Greedy Method = "greedy"
	// CGreedy: constrained decoding; every token continues an action
	// applicable in the current state, so the plan is executable by
	// construction.
	CGreedy Method = "cgreedy"
	// MCTS: token-level tree search over the model's whole vocabulary.
	MCTS Method = "mcts"
	// CMCTS: token-level tree search over executable prefixes (the method
	// of the paper, and the default).
	CMCTS Method = "cmcts"
	// Thinking: a thinking model thinks first, then writes freely.
	Thinking Method = "thinking"
	// Direct: an agent policy, one command per turn (bench only).
	Direct Method = "direct"
)

// DefaultMethod is the method of a request that names none.
const DefaultMethod = CMCTS

// The paper's search settings, in one place: every entry point (CLI,
// server, bench) runs the same cmcts unless told otherwise.
const (
	DefaultWidth      = 16  // children per node
	DefaultC          = 2.5 // PUCB exploration constant
	DefaultBase       = 10  // PUCB base constant: c(N) = log((1+N+base)/base) + c
	DefaultBatch      = 16  // leaves per model call
	DefaultHeuristic  = "ff"
	DefaultLambda     = 0.1 // per-action length penalty of leaf values
	DefaultMaxActions = 100
	// DefaultSearchTime bounds a search given no time budget.
	DefaultSearchTime = 60 * time.Second
)

// SuggestedSequences is the number of engine sequence slots to load a
// model with for m (0: the engine's default).
func SuggestedSequences(m Method) int {
	if m.Search() {
		return mcts.SuggestedSequences
	}
	return 0
}

// Methods lists the methods Run takes, in the order help texts show them.
func Methods() []Method { return []Method{Greedy, CGreedy, MCTS, CMCTS, Thinking} }

// Names returns the methods' names joined by ", ", for help and errors.
func Names(ms []Method) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

// ParseMethod reads a method name (any case); "" is DefaultMethod. Direct
// is accepted only when allowDirect is set (it needs an environment).
func ParseMethod(s string, allowDirect bool) (Method, error) {
	m := Method(strings.ToLower(strings.TrimSpace(s)))
	if m == "" {
		return DefaultMethod, nil
	}
	if m == Direct && allowDirect {
		return m, nil
	}
	for _, k := range Methods() {
		if k == m {
			return m, nil
		}
	}
	ms := Methods()
	if allowDirect {
		ms = append(ms, Direct)
	}
	return "", fmt.Errorf("unknown method %q (want one of %s)", s, Names(ms))
}

// DefaultNoRevisit says whether a plan by m keeps from returning to a state
// it has been in (Options.NoRevisit) when the caller does not say: cgreedy
// does, since without search it cannot get out of a loop (on the training
// splits it solved 213 tasks with the mask against 163 without; see
// BENCHMARKS.md); the searches and free decoding do not.
func DefaultNoRevisit(m Method) bool { return m == CGreedy }

// Search reports whether m is a tree search (mcts, cmcts).
func (m Method) Search() bool { return m == MCTS || m == CMCTS }

// Constrained reports whether m keeps every action executable (cgreedy,
// cmcts).
func (m Method) Constrained() bool { return m == CGreedy || m == CMCTS }
