// Package search holds the reference planners over a ground pddl.Task:
// greedy best-first search (GBFS), lazy GBFS and A*, each with any
// heuristic from package heuristic, and Portfolio, which runs several at
// once and keeps the first plan.
//
// GBFS and A* are eager: a state's heuristic value is computed once, when
// the state is first generated. Lazy GBFS defers it to when the state is
// taken from the open list (its successors wait there under their parent's
// value), which saves the evaluations of the many successors never taken. Duplicates are detected on the full state (a hash table
// over a packed state arena, no per-state strings). Ties are broken
// deterministically: GBFS orders by h, then first generated first; A* orders
// by f = g + h, then smaller h, then first generated first. Successors are
// generated in increasing action id order, and the one random choice
// (type-based exploration, Options.TypeBased) is seeded, so a search is
// reproducible.
//
// GBFS tests the goal when a state is generated; A* when it is expanded, and
// reopens closed states reached again at lower cost, so with an admissible
// heuristic (h_max, LM-cut, blind) its plans are optimal. States that the
// heuristic reports as dead ends are pruned; since every heuristic's dead
// ends are true dead ends, an exhausted open list proves the task unsolvable.
package search

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/pddl/heuristic"
)

// Algorithm names accepted in Options.Algorithm.
const (
	GBFS  = "gbfs"
	AStar = "astar"
	// Lazy is lazy greedy best-first search (deferred evaluation), as Fast
	// Downward's lazy_greedy: see lazy.go.
	Lazy = "lazy"
)

// Options configure Solve. The zero value runs GBFS with h_FF, no limits,
// and action costs when the task declares them.
type Options struct {
	// Algorithm is GBFS, Lazy or AStar; "" means GBFS.
	Algorithm string
	// Heuristic evaluates states; nil means h_FF (heuristic.New("ff", t)
	// with UnitCost below).
	Heuristic heuristic.Heuristic
	// MaxExpansions stops the search after this many expansions; 0 means no
	// limit.
	MaxExpansions int
	// MaxStates stops the search once this many distinct states are stored
	// (a memory bound: each costs about 8 bytes per 64 facts plus 40); 0
	// means no limit.
	MaxStates int
	// Timeout stops the search after this long; 0 means no limit (the
	// context's deadline still applies).
	Timeout time.Duration
	// UnitCost counts every action as cost 1 in g and in Result.Cost even
	// when the task declares action costs.
	UnitCost bool
	// Weight multiplies h in A*'s f = g + Weight*h (weighted A*, plans at
	// most Weight times the optimal cost with an admissible heuristic);
	// 0 means 1. Ignored by GBFS.
	Weight float64
	// PreferredOperators makes GBFS favour successors reached by FF's
	// helpful actions (the relaxed plan's actions applicable in the expanded
	// state), as Fast Downward and LAMA do: a second open list holds only
	// those successors, the two lists are taken from in turn, and the
	// preferred list gets 1000 extra turns whenever a state with a new best
	// h is found. Helpful actions come from Heuristic when it is an
	// *heuristic.FF, else from an h_FF built for the task. Lazy GBFS takes
	// Fast Downward's preferred operators instead
	// (heuristic.FF.Preferred: the helpful actions whose relaxed plan
	// effect fires in the state). Ignored by A*.
	PreferredOperators bool
	// TypeBased adds type-based exploration to GBFS and lazy GBFS (Xie et
	// al., AAAI 2014; Fast Downward's type_based([h, g]) open list): every
	// entry (a state in GBFS, a (state, action) pair in lazy GBFS) also goes
	// into a list bucketed by (h, g), from which a random bucket's random
	// entry is taken in turn with the greedy lists. It cuts the heavy tails
	// greedy search meets when its tie-breaking leads it into a large
	// plateau. Ignored by A*.
	TypeBased bool
	// Seed seeds TypeBased's random choices; a search is reproducible for a
	// given seed.
	Seed uint64
}

// Status says how a search ended.
type Status int

// The ways a search ends.
const (
	// Solved: Result.Plan reaches the goal.
	Solved Status = iota
	// Unsolvable: the whole reachable space (less proven dead ends) was
	// searched without reaching the goal.
	Unsolvable
	// ExpansionLimit: Options.MaxExpansions was reached.
	ExpansionLimit
	// TimeLimit: Options.Timeout passed.
	TimeLimit
	// StateLimit: Options.MaxStates distinct states were stored.
	StateLimit
	// Canceled: the context was canceled or its deadline passed.
	Canceled
)

