// Package models is the language-model layer of nesy: it loads GGUF models
// (a file path or a model pulled into a local Ollama store) into Ollama's Go
// engine, exposes their vocabulary, tokenizer and chat template, and
// evaluates many token sequences at once with shared-prefix forks, as the
// decoder and the tree search need. It knows nothing of PDDL.
package models

import (
	"context"
	"errors"
)

// ErrNoSequences is returned when every sequence slot of an engine is in use.
// Callers can release sequences and retry.
var ErrNoSequences = errors.New("models: no free sequence slots")

// SeqID identifies a sequence (a KV-cache slot) of an Engine.
type SeqID int

// Vocab is a model's vocabulary as the decoder sees it.
type Vocab struct {
	// Text is the decoded bytes of every token id: byte-level BPE symbols and
	// SentencePiece pieces ("▁" = space, "<0xNN>" = one raw byte) are mapped
	// to the bytes they stand for. Special/control tokens keep their literal
	// spelling but are flagged in Special.
	Text [][]byte
	// Special marks control and special tokens (BOS, EOS, chat markup, unused
	// slots) that never spell plan text.
	Special []bool
	// BOS is the beginning-of-sequence token, or -1.
	BOS int32
	// EOS are the tokens that end generation (end-of-sequence, end-of-turn).
	EOS []int32
}

// Message is one chat message.
type Message struct {
	Role    string // "system", "user" or "assistant"
	Content string
	// Images are PNG or JPEG bytes shown to a vision model with this message.
	Images [][]byte
}

// ChatOptions change how a chat is rendered.
type ChatOptions struct {
	// Think enables Qwen's thinking mode; when false the template is rendered
	// with thinking disabled (an empty think block) where the family has one.
	Think bool
}

// Info describes a loaded model.
type Info struct {
	Name          string // as given (path or Ollama name)
	Path          string // resolved GGUF file
	Arch          string // general.architecture, e.g. "llama", "qwen3"
	Family        string // chat family: "qwen3", "llama3", "gemma3", "llama2" or ""
	ContextLength int    // tokens per sequence
	VocabSize     int
	Vision        bool // the model has a vision encoder
}

// EvalRequest asks to append Tokens to sequence Seq and return logits.
type EvalRequest struct {
	Seq    SeqID
	Tokens []int32
	// Images (PNG/JPEG) to insert before Tokens for vision models.
	Images [][]byte
	// AllLogits returns logits for every new token; otherwise only for the last.
	AllLogits bool
}

// EvalResult holds the logits of one EvalRequest: one row of VocabSize
// floats per requested position.
type EvalResult struct {
	Logits [][]float32
}

// Stats are an engine's running totals.
type Stats struct {
	EvaluatedTokens int64 // tokens computed by forward passes
	ModelCalls      int64 // forward passes
	SequencesInUse  int
	SequenceSlots   int
}

// LM is the model interface the rest of nesy uses. Implementations are safe
// for concurrent use; concurrent Eval calls may be merged into one forward
// pass.
type LM interface {
	Info() Info
	Vocab() *Vocab
	// Tokenize encodes text; special-token spellings in text (chat markup) are
	// recognised when parseSpecial is true. BOS is never added implicitly.
	Tokenize(text string, parseSpecial bool) ([]int32, error)
	// Detokenize decodes ids back to text.
	Detokenize(ids []int32) (string, error)
	// RenderChat renders messages with the model's chat template, ending with
	// the assistant turn's opening so generation can start.
	RenderChat(msgs []Message, opts ChatOptions) (string, error)

	// NewSequence allocates an empty sequence (ErrNoSequences when full).
	NewSequence() (SeqID, error)
	// Fork allocates a sequence sharing the first n cached tokens of src
	// without recomputing them.
	Fork(src SeqID, n int) (SeqID, error)
	// Truncate drops the cached tokens of seq from position n on.
	Truncate(seq SeqID, n int) error
	// Release frees seq.
	Release(seq SeqID)
	// Len returns the number of cached tokens of seq.
	Len(seq SeqID) int
	// Eval runs the requests (each on a different sequence) in as few forward
	// passes as the batch size allows.
	Eval(ctx context.Context, reqs []EvalRequest) ([]EvalResult, error)

	Stats() Stats
	Close() error
}
