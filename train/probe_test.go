package train

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/prior"
)

func TestSwapGoalWord(t *testing.T) {
	for _, tc := range []struct{ in, from, to, want string }{
		{"Goal: put a pen in drawer.\nState:\n- pen 1 is in/on desk 1\nGoal: put a pen in drawer.\nPlan:", "pen", "book",
			"Goal: put a book in drawer.\nState:\n- pen 1 is in/on desk 1\nGoal: put a book in drawer.\nPlan:"},
		{"Goal: put a pencil in drawer.\n- pen 1 is in/on desk 1", "pen", "book", "Goal: put a pencil in drawer.\n- pen 1 is in/on desk 1"},
		{"Goal: find two cd and put them in safe.", "cd", "creditcard", "Goal: find two creditcard and put them in safe."},
		{"State:\n- pen 1 is in/on desk 1\nGoal: PUT A PEN IN DRAWER.\nPlan:", "pen", "book", "State:\n- pen 1 is in/on desk 1\nGoal: PUT A BOOK IN DRAWER.\nPlan:"},
		{"Goal: PUT A PENCIL IN DRAWER.", "pen", "book", "Goal: PUT A PENCIL IN DRAWER."},
	} {
		if got := swapGoalWord(tc.in, tc.from, tc.to); got != tc.want {
			t.Errorf("swapGoalWord(%q, %q, %q) = %q, want %q", tc.in, tc.from, tc.to, got, tc.want)
		}
	}
}

// TestSwapTraceWord: only the trace after " => " changes, the action's
// own text (the pen taken so far) stays.
func TestSwapTraceWord(t *testing.T) {
	in := []string{"go to desk 1", "take pen 1 from desk 1 => left: PEN ? IS IN/ON DRAWER ?", "open drawer 1 => left: PENCIL 1 IS IN/ON DRAWER ?"}
	want := []string{"go to desk 1", "take pen 1 from desk 1 => left: BOOK ? IS IN/ON DRAWER ?", "open drawer 1 => left: PENCIL 1 IS IN/ON DRAWER ?"}
	got := swapTraceWord(in, "pen", "book")
	if !slices.Equal(got, want) {
		t.Errorf("swapTraceWord = %q, want %q", got, want)
	}
	if in[1] != "take pen 1 from desk 1 => left: PEN ? IS IN/ON DRAWER ?" {
		t.Errorf("input changed: %q", in[1])
	}
}

// TestProbeGoal runs the probe with the shipped prior on training games,
// on the prompt it was trained on: its counts are consistent, the same on
// a second run, and the shipped prior reads the goal (it takes the goal's
// object type, and follows a swapped goal, at least twice as often as a
// uniform choice would).
func TestProbeGoal(t *testing.T) {
	ds := testenv.Datasets(t)
	ctx := context.Background()
	path, err := prior.Ensure(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lm, err := models.Load(ctx, path, models.Options{Threads: 1, Sequences: 1, ContextLength: 2048})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	demos, _, err := ALFWorldDemos(ctx, filepath.Join(ds, "alfworld", "valid_train"),
		DemoOptions{Prompt: decoder.PromptOptions{}.WithKind(lm.Info().Prompt), Limit: 12})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ProbeGoal(ctx, lm, demos)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if res.Decisions < 5 || res.Right > res.Decisions || res.Follows > res.Decisions ||
		res.Chance <= 0 || res.Chance >= float64(res.Decisions) || res.FollowChance <= 0 || res.FollowChance >= float64(res.Decisions) {
		t.Fatalf("inconsistent probe over %d demonstrations: %+v", len(demos), res)
	}
	if float64(res.Right) < 2*res.Chance || float64(res.Follows) < 2*res.FollowChance {
		t.Errorf("the shipped prior does not read the goal: %d of %d take the goal's type (uniform %.1f), %d follow a swapped goal (uniform %.1f)",
			res.Right, res.Decisions, res.Chance, res.Follows, res.FollowChance)
	}
	again, err := ProbeGoal(ctx, lm, demos)
	if err != nil {
		t.Fatal(err)
	}
	if again != res {
		t.Fatalf("a second run gives %+v, the first %+v", again, res)
	}
}
