// Package vocab reads Hugging Face tokenizer files (tokenizer.json and the
// tokenizer_config.json beside it) and turns token strings into the bytes they
// stand for.
//
// A tokenizer.json stores each token as a string in the model's own alphabet:
// byte-level BPE (Qwen, Llama 3, GPT-2) spells every byte as one printable
// rune (GPT-2's bytes_to_unicode: a space is "Ġ", a newline "Ċ"), while
// SentencePiece-style vocabularies (Llama 2, Gemma) write a space as "▁" and
// fall back to byte tokens "<0x0A>" for bytes they have no piece for. The
// constrained decoder compares bytes, so [Tokenizer.Decoded] maps every token
// id to its bytes once ([DecodeByteLevel], [DecodeSentencePiece]); the same two
// helpers decode the token strings stored in a GGUF file.
//
// Typical use:
//
//	tok, err := vocab.Load("tokenizer.json") // also reads tokenizer_config.json beside it
//	if err != nil { ... }
//	d := tok.Decoded()                  // d.Text[id] = bytes, d.Special[id] = control token
//	eos, _ := tok.ID(tok.Config.EOSToken)
//
// Representations, once: tokenizer.json "model.vocab" (token string -> id,
// sparse) becomes [Tokenizer.Tokens] (dense by id, added tokens included);
// "model.merges" (either "a b" strings or ["a","b"] pairs) becomes
// [Tokenizer.Merges] in rank order; "normalizer" and "pre_tokenizer"
// (possibly nested Sequences) become flat [Step] lists.
package vocab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Decoding says how a token string maps to bytes.
type Decoding int

const (
	// Raw: the token string is its own bytes (WordPiece, WordLevel and
	// unknown layouts).
	Raw Decoding = iota
	// ByteLevel: byte-level BPE; every rune is one byte through GPT-2's
	// bytes_to_unicode table (see DecodeByteLevel).
	ByteLevel
	// SentencePiece: SentencePiece pieces; "▁" is a space and "<0xNN>" is one
	// raw byte (see DecodeSentencePiece).
	SentencePiece
)

// String names the decoding.
func (d Decoding) String() string {
	switch d {
	case ByteLevel:
		return "byte-level"
	case SentencePiece:
		return "sentencepiece"
	default:
		return "raw"
	}
}

// TokenType classifies a token id. The values are those of GGUF's
// tokenizer.ggml.token_type array (llama.cpp's llama_token_type), so they can
// be written there unchanged.
type TokenType int32

// Token types, numbered as in GGUF.
const (
	TypeNormal      TokenType = 1 // ordinary vocabulary entry
	TypeUnknown     TokenType = 2 // the model's unk_token
	TypeControl     TokenType = 3 // added token flagged special (BOS, EOS, chat markup)
	TypeUserDefined TokenType = 4 // added token not flagged special (e.g. "<think>")
	TypeUnused      TokenType = 5 // an id no token uses (a gap in the id space)
	TypeByte        TokenType = 6 // byte-fallback token "<0xNN>"
)

// Merge is one BPE merge rule: the pair of token strings A+B is merged into
// one token.
type Merge struct {
	A, B string
}

