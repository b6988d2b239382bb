package mcts

import (
	"context"
	"github.com/nesy-dev/nesy/constraint"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/internal/testkit"
	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/trie"
)

// testModelSpec is the small fast architecture with the real Qwen3
// vocabulary used by the tests and the sweep: action strings tokenize as
// they would for Qwen3, while the random weights give the prior no
// knowledge of planning.
func testModelSpec(tb testing.TB) gguf.Spec {
	tb.Helper()
	return testkit.ModelSpec{Arch: gguf.ArchQwen3, Tokenizer: "qwen3", Seed: 7, ContextLength: 8192}.Spec(tb)
}

// modelFiles caches written model files per process (writing the Qwen3
// vocabulary takes a while); the directory is removed by TestMain.
var modelFiles struct {
	sync.Mutex
	dir   string
	paths map[string]string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if modelFiles.dir != "" {
		os.RemoveAll(modelFiles.dir)
	}
	os.Exit(code)
}

// modelPath writes (once) the model of spec under name.
func modelPath(tb testing.TB, name string, spec func(testing.TB) gguf.Spec) string {
	tb.Helper()
	modelFiles.Lock()
	defer modelFiles.Unlock()
	if p, ok := modelFiles.paths[name]; ok {
		return p
	}
	if modelFiles.dir == "" {
		d, err := os.MkdirTemp("", "nesy-mcts-test")
		if err != nil {
			tb.Fatal(err)
		}
		modelFiles.dir, modelFiles.paths = d, map[string]string{}
	}
	p := filepath.Join(modelFiles.dir, name+".gguf")
	if err := gguf.Write(p, spec(tb)); err != nil {
		tb.Fatal(err)
	}
	modelFiles.paths[name] = p
	return p
}

// loadModel loads the test model with room for a search.
func loadModel(tb testing.TB, path string, opts models.Options) (*models.Engine, *trie.Index) {
	tb.Helper()
	if opts.Threads == 0 {
		opts.Threads = 1
	}
	if opts.Sequences == 0 {
		opts.Sequences = 64
	}
	e, err := models.Load(context.Background(), path, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	idx, err := constraint.NewIndex(e)
	if err != nil {
		tb.Fatal(err)
	}
	return e, idx
}

// loadTask grounds a task and binds its built-in lexicon.
func loadTask(tb testing.TB, domain, problem string) *lexicon.Bound {
	tb.Helper()
	task, _, err := pddl.LoadFiles(domain, problem)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := lexicon.ForTask(task).Bind(task)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// alfworldGames returns the ALFWorld valid_unseen game files, sorted.
func alfworldGames(tb testing.TB) []string {
	tb.Helper()
	g, _ := filepath.Glob(filepath.Join(testenv.Datasets(tb), "alfworld", "valid_unseen", "*", "*", "game.tw-pddl"))
	if len(g) == 0 {
		tb.Fatal("no ALFWorld games found")
	}
	return g
}

// alfworldGame returns the i-th ALFWorld game; on the repository's slice
// (a handful of games) the smallest one, whose prompt fits every test
// model's context.
func alfworldGame(tb testing.TB, i int) string {
	tb.Helper()
	games := alfworldGames(tb)
	if !testenv.IsSlice() {
		return games[i]
	}
	best, size := games[0], int64(math.MaxInt64)
	for _, g := range games {
		if st, err := os.Stat(g); err == nil && st.Size() < size {
			best, size = g, st.Size()
		}
	}
	return best
}

// planbench returns the domain and instance-i problem of PlanBench
// Blocksworld (on the repository's slice, one of its first ten instances).
func planbench(tb testing.TB, i int) (string, string) {
	tb.Helper()
	d := filepath.Join(testenv.Datasets(tb), "planbench-blocksworld")
	if testenv.IsSlice() && i > 10 {
		i = i%10 + 1
	}
	return filepath.Join(d, "domain.pddl"), filepath.Join(d, "instances", "instance-"+strconv.Itoa(i)+".pddl")
}
