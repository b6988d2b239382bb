package train

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/models"
)

// TestDAggerDemos: a random-weight prior rolled out on training tasks
// (generated Blocksworld problems, an ALFWorld game, VirtualHome problems
// of the train split) fails, and every DAgger demonstration made from its
// rollouts starts after a step of the rollout (its non-empty prefix applies
// step by step from the start, and its task reopens by its ID) and
// reaches the goal from there (prefix then plan is a valid plan to the
// goal). The examples' loss starts after the prefix, whose tokens the
// constraint follows too (the constrained sets cover the plan only).
func TestDAggerDemos(t *testing.T) {
	ctx := context.Background()
	ds := testenv.Datasets(t)
	opts := DemoOptions{Prompt: decoder.PromptOptions{Compact: true}}
	bw, demos := blocksDemos(t, 4, 5, opts)
	dir := filepath.Join(ds, "alfworld", "valid_train")
	opts.Limit = 1
	ad, _, err := ALFWorldDemos(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	demos = append(demos, ad...)
	vh := virtualHomeTrain(t)
	opts.Limit = 2
	vd, _, err := VirtualHomeDemos(ctx, vh, opts)
	if err != nil || len(vd) == 0 {
		t.Fatalf("VirtualHome demonstrations: %d, %v", len(vd), err)
	}
	demos = append(demos, vd...)
	// Room for ALFWorld's prompts and a rollout; the decoder takes two
	// sequence slots.
	_, path := tinyPriorFile(t, demos, 800)
	lms := make([]models.LM, 3)
	for i := range lms {
		lm, err := models.Load(ctx, path, models.Options{Threads: 1, Sequences: 2, ContextLength: 2048})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lm.Close() })
		lms[i] = lm
	}
	lm := lms[0]
	src := Sources{ALFWorld: dir, Blocksworld: bw, VirtualHome: vh}
	dd, solved, err := DAggerDemos(ctx, lms[:1], src, demos, DAggerOptions{Points: 3, MaxActions: 12})
	if err != nil {
		t.Fatal(err)
	}
	// Three engines roll the tasks out in parallel: the same
	// demonstrations, in the same order.
	dd3, solved3, err := DAggerDemos(ctx, lms, src, demos, DAggerOptions{Points: 3, MaxActions: 12})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := mustJSON(t, dd), mustJSON(t, dd3); a != b || solved3 != solved {
		t.Fatalf("three engines: %d demonstrations (%d solved), one engine: %d (%d solved); equal JSON: %v", len(dd3), solved3, len(dd), solved, a == b)
	}
	if len(dd) == 0 {
		t.Fatalf("no DAgger demonstrations from %d rollouts (%d reached the goal)", len(demos), solved)
	}
	envsSeen := map[string]int{}
	for _, d := range dd {
		ep, err := src.open(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		task, lex := ep.Task(), ep.Lexicon()
		s := task.Init
		for k, text := range append(slices.Clone(d.Prefix), d.Plan...) {
			a, ok := lex.Lookup(s, text)
			if !ok {
				t.Fatalf("%s: step %d %q is not applicable", d.ID, k, text)
			}
			s = task.Apply(s, a)
		}
		if !task.GoalReached(s) {
			t.Fatalf("%s: prefix %v then plan %v does not reach the goal", d.ID, d.Prefix, d.Plan)
		}
		if len(d.Prefix) == 0 {
			t.Errorf("%s: no prefix (the task's own demonstration again)", d.ID)
		}
		envsSeen[d.Env]++
	}
	if envsSeen[EnvVirtualHome] == 0 {
		t.Errorf("no VirtualHome DAgger demonstration (by environment: %v)", envsSeen)
	}
	ex, err := Tokenize(lm, dd)
	if err != nil {
		t.Fatal(err)
	}
	left, err := ConstrainedSets(ctx, lm, src, dd, ex)
	if err != nil || left != 0 {
		t.Fatalf("constrained sets: %d left, %v", left, err)
	}
	for i, x := range ex {
		if len(dd[i].Prefix) > 0 && (x.PromptEnd == 0 || x.PromptEnd >= x.PlanStart) {
			t.Fatalf("%s: prompt ends at %d, plan starts at %d", x.ID, x.PromptEnd, x.PlanStart)
		}
		if len(x.Allowed) != len(x.Tokens)-x.PlanStart {
			t.Fatalf("%s: %d allowed sets for %d plan tokens", x.ID, len(x.Allowed), len(x.Tokens)-x.PlanStart)
		}
	}
	t.Logf("%d DAgger demonstrations (by environment %v) from %d rollouts, %d reached the goal", len(dd), envsSeen, len(demos), solved)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDAggerCachePerPolicy: each --dagger policy's demonstrations are kept
// in a file of their own, named by the policy's hash, and read back only
// for the same policy, task bound and points (a changed policy file, or
// another bound, is not served the old rollouts).
func TestDAggerCachePerPolicy(t *testing.T) {
	dir := t.TempDir()
	o := RunOptions{Out: dir, DAggerTasks: 7, DAggerPoints: 3}
	logf := func(string, ...any) {}
	var policies []string
	for i, name := range []string{"a.gguf", "b.gguf"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("policy "+name), 0o644); err != nil {
			t.Fatal(err)
		}
		policies = append(policies, path)
		sum := sha256.Sum256([]byte("policy " + name))
		hash := hex.EncodeToString(sum[:])
		c := daggerCache{Policy: hash, Tasks: 7, Points: 3, Demos: []Demo{{ID: fmt.Sprintf("task%d#dagger1", i), Prefix: []string{"x"}}}}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, DAggerFile(hash, false, false)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range policies {
		dd, err := loadDAgger(context.Background(), o, p, Sources{}, nil, logf)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("task%d#dagger1", i); len(dd) != 1 || dd[0].ID != want {
			t.Fatalf("policy %s: %+v, want its own cached %s", p, dd, want)
		}
	}
	// Another bound: the cache does not answer, and rolling out needs the
	// policy to load (these files are not models).
	o.DAggerTasks = 8
	if _, err := loadDAgger(context.Background(), o, policies[0], Sources{}, nil, logf); err == nil {
		t.Fatal("a cache of another task bound was served")
	}
	// Rollouts with the revisit mask are another file: the plain ones are
	// not served for them.
	o.DAggerTasks, o.DAggerNoRevisit = 7, true
	if _, err := loadDAgger(context.Background(), o, policies[0], Sources{}, nil, logf); err == nil {
		t.Fatal("plain rollouts were served for masked ones")
	}
}
