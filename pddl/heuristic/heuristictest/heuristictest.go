// Package heuristictest builds small ground tasks directly (without the
// parser) and computes exact goal distances by exhaustive search, for tests
// of heuristics and search algorithms.
package heuristictest

import (
	"container/heap"
	"fmt"
	"math/rand/v2"

	"github.com/nesy-dev/nesy/pddl"
)

// Builder assembles a pddl.Task fact by fact and action by action.
type Builder struct {
	t   pddl.Task
	idx map[string]int
}

// NewBuilder starts an empty task.
func NewBuilder(domain, problem string) *Builder {
	return &Builder{t: pddl.Task{DomainName: domain, ProblemName: problem}, idx: map[string]int{}}
}

// Fact returns the id of fact (pred args...), creating it on first use.
func (b *Builder) Fact(pred string, args ...string) int {
	f := pddl.Fact{Predicate: pred, Args: args}
	k := f.String()
	if id, ok := b.idx[k]; ok {
		return id
	}
	id := len(b.t.Facts)
	b.idx[k] = id
	b.t.Facts = append(b.t.Facts, f)
	return id
}

// Action adds a ground action with cost 1 and returns it for further
// settings (Cost, Cond, Pre.Neg); the pointer is valid until the next call.
func (b *Builder) Action(name string, args []string, pre, add, del []int) *pddl.Action {
	b.t.Actions = append(b.t.Actions, pddl.Action{
		Name: name, Args: args, Pre: pddl.Conj{Pos: pre}, Add: add, Del: del, Cost: 1,
	})
	return &b.t.Actions[len(b.t.Actions)-1]
}

// Init sets the initial state.
func (b *Builder) Init(facts ...int) { b.t.Init = b.state(facts) }

// Goal adds a goal disjunct.
func (b *Builder) Goal(c pddl.Conj) { b.t.Goal = append(b.t.Goal, c) }

// Costs marks the task as declaring action costs.
func (b *Builder) Costs() { b.t.HasCosts = true }

func (b *Builder) state(facts []int) pddl.State {
	s := pddl.NewState(len(b.t.Facts))
	for _, f := range facts {
		s.Set(f)
	}
	return s
}

// Task returns the built task, indexed (pddl.Task.Reindex) and ready for
// use. Call Init after creating all facts (states are sized when Init is
// called).
func (b *Builder) Task() *pddl.Task {
	t := b.t
	if t.Init == nil {
		t.Init = pddl.NewState(len(t.Facts))
	}
	t.Reindex()
	return &t
}

// Blocks returns a 4-operator blocksworld task (pick-up, put-down, stack,
// unstack). init lists the towers bottom to top and must hold every block;
// goal lists towers to build (a one-block tower means "on the table"; towers
// may be partial: only the on/ontable relations listed are required).
func Blocks(init, goal [][]string) *pddl.Task {
	b := NewBuilder("blocksworld-4ops", "blocks")
	var blocks []string
	for _, tw := range init {
		blocks = append(blocks, tw...)
	}
	he := b.Fact("handempty")
	for _, x := range blocks {
		b.Fact("clear", x)
		b.Fact("ontable", x)
		b.Fact("holding", x)
		for _, y := range blocks {
			if x != y {
				b.Fact("on", x, y)
			}
		}
	}
	for _, x := range blocks {
		cl, ot, ho := b.Fact("clear", x), b.Fact("ontable", x), b.Fact("holding", x)
		b.Action("pick-up", []string{x}, []int{cl, ot, he}, []int{ho}, []int{cl, ot, he})
		b.Action("put-down", []string{x}, []int{ho}, []int{cl, ot, he}, []int{ho})
		for _, y := range blocks {
			if x == y {
				continue
			}
			on, cy := b.Fact("on", x, y), b.Fact("clear", y)
			b.Action("stack", []string{x, y}, []int{ho, cy}, []int{on, cl, he}, []int{ho, cy})
			b.Action("unstack", []string{x, y}, []int{on, cl, he}, []int{ho, cy}, []int{on, cl, he})
		}
	}
	var facts []int
	for _, tw := range init {
		facts = append(facts, b.Fact("ontable", tw[0]), b.Fact("clear", tw[len(tw)-1]))
		for i := 1; i < len(tw); i++ {
			facts = append(facts, b.Fact("on", tw[i], tw[i-1]))
		}
	}
	b.Init(append(facts, he)...)
	var g pddl.Conj
	for _, tw := range goal {
		if len(tw) == 1 {
			g.Pos = append(g.Pos, b.Fact("ontable", tw[0]))
		}
		for i := 1; i < len(tw); i++ {
			g.Pos = append(g.Pos, b.Fact("on", tw[i], tw[i-1]))
		}
	}
	b.Goal(g)
	return b.Task()
}

