package gguf

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fsggml "github.com/ollama/ollama/fs/ggml"

	"github.com/nesy-dev/nesy/internal/testenv"
)

func writeRead(t *testing.T, s Spec) ([]byte, *fsggml.GGML) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := Write(p, s); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := fsggml.Decode(bytes.NewReader(data), -1)
	if err != nil {
		t.Fatal(err)
	}
	return data, meta
}

func TestWriteDeterministic(t *testing.T) {
	// gemma3 shares llama's code paths and its 262k vocabulary is slow.
	for _, arch := range []string{ArchLlama, ArchQwen3, ArchQwen35, ArchQwen35MoE} {
		t.Run(arch, func(t *testing.T) {
			s := Default(arch)
			s.Seed = 7
			a, _ := writeRead(t, s)
			b, _ := writeRead(t, s)
			if !bytes.Equal(a, b) {
				t.Fatal("same spec and seed gave different files")
			}
			s.Seed = 8
			c, _ := writeRead(t, s)
			if bytes.Equal(a, c) {
				t.Fatal("different seeds gave the same file")
			}
		})
	}
}

func TestWriteMetadata(t *testing.T) {
	cases := []struct {
		spec      Spec
		model     string
		wantParam int64
	}{
		{Default(ArchLlama), ModelSentencePiece, 0},
		{Default(ArchQwen3), ModelBPE, 0},
		{Spec{Arch: ArchLlama, Embd: 32, Layers: 3, FFN: 48, Heads: 4, KVHeads: 4, TiedOutput: true, DType: F16, ContextLength: 16384}, ModelSentencePiece, 0},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s-%d", c.spec.Arch, c.spec.Embd), func(t *testing.T) {
			n, err := c.spec.normalize()
			if err != nil {
				t.Fatal(err)
			}
			_, meta := writeRead(t, c.spec)
			kv := meta.KV()
			if kv.Architecture() != n.Arch || kv.BlockCount() != uint64(n.Layers) || kv.EmbeddingLength() != uint64(n.Embd) {
				t.Errorf("arch %s blocks %d embd %d", kv.Architecture(), kv.BlockCount(), kv.EmbeddingLength())
			}
			if got := kv.ContextLength(); got != uint64(n.ContextLength) || got < 8192 {
				t.Errorf("context length %d, want %d (>= 8192)", got, n.ContextLength)
			}
			if kv.String("tokenizer.ggml.model") != c.model {
				t.Errorf("tokenizer model %q", kv.String("tokenizer.ggml.model"))
			}
			var total int64
			for _, ts := range meta.Tensors().Items() {
				total += int64(ts.Elements())
			}
			params, _ := c.spec.Params()
			if total != params {
				t.Errorf("tensors hold %d weights, Params says %d", total, params)
			}
			_, hasOutput := meta.Tensors().GroupLayers()["output"]
			if hasOutput == n.TiedOutput {
				t.Errorf("output.weight present = %v with TiedOutput %v", hasOutput, n.TiedOutput)
			}
			if !strings.Contains(kv.ChatTemplate(), "messages") {
				t.Errorf("no chat template")
			}
		})
	}
}

func TestReferenceSize(t *testing.T) {
	p, err := Reference().Params()
	if err != nil {
		t.Fatal(err)
	}
	// 2 x 768 x 32000 embeddings/output + 12 x (4 x 768^2 + 3 x 768 x 2048) + norms.
	want := int64(2*768*32000 + 12*(4*768*768+3*768*2048+2*768) + 768)
	if p != want {
		t.Errorf("reference model has %d parameters, want %d", p, want)
	}
}

func TestWriteRejectsBadSpecs(t *testing.T) {
	bad := []Spec{
		{Arch: "gpt5"},
		{Embd: 64, Heads: 3},
		{Embd: 64, Heads: 4, KVHeads: 3},
		{Embd: 10, Heads: 2, HeadDim: 5},
		{DType: "q4"},
		{Layers: -1},
		{VocabSize: 10},
		{Tokenizer: &Tokenizer{Model: "wordpiece"}},
		{Arch: ArchLlama, RopeDim: 4},                // partial rotary: qwen35 only
		{Arch: ArchQwen35, RopeDim: 3},               // odd
		{Arch: ArchQwen35, RopeDim: 64},              // wider than the 16-wide heads
		{Arch: ArchQwen35, ConvDType: Q8_0},          // convolution rows of 4
		{Arch: ArchLlama, ConvDType: F16},            // no convolution
		{Arch: ArchQwen35, Vision: true, RopeDim: 6}, // multi-axis sections need a multiple of 4
		{Arch: ArchLlama, Vision: true},              // no tower for llama
	}
	for _, s := range bad {
		p := filepath.Join(t.TempDir(), "m.gguf")
		if err := Write(p, s); err == nil {
			t.Errorf("Write(%+v) succeeded", s)
		}
		if _, err := os.Stat(p); err == nil {
			t.Errorf("Write(%+v) left a file behind", s)
		}
	}
}

