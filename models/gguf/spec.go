// Package gguf writes small random-weight GGUF model files for tests, demos
// and benchmarks: llama (SentencePiece vocabulary with byte fallback), qwen3
// (byte-level BPE with the qwen2 pre-tokenizer and merges), gemma3
// (optionally with a tiny SigLIP vision tower), qwen35 (Qwen3.5's hybrid
// of gated delta-net and full attention layers) and qwen35moe (the same
// with mixture-of-experts feed-forward layers) networks whose weights are
// drawn from a seeded generator, with either a small synthetic vocabulary
// or a real one taken from a Hugging Face tokenizer.json. The same Spec and
// seed always give a byte-identical file.
//
// The files load in Ollama's Go engine (and in llama.cpp) like any other
// GGUF; only the weights are meaningless. Weights are scaled so that logits
// are finite and spread out (not all equal).
package gguf

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
)

// Architectures Write supports.
const (
	ArchLlama  = "llama"
	ArchQwen3  = "qwen3"
	ArchGemma3 = "gemma3" // optionally with a SigLIP vision tower (Spec.Vision)
	// ArchQwen35 is Qwen3.5's hybrid network: three gated delta-net
	// (linear attention, recurrent state) layers for every full attention
	// layer.
	ArchQwen35 = "qwen35"
	// ArchQwen35MoE is ArchQwen35 with a mixture-of-experts feed-forward
	// network in every layer (routed experts plus a gated shared expert).
	ArchQwen35MoE = "qwen35moe"
)

// Archs lists the architectures Write supports.
func Archs() []string {
	return []string{ArchLlama, ArchQwen3, ArchGemma3, ArchQwen35, ArchQwen35MoE}
}

// hybrid says whether arch is a Qwen3.5 hybrid (delta-net and full
// attention) network.
func hybrid(arch string) bool { return arch == ArchQwen35 || arch == ArchQwen35MoE }

// qwen35FullEvery: every fourth qwen35 layer is full attention.
const qwen35FullEvery = 4

// qwen35Full says whether qwen35 layer i is a full attention layer.
func qwen35Full(i int) bool { return (i+1)%qwen35FullEvery == 0 }

// DType is the storage type of the weight matrices (norms are always F32).
type DType string

// Weight storage types.
const (
	F32  DType = "f32"
	F16  DType = "f16"
	BF16 DType = "bf16" // bfloat16, as Qwen3.5's released weights
	Q8_0 DType = "q8_0" // blocks of 32 int8 with an F16 scale; rows not of whole blocks are F16
	Q4_0 DType = "q4_0" // blocks of 32 4-bit values with an F16 scale; rows not of whole blocks are F16
)

// DTypes lists the storage types Write supports.
func DTypes() []DType { return []DType{F32, F16, BF16, Q8_0, Q4_0} }

