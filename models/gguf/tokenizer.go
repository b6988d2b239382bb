package gguf

import (
	"fmt"
	"github.com/nesy-dev/nesy/models/ggufvocab"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/dlclark/regexp2"
)

// Token types, tokenizer models and the Qwen pre-tokenizer name: package
// ggufvocab's, repeated here for the writer's users.
const (
	TypeNormal      = ggufvocab.TypeNormal
	TypeUnknown     = ggufvocab.TypeUnknown
	TypeControl     = ggufvocab.TypeControl
	TypeUserDefined = ggufvocab.TypeUserDefined
	TypeUnused      = ggufvocab.TypeUnused
	TypeByte        = ggufvocab.TypeByte

	ModelSentencePiece = ggufvocab.ModelSentencePiece
	ModelBPE           = ggufvocab.ModelBPE
	Qwen2Pre           = ggufvocab.Qwen2Pre
)

// Tokenizer is a vocabulary in GGUF terms.
type Tokenizer struct {
	Model string // ModelSentencePiece or ModelBPE
	// Pre names the pre-tokenizer regex of a BPE vocabulary ("qwen2",
	// "llama-bpe", "default", ...).
	Pre    string
	Tokens []string
	Types  []int32
	// Scores order SentencePiece merges (higher merges first). Required
	// for ModelSentencePiece.
	Scores []float32
	// Merges are "left right" pairs in rank order (ModelBPE).
	Merges []string

	BOS  int32   // beginning of sequence, -1 for none
	EOS  int32   // end of sequence
	EOT  int32   // end of turn, -1 for none
	Stop []int32 // further tokens that end generation
	PAD  int32   // padding, -1 for none

	AddBOS bool
	// AddSpacePrefix makes SentencePiece encoders prefix text with a space
	// ("Hello" is tokenized as " Hello"), as Llama 2 does.
	AddSpacePrefix bool
	// ChatTemplate is the Jinja chat template (tokenizer.chat_template).
	ChatTemplate string
}

func (t *Tokenizer) validate() error {
	n := len(t.Tokens)
	switch {
	case t.Model != ModelSentencePiece && t.Model != ModelBPE:
		return fmt.Errorf("gguf: tokenizer model %q is neither %q nor %q", t.Model, ModelSentencePiece, ModelBPE)
	case n < 8:
		return fmt.Errorf("gguf: vocabulary of %d tokens is too small", n)
	case len(t.Types) != n:
		return fmt.Errorf("gguf: %d token types for %d tokens", len(t.Types), n)
	case t.Model == ModelSentencePiece && len(t.Scores) != n:
		return fmt.Errorf("gguf: %d scores for %d tokens", len(t.Scores), n)
	case t.Scores != nil && len(t.Scores) != n:
		return fmt.Errorf("gguf: %d scores for %d tokens", len(t.Scores), n)
	}
	for _, id := range append([]int32{t.BOS, t.EOS, t.EOT, t.PAD}, t.Stop...) {
		if id < -1 || int(id) >= n {
			return fmt.Errorf("gguf: special token id %d outside the vocabulary (%d tokens)", id, n)
		}
	}
	if t.EOS < 0 {
		return fmt.Errorf("gguf: tokenizer needs an end-of-sequence token")
	}
	return nil
}

