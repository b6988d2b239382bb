package models

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	fsggml "github.com/ollama/ollama/fs/ggml"
	"golang.org/x/text/unicode/norm"

	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/models/gguf"
	"github.com/nesy-dev/nesy/vocab"
)

// refTokenizer is a small, direct implementation of Hugging Face's BPE
// tokenizer pipeline, written for these tests from the tokenizer.json
// specification: added tokens split out of the raw text (leftmost,
// longest), each remaining piece normalised, pre-tokenised, and merged by
// merge rank, with byte fallback. It shares no code with the tokenizer
// under test.
type refTokenizer struct {
	hf    *vocab.Tokenizer
	ranks map[[2]string]int
	added []string
}

func newRefTokenizer(t *testing.T, hf *vocab.Tokenizer) *refTokenizer {
	t.Helper()
	r := &refTokenizer{hf: hf, ranks: make(map[[2]string]int, len(hf.Merges))}
	for i, m := range hf.Merges {
		if _, ok := r.ranks[[2]string{m.A, m.B}]; !ok {
			r.ranks[[2]string{m.A, m.B}] = i
		}
	}
	for _, a := range hf.Added {
		if a.Normalized {
			t.Fatalf("reference tokenizer: normalized added token %q not supported", a.Content)
		}
		r.added = append(r.added, a.Content)
	}
	for _, s := range hf.Normalizer {
		switch s.Type {
		case "NFC", "Prepend":
		case "Replace":
			if s.Regex {
				t.Fatalf("reference tokenizer: regex Replace not supported")
			}
		default:
			t.Fatalf("reference tokenizer: normalizer %s not supported", s.Type)
		}
	}
	return r
}

// gpt2Bytes is GPT-2's bytes_to_unicode table, built as its paper code
// describes: printable bytes keep their code point, the rest take 256, 257,
// ... in byte order.
func gpt2Bytes() map[byte]rune {
	m := map[byte]rune{}
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255) {
			m[byte(b)] = rune(b)
		} else {
			m[byte(b)] = rune(256 + n)
			n++
		}
	}
	return m
}

func (r *refTokenizer) encode(t *testing.T, text string) []int32 {
	var ids []int32
	for len(text) > 0 {
		// Leftmost, then longest, added token.
		best, bestLen := -1, 0
		for _, a := range r.added {
			if i := strings.Index(text, a); i >= 0 && (best < 0 || i < best || (i == best && len(a) > bestLen)) {
				best, bestLen = i, len(a)
			}
		}
		if best < 0 {
			ids = append(ids, r.encodePiece(t, text)...)
			break
		}
		if best > 0 {
			ids = append(ids, r.encodePiece(t, text[:best])...)
		}
		id, _ := r.hf.ID(text[best : best+bestLen])
		ids = append(ids, id)
		text = text[best+bestLen:]
	}
	return ids
}

