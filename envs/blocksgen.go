package envs

import (
	"fmt"
	"maps"
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
// the smallest, over the bijections of its blocks onto a, b, c, ... that
// respect their colours (blockColors), of its sorted init facts and sorted
// goal facts. Two problems have the same key exactly when they differ only
// in their blocks' names.
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
	// Only the bijections that list the blocks in the order of their
	// colours (colours below) need trying: colours are invariant under
	// renaming, so the smallest over these is as much an identity as the
	// smallest over all n! bijections, and far fewer (a random start of 6
	// blocks leaves a handful, not 720).
	color := blockColors(blocks, init, goal)
	order := slices.Clone(blocks)
	slices.SortStableFunc(order, func(x, y string) int { return color[x] - color[y] })
	var groups [][]string // runs of equal colour in order
	for i := 0; i < len(order); {
		j := i + 1
		for j < len(order) && color[order[j]] == color[order[i]] {
			j++
		}
		groups = append(groups, order[i:j])
		i = j
	}
	perms := make([][]int, len(groups))
	for g := range groups {
		perms[g] = make([]int, len(groups[g]))
		for i := range perms[g] {
			perms[g][i] = i
		}
	}
	best := ""
	name := map[string]string{}
	for {
		at := 0
		for g, grp := range groups {
			for i, p := range perms[g] {
				name[grp[p]] = string(rune('a' + at + i))
			}
			at += len(grp)
		}
		k := canon(init, name) + "|" + canon(goal, name)
		if best == "" || k < best {
			best = k
		}
		// The next combination of the groups' permutations (an odometer).
		g := len(groups) - 1
		for ; g >= 0; g-- {
			if nextPerm(perms[g]) {
				break
			}
			slices.Sort(perms[g])
		}
		if g < 0 {
			break
		}
	}
	return fmt.Sprintf("%d|%s", len(blocks), best), nil
}

// blockColors colours the blocks so that renaming cannot change a block's
// colour: first by the atoms a block occurs in (section, predicate and
// argument place), then by that and its partners' colours in each atom
// (colour refinement, until the colours stop splitting). Colours are ranks
// from 0.
func blockColors(blocks []string, init, goal [][]string) map[string]int {
	preds := []string{"on", "ontable", "clear", "holding", "handempty"} // blocksAtom's
	color := make(map[string]int, len(blocks))
	for _, b := range blocks {
		color[b] = 0
	}
	sig := make(map[string][]int, len(blocks))
	for classes := 1; ; {
		clear(sig)
		for si, atoms := range [][][]string{init, goal} {
			for _, a := range atoms {
				pi := slices.Index(preds, a[0])
				for i, x := range a[1:] {
					// One occurrence: section, predicate, place, and the
					// colour of its partner (binary atoms; 0 for none).
					d := ((si*len(preds)+pi)*2 + i) * (len(blocks) + 1)
					for j, y := range a[1:] {
						if j != i {
							d += color[y] + 1
						}
					}
					sig[x] = append(sig[x], d)
				}
			}
		}
		keys := make(map[string][]int, len(blocks))
		var distinct [][]int
		for _, b := range blocks {
			ds := sig[b]
			slices.Sort(ds)
			k := append([]int{color[b]}, ds...)
			keys[b] = k
			if !slices.ContainsFunc(distinct, func(o []int) bool { return slices.Equal(o, k) }) {
				distinct = append(distinct, k)
			}
		}
		slices.SortFunc(distinct, slices.Compare)
		for _, b := range blocks {
			color[b] = slices.IndexFunc(distinct, func(o []int) bool { return slices.Equal(o, keys[b]) })
		}
		if len(distinct) == classes {
			return color
		}
		classes = len(distinct)
	}
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
	return generateBlocks(n, seed, exclude, []int{3, 4, 5, 6})
}

// generateBlocks is GenerateBlocksworld with the block counts to draw from
// (uniformly).
func generateBlocks(n int, seed uint64, exclude map[string]bool, sizes []int) ([]BlocksProblem, error) {
	rng := rand.New(rand.NewPCG(seed, 0x626c6f636b73))
	seen := map[string]bool{}
	var out []BlocksProblem
	for tries := 0; len(out) < n; tries++ {
		if tries > 100*n+1000 {
			return out, fmt.Errorf("envs: only %d distinct Blocksworld problems in %d draws", len(out), tries)
		}
		k := sizes[rng.IntN(len(sizes))]
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
			return nil, fmt.Errorf("envs: generated %s: %w", id, err)
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
		return nil, fmt.Errorf("envs: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("envs: no PlanBench instances in %s", dir)
	}
	keys := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("envs: %w", err)
		}
		k, err := blocksKey(string(src))
		if err != nil {
			return nil, fmt.Errorf("envs: %s: %w", f, err)
		}
		keys[k] = true
	}
	return keys, nil
}

// Blocksworld's splits (Options.Split).
const (
	// BlocksworldPlanBench is PlanBench's 501 instances (the default):
	// evaluation only.
	BlocksworldPlanBench = "planbench"
	// BlocksworldHeldOut is HeldOutBlocksworldTasks generated problems
	// (HeldOutBlocksworld) that no training run draws: what a choice
	// between trained priors may look at for Blocksworld, since PlanBench's
	// instances must not be tuned on.
	BlocksworldHeldOut = "heldout"
)