func (t *Tokenizer) addKV(kv map[string]any) {
	kv["tokenizer.ggml.model"] = t.Model
	kv["tokenizer.ggml.tokens"] = t.Tokens
	kv["tokenizer.ggml.token_type"] = t.Types
	if t.Scores != nil {
		kv["tokenizer.ggml.scores"] = t.Scores
	}
	if t.Model == ModelBPE {
		kv["tokenizer.ggml.pre"] = cmpOr(t.Pre, "default")
		kv["tokenizer.ggml.merges"] = t.Merges
	} else {
		kv["tokenizer.ggml.add_space_prefix"] = t.AddSpacePrefix
	}
	if t.BOS >= 0 {
		kv["tokenizer.ggml.bos_token_id"] = uint32(t.BOS)
	}
	kv["tokenizer.ggml.eos_token_id"] = uint32(t.EOS)
	if t.EOT >= 0 {
		kv["tokenizer.ggml.eot_token_id"] = uint32(t.EOT)
	}
	var stops []int32
	for _, id := range append([]int32{t.EOT}, t.Stop...) {
		if id >= 0 && id != t.EOS && !slices.Contains(stops, id) {
			stops = append(stops, id)
		}
	}
	if len(stops) > 0 {
		kv["tokenizer.ggml.eos_token_ids"] = stops
	}
	if t.PAD >= 0 {
		kv["tokenizer.ggml.padding_token_id"] = uint32(t.PAD)
	}
	kv["tokenizer.ggml.add_bos_token"] = t.AddBOS
	kv["tokenizer.ggml.add_eos_token"] = false
	if t.ChatTemplate != "" {
		kv["tokenizer.chat_template"] = t.ChatTemplate
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Pretokenizer returns the split regex of a GGUF pre-tokenizer name (see
// ggufvocab.Pretokenizer).
func Pretokenizer(pre string) string { return ggufvocab.Pretokenizer(pre) }

// ByteToSymbol maps each byte to the printable rune that stands for it in a
// byte-level BPE vocabulary (GPT-2's bytes_to_unicode table).
func ByteToSymbol() [256]rune {
	var m [256]rune
	next := rune(256)
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff) {
			m[b] = rune(b)
		} else {
			m[b] = next
			next++
		}
	}
	return m
}

// symbolOrder is the order GPT-2-style vocabularies list the 256 byte
// symbols in: printable bytes first, then the remapped ones.
func symbolOrder() []rune {
	m := ByteToSymbol()
	s := m[:]
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// trainMerges learns up to n BPE merges over words (each a sequence of
// symbols) weighted by their counts; ties go to the lexically smallest
// pair, so training is deterministic.
func trainMerges(words map[string]int, n int) [][2]string {
	type word struct {
		syms  []string
		count int
	}
	keys := make([]string, 0, len(words))
	for w := range words {
		keys = append(keys, w)
	}
	slices.Sort(keys)
	ws := make([]word, 0, len(keys))
	for _, k := range keys {
		var syms []string
		for _, r := range k {
			syms = append(syms, string(r))
		}
		ws = append(ws, word{syms, words[k]})
	}
	var merges [][2]string
	for len(merges) < n {
		counts := map[[2]string]int{}
		for _, w := range ws {
			for i := 0; i+1 < len(w.syms); i++ {
				counts[[2]string{w.syms[i], w.syms[i+1]}] += w.count
			}
		}
		var best [2]string
		bestN := 0
		for p, c := range counts {
			if c > bestN || (c == bestN && (p[0]+"\x00"+p[1]) < (best[0]+"\x00"+best[1])) {
				best, bestN = p, c
			}
		}
		if bestN < 2 {
			break
		}
		merges = append(merges, best)
		joined := best[0] + best[1]
		for wi := range ws {
			s := ws[wi].syms
			out := s[:0:0]
			for i := 0; i < len(s); i++ {
				if i+1 < len(s) && s[i] == best[0] && s[i+1] == best[1] {
					out = append(out, joined)
					i++
				} else {
					out = append(out, s[i])
				}
			}
			ws[wi].syms = out
		}
	}
	return merges
}

// SyntheticSPM returns a small SentencePiece vocabulary with byte fallback
// learned from a built-in English planning corpus: <unk>, <s>, </s>, the
// 256 byte tokens <0x00>..<0xFF>, the corpus characters and a few hundred
// merged pieces, with a Llama 2 chat template. size > 0 pads it with
// pseudo-words to exactly size tokens (it must be at least the natural
// size).
func SyntheticSPM(size int) (*Tokenizer, error) {
	t := &Tokenizer{
		Model: ModelSentencePiece, BOS: 1, EOS: 2, EOT: -1, PAD: -1,
		AddBOS: true, AddSpacePrefix: true, ChatTemplate: Llama2Template,
	}
	add := func(s string, typ int32, score float32) {
		t.Tokens = append(t.Tokens, s)
		t.Types = append(t.Types, typ)
		t.Scores = append(t.Scores, score)
	}
	add("<unk>", TypeUnknown, 0)
	add("<s>", TypeControl, 0)
	add("</s>", TypeControl, 0)
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), TypeByte, 0)
	}
	// SentencePiece pieces never cross a word start: split the normalized
	// corpus before every "▁".
	words := map[string]int{}
	chars := map[rune]bool{}
	for line := range strings.SplitSeq(corpus, "\n") {
		norm := "▁" + strings.ReplaceAll(line, " ", "▁")
		for _, r := range norm {
			chars[r] = true
		}
		for _, w := range strings.SplitAfter(strings.ReplaceAll(norm, "▁", "\x00▁"), "\x00") {
			w = strings.TrimSuffix(w, "\x00")
			if w != "" {
				words[w]++
			}
		}
	}
	rs := make([]rune, 0, len(chars))
	for r := range chars {
		rs = append(rs, r)
	}
	slices.Sort(rs)
	for _, r := range rs {
		add(string(r), TypeNormal, 0)
	}
	seen := map[string]bool{}
	for _, tok := range t.Tokens {
		seen[tok] = true
	}
	merges := trainMerges(words, 600)
	for i, m := range merges {
		p := m[0] + m[1]
		if !seen[p] {
			seen[p] = true
			add(p, TypeNormal, -float32(i+1))
		}
	}
	if err := pad(t, size, func(w string) (string, int32, float32) {
		return "▁" + w, TypeNormal, -float32(len(merges) + 1)
	}, seen); err != nil {
		return nil, err
	}
	return t, nil
}

