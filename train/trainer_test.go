package train

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
)

// toyExamples are sequences whose "plan" copies the token after a marker
// in the "prompt": learnable in a few steps by a one-layer model.
func toyExamples(vocab, n int) []Example {
	var out []Example
	for i := range n {
		want := int32(3 + i%(vocab-3))
		toks := []int32{1, 2, want, 2, 1, 0, want, want}
		out = append(out, Example{ID: "toy" + string(rune('a'+i)), Tokens: toks, PlanStart: 6})
	}
	return out
}

func TestTrainDeterministicAndResumes(t *testing.T) {
	cfg := Config{Vocab: 12, Dim: 16, Layers: 1, Heads: 2, FFN: 32}
	data := toyExamples(cfg.Vocab, 8)
	run := func(o Options) (*Params, *Result) {
		t.Helper()
		p, err := NewParams(cfg, 3)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Train(context.Background(), p, data[:6], data[6:], o)
		if err != nil {
			t.Fatal(err)
		}
		return p, res
	}
	dir := t.TempDir()
	opts := Options{Steps: 30, Batch: 2, Seq: 16, Seed: 5, EvalEvery: 10, LR: 1e-2}
	a, resA := run(opts)
	b, _ := run(opts)
	for i := range a.List {
		if !slices.Equal(a.List[i].Data, b.List[i].Data) {
			t.Fatalf("two runs with the same seed differ in %s", a.List[i].Name)
		}
	}
	if first, last := resA.Train[0].Loss, resA.Train[len(resA.Train)-1].Loss; !(last < 0.7*first) {
		t.Errorf("training loss %.3f -> %.3f: it did not fall by 30%%", first, last)
	}
	if len(resA.HeldOut) != 3 {
		t.Errorf("%d held-out points, want 3", len(resA.HeldOut))
	}

	// A straight run keeps its checkpoint of step 20; a run resumed from
	// it ends with the straight run's weights.
	ck, ck20 := filepath.Join(dir, "ck.gob"), filepath.Join(dir, "ck20.gob")
	straight := opts
	straight.Checkpoint = ck
	straight.Progress = func(pr Progress) {
		if pr.Step == 20 {
			data, err := os.ReadFile(ck)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(ck20, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, _ := run(straight)
	resumed := opts
	resumed.Checkpoint, resumed.Resume = ck20, true
	r, resR := run(resumed)
	for i := range s.List {
		if !slices.Equal(s.List[i].Data, r.List[i].Data) {
			t.Fatalf("the resumed run's %s differs from the straight run's", s.List[i].Name)
		}
	}
	if len(resR.Train) != 30 {
		t.Fatalf("the resumed run has %d training points, want 30", len(resR.Train))
	}

	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"no steps", Options{Batch: 1, Seq: 16}},
		{"nothing fits", Options{Steps: 1, Batch: 1, Seq: 4}},
		{"missing checkpoint", Options{Steps: 1, Batch: 1, Seq: 16, Resume: true, Checkpoint: filepath.Join(dir, "none")}},
	} {
		p, _ := NewParams(cfg, 3)
		if _, err := Train(context.Background(), p, data[:6], data[6:], tc.o); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// TestTrainWorkersBitIdentical: evaluating a step's examples on several
// graphs at once trains the very weights one graph does (the gradients are
// summed in example order), with tied and untied output weights: the loss
// curves and every parameter bit for bit.
func TestTrainWorkersBitIdentical(t *testing.T) {
	for _, tied := range []bool{false, true} {
		cfg := Config{Vocab: 12, Dim: 16, Layers: 2, Heads: 2, FFN: 32, Tied: tied}
		data := toyExamples(cfg.Vocab, 10)
		var ref *Params
		var refRes *Result
		for _, workers := range []int{1, 2, 3} {
			p, err := NewParams(cfg, 3)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Train(context.Background(), p, data[:7], data[7:],
				Options{Steps: 12, Batch: 4, Seq: 16, Seed: 5, EvalEvery: 4, LR: 1e-2, Workers: workers})
			if err != nil {
				t.Fatal(err)
			}
			if ref == nil {
				ref, refRes = p, res
				continue
			}
			for i := range p.List {
				if !slices.Equal(p.List[i].Data, ref.List[i].Data) {
					t.Fatalf("tied %v, %d workers: %s differs from one worker's", tied, workers, p.List[i].Name)
				}
			}
			if !slices.Equal(res.Train, refRes.Train) || !slices.Equal(res.HeldOut, refRes.HeldOut) {
				t.Fatalf("tied %v, %d workers: loss curves %v / %v, one worker %v / %v", tied, workers, res.Train, res.HeldOut, refRes.Train, refRes.HeldOut)
			}
		}
	}
}

// TestTrainCancelled: a cancelled run stops, keeps its checkpoint and
// says why.
func TestTrainCancelled(t *testing.T) {
	cfg := Config{Vocab: 12, Dim: 16, Layers: 1, Heads: 2, FFN: 32}
	data := toyExamples(cfg.Vocab, 8)
	p, err := NewParams(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ck := filepath.Join(t.TempDir(), "ck.gob")
	o := Options{Steps: 100, Batch: 1, Seq: 16, Checkpoint: ck, EvalEvery: 1000,
		Progress: func(pr Progress) {
			if pr.Step == 3 {
				cancel()
			}
		}}
	res, err := Train(ctx, p, data[:6], data[6:], o)
	if !errors.Is(err, context.Canceled) || res == nil || len(res.Train) != 3 {
		t.Fatalf("Train after cancel: %v, result %+v", err, res)
	}
	ckp, err := readCheckpoint(ck)
	if err != nil || ckp.Step != 3 {
		t.Fatalf("checkpoint after cancel: %v (%+v)", err, ckp)
	}
}

func TestCheckTrainingSplit(t *testing.T) {
	for _, tc := range []struct {
		dir string
		ok  bool
	}{
		{"../shared/datasets/alfworld/valid_train", true},
		{"../shared/datasets/alfworld/valid_unseen", false},
		{"/x/alfworld/valid_seen/", false},
		{"datasets/planbench-blocksworld", false},
		{"virtualhome/test", false},
	} {
		if err := CheckTrainingSplit(tc.dir); (err == nil) != tc.ok {
			t.Errorf("CheckTrainingSplit(%q) = %v, want ok %v", tc.dir, err, tc.ok)
		}
	}
}

// TestDemosTrainOnDecoderPrompt: a demonstration's text is the planner's
// compact prompt rendered with the model's template, then the plan as
// the decoder writes it, and the plan reaches the goal.
func TestDemosTrainOnDecoderPrompt(t *testing.T) {
	ds := testenv.Datasets(t)
	demos, unsolved, err := ALFWorldDemos(context.Background(), filepath.Join(ds, "alfworld", "valid_train"),
		DemoOptions{Prompt: decoder.PromptOptions{Compact: true}, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(demos) != 2 || len(unsolved) != 0 {
		t.Fatalf("%d demonstrations, unsolved %v", len(demos), unsolved)
	}
	if _, _, err := ALFWorldDemos(context.Background(), filepath.Join(ds, "alfworld", "valid_unseen"), DemoOptions{}); err == nil {
		t.Fatal("demonstrations from valid_unseen")
	}
	_, lm := tinyPrior(t, demos, 500)
	if lm.Info().Prompt != decoder.PromptCompact {
		t.Fatalf("the GGUF's prompt variant is %q, want %q", lm.Info().Prompt, decoder.PromptCompact)
	}
	ex, err := Tokenize(lm, demos)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range ex {
		prompt, err := decoder.RenderPrompt(lm, demos[i].Messages, false)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(x.Tokens[:x.PlanStart], prompt.Tokens) {
			t.Fatalf("%s: the example's prompt is not the decoder's", x.ID)
		}
		plan, err := lm.Detokenize(x.Tokens[x.PlanStart:])
		if err != nil {
			t.Fatal(err)
		}
		if plan != demos[i].PlanText() || !strings.HasSuffix(plan, "\n") {
			t.Fatalf("%s: plan text %q, want %q", x.ID, plan, demos[i].PlanText())
		}
		if !strings.Contains(prompt.Text, "Goal: ") || strings.Contains(prompt.Text, "Actions you can take") {
			t.Fatalf("%s: not the compact prompt:\n%s", x.ID, prompt.Text)
		}
	}
}

// tinyPrior writes an untrained 16-wide prior with a BPE of at most merges
// merges learned from demos, loads it in the engine (closed when the test
// ends) and returns its tokenizer and the engine.
func tinyPrior(t *testing.T, demos []Demo, merges int) (*gguf.Tokenizer, *models.Engine) {
	t.Helper()
	return tinyPriorWith(t, demos, merges, models.Options{Threads: 1, Sequences: 1, ContextLength: 256})
}

// tinyPriorWith is tinyPrior loaded with opts.
func tinyPriorWith(t *testing.T, demos []Demo, merges int, opts models.Options) (*gguf.Tokenizer, *models.Engine) {
	t.Helper()
	tok, path := tinyPriorFile(t, demos, merges)
	lm, err := models.Load(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lm.Close() })
	return tok, lm
}

// tinyPriorFile writes tinyPrior's GGUF and returns its tokenizer and path.
func tinyPriorFile(t *testing.T, demos []Demo, merges int) (*gguf.Tokenizer, string) {
	t.Helper()
	return tinyPriorKind(t, demos, merges, decoder.PromptCompact)
}

// tinyPriorKind is tinyPriorFile with the prompt kind the GGUF declares.
func tinyPriorKind(t *testing.T, demos []Demo, merges int, kind string) (*gguf.Tokenizer, string) {
	t.Helper()
	tok := NewTokenizer(demos, merges)
	p, err := NewParams(Config{Vocab: len(tok.Tokens), Dim: 16, Layers: 1, Heads: 2, FFN: 16}, 1)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := writeGGUF(p, tok, path, kind); err != nil {
		t.Fatal(err)
	}
	return tok, path
}

// TestClipGrads: gradients over the bound are scaled to it, direction
// kept; those under it are left alone.
func TestClipGrads(t *testing.T) {
	for _, tc := range []struct {
		clip, norm float64
		want       []float32
	}{
		{clip: 1, norm: 5, want: []float32{0.6, 0, -0.8}},
		{clip: 10, norm: 5, want: []float32{3, 0, -4}},
		{clip: -1, norm: 5, want: []float32{3, 0, -4}},
	} {
		g := [][]float32{{3, 0}, {-4}}
		norm := clipGrads(g, tc.clip)
		got := append(append([]float32(nil), g[0]...), g[1]...)
		if math.Abs(norm-tc.norm) > 1e-9 {
			t.Errorf("clip %g: norm %g, want %g", tc.clip, norm, tc.norm)
		}
		for i := range got {
			if math.Abs(float64(got[i]-tc.want[i])) > 1e-6 {
				t.Errorf("clip %g: %v, want %v", tc.clip, got, tc.want)
				break
			}
		}
	}
}

// TestRunnerPool: a bucket has one graph, lent to one borrower at a time:
// a second borrower of the bucket waits until it comes back and then gets
// the same graph; another bucket's graph is lent meanwhile.
func TestRunnerPool(t *testing.T) {
	p, err := NewParams(Config{Vocab: 12, Dim: 16, Layers: 1, Heads: 2, FFN: 32}, 3)
	if err != nil {
		t.Fatal(err)
	}
	pl := newRunnerPool(p, 4, 0)
	defer pl.close()
	a, err := pl.get(16)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *runner)
	go func() {
		r, err := pl.get(16)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	c, err := pl.get(32) // another bucket: not blocked by the lent one
	if err != nil {
		t.Fatal(err)
	}
	if c.gr.seq != 32 || a.gr.seq != 16 {
		t.Fatalf("graphs of %d and %d positions, want 16 and 32", a.gr.seq, c.gr.seq)
	}
	select {
	case r := <-got:
		t.Fatalf("a second borrower got %p while the bucket's graph %p was lent", r, a)
	case <-time.After(50 * time.Millisecond):
	}
	pl.put(16)
	if r := <-got; r != a {
		t.Fatalf("the waiting borrower got %p, want the returned graph %p", r, a)
	}
	pl.put(16)
	pl.put(32)
	if len(pl.graphs) != 2 {
		t.Fatalf("%d graphs built, want one per bucket (2)", len(pl.graphs))
	}
}

// TestRunnerPoolMemory: under a bound that holds one graph, building
// another drops the least recently used graph no one holds, and a graph
// that is lent is never dropped (both are then kept, over the bound).
func TestRunnerPoolMemory(t *testing.T) {
	p, err := NewParams(Config{Vocab: 12, Dim: 16, Layers: 1, Heads: 2, FFN: 32}, 3)
	if err != nil {
		t.Fatal(err)
	}
	probe := newRunnerPool(p, 4, 0)
	r32, err := probe.get(32)
	if err != nil {
		t.Fatal(err)
	}
	if r32.bytes <= 0 {
		t.Fatalf("graph of 32 positions estimated at %d bytes", r32.bytes)
	}
	probe.put(32)
	probe.close()

	pl := newRunnerPool(p, 4, r32.bytes) // room for the 32-position graph alone
	defer pl.close()
	a, err := pl.get(16)
	if err != nil {
		t.Fatal(err)
	}
	pl.put(16)
	if _, err := pl.get(32); err != nil {
		t.Fatal(err)
	}
	pl.put(32)
	if pl.graphs[16] != nil || pl.graphs[32] == nil {
		t.Fatalf("kept %v, want the 16-position graph dropped for the 32-position one", slices.Sorted(maps.Keys(pl.graphs)))
	}
	if pl.bytes != r32.bytes {
		t.Fatalf("pool holds %d bytes, want the 32-position graph's %d", pl.bytes, r32.bytes)
	}
	if _, err := pl.get(32); err != nil { // lent while 16 is built again
		t.Fatal(err)
	}
	b, err := pl.get(16)
	if err != nil {
		t.Fatal(err)
	}
	if b == a {
		t.Fatal("the dropped graph was lent again")
	}
	if pl.graphs[16] == nil || pl.graphs[32] == nil {
		t.Fatalf("kept %v, want both: the 32-position graph is lent", slices.Sorted(maps.Keys(pl.graphs)))
	}
	pl.put(16)
	pl.put(32)
}

// TestTrainWorkersBitIdenticalBuckets: with examples in two length buckets
// (graphs lent from the pool to whichever worker needs one), one, two and
// three workers train the same bits, and so do one and two with a memory
// bound that drops every graph another bucket's needs.
func TestTrainWorkersBitIdenticalBuckets(t *testing.T) {
	cfg := Config{Vocab: 12, Dim: 16, Layers: 1, Heads: 2, FFN: 32}
	data := toyExamples(cfg.Vocab, 10)
	for i := range data {
		if i%3 == 0 { // a long prompt: the second bucket
			long := make([]int32, 0, bucket+len(data[i].Tokens))
			for j := range bucket {
				long = append(long, int32(1+j%2))
			}
			data[i].Tokens = append(long, data[i].Tokens...)
			data[i].PlanStart += bucket
		}
	}
	var ref *Params
	for _, tc := range []struct {
		workers int
		memory  int64
	}{{1, 0}, {2, 0}, {3, 0}, {1, 1}, {2, 1}} { // 1 byte: every graph rebuilt when another bucket comes
		workers := tc.workers
		p, err := NewParams(cfg, 3)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Train(context.Background(), p, data[:7], data[7:],
			Options{Steps: 6, Batch: 4, Seq: 2 * bucket, Seed: 5, EvalEvery: 3, LR: 1e-2, Workers: workers, GraphMemory: tc.memory}); err != nil {
			t.Fatal(err)
		}
		if ref == nil {
			ref = p
			continue
		}
		for i := range p.List {
			if !slices.Equal(p.List[i].Data, ref.List[i].Data) {
				t.Fatalf("%d workers, graph memory %d: %s differs from one worker's", workers, tc.memory, p.List[i].Name)
			}
		}
	}
}

// TestAverageCheckpoints: the averaged weights are the element-wise mean
// of the model's own and the checkpoints'; a checkpoint of another shape
// is refused, by averaging (leaving the weights as they were) and by
// resuming alike (the one shape check both use).
func TestAverageCheckpoints(t *testing.T) {
	cfg := Config{Vocab: 12, Dim: 16, Layers: 1, Heads: 2, FFN: 32}
	dir := t.TempDir()
	var paths []string
	var ps []*Params
	for seed := range uint64(3) {
		p, err := NewParams(cfg, seed+1)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
		path := filepath.Join(dir, fmt.Sprintf("ck%d.gob", seed))
		if err := writeCheckpoint(path, p, newAdam(p), 7, &Result{}); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	got, err := NewParams(cfg, 1) // the same weights as ps[0]
	if err != nil {
		t.Fatal(err)
	}
	if err := AverageCheckpoints(got, paths[1:]); err != nil {
		t.Fatal(err)
	}
	for i, q := range got.List {
		for j, v := range q.Data {
			want := float32((float64(ps[0].List[i].Data[j]) + float64(ps[1].List[i].Data[j]) + float64(ps[2].List[i].Data[j])) / 3)
			if v != want {
				t.Fatalf("%s[%d] = %v, want the mean %v", q.Name, j, v, want)
			}
		}
	}
	other, err := NewParams(Config{Vocab: 12, Dim: 16, Layers: 2, Heads: 2, FFN: 32}, 1)
	if err != nil {
		t.Fatal(err)
	}
	before := slices.Clone(other.List[0].Data)
	if err := AverageCheckpoints(other, paths[:1]); err == nil || !strings.Contains(err.Error(), "another model") {
		t.Fatalf("a checkpoint of another shape: error %v, want one naming it", err)
	}
	if !slices.Equal(other.List[0].Data, before) {
		t.Fatal("a refused average changed the weights")
	}
	ck, err := readCheckpoint(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := ck.restore(other, newAdam(other)); err == nil || !strings.Contains(err.Error(), "another model") {
		t.Fatalf("resuming a model of another shape: error %v, want one naming it", err)
	}
}