var statusNames = [...]string{"solved", "unsolvable", "expansion limit", "time limit", "state limit", "canceled"}

// String returns a lower-case description, e.g. "solved".
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", int(s))
}

// Result is the outcome of a search.
type Result struct {
	Status Status
	// Plan is the sequence of action ids (indexes into Task.Actions) from the
	// initial state to a goal state; nil unless Status is Solved.
	Plan []int
	// Cost is the plan's cost (action costs unless unit costs are used).
	Cost int
	// InitialH is the heuristic value of the initial state (+Inf for a dead
	// end).
	InitialH float64
	// Expanded, Generated and Evaluated count expanded states, generated
	// successors (duplicates included) and heuristic evaluations;
	// DeadEnds counts states pruned as dead ends.
	Expanded, Generated, Evaluated, DeadEnds int
	// Elapsed is the wall-clock search time.
	Elapsed time.Duration
}

// Solve searches t for a plan. It returns an error only for invalid
// arguments (nil task, unknown algorithm); limits, timeouts and cancellation
// are reported in Result.Status.
func Solve(ctx context.Context, t *pddl.Task, opts Options) (Result, error) {
	if t == nil {
		return Result{}, fmt.Errorf("search: nil task")
	}
	if opts.Weight < 0 || math.IsNaN(opts.Weight) || math.IsInf(opts.Weight, 0) {
		return Result{}, fmt.Errorf("search: bad weight %v", opts.Weight)
	}
	if opts.Weight == 0 {
		opts.Weight = 1
	}
	if opts.MaxExpansions < 0 || opts.MaxStates < 0 {
		return Result{}, fmt.Errorf("search: negative limit (expansions %d, states %d)", opts.MaxExpansions, opts.MaxStates)
	}
	switch opts.Algorithm {
	case "", GBFS, Lazy, AStar:
	default:
		return Result{}, fmt.Errorf("search: unknown algorithm %q (want %s, %s or %s)", opts.Algorithm, GBFS, Lazy, AStar)
	}
	h := opts.Heuristic
	if h == nil {
		var err error
		h, err = heuristic.NewWithOptions("ff", t, heuristic.Options{UnitCost: opts.UnitCost})
		if err != nil {
			return Result{}, fmt.Errorf("search: %w", err)
		}
	}
	if len(t.Init) != (len(t.Facts)+63)/64 {
		return Result{}, fmt.Errorf("search: initial state has %d words, task has %d facts", len(t.Init), len(t.Facts))
	}
	s := &searcher{ctx: ctx, t: t, h: h, opts: opts, start: time.Now()}
	if opts.Timeout > 0 {
		s.deadline = s.start.Add(opts.Timeout)
	}
	s.costs = make([]int64, len(t.Actions))
	for i := range t.Actions {
		c := actionCost(t, i, opts.UnitCost)
		if c < 0 {
			return Result{}, fmt.Errorf("search: action %s has negative cost %d", t.Actions[i].String(), c)
		}
		s.costs[i] = c
	}
	s.nodes = newNodeStore(len(t.Init))
	if opts.PreferredOperators && opts.Algorithm != AStar {
		ff, ok := h.(*heuristic.FF)
		if !ok {
			hf, err := heuristic.NewWithOptions("ff", t, heuristic.Options{UnitCost: opts.UnitCost})
			if err != nil {
				return Result{}, fmt.Errorf("search: %w", err)
			}
			ff = hf.(*heuristic.FF)
		}
		s.pref = ff
		s.preferred = make([]bool, len(t.Actions))
	}
	if opts.TypeBased && opts.Algorithm != AStar {
		s.types = newTypeOpen(opts.Seed)
	}
	var res Result
	switch opts.Algorithm {
	case AStar:
		res = s.astar()
	case Lazy:
		res = s.lazy()
	default:
		res = s.gbfs()
	}
	res.Elapsed = time.Since(s.start)
	return res, nil
}

