package models

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dlclark/regexp2"
	"github.com/ollama/ollama/fs"
	"github.com/ollama/ollama/tokenizer"
	"golang.org/x/text/unicode/norm"

	"github.com/nesy-dev/nesy/models/ggufvocab"
	"github.com/nesy-dev/nesy/vocab"
)

// textTokenizer turns text into token ids the way the model's Hugging Face
// tokenizer does. Ollama's engine does the BPE work (its BytePairEncoding
// and SentencePiece encoders), over a copy of the vocabulary in which no
// token is special, so that this layer decides where special tokens are:
//
//   - added tokens are matched in the raw text first, leftmost-longest;
//     control tokens (BOS, EOS, chat markup) only when parseSpecial is set,
//     other added tokens (Qwen's "<think>", Gemma's "\n\n") always, as
//     llama.cpp does;
//   - every text piece between them is normalised on its own (NFC for Qwen;
//     a leading space for SentencePiece vocabularies that prefix one, as
//     Llama 2's "Prepend ▁" normaliser does) and then encoded.
type textTokenizer struct {
	spm            bool // SentencePiece (else byte-level BPE)
	plain          tokenizer.Tokenizer
	pre            *regexp2.Regexp // byte-level BPE word split
	addSpacePrefix bool
	nfc            bool
	imageTags      bool // "[img-n]" tags become ImageToken(n)

	added     map[string]addedToken
	firstByte [256]bool
	minLen    int
	maxLen    int
	vocab     *Vocab
	vocabSize int
}

type addedToken struct {
	id      int32
	control bool
}

// gpt2Pattern is GPT-2's own word split (GGUF pre-tokenizer "default").
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// endOfTurn are spellings that end an assistant turn in the families nesy
// serves; those present as control tokens join Vocab.EOS.
var endOfTurn = []string{"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<|eom_id|>", "<end_of_turn>", "<eos>", "</s>"}

// newTextTokenizer builds the tokenizer from a GGUF's metadata.
func newTextTokenizer(c fs.Config, vision bool) (*textTokenizer, error) {
	tokens := c.Strings("tokenizer.ggml.tokens")
	types := c.Ints("tokenizer.ggml.token_type")
	if len(tokens) == 0 {
		return nil, fmt.Errorf("the file has no vocabulary (tokenizer.ggml.tokens)")
	}
	if len(types) != len(tokens) {
		types = make([]int32, len(tokens))
		for i := range types {
			types[i] = ggufvocab.TypeNormal
		}
	}
	t := &textTokenizer{vocabSize: len(tokens), imageTags: vision, added: map[string]addedToken{}}
	plainTypes := slices.Clone(types)
	for i, ty := range types {
		if ty == ggufvocab.TypeControl || ty == ggufvocab.TypeUserDefined {
			plainTypes[i] = ggufvocab.TypeNormal
			if tokens[i] == "" {
				continue
			}
			t.added[tokens[i]] = addedToken{id: int32(i), control: ty == ggufvocab.TypeControl}
			t.firstByte[tokens[i][0]] = true
			if t.minLen == 0 || len(tokens[i]) < t.minLen {
				t.minLen = len(tokens[i])
			}
			t.maxLen = max(t.maxLen, len(tokens[i]))
		}
	}
	voc := &tokenizer.Vocabulary{Values: tokens, Types: plainTypes}
	arch := c.Architecture()
	switch model := c.String("tokenizer.ggml.model"); model {
	case ggufvocab.ModelSentencePiece:
		t.spm = true
		voc.Scores = c.Floats("tokenizer.ggml.scores")
		if len(voc.Scores) != len(tokens) {
			return nil, fmt.Errorf("SentencePiece vocabulary has %d scores for %d tokens", len(voc.Scores), len(tokens))
		}
		if len(tokens) < 5 {
			return nil, fmt.Errorf("vocabulary of %d tokens is too small", len(tokens))
		}
		t.addSpacePrefix = c.Bool("tokenizer.ggml.add_space_prefix", !strings.HasPrefix(arch, "gemma"))
		t.plain = tokenizer.NewSentencePiece(voc)
	case ggufvocab.ModelBPE:
		voc.Merges = c.Strings("tokenizer.ggml.merges")
		pre := c.String("tokenizer.ggml.pre")
		if pre == "" && strings.HasPrefix(arch, "qwen") {
			pre = ggufvocab.Qwen2Pre
		}
		t.nfc = pre == ggufvocab.Qwen2Pre
		// The words are split here, with Unicode \s as Hugging Face's
		// regex engine has it (the engine compiles its patterns in RE2
		// mode, where \s is ASCII only); the engine's encoder then sees one
		// word at a time and must not split it again.
		pattern := ggufvocab.Pretokenizer(pre)
		if pre == "default" {
			pattern = gpt2Pattern
		}
		re, err := regexp2.Compile(pattern, regexp2.None)
		if err != nil {
			return nil, fmt.Errorf("pre-tokenizer %q: %w", pre, err)
		}
		t.pre = re
		t.plain = tokenizer.NewBytePairEncoding(voc, `[\s\S]+`)
	default:
		return nil, fmt.Errorf("unsupported tokenizer model %q (want %q or %q)", model, ggufvocab.ModelSentencePiece, ggufvocab.ModelBPE)
	}

	v := &Vocab{Text: make([][]byte, len(tokens)), Special: make([]bool, len(tokens)), BOS: -1}
	for i, s := range tokens {
		switch types[i] {
		case ggufvocab.TypeControl, ggufvocab.TypeUnknown:
			v.Text[i], v.Special[i] = []byte(s), true
		case ggufvocab.TypeUnused:
			v.Special[i] = true
		default:
			if t.spm {
				v.Text[i] = vocab.DecodeSentencePiece(s)
			} else {
				v.Text[i] = vocab.DecodeByteLevel(s)
			}
		}
	}
	inVocab := func(id int64) bool { return id >= 0 && id < int64(len(tokens)) }
	if _, ok := c.Value("tokenizer.ggml.bos_token_id").(uint32); ok && c.Bool("tokenizer.ggml.add_bos_token", t.spm) {
		if id := int64(c.Uint("tokenizer.ggml.bos_token_id")); inVocab(id) {
			v.BOS = int32(id)
		}
	}
	addEOS := func(id int64) {
		if inVocab(id) && !slices.Contains(v.EOS, int32(id)) {
			v.EOS = append(v.EOS, int32(id))
		}
	}
	if _, ok := c.Value("tokenizer.ggml.eos_token_id").(uint32); ok {
		addEOS(int64(c.Uint("tokenizer.ggml.eos_token_id")))
	}
	for _, id := range c.Ints("tokenizer.ggml.eos_token_ids") {
		addEOS(int64(id))
	}
	if _, ok := c.Value("tokenizer.ggml.eot_token_id").(uint32); ok {
		addEOS(int64(c.Uint("tokenizer.ggml.eot_token_id")))
	}
	for _, s := range endOfTurn {
		if a, ok := t.added[s]; ok && a.control {
			addEOS(int64(a.id))
		}
	}
	t.vocab = v
	return t, nil
}

