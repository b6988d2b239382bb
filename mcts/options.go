package mcts

import (
	"fmt"
	"math"
	"time"

	"github.com/nesy-dev/nesy/internal/sysmem"
	"github.com/nesy-dev/nesy/pddl/heuristic"
)

// Defaults for the zero values of Options.
const (
	DefaultWidth       = 16
	DefaultC           = 2.5
	DefaultBatch       = 16
	DefaultHeuristic   = "ff"
	DefaultGoalReward  = 1.0
	DefaultLambda      = 0.1
	DefaultMaxActions  = 100
	DefaultTime        = 60 * time.Second
	DefaultVirtualLoss = 1
	DefaultValueScale  = 0.1
)

// SuggestedSequences is the number of engine sequence slots
// (models.Options.Sequences) a search works well with: enough to keep the
// sequences of recently evaluated nodes for their children's forks at the
// default batch of 16. With fewer the search still runs, evicting and
// recomputing more.
const SuggestedSequences = 128

// Backup rules (Options.Backup).
const (
	// BackupMax sets Q(n, v) to the best value found below v: the right
	// statistic for deterministic transitions, where one good continuation
	// is enough.
	BackupMax = "max"
	// BackupMean sets Q(n, v) to the mean of the values backed up through v
	// (AlphaZero's rule).
	BackupMean = "mean"
)

// Normalisations (Options.Normalize).
const (
	NormalizeUnit  = "unit"
	NormalizeRange = "range"
)

