package trie

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/vocab"
)

// realFamilies are the shared tokenizers (see ../shared/tokenizers).
var realFamilies = []string{"qwen3", "llama3", "llama2", "gemma3"}

// loadReal reads a shared tokenizer and returns its decoded vocabulary, with
// the config's EOS token as end token.
func loadReal(tb testing.TB, family string) vocabulary {
	tb.Helper()
	tok, err := vocab.Load(testenv.Tokenizer(tb, family))
	if err != nil {
		tb.Fatal(err)
	}
	d := tok.Decoded()
	v := vocabulary{name: family, text: d.Text, special: d.Special}
	if tok.Config != nil {
		if id, ok := tok.ID(tok.Config.EOSToken); ok {
			v.end = append(v.end, id)
		}
	}
	return v
}

// TestAllowedMatchesBruteForceReal compares Allowed with a scan of the whole
// vocabulary on the four real tokenizers, for random ALFWorld-like states
// (non-ASCII names included) and partial steps cut at any byte. Set
// NESY_TRIE_LONG=1 for ten times as many states.
func TestAllowedMatchesBruteForceReal(t *testing.T) {
	states := 250
	if os.Getenv("NESY_TRIE_LONG") == "1" {
		states *= 10
	}
	for _, family := range realFamilies {
		t.Run(family, func(t *testing.T) {
			v := loadReal(t, family)
			x := newIndexT(t, v)
			r := rand.New(rand.NewPCG(7, uint64(len(v.text))))
			var set Set
			for state := 0; state < states; state++ {
				spec := randomSpec(r, 300)
				at, err := NewActionTrie(spec)
				if err != nil {
					t.Fatal(err)
				}
				for k := 0; k < 4; k++ {
					checkAllowed(t, x, v, at, spec, randomPartial(r, spec), &set)
				}
			}
		})
	}
}
