package models

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/kvcache"
	"github.com/ollama/ollama/model/input"

	"github.com/nesy-dev/nesy/models/gguf"
)

// testCost is a pass cost model of the order measured for the tiny test
// models on one CPU thread: 1 ms per pass, 40 us per position, 150 ns per
// position per cell, 600 ns per cell.
var testCost = passCost{fixed: 1e-3, perToken: 4e-5, perCell: 1.5e-7, perRange: 6e-7}

// pinCost freezes the engine's cost model so that planning is
// deterministic.
func pinCost(e *Engine, c passCost) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.costs.cur, e.costs.frozen = c, true
}

// realCells reads Ollama's causal cache bookkeeping (private fields, read
// through reflection): for each cell its position and sequences.
func realCells(t *testing.T, e *Engine) (pos []int32, seqs [][]int) {
	t.Helper()
	c, ok := e.cache.(*kvcache.Causal)
	if !ok {
		t.Skipf("cache is %T, not *kvcache.Causal", e.cache)
	}
	cells := reflect.ValueOf(c).Elem().FieldByName("cells")
	if !cells.IsValid() {
		t.Fatal("kvcache.Causal has no cells field (Ollama changed): update cellMap")
	}
	for i := range cells.Len() {
		cell := cells.Index(i)
		pos = append(pos, int32(cell.FieldByName("pos").Int()))
		ss := cell.FieldByName("sequences")
		var ids []int
		for k := range ss.Len() {
			ids = append(ids, int(ss.Index(k).Int()))
		}
		slices.Sort(ids)
		seqs = append(seqs, ids)
	}
	return pos, seqs
}

// checkMirror compares the engine's cellMap with the cache it mirrors.
func checkMirror(t *testing.T, e *Engine, step string) {
	t.Helper()
	pos, seqs := realCells(t, e)
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.cells
	if len(pos) != len(m.refs) {
		t.Fatalf("%s: cache has %d cells, mirror %d", step, len(pos), len(m.refs))
	}
	for c := range pos {
		var ids []int
		for s := range m.lo {
			if m.has(c, s) {
				ids = append(ids, s)
			}
		}
		if !slices.Equal(ids, seqs[c]) || (len(ids) > 0 && m.pos[c] != pos[c]) || int(m.refs[c]) != len(ids) {
			t.Fatalf("%s: cell %d: cache holds sequences %v at position %d, mirror %v at %d (refs %d)",
				step, c, seqs[c], pos[c], ids, m.pos[c], m.refs[c])
		}
	}
	free := 0
	for c := range pos {
		if len(seqs[c]) == 0 {
			free++
		}
	}
	if free != m.free {
		t.Fatalf("%s: %d free cells, mirror counts %d", step, free, m.free)
	}
	for s := range m.lo {
		lo, hi := -1, -1
		for c := range pos {
			if slices.Contains(seqs[c], s) {
				if lo < 0 {
					lo = c
				}
				hi = c
			}
		}
		if lo != m.lo[s] || hi != m.hi[s] {
			t.Fatalf("%s: sequence %d spans cells [%d, %d], mirror [%d, %d]", step, s, lo, hi, m.lo[s], m.hi[s])
		}
	}
}