// RandomBlocks returns a blocksworld task over n blocks with random initial
// and goal towers.
func RandomBlocks(n int, rng *rand.Rand) *pddl.Task {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("b%d", i)
	}
	towers := func() [][]string {
		p := rng.Perm(n)
		var out [][]string
		for _, i := range p {
			if len(out) == 0 || rng.IntN(2) == 0 {
				out = append(out, []string{names[i]})
			} else {
				out[len(out)-1] = append(out[len(out)-1], names[i])
			}
		}
		return out
	}
	return Blocks(towers(), towers())
}

// Gripper returns the gripper task with n balls in room a to be carried to
// room b by a robot with two grippers.
func Gripper(n int) *pddl.Task {
	b := NewBuilder("gripper", fmt.Sprintf("gripper-%d", n))
	rooms := []string{"rooma", "roomb"}
	grippers := []string{"left", "right"}
	var balls []string
	for i := 0; i < n; i++ {
		balls = append(balls, fmt.Sprintf("ball%d", i+1))
	}
	for _, r := range rooms {
		b.Fact("at-robby", r)
	}
	for _, g := range grippers {
		b.Fact("free", g)
	}
	for _, x := range balls {
		for _, r := range rooms {
			b.Fact("at", x, r)
		}
		for _, g := range grippers {
			b.Fact("carry", x, g)
		}
	}
	for _, from := range rooms {
		for _, to := range rooms {
			if from != to {
				b.Action("move", []string{from, to}, []int{b.Fact("at-robby", from)}, []int{b.Fact("at-robby", to)}, []int{b.Fact("at-robby", from)})
			}
		}
	}
	for _, x := range balls {
		for _, r := range rooms {
			for _, g := range grippers {
				at, ar, fr, ca := b.Fact("at", x, r), b.Fact("at-robby", r), b.Fact("free", g), b.Fact("carry", x, g)
				b.Action("pick", []string{x, r, g}, []int{at, ar, fr}, []int{ca}, []int{at, fr})
				b.Action("drop", []string{x, r, g}, []int{ca, ar}, []int{at, fr}, []int{ca})
			}
		}
	}
	init := []int{b.Fact("at-robby", "rooma"), b.Fact("free", "left"), b.Fact("free", "right")}
	var g pddl.Conj
	for _, x := range balls {
		init = append(init, b.Fact("at", x, "rooma"))
		g.Pos = append(g.Pos, b.Fact("at", x, "roomb"))
	}
	b.Init(init...)
	b.Goal(g)
	return b.Task()
}

// Lamps returns a task with action costs, negative preconditions,
// conditional effects and a disjunctive goal: n lamps in a row, a robot that
// walks between them (cost 1), a "toggle" that flips the lamp it stands at
// (cost 2, conditional effects on and off), and a "sweep" (cost 3) that,
// from any position, switches on every lamp whose neighbour to the left is
// on (one conditional effect per lamp). The goal is: the last lamp on, or
// every lamp on except the first.
func Lamps(n int) *pddl.Task {
	b := NewBuilder("lamps", fmt.Sprintf("lamps-%d", n))
	b.Costs()
	pos := func(i int) int { return b.Fact("at", fmt.Sprint(i)) }
	on := func(i int) int { return b.Fact("on", fmt.Sprint(i)) }
	for i := 0; i < n; i++ {
		pos(i)
		on(i)
	}
	for i := 0; i < n; i++ {
		if i+1 < n {
			b.Action("walk", []string{fmt.Sprint(i), fmt.Sprint(i + 1)}, []int{pos(i)}, []int{pos(i + 1)}, []int{pos(i)})
			b.Action("walk", []string{fmt.Sprint(i + 1), fmt.Sprint(i)}, []int{pos(i + 1)}, []int{pos(i)}, []int{pos(i + 1)})
		}
		a := b.Action("toggle", []string{fmt.Sprint(i)}, []int{pos(i)}, nil, nil)
		a.Cost = 2
		a.Cond = []pddl.CondEffect{
			{Cond: pddl.Conj{Pos: []int{on(i)}}, Del: []int{on(i)}},
			{Cond: pddl.Conj{Neg: []int{on(i)}}, Add: []int{on(i)}},
		}
	}
	sw := b.Action("sweep", nil, nil, nil, nil)
	sw.Cost = 3
	for i := 1; i < n; i++ {
		sw.Cond = append(sw.Cond, pddl.CondEffect{Cond: pddl.Conj{Pos: []int{on(i - 1)}, Neg: []int{on(i)}}, Add: []int{on(i)}})
	}
	b.Init(pos(0))
	b.Goal(pddl.Conj{Pos: []int{on(n - 1)}})
	var all pddl.Conj
	for i := 1; i < n; i++ {
		all.Pos = append(all.Pos, on(i))
	}
	all.Neg = []int{on(0)}
	b.Goal(all)
	return b.Task()
}

