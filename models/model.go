// Package models is the language-model layer of nesy: it loads GGUF models
// (a file path or a model pulled into a local Ollama store) into Ollama's Go
// engine, exposes their vocabulary, tokenizer and chat template, and
// evaluates many token sequences at once with shared-prefix forks, as the
// decoder and the tree search need. It knows nothing of PDDL.
//
// Load returns an *Engine (the native implementation of LM); NewUniform
// wraps one as the uniform prior (zero logits, no forward pass), the
// ablation that says how much a model's prior adds. One goroutine
// per loaded model owns the KV cache and forms batches; concurrent Eval
// calls from several goroutines are merged into shared forward passes when
// that is cheaper than running them apart (forks of one prompt, yes;
// unrelated long prompts stored far apart in the cache, no: see Engine).
// Sequences are slots of a fixed pool: NewSequence and Fork return
// ErrNoSequences when the pool is exhausted, never crash.
//
// Subpackages: models/gguf writes random-weight test models; models/gpu
// reads NVIDIA GPU state through NVML.
package models

import (
	"context"
	"errors"
	"fmt"
)

// PromptTooLongError is a prompt that does not fit the context length
// before any token is generated: the caller's input is too long, not a
// model failure (the server answers it 422 prompt_too_long).
type PromptTooLongError struct {
	Tokens        int // the prompt's tokens
	ContextLength int // the positions a sequence may hold
}

// Error returns "the prompt has N tokens, the context holds M".
func (e *PromptTooLongError) Error() string {
	return fmt.Sprintf("the prompt has %d tokens, the context holds %d", e.Tokens, e.ContextLength)
}

// Errors callers can test with errors.Is.
var (
	// ErrNoSequences is returned when every sequence slot of an engine is in
	// use. Callers can release sequences and retry.
	ErrNoSequences = errors.New("models: no free sequence slots")
	// ErrCacheFull is returned by Eval when the KV cache shared by all
	// sequences has no room for the batch; the sequences are left as they
	// were. Callers can release or truncate sequences and retry.
	ErrCacheFull = errors.New("models: KV cache full")
	// ErrContextLength is returned by Eval when a sequence would grow past
	// the context length.
	ErrContextLength = errors.New("models: sequence exceeds the context length")
	// ErrBadModel is wrapped by errors about a model file that is not a
	// well-formed GGUF (truncated, malformed metadata).
	ErrBadModel = errors.New("malformed model file")
	// ErrUnknownSequence is returned for a SeqID that is not allocated.
	ErrUnknownSequence = errors.New("models: unknown sequence")
	// ErrSequenceBusy is returned when a sequence is changed or evaluated
	// while an evaluation on it is still running.
	ErrSequenceBusy = errors.New("models: sequence has an evaluation in progress")
	// ErrNoVision is returned when images are given to a model without a
	// vision encoder.
	ErrNoVision = errors.New("models: the model has no vision encoder")
	// ErrBadImage is wrapped by errors about an image the model cannot take:
	// not a PNG or JPEG, or one its vision encoder's preprocessing rejects
	// (Qwen3-VL's wants both sides at least its patch size times its merge
	// size, e.g. 32 pixels for Qwen3.5).
	ErrBadImage = errors.New("unusable image")
	// ErrUnsupported is returned for operations the model's cache cannot do
	// (see Engine.Fork).
	ErrUnsupported = errors.New("models: operation not supported by this model")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("models: engine closed")
)

// SeqID identifies a sequence (a KV-cache slot) of an Engine.
type SeqID int

// Vocab is a model's vocabulary as the decoder sees it.
type Vocab struct {
	// Text is the decoded bytes of every token id: byte-level BPE symbols and
	// SentencePiece pieces ("▁" = space, "<0xNN>" = one raw byte) are mapped
	// to the bytes they stand for. Control tokens keep their literal
	// spelling; unused ids are empty.
	Text [][]byte
	// Special marks control tokens (BOS, EOS, chat markup), the unknown token
	// and unused slots: they never spell plan text. Added tokens that are not
	// control tokens (Qwen's "<think>", Gemma's "\n\n") are ordinary text.
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
	// Images are PNG or JPEG bytes shown to a vision model with this
	// message, before its text. Models without vision ignore them.
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
	Vision        bool // the model has a vision encoder (images are model-visible)
	// VisionOff says why the file's vision encoder is not used (e.g. a
	// convolution kernel in a type ggml cannot run); "" when it is, or the
	// file has none.
	VisionOff string
	// Thinking says the chat template has Qwen's thinking switch.
	Thinking bool
	// Recurrent says the model keeps recurrent state (Qwen3.5's hybrid
	// layers): forks share it copy-on-write, and truncating may recompute
	// tokens (see Engine.Truncate).
	Recurrent bool
	// StateBytes is the recurrent state one sequence slot holds (0 for
	// models without recurrent layers); Sequences slots hold it all.
	StateBytes int64
	Sequences  int   // sequence slots loaded (Options.Sequences, or fewer with FitSequences)
	Params     int64 // weights
	// Prompt is the planning-prompt variant the model was trained on
	// (GGUF key general.nesy.prompt, e.g. "compact"); "" for the default.
	Prompt string
	Device string // where the layers run, e.g. "CPU" or "CUDA0 (28/29 layers)"
	// FlashAttention says the attention layers run ggml's flash attention
	// (Options.FlashAttention as resolved at load).
	FlashAttention bool
}