// TestCellMapMirrorsCache drives the engine through random prompts,
// merged and separate evaluations, forks, truncations, releases and a
// cache-full failure, and checks after every step that the mirror agrees
// with Ollama's cache cell by cell.
func TestCellMapMirrorsCache(t *testing.T) {
	for _, arch := range []string{gguf.ArchLlama, gguf.ArchQwen3} {
		t.Run(arch, func(t *testing.T) {
			e := newTestEngine(t, gguf.Default(arch), Options{BatchSize: 64, CacheSize: 1024, Sequences: 12, ContextLength: 1024})
			checkMirror(t, e, "after load")
			v := e.Info().VocabSize
			rng := rand.New(rand.NewPCG(1, uint64(len(arch))))
			var live []SeqID
			ctx := context.Background()
			for step := range 60 {
				what := ""
				switch op := rng.IntN(10); {
				case op < 3 || len(live) == 0:
					s, err := e.NewSequence()
					if errors.Is(err, ErrNoSequences) {
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					n := 1 + rng.IntN(150)
					_, err = e.Eval(ctx, []EvalRequest{{Seq: s, Tokens: testTokens(step, n, v)}})
					if errors.Is(err, ErrCacheFull) {
						e.Release(s)
						what = fmt.Sprintf("prompt of %d tokens (cache full)", n)
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					live = append(live, s)
					what = fmt.Sprintf("prompt of %d tokens on %d", n, s)
				case op < 6:
					// Concurrent calls (merged or not, as the planner
					// decides), one or two tokens each.
					var wg sync.WaitGroup
					for _, s := range live {
						wg.Add(1)
						go func() {
							defer wg.Done()
							_, err := e.Eval(ctx, []EvalRequest{{Seq: s, Tokens: testTokens(step+int(s), 1+int(s)%2, v)}})
							if err != nil && !errors.Is(err, ErrCacheFull) && !errors.Is(err, ErrContextLength) {
								t.Error(err)
							}
						}()
					}
					wg.Wait()
					what = fmt.Sprintf("decode step on %d sequences", len(live))
				case op < 8:
					src := live[rng.IntN(len(live))]
					f, err := e.Fork(src, rng.IntN(e.Len(src)+1))
					if errors.Is(err, ErrNoSequences) {
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					live = append(live, f)
					what = fmt.Sprintf("fork of %d as %d", src, f)
				case op < 9:
					s := live[rng.IntN(len(live))]
					n := rng.IntN(e.Len(s) + 1)
					if err := e.Truncate(s, n); err != nil {
						t.Fatal(err)
					}
					what = fmt.Sprintf("truncate %d to %d", s, n)
				default:
					i := rng.IntN(len(live))
					e.Release(live[i])
					what = fmt.Sprintf("release %d", live[i])
					live = slices.Delete(live, i, i+1)
				}
				checkMirror(t, e, fmt.Sprintf("step %d (%s)", step, what))
			}
		})
	}
}

// testJob is an Eval job on seq appending n tokens, ready to plan.
func testJob(e *Engine, seq SeqID, n, seed int) *job {
	j := &job{ctx: context.Background(), done: make(chan struct{}), started: true}
	r := &reqState{job: j, req: EvalRequest{Seq: seq}, text: make([]bool, n)}
	for _, tok := range testTokens(seed, n, e.Info().VocabSize) {
		r.inputs = append(r.inputs, &input.Input{Token: tok})
	}
	j.reqs, j.pending = []*reqState{r}, 1
	return j
}

// prompt evaluates n tokens on a new sequence.
func prompt(t *testing.T, e *Engine, n, seed int) SeqID {
	t.Helper()
	s, err := e.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Eval(context.Background(), []EvalRequest{{Seq: s, Tokens: testTokens(seed, n, e.Info().VocabSize)}}); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPlanMerges checks which jobs the planner puts into the next pass,
// with a pinned cost model, for cache layouts where merging pays and where
// it does not.
func TestPlanMerges(t *testing.T) {
	cases := []struct {
		name string
		// setup lays out the cache and returns the jobs in turn order;
		// the first leads the pass.
		setup func(t *testing.T, e *Engine) []*job
		want  []int // indexes of the jobs that must be in the pass
	}{
		{
			name: "forks of one prompt merge",
			setup: func(t *testing.T, e *Engine) []*job {
				root := prompt(t, e, 600, 1)
				var jobs []*job
				for i := range 8 {
					f, err := e.Fork(root, e.Len(root))
					if err != nil {
						t.Fatal(err)
					}
					jobs = append(jobs, testJob(e, f, 1+i%3, i))
				}
				return jobs
			},
			want: []int{0, 1, 2, 3, 4, 5, 6, 7},
		},
		{
			name: "decode steps of neighbouring sequences merge",
			setup: func(t *testing.T, e *Engine) []*job {
				var jobs []*job
				for i := range 6 {
					jobs = append(jobs, testJob(e, prompt(t, e, 30, 10+i), 1, i))
				}
				return jobs
			},
			want: []int{0, 1, 2, 3, 4, 5},
		},
		{
			name: "unrelated new long prompts are not interleaved",
			setup: func(t *testing.T, e *Engine) []*job {
				var jobs []*job
				for i := range 4 {
					s, err := e.NewSequence()
					if err != nil {
						t.Fatal(err)
					}
					jobs = append(jobs, testJob(e, s, 700, 20+i))
				}
				return jobs
			},
			want: []int{0},
		},
		{
			name: "a decode step of a far sequence stays out of a prompt's pass",
			setup: func(t *testing.T, e *Engine) []*job {
				filler := prompt(t, e, 3000, 30) // cells 0-2999
				far := prompt(t, e, 500, 31)     // cells 3000-3499
				e.Release(filler)                // the prompt below takes 0-511
				s, err := e.NewSequence()
				if err != nil {
					t.Fatal(err)
				}
				return []*job{testJob(e, s, 512, 32), testJob(e, far, 1, 33)}
			},
			want: []int{0},
		},
		{
			name: "a short prompt joins a decode step near it",
			setup: func(t *testing.T, e *Engine) []*job {
				a := prompt(t, e, 40, 40)
				s, err := e.NewSequence()
				if err != nil {
					t.Fatal(err)
				}
				return []*job{testJob(e, a, 1, 41), testJob(e, s, 20, 42)}
			},
			want: []int{0, 1},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEngine(t, gguf.Default(gguf.ArchLlama), Options{BatchSize: 512, CacheSize: 8192, Sequences: 16})
			pinCost(e, testCost)
			jobs := c.setup(t, e)
			e.mu.Lock()
			e.rr, e.carry = 0, nil
			p := e.planLocked(jobs)
			e.mu.Unlock()
			var got []int
			for i, j := range jobs {
				if p.takes(j) {
					got = append(got, i)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("jobs in the pass: %v, want %v (pass of %d positions over %d cells)", got, c.want, p.tokens, p.cells)
			}
		})
	}
}

// dryRun plans passes for jobs until they finish, recording the cells
// they take in the mirror as the cache would (no forward pass is
// computed). Before each pass, arrive (when not nil) may add a job. It
// returns the pass in which each job finished and the number of passes.
func dryRun(t *testing.T, e *Engine, jobs []*job, arrive func(pass int) *job) (finished map[*job]int, passes int) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	finished = map[*job]int{}
	active := slices.Clone(jobs)
	for len(active) > 0 {
		if passes++; passes > 1000 {
			t.Fatal("jobs never finish")
		}
		if arrive != nil {
			if j := arrive(passes); j != nil {
				active = append(active, j)
			}
		}
		p := e.planLocked(active)
		if p.tokens == 0 {
			t.Fatal("empty pass")
		}
		var seqs []int
		var pos []int32
		for _, q := range p.parts {
			s := &e.seqs[q.r.req.Seq]
			for k := range q.n {
				seqs = append(seqs, int(q.r.req.Seq))
				pos = append(pos, int32(s.valid+k))
			}
			s.valid += q.n
			q.r.next += q.n
		}
		if !e.cells.place(seqs, pos) {
			t.Fatal("cache full")
		}
		active = slices.DeleteFunc(active, func(j *job) bool {
			if j.reqs[0].finished() {
				finished[j] = passes
				return true
			}
			return false
		})
	}
	return finished, passes
}

// TestPlanKeepsPromptsContiguous runs new prompts longer than a batch side
// by side (as concurrent requests do): each must end up in one contiguous
// run of cells (so later passes of it span only its own cells), in about
// as many passes as run alone.
func TestPlanKeepsPromptsContiguous(t *testing.T) {
	for _, n := range []int{530, 700, 1500} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := newTestEngine(t, gguf.Default(gguf.ArchLlama), Options{BatchSize: 512, CacheSize: 16384, Sequences: 16})
			pinCost(e, testCost)
			var jobs []*job
			for i := range 8 {
				s, err := e.NewSequence()
				if err != nil {
					t.Fatal(err)
				}
				jobs = append(jobs, testJob(e, s, n+i, i))
			}
			done, passes := dryRun(t, e, jobs, nil)
			if len(done) != len(jobs) {
				t.Fatalf("%d of %d jobs finished", len(done), len(jobs))
			}
			for i, j := range jobs {
				seq := int(j.reqs[0].req.Seq)
				lo, hi, _ := e.cells.seqRange(seq)
				if got := e.cells.seqCells(seq); hi-lo+1 != got {
					t.Errorf("prompt %d: %d cells spread over [%d, %d]", i, got, lo, hi)
				}
			}
			alone := 0
			for i := range jobs {
				alone += (n + i + 511) / 512
			}
			if passes > alone+len(jobs) {
				t.Errorf("%d passes, %d for the prompts one by one", passes, alone)
			}
		})
	}
}

