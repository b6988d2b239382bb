package mcts

import (
	"slices"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/constraint"
	"github.com/nesy-dev/nesy/models"
)

// TestOnTree checks the tree deltas a live view gets: the root first,
// parents before children, visits never shrinking, one final delta whose
// best plan is the result's, a best node whose path spells that plan, and
// a search unchanged by being observed.
func TestOnTree(t *testing.T) {
	lm, idx := loadModel(t, modelPath(t, "tiny", tinySpec), models.Options{})
	tests := []struct {
		name    string
		problem string
		opts    Options
	}{
		{"goal", bwReverse, Options{Simulations: 3000}},
		{"budget", bwReverse, Options{Simulations: 150, Exhaust: true}},
		{"every batch", bwTower, Options{Simulations: 3000, TreeEvery: 1}},
		{"mean backup", bwReverse, Options{Simulations: 3000, Backup: BackupMean, TreeEvery: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newSetup(t, lm, idx, inlineTask(t, tt.problem), constraint.Options{})
			plain := st.search(t, tt.opts)

			var deltas []TreeDelta
			opts := tt.opts
			opts.OnTree = func(d TreeDelta) { deltas = append(deltas, d) }
			res := st.search(t, opts)
			if !slices.Equal(res.Plan, plain.Plan) || res.Stats.Nodes != plain.Stats.Nodes || res.Stats.Simulations != plain.Stats.Simulations {
				t.Errorf("observed search differs: %v %d nodes, plain %v %d nodes", res.Texts, res.Stats.Nodes, plain.Texts, plain.Stats.Nodes)
			}
			if len(deltas) < 2 {
				t.Fatalf("%d deltas", len(deltas))
			}
			if n := deltas[0].Nodes; len(n) == 0 || n[0].ID != 0 || n[0].Parent != -1 {
				t.Fatalf("first delta does not start with the root: %+v", n)
			}
			nodes := map[int]TreeNode{}
			for i, d := range deltas {
				if d.Final != (i == len(deltas)-1) {
					t.Errorf("delta %d of %d: final %v", i, len(deltas), d.Final)
				}
				for _, n := range d.Nodes {
					if _, ok := nodes[n.Parent]; n.ID != 0 && !ok {
						t.Fatalf("node %d reported before its parent %d", n.ID, n.Parent)
					}
					if old, ok := nodes[n.ID]; ok && (n.Visits < old.Visits || n.Parent != old.Parent || n.Text != old.Text) {
						t.Errorf("node %d went from %+v to %+v", n.ID, old, n)
					}
					nodes[n.ID] = n
				}
			}
			last := deltas[len(deltas)-1]
			if !slices.Equal(last.BestPlan, res.Lines) || last.BestGoal != res.GoalReached || last.Simulations != res.Stats.Simulations {
				t.Errorf("final delta best %v goal %v sims %d; result %v goal %v sims %d", last.BestPlan, last.BestGoal, last.Simulations, res.Lines, res.GoalReached, res.Stats.Simulations)
			}
			if last.Best < 0 {
				return // a rollout's plan ends at no tree node
			}
			var path []string
			for id := last.Best; id != -1; id = nodes[id].Parent {
				n, ok := nodes[id]
				if !ok {
					t.Fatalf("best node %d's path is not reported", id)
				}
				path = append(path, n.Text)
			}
			slices.Reverse(path)
			want := ""
			for _, x := range res.Texts {
				want += x + "\n"
			}
			if got := strings.Join(path, ""); !strings.HasPrefix(got, want) || nodes[last.Best].Actions != len(res.Plan) {
				t.Errorf("best node %d spells %q with %d actions; plan %q", last.Best, got, nodes[last.Best].Actions, want)
			}
		})
	}
}
