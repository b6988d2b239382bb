package models

import (
	"context"
	"fmt"
	"testing"

	"github.com/ollama/ollama/ml"

	"github.com/nesy-dev/nesy/models/ggmlthread"
)

// TestForkCopies: the engine copies a pass's new forks' recurrent states
// itself (forkCopier, found in the pinned Ollama's cache), with the same
// logits as the cache's own fork-by-fork copies (in a pass and in the
// next, which reads the states the first wrote) and far fewer graph nodes;
// a fork cut below its fork point after its first pass (it holds none of
// its source's checkpoints) recomputes and continues exactly; every slot
// returns to the free list once the sequences are released.
func TestForkCopies(t *testing.T) {
	for _, name := range []string{"qwen35", "qwen35-deep", "qwen35moe"} {
		t.Run(name, func(t *testing.T) {
			const n = 16
			type run struct {
				nodes  int
				logits [][]float32
			}
			var runs [2]run
			for k, own := range []bool{true, false} {
				e, src, prompt := promptedEngine(t, hybridSpecs()[name], 32, 5, 24)
				if e.forks == nil {
					t.Fatal("the engine found no fork copier in the recurrent cache")
				}
				free := len(*e.forks.freeSlots)
				if !own {
					e.forks = nil
				}
				e.inspect = func(c ml.Context) {
					if runs[k].nodes == 0 { // the first pass: every fork fresh
						_, runs[k].nodes, _ = ggmlthread.Objects(c)
					}
				}
				v := e.Info().VocabSize
				var reqs []EvalRequest
				for i := range n {
					f, err := e.Fork(src, len(prompt))
					if err != nil {
						t.Fatal(err)
					}
					reqs = append(reqs, EvalRequest{Seq: f, Tokens: testTokens(50+i, 1+i%3, v)})
					if i == n/2 {
						// The source goes on too: its slot is shared as
						// well, and the pass's slots are not contiguous.
						reqs = append(reqs, EvalRequest{Seq: src, Tokens: testTokens(70, 2, v)})
					}
				}
				// Two steps: the second reads the states the first wrote.
				for step := range 2 {
					if step == 1 {
						for i := range reqs {
							reqs[i].Tokens = testTokens(80+i, 1, v)
						}
					}
					calls := e.Stats().ModelCalls
					res, err := e.Eval(context.Background(), reqs)
					if err != nil {
						t.Fatal(err)
					}
					if p := e.Stats().ModelCalls - calls; step == 0 && p != 1 {
						t.Fatalf("%d sequences took %d passes, want 1", len(reqs), p)
					}
					for _, r := range res {
						runs[k].logits = append(runs[k].logits, r.Logits[len(r.Logits)-1])
					}
				}
				if own {
					// Cut fork 0 inside the prompt, then continue it.
					f := reqs[0].Seq
					if err := e.Truncate(f, 10); err != nil {
						t.Fatal(err)
					}
					more := testTokens(99, 3, v)
					got, err := e.Eval(context.Background(), []EvalRequest{{Seq: f, Tokens: more, AllLogits: true}})
					if err != nil {
						t.Fatal(err)
					}
					hist := append(append([]int32{}, prompt[:10]...), more...)
					want := evalAlone(t, e, hist)[10:]
					for i := range more {
						assertClose(t, fmt.Sprintf("truncated fork, position %d", i), got[0].Logits[i], want[i], tolFor(e))
					}
					for _, r := range reqs {
						e.Release(r.Seq) // src among them
					}
					if got := len(*e.forks.freeSlots); got != free+1 {
						t.Errorf("%d free slots after releasing every sequence, want %d", got, free+1)
					}
				}
			}
			t.Logf("16 fresh forks and their source in one pass: %d graph nodes with one copy per buffer, %d with the cache's copies per fork", runs[0].nodes, runs[1].nodes)
			if runs[0].nodes == 0 || runs[0].nodes >= runs[1].nodes {
				t.Errorf("graph nodes: %d with one copy per buffer, %d with copies per fork", runs[0].nodes, runs[1].nodes)
			}
			for i := range runs[0].logits {
				assertClose(t, fmt.Sprintf("fork %d", i), runs[0].logits[i], runs[1].logits[i], 0)
			}
		})
	}
}