// AddedToken is an entry of tokenizer.json's "added_tokens": a token matched
// in text before the model runs. Special tokens (BOS, EOS, chat markup) are
// control tokens that never spell ordinary text.
type AddedToken struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	Special    bool   `json:"special"`
	Normalized bool   `json:"normalized"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	SingleWord bool   `json:"single_word"`
}

// Step is one normalizer or pre-tokenizer of a tokenizer.json, with nested
// "Sequence" steps flattened in order. Only the fields that apply to Type are
// set; Raw keeps the step's JSON for anything else.
type Step struct {
	// Type is the Hugging Face type name: "NFC", "NFKC", "Lowercase",
	// "Prepend", "Replace", "Strip", "Split", "ByteLevel", "Metaspace",
	// "Whitespace", "Digits", ...
	Type string
	// Pattern is the Split or Replace pattern; Regex says whether it is a
	// regular expression (Hugging Face {"Regex": ...}) or a literal string
	// ({"String": ...}).
	Pattern string
	Regex   bool
	// Content is Replace's replacement, Prepend's text, or Metaspace's
	// replacement rune.
	Content string
	// Behavior is Split's behavior ("Isolated", "MergedWithPrevious", ...);
	// Invert is Split's invert flag.
	Behavior string
	Invert   bool
	// AddPrefixSpace is ByteLevel's add_prefix_space; UseRegex is ByteLevel's
	// use_regex (apply GPT-2's own split regex).
	AddPrefixSpace bool
	UseRegex       bool
	// PrependScheme is Metaspace's prepend_scheme ("always", "first",
	// "never").
	PrependScheme string
	// Raw is the step's JSON object.
	Raw json.RawMessage
}

// Tokenizer is a parsed tokenizer.json (plus tokenizer_config.json when
// loaded with Load). Fields are read-only after loading.
type Tokenizer struct {
	// Model is model.type: "BPE", "Unigram", "WordPiece" or "WordLevel".
	Model string
	// Decoding says how token strings map to bytes (see Decoded).
	Decoding Decoding
	// Tokens is the token string of every id, dense: len(Tokens) is one more
	// than the largest id of the model vocabulary and the added tokens. Ids
	// no token uses hold "" (their type is TypeUnused).
	Tokens []string
	// Merges are the BPE merges in rank order (rank = index); nil for models
	// without merges.
	Merges []Merge
	// Added are the added tokens in file order.
	Added []AddedToken
	// UnkToken is model.unk_token, or "".
	UnkToken string
	// ByteFallback is model.byte_fallback: unknown bytes become "<0xNN>"
	// tokens.
	ByteFallback bool
	// IgnoreMerges is model.ignore_merges: words found whole in the vocabulary
	// are not split (Llama 3).
	IgnoreMerges bool
	// Normalizer and PreTokenizer are the flattened steps, in order.
	Normalizer   []Step
	PreTokenizer []Step
	// DecoderJSON and PostProcessorJSON are the raw "decoder" and
	// "post_processor" objects (null when absent).
	DecoderJSON       json.RawMessage
	PostProcessorJSON json.RawMessage
	// Config is tokenizer_config.json when Load found one beside the file,
	// else nil.
	Config *Config

	ids      map[string]int32 // token string -> id (model vocabulary, then added tokens)
	added    []int32          // index into Added by id, -1 when not added; len(Tokens)
	types    []TokenType      // by id
	modelLen int              // entries in model.vocab
}

// Load reads a tokenizer.json and, when present in the same folder, its
// tokenizer_config.json (into Config). A missing config is not an error.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("vocab: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("vocab: %s: %w", path, err)
	}
	cpath := filepath.Join(filepath.Dir(path), "tokenizer_config.json")
	cdata, err := os.ReadFile(cpath)
	switch {
	case err == nil:
		c, err := ParseConfig(cdata)
		if err != nil {
			return nil, fmt.Errorf("vocab: %s: %w", cpath, err)
		}
		t.Config = c
	case errors.Is(err, os.ErrNotExist):
	default:
		return nil, fmt.Errorf("vocab: %w", err)
	}
	return t, nil
}

type fileJSON struct {
	AddedTokens   []AddedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         struct {
		Type         string          `json:"type"`
		Vocab        json.RawMessage `json:"vocab"`
		Merges       []mergeJSON     `json:"merges"`
		UnkToken     *string         `json:"unk_token"`
		ByteFallback bool            `json:"byte_fallback"`
		IgnoreMerges bool            `json:"ignore_merges"`
	} `json:"model"`
}

// Parse parses the contents of a tokenizer.json. Config stays nil.
func Parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("parse tokenizer.json: %w", err)
	}
	t := &Tokenizer{
		Model:             f.Model.Type,
		Added:             f.AddedTokens,
		ByteFallback:      f.Model.ByteFallback,
		IgnoreMerges:      f.Model.IgnoreMerges,
		DecoderJSON:       f.Decoder,
		PostProcessorJSON: f.PostProcessor,
	}
	if t.Model == "" {
		return nil, errors.New("model.type is missing")
	}
	if f.Model.UnkToken != nil {
		t.UnkToken = *f.Model.UnkToken
	}
	var err error
	if t.Normalizer, err = flattenSteps(f.Normalizer, "normalizers"); err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	if t.PreTokenizer, err = flattenSteps(f.PreTokenizer, "pretokenizers"); err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %w", err)
	}
	vocab, err := parseVocab(t.Model, f.Model.Vocab)
	if err != nil {
		return nil, fmt.Errorf("model.vocab: %w", err)
	}
	t.modelLen = len(vocab)
	if t.Merges, err = parseMerges(f.Model.Merges); err != nil {
		return nil, err
	}
	used, err := t.index(vocab)
	if err != nil {
		return nil, err
	}
	t.Decoding = t.detectDecoding()
	t.classify(used)
	return t, nil
}

// parseVocab returns model.vocab as token string -> id. BPE and WordPiece
// store an object; Unigram stores [[piece, score], ...] with the id the index.
func parseVocab(model string, raw json.RawMessage) (map[string]int32, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("missing")
	}
	if raw[0] == '[' {
		var entries []json.RawMessage
		if err := json.Unmarshal(raw, &entries); err != nil {
			return nil, err
		}
		m := make(map[string]int32, len(entries))
		for i, e := range entries {
			var pair []json.RawMessage
			var piece string
			if err := json.Unmarshal(e, &pair); err != nil || len(pair) == 0 {
				return nil, fmt.Errorf("entry %d: want [piece, score]", i)
			}
			if err := json.Unmarshal(pair[0], &piece); err != nil {
				return nil, fmt.Errorf("entry %d: piece: %w", i, err)
			}
			if _, dup := m[piece]; dup {
				return nil, fmt.Errorf("entry %d: duplicate piece %q", i, piece)
			}
			m[piece] = int32(i)
		}
		return m, nil
	}
	var m map[string]int32
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s vocabulary: %w", model, err)
	}
	for s, id := range m {
		if id < 0 || id > 1<<30 {
			return nil, fmt.Errorf("token %q has id %d out of range", s, id)
		}
	}
	return m, nil
}

// mergeJSON is one element of model.merges, kept undecoded until
// parseMerges (json.Unmarshal has already checked the whole document).
type mergeJSON []byte

// UnmarshalJSON keeps the element's bytes.
func (m *mergeJSON) UnmarshalJSON(b []byte) error {
	*m = b // the decoder's buffer is the document, which outlives the parse
	return nil
}

// parseMerges accepts both forms found in the wild: "a b" strings (split at
// the single space; a token containing a space cannot be written this way)
// and ["a", "b"] arrays.
func parseMerges(raw []mergeJSON) ([]Merge, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	merges := make([]Merge, len(raw))
	for i, r := range raw {
		if len(r) > 0 && r[0] == '[' {
			a, b, ok := fastPair(r)
			if !ok {
				var pair []string
				if err := json.Unmarshal(r, &pair); err != nil || len(pair) != 2 {
					return nil, fmt.Errorf("model.merges[%d]: want [\"a\", \"b\"], got %s", i, truncate(r))
				}
				a, b = pair[0], pair[1]
			}
			merges[i] = Merge{a, b}
			continue
		}
		s, ok := fastString(r)
		if !ok {
			if err := json.Unmarshal(r, &s); err != nil {
				return nil, fmt.Errorf("model.merges[%d]: want \"a b\" or [\"a\", \"b\"], got %s", i, truncate(r))
			}
		}
		a, b, ok := strings.Cut(s, " ")
		if !ok || strings.Contains(b, " ") || a == "" || b == "" {
			return nil, fmt.Errorf("model.merges[%d]: %q is not two tokens separated by one space", i, s)
		}
		merges[i] = Merge{a, b}
	}
	return merges, nil
}

// fastString decodes a JSON string without escapes; ok is false when the
// general decoder is needed.
func fastString(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' || bytes.IndexByte(b, '\\') >= 0 {
		return "", false
	}
	return string(b[1 : len(b)-1]), true
}

// fastPair decodes ["a", "b"] (any JSON whitespace) when neither string
// has escapes; ok is false when the general decoder is needed.
func fastPair(b []byte) (a, c string, ok bool) {
	i := skipSpace(b, 1)
	a, i, ok = scanPlainString(b, i)
	if !ok {
		return "", "", false
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ',' {
		return "", "", false
	}
	c, i, ok = scanPlainString(b, skipSpace(b, i+1))
	if !ok {
		return "", "", false
	}
	i = skipSpace(b, i)
	return a, c, i == len(b)-1 && b[i] == ']'
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// scanPlainString reads a JSON string starting at b[i] that has no escapes
// and returns it and the index after its closing quote.
func scanPlainString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '"':
			return string(b[i+1 : j]), j + 1, true
		case '\\':
			return "", 0, false
		}
	}
	return "", 0, false
}

// index builds the dense id table from the model vocabulary and the added
// tokens. An added token may reuse a model id (Gemma) only with the same
// spelling.
func (t *Tokenizer) index(vocab map[string]int32) (used []bool, err error) {
	size := int32(0)
	for _, id := range vocab {
		size = max(size, id+1)
	}
	for i, a := range t.Added {
		if a.ID < 0 || a.ID > 1<<30 {
			return nil, fmt.Errorf("added_tokens[%d] %q: id %d out of range", i, a.Content, a.ID)
		}
		size = max(size, a.ID+1)
	}
	// Gaps are allowed, but an id space far larger than the token count is a
	// broken file (and would allocate without bound).
	if n := len(vocab) + len(t.Added); int(size) > 2*n+1024 {
		return nil, fmt.Errorf("token ids are too sparse: largest id %d for %d tokens", size-1, n)
	}
	t.Tokens = make([]string, size)
	used = make([]bool, size)
	for s, id := range vocab {
		if used[id] {
			return nil, fmt.Errorf("model.vocab: id %d is used by both %q and %q", id, t.Tokens[id], s)
		}
		used[id] = true
		t.Tokens[id] = s
	}
	t.added = make([]int32, size)
	for i := range t.added {
		t.added[i] = -1
	}
	t.ids = make(map[string]int32, int(size))
	for s, id := range vocab {
		t.ids[s] = id
	}
	for i, a := range t.Added {
		if used[a.ID] && t.Tokens[a.ID] != a.Content {
			return nil, fmt.Errorf("added_tokens[%d]: id %d is %q in model.vocab but %q here", i, a.ID, t.Tokens[a.ID], a.Content)
		}
		if t.added[a.ID] >= 0 {
			return nil, fmt.Errorf("added_tokens[%d]: id %d added twice", i, a.ID)
		}
		used[a.ID] = true
		t.Tokens[a.ID] = a.Content
		t.added[a.ID] = int32(i)
		if _, ok := t.ids[a.Content]; !ok {
			t.ids[a.Content] = a.ID
		}
	}
	return used, nil
}

// detectDecoding decides how token strings map to bytes from the decoder,
// pre-tokenizer and model settings.
func (t *Tokenizer) detectDecoding() Decoding {
	for _, s := range t.PreTokenizer {
		if s.Type == "ByteLevel" {
			return ByteLevel
		}
	}
	var dec struct {
		Type     string            `json:"type"`
		Decoders []json.RawMessage `json:"decoders"`
	}
	_ = json.Unmarshal(t.DecoderJSON, &dec) // absent or odd decoders fall through to the model settings
	types := []string{dec.Type}
	for _, d := range dec.Decoders {
		var sub struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(d, &sub) == nil {
			types = append(types, sub.Type)
		}
	}
	for _, ty := range types {
		switch ty {
		case "ByteLevel":
			return ByteLevel
		case "Metaspace", "ByteFallback", "Replace":
			return SentencePiece
		}
	}
	for _, s := range t.PreTokenizer {
		if s.Type == "Metaspace" {
			return SentencePiece
		}
	}
	if t.ByteFallback || t.Model == "Unigram" {
		return SentencePiece
	}
	return Raw
}

// flattenSteps parses a normalizer or pre-tokenizer object, expanding
// {"type":"Sequence", listKey:[...]} recursively. null gives no steps.
func flattenSteps(raw json.RawMessage, listKey string) ([]Step, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var head map[string]json.RawMessage
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, err
	}
	var typ string
	if err := json.Unmarshal(head["type"], &typ); err != nil || typ == "" {
		return nil, fmt.Errorf("step without a type: %s", truncate(raw))
	}
	if typ == "Sequence" {
		var subs []json.RawMessage
		if err := json.Unmarshal(head[listKey], &subs); err != nil {
			return nil, fmt.Errorf("Sequence without %q list: %w", listKey, err)
		}
		var out []Step
		for _, s := range subs {
			steps, err := flattenSteps(s, listKey)
			if err != nil {
				return nil, err
			}
			out = append(out, steps...)
		}
		return out, nil
	}
	var f struct {
		Pattern        map[string]string `json:"pattern"`
		Content        string            `json:"content"`
		Prepend        string            `json:"prepend"`
		Replacement    string            `json:"replacement"`
		Behavior       string            `json:"behavior"`
		Invert         bool              `json:"invert"`
		AddPrefixSpace bool              `json:"add_prefix_space"`
		UseRegex       bool              `json:"use_regex"`
		PrependScheme  string            `json:"prepend_scheme"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", typ, err)
	}
	s := Step{
		Type:           typ,
		Behavior:       f.Behavior,
		Invert:         f.Invert,
		AddPrefixSpace: f.AddPrefixSpace,
		UseRegex:       f.UseRegex,
		PrependScheme:  f.PrependScheme,
		Raw:            raw,
	}
	if p, ok := f.Pattern["Regex"]; ok {
		s.Pattern, s.Regex = p, true
	} else if p, ok := f.Pattern["String"]; ok {
		s.Pattern = p
	}
	switch typ {
	case "Prepend":
		s.Content = f.Prepend
	case "Metaspace":
		s.Content = f.Replacement
	default:
		s.Content = f.Content
	}
	return []Step{s}, nil
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// Size is the number of token ids (len(Tokens)).
func (t *Tokenizer) Size() int { return len(t.Tokens) }

