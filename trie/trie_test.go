package trie

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestNewActionTrieErrors(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{"empty action", Spec{Actions: []string{"look", ""}}, "action 1 is empty"},
		{"action contains separator", Spec{Actions: []string{"go to\ncabinet 1"}}, `contains the separator "\n"`},
		{"action contains custom separator", Spec{Actions: []string{"look; then"}, Separator: "; "}, "contains the separator"},
		{"end marker starts with an action", Spec{Actions: []string{"look"}, EndAllowed: true, End: "look\nEND"}, `starts with action 0's text`},
		{"end marker prefix of an action", Spec{Actions: []string{"look"}, EndAllowed: true, End: "lo"}, `is a prefix of action 0's text`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewActionTrie(tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	// An overlapping end marker is fine while ending is not allowed.
	if _, err := NewActionTrie(Spec{Actions: []string{"look"}, End: "lo"}); err != nil {
		t.Errorf("end marker checked while ending is not allowed: %v", err)
	}
}

func TestActionTrieQueries(t *testing.T) {
	spec := Spec{
		Actions:    []string{"go to cabinet 10", "go to cabinet 1", "open cabinet 1", "go to cabinet 1", "done", "go to café 1"},
		EndAllowed: true,
		End:        "done\n",
	}
	at, err := NewActionTrie(spec)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		partial    string
		completed  int // -1: not completed
		end        bool
		consistent []int32
	}{
		{"", -1, false, []int32{4, 1, 3, 0, 5, 2}},
		{"go to cabinet 1", -1, false, []int32{1, 3, 0}},
		{"go to cabinet 1\n", 1, false, []int32{1, 3}},
		{"go to cabinet 10\n", 0, false, []int32{0}},
		{"go to caf\xc3", -1, false, []int32{5}},
		{"done\n", 4, true, []int32{4}},
		{"open cabinet 1\n", 2, false, []int32{2}},
	}
	for _, tc := range tests {
		t.Run(tc.partial, func(t *testing.T) {
			n := at.Walk(Root, []byte(tc.partial))
			if n == NoNode {
				t.Fatal("walk left the trie")
			}
			if got := at.Text(n, nil); string(got) != tc.partial {
				t.Errorf("Text = %q", got)
			}
			a, ok := at.Completed(n)
			if a != tc.completed || ok != (tc.completed >= 0) {
				t.Errorf("Completed = %d %v, want %d", a, ok, tc.completed)
			}
			if at.IsEnd(n) != tc.end {
				t.Errorf("IsEnd = %v", at.IsEnd(n))
			}
			if got := at.Consistent(n, nil); !slices.Equal(got, tc.consistent) {
				t.Errorf("Consistent = %v, want %v", got, tc.consistent)
			}
			if at.NumConsistent(n) != len(tc.consistent) {
				t.Errorf("NumConsistent = %d, want %d", at.NumConsistent(n), len(tc.consistent))
			}
			if ok && !at.IsLeaf(n) {
				t.Error("completed node is not a leaf")
			}
		})
	}
	resolve := []struct {
		s    string
		want int
		all  []int32
	}{
		{"go to cabinet 1", 1, []int32{1, 3}},
		{"go to cabinet 1\n", 1, []int32{1, 3}},
		{"go to cabinet", -1, nil},
		{"go to cabinet 100", -1, nil},
		{"done", 4, []int32{4}},
		{"", -1, nil},
	}
	for _, tc := range resolve {
		a, ok := at.Resolve(tc.s)
		if a != tc.want || ok != (tc.want >= 0) {
			t.Errorf("Resolve(%q) = %d %v, want %d", tc.s, a, ok, tc.want)
		}
		if got := at.Lookup(tc.s, nil); !slices.Equal(got, tc.all) {
			t.Errorf("Lookup(%q) = %v, want %v", tc.s, got, tc.all)
		}
	}
	for _, n := range []Node{NoNode, EndToken, Node(at.Nodes())} {
		if at.Walk(n, []byte("go")) != NoNode || at.Step(n, 'g') != NoNode || at.NumConsistent(n) != 0 || at.IsEnd(n) {
			t.Errorf("invalid node %d accepted", n)
		}
		if _, ok := at.Completed(n); ok {
			t.Errorf("invalid node %d completed", n)
		}
	}
	if at.Walk(Root, []byte("go to x")) != NoNode {
		t.Error("walk off the trie did not give NoNode")
	}
}

func TestNewIndexErrors(t *testing.T) {
	text := [][]byte{[]byte("a"), []byte("b")}
	if _, err := NewIndex(text, []bool{false}, IndexOptions{}); err == nil || !strings.Contains(err.Error(), "2 token texts but 1 special flags") {
		t.Errorf("length mismatch: %v", err)
	}
	for _, id := range []int32{-1, 2} {
		_, err := NewIndex(text, []bool{false, false}, IndexOptions{EndTokens: []int32{id}})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("end token %d outside", id)) {
			t.Errorf("end token %d: %v", id, err)
		}
	}
}

