package vocab

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
)

const byteLevelJSON = `{
  "added_tokens": [
    {"id": 5, "content": "<|end|>", "special": true, "normalized": false},
    {"id": 6, "content": "<think>", "special": false, "normalized": false}
  ],
  "normalizer": {"type": "NFC"},
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\p{N}| ?\\p{L}+"}, "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
  ]},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "unk_token": null, "byte_fallback": false, "ignore_merges": true,
    "vocab": {"g": 0, "o": 1, "go": 2, "Ġ": 3, "Ġgo": 4},
    "merges": [["g", "o"], ["Ġ", "go"]]}
}`

const pieceJSON = `{
  "added_tokens": [
    {"id": 0, "content": "<unk>", "special": true},
    {"id": 1, "content": "<s>", "special": true}
  ],
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "▁"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}
  ]},
  "pre_tokenizer": null,
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]},
  "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true,
    "vocab": {"<unk>": 0, "<s>": 1, "<0x0A>": 2, "<0xE4>": 3, "▁": 4, "g": 5, "o": 6, "▁g": 7, "▁go": 8},
    "merges": ["▁ g", "▁g o"]}
}`

func TestParseByteLevel(t *testing.T) {
	tok, err := Parse([]byte(byteLevelJSON))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Decoding != ByteLevel || tok.GGUFModel() != "gpt2" || !tok.IgnoreMerges {
		t.Errorf("decoding %v, gguf model %q, ignore merges %v", tok.Decoding, tok.GGUFModel(), tok.IgnoreMerges)
	}
	if tok.Size() != 7 || tok.ModelVocabSize() != 5 {
		t.Errorf("size %d, model vocab %d", tok.Size(), tok.ModelVocabSize())
	}
	wantMerges := []Merge{{"g", "o"}, {"Ġ", "go"}}
	if len(tok.Merges) != 2 || tok.Merges[0] != wantMerges[0] || tok.Merges[1] != wantMerges[1] {
		t.Errorf("merges %q", tok.Merges)
	}
	if len(tok.Normalizer) != 1 || tok.Normalizer[0].Type != "NFC" {
		t.Errorf("normalizer %+v", tok.Normalizer)
	}
	if len(tok.PreTokenizer) != 2 || tok.SplitPattern() != `\p{N}| ?\p{L}+` || tok.PreTokenizer[0].Behavior != "Isolated" {
		t.Errorf("pre-tokenizer %+v", tok.PreTokenizer)
	}
	d := tok.Decoded()
	wantText := []string{"g", "o", "go", " ", " go", "<|end|>", "<think>"}
	wantSpecial := []bool{false, false, false, false, false, true, false}
	wantType := []TokenType{TypeNormal, TypeNormal, TypeNormal, TypeNormal, TypeNormal, TypeControl, TypeUserDefined}
	for id := range wantText {
		if string(d.Text[id]) != wantText[id] || d.Special[id] != wantSpecial[id] || tok.Type(int32(id)) != wantType[id] {
			t.Errorf("id %d: text %q special %v type %d, want %q %v %d", id, d.Text[id], d.Special[id], tok.Type(int32(id)), wantText[id], wantSpecial[id], wantType[id])
		}
	}
	if id, ok := tok.ID("<think>"); !ok || id != 6 {
		t.Errorf("ID(<think>) = %d %v", id, ok)
	}
	if a, ok := tok.AddedToken(5); !ok || !a.Special || a.Content != "<|end|>" {
		t.Errorf("AddedToken(5) = %+v %v", a, ok)
	}
}

