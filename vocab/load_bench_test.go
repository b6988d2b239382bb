package vocab

import (
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
)

// BenchmarkLoad measures reading and parsing a real tokenizer.json (with its
// tokenizer_config.json) and decoding every token.
func BenchmarkLoad(b *testing.B) {
	for _, family := range []string{"qwen3", "gemma3"} {
		b.Run(family, func(b *testing.B) {
			path := testenv.Tokenizer(b, family)
			for b.Loop() {
				tok, err := Load(path)
				if err != nil {
					b.Fatal(err)
				}
				_ = tok.Decoded()
			}
		})
	}
}
