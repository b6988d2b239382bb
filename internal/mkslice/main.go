// Command mkslice writes the small slice of the shared datasets and
// tokenizers that the repository carries in testdata/shared, so that
// `make test` on a clone without ../shared still parses, grounds, decodes,
// searches and serves real tasks with a real (reduced) vocabulary:
//
//	go run ./internal/mkslice -shared ../shared -out testdata/shared
//
// It copies a few tasks of each dataset (one ALFWorld game per task type,
// the first PlanBench instances, one VirtualHome problem per category of a
// few categories, the smallest IPC instances) with their reference plans,
// and reduces the Qwen3 tokenizer to its first tokens (the
// merges among them, the special tokens renumbered after them). The full
// sets stay in ../shared; tests that need all of them skip on the slice.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

func main() {
	shared := flag.String("shared", "../shared", "the shared folder (datasets/, tokenizers/)")
	out := flag.String("out", "testdata/shared", "where to write the slice")
	vocabSize := flag.Int("vocab", 6000, "tokens kept of each tokenizer (special tokens come after)")
	flag.Parse()
	if err := run(*shared, *out, *vocabSize); err != nil {
		fmt.Fprintln(os.Stderr, "mkslice:", err)
		os.Exit(1)
	}
}

func run(shared, out string, vocabSize int) error {
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	ds, dd := filepath.Join(shared, "datasets"), filepath.Join(out, "datasets")
	cp := func(rel string) error { return copyFile(filepath.Join(ds, rel), filepath.Join(dd, rel)) }

	// ALFWorld: the smallest game of each task type.
	games, err := filepath.Glob(filepath.Join(ds, "alfworld", "valid_unseen", "*", "*", "game.tw-pddl"))
	if err != nil || len(games) == 0 {
		return fmt.Errorf("no ALFWorld games under %s", ds)
	}
	best := map[string]string{}
	size := map[string]int64{}
	for _, g := range games {
		typ, _, _ := strings.Cut(filepath.Base(filepath.Dir(filepath.Dir(g))), "-")
		st, err := os.Stat(g)
		if err != nil {
			return err
		}
		if best[typ] == "" || st.Size() < size[typ] {
			best[typ], size[typ] = g, st.Size()
		}
	}
	for _, g := range best {
		for _, f := range []string{g, filepath.Join(filepath.Dir(g), "initial_state.pddl")} {
			rel, _ := filepath.Rel(ds, f)
			if err := cp(rel); err != nil {
				return err
			}
		}
	}
	if err := cp("alfworld/alfred.pddl"); err != nil {
		return err
	}

	// PlanBench Blocksworld: the first instances and their plans.
	var bwGold map[string]json.RawMessage
	if err := readJSON(filepath.Join(ds, "planbench-blocksworld", "ground_truth_plans.json"), &bwGold); err != nil {
		return err
	}
	keep := map[string]json.RawMessage{}
	for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100, 500} {
		id := "instance-" + strconv.Itoa(n)
		if err := cp("planbench-blocksworld/instances/" + id + ".pddl"); err != nil {
			return err
		}
		if g, ok := bwGold[id]; ok {
			keep[id] = g
		}
	}
	if err := cp("planbench-blocksworld/domain.pddl"); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dd, "planbench-blocksworld", "ground_truth_plans.json"), keep); err != nil {
		return err
	}

	// VirtualHome: the problems tests name, and the first problem with a
	// gold plan in each of a few categories.
	var vhGold map[string]json.RawMessage
	if err := readJSON(filepath.Join(ds, "virtualhome", "gold_pddl_plan.json"), &vhGold); err != nil {
		return err
	}
	cats, _ := filepath.Glob(filepath.Join(ds, "virtualhome", "problems", "*"))
	slices.Sort(cats)
	keep = map[string]json.RawMessage{}
	named := []string{"1_1", "2_1", "3_1", "201_1", "562_1"}
	for _, c := range cats {
		for _, id := range named {
			p := filepath.Join(c, id+".pddl")
			if _, err := os.Stat(p); err != nil {
				continue
			}
			rel, _ := filepath.Rel(ds, p)
			if err := cp(rel); err != nil {
				return err
			}
			if g, ok := vhGold[id]; ok {
				keep[id] = g
			}
		}
	}
	for _, c := range cats[:min(4, len(cats))] {
		probs, _ := filepath.Glob(filepath.Join(c, "*.pddl"))
		slices.Sort(probs)
		for _, p := range probs {
			id := strings.TrimSuffix(filepath.Base(p), ".pddl")
			if g, ok := vhGold[id]; ok {
				rel, _ := filepath.Rel(ds, p)
				if err := cp(rel); err != nil {
					return err
				}
				keep[id] = g
				break
			}
		}
	}
	if err := cp("virtualhome/virtualhome.pddl"); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dd, "virtualhome", "gold_pddl_plan.json"), keep); err != nil {
		return err
	}

	// IPC: the domains and small problems the tests name.
	for _, pat := range []string{"blocks/domain.pddl", "blocks/probBLOCKS-[4-6]-*.pddl", "gripper/domain.pddl",
		"gripper/prob0[1-2].pddl", "logistics00/domain.pddl", "logistics00/probLOGISTICS-4-*.pddl"} {
		files, _ := filepath.Glob(filepath.Join(ds, "ipc", pat))
		if len(files) == 0 {
			return fmt.Errorf("no IPC files match %s", pat)
		}
		for _, f := range files {
			rel, _ := filepath.Rel(ds, f)
			if err := cp(rel); err != nil {
				return err
			}
		}
	}

	// Qwen3 only: a reduced SentencePiece vocabulary (Llama 2) tokenizes
	// differently in the engine and in the reference tokenizer, so tests
	// that need Llama 2 skip on the slice.
	for _, fam := range []string{"qwen3"} {
		src := filepath.Join(shared, "tokenizers", fam)
		dst := filepath.Join(out, "tokenizers", fam)
		if err := reduceTokenizer(src, dst, vocabSize); err != nil {
			return fmt.Errorf("%s: %w", fam, err)
		}
	}
	return nil
}