// piece is a stretch of the input: text to encode, or one added token or
// image placeholder (id set).
type piece struct {
	text  string
	id    int32
	isTok bool
}

// split cuts text at added tokens and image tags.
func (t *textTokenizer) split(text string, parseSpecial bool) []piece {
	var out []piece
	start := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		if parseSpecial && t.imageTags && c == '[' {
			if n, l, ok := imageTag(text[i:]); ok {
				if start < i {
					out = append(out, piece{text: text[start:i]})
				}
				out = append(out, piece{id: ImageToken(n), isTok: true})
				i += l - 1
				start = i + 1
				continue
			}
		}
		if !t.firstByte[c] {
			continue
		}
		for l := min(t.maxLen, len(text)-i); l >= t.minLen; l-- {
			a, ok := t.added[text[i:i+l]]
			if !ok || (a.control && !parseSpecial) {
				continue
			}
			if start < i {
				out = append(out, piece{text: text[start:i]})
			}
			out = append(out, piece{id: a.id, isTok: true})
			i += l - 1
			start = i + 1
			break
		}
	}
	if start < len(text) {
		out = append(out, piece{text: text[start:]})
	}
	return out
}

// imageTag parses "[img-n]" at the start of s, returning n and the tag's
// length.
func imageTag(s string) (int, int, bool) {
	rest, ok := strings.CutPrefix(s, "[img-")
	if !ok {
		return 0, 0, false
	}
	end := strings.IndexByte(rest, ']')
	if end < 1 || end > 6 {
		return 0, 0, false
	}
	n, err := strconv.Atoi(rest[:end])
	if err != nil || n < 0 || rest[0] == '+' {
		return 0, 0, false
	}
	return n, len("[img-") + end + 1, true
}

// Tokenize implements LM.Tokenize.
func (t *textTokenizer) Tokenize(text string, parseSpecial bool) ([]int32, error) {
	var ids []int32
	for _, p := range t.split(text, parseSpecial) {
		if p.isTok {
			ids = append(ids, p.id)
			continue
		}
		s := p.text
		if t.nfc {
			s = norm.NFC.String(s)
		}
		if t.spm {
			if t.addSpacePrefix {
				s = " " + s
			}
			enc, err := t.plain.Encode(s, false)
			if err != nil {
				return nil, fmt.Errorf("models: tokenize: %w", err)
			}
			ids = append(ids, enc...)
			continue
		}
		var err error
		if ids, err = t.encodeWords(ids, s); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// encodeWords splits s into pre-tokenizer words (the gaps between matches
// are words too) and appends each word's byte-level BPE encoding.
func (t *textTokenizer) encodeWords(ids []int32, s string) ([]int32, error) {
	runes := []rune(s)
	enc := func(word string) error {
		e, err := t.plain.Encode(word, false)
		if err != nil {
			return fmt.Errorf("models: tokenize: %w", err)
		}
		ids = append(ids, e...)
		return nil
	}
	at := 0
	m, err := t.pre.FindRunesMatch(runes)
	for ; err == nil && m != nil; m, err = t.pre.FindNextMatch(m) {
		if m.Index > at {
			if err := enc(string(runes[at:m.Index])); err != nil {
				return nil, err
			}
		}
		if err := enc(m.String()); err != nil {
			return nil, err
		}
		at = m.Index + m.Length
	}
	if err != nil {
		return nil, fmt.Errorf("models: tokenize: %w", err)
	}
	if at < len(runes) {
		if err := enc(string(runes[at:])); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// Detokenize implements LM.Detokenize.
func (t *textTokenizer) Detokenize(ids []int32) (string, error) {
	var sb strings.Builder
	first := true
	for _, id := range ids {
		if n, ok := imageIndex(id); ok {
			sb.WriteString("[img-" + strconv.Itoa(n) + "]")
			first = false
			continue
		}
		if int(id) >= t.vocabSize {
			return "", fmt.Errorf("models: detokenize: token id %d outside the vocabulary (%d tokens)", id, t.vocabSize)
		}
		b := t.vocab.Text[id]
		if first && t.spm && t.addSpacePrefix && !t.vocab.Special[id] {
			b = []byte(strings.TrimPrefix(string(b), " "))
		}
		if id != t.vocab.BOS {
			first = false
		}
		sb.Write(b)
	}
	return sb.String(), nil
}
