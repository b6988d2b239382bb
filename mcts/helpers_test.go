package mcts

import (
	"context"
	"github.com/nesy-dev/nesy/constraint"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
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
	tok, err := gguf.FromHF(testenv.Tokenizer(tb, "qwen3"))
	if err != nil {
		tb.Fatal(err)
	}
	s := gguf.Default(gguf.ArchQwen3)
	s.Tokenizer = tok
	s.ContextLength = 8192
	s.Seed = 7
	return s
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

// planbench returns the domain and instance-i problem of PlanBench
// Blocksworld.
func planbench(tb testing.TB, i int) (string, string) {
	tb.Helper()
	d := filepath.Join(testenv.Datasets(tb), "planbench-blocksworld")
	return filepath.Join(d, "domain.pddl"), filepath.Join(d, "instances", "instance-"+strconv.Itoa(i)+".pddl")
}