// TestPlanNoStarvation: a request the cost model keeps out of others'
// passes still leads one in its turn, behind long prompts (each leads
// while it continues: 3 passes for 1200 positions) and while new prompts
// keep arriving.
func TestPlanNoStarvation(t *testing.T) {
	e := newTestEngine(t, gguf.Default(gguf.ArchLlama), Options{BatchSize: 512, CacheSize: 65536, Sequences: 64})
	pinCost(e, testCost)
	filler := prompt(t, e, 4000, 1)
	far := prompt(t, e, 500, 2)
	e.Release(filler)
	newPrompt := func(seed int) *job {
		s, err := e.NewSequence()
		if err != nil {
			t.Fatal(err)
		}
		return testJob(e, s, 1200, seed)
	}
	var jobs []*job
	for i := range 6 {
		jobs = append(jobs, newPrompt(10+i))
	}
	decode := testJob(e, far, 1, 3)
	jobs = append(jobs, decode)
	e.mu.Lock()
	e.rr, e.carry = 0, nil
	e.mu.Unlock()
	var arrive func(int) *job
	arrive = func(pass int) *job {
		if pass > 40 {
			return nil
		}
		e.mu.Unlock() // NewSequence takes the lock
		defer e.mu.Lock()
		return newPrompt(100 + pass)
	}
	done, passes := dryRun(t, e, jobs, arrive)
	at, ok := done[decode]
	if !ok {
		t.Fatal("the decode step never ran")
	}
	// Six prompts ahead of it lead 3 passes each.
	if at > 6*3+1 {
		t.Errorf("the decode step ran in pass %d of %d", at, passes)
	}
	t.Logf("%d passes; the decode step ran in pass %d", passes, at)
}

