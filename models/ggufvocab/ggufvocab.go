// Package ggufvocab names the tokenizer metadata of GGUF files: token
// types, tokenizer models, pre-tokenizer names and the regular expressions
// they stand for. The engine's tokenizer (package models) reads GGUF files
// with it and the test-model writer (package models/gguf) writes them, so
// the engine does not depend on the writer.
package ggufvocab

// Token types, as GGUF's tokenizer.ggml.token_type stores them.
const (
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// Tokenizer models: SentencePiece (merges by score, "▁" for space, <0xNN>
// byte fallback) and byte-level BPE (merges by rank over GPT-2 byte
// symbols).
const (
	ModelSentencePiece = "llama"
	ModelBPE           = "gpt2"
)

// Qwen2Pre is the GGUF pre-tokenizer name of the Qwen2/2.5/3/3.5 regex.
const Qwen2Pre = "qwen2"

// Pretokenizer returns the regular expression (RE2 syntax plus lookahead,
// as github.com/dlclark/regexp2 reads it) that splits text before
// byte-level BPE for a GGUF pre-tokenizer name: qwen2 for Qwen, everything
// else the Llama 3 pattern (the one Ollama's engine uses by default).
func Pretokenizer(pre string) string {
	if pre == Qwen2Pre {
		return `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	}
	return `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
}