// Rings returns the Chinese rings puzzle with n rings, all off initially,
// to be put all on: ring 0 can always be toggled; ring i > 0 only when ring
// i-1 is on and every ring below i-1 is off. Its preconditions are mostly
// negative; h* grows exponentially with n.
func Rings(n int) *pddl.Task {
	b := NewBuilder("rings", fmt.Sprintf("rings-%d", n))
	on := make([]int, n)
	for i := range on {
		on[i] = b.Fact("on", fmt.Sprint(i))
	}
	for i := 0; i < n; i++ {
		var pos, neg []int
		if i > 0 {
			pos = append(pos, on[i-1])
		}
		for j := 0; j < i-1; j++ {
			neg = append(neg, on[j])
		}
		put := b.Action("put-on", []string{fmt.Sprint(i)}, pos, []int{on[i]}, nil)
		put.Pre.Neg = append(append([]int(nil), neg...), on[i])
		take := b.Action("take-off", []string{fmt.Sprint(i)}, append(append([]int(nil), pos...), on[i]), nil, []int{on[i]})
		take.Pre.Neg = neg
	}
	b.Init()
	b.Goal(pddl.Conj{Pos: on})
	return b.Task()
}

// StateSpace is the reachable state space of a task with exact goal
// distances.
type StateSpace struct {
	// States are the reachable states, the initial state first.
	States []pddl.State
	// Dist[i] is the cheapest cost from States[i] to a goal state, -1 when
	// no goal state is reachable. Cost is Action.Cost when the task declares
	// costs (unless unit) and 1 otherwise.
	Dist []int
}

// Explore enumerates the states reachable from t.Init (at most limit, or an
// error) and computes their exact goal distances by a backward Dijkstra.
func Explore(t *pddl.Task, unit bool, limit int) (*StateSpace, error) {
	index := map[string]int{}
	ss := &StateSpace{}
	type edge struct{ to, cost int }
	var pred [][]edge // pred[j]: edges into j
	add := func(s pddl.State) int {
		k := s.Key()
		if i, ok := index[k]; ok {
			return i
		}
		i := len(ss.States)
		index[k] = i
		ss.States = append(ss.States, s)
		pred = append(pred, nil)
		return i
	}
	add(t.Init)
	var buf []int
	for i := 0; i < len(ss.States); i++ {
		if len(ss.States) > limit {
			return nil, fmt.Errorf("state space of %s exceeds %d states", t.ProblemName, limit)
		}
		s := ss.States[i]
		buf = t.Applicable(s, buf[:0])
		for _, a := range buf {
			j := add(t.Apply(s, a))
			c := 1
			if t.HasCosts && !unit {
				c = t.Actions[a].Cost
			}
			pred[j] = append(pred[j], edge{i, c})
		}
	}
	ss.Dist = make([]int, len(ss.States))
	q := &intHeap{}
	for i, s := range ss.States {
		ss.Dist[i] = -1
		if t.GoalReached(s) {
			ss.Dist[i] = 0
			heap.Push(q, [2]int{0, i})
		}
	}
	for q.Len() > 0 {
		e := heap.Pop(q).([2]int)
		d, j := e[0], e[1]
		if d > ss.Dist[j] {
			continue
		}
		for _, p := range pred[j] {
			nd := d + p.cost
			if ss.Dist[p.to] < 0 || nd < ss.Dist[p.to] {
				ss.Dist[p.to] = nd
				heap.Push(q, [2]int{nd, p.to})
			}
		}
	}
	return ss, nil
}

type intHeap [][2]int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i][0] < h[j][0] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.([2]int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// RandomWalkStates returns n states reached by random walks of up to maxLen
// steps from t.Init (duplicates possible).
func RandomWalkStates(t *pddl.Task, n, maxLen int, rng *rand.Rand) []pddl.State {
	var out []pddl.State
	var buf []int
	for len(out) < n {
		s := t.Init
		steps := rng.IntN(maxLen + 1)
		for i := 0; i < steps; i++ {
			buf = t.Applicable(s, buf[:0])
			if len(buf) == 0 {
				break
			}
			s = t.Apply(s, buf[rng.IntN(len(buf))])
		}
		out = append(out, s)
	}
	return out
}
