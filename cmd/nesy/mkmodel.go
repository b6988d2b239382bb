package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nesy-dev/nesy/models/gguf"
)

func newMkmodelCmd() *cobra.Command {
	var (
		arch, out, tokenizer, dtype, name string
		seed                              uint64
		ctx, layers, embd, ffn, heads     int
		kvHeads, headDim, vocabSize       int
		ropeDim                           int
		experts, expertsUsed              int
		reference, tied, vision           bool
	)
	cmd := &cobra.Command{
		Use:   "mkmodel --out F.gguf [--arch llama|qwen3|gemma3|qwen35|qwen35moe] [--seed N] [--tokenizer tokenizer.json]",
		Short: "Write a tiny random-weight GGUF model for tests and demos",
		Long: `mkmodel writes a random-weight GGUF model that loads in nesy (and in Ollama or
llama.cpp) like a real one: llama with a SentencePiece vocabulary (byte
fallback), qwen3 with a byte-level BPE vocabulary (qwen2 pre-tokenizer and
merges), gemma3 (262,144-token SentencePiece vocabulary), qwen35 (Qwen3.5's
hybrid of gated delta-net and full attention layers) or qwen35moe (the same
with mixture-of-experts feed-forward layers: --experts, --experts-used);
gemma3 and the qwen35 architectures optionally with a tiny vision encoder
(--vision: SigLIP for gemma3, Qwen3-VL's tower, as Qwen3.5's GGUFs carry it,
for qwen35). Without --tokenizer the vocabulary is a small synthetic one; with it,
the real vocabulary, merges, special tokens and chat template of a Hugging
Face tokenizer.json (and the tokenizer_config.json beside it), so the model
tokenizes exactly as the real one. The same flags and seed give a
byte-identical file.

--reference writes the benchmark reference model (llama, 768 wide, 12 layers,
2048 FFN, 32000 vocabulary, F32: about 134M parameters, 540 MB).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("mkmodel: --out is required")
			}
			spec := gguf.Default(arch)
			if reference {
				if cmd.Flags().Changed("arch") && arch != gguf.ArchLlama {
					return errors.New("mkmodel: --reference is a llama model")
				}
				spec = gguf.Reference()
			}
			spec.Seed = seed
			f := cmd.Flags()
			set := func(flag string, dst *int, v int) {
				if f.Changed(flag) {
					*dst = v
				}
			}
			set("ctx", &spec.ContextLength, ctx)
			set("layers", &spec.Layers, layers)
			set("embd", &spec.Embd, embd)
			set("ffn", &spec.FFN, ffn)
			set("heads", &spec.Heads, heads)
			set("kv-heads", &spec.KVHeads, kvHeads)
			set("head-dim", &spec.HeadDim, headDim)
			set("rope-dim", &spec.RopeDim, ropeDim)
			set("vocab", &spec.VocabSize, vocabSize)
			set("experts", &spec.Experts, experts)
			set("experts-used", &spec.ExpertsUsed, expertsUsed)
			if f.Changed("heads") && !f.Changed("kv-heads") && spec.KVHeads > spec.Heads {
				spec.KVHeads = spec.Heads
			}
			if f.Changed("dtype") {
				spec.DType = gguf.DType(strings.ToLower(dtype))
			}
			if f.Changed("name") {
				spec.Name = name
			}
			if f.Changed("tied") {
				spec.TiedOutput = tied
			}
			spec.Vision = vision
			vocabDesc := "synthetic"
			if tokenizer != "" {
				t, err := gguf.FromHF(tokenizer)
				if err != nil {
					return fmt.Errorf("mkmodel: %w", err)
				}
				spec.Tokenizer = t
				vocabDesc = tokenizer
			}
			params, err := spec.Params()
			if err != nil {
				return fmt.Errorf("mkmodel: %w", err)
			}
			if err := gguf.Write(out, spec); err != nil {
				return fmt.Errorf("mkmodel: %w", err)
			}
			st, err := os.Stat(out)
			if err != nil {
				return fmt.Errorf("mkmodel: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s, %d parameters, %s vocabulary, context %d, %.1f MB\n",
				out, spec.Arch, params, vocabDesc, spec.ContextLength, float64(st.Size())/1e6)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&arch, "arch", gguf.ArchLlama, "architecture: "+strings.Join(gguf.Archs(), " or "))
	f.StringVar(&out, "out", "", "output file (required)")
	f.Uint64Var(&seed, "seed", 0, "weight generator seed")
	f.StringVar(&tokenizer, "tokenizer", "", "Hugging Face tokenizer.json to take the vocabulary, special tokens and chat template from")
	f.IntVar(&ctx, "ctx", 8192, "context length written to the model")
	f.IntVar(&layers, "layers", 0, "transformer blocks (default 2, qwen35 and qwen35moe 4; 12 with --reference)")
	f.IntVar(&experts, "experts", 0, "routed experts per layer (qwen35moe only; default 4)")
	f.IntVar(&expertsUsed, "experts-used", 0, "experts each token uses (qwen35moe only; default 2)")
	f.IntVar(&embd, "embd", 0, "hidden size (default 64; 768 with --reference)")
	f.IntVar(&ffn, "ffn", 0, "feed-forward size (default 128; 2048 with --reference)")
	f.IntVar(&heads, "heads", 0, "attention heads (default 4; 12 with --reference)")
	f.IntVar(&kvHeads, "kv-heads", 0, "key/value heads (default 2; 12 with --reference)")
	f.IntVar(&headDim, "head-dim", 0, "per-head size (default embd/heads)")
	f.IntVar(&ropeDim, "rope-dim", 0, "qwen35/qwen35moe: rotate only this many values of each attention head, as Qwen3.5 does (64 of 256); default the whole head")
	f.IntVar(&vocabSize, "vocab", 0, "pad the vocabulary to this many tokens with unused [PADn] tokens, as converters pad a real model's (32000 with --reference; Qwen's GGUFs: 151936)")
	f.StringVar(&dtype, "dtype", "f32", "weight matrices' type: f32, f16, bf16, q8_0 or q4_0 (norms stay f32; quantized rows that are not whole blocks of 32 are f16)")
	f.StringVar(&name, "name", "", "general.name (default nesy-test-<arch>)")
	f.BoolVar(&reference, "reference", false, "the benchmark reference model (llama 768x12, 32000 vocabulary, F32)")
	f.BoolVar(&tied, "tied", false, "reuse the token embedding as the output projection (default for gemma3)")
	f.BoolVar(&vision, "vision", false, "add a tiny vision encoder: gemma3's SigLIP (56-pixel images, 4 tokens each) or, for qwen35/qwen35moe, Qwen3-VL's (images of at least 128x128 pixels, one token per 64x64)")
	return cmd
}