// TestMergedPromptsContiguous: two long prompts evaluated concurrently
// (queued together) end up contiguous in the real cache, and their logits
// match evaluating them one at a time.
func TestMergedPromptsContiguous(t *testing.T) {
	e := newTestEngine(t, gguf.Default(gguf.ArchLlama), Options{BatchSize: 256, CacheSize: 4096, Sequences: 8, MergeWindow: 50 * time.Millisecond})
	pinCost(e, testCost)
	v := e.Info().VocabSize
	const n = 600
	want := [][]float32{}
	for i := range 2 {
		rows := evalAlone(t, e, testTokens(50+i, n, v))
		want = append(want, rows[len(rows)-1])
	}
	seqs := make([]SeqID, 2)
	got := make([][]float32, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		s, err := e.NewSequence()
		if err != nil {
			t.Fatal(err)
		}
		seqs[i] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Eval(context.Background(), []EvalRequest{{Seq: s, Tokens: testTokens(50+i, n, v)}})
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = res[0].Logits[0]
		}()
	}
	wg.Wait()
	checkMirror(t, e, "after the prompts")
	for i, s := range seqs {
		assertClose(t, fmt.Sprintf("prompt %d", i), got[i], want[i], tolFor(e))
		lo, hi, _ := e.cells.seqRange(int(s))
		if hi-lo+1 != n {
			t.Errorf("prompt %d: %d positions spread over cells [%d, %d]", i, n, lo, hi)
		}
	}
}

// TestCostFit: the online fit recovers a cost model from noisy pass times
// (with descheduling outliers), starting from a prior that is off by up to
// 5x per term.
func TestCostFit(t *testing.T) {
	truth := testCost
	prior := passCost{fixed: truth.fixed * 3, perToken: truth.perToken / 5, perCell: truth.perCell * 4, perRange: truth.perRange / 3}
	f := newCostFit(prior, 512, 4096)
	rng := rand.New(rand.NewPCG(7, 7))
	shapes := [][2]int{{1, 768}, {1, 8192}, {3, 2560}, {16, 1024}, {16, 6144}, {512, 768}, {512, 2048}, {200, 4096}}
	for i := range 400 {
		s := shapes[rng.IntN(len(shapes))]
		y := truth.of(s[0], s[1], 0) * (0.9 + 0.2*rng.Float64())
		if i%25 == 0 {
			y *= 10 // a descheduled pass
		}
		f.observe(s[0], s[1], y)
	}
	for _, s := range shapes {
		got, want := f.cur.of(s[0], s[1], 0), truth.of(s[0], s[1], 0)
		if math.Abs(got-want) > 0.15*want {
			t.Errorf("pass of %d positions over %d cells: predicted %.3g s, true %.3g s", s[0], s[1], got, want)
		}
	}
	// The decision that matters: how many cells one position may add
	// before a pass of its own is cheaper.
	if r, w := f.cur.fixed/f.cur.perCell, truth.fixed/truth.perCell; math.Abs(r-w) > 0.3*w {
		t.Errorf("fixed/perCell = %.0f, true %.0f", r, w)
	}
	frozen := newCostFit(prior, 512, 4096)
	frozen.frozen = true
	frozen.observe(1, 768, 1)
	if frozen.cur != prior {
		t.Error("a frozen fit learned")
	}
}

// BenchmarkPlan measures the planner's own work per pass (choosing among
// 64 pending single-token jobs on forks of 16 prompts spread over the
// cache), which the engine does under its lock before every forward pass.
func BenchmarkPlan(b *testing.B) {
	e := newTestEngine(b, gguf.Default(gguf.ArchLlama), Options{BatchSize: 512, CacheSize: 16384, Sequences: 96})
	pinCost(e, testCost)
	v := e.Info().VocabSize
	var jobs []*job
	for i := range 16 {
		root, err := e.NewSequence()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.Eval(context.Background(), []EvalRequest{{Seq: root, Tokens: testTokens(i, 500, v)}}); err != nil {
			b.Fatal(err)
		}
		for k := range 4 {
			f, err := e.Fork(root, e.Len(root))
			if err != nil {
				b.Fatal(err)
			}
			jobs = append(jobs, testJob(e, f, 1, 100*i+k))
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var p plan
	for b.Loop() {
		p = e.planLocked(jobs)
	}
	b.ReportMetric(float64(len(p.parts)), "requests/pass")
}
