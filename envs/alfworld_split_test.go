package envs

import (
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
)

// Options.Split opens ALFWorld's training games (tuning happens there) or
// the evaluation split, and refuses anything else.
func TestALFWorldSplits(t *testing.T) {
	ds := testenv.Datasets(t)
	for _, c := range []struct {
		split, want string
		tasks       int
	}{
		{"", "valid_unseen", 134},
		{"valid_unseen", "valid_unseen", 134},
		{"valid_train", "valid_train", 200},
	} {
		env, err := NewWith("alfworld", ds, Options{Split: c.split})
		if err != nil {
			t.Fatal(err)
		}
		if got := env.(*ALFWorld).Split(); got != c.want || len(env.Tasks()) != c.tasks {
			t.Fatalf("split %q: opened %s with %d tasks, want %s with %d", c.split, got, len(env.Tasks()), c.want, c.tasks)
		}
	}
	for _, c := range []struct{ name, split string }{{"alfworld", "valid_seen"}, {"alfworld", "../x"}, {"virtualhome", "valid_train"}} {
		if _, err := NewWith(c.name, ds, Options{Split: c.split}); err == nil {
			t.Fatalf("%s split %q was accepted", c.name, c.split)
		}
	}
}