// searcher is the state of one search.
type searcher struct {
	ctx      context.Context
	t        *pddl.Task
	h        heuristic.Heuristic
	opts     Options
	start    time.Time
	deadline time.Time
	costs    []int64
	nodes    *nodeStore
	open     openList   // A*
	greedy   greedyOpen // GBFS and lazy GBFS
	res      Result
	buf      []int
	// polls counts stop calls; the clock and the context are read every
	// pollEvery calls.
	polls int

	// types is the greedy searches' type-based exploration list (nil when
	// off).
	types *typeOpen

	// Preferred operators (GBFS and lazy GBFS; nil pref when off).
	pref       *heuristic.FF
	greedyPref greedyOpen
	preferred  []bool // preferred[a] during one expansion
	helpful    []int
}

// pollEvery is how often (in stop calls, about one per expansion) the
// searches read the clock and the context: a few microseconds apart on the
// smallest tasks, so timeouts and cancellation stay prompt, while the
// clock no longer costs several percent of a fast search.
const pollEvery = 16

// stop returns the status that ends the search now, if any.
func (s *searcher) stop() (Status, bool) {
	s.polls++
	if s.polls%pollEvery == 1 {
		if s.ctx.Err() != nil {
			return Canceled, true
		}
		if !s.deadline.IsZero() && time.Now().After(s.deadline) {
			return TimeLimit, true
		}
	}
	if s.opts.MaxExpansions > 0 && s.res.Expanded >= s.opts.MaxExpansions {
		return ExpansionLimit, true
	}
	if s.opts.MaxStates > 0 && s.nodes.len() >= s.opts.MaxStates {
		return StateLimit, true
	}
	return 0, false
}

func (s *searcher) eval(st pddl.State) (float64, bool) {
	s.res.Evaluated++
	v, dead := s.h.Eval(st)
	if dead {
		s.res.DeadEnds++
	}
	return v, dead
}

// solved fills the result with the plan ending at node n.
func (s *searcher) solved(n int32) Result {
	var plan []int
	for m := n; s.nodes.parent[m] >= 0; m = s.nodes.parent[m] {
		plan = append(plan, int(s.nodes.action[m]))
	}
	for i, j := 0, len(plan)-1; i < j; i, j = i+1, j-1 {
		plan[i], plan[j] = plan[j], plan[i]
	}
	if plan == nil {
		plan = []int{}
	}
	s.res.Status = Solved
	s.res.Plan = plan
	s.res.Cost = int(s.nodes.g[n])
	return s.res
}

func (s *searcher) end(st Status) Result {
	s.res.Status = st
	return s.res
}

// gbfs runs eager greedy best-first search.
func (s *searcher) gbfs() Result {
	t := s.t
	root, _ := s.nodes.insert(t.Init, -1, -1, 0)
	h0, dead := s.eval(t.Init)
	s.res.InitialH = h0
	if t.GoalReached(t.Init) {
		return s.solved(root)
	}
	if dead {
		return s.end(Unsolvable)
	}
	s.greedy.push(h0, root, -1)
	best := h0
	// Turns taken from the lists (see next).
	var turns [3]int
	if s.pref != nil {
		s.greedyPref.push(h0, root, -1)
	}
	if s.types != nil {
		s.types.push(typeKey{h0, 0}, greedyEntry{root, -1})
	}
	for s.greedy.len() > 0 {
		if st, ok := s.stop(); ok {
			return s.end(st)
		}
		e := s.next(&turns)
		n := e.node
		if s.nodes.closed[n] {
			continue
		}
		s.nodes.closed[n] = true
		s.res.Expanded++
		st := s.nodes.state(n)
		g := s.nodes.g[n]
		if s.pref != nil {
			for _, a := range s.helpful {
				s.preferred[a] = false
			}
			s.helpful = s.pref.Helpful(st, s.helpful[:0])
			for _, a := range s.helpful {
				s.preferred[a] = true
			}
		}
		s.buf = t.Applicable(st, s.buf[:0])
		for _, a := range s.buf {
			succ := t.Apply(st, a)
			s.res.Generated++
			m, isNew := s.nodes.insert(succ, n, int32(a), g+s.costs[a])
			if !isNew {
				continue
			}
			if t.GoalReached(succ) {
				return s.solved(m)
			}
			hv, dead := s.eval(succ)
			if dead {
				s.nodes.closed[m] = true
				continue
			}
			s.greedy.push(hv, m, -1)
			if s.types != nil {
				s.types.push(typeKey{hv, g + s.costs[a]}, greedyEntry{m, -1})
			}
			if s.pref != nil && s.preferred[a] {
				s.greedyPref.push(hv, m, -1)
			}
			if hv < best {
				best = hv
				turns[1] -= 1000
			}
		}
	}
	return s.end(Unsolvable)
}