// ModelVocabSize is the number of entries in model.vocab (added tokens with
// ids of their own not counted).
func (t *Tokenizer) ModelVocabSize() int { return t.modelLen }

// ID returns the id of a token string (a model vocabulary entry, or an added
// token's content).
func (t *Tokenizer) ID(token string) (int32, bool) {
	id, ok := t.ids[token]
	return id, ok
}

// AddedToken returns the added token with this id, if any.
func (t *Tokenizer) AddedToken(id int32) (AddedToken, bool) {
	if id < 0 || int(id) >= len(t.added) || t.added[id] < 0 {
		return AddedToken{}, false
	}
	return t.Added[t.added[id]], true
}

// IsSpecial reports whether id never spells text: control tokens (added
// tokens flagged special), the unknown token and unused ids.
func (t *Tokenizer) IsSpecial(id int32) bool {
	switch t.Type(id) {
	case TypeControl, TypeUnknown, TypeUnused:
		return true
	}
	return false
}

// Type classifies a token id (see TokenType). Out-of-range ids are
// TypeUnused.
func (t *Tokenizer) Type(id int32) TokenType {
	if id < 0 || int(id) >= len(t.types) {
		return TypeUnused
	}
	return t.types[id]
}

// classify sets the type of every id: unused ids, then the unk token, then
// added tokens (control when special), then byte-fallback tokens.
func (t *Tokenizer) classify(used []bool) {
	t.types = make([]TokenType, len(t.Tokens))
	for id, s := range t.Tokens {
		ty := TypeNormal
		switch {
		case !used[id]:
			ty = TypeUnused
		case t.UnkToken != "" && s == t.UnkToken:
			ty = TypeUnknown
		case t.added[id] >= 0 && t.Added[t.added[id]].Special:
			ty = TypeControl
		case t.added[id] >= 0:
			ty = TypeUserDefined
		case t.Decoding == SentencePiece && isByteToken(s):
			ty = TypeByte
		}
		t.types[id] = ty
	}
}