// alwaysKept are tokens a reduced vocabulary keeps whatever their id:
// SentencePiece's word-boundary marker on its own.
var alwaysKept = []string{"\u2581"}

// reduceTokenizer keeps the tokens with ids below n (and alwaysKept), the
// merges whose two sides and result are among them, renumbers the kept
// tokens contiguously in their order, and the added tokens after them (in
// tokenizer.json and tokenizer_config.json).
func reduceTokenizer(src, dst string, n int) error {
	var tj map[string]json.RawMessage
	if err := readJSON(filepath.Join(src, "tokenizer.json"), &tj); err != nil {
		return err
	}
	var model map[string]json.RawMessage
	if err := json.Unmarshal(tj["model"], &model); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	var vocab map[string]int
	if err := json.Unmarshal(model["vocab"], &vocab); err != nil {
		return fmt.Errorf("model.vocab: %w", err)
	}
	var ids []int
	byID := map[int]string{}
	for tok, id := range vocab {
		if id < n || slices.Contains(alwaysKept, tok) {
			ids = append(ids, id)
			byID[id] = tok
		}
	}
	slices.Sort(ids)
	kept := map[string]int{}
	remap := map[int]int{}
	for i, id := range ids {
		kept[byID[id]] = i
		remap[id] = i
	}
	n = len(ids)
	var merges []json.RawMessage
	if err := json.Unmarshal(model["merges"], &merges); err != nil {
		return fmt.Errorf("model.merges: %w", err)
	}
	var keptMerges []json.RawMessage
	for _, m := range merges {
		var l, r string
		var pair []string
		if json.Unmarshal(m, &pair) == nil && len(pair) == 2 {
			l, r = pair[0], pair[1]
		} else {
			var s string
			if err := json.Unmarshal(m, &s); err != nil {
				return fmt.Errorf("merge %s: %w", m, err)
			}
			var ok bool
			if l, r, ok = strings.Cut(s, " "); !ok {
				return fmt.Errorf("merge %q", s)
			}
		}
		_, okl := kept[l]
		_, okr := kept[r]
		_, okm := kept[l+r]
		if okl && okr && okm {
			keptMerges = append(keptMerges, m)
		}
	}
	var added []map[string]any
	if err := json.Unmarshal(tj["added_tokens"], &added); err != nil {
		return fmt.Errorf("added_tokens: %w", err)
	}
	sort.Slice(added, func(i, j int) bool { return added[i]["id"].(float64) < added[j]["id"].(float64) })
	next := n
	for _, a := range added {
		id := int(a["id"].(float64))
		if nid, ok := remap[id]; ok {
			a["id"] = nid
			continue
		}
		remap[id] = next
		a["id"] = next
		next++
	}
	model["vocab"] = mustJSON(kept)
	model["merges"] = mustJSON(keptMerges)
	tj["model"] = mustJSON(model)
	tj["added_tokens"] = mustJSON(added)
	if err := writeJSON(filepath.Join(dst, "tokenizer.json"), tj); err != nil {
		return err
	}

	var cfg map[string]json.RawMessage
	if err := readJSON(filepath.Join(src, "tokenizer_config.json"), &cfg); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if raw, ok := cfg["added_tokens_decoder"]; ok {
		var dec map[string]json.RawMessage
		if err := json.Unmarshal(raw, &dec); err != nil {
			return fmt.Errorf("added_tokens_decoder: %w", err)
		}
		out := map[string]json.RawMessage{}
		for k, v := range dec {
			id, err := strconv.Atoi(k)
			if err != nil {
				return fmt.Errorf("added_tokens_decoder key %q", k)
			}
			nid, ok := remap[id]
			if !ok {
				continue
			}
			id = nid
			out[strconv.Itoa(id)] = v
		}
		cfg["added_tokens_decoder"] = mustJSON(out)
	}
	return writeJSON(filepath.Join(dst, "tokenizer_config.json"), cfg)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain maps and slices are marshalled here
	}
	return b
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
