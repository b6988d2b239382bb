package train

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// packExamples are two examples of one scene whose prompts share their
// first five tokens, one of another scene, and a third of the first scene
// (its prompt ends at 7, where a DAgger prefix begins).
func packExamples() []Example {
	return []Example{
		{ID: "a", Scene: "s", Tokens: []int32{1, 4, 7, 2, 9, 3, 5, 6, 7, 8}, PlanStart: 6},
		{ID: "b", Scene: "s", Tokens: []int32{1, 4, 7, 2, 9, 10, 11, 2, 6}, PlanStart: 7,
			Allowed: [][]int32{{2, 3}, {6, 1}}},
		{ID: "o", Scene: "t", Tokens: []int32{1, 5, 5, 3, 2}, PlanStart: 3},
		{ID: "c", Scene: "s", Tokens: []int32{1, 4, 7, 2, 9, 3, 5, 11, 8, 4, 6}, PromptEnd: 7, PlanStart: 9},
	}
}

// TestPack: examples are packed by scene on the prompt tokens they share,
// within the most examples and positions asked, and every example's loss
// rows survive.
func TestPack(t *testing.T) {
	xs := packExamples()
	rowsOf := func(its []item) int {
		n := 0
		for _, it := range its {
			n += len(it.rows)
		}
		return n
	}
	want := 0
	for _, x := range xs {
		want += len(x.Tokens) - x.PlanStart
	}
	tests := []struct {
		name      string
		seq, most int
		items     []int // examples per item
		shared    int   // the first item's shared tokens
	}{
		{"one per item", 64, 1, []int{1, 1, 1, 1}, 0},
		{"whole scene", 64, 8, []int{3, 1}, 5},
		{"at most two", 64, 2, []int{2, 1, 1}, 5},
		{"positions bound", 14, 8, []int{2, 1, 1}, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			its := pack(xs, tc.seq, tc.most)
			if len(its) != len(tc.items) {
				t.Fatalf("%d items, want %d", len(its), len(tc.items))
			}
			for i, it := range its {
				branches := 1
				if it.branch != nil {
					branches = int(it.branch[len(it.branch)-1])
				}
				if branches != tc.items[i] {
					t.Errorf("item %d holds %d examples, want %d", i, branches, tc.items[i])
				}
				if len(it.tokens) > tc.seq {
					t.Errorf("item %d has %d tokens, more than %d", i, len(it.tokens), tc.seq)
				}
			}
			if tc.shared > 0 {
				n := 0
				for _, b := range its[0].branch {
					if b == 0 {
						n++
					}
				}
				if n != tc.shared {
					t.Errorf("the first item shares %d tokens, want %d", n, tc.shared)
				}
			}
			if got := rowsOf(its); got != want {
				t.Errorf("%d loss rows, want %d", got, want)
			}
		})
	}
}

// TestPackedEqualsSeparate: a packed item's loss and gradients are the sums
// of its examples' alone (the branches see the shared prompt and their own
// tokens only, at the positions they have alone).
func TestPackedEqualsSeparate(t *testing.T) {
	p, err := NewParams(Config{Vocab: 12, Dim: 16, Layers: 2, Heads: 2, FFN: 16, Tied: true}, 3)
	if err != nil {
		t.Fatal(err)
	}
	xs := packExamples()
	its := pack(xs, 64, 8)
	if its[0].branch == nil {
		t.Fatal("the scene's examples were not packed")
	}
	r, err := newRunner(p, 32, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	r.sync()
	grads := func() [][]float32 {
		g := make([][]float32, len(p.List))
		for i, q := range p.List {
			g[i] = make([]float32, len(q.Data))
		}
		return g
	}
	alone, packedG := grads(), grads()
	lossAlone := 0.0
	for _, x := range []Example{xs[0], xs[1], xs[3]} {
		out := newExOut(p)
		l, _, err := r.run(itemOf(x), 1, out)
		if err != nil {
			t.Fatal(err)
		}
		lossAlone += l
		out.addTo(alone, p.Config.Dim)
	}
	out := newExOut(p)
	lossPacked, n, err := r.run(its[0], 1, out)
	if err != nil {
		t.Fatal(err)
	}
	out.addTo(packedG, p.Config.Dim)
	// The runner's graph goes back to one causal sequence after a packed
	// item: the losses alone are the same again.
	again := 0.0
	for _, x := range []Example{xs[0], xs[1], xs[3]} {
		l, _, err := r.run(itemOf(x), 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		again += l
	}
	if again != lossAlone {
		t.Errorf("alone after a packed item: loss %.6f, before %.6f", again, lossAlone)
	}
	if n != 4+2+2 {
		t.Errorf("%d loss rows, want 8", n)
	}
	if math.Abs(lossPacked-lossAlone) > 1e-4*math.Abs(lossAlone) {
		t.Errorf("packed loss %.6f, alone %.6f", lossPacked, lossAlone)
	}
	for i, q := range p.List {
		for j := range alone[i] {
			a, b := float64(alone[i][j]), float64(packedG[i][j])
			if math.Abs(a-b) > 1e-4+1e-3*math.Abs(a) {
				t.Fatalf("%s[%d]: packed gradient %.6f, alone %.6f", q.Name, j, b, a)
			}
		}
	}
}

// TestEpochsRotate checks which sequences each epoch holds, by hand: the
// fixed ones every epoch, the pool in turns that wrap around, and no
// change at all where rotating would not drop anything.
func TestEpochsRotate(t *testing.T) {
	ids := []string{"a1", "g1", "a2", "g2", "g3", "g4", "g5"}
	items := make([]item, len(ids))
	for i, id := range ids {
		items[i] = item{id: id}
	}
	gen := func(id string) bool { return strings.HasPrefix(id, "g") }
	tests := []struct {
		name  string
		turn  int
		match func(string) bool
		want  [][]string // epochs 0, 1, 2
	}{
		{"off", 0, gen, [][]string{ids, ids, ids}},
		{"no match", 2, nil, [][]string{ids, ids, ids}},
		{"pool not larger", 5, gen, [][]string{ids, ids, ids}},
		{"turns of two", 2, gen, [][]string{{"a1", "a2", "g1", "g2"}, {"a1", "a2", "g3", "g4"}, {"a1", "a2", "g5", "g1"}}},
		{"turns of four", 4, gen, [][]string{{"a1", "a2", "g1", "g2", "g3", "g4"}, {"a1", "a2", "g5", "g1", "g2", "g3"}, {"a1", "a2", "g4", "g5", "g1", "g2"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEpochs(items, tc.turn, tc.match)
			for n, want := range tc.want {
				if e.size != len(want) {
					t.Fatalf("epoch size %d, want %d", e.size, len(want))
				}
				var got []string
				for i := range e.size {
					got = append(got, e.at(n, i).id)
				}
				if !slices.Equal(got, want) {
					t.Errorf("epoch %d holds %v, want %v", n, got, want)
				}
			}
		})
	}
}