// TestSetSemantics pins down the Set: membership, Next, masking, reuse with
// a different vocabulary size, and end tokens only at the root.
func TestSetSemantics(t *testing.T) {
	text := [][]byte{[]byte("g"), []byte("o"), []byte("go"), []byte(" to"), []byte("<eos>"), []byte("go to x\n"), []byte("x\n"), []byte("x"), []byte("\n")}
	special := []bool{false, false, false, false, true, false, false, false, false}
	x, err := NewIndex(text, special, IndexOptions{EndTokens: []int32{4, 4}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x.EndTokens(), []int32{4}) || !x.IsEnd(4) || x.IsText(4) || !x.IsText(2) || x.TextTokens() != 8 {
		t.Fatalf("end tokens %v, text tokens %d", x.EndTokens(), x.TextTokens())
	}
	at, err := NewActionTrie(Spec{Actions: []string{"go to x"}, EndAllowed: true})
	if err != nil {
		t.Fatal(err)
	}
	var set Set
	x.Allowed(at, Root, &set)
	want := map[int32]string{0: "g", 2: "go", 5: "go to x\n", 4: ""}
	if set.Len() != len(want) {
		t.Fatalf("root allows %v", set.IDs)
	}
	for id, full := range want {
		next := set.NextOf(id)
		if !set.Has(id) || next == NoNode {
			t.Fatalf("token %d not allowed", id)
		}
		if full == "" {
			if next != EndToken {
				t.Errorf("end token leads to %d", next)
			}
			continue
		}
		if got := at.Text(next, nil); string(got) != full {
			t.Errorf("token %d leads to %q, want %q", id, got, full)
		}
	}
	if set.IDs[len(set.IDs)-1] != 4 {
		t.Errorf("end token not last: %v", set.IDs)
	}
	logits := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	set.Mask(logits)
	for id, l := range logits {
		if set.Has(int32(id)) != !math.IsInf(float64(l), -1) {
			t.Errorf("logit %d = %v after mask", id, l)
		}
	}
	// After "go to ", the end token is no longer allowed and bits are reset.
	if n := x.AllowedAfter(at, []byte("go to "), &set); n == NoNode || set.Has(4) || set.Has(0) || !set.Has(7) || !set.Has(6) || set.Len() != 2 || set.count() != 2 {
		t.Errorf("after %q: %v", "go to ", set.IDs)
	}
	if set.NextOf(0) != NoNode || set.NextOf(-3) != NoNode || set.Has(1<<20) {
		t.Error("absent tokens reported")
	}
	// Off the trie: empty.
	if n := x.AllowedAfter(at, []byte("gx"), &set); n != NoNode || set.Len() != 0 || set.count() != 0 {
		t.Errorf("off the trie: node %d, %v", n, set.IDs)
	}
	// The same Set used with a larger vocabulary is resized.
	big := append(slices.Clone(text), make([][]byte, 200)...)
	bigSpecial := append(slices.Clone(special), make([]bool, 200)...)
	big[150] = []byte("go to x")
	y, err := NewIndex(big, bigSpecial, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	y.Allowed(at, Root, &set)
	if !set.Has(150) || set.Has(4) || len(set.Bits()) != (len(big)+63)/64 {
		t.Errorf("resized set: %v, %d words", set.IDs, len(set.Bits()))
	}
}

func TestCache(t *testing.T) {
	c := NewCache[string](2)
	builds := 0
	spec := func(actions ...string) func() (Spec, error) {
		return func() (Spec, error) { builds++; return Spec{Actions: actions}, nil }
	}
	a1, err := c.Get("a", spec("look"))
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := c.Get("a", spec("other")); a != a1 || builds != 1 {
		t.Fatalf("hit rebuilt: builds %d", builds)
	}
	c.Get("b", spec("b"))
	c.Get("a", spec("look")) // a is now the most recent
	c.Get("c", spec("c"))    // evicts b
	if st := c.Stats(); st.Len != 2 || st.Size != 2 || st.Hits != 2 || st.Misses != 3 {
		t.Errorf("stats %+v", st)
	}
	builds = 0
	if a, _ := c.Get("a", spec("x")); a != a1 || builds != 0 {
		t.Error("a was evicted")
	}
	if _, _ = c.Get("b", spec("b")); builds != 1 {
		t.Error("b was not evicted")
	}
	boom := errors.New("boom")
	if _, err := c.Get("d", func() (Spec, error) { return Spec{}, boom }); !errors.Is(err, boom) {
		t.Errorf("spec error: %v", err)
	}
	if _, err := c.Get("e", spec("")); err == nil {
		t.Error("bad spec accepted")
	}
	if st := c.Stats(); st.Len != 2 {
		t.Errorf("failed builds cached: %+v", st)
	}
	if NewCache[int](0).Stats().Size != DefaultCacheSize {
		t.Error("default size")
	}
}

func TestCacheConcurrent(t *testing.T) {
	c := NewCache[int](8)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				k := (i * (g + 1)) % 16
				at, err := c.Get(k, func() (Spec, error) { return Spec{Actions: []string{fmt.Sprint("a", k)}}, nil })
				if err != nil || at.Action(0) != fmt.Sprint("a", k) {
					t.Errorf("key %d: %v %v", k, at, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if st := c.Stats(); st.Len > 8 || st.Hits+st.Misses != 8*200 {
		t.Errorf("stats %+v", st)
	}
}