// Types returns Type for every id, in id order (GGUF's
// tokenizer.ggml.token_type).
func (t *Tokenizer) Types() []TokenType {
	out := make([]TokenType, len(t.Tokens))
	for id := range out {
		out[id] = t.Type(int32(id))
	}
	return out
}

// SplitPattern returns the regular expression of the first regex Split
// pre-tokenizer step (the byte-level BPE word split), or "".
func (t *Tokenizer) SplitPattern() string {
	for _, s := range t.PreTokenizer {
		if s.Type == "Split" && s.Regex {
			return s.Pattern
		}
	}
	return ""
}

// Known pre-tokenizer split patterns, by their GGUF tokenizer.ggml.pre name.
const (
	// PatternQwen2 is Qwen2/2.5/3's split (single digits).
	PatternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// PatternLlama3 is Llama 3's split (digits in groups of up to three).
	PatternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// GGUFModel returns the GGUF tokenizer.ggml.model name for this tokenizer:
// "gpt2" for byte-level BPE, "llama" for SentencePiece-style vocabularies,
// "bert" for WordPiece, or "" when there is none.
func (t *Tokenizer) GGUFModel() string {
	switch {
	case t.Decoding == ByteLevel && t.Model == "BPE":
		return "gpt2"
	case t.Decoding == SentencePiece:
		return "llama"
	case t.Model == "WordPiece":
		return "bert"
	}
	return ""
}

// GGUFPre returns the GGUF tokenizer.ggml.pre name of the split pattern:
// "qwen2", "llama-bpe", or "default" (no regex split, or one not known here).
func (t *Tokenizer) GGUFPre() string {
	switch t.SplitPattern() {
	case PatternQwen2:
		return "qwen2"
	case PatternLlama3:
		return "llama-bpe"
	}
	return "default"
}

// Decoded holds the bytes of every token id, as the constrained decoder
// compares them (the fields match models.Vocab).
type Decoded struct {
	// Text is the decoded bytes of every id. Control tokens keep their
	// literal spelling; unused ids are empty.
	Text [][]byte
	// Special marks control tokens (added tokens flagged special), the
	// unknown token and unused ids: they never spell plan text.
	Special []bool
}

// Decoded decodes every token id with DecodeToken.
func (t *Tokenizer) Decoded() Decoded {
	d := Decoded{Text: make([][]byte, len(t.Tokens)), Special: make([]bool, len(t.Tokens))}
	for id := range t.Tokens {
		d.Text[id] = t.DecodeToken(int32(id))
		d.Special[id] = t.IsSpecial(int32(id))
	}
	return d
}

// DecodeToken returns the bytes token id stands for. Control tokens (added
// tokens flagged special) and the unknown token keep their literal spelling;
// unused ids give nil. Every other token,
// added tokens not flagged special included, is decoded by the model's
// Decoding, as Hugging Face's decoder chain does: DecodeByteLevel,
// DecodeSentencePiece, or the raw string. Unknown ids give nil.
func (t *Tokenizer) DecodeToken(id int32) []byte {
	if id < 0 || int(id) >= len(t.Tokens) {
		return nil
	}
	s := t.Tokens[id]
	switch t.Type(id) {
	case TypeControl, TypeUnknown:
		return []byte(s)
	case TypeUnused:
		return nil
	}
	switch t.Decoding {
	case ByteLevel:
		return DecodeByteLevel(s)
	case SentencePiece:
		return DecodeSentencePiece(s)
	}
	return []byte(s)
}