func TestSyntheticVocabularies(t *testing.T) {
	spm, err := SyntheticSPM(0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, tok := range spm.Tokens {
		if seen[tok] {
			t.Errorf("duplicate token %q", tok)
		}
		seen[tok] = true
		if spm.Types[i] == TypeNormal && strings.HasPrefix(tok, "▁") && len(tok) > len("▁") && spm.Scores[i] >= 0 {
			t.Errorf("merged piece %q has score %g, want < 0", tok, spm.Scores[i])
		}
	}
	for b := range 256 {
		if !seen[fmt.Sprintf("<0x%02X>", b)] {
			t.Errorf("no byte token for %#x", b)
		}
	}
	for _, w := range []string{"▁the", "▁go", "▁apple"} {
		if !seen[w] {
			t.Errorf("synthetic SentencePiece vocabulary lacks %q", w)
		}
	}
	bpe, err := SyntheticBPE(0)
	if err != nil {
		t.Fatal(err)
	}
	if bpe.Pre != Qwen2Pre || len(bpe.Merges) < 100 {
		t.Errorf("BPE vocabulary: pre %q, %d merges", bpe.Pre, len(bpe.Merges))
	}
	syms := ByteToSymbol()
	have := map[string]bool{}
	for _, tok := range bpe.Tokens {
		have[tok] = true
	}
	for b := range 256 {
		if !have[string(syms[b])] {
			t.Errorf("no symbol for byte %#x", b)
		}
	}
	for _, s := range []string{"<|im_start|>", "<|im_end|>", "<think>"} {
		if !have[s] {
			t.Errorf("no %s", s)
		}
	}
	padded, err := SyntheticSPM(32000)
	if err != nil || len(padded.Tokens) != 32000 {
		t.Fatalf("SyntheticSPM(32000): %d tokens, %v", len(padded.Tokens), err)
	}
}

func TestF16Conversion(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{0, 0}, {1, 0x3c00}, {-2, 0xc000}, {0.5, 0x3800}, {65504, 0x7bff}, {1e6, 0x7c00},
		{float32(math.Inf(-1)), 0xfc00}, {5.960464477539063e-08, 0x0001}, {1e-9, 0},
		{0.333251953125, 0x3555}, {1.0009765625, 0x3c01},
	}
	for _, c := range cases {
		if got := f32ToF16(c.in); got != c.want {
			t.Errorf("f32ToF16(%g) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	if got := f32ToF16(float32(math.NaN())); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
		t.Errorf("NaN -> %#04x", got)
	}
}

func TestFromHF(t *testing.T) {
	for _, fam := range []string{"qwen3", "llama3", "gemma3", "llama2"} {
		t.Run(fam, func(t *testing.T) {
			tok, err := FromHF(testenv.Tokenizer(t, fam))
			if err != nil {
				t.Fatal(err)
			}
			if err := tok.validate(); err != nil {
				t.Fatal(err)
			}
			wantModel := map[string]string{"qwen3": ModelBPE, "llama3": ModelBPE, "gemma3": ModelSentencePiece, "llama2": ModelSentencePiece}[fam]
			if tok.Model != wantModel {
				t.Errorf("model %q, want %q", tok.Model, wantModel)
			}
			if tok.ChatTemplate == "" {
				t.Error("no chat template")
			}
			eos := tok.Tokens[tok.EOS]
			if tok.Types[tok.EOS] != TypeControl {
				t.Errorf("EOS %q is not a control token", eos)
			}
			if fam == "llama2" && !tok.AddSpacePrefix {
				t.Error("Llama 2 prefixes a space")
			}
			if fam == "gemma3" && tok.AddSpacePrefix {
				t.Error("Gemma 3 does not prefix a space")
			}
		})
	}
	if _, err := FromHF(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("FromHF of a missing file succeeded")
	}
}

// TestPadRealVocabulary pads the real Qwen3 vocabulary to its GGUFs'
// 151,936 rows: the file's vocabulary and embedding have that many
// entries, the pads are unused "[PADn]" tokens, the real tokens are
// untouched, the caller's Tokenizer is not modified, and a size below the
// tokenizer's is refused.
func TestPadRealVocabulary(t *testing.T) {
	tok, err := FromHF(testenv.Tokenizer(t, "qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	n := len(tok.Tokens)
	const size = 151936
	if n >= size {
		t.Fatalf("the Qwen3 tokenizer has %d tokens, expected fewer than %d", n, size)
	}
	s := Default(ArchQwen3)
	s.Tokenizer, s.VocabSize = tok, size
	_, meta := writeRead(t, s)
	if len(tok.Tokens) != n {
		t.Errorf("the caller's tokenizer grew from %d to %d tokens", n, len(tok.Tokens))
	}
	kv := meta.KV()
	tokens, types := kv.Strings("tokenizer.ggml.tokens"), kv.Ints("tokenizer.ggml.token_type")
	if len(tokens) != size || len(types) != size {
		t.Fatalf("%d tokens, %d types; want %d", len(tokens), len(types), size)
	}
	for i := range n {
		if tokens[i] != tok.Tokens[i] || types[i] != tok.Types[i] {
			t.Fatalf("token %d is %q (type %d), want %q (type %d)", i, tokens[i], types[i], tok.Tokens[i], tok.Types[i])
		}
	}
	for _, i := range []int{n, size - 1} {
		if want := fmt.Sprintf("[PAD%d]", i); tokens[i] != want || types[i] != TypeUnused {
			t.Errorf("token %d is %q (type %d), want %q (unused)", i, tokens[i], types[i], want)
		}
	}
	emb := meta.Tensors().GroupLayers()["token_embd"]["weight"]
	if emb == nil || emb.Shape[1] != size {
		t.Errorf("token_embd %v, want %d rows", emb, size)
	}
	s.VocabSize = n - 1
	if err := Write(filepath.Join(t.TempDir(), "small.gguf"), s); err == nil || !strings.Contains(err.Error(), "below the tokenizer's") {
		t.Errorf("a size below the tokenizer's: %v", err)
	}
}

// TestQwenVisionMetadata: a qwen35 written with its vision tower says what
// Ollama's qwen3next loader reads: the tower's sizes, Qwen's vision tokens
// (control tokens, in the vocabulary, at the ids the metadata names), and
// multi-axis RoPE sections that cover the rotated half of a head (RopeDim
// when set: partial rotary as in Qwen3.5).
func TestQwenVisionMetadata(t *testing.T) {
	for _, ropeDim := range []int{0, 8} {
		s := Default(ArchQwen35)
		s.Vision, s.HeadDim, s.RopeDim = true, 32, ropeDim
		n, err := s.normalize()
		if err != nil {
			t.Fatal(err)
		}
		_, meta := writeRead(t, s)
		kv := meta.KV()
		rotated := uint64(cmp.Or(ropeDim, 32))
		if got := kv.Uint("rope.dimension_count"); uint64(got) != rotated {
			t.Errorf("rope.dimension_count %d, want %d", got, rotated)
		}
		var sum int32
		for _, v := range kv.Ints("rope.dimension_sections") {
			sum += v
		}
		if uint64(sum) != rotated/2 {
			t.Errorf("RoPE sections %v sum to %d, want %d", kv.Ints("rope.dimension_sections"), sum, rotated/2)
		}
		if kv.Uint("vision.block_count") != uint32(n.VisionLayers) || kv.Uint("vision.patch_size") != uint32(n.PatchSize) {
			t.Errorf("vision sizes: %d layers, patch %d", kv.Uint("vision.block_count"), kv.Uint("vision.patch_size"))
		}
		toks := kv.Strings("tokenizer.ggml.tokens")
		types := kv.Ints("tokenizer.ggml.token_type")
		for key, want := range map[string]string{"image_token_id": QwenImagePad, "vision_start_token_id": QwenVisionStart, "vision_end_token_id": QwenVisionEnd} {
			id := int(kv.Uint(key))
			if id >= len(toks) || toks[id] != want || types[id] != TypeControl {
				t.Errorf("%s = %d: want the control token %q", key, id, want)
			}
		}
		if len(meta.Tensors().Items("v.")) == 0 || len(meta.Tensors().Items("v.deepstack_merger.0.")) == 0 {
			t.Error("no vision tower tensors")
		}
	}
}