// Spec describes a random-weight model. Zero fields take the defaults of
// Default(Arch).
type Spec struct {
	Arch string // ArchLlama (default), ArchQwen3, ArchGemma3, ArchQwen35 or ArchQwen35MoE
	Name string // general.name; default "nesy-test-<arch>"
	Seed uint64 // weight generator seed

	Embd    int // hidden size
	Layers  int // transformer blocks
	FFN     int // feed-forward hidden size
	Heads   int // attention heads
	KVHeads int // key/value heads (grouped-query attention when < Heads)
	HeadDim int // per-head size; default Embd/Heads

	// Experts and ExpertsUsed are the routed experts of a qwen35moe
	// feed-forward layer and how many each token uses (default 4 and 2);
	// every expert, and the shared expert, is FFN wide.
	Experts     int
	ExpertsUsed int
	// VHeadReordered (qwen35, qwen35moe) writes ssm.v_head_reordered: the
	// gated delta-net's value head h reads key head h mod KVHeads instead
	// of h / (Heads/KVHeads).
	VHeadReordered bool
	// RopeDim (qwen35, qwen35moe) rotates only the first RopeDim values of
	// each attention head, as Qwen3.5 does (a quarter of its 256); 0
	// rotates the whole head.
	RopeDim int
	// ConvDType (qwen35, qwen35moe) stores the delta-net layers' short
	// convolution weights (ssm_conv1d) in this type: F32 when empty, as
	// converters write them; F16 or BF16 make the files a converter that
	// casts every matrix would write.
	ConvDType DType

	ContextLength int     // trained context length written to the file; default 8192
	RopeBase      float32 // default 10000 (llama), 1000000 (qwen3)
	DType         DType   // F32 (default), F16, BF16, Q8_0 or Q4_0 (see DTypes)
	// TiedOutput reuses the token embedding as the output projection
	// instead of writing a separate output.weight.
	TiedOutput bool
	// Weights gives tensors their values by name (GGUF order: a matrix of
	// shape [in, out] is out rows of in values); tensors not named are
	// random. Each must hold exactly as many values as its shape.
	Weights map[string][]float32
	// Meta are further string metadata, written under their keys as given
	// (e.g. "general.nesy.prompt").
	Meta map[string]string
	// WeightScale multiplies the default weight spread (1/sqrt(fan-in));
	// 0 means 1. The output projection is additionally scaled so logits
	// have a standard deviation of a few units.
	WeightScale float64

	// Tokenizer is the vocabulary. Nil means the synthetic default of the
	// architecture: SyntheticSPM(VocabSize) for llama, SyntheticBPE(VocabSize)
	// for qwen3, SyntheticGemma for gemma3.
	Tokenizer *Tokenizer
	// VocabSize pads the vocabulary to this many tokens with unused
	// "[PADn]" entries, as converters pad a real model's vocabulary to its
	// embedding's rows (Qwen's GGUFs: 151,936 for the 151,669 tokens of
	// its tokenizer.json). 0 keeps the vocabulary's own size.
	VocabSize int

	// Vision adds a vision encoder. For gemma3 a SigLIP tower over
	// ImageSize square images cut in PatchSize patches, pooled to
	// TokensPerImage embeddings per image; zero sizes take small defaults
	// (32 wide, 1 layer, 2 heads, 64 FFN, 56-pixel images, 14-pixel
	// patches, 4 tokens per image). For qwen35 and qwen35moe the Qwen3-VL
	// tower Qwen3.5's GGUFs carry (Ollama's converter writes it into the
	// model's file): 3-D patch convolution, interpolated learned positions,
	// 2-D rotary attention, a 2x2 patch merger and a deepstack merger after
	// the first layer whose output is added after the first text layer,
	// with multi-axis RoPE in the text model; images are resized to at
	// least ImageSize x ImageSize pixels (the processor keeps larger ones
	// up to 2 MP), one token per 2x2 patches; defaults 32 wide, 2 layers,
	// 2 heads, 64 FFN, 128 pixels, 32-pixel patches (4 tokens per 128x128
	// image, at most about 500 for the largest).
	Vision         bool
	VisionEmbd     int
	VisionLayers   int
	VisionHeads    int
	VisionFFN      int
	ImageSize      int
	PatchSize      int
	TokensPerImage int
}

// Default returns the small default model of an architecture: a few
// hundred thousand parameters (gemma3: its vocabulary makes it 8M), loads
// and evaluates in milliseconds.
func Default(arch string) Spec {
	s := Spec{
		Arch: arch, Embd: 64, Layers: 2, FFN: 128, Heads: 4, KVHeads: 2,
		ContextLength: 8192, DType: F32,
	}
	switch arch {
	case "":
		s.Arch = ArchLlama
	case ArchGemma3:
		// Gemma's 262,144-token vocabulary dominates: keep it narrow, F16
		// and tied to the output (17 MB).
		s.Embd, s.Heads, s.KVHeads, s.FFN, s.TiedOutput, s.DType = 32, 2, 1, 64, true, F16
	case ArchQwen35:
		s.Layers = 4 // three delta-net layers, one full attention layer
	case ArchQwen35MoE:
		s.Layers, s.Experts, s.ExpertsUsed = 4, 4, 2
	}
	return s
}

