package train

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dlclark/regexp2"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/models/gguf"
)

// bpeEncode is a reference byte-level BPE encoder, written from the
// algorithm (pre-tokenize, map bytes to symbols, merge the lowest-ranked
// adjacent pair until none is left) and independent of the engine's.
func bpeEncode(t *testing.T, tok *gguf.Tokenizer, text string) []int32 {
	t.Helper()
	rank := map[string]int{}
	for i, m := range tok.Merges {
		rank[m] = i
	}
	id := map[string]int32{}
	for i, s := range tok.Tokens {
		id[s] = int32(i)
	}
	re := regexp2.MustCompile(gguf.Pretokenizer(tok.Pre), regexp2.RE2)
	sym := gguf.ByteToSymbol()
	var out []int32
	for m, _ := re.FindStringMatch(text); m != nil; m, _ = re.FindNextMatch(m) {
		var parts []string
		for _, b := range []byte(m.String()) {
			parts = append(parts, string(sym[b]))
		}
		for {
			best, at := -1, -1
			for i := 0; i+1 < len(parts); i++ {
				if r, ok := rank[parts[i]+" "+parts[i+1]]; ok && (best < 0 || r < best) {
					best, at = r, i
				}
			}
			if at < 0 {
				break
			}
			parts = slices.Concat(parts[:at], []string{parts[at] + parts[at+1]}, parts[at+2:])
		}
		for _, p := range parts {
			n, ok := id[p]
			if !ok {
				t.Fatalf("symbol %q has no token", p)
			}
			out = append(out, n)
		}
	}
	return out
}

// TestEngineTokenizesAsBPE: the engine, loading the prior's GGUF, splits
// the training texts (and a text from outside them) into the tokens the
// reference encoder gives.
func TestEngineTokenizesAsBPE(t *testing.T) {
	ds := testenv.Datasets(t)
	demos, _, err := ALFWorldDemos(context.Background(), filepath.Join(ds, "alfworld", "valid_train"),
		DemoOptions{Prompt: decoder.PromptOptions{Compact: true}, Limit: 6})
	if err != nil {
		t.Fatal(err)
	}
	tok, lm := tinyPrior(t, demos, 2000)
	texts := append(DemoTexts(demos), "put a clean mug in coffeemachine 1.\nheat potato 3 with microwave 1\n", "ünïcode — tabs\tand  spaces\n\n")
	for _, text := range texts {
		got, err := lm.Tokenize(text, false)
		if err != nil {
			t.Fatal(err)
		}
		want := bpeEncode(t, tok, text)
		if !slices.Equal(got, want) {
			t.Fatalf("engine tokens differ from the reference BPE on %q:\n got %v\nwant %v", text[:min(len(text), 80)], got, want)
		}
		back, err := lm.Detokenize(got)
		if err != nil || back != text {
			t.Fatalf("detokenized %q, want %q (%v)", back, text, err)
		}
	}
	// Each word of a plan line is one token (the qwen2 pre-tokenizer
	// keeps digits and the space before them apart): "take", " book",
	// " ", "2", " from", " sidetable", " ", "1", "\n".
	line, err := lm.Tokenize("take book 2 from sidetable 1\n", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(line) != 9 {
		t.Errorf("a plan line is %d tokens, want 9", len(line))
	}
}
