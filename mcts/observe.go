package mcts

import (
	"math"
	"time"
)

// TreeNode is one node of the search tree as Options.OnTree reports it.
type TreeNode struct {
	// ID numbers nodes in creation order (the root is 0); Parent is the
	// parent's ID, -1 for the root.
	ID     int `json:"id"`
	Parent int `json:"parent"`
	// Text is the edge from the parent: its tokens' text ("" for the root,
	// "<end>" for an end token). A node stands for the plan prefix spelled
	// by the texts from the root down to it.
	Text string `json:"text"`
	// Visits is the number of values backed up through the node; Value its
	// value in the search's raw units (-h(s) - lambda*|plan|, or the goal
	// reward), the statistic selection uses before normalisation; Prior is
	// p(edge | parent).
	Visits int     `json:"visits"`
	Value  float64 `json:"value"`
	Prior  float64 `json:"prior"`
	// Actions is the number of complete actions in the node's prefix.
	Actions int `json:"actions"`
	// Kind is open, goal, terminal (a plan that ended without the goal) or
	// dead (a dead end, loop, duplicate or invalid text); Exhausted: fully
	// searched.
	Kind      string `json:"kind"`
	Exhausted bool   `json:"exhausted,omitempty"`
}

// TreeDelta is what changed in the tree since the last OnTree call.
type TreeDelta struct {
	// Nodes are the visited nodes (and the nodes on the best plan's path)
	// that are new or whose visits, value, kind or exhaustion changed,
	// parents before children.
	Nodes []TreeNode `json:"nodes"`
	// Best is the ID of the node the best plan so far ends at (-1 when
	// none is in the tree); BestPlan that plan in PDDL syntax, BestGoal
	// whether it reaches the goal.
	Best     int      `json:"best"`
	BestPlan []string `json:"best_plan"`
	BestGoal bool     `json:"best_goal"`
	// Simulations and TreeNodes (all nodes created, reported or not) so
	// far; Final is set on the last call.
	Simulations int  `json:"simulations"`
	TreeNodes   int  `json:"tree_nodes"`
	Final       bool `json:"final,omitempty"`
}

// report is what OnTree last said of a node.
type report struct {
	sent      bool
	visits    int
	value     float64
	kind      kind
	exhausted bool
}

// nextID numbers a new node.
func (s *searcher) nextID() int32 {
	s.ids++
	return s.ids
}

// String names a kind as TreeNode.Kind does.
func (k kind) String() string {
	switch k {
	case goal:
		return "goal"
	case terminal:
		return "terminal"
	case dead:
		return "dead"
	}
	return "open"
}

// rawValue is a node's value before normalisation (see q), finite: 0
// stands for none.
func (s *searcher) rawValue(n *node) float64 {
	v := n.static
	switch {
	case n.kind == dead:
		v = 0
	case s.opts.Backup == BackupMax && n.phase == expanded && !math.IsInf(n.best, -1):
		v = n.best
	case s.opts.Backup == BackupMean && n.n > n.losses:
		v = n.w / float64(n.n-n.losses)
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0
	}
	return v
}

// edgeText is the text of a node's edge.
func (s *searcher) edgeText(n *node) string {
	var b []byte
	for _, t := range n.toks {
		switch {
		case s.idx.IsEnd(t):
			b = append(b, "<end>"...)
		default:
			b = append(b, s.idx.Text(t)...)
		}
	}
	return string(b)
}

// observe calls OnTree with the changes since its last call. It walks the
// visited part of the tree (unvisited nodes have no children), so its cost
// is linear in the visited nodes and their children.
func (s *searcher) observe(final bool) {
	s.lastTree = time.Now()
	d := TreeDelta{Best: -1, Simulations: s.stats.Simulations, TreeNodes: s.stats.Nodes, Final: final}
	var best *node
	switch {
	case s.solution != nil:
		d.BestPlan, d.BestGoal, best = s.sp.PlanLines(s.solution.cur), true, s.solution.at
	case s.bestOpen != nil:
		d.BestPlan, best = s.sp.PlanLines(s.bestOpen.cur), s.bestOpen
	}
	onPath := map[*node]bool{}
	if best != nil {
		d.Best = int(best.id)
		for x := best; x != nil; x = x.parent {
			onPath[x] = true
		}
	}
	stack := []*node{s.root}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.n == 0 && n != s.root && !onPath[n] {
			continue
		}
		v := s.rawValue(n)
		r := report{sent: true, visits: n.n, value: v, kind: n.kind, exhausted: n.exhausted}
		if n.reported != r {
			n.reported = r
			tn := TreeNode{ID: int(n.id), Parent: -1, Text: s.edgeText(n), Visits: n.n, Value: v, Prior: n.prior,
				Actions: n.cur.Len(), Kind: n.kind.String(), Exhausted: n.exhausted}
			if n.parent != nil {
				tn.Parent = int(n.parent.id)
			}
			d.Nodes = append(d.Nodes, tn)
		}
		// Children in reverse, so the walk reports them in order.
		for i := len(n.children) - 1; i >= 0; i-- {
			stack = append(stack, n.children[i])
		}
	}
	s.opts.OnTree(d)
}