// Reference returns the benchmark reference model: llama, 768 wide, 12
// layers, 2048 FFN, 12 heads, a 32,000-token SentencePiece vocabulary and
// F32 weights (about 134M parameters, 540 MB).
func Reference() Spec {
	return Spec{
		Arch: ArchLlama, Name: "nesy-reference-llama",
		Embd: 768, Layers: 12, FFN: 2048, Heads: 12, KVHeads: 12,
		ContextLength: 8192, DType: F32, VocabSize: 32000,
	}
}

// normalize fills defaults and checks the spec.
func (s Spec) normalize() (Spec, error) {
	if s.Arch == "" {
		s.Arch = ArchLlama
	}
	if !slices.Contains(Archs(), s.Arch) {
		return s, fmt.Errorf("gguf: unsupported architecture %q (supported: %v)", s.Arch, Archs())
	}
	d := Default(s.Arch)
	if s.Name == "" {
		s.Name = "nesy-test-" + s.Arch
	}
	if s.Embd == 0 {
		s.Embd = d.Embd
	}
	if s.Layers == 0 {
		s.Layers = d.Layers
	}
	if s.FFN == 0 {
		s.FFN = d.FFN
	}
	if s.Heads == 0 {
		s.Heads = d.Heads
	}
	if s.KVHeads == 0 {
		s.KVHeads = min(d.KVHeads, s.Heads)
	}
	if s.HeadDim == 0 {
		if s.Heads > 0 {
			s.HeadDim = s.Embd / s.Heads
		}
	}
	if s.ContextLength == 0 {
		s.ContextLength = d.ContextLength
	}
	if s.RopeBase == 0 {
		s.RopeBase = 10000
		if s.Arch == ArchQwen3 || hybrid(s.Arch) {
			s.RopeBase = 1000000
		}
	}
	if s.DType == "" {
		s.DType = F32
	}
	if s.WeightScale == 0 {
		s.WeightScale = 1
	}
	if s.Arch == ArchQwen35MoE {
		if s.Experts == 0 {
			s.Experts = d.Experts
		}
		if s.ExpertsUsed == 0 {
			s.ExpertsUsed = min(d.ExpertsUsed, s.Experts)
		}
		if s.Experts < 1 || s.ExpertsUsed < 1 || s.ExpertsUsed > s.Experts {
			return s, fmt.Errorf("gguf: qwen35moe needs 1 <= experts used (%d) <= experts (%d)", s.ExpertsUsed, s.Experts)
		}
	} else if s.Experts != 0 || s.ExpertsUsed != 0 {
		return s, fmt.Errorf("gguf: experts are only generated for %s, not %s", ArchQwen35MoE, s.Arch)
	}
	switch {
	case s.Embd < 1 || s.Layers < 1 || s.FFN < 1 || s.Heads < 1 || s.KVHeads < 1:
		return s, fmt.Errorf("gguf: sizes must be positive (embd %d, layers %d, ffn %d, heads %d, kv heads %d)",
			s.Embd, s.Layers, s.FFN, s.Heads, s.KVHeads)
	case s.Heads%s.KVHeads != 0:
		return s, fmt.Errorf("gguf: heads (%d) must be a multiple of kv heads (%d)", s.Heads, s.KVHeads)
	case s.HeadDim < 2 || s.HeadDim%2 != 0:
		return s, fmt.Errorf("gguf: head size %d must be even and at least 2 (embd %d / heads %d)", s.HeadDim, s.Embd, s.Heads)
	case s.Arch == ArchLlama && s.HeadDim*s.Heads != s.Embd:
		return s, fmt.Errorf("gguf: llama needs heads*head size = embd (%d*%d != %d)", s.Heads, s.HeadDim, s.Embd)
	case s.ContextLength < 1:
		return s, fmt.Errorf("gguf: context length must be positive, got %d", s.ContextLength)
	case !slices.Contains(DTypes(), s.DType):
		return s, fmt.Errorf("gguf: unsupported weight type %q (f32, f16, bf16, q8_0 or q4_0)", s.DType)
	case s.RopeDim != 0 && !hybrid(s.Arch):
		return s, fmt.Errorf("gguf: partial rotary (a rotated head size) is only generated for qwen35 and qwen35moe, not %s", s.Arch)
	case s.RopeDim != 0 && (s.RopeDim < 2 || s.RopeDim%2 != 0 || s.RopeDim > s.HeadDim):
		return s, fmt.Errorf("gguf: rotated head size %d must be even, at least 2 and at most the head size %d", s.RopeDim, s.HeadDim)
	case s.ConvDType != "" && (!hybrid(s.Arch) || !slices.Contains([]DType{F32, F16, BF16}, s.ConvDType)):
		return s, fmt.Errorf("gguf: convolution weight type %q: qwen35 and qwen35moe take f32, f16 or bf16", s.ConvDType)
	case s.WeightScale < 0:
		return s, fmt.Errorf("gguf: negative weight scale %g", s.WeightScale)
	}
	if s.Vision {
		if err := s.normalizeVision(); err != nil {
			return s, err
		}
	}
	if s.Tokenizer != nil && s.VocabSize > 0 {
		t, err := padded(s.Tokenizer, s.VocabSize)
		if err != nil {
			return s, err
		}
		s.Tokenizer = t
	}
	if s.Tokenizer == nil {
		var err error
		switch s.Arch {
		case ArchQwen3, ArchQwen35, ArchQwen35MoE:
			s.Tokenizer, err = SyntheticBPE(s.VocabSize)
		case ArchGemma3:
			s.Tokenizer, err = SyntheticGemma()
		default:
			s.Tokenizer, err = SyntheticSPM(s.VocabSize)
		}
		if err != nil {
			return s, err
		}
	}
	if s.Vision && hybrid(s.Arch) {
		s.Tokenizer = withQwenVisionTokens(s.Tokenizer)
	}
	if s.Arch == ArchGemma3 && len(s.Tokenizer.Tokens) <= gemmaEndOfImage {
		// The engine's gemma3 model writes these ids around every image.
		return s, fmt.Errorf("gguf: gemma3 needs a vocabulary of more than %d tokens, got %d", gemmaEndOfImage, len(s.Tokenizer.Tokens))
	}
	if err := s.Tokenizer.validate(); err != nil {
		return s, err
	}
	if len(s.Weights) > 0 {
		known := map[string]int{}
		for _, t := range s.tensors() {
			known[t.name] = product(t.shape)
		}
		for name, v := range s.Weights {
			n, ok := known[name]
			switch {
			case !ok:
				return s, fmt.Errorf("gguf: weights for %q, which the %s model has no tensor of", name, s.Arch)
			case len(v) != n:
				return s, fmt.Errorf("gguf: tensor %q holds %d values, given %d", name, n, len(v))
			}
		}
	}
	return s, nil
}