func TestParseSentencePiece(t *testing.T) {
	tok, err := Parse([]byte(pieceJSON))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Decoding != SentencePiece || tok.GGUFModel() != "llama" || tok.GGUFPre() != "default" || !tok.ByteFallback {
		t.Errorf("decoding %v gguf %q/%q", tok.Decoding, tok.GGUFModel(), tok.GGUFPre())
	}
	if len(tok.Normalizer) != 2 || tok.Normalizer[0].Type != "Prepend" || tok.Normalizer[0].Content != "▁" ||
		tok.Normalizer[1].Pattern != " " || tok.Normalizer[1].Regex || tok.Normalizer[1].Content != "▁" {
		t.Errorf("normalizer %+v", tok.Normalizer)
	}
	if tok.Merges[1] != (Merge{"▁g", "o"}) {
		t.Errorf("merges %q", tok.Merges)
	}
	d := tok.Decoded()
	want := []struct {
		text    string
		special bool
		typ     TokenType
	}{
		{"<unk>", true, TypeUnknown}, {"<s>", true, TypeControl}, {"\n", false, TypeByte}, {"\xe4", false, TypeByte},
		{" ", false, TypeNormal}, {"g", false, TypeNormal}, {"o", false, TypeNormal}, {" g", false, TypeNormal}, {" go", false, TypeNormal},
	}
	for id, w := range want {
		if string(d.Text[id]) != w.text || d.Special[id] != w.special || tok.Type(int32(id)) != w.typ {
			t.Errorf("id %d: %q %v %d, want %q %v %d", id, d.Text[id], d.Special[id], tok.Type(int32(id)), w.text, w.special, w.typ)
		}
	}
}

func TestParseUnigramAndGaps(t *testing.T) {
	src := `{"added_tokens": [{"id": 5, "content": "<eos>", "special": true}],
	  "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"},
	  "model": {"type": "Unigram", "vocab": [["<unk>", 0], ["▁a", -1.5], ["b", -2]]}}`
	tok, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Decoding != SentencePiece || tok.PreTokenizer[0].Content != "▁" || tok.PreTokenizer[0].PrependScheme != "always" {
		t.Errorf("decoding %v, pre %+v", tok.Decoding, tok.PreTokenizer)
	}
	d := tok.Decoded()
	if len(d.Text) != 6 || string(d.Text[1]) != " a" {
		t.Fatalf("decoded %q", d.Text)
	}
	for _, id := range []int32{3, 4} {
		if tok.Type(id) != TypeUnused || !d.Special[id] || d.Text[id] != nil {
			t.Errorf("gap id %d: type %d special %v text %q", id, tok.Type(id), d.Special[id], d.Text[id])
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"not json", `{"model":`, "parse tokenizer.json"},
		{"no model type", `{"model": {"vocab": {"a": 0}}}`, "model.type"},
		{"no vocab", `{"model": {"type": "BPE"}}`, "model.vocab: missing"},
		{"duplicate id", `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}}}`, "id 0 is used by both"},
		{"negative id", `{"model": {"type": "BPE", "vocab": {"a": -1}}}`, "out of range"},
		{"sparse ids", `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1000000}}}`, "too sparse"},
		{"merge string with one token", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]}}`, "model.merges[0]"},
		{"merge string with three tokens", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b c"]}}`, "model.merges[0]"},
		{"merge array of three", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a", "b", "c"]]}}`, "model.merges[0]"},
		{"merge number", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [7]}}`, "model.merges[0]"},
		{"added token clashes", `{"added_tokens": [{"id": 0, "content": "<s>"}], "model": {"type": "BPE", "vocab": {"a": 0}}}`, `id 0 is "a" in model.vocab but "<s>"`},
		{"added twice", `{"added_tokens": [{"id": 1, "content": "<s>"}, {"id": 1, "content": "<s>"}], "model": {"type": "BPE", "vocab": {"a": 0}}}`, "added twice"},
		{"step without type", `{"normalizer": {"x": 1}, "model": {"type": "BPE", "vocab": {"a": 0}}}`, "normalizer: step without a type"},
		{"sequence without list", `{"pre_tokenizer": {"type": "Sequence"}, "model": {"type": "BPE", "vocab": {"a": 0}}}`, "pre_tokenizer: Sequence without"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name, src     string
		template, bos string
		eos           string
		named         int
		addBOS        *bool
		wantErr       string
	}{
		{name: "string template", src: `{"chat_template": "{{ x }}", "bos_token": "<s>", "eos_token": "</s>", "add_bos_token": true}`,
			template: "{{ x }}", bos: "<s>", eos: "</s>", addBOS: new(true)},
		{name: "object tokens, null bos", src: `{"bos_token": null, "eos_token": {"content": "<|im_end|>", "special": true}}`,
			eos: "<|im_end|>"},
		{name: "named templates", src: `{"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]}`,
			template: "D", named: 2},
		{name: "named templates without default", src: `{"chat_template": [{"name": "a", "template": "A"}]}`,
			template: "A", named: 1},
		{name: "bad template", src: `{"chat_template": 3}`, wantErr: "chat_template"},
		{name: "bad token", src: `{"eos_token": 3}`, wantErr: "eos_token"},
		{name: "bad json", src: `{`, wantErr: "parse tokenizer_config.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.src))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.ChatTemplate != tc.template || c.BOSToken != tc.bos || c.EOSToken != tc.eos || len(c.ChatTemplates) != tc.named {
				t.Errorf("got %+v", c)
			}
			if (c.AddBOS == nil) != (tc.addBOS == nil) || (c.AddBOS != nil && *c.AddBOS != *tc.addBOS) {
				t.Errorf("AddBOS = %v, want %v", c.AddBOS, tc.addBOS)
			}
		})
	}
}

