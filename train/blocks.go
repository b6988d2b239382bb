package train

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// A blocksConfig is a Blocksworld state with the hand empty: towers of
// blocks, each listed from the table up.
type blocksConfig [][]string

// randomConfig stacks the blocks into towers at random: a random order,
// cut between neighbours with probability one half.
func randomConfig(blocks []string, rng *rand.Rand) blocksConfig {
	order := slices.Clone(blocks)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	var c blocksConfig
	tower := []string{order[0]}
	for _, b := range order[1:] {
		if rng.IntN(2) == 0 {
			c = append(c, tower)
			tower = nil
		}
		tower = append(tower, b)
	}
	return append(c, tower)
}

// facts returns the configuration's facts (ontable, on, clear) as
// PlanBench writes them, sorted.
func (c blocksConfig) facts() []string {
	var fs []string
	for _, t := range c {
		fs = append(fs, "(ontable "+t[0]+")", "(clear "+t[len(t)-1]+")")
		for i := 1; i < len(t); i++ {
			fs = append(fs, "(on "+t[i]+" "+t[i-1]+")")
		}
	}
	sort.Strings(fs)
	return fs
}

// ons returns the configuration's on facts, sorted: a PlanBench goal.
func (c blocksConfig) ons() []string {
	var fs []string
	for _, f := range c.facts() {
		if strings.HasPrefix(f, "(on ") {
			fs = append(fs, f)
		}
	}
	return fs
}

// blocksProblem writes a Blocksworld problem in PlanBench's form (domain
// blocksworld-4ops, the hand empty at the start).
func blocksProblem(name string, blocks, init, goal []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "(define (problem %s)\n(:domain blocksworld-4ops)\n(:objects %s )\n(:init\n(handempty)\n", name, strings.Join(blocks, " "))
	for _, f := range init {
		b.WriteString(f + "\n")
	}
	b.WriteString(")\n(:goal\n(and\n")
	for i, f := range goal {
		b.WriteString(f)
		if i == len(goal)-1 {
			b.WriteString(")")
		}
		b.WriteString("\n")
	}
	b.WriteString(")\n)\n")
	return b.String()
}

var (
	blocksObjects = regexp.MustCompile(`\(:objects([^)]*)\)`)
	blocksInit    = regexp.MustCompile(`(?s)\(:init(.*?)\)\s*\(:goal`)
	blocksAtom    = regexp.MustCompile(`\((on|ontable|clear|holding|handempty)((?:\s+[a-z0-9_-]+)*)\s*\)`)
)

// blocksKey is a Blocksworld problem's identity up to renaming its blocks:
// the smallest, over every bijection of its blocks onto a, b, c, ..., of
// its sorted init facts and sorted goal facts. Two problems that differ
// only in their blocks' names have the same key.
func blocksKey(src string) (string, error) {
	m := blocksObjects.FindStringSubmatch(src)
	if m == nil {
		return "", fmt.Errorf("no :objects")
	}
	blocks := strings.Fields(m[1])
	if len(blocks) > 8 {
		return "", fmt.Errorf("%d blocks: too many to compare up to renaming", len(blocks))
	}
	im := blocksInit.FindStringSubmatchIndex(src)
	if im == nil {
		return "", fmt.Errorf("no :init before :goal")
	}
	parse := func(s string) [][]string {
		var atoms [][]string
		for _, a := range blocksAtom.FindAllStringSubmatch(s, -1) {
			atoms = append(atoms, append([]string{a[1]}, strings.Fields(a[2])...))
		}
		return atoms
	}
	init, goal := parse(src[im[2]:im[3]]), parse(src[im[3]:])
	canon := func(atoms [][]string, name map[string]string) string {
		fs := make([]string, len(atoms))
		for i, a := range atoms {
			f := a[0]
			for _, x := range a[1:] {
				f += " " + name[x]
			}
			fs[i] = f
		}
		sort.Strings(fs)
		return strings.Join(fs, ",")
	}
	best := ""
	perm := make([]int, len(blocks))
	for i := range perm {
		perm[i] = i
	}
	name := map[string]string{}
	for {
		for i, b := range blocks {
			name[b] = string(rune('a' + perm[i]))
		}
		k := canon(init, name) + "|" + canon(goal, name)
		if best == "" || k < best {
			best = k
		}
		if !nextPerm(perm) {
			break
		}
	}
	return fmt.Sprintf("%d|%s", len(blocks), best), nil
}

// nextPerm advances p to the next permutation in lexicographic order; false
// after the last.
func nextPerm(p []int) bool {
	i := len(p) - 2
	for i >= 0 && p[i] >= p[i+1] {
		i--
	}
	if i < 0 {
		return false
	}
	j := len(p) - 1
	for p[j] <= p[i] {
		j--
	}
	p[i], p[j] = p[j], p[i]
	slices.Reverse(p[i+1:])
	return true
}

// BlocksProblem is a generated Blocksworld problem.
type BlocksProblem struct {
	ID  string // "gen-<blocks>-<k>"
	Src string // the PDDL problem
}

// GenerateBlocksworld draws n Blocksworld problems of 3 to 6 blocks (named
// a, b, ... as PlanBench names them): a random start, a random goal
// configuration whose on facts are the goal (PlanBench's form), none
// already true at the start, no two equal up to renaming, and none equal up
// to renaming to a problem in exclude (PlanBench's instances: the
// generated ones are training data, PlanBench's are for evaluation). The
// same seed gives the same problems.
func GenerateBlocksworld(n int, seed uint64, exclude map[string]bool) ([]BlocksProblem, error) {
	rng := rand.New(rand.NewPCG(seed, 0x626c6f636b73))
	seen := map[string]bool{}
	var out []BlocksProblem
	for tries := 0; len(out) < n; tries++ {
		if tries > 100*n+1000 {
			return out, fmt.Errorf("train: only %d distinct Blocksworld problems in %d draws", len(out), tries)
		}
		k := 3 + rng.IntN(4)
		blocks := make([]string, k)
		for i := range blocks {
			blocks[i] = string(rune('a' + i))
		}
		init, goal := randomConfig(blocks, rng), randomConfig(blocks, rng)
		gs := goal.ons()
		if len(gs) == 0 {
			continue
		}
		initFacts := init.facts()
		reached := true
		for _, g := range gs {
			if !slices.Contains(initFacts, g) {
				reached = false
			}
		}
		if reached {
			continue
		}
		id := fmt.Sprintf("gen-%d-%d", k, len(out)+1)
		src := blocksProblem("BW-"+id, blocks, initFacts, gs)
		key, err := blocksKey(src)
		if err != nil {
			return nil, fmt.Errorf("train: generated %s: %w", id, err)
		}
		if seen[key] || exclude[key] {
			continue
		}
		seen[key] = true
		out = append(out, BlocksProblem{ID: id, Src: src})
	}
	return out, nil
}

// PlanBenchKeys returns the identities up to renaming (blocksKey) of the
// PlanBench instances in dir (planbench-blocksworld/instances): the
// problems generated training data must not equal.
func PlanBenchKeys(dir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.pddl"))
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("train: no PlanBench instances in %s", dir)
	}
	keys := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		k, err := blocksKey(string(src))
		if err != nil {
			return nil, fmt.Errorf("train: %s: %w", f, err)
		}
		keys[k] = true
	}
	return keys, nil
}
