package server

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/constraint"
)

// bwProblemN is a Blocksworld problem over n blocks stacked in one tower,
// the goal its reverse: 2n^2 ground actions.
func bwProblemN(n int) string {
	var objs, init, goal strings.Builder
	for i := range n {
		fmt.Fprintf(&objs, "b%d ", i)
		if i == 0 {
			init.WriteString("(ontable b0) ")
		} else {
			fmt.Fprintf(&init, "(on b%d b%d) ", i, i-1)
			fmt.Fprintf(&goal, "(on b%d b%d) ", i-1, i)
		}
	}
	return fmt.Sprintf("(define (problem bw-%d) (:domain blocksworld-4ops) (:objects %s) (:init (handempty) (clear b%d) %s) (:goal (and %s)))",
		n, objs.String(), n-1, init.String(), goal.String())
}

// TestActionBytes: ActionBytes, by which a request's memory budget bounds
// its ground actions, bounds the live heap a request's task holds per
// action: the ground task, its heuristic, its lexicon and the token trie
// of the constraint (the model's vocabulary index is the model's, not the
// request's, and is built first).
func TestActionBytes(t *testing.T) {
	ts := startServer(t, Options{MaxGroundActions: 1 << 20})
	idx, err := constraint.NewIndex(ts.engine())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{20, 60} {
		req := PlanRequest{Domain: bwDomain, Problem: bwProblemN(n), Heuristic: "ff"}
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		task, lex, _, h, err := ts.s.buildTask(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		sp, err := constraint.New(idx, lex, constraint.Options{})
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		perAction := float64(int64(ms.HeapAlloc)-int64(base)) / float64(len(task.Actions))
		t.Logf("%d blocks: %d actions, %.0f live bytes per action (ActionBytes %d)", n, len(task.Actions), perAction, ActionBytes)
		if perAction > ActionBytes {
			t.Errorf("%d blocks: %.0f live bytes per action, over ActionBytes = %d", n, perAction, ActionBytes)
		}
		runtime.KeepAlive(h)
		runtime.KeepAlive(sp)
	}
}

// TestRequestMemory: a request over the memory budget is refused while
// grounding with 422 too_many_actions naming the budget, and a search
// that fills what the task left of the budget stops with stop_reason
// "memory", keeping its best plan.
func TestRequestMemory(t *testing.T) {
	budget := int64(8 << 20) // 2048 actions, or ~1000 nodes
	ts := startServer(t, Options{RequestMemory: budget})

	// 60 blocks: 7,200 actions, over the 2,048 the budget holds.
	status, _, body := ts.do("POST", "/v1/plan", map[string]any{"domain": bwDomain, "problem": bwProblemN(60), "method": "cgreedy"})
	e := apiErr(t, body)
	if status != http.StatusUnprocessableEntity || e.Code != CodeTooManyActions || !strings.Contains(e.Message, "2048") {
		t.Fatalf("60 blocks under an 8 MiB budget: %d %s %q", status, e.Code, e.Message)
	}

	// 12 blocks: 288 actions fit; the search may grow 1,000 nodes at most
	// (plus a batch), far fewer than it needs to reverse a 12-block tower.
	status, _, body = ts.do("POST", "/v1/plan", map[string]any{"domain": bwDomain, "problem": bwProblemN(12), "method": "cmcts", "seconds": 120})
	if status != http.StatusUnprocessableEntity {
		t.Fatalf("12 blocks: status %d: %s", status, body)
	}
	e = apiErr(t, body)
	if e.Code != CodeBudgetExhausted || e.Result == nil || e.Result.StopReason != "memory" || !e.Result.Valid {
		t.Fatalf("12 blocks: %s %q %+v", e.Code, e.Message, e.Result)
	}
}