func TestLoadWithoutConfig(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(p, []byte(pieceJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(p)
	if err != nil || tok.Config != nil {
		t.Fatalf("Load = %v, config %v", err, tok)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"eos_token": 7}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "tokenizer_config.json") {
		t.Errorf("bad config: err = %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("missing file loaded")
	}
}

// TestRealTokenizers checks the four shared tokenizers against what their own
// files say: tokenizer_config.json's added_tokens_decoder agrees with the
// special flags, the BOS/EOS spellings resolve to special ids, every merge
// joins two vocabulary tokens into a third, decoding is invertible where the
// alphabet allows it, and byte-fallback vocabularies cover all 256 bytes.
func TestRealTokenizers(t *testing.T) {
	tests := []struct {
		family   string
		decoding Decoding
		model    string
		pre      string
	}{
		{"qwen3", ByteLevel, "gpt2", "qwen2"},
		{"llama3", ByteLevel, "gpt2", "llama-bpe"},
		{"llama2", SentencePiece, "llama", "default"},
		{"gemma3", SentencePiece, "llama", "default"},
	}
	for _, tc := range tests {
		t.Run(tc.family, func(t *testing.T) {
			path := testenv.Tokenizer(t, tc.family)
			tok, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if tok.Decoding != tc.decoding || tok.GGUFModel() != tc.model || tok.GGUFPre() != tc.pre {
				t.Errorf("decoding %v, gguf %q/%q; want %v %q/%q", tok.Decoding, tok.GGUFModel(), tok.GGUFPre(), tc.decoding, tc.model, tc.pre)
			}
			if tok.Config == nil {
				t.Fatal("tokenizer_config.json not read")
			}
			checkAgainstConfigFile(t, tok, filepath.Join(filepath.Dir(path), "tokenizer_config.json"))
			for _, s := range []string{tok.Config.BOSToken, tok.Config.EOSToken} {
				if s == "" {
					continue
				}
				id, ok := tok.ID(s)
				if !ok || !tok.IsSpecial(id) {
					t.Errorf("special token %q: id %d found %v special %v", s, id, ok, tok.IsSpecial(id))
				}
			}
			if tok.Config.ChatTemplate == "" && tc.family != "llama2" {
				t.Error("no chat template")
			}
			for i, m := range tok.Merges {
				_, okA := tok.ID(m.A)
				_, okB := tok.ID(m.B)
				_, okAB := tok.ID(m.A + m.B)
				if !okA || !okB || !okAB {
					t.Fatalf("merge %d %q+%q: tokens present %v %v %v", i, m.A, m.B, okA, okB, okAB)
				}
			}
			d := tok.Decoded()
			if len(d.Text) != tok.Size() || len(d.Special) != tok.Size() {
				t.Fatalf("decoded %d/%d entries for %d ids", len(d.Text), len(d.Special), tok.Size())
			}
			byteTokens := map[byte]bool{}
			for id, s := range tok.Tokens {
				switch ty := tok.Type(int32(id)); {
				case ty == TypeUnused:
					t.Errorf("id %d unused", id)
				case d.Special[id]:
					if string(d.Text[id]) != s {
						t.Errorf("special %d: text %q, want literal %q", id, d.Text[id], s)
					}
				case tok.Decoding == ByteLevel && ty == TypeNormal:
					if EncodeByteLevel(d.Text[id]) != s {
						t.Fatalf("id %d %q does not round-trip: %q", id, s, d.Text[id])
					}
				case ty == TypeByte:
					if len(d.Text[id]) != 1 {
						t.Fatalf("byte token %d %q decodes to %q", id, s, d.Text[id])
					}
					byteTokens[d.Text[id][0]] = true
				case tok.Decoding == SentencePiece:
					if string(d.Text[id]) != strings.ReplaceAll(s, "▁", " ") || bytes.Contains(d.Text[id], []byte("▁")) {
						t.Fatalf("piece %d %q decodes to %q", id, s, d.Text[id])
					}
				}
			}
			if tok.Decoding == SentencePiece && len(byteTokens) != 256 {
				t.Errorf("byte-fallback tokens cover %d bytes, want 256", len(byteTokens))
			}
		})
	}
}

// checkAgainstConfigFile compares the special flags with the config's own
// added_tokens_decoder table, read independently here.
func checkAgainstConfigFile(t *testing.T, tok *Tokenizer, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Added map[string]struct {
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens_decoder"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Added) == 0 {
		t.Fatal("config has no added_tokens_decoder")
	}
	for k, a := range f.Added {
		id, err := strconv.Atoi(k)
		if err != nil {
			t.Fatal(err)
		}
		if tok.Tokens[id] != a.Content {
			t.Errorf("id %d: token %q, config says %q", id, tok.Tokens[id], a.Content)
		}
		ty := tok.Type(int32(id))
		if a.Special != (ty == TypeControl || ty == TypeUnknown) {
			t.Errorf("id %d %q: type %d, config special %v", id, a.Content, ty, a.Special)
		}
	}
}

func TestMergeForms(t *testing.T) {
	tests := []struct {
		name, merges string
		want         []Merge
	}{
		{"strings", `["a b", "ab c"]`, []Merge{{"a", "b"}, {"ab", "c"}}},
		{"compact arrays", `[["a","b"],["ab","c"]]`, []Merge{{"a", "b"}, {"ab", "c"}}},
		{"pretty arrays", "[\n [\n  \"a\",\n  \"b\"\n ]\n]", []Merge{{"a", "b"}}},
		{"escaped arrays", `[["\n\n", "\n"], ["\"", "\u0041"]]`, []Merge{{"\n\n", "\n"}, {`"`, "A"}}},
		{"escaped string", `["\u2581 t", "\t \n"]`, []Merge{{"▁", "t"}, {"\t", "\n"}}},
		{"array with space inside token", `[["a b", "c"]]`, []Merge{{"a b", "c"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ` + tc.merges + `}}`
			tok, err := Parse([]byte(src))
			if err != nil {
				t.Fatal(err)
			}
			if len(tok.Merges) != len(tc.want) {
				t.Fatalf("merges %q, want %q", tok.Merges, tc.want)
			}
			for i := range tc.want {
				if tok.Merges[i] != tc.want[i] {
					t.Errorf("merge %d = %q, want %q", i, tok.Merges[i], tc.want[i])
				}
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(byteLevelJSON))
	f.Add([]byte(pieceJSON))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 1000000}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := Parse(data)
		if err != nil {
			return
		}
		d := tok.Decoded()
		if len(d.Text) != tok.Size() || len(tok.Types()) != tok.Size() {
			t.Fatalf("decoded %d entries for %d ids", len(d.Text), tok.Size())
		}
	})
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"chat_template": [{"name": "default", "template": "x"}], "bos_token": {"content": "<s>"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseConfig(data)
	})
}
