package envs

import (
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
)

// TestVirtualHomeSplits: the two splits are disjoint, cover the 338
// problems, put every task folder with at least two problems in both, and
// anything but "train" and "test" is refused.
func TestVirtualHomeSplits(t *testing.T) {
	ds := testenv.Datasets(t)
	all, err := NewWith("virtualhome", ds, Options{})
	if err != nil {
		t.Fatal(err)
	}
	folders := map[string]int{}
	for _, x := range all.Tasks() {
		folders[x.Type]++
	}
	seen := map[string]string{}
	types := map[string]map[string]bool{}
	for _, split := range VirtualHomeSplits {
		for _, partial := range []bool{false, true} {
			env, err := NewWith("virtualhome", ds, Options{Split: split, Partial: partial})
			if err != nil {
				t.Fatal(err)
			}
			s := env.(*Suite)
			if s.SplitName() != split || s.Capabilities().PartiallyObservable != partial {
				t.Fatalf("split %s partial %v: got split %q, partial %v", split, partial, s.SplitName(), s.Capabilities().PartiallyObservable)
			}
			if partial {
				continue
			}
			types[split] = map[string]bool{}
			for _, x := range env.Tasks() {
				if other, ok := seen[x.ID]; ok {
					t.Fatalf("%s is in %s and %s", x.ID, other, split)
				}
				seen[x.ID] = split
				types[split][x.Type] = true
			}
		}
	}
	if len(seen) != len(all.Tasks()) || len(seen) != 338 {
		t.Fatalf("splits cover %d problems, the suite has %d (want 338)", len(seen), len(all.Tasks()))
	}
	if n := len(VirtualHomeTestIDs()); n != 161 {
		t.Errorf("test split lists %d problems, want 161", n)
	}
	for f, n := range folders {
		if n >= 2 && (!types[VirtualHomeTrain][f] || !types[VirtualHomeTest][f]) {
			t.Errorf("task folder %s (%d problems) is not in both splits", f, n)
		}
	}
	for _, c := range []struct{ env, split string }{{"virtualhome", "valid_train"}, {"virtualhome", "Test"}, {"blocksworld", "train"}} {
		if _, err := NewWith(c.env, ds, Options{Split: c.split}); err == nil || !strings.Contains(err.Error(), "split") {
			t.Errorf("%s split %q: error %v, want one naming the split", c.env, c.split, err)
		}
	}
}
