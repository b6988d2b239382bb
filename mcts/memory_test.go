package mcts

import (
	"math"
	"runtime"
	"testing"

	"github.com/nesy-dev/nesy/constraint"
	"github.com/nesy-dev/nesy/models"
)

// TestMaxNodes: a node budget ends the search with StopMemory, keeping a
// checked plan, at most a batch of expansions past the budget.
func TestMaxNodes(t *testing.T) {
	lm, idx := loadModel(t, modelPath(t, "tiny", tinySpec), models.Options{})
	st := newSetup(t, lm, idx, inlineTask(t, bwWide), constraint.Options{})
	tests := []struct {
		maxNodes, batch int
	}{
		{50, 1}, {200, 16}, {1000, 4},
	}
	for _, tt := range tests {
		res := st.search(t, Options{MaxNodes: tt.maxNodes, Batch: tt.batch, Exhaust: true})
		width := DefaultWidth
		if res.Stop != StopMemory || res.Stats.Nodes < tt.maxNodes || res.Stats.Nodes > tt.maxNodes+tt.batch*width {
			t.Errorf("MaxNodes %d, batch %d: stop %s after %d nodes", tt.maxNodes, tt.batch, res.Stop, res.Stats.Nodes)
		}
		checkResult(t, st, res)
	}
}

// TestNodesFor: a memory budget in bytes becomes a node budget of
// NodeBytes per node; no budget stays no bound, and a positive budget below
// one node still bounds the search.
func TestNodesFor(t *testing.T) {
	for _, tc := range []struct {
		bytes int64
		want  int
	}{
		{0, 0}, {-5, 0}, {1, 1}, {NodeBytes - 1, 1}, {NodeBytes, 1}, {10*NodeBytes + 1, 10}, {1 << 30, (1 << 30) / NodeBytes},
		{1 << 62, math.MaxInt32},
	} {
		if got := NodesFor(tc.bytes); got != tc.want {
			t.Errorf("NodesFor(%d) = %d, want %d", tc.bytes, got, tc.want)
		}
	}
}

// TestNodeBytes: NodeBytes, by which a server turns a request's memory
// budget into MaxNodes, bounds the live heap a search holds per node on a
// real ALFWorld task (the largest states of the suites; the tree
// observation of a live view included).
func TestNodeBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("a 1,500-simulation search")
	}
	lm, idx := loadModel(t, modelPath(t, "qwen3", testModelSpec), models.Options{ContextLength: 8192})
	st := newSetup(t, lm, idx, loadTask(t, "", alfworldGame(t, 0)), constraint.Options{StopAtGoal: true})
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	worst, next := 0.0, 500
	opts := Options{Simulations: 1500, Exhaust: true, TreeEvery: 1, OnTree: func(d TreeDelta) {
		if d.TreeNodes < next {
			return
		}
		next = d.TreeNodes + 500
		runtime.GC()
		runtime.ReadMemStats(&ms)
		perNode := float64(int64(ms.HeapAlloc)-int64(base)) / float64(d.TreeNodes)
		worst = max(worst, perNode)
	}}
	res := st.search(t, opts)
	if res.Stats.Nodes < 1000 {
		t.Fatalf("only %d nodes: too few to measure", res.Stats.Nodes)
	}
	t.Logf("%d nodes, %d simulations: at most %.0f live bytes per node (NodeBytes %d)", res.Stats.Nodes, res.Stats.Simulations, worst, NodeBytes)
	if worst > NodeBytes {
		t.Errorf("%.0f live bytes per node, over NodeBytes = %d", worst, NodeBytes)
	}
}