// TokensPerImageOrDefault returns TokensPerImage, or the default (4) when
// it is zero.
func (s Spec) TokensPerImageOrDefault() int {
	if s.TokensPerImage == 0 {
		return 4
	}
	return s.TokensPerImage
}

func (s *Spec) normalizeVision() error {
	qwen := hybrid(s.Arch)
	if !qwen && s.Arch != ArchGemma3 {
		return fmt.Errorf("gguf: a vision encoder is only generated for gemma3, qwen35 and qwen35moe, not %s", s.Arch)
	}
	// A tiny tower: gemma3's SigLIP, or Qwen3-VL's with larger patches (so
	// the largest image the engine reserves for stays a few hundred tokens).
	layers, image, patch := 1, 56, 14
	if qwen {
		layers, image, patch = 2, 128, 32
	}
	for _, d := range []struct {
		v   *int
		def int
	}{{&s.VisionEmbd, 32}, {&s.VisionLayers, layers}, {&s.VisionHeads, 2}, {&s.VisionFFN, 64}, {&s.ImageSize, image}, {&s.PatchSize, patch}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	switch {
	case s.VisionEmbd < 1 || s.VisionLayers < 1 || s.VisionHeads < 1 || s.VisionFFN < 1 || s.PatchSize < 1 || s.ImageSize < 1:
		return fmt.Errorf("gguf: vision sizes must be positive")
	case s.VisionEmbd%s.VisionHeads != 0:
		return fmt.Errorf("gguf: vision width %d is not a multiple of %d heads", s.VisionEmbd, s.VisionHeads)
	}
	if qwen {
		switch {
		case (s.VisionEmbd/s.VisionHeads)%4 != 0:
			return fmt.Errorf("gguf: vision head size %d must be a multiple of 4 (2-D rotary halves)", s.VisionEmbd/s.VisionHeads)
		case s.ImageSize < 2*s.PatchSize:
			return fmt.Errorf("gguf: image size %d must be at least two merged patches (2 x %d)", s.ImageSize, s.PatchSize)
		case cmp.Or(s.RopeDim, s.HeadDim)%4 != 0:
			return fmt.Errorf("gguf: multi-axis RoPE needs a rotated head size that is a multiple of 4, got %d", cmp.Or(s.RopeDim, s.HeadDim))
		}
		return nil
	}
	if s.TokensPerImage == 0 {
		s.TokensPerImage = 4
	}
	side := s.ImageSize / s.PatchSize
	pooled := int(math.Sqrt(float64(s.TokensPerImage)))
	switch {
	case s.ImageSize%s.PatchSize != 0:
		return fmt.Errorf("gguf: image size %d is not a multiple of the patch size %d", s.ImageSize, s.PatchSize)
	case pooled*pooled != s.TokensPerImage || side%pooled != 0:
		return fmt.Errorf("gguf: %d tokens per image must be a square dividing the %dx%d patch grid", s.TokensPerImage, side, side)
	}
	return nil
}

// Write writes the model described by spec to path (created or truncated).
// The file is complete when Write returns nil; on error no partial file is
// left behind.
func Write(path string, spec Spec) (err error) {
	s, err := spec.normalize()
	if err != nil {
		return err
	}
	kv := s.kv()
	ts := s.tensors()

	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".nesy-gguf-*")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = writeGGUF(f, kvList(kv), ts); err != nil {
		return fmt.Errorf("gguf: writing %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("gguf: writing %s: %w", path, err)
	}
	if err = os.Chmod(tmp, 0o644); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

// Params returns the number of weights the spec describes.
func (s Spec) Params() (int64, error) {
	n, err := s.normalize()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, t := range n.tensors() {
		total += int64(product(t.shape))
	}
	return total, nil
}

// kv returns the model's metadata, keyed as GGUF stores it.
func (s Spec) kv() map[string]any {
	kv := map[string]any{
		"block_count":                      uint32(s.Layers),
		"context_length":                   uint32(s.ContextLength),
		"embedding_length":                 uint32(s.Embd),
		"feed_forward_length":              uint32(s.FFN),
		"attention.head_count":             uint32(s.Heads),
		"attention.head_count_kv":          uint32(s.KVHeads),
		"attention.key_length":             uint32(s.HeadDim),
		"attention.value_length":           uint32(s.HeadDim),
		"attention.layer_norm_rms_epsilon": float32(1e-6),
		"rope.freq_base":                   s.RopeBase,
		"rope.dimension_count":             uint32(cmp.Or(s.RopeDim, s.HeadDim)),
	}
	if hybrid(s.Arch) {
		// Per-layer KV heads: 0 marks a recurrent (delta-net) layer.
		kvHeads := make([]int32, s.Layers)
		for i := range kvHeads {
			if qwen35Full(i) {
				kvHeads[i] = int32(s.KVHeads)
			}
		}
		kv["attention.head_count_kv"] = kvHeads
		kv["ssm.state_size"] = uint32(s.HeadDim)           // key/value head size
		kv["ssm.group_count"] = uint32(s.KVHeads)          // key heads
		kv["ssm.time_step_rank"] = uint32(s.Heads)         // value heads
		kv["ssm.inner_size"] = uint32(s.Heads * s.HeadDim) // value heads x head size
		kv["ssm.conv_kernel"] = uint32(4)
		if s.VHeadReordered {
			kv["ssm.v_head_reordered"] = true
		}
	}
	if s.Arch == ArchQwen35MoE {
		kv["expert_count"] = uint32(s.Experts)
		kv["expert_used_count"] = uint32(s.ExpertsUsed)
		kv["expert_feed_forward_length"] = uint32(s.FFN)
		kv["expert_shared_feed_forward_length"] = uint32(s.FFN)
	}
	if s.Arch == ArchGemma3 {
		kv["attention.sliding_window"] = uint32(512)
		kv["rope.local.freq_base"] = float32(10000)
	}
	if s.Vision && hybrid(s.Arch) {
		// Qwen3-VL's tower as Ollama's converter describes it, and the
		// text model's multi-axis RoPE (time, height, width sections of
		// the rotary pairs) that places image tokens on their grid.
		kv["vision.block_count"] = uint32(s.VisionLayers)
		kv["vision.embedding_length"] = uint32(s.VisionEmbd)
		kv["vision.attention.head_count"] = uint32(s.VisionHeads)
		kv["vision.attention.layer_norm_epsilon"] = float32(1e-6)
		kv["vision.patch_size"] = uint32(s.PatchSize)
		kv["vision.spatial_merge_size"] = uint32(2)
		kv["vision.temporal_patch_size"] = uint32(2)
		kv["vision.num_channels"] = uint32(3)
		kv["vision.num_positional_embeddings"] = uint32(qwenVisionPositions)
		kv["vision.deepstack_visual_indexes"] = []int32{0}
		kv["vision.shortest_edge"] = uint32(s.ImageSize * s.ImageSize)
		half := cmp.Or(s.RopeDim, s.HeadDim) / 2
		kv["rope.dimension_sections"] = []int32{int32(half - 2*(half/4)), int32(half / 4), int32(half / 4)}
		kv["rope.mrope_interleaved"] = true
		ids := s.Tokenizer.index()
		kv["image_token_id"] = uint32(ids[QwenImagePad])
		kv["vision_start_token_id"] = uint32(ids[QwenVisionStart])
		kv["vision_end_token_id"] = uint32(ids[QwenVisionEnd])
	} else if s.Vision {
		kv["vision.block_count"] = uint32(s.VisionLayers)
		kv["vision.embedding_length"] = uint32(s.VisionEmbd)
		kv["vision.feed_forward_length"] = uint32(s.VisionFFN)
		kv["vision.attention.head_count"] = uint32(s.VisionHeads)
		kv["vision.attention.layer_norm_epsilon"] = float32(1e-6)
		kv["vision.image_size"] = uint32(s.ImageSize)
		kv["vision.patch_size"] = uint32(s.PatchSize)
		kv["vision.num_channels"] = uint32(3)
		kv["mm_tokens_per_image"] = uint32(s.TokensPerImage)
	}
	// Architecture keys carry the architecture's prefix.
	out := make(map[string]any, len(kv)+32)
	for k, v := range kv {
		out[s.Arch+"."+k] = v
	}
	kv = out
	kv["general.architecture"] = s.Arch
	kv["general.name"] = s.Name
	kv["general.file_type"] = fileType(s.DType)
	kv["general.alignment"] = uint32(alignment)
	s.Tokenizer.addKV(kv)
	for k, v := range s.Meta {
		kv[k] = v
	}
	return kv
}