// BlocksworldSplits are the Blocksworld splits Options.Split may name.
var BlocksworldSplits = []string{BlocksworldPlanBench, BlocksworldHeldOut}

const (
	// HeldOutBlocksworldTasks is the size of the held-out split.
	HeldOutBlocksworldTasks = 200
	// HeldOutBlocksworldBlocks is the held-out problems' block count:
	// PlanBench's larger size (55 of its 501; the other 446 have 4 blocks).
	// Four blocks cannot be held out: PlanBench's instances are 185 of the
	// about 210 four-block problems there are up to renaming, and training
	// draws most of the rest.
	HeldOutBlocksworldBlocks = 5
	// ShippedBlocksworldDraws and ShippedBlocksworldSeed are the shipped
	// recipe's `nesy train --blocksworld 1000` with the default seed,
	// drawn before the held-out split existed: the held-out problems
	// differ from those, and every training draw since differs from the
	// held-out problems (BlocksworldTrainingExclusions).
	ShippedBlocksworldDraws = 1000
	ShippedBlocksworldSeed  = 1
	// heldOutSeed draws the held-out problems ("heldout" in ASCII).
	heldOutSeed = 0x68656c646f7574
)

// HeldOutBlocksworld returns the held-out split's problems (IDs
// "heldout-1", ..., in order): GenerateBlocksworld's form with
// HeldOutBlocksworldBlocks blocks, drawn with a seed of their own, none
// equal up to renaming to a PlanBench instance (pbKeys, PlanBenchKeys) or
// to any problem the shipped recipe trained on. The same pbKeys give the
// same problems.
func HeldOutBlocksworld(pbKeys map[string]bool) ([]BlocksProblem, error) {
	shipped, err := GenerateBlocksworld(ShippedBlocksworldDraws, ShippedBlocksworldSeed, pbKeys)
	if err != nil {
		return nil, fmt.Errorf("envs: held-out Blocksworld: %w", err)
	}
	exclude := maps.Clone(pbKeys)
	if exclude == nil {
		exclude = map[string]bool{}
	}
	for _, p := range shipped {
		k, err := blocksKey(p.Src)
		if err != nil {
			return nil, fmt.Errorf("envs: held-out Blocksworld: %s: %w", p.ID, err)
		}
		exclude[k] = true
	}
	probs, err := generateBlocks(HeldOutBlocksworldTasks, heldOutSeed, exclude, []int{HeldOutBlocksworldBlocks})
	if err != nil {
		return nil, fmt.Errorf("envs: held-out Blocksworld: %w", err)
	}
	for i := range probs {
		id := fmt.Sprintf("heldout-%d", i+1)
		probs[i].Src = strings.Replace(probs[i].Src, "(problem BW-"+probs[i].ID+")", "(problem BW-"+id+")", 1)
		probs[i].ID = id
	}
	return probs, nil
}

// BlocksworldTrainingExclusions returns the problems training must not
// draw, as keys up to renaming: PlanBench's instances in dir
// (planbench-blocksworld/instances) and the held-out split's. Passed to
// GenerateBlocksworld it leaves the shipped recipe's problems as they were
// (the held-out split avoids them) and keeps every other draw off the
// held-out split.
func BlocksworldTrainingExclusions(dir string) (map[string]bool, error) {
	keys, err := PlanBenchKeys(dir)
	if err != nil {
		return nil, err
	}
	held, err := HeldOutBlocksworld(keys)
	if err != nil {
		return nil, err
	}
	out := maps.Clone(keys)
	for _, p := range held {
		k, err := blocksKey(p.Src)
		if err != nil {
			return nil, fmt.Errorf("envs: held-out Blocksworld: %s: %w", p.ID, err)
		}
		out[k] = true
	}
	return out, nil
}

// NewBlocksworldHeldOut is the held-out split as a suite (HeldOutBlocksworld)
// in PlanBench's domain and words; dir is PlanBench's folder, whose domain
// it uses and whose instances the problems differ from. Task IDs are
// "heldout-N", the type "blocksworld".
func NewBlocksworldHeldOut(dir string) (*Suite, error) {
	pb, err := NewBlocksworld(dir)
	if err != nil {
		return nil, err
	}
	keys, err := PlanBenchKeys(filepath.Join(dir, "instances"))
	if err != nil {
		return nil, err
	}
	probs, err := HeldOutBlocksworld(keys)
	if err != nil {
		return nil, err
	}
	s := &Suite{name: pb.name, kind: pb.kind, domain: pb.domain, dpath: pb.dpath, split: BlocksworldHeldOut, srcs: map[string][]byte{}}
	for _, p := range probs {
		s.tasks = append(s.tasks, TaskInfo{ID: p.ID, Type: "blocksworld", Domain: pb.dpath, Problem: p.ID + ".pddl"})
		s.srcs[p.ID] = []byte(p.Src)
	}
	return s, nil
}