// Options configure Search. The zero value is the default search: constrained,
// width 16, c = 2.5 constant, h_FF values with lambda = 0.1, max backup,
// batches of 16 leaves, stop at the first plan that reaches the goal, at most
// 60 s.
type Options struct {
	// Width is the most children a node gets: the allowed next tokens with
	// the highest prior. 0 means DefaultWidth (16). In the constrained
	// search a node whose children are all exhausted (fully searched) gets
	// the next Width allowed tokens by prior, so no executable continuation
	// is out of reach for good; the unconstrained search never widens.
	Width int
	// C is the exploration constant c of PUCB:
	//   Q(n,v) + c * p(v|s,u) * sqrt(N(n)) / (1 + N(n,v)).
	// 0 means DefaultC (2.5).
	C float64
	// Base, when positive, replaces the constant c by AlphaZero's growing
	// c(N) = log((1 + N + Base) / Base) + C, with N = N(n); the paper's base
	// constant is 10. 0 (the default) keeps c constant.
	Base float64

	// Heuristic names the state heuristic in package heuristic's syntax
	// ("ff", "lmcut", "goalcount", "mix(0.5*ff+0.5*lmcut)", ...). "" means
	// DefaultHeuristic (h_FF).
	Heuristic string
	// Evaluator, when set, is the state heuristic itself, already built for
	// the Space's task (a server builds one per request and shares it
	// between its checks and the search); Heuristic is then ignored.
	Evaluator heuristic.Heuristic
	// GoalReward is R_G, the value of a plan that reaches the goal. 0 means
	// DefaultGoalReward (1). It matters when Exhaust is set (the search
	// otherwise stops at the first such plan).
	GoalReward float64
	// Lambda is the per-action length penalty: a plan prefix pi is valued
	// -h(s_pi) - Lambda*|pi|. 0 means DefaultLambda (0.1); a negative value
	// means no penalty.
	Lambda float64
	// Normalize says how values are put on the prior term's scale before
	// PUCB adds them: NormalizeUnit (the default) measures Q in heuristic
	// units relative to the root, Q = (V - V(root)) / ValueScale, so one
	// action's worth of heuristic progress weighs about as much as the
	// exploration term c * p at the start; NormalizeRange maps Q into [0, 1]
	// by the smallest and largest values seen in the tree (MuZero).
	Normalize string
	// ValueScale is the heuristic difference worth 1 in Q under
	// NormalizeUnit. 0 means DefaultValueScale (0.1: one unit of heuristic
	// progress is worth 10, one lambda step 1).
	ValueScale float64
	// Helpful, when positive, is a bonus in heuristic units for an action
	// that FF's relaxed plan from the current state uses (a helpful action,
	// or preferred operator) when a partial action is valued by its best
	// completion, to lead the search across plateaus where no single action
	// lowers h. 0 (the default) means none: with the max backup it did not
	// pay on ALFWorld and PlanBench (see BENCHMARKS.md).
	Helpful float64
	// Backup is BackupMax or BackupMean; "" means BackupMax.
	Backup string
	// NoLookahead values a node inside an action by the state before the
	// action instead of by its best completion (the best value among the
	// applicable actions its partial text is still a prefix of).
	NoLookahead bool
	// AllowLoops keeps actions that lead back to a state already on the
	// node's path (including actions that change nothing); by default such
	// a node ends its branch (it can only be worse than the earlier visit).
	AllowLoops bool
	// AllTokens makes every allowed token a candidate child. By default a
	// token is folded into the longest allowed token that extends its text
	// and leaves exactly the same actions possible (e.g. " dr" into
	// " drawer" when only drawers start with "dr"), its prior added to that
	// token's: no plan is lost, and the tree does not spend simulations on
	// spelling one action in many tokenizations.
	AllTokens bool
	// KeepDuplicates keeps nodes at a (state, partial action text) that
	// another node of the tree reached with a plan no longer: by default
	// such a node ends its branch (the other one searches the same
	// continuations), as a duplicate check does in best-first search.
	// Different tokenizations of one text and different orders of
	// independent actions are the usual sources.
	KeepDuplicates bool
	// NoCollapse gives every token its own node even where it is the only
	// allowed token (forced chains are otherwise one edge: one node, one
	// evaluation request holding all their tokens).
	NoCollapse bool
	// Rollout, when positive, continues every evaluated leaf by constrained
	// greedy decoding for up to this many actions and values the leaf by
	// the state reached (all leaves of a batch are rolled out together, one
	// forward pass per token). 0 (the default) values leaves by the
	// heuristic directly.
	Rollout int
	// RolloutTemperature, when positive, samples each rollout token from
	// the model's distribution over the allowed tokens at this temperature
	// (softmax of logits/T, seeded by Seed) instead of taking the most
	// likely one: rollouts from neighbouring leaves then try different
	// continuations instead of converging on one. 0 (the default) is
	// greedy.
	RolloutTemperature float64

	// Batch is the number of leaves selected (with virtual loss) and
	// evaluated in one model call per iteration. 0 means DefaultBatch (16).
	Batch int
	// VirtualLoss is the number of losses a pending leaf counts on its path
	// while its evaluation is in flight. 0 means DefaultVirtualLoss (1).
	VirtualLoss int

	// Time bounds the search's wall-clock time; Simulations the number of
	// simulations (leaf evaluations and terminal visits); Tokens the
	// evaluated tokens (prompt included). 0 means no bound of that kind;
	// when all three are 0, Time is DefaultTime (60 s). The context's
	// deadline also applies.
	Time        time.Duration
	Simulations int
	Tokens      int64
	// MaxNodes bounds the nodes of the tree, the search's memory (each
	// costs at most about NodeBytes with its masks and cached values): the
	// search stops with StopMemory once it has created this many, keeping
	// the best plan so far. A batch may overrun it by at most Batch times
	// Width nodes. 0 means no bound.
	MaxNodes int
	// Exhaust keeps searching after the first plan that reaches the goal,
	// until the budget is spent or the tree is exhausted, and returns the
	// shortest such plan. By default the search stops at the first.
	Exhaust bool
	// MaxActions ends a plan at this many actions (a non-goal terminal).
	// 0 means DefaultMaxActions (100); the Space's own MaxActions, when
	// smaller, ends plans first.
	MaxActions int

	// Unconstrained searches the model's full distribution: the children of
	// a node are its top-Width tokens over the whole vocabulary, and a token
	// that leaves every applicable action's text (or ends the plan inside an
	// action) ends its branch as a dead one. For the ablation.
	Unconstrained bool
	// Seed breaks ties between children of equal score (a seeded shuffle of
	// each node's children). The same seed, batch size and model give the
	// same search.
	Seed uint64

	// OnTree, when set, receives the tree as it grows (for a live view):
	// the visited nodes that are new or changed since the last call, and
	// the best plan so far. It is called on the search's goroutine after the
	// root is expanded, between batches at most every TreeEvery, and once
	// more with Final set when the search ends; copy what it keeps. nil (the
	// default) costs nothing.
	OnTree func(TreeDelta)
	// TreeEvery is the least time between OnTree calls; 0 means
	// DefaultTreeEvery.
	TreeEvery time.Duration
}

// DefaultTreeEvery is how often OnTree is called by default.
const DefaultTreeEvery = 250 * time.Millisecond