// SyntheticBPE returns a small byte-level BPE vocabulary with the qwen2
// pre-tokenizer: the 256 byte symbols, a few hundred merges learned from a
// built-in English planning corpus, and Qwen's chat tokens
// (<|endoftext|>, <|im_start|>, <|im_end|>, <think>, </think>) with a
// ChatML template that has Qwen 3's thinking switch. size > 0 pads the
// vocabulary with unused tokens to exactly size tokens.
func SyntheticBPE(size int) (*Tokenizer, error) {
	t := TrainBPE(strings.Split(corpus, "\n"), 600, "\n")
	if size == 0 {
		return t, nil
	}
	return padded(t, size)
}

// padded returns a copy of t padded to size tokens with unused "[PADn]"
// entries (n the token's id), as llama.cpp's converter pads a vocabulary
// to the embedding's rows; t itself is left as it is.
func padded(t *Tokenizer, size int) (*Tokenizer, error) {
	if size < len(t.Tokens) {
		return nil, fmt.Errorf("gguf: vocabulary size %d is below the tokenizer's %d tokens", size, len(t.Tokens))
	}
	c := *t
	c.Tokens = slices.Clone(t.Tokens)
	c.Types = slices.Clone(t.Types)
	c.Scores = slices.Clone(t.Scores)
	seen := seenTokens(&c)
	for len(c.Tokens) < size {
		tok := "[PAD" + strconv.Itoa(len(c.Tokens)) + "]"
		if seen[tok] {
			return nil, fmt.Errorf("gguf: cannot pad the vocabulary: it already has a token %q", tok)
		}
		seen[tok] = true
		c.Tokens = append(c.Tokens, tok)
		c.Types = append(c.Types, TypeUnused)
		if c.Scores != nil {
			c.Scores = append(c.Scores, 0)
		}
	}
	return &c, nil
}

// TrainBPE learns a byte-level BPE vocabulary from texts: the 256 byte
// symbols, up to merges merges (fewer when every pre-tokenized word of the
// texts is one token), and Qwen's chat tokens (<|endoftext|>,
// <|im_start|>, <|im_end|>, <think>, </think>), with the qwen2
// pre-tokenizer and a ChatML template that has Qwen 3's thinking switch.
// Each text is pre-tokenized with suffix appended (e.g. "\n" for lines).
// Ties go to the lexically smallest pair: the same texts give the same
// vocabulary.
func TrainBPE(texts []string, merges int, suffix string) *Tokenizer {
	t := &Tokenizer{Model: ModelBPE, Pre: Qwen2Pre, PAD: -1, EOT: -1, ChatTemplate: ChatMLTemplate}
	add := func(s string, typ int32) {
		t.Tokens = append(t.Tokens, s)
		t.Types = append(t.Types, typ)
	}
	for _, r := range symbolOrder() {
		add(string(r), TypeNormal)
	}
	re := regexp2.MustCompile(Pretokenizer(Qwen2Pre), regexp2.RE2)
	sym := ByteToSymbol()
	words := map[string]int{}
	for _, text := range texts {
		for m, _ := re.FindStringMatch(text + suffix); m != nil; m, _ = re.FindNextMatch(m) {
			var sb strings.Builder
			for _, b := range []byte(m.String()) {
				sb.WriteRune(sym[b])
			}
			words[sb.String()]++
		}
	}
	seen := seenTokens(t)
	for _, m := range trainMerges(words, merges) {
		t.Merges = append(t.Merges, m[0]+" "+m[1])
		if p := m[0] + m[1]; !seen[p] {
			seen[p] = true
			add(p, TypeNormal)
		}
	}
	specials := []struct {
		s   string
		typ int32
	}{
		{"<|endoftext|>", TypeControl}, {"<|im_start|>", TypeControl}, {"<|im_end|>", TypeControl},
		{"<think>", TypeUserDefined}, {"</think>", TypeUserDefined},
	}
	first := int32(len(t.Tokens))
	for _, s := range specials {
		add(s.s, s.typ)
	}
	t.BOS, t.EOS, t.PAD = first, first+2, first
	t.Stop = []int32{first}
	return t
}