func (r *refTokenizer) encodePiece(t *testing.T, s string) []int32 {
	for _, st := range r.hf.Normalizer {
		switch st.Type {
		case "NFC":
			s = norm.NFC.String(s)
		case "Prepend":
			if s != "" {
				s = st.Content + s
			}
		case "Replace":
			s = strings.ReplaceAll(s, st.Pattern, st.Content)
		}
	}
	words := []string{s}
	for _, st := range r.hf.PreTokenizer {
		var next []string
		for _, w := range words {
			switch {
			case st.Type == "Split" && st.Regex && st.Behavior == "Isolated":
				re := regexp2.MustCompile(st.Pattern, regexp2.Unicode)
				runes := []rune(w)
				at := 0
				for m, _ := re.FindRunesMatch(runes); m != nil; m, _ = re.FindNextMatch(m) {
					if m.Index > at {
						next = append(next, string(runes[at:m.Index]))
					}
					next = append(next, m.String())
					at = m.Index + m.Length
				}
				if at < len(runes) {
					next = append(next, string(runes[at:]))
				}
			case st.Type == "Split" && !st.Regex && st.Behavior == "MergedWithPrevious":
				for w != "" {
					i := strings.Index(w, st.Pattern)
					if i < 0 {
						next = append(next, w)
						break
					}
					next = append(next, w[:i+len(st.Pattern)])
					w = w[i+len(st.Pattern):]
				}
			case st.Type == "ByteLevel" && !st.UseRegex && !st.AddPrefixSpace:
				tab := gpt2Bytes()
				var sb strings.Builder
				for i := 0; i < len(w); i++ {
					sb.WriteRune(tab[w[i]])
				}
				next = append(next, sb.String())
			default:
				t.Fatalf("reference tokenizer: pre-tokenizer %+v not supported", st)
			}
		}
		words = next
	}
	var ids []int32
	for _, w := range words {
		if w == "" {
			continue
		}
		if id, ok := r.hf.ID(w); ok && r.hf.IgnoreMerges {
			ids = append(ids, id)
			continue
		}
		var syms []string
		for _, c := range w {
			syms = append(syms, string(c))
		}
		for {
			bestRank, bi := -1, -1
			for i := 0; i+1 < len(syms); i++ {
				if rk, ok := r.ranks[[2]string{syms[i], syms[i+1]}]; ok && (bestRank < 0 || rk < bestRank) {
					bestRank, bi = rk, i
				}
			}
			if bi < 0 {
				break
			}
			a, b := syms[bi], syms[bi+1]
			var out []string
			for i := 0; i < len(syms); i++ {
				if i+1 < len(syms) && syms[i] == a && syms[i+1] == b {
					out = append(out, a+b)
					i++
				} else {
					out = append(out, syms[i])
				}
			}
			syms = out
		}
		for _, sym := range syms {
			if id, ok := r.hf.ID(sym); ok {
				ids = append(ids, id)
				continue
			}
			if !r.hf.ByteFallback {
				t.Fatalf("reference tokenizer: symbol %q not in the vocabulary", sym)
			}
			for i := 0; i < len(sym); i++ {
				id, ok := r.hf.ID(vocab.ByteTokenName(sym[i]))
				if !ok {
					t.Fatalf("reference tokenizer: no byte token for %#x", sym[i])
				}
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// tokenizerSamples are texts every tokenizer must encode as the reference
// does: ASCII, whitespace runs, accents (one decomposed), CJK, emoji with
// modifiers and flags, digits, contractions, plan syntax, odd whitespace.
var tokenizerSamples = []string{
	"Hello, world! This is a test.",
	"go to countertop 1\ntake apple 1 from countertop 1\nput apple 1 in/on fridge 1",
	"  leading spaces and   multiple   spaces  ",
	"Café naïve résumé — déjà vu; Ångström, Straße, cafe\u0301",
	"中文分词测试，日本語のテキスト、한국어 문장",
	"emoji 🙂👍🏽 and 🇫🇷 flags 👨‍👩‍👧",
	"numbers 1234567 3.14159 2026-11-30 0x1F",
	"don't can't I'm they'll we've HE'S",
	"(pick-up a)\n(stack a b)\n\n\n(put-down c)",
	"tabs\tand\r\nwindows newlines\t\t",
	"nbsp\u00a0and ideographic\u3000space\u2009thin",
}

// chatSamples hold each family's chat markup.
var chatSamples = map[string]string{
	"qwen3":  "<|im_start|>system\nYou plan.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
	"llama3": "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
	"gemma3": "<bos><start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n",
	"llama2": "<s>[INST] Hi there [/INST] Hello </s><s>[INST] again [/INST]",
}

// loadedTokenizers caches tokenizerFromFile per family: loading a 262k
// vocabulary takes seconds.
var loadedTokenizers = struct {
	sync.Mutex
	m map[string]cachedTokenizer
}{m: map[string]cachedTokenizer{}}

type cachedTokenizer struct {
	tok *textTokenizer
	hf  *vocab.Tokenizer
}

// tokenizerFromFile writes a minimal model with the vocabulary of a shared
// tokenizer.json and reads its tokenizer back from the GGUF metadata.
func tokenizerFromFile(t *testing.T, family string) (*textTokenizer, *vocab.Tokenizer) {
	t.Helper()
	path := testenv.Tokenizer(t, family)
	loadedTokenizers.Lock()
	defer loadedTokenizers.Unlock()
	if c, ok := loadedTokenizers.m[family]; ok {
		return c.tok, c.hf
	}
	hf, err := vocab.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	gt, err := gguf.FromHF(path)
	if err != nil {
		t.Fatal(err)
	}
	arch := gguf.ArchLlama
	if family == "qwen3" {
		arch = gguf.ArchQwen3
	}
	file := filepath.Join(t.TempDir(), family+".gguf")
	spec := gguf.Spec{Arch: arch, Embd: 8, Layers: 1, FFN: 8, Heads: 2, KVHeads: 1, TiedOutput: true, Tokenizer: gt}
	if err := gguf.Write(file, spec); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	meta, err := fsggml.Decode(f, -1)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := newTextTokenizer(meta.KV(), false)
	if err != nil {
		t.Fatal(err)
	}
	loadedTokenizers.m[family] = cachedTokenizer{tok, hf}
	return tok, hf
}

func TestTokenizeMatchesReference(t *testing.T) {
	for _, family := range []string{"qwen3", "llama3", "gemma3", "llama2"} {
		t.Run(family, func(t *testing.T) {
			tok, hf := tokenizerFromFile(t, family)
			ref := newRefTokenizer(t, hf)
			texts := append(slices.Clone(tokenizerSamples), chatSamples[family])
			for _, text := range texts {
				want := ref.encode(t, text)
				got, err := tok.Tokenize(text, true)
				if err != nil {
					t.Fatalf("Tokenize(%q): %v", text, err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("Tokenize(%q)\n got %v\nwant %v (reference)", text, got, want)
				}
			}
		})
	}
}

func TestTokenizeRoundTrip(t *testing.T) {
	for _, family := range []string{"qwen3", "llama3", "gemma3", "llama2"} {
		t.Run(family, func(t *testing.T) {
			tok, _ := tokenizerFromFile(t, family)
			texts := slices.Clone(tokenizerSamples)
			if family != "llama2" { // Llama 2 prefixes a space after every special token
				texts = append(texts, chatSamples[family])
			}
			for _, text := range texts {
				if family == "qwen3" {
					text = norm.NFC.String(text) // Qwen normalises to NFC
				}
				ids, err := tok.Tokenize(text, true)
				if err != nil {
					t.Fatal(err)
				}
				back, err := tok.Detokenize(ids)
				if err != nil {
					t.Fatal(err)
				}
				if back != text {
					t.Errorf("Detokenize(Tokenize(%q)) = %q", text, back)
				}
				// Vocab.Text concatenates to the same bytes (what the decoder
				// compares), up to the SentencePiece space prefix.
				var sb strings.Builder
				for _, id := range ids {
					sb.Write(tok.vocab.Text[id])
				}
				if got := strings.TrimPrefix(sb.String(), " "); got != strings.TrimPrefix(text, " ") && !(tok.addSpacePrefix && got == text) {
					t.Errorf("Vocab.Text of Tokenize(%q) = %q", text, sb.String())
				}
			}
		})
	}
}

func TestTokenizeSpecialHandling(t *testing.T) {
	tok, hf := tokenizerFromFile(t, "qwen3")
	imStart, _ := hf.ID("<|im_start|>")
	think, _ := hf.ID("<think>")
	cases := []struct {
		name         string
		text         string
		parseSpecial bool
		wantID       int32
		want         bool
	}{
		{"control token parsed", "<|im_start|>user", true, imStart, true},
		{"control token as text", "<|im_start|>user", false, imStart, false},
		{"added non-control token always", "<think>x", false, think, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ids, err := tok.Tokenize(c.text, c.parseSpecial)
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(ids, c.wantID); got != c.want {
				t.Errorf("Tokenize(%q, %v) = %v: contains %d = %v, want %v", c.text, c.parseSpecial, ids, c.wantID, got, c.want)
			}
			back, _ := tok.Detokenize(ids)
			if back != c.text {
				t.Errorf("round trip %q -> %q", c.text, back)
			}
		})
	}
	// Vocab flags: control tokens are special, <think> and text are not.
	if !tok.vocab.Special[imStart] || tok.vocab.Special[think] {
		t.Errorf("Special[<|im_start|>]=%v Special[<think>]=%v", tok.vocab.Special[imStart], tok.vocab.Special[think])
	}
	for _, id := range tok.vocab.EOS {
		if !utf8.Valid(tok.vocab.Text[id]) || !tok.vocab.Special[id] {
			t.Errorf("EOS %d (%q) should be a control token", id, tok.vocab.Text[id])
		}
	}
}
