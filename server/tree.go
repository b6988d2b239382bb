package server

import "github.com/nesy-dev/nesy/mcts"

// maxTreeNodes bounds the tree nodes one streamed request reports: beyond
// it, nodes not yet reported are left out of the "search" events (the
// ones already sent keep being updated, and the best plan's path is always
// sent), so a long search cannot flood its client.
const maxTreeNodes = 20000

// treeEvents returns the mcts OnTree callback of a streamed request with
// "tree": true: each tree delta becomes a "search" event with the
// request's counters. It runs on the search's goroutine, which owns sent.
func treeEvents(job *planJob, lm *requestLM) func(mcts.TreeDelta) {
	sent := map[int]bool{}
	return func(d mcts.TreeDelta) {
		if len(sent)+len(d.Nodes) > maxTreeNodes {
			d.Nodes = capTree(d, sent)
		}
		for _, n := range d.Nodes {
			sent[n.ID] = true
		}
		job.emit(PlanEvent{Event: "search", Tree: &d, EvaluatedTokens: lm.evaluated.Load(), ModelCalls: lm.calls.Load()})
	}
}

// capTree keeps the nodes of d already sent, the best plan's path, and
// new nodes while fewer than maxTreeNodes have been sent.
func capTree(d mcts.TreeDelta, sent map[int]bool) []mcts.TreeNode {
	parent := make(map[int]int, len(d.Nodes))
	for _, n := range d.Nodes {
		parent[n.ID] = n.Parent
	}
	onPath := map[int]bool{}
	for id := d.Best; id >= 0; {
		onPath[id] = true
		p, ok := parent[id]
		if !ok {
			break
		}
		id = p
	}
	room := maxTreeNodes - len(sent)
	var kept []mcts.TreeNode
	for _, n := range d.Nodes {
		switch {
		case sent[n.ID], onPath[n.ID]:
		case room > 0:
			room--
		default:
			continue
		}
		kept = append(kept, n)
	}
	return kept
}