// withDefaults fills the zero fields and checks the rest.
func (o Options) withDefaults() (Options, error) {
	if o.Width == 0 {
		o.Width = DefaultWidth
	}
	if o.C == 0 {
		o.C = DefaultC
	}
	if o.Heuristic == "" {
		o.Heuristic = DefaultHeuristic
	}
	if o.GoalReward == 0 {
		o.GoalReward = DefaultGoalReward
	}
	switch {
	case o.Lambda == 0:
		o.Lambda = DefaultLambda
	case o.Lambda < 0:
		o.Lambda = 0
	}
	if o.Normalize == "" {
		o.Normalize = NormalizeUnit
	}
	if o.ValueScale == 0 {
		o.ValueScale = DefaultValueScale
	}
	if o.Helpful < 0 {
		return o, fmt.Errorf("mcts: helpful-action bonus %g is negative", o.Helpful)
	}
	if o.Backup == "" {
		o.Backup = BackupMax
	}
	if o.Batch == 0 {
		o.Batch = DefaultBatch
	}
	if o.VirtualLoss == 0 {
		o.VirtualLoss = DefaultVirtualLoss
	}
	if o.MaxActions == 0 {
		o.MaxActions = DefaultMaxActions
	}
	if o.Time == 0 && o.Simulations == 0 && o.Tokens == 0 {
		o.Time = DefaultTime
	}
	if o.TreeEvery <= 0 {
		o.TreeEvery = DefaultTreeEvery
	}
	switch {
	case o.Width < 0:
		return o, fmt.Errorf("mcts: width %d is negative", o.Width)
	case o.C < 0:
		return o, fmt.Errorf("mcts: exploration constant %g is negative", o.C)
	case o.Base < 0:
		return o, fmt.Errorf("mcts: base constant %g is negative", o.Base)
	case o.Batch < 0:
		return o, fmt.Errorf("mcts: batch %d is negative", o.Batch)
	case o.VirtualLoss < 0:
		return o, fmt.Errorf("mcts: virtual loss %d is negative", o.VirtualLoss)
	case o.Time < 0 || o.Simulations < 0 || o.Tokens < 0 || o.MaxNodes < 0:
		return o, fmt.Errorf("mcts: negative budget (time %v, simulations %d, tokens %d, nodes %d)", o.Time, o.Simulations, o.Tokens, o.MaxNodes)
	case o.MaxActions < 0:
		return o, fmt.Errorf("mcts: max actions %d is negative", o.MaxActions)
	case o.Rollout < 0:
		return o, fmt.Errorf("mcts: rollout %d is negative", o.Rollout)
	case o.RolloutTemperature < 0 || math.IsNaN(o.RolloutTemperature) || math.IsInf(o.RolloutTemperature, 0):
		return o, fmt.Errorf("mcts: rollout temperature %g is not a finite non-negative number", o.RolloutTemperature)
	case o.Normalize != NormalizeUnit && o.Normalize != NormalizeRange:
		return o, fmt.Errorf("mcts: unknown normalisation %q (want %q or %q)", o.Normalize, NormalizeUnit, NormalizeRange)
	case o.ValueScale < 0:
		return o, fmt.Errorf("mcts: value scale %g is negative", o.ValueScale)
	case o.Backup != BackupMax && o.Backup != BackupMean:
		return o, fmt.Errorf("mcts: unknown backup %q (want %q or %q)", o.Backup, BackupMax, BackupMean)
	}
	if o.GoalReward <= 0 {
		return o, fmt.Errorf("mcts: goal reward %g must be positive", o.GoalReward)
	}
	return o, nil
}

// NodeBytes bounds the memory a search holds per node of its tree: the
// node, its children list, its share of the allowed-token masks and cached
// heuristic values, and a live view's report of it (TestNodeBytes measures
// the live heap per node on ALFWorld). A caller with a memory budget of B
// bytes sets MaxNodes to B / NodeBytes.
const NodeBytes = 8192

// DefaultSearchMemory is the memory a search of nesy plan or nesy bench may
// hold by default: half the machine's physical memory (sysmem.Half), so
// that a search over a large vocabulary with a flat prior (a uniform
// model's tree can grow by gigabytes a minute) stops with StopMemory
// instead of meeting the machine's out-of-memory kill.
func DefaultSearchMemory() int64 { return sysmem.Half() }

// NodesFor is the MaxNodes that keeps a search within bytes of memory:
// bytes / NodeBytes, at least 1 for a positive budget; 0 (no bound) for 0.
func NodesFor(bytes int64) int {
	if bytes <= 0 {
		return 0
	}
	return int(min(max(bytes/NodeBytes, 1), math.MaxInt32))
}
