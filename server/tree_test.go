package server

import (
	"context"
	"slices"
	"testing"

	"github.com/nesy-dev/nesy/mcts"
)

// TestPlanStreamTree: with "tree": true a streamed search sends its tree
// in "search" events: the root first, parents before children, and a last
// best plan equal to the result's plan.
func TestPlanStreamTree(t *testing.T) {
	ts := startServer(t, Options{})
	tests := []struct {
		name string
		req  map[string]any
		// wantTree: search events carry trees.
		wantTree bool
	}{
		{"cmcts", map[string]any{"method": "cmcts", "tree": true, "search": map[string]any{"seed": 1}}, true},
		{"cmcts without tree", map[string]any{"method": "cmcts", "search": map[string]any{"seed": 1}}, false},
		{"cgreedy ignores tree", map[string]any{"method": "cgreedy", "tree": true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := map[string]any{"domain": bwDomain, "problem": bwShort, "seconds": 60, "max_actions": 6}
			for k, v := range tt.req {
				req[k] = v
			}
			resp := postStream(t, context.Background(), ts, req)
			defer resp.Body.Close()
			evs := readEvents(t, resp)
			last := evs[len(evs)-1]
			if last.Event != "result" || last.Result == nil {
				t.Fatalf("last event %+v", last)
			}
			known := map[int]bool{}
			var trees []*mcts.TreeDelta
			for _, ev := range evs {
				if ev.Tree == nil {
					continue
				}
				if ev.Event != "search" {
					t.Errorf("tree on a %q event", ev.Event)
				}
				trees = append(trees, ev.Tree)
				for _, n := range ev.Tree.Nodes {
					if n.ID != 0 && !known[n.Parent] {
						t.Fatalf("node %d before its parent %d", n.ID, n.Parent)
					}
					known[n.ID] = true
				}
			}
			if (len(trees) > 0) != tt.wantTree {
				t.Fatalf("%d tree events, want some: %v", len(trees), tt.wantTree)
			}
			if !tt.wantTree {
				return
			}
			final := trees[len(trees)-1]
			if !final.Final || !slices.Equal(final.BestPlan, last.Result.Plan) || final.BestGoal != last.Result.GoalReached || !known[0] {
				t.Errorf("final tree best %v goal %v final %v; result %v", final.BestPlan, final.BestGoal, final.Final, last.Result.Plan)
			}
		})
	}
}

// TestCapTree pins which nodes a capped tree event keeps.
func TestCapTree(t *testing.T) {
	node := func(id, parent int) mcts.TreeNode { return mcts.TreeNode{ID: id, Parent: parent} }
	full := map[int]bool{}
	for i := range maxTreeNodes {
		full[i] = true
	}
	almost := map[int]bool{}
	for i := range maxTreeNodes - 1 {
		almost[i] = true
	}
	tests := []struct {
		name string
		d    mcts.TreeDelta
		sent map[int]bool
		want []int
	}{
		{"room left", mcts.TreeDelta{Best: -1, Nodes: []mcts.TreeNode{node(0, -1), node(1, 0)}}, map[int]bool{}, []int{0, 1}},
		{"updates kept, new dropped", mcts.TreeDelta{Best: -1, Nodes: []mcts.TreeNode{node(5, 0), node(maxTreeNodes+1, 5)}}, full, []int{5}},
		{"best path kept", mcts.TreeDelta{Best: maxTreeNodes + 2, Nodes: []mcts.TreeNode{node(maxTreeNodes+1, 0), node(maxTreeNodes+2, maxTreeNodes+1), node(maxTreeNodes+3, 0)}}, full, []int{maxTreeNodes + 1, maxTreeNodes + 2}},
		{"one slot", mcts.TreeDelta{Best: -1, Nodes: []mcts.TreeNode{node(maxTreeNodes+1, 0), node(maxTreeNodes+2, 0)}}, almost, []int{maxTreeNodes + 1}},
	}
	for _, tt := range tests {
		var got []int
		for _, n := range capTree(tt.d, tt.sent) {
			got = append(got, n.ID)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: kept %v, want %v", tt.name, got, tt.want)
		}
	}
}