// actionCost is what action a of t costs a search: its declared cost when
// the domain has costs and unit is false, else 1.
func actionCost(t *pddl.Task, a int, unit bool) int64 {
	if t.HasCosts && !unit {
		return int64(t.Actions[a].Cost)
	}
	return 1
}

// next pops the next entry of a greedy search from the list whose turn it
// is: all entries [0], preferred [1] (nil pref: always empty), types [2]
// (nil types: always empty). The non-empty list with the fewest turns goes
// next, ties to the lower index, as in Fast Downward's alternation open
// list; turns counts the turns taken. Some list must be non-empty.
func (s *searcher) next(turns *[3]int) greedyEntry {
	list := -1
	for i, n := range [3]int{s.greedy.len(), s.greedyPref.len(), s.typesLen()} {
		if n > 0 && (list < 0 || turns[i] < turns[list]) {
			list = i
		}
	}
	turns[list]++
	switch list {
	case 0:
		return s.greedy.pop()
	case 1:
		return s.greedyPref.pop()
	default:
		return s.types.pop()
	}
}

// astar runs (weighted) A* with reopening.
func (s *searcher) astar() Result {
	t := s.t
	root, _ := s.nodes.insert(t.Init, -1, -1, 0)
	h0, dead := s.eval(t.Init)
	s.res.InitialH = h0
	if dead {
		return s.end(Unsolvable)
	}
	s.nodes.h[root] = h0
	w := s.opts.Weight
	s.open.push(openEntry{key1: w * h0, key2: h0, g: 0, node: root})
	for s.open.len() > 0 {
		if st, ok := s.stop(); ok {
			return s.end(st)
		}
		e := s.open.pop()
		n := e.node
		if e.g != s.nodes.g[n] || s.nodes.closed[n] {
			continue // stale entry
		}
		st := s.nodes.state(n)
		if t.GoalReached(st) {
			return s.solved(n)
		}
		s.nodes.closed[n] = true
		s.res.Expanded++
		g := s.nodes.g[n]
		s.buf = t.Applicable(st, s.buf[:0])
		for _, a := range s.buf {
			succ := t.Apply(st, a)
			s.res.Generated++
			ng := g + s.costs[a]
			m, isNew := s.nodes.insert(succ, n, int32(a), ng)
			if !isNew {
				if ng >= s.nodes.g[m] || s.nodes.dead[m] {
					continue
				}
				// Cheaper path: update and (re)open.
				s.nodes.g[m] = ng
				s.nodes.parent[m] = n
				s.nodes.action[m] = int32(a)
				s.nodes.closed[m] = false
				hv := s.nodes.h[m]
				s.open.push(openEntry{key1: float64(ng) + w*hv, key2: hv, g: ng, node: m})
				continue
			}
			hv, dead := s.eval(succ)
			if dead {
				s.nodes.dead[m] = true
				continue
			}
			s.nodes.h[m] = hv
			s.open.push(openEntry{key1: float64(ng) + w*hv, key2: hv, g: ng, node: m})
		}
	}
	return s.end(Unsolvable)
}

// HelpfulActions returns a function that appends to buf FF's helpful
// actions in state s (the relaxed plan's actions applicable in s, Fast
// Downward's preferred operators), in increasing action id order: the
// preference Solve uses with PreferredOperators, for callers that want it
// as a prior or a bonus (an MCTS, a decoder's ranking). The function is safe
// for concurrent use; it returns buf unchanged in a relaxed dead end.
// unitCost counts every action as cost 1 in the relaxed plan.
func HelpfulActions(t *pddl.Task, unitCost bool) (func(s pddl.State, buf []int) []int, error) {
	if t == nil {
		return nil, fmt.Errorf("search: nil task")
	}
	h, err := heuristic.NewWithOptions("ff", t, heuristic.Options{UnitCost: unitCost})
	if err != nil {
		return nil, fmt.Errorf("search: helpful actions: %w", err)
	}
	ff := h.(*heuristic.FF)
	return ff.Helpful, nil
}
