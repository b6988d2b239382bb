// Package gguf writes small random-weight GGUF model files for tests, demos
// and benchmarks: a llama (SentencePiece vocabulary with byte fallback) or a
// qwen3 (byte-level BPE with the qwen2 pre-tokenizer and merges) network
// whose weights are drawn from a seeded generator, with either a small
// synthetic vocabulary or a real one taken from a Hugging Face
// tokenizer.json. The same Spec and seed always give a byte-identical file.
//
// The files load in Ollama's Go engine (and in llama.cpp) like any other
// GGUF; only the weights are meaningless. Weights are scaled so that logits
// are finite and spread out (not all equal).
package gguf

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	fsggml "github.com/ollama/ollama/fs/ggml"
)

// Architectures Write supports.
const (
	ArchLlama = "llama"
	ArchQwen3 = "qwen3"
)

// Archs lists the architectures Write supports.
func Archs() []string { return []string{ArchLlama, ArchQwen3} }

// DType is the storage type of the weight matrices (norms are always F32).
type DType string

// Weight storage types.
const (
	F32 DType = "f32"
	F16 DType = "f16"
)

// Spec describes a random-weight model. Zero fields take the defaults of
// Default(Arch).
type Spec struct {
	Arch string // ArchLlama (default) or ArchQwen3
	Name string // general.name; default "nesy-test-<arch>"
	Seed uint64 // weight generator seed

	Embd    int // hidden size
	Layers  int // transformer blocks
	FFN     int // feed-forward hidden size
	Heads   int // attention heads
	KVHeads int // key/value heads (grouped-query attention when < Heads)
	HeadDim int // per-head size; default Embd/Heads

	ContextLength int     // trained context length written to the file; default 8192
	RopeBase      float32 // default 10000 (llama), 1000000 (qwen3)
	DType         DType   // F32 (default) or F16
	// TiedOutput reuses the token embedding as the output projection
	// instead of writing a separate output.weight.
	TiedOutput bool
	// WeightScale multiplies the default weight spread (1/sqrt(fan-in));
	// 0 means 1. The output projection is additionally scaled so logits
	// have a standard deviation of a few units.
	WeightScale float64

	// Tokenizer is the vocabulary. Nil means the synthetic default of the
	// architecture: SyntheticSPM(VocabSize) for llama, SyntheticBPE(VocabSize)
	// for qwen3.
	Tokenizer *Tokenizer
	// VocabSize pads the synthetic vocabulary to this many tokens (ignored
	// when Tokenizer is set). 0 keeps the synthetic vocabulary's own size.
	VocabSize int
}

// Default returns the small default model of an architecture: a few
// hundred thousand parameters, loads and evaluates in milliseconds.
func Default(arch string) Spec {
	s := Spec{
		Arch: arch, Embd: 64, Layers: 2, FFN: 128, Heads: 4, KVHeads: 2,
		ContextLength: 8192, DType: F32,
	}
	if arch == "" {
		s.Arch = ArchLlama
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
		if s.Arch == ArchQwen3 {
			s.RopeBase = 1000000
		}
	}
	if s.DType == "" {
		s.DType = F32
	}
	if s.WeightScale == 0 {
		s.WeightScale = 1
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
	case s.DType != F32 && s.DType != F16:
		return s, fmt.Errorf("gguf: unsupported weight type %q (f32 or f16)", s.DType)
	case s.WeightScale < 0:
		return s, fmt.Errorf("gguf: negative weight scale %g", s.WeightScale)
	}
	if s.Tokenizer == nil {
		var err error
		if s.Arch == ArchQwen3 {
			s.Tokenizer, err = SyntheticBPE(s.VocabSize)
		} else {
			s.Tokenizer, err = SyntheticSPM(s.VocabSize)
		}
		if err != nil {
			return s, err
		}
	}
	if err := s.Tokenizer.validate(); err != nil {
		return s, err
	}
	return s, nil
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
	if err = fsggml.WriteGGUF(f, kv, ts); err != nil {
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
		e := int64(1)
		for _, d := range t.Shape {
			e *= int64(d)
		}
		total += e
	}
	return total, nil
}

// kv returns the model's metadata.
func (s Spec) kv() fsggml.KV {
	kv := fsggml.KV{
		"general.architecture":             s.Arch,
		"general.name":                     s.Name,
		"general.file_type":                uint32(fileType(s.DType)),
		"general.alignment":                uint32(32),
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
		"rope.dimension_count":             uint32(s.HeadDim),
	}
	s.Tokenizer.addKV(kv)
	return kv
}

func fileType(d DType) fsggml.FileType {
	if d == F16 {
		return fsggml.FileTypeF16
	}
	return fsggml.FileTypeF32
}