// ImageToken returns the placeholder that stands for image n of an
// EvalRequest's Images in its Tokens. Tokenize turns "[img-n]" tags (as
// RenderChat writes them for vision models) into these placeholders.
func ImageToken(n int) int32 { return int32(-1 - n) }

// imageIndex inverts ImageToken.
func imageIndex(tok int32) (int, bool) {
	if tok >= 0 {
		return 0, false
	}
	return int(-1 - tok), true
}

// EvalRequest asks to append Tokens to sequence Seq and return logits.
type EvalRequest struct {
	Seq    SeqID
	Tokens []int32
	// Images (PNG/JPEG) referenced by ImageToken placeholders in Tokens.
	// Images not referenced by any placeholder are inserted before Tokens,
	// in order.
	Images [][]byte
	// AllLogits returns logits for every new text token; otherwise only for
	// the last position.
	AllLogits bool
	// Candidates, when not nil (and AllLogits is false), are the only
	// tokens whose logits the caller reads at the last position (a
	// constrained decoder's allowed tokens): the row holds their logits and
	// -Inf at every other token, and an engine may compute just those rows
	// of the output projection.
	Candidates []int32
	// CompactCandidates, with Candidates (and AllLogits false), makes the
	// last position's row hold only the candidates' logits, in
	// Candidates' order (len(Candidates) floats), instead of a vocabulary
	// row: no row of the vocabulary's size to allocate and fill per
	// request (608 KB for Qwen's 151,936 tokens, and as much garbage), most
	// of a search's own work per leaf with such a vocabulary.
	CompactCandidates bool
}

// EvalResult holds the logits of one EvalRequest: one row of VocabSize
// floats per requested position, in order.
type EvalResult struct {
	Logits [][]float32
	// Images is the number of images the model saw (encoded and inserted).
	Images int
	// Positions is the number of positions the request added to the
	// sequence (text tokens plus image embeddings).
	Positions int
}

// Stats are an engine's running totals.
type Stats struct {
	EvaluatedTokens int64 // positions computed by forward passes (warm-up excluded)
	ModelCalls      int64 // forward passes
	// PaddedPositions counts the pads of a recurrent model's padded passes
	// (positions placed so that short requests of several lengths share
	// one pass; not in EvaluatedTokens).
	PaddedPositions int64
	// CandidatePasses counts the passes that computed only their rows'
	// candidates of the output projection (EvalRequest.Candidates).
	CandidatePasses int64
	Images          int64 // images encoded
	SequencesInUse  int
	SequenceSlots   int
	CacheCells      int // KV cells shared by all sequences
}

// LM is the model interface the rest of nesy uses. Implementations are safe
// for concurrent use; concurrent Eval calls may be merged into one forward
// pass.
type LM interface {
	Info() Info
	Vocab() *Vocab
	// Tokenize encodes text; special-token spellings in text (chat markup)
	// are recognised when parseSpecial is true (added tokens that are not
	// control tokens, such as "<think>", always are), and so are "[img-n]"
	// tags for vision models, which become ImageToken(n). BOS is never added
	// implicitly.
	Tokenize(text string, parseSpecial bool) ([]int32, error)
	// Detokenize decodes ids back to text (the concatenation of their
	// Vocab.Text, without the space a SentencePiece model prefixes to the
	// first word).
	Detokenize(ids []int32) (string, error)
	// RenderChat renders messages with the model's chat template, ending with
	// the assistant turn's opening so generation can start. Images become
	// "[img-n]" tags (n counts over all messages) for vision models and are
	// left out otherwise; see ChatImages.
	RenderChat(msgs []Message, opts ChatOptions) (string, error)

	// NewSequence allocates an empty sequence (ErrNoSequences when full).
	NewSequence() (SeqID, error)
	// Fork allocates a sequence sharing the first n cached tokens of src
	// without recomputing them.
	Fork(src SeqID, n int) (SeqID, error)
	// Truncate drops the cached tokens of seq from position n on.
	Truncate(seq SeqID, n int) error
	// Release frees seq (after its running evaluation, if any, ends).
	Release(seq SeqID)
	// Len returns the number of cached positions of seq.
	Len(seq SeqID) int
	// Eval runs the requests (each on a different sequence) in as few
	// forward passes as the batch size allows. When ctx is cancelled it
	// returns ctx.Err() and the sequences are left as they were.
	Eval(ctx context.Context, reqs []EvalRequest) ([]EvalResult, error)

	Stats() Stats
	Close() error
}

// ChatImages returns the images of msgs in the order RenderChat numbers
// them, for EvalRequest.Images.
func ChatImages(msgs []Message) [][]byte {
	var out [][]byte
	for _, m := range msgs {
		out = append(out, m.Images...)
	}
	return out
}