// seenTokens returns the set of t's token spellings.
func seenTokens(t *Tokenizer) map[string]bool {
	seen := make(map[string]bool, len(t.Tokens))
	for _, tok := range t.Tokens {
		seen[tok] = true
	}
	return seen
}

// pad grows t to size tokens with entries from next, fed unique
// pseudo-words.
func pad(t *Tokenizer, size int, next func(word string) (string, int32, float32), seen map[string]bool) error {
	if size == 0 {
		return nil
	}
	if size < len(t.Tokens) {
		return fmt.Errorf("gguf: vocabulary size %d is below the synthetic vocabulary's %d tokens", size, len(t.Tokens))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyz"
	for len(t.Tokens) < size {
		var b strings.Builder
		for range 2 + rng.IntN(7) {
			b.WriteByte(letters[rng.IntN(len(letters))])
		}
		tok, typ, score := next(b.String())
		if seen[tok] {
			continue
		}
		seen[tok] = true
		t.Tokens = append(t.Tokens, tok)
		t.Types = append(t.Types, typ)
		if t.Scores != nil {
			t.Scores = append(t.Scores, score)
		}
	}
	return nil
}

// Qwen's vision tokens as its tokenizer.json spells them: Qwen3.5's model
// writes them around (and for) every image.
const (
	QwenVisionStart = "<|vision_start|>"
	QwenVisionEnd   = "<|vision_end|>"
	QwenImagePad    = "<|image_pad|>"
)

// qwenVisionPositions is the learned position grid of the generated
// Qwen3-VL tower (4 x 4, interpolated to each image's patch grid).
const qwenVisionPositions = 16

// withQwenVisionTokens returns t with Qwen's vision tokens as control
// tokens: kept where t has them (a real Qwen vocabulary), else in the last
// unused padding slots, else appended.
func withQwenVisionTokens(t *Tokenizer) *Tokenizer {
	c := *t
	c.Tokens, c.Types, c.Scores = slices.Clone(t.Tokens), slices.Clone(t.Types), slices.Clone(t.Scores)
	ids := c.index()
	free := len(c.Tokens) - 1
	for _, tok := range []string{QwenVisionStart, QwenVisionEnd, QwenImagePad} {
		if _, ok := ids[tok]; ok {
			continue
		}
		for free >= 0 && c.Types[free] != TypeUnused {
			free--
		}
		slot := free
		if slot < 0 {
			slot = len(c.Tokens)
			c.Tokens, c.Types = append(c.Tokens, ""), append(c.Types, 0)
			if c.Scores != nil {
				c.Scores = append(c.Scores, 0)
			}
		} else {
			free--
		}
		c.Tokens[slot], c.Types[slot] = tok, TypeControl
		if c.Scores != nil {
			c.Scores[slot] = 0
		}
		ids[tok] = slot
	}
	return &c
}

// index maps each token to its id.
func (t *Tokenizer) index() map[string]int {
	ids := make(map[string]int, len(t.Tokens))
	for i, tok := range t.Tokens {
		ids[tok] = i
	}
	return ids
}

// Token ids the engine's gemma3 model writes around every image.
const (
	gemmaStartOfImage = 255999
	gemmaEndOfImage   = 256000
)

// SyntheticGemma returns a synthetic SentencePiece vocabulary laid out for
// gemma3: the SyntheticSPM pieces padded to 262,144 tokens (Gemma 3's
// size), with <start_of_image> and <end_of_image> at the ids the engine
// uses around images, <start_of_turn> and <end_of_turn> after them, no
// space prefix, and a Gemma chat template.
func SyntheticGemma() (*Tokenizer, error) {
	t, err := SyntheticSPM(262144)
	if err != nil {
		return nil, err
	}
	t.AddSpacePrefix = false
	t.ChatTemplate = GemmaTemplate
	for i, s := range []string{"<start_of_image>", "<end_of_image>", "<start_of_turn>", "<end_of_turn>"} {
		id := gemmaStartOfImage + i
		t.Tokens[id], t.Types[id], t.Scores[id] = s, TypeControl, 0
	}
	t.EOT = gemmaStartOfImage + 3
	return t, nil
}
