package models

import (
	"context"
	"fmt"
	"sync"
)

// UniformName is the Info().Name of a uniform prior (see NewUniform) and the
// --model value that selects it on the command line.
const UniformName = "uniform"

// UniformContextLength is the context length a uniform prior reports when
// its tokenizer's model has a shorter one: it runs no forward pass, so no
// cache limits it, and every prompt of the benchmark suites fits.
const UniformContextLength = 1 << 16

// Uniform is the ablation prior: an LM whose logits are all zero, so every
// token the constraint allows is alike (greedy decoding takes the first
// allowed token; sampling and the tree search's priors are uniform over the
// allowed ones). It tokenizes, detokenizes and renders chats with a base
// model's vocabulary and template, but never evaluates it: Eval only counts
// positions. It is safe for concurrent use.
type Uniform struct {
	base LM
	info Info

	mu     sync.Mutex    // protects the fields below
	seqs   map[SeqID]int // cached positions per sequence
	next   SeqID
	slots  int
	stats  Stats
	closed bool
}

// NewUniform returns the uniform prior over base's vocabulary. base is used
// for its tokenizer and chat template only; Close closes it. slots bounds
// the sequences held at once (<= 0: 1024). The context length is base's or
// UniformContextLength, whichever is longer.
func NewUniform(base LM, slots int) *Uniform {
	if slots <= 0 {
		slots = 1024
	}
	info := base.Info()
	info.Name, info.Params, info.Device = UniformName, 0, "none (uniform prior)"
	info.ContextLength = max(info.ContextLength, UniformContextLength)
	info.Vision = false
	return &Uniform{base: base, info: info, seqs: map[SeqID]int{}, slots: slots,
		stats: Stats{SequenceSlots: slots}}
}

// Info implements LM: the base model's, named "uniform", with no parameters.
func (u *Uniform) Info() Info { return u.info }

// Vocab implements LM (the base model's vocabulary).
func (u *Uniform) Vocab() *Vocab { return u.base.Vocab() }

// Tokenize implements LM with the base model's tokenizer.
func (u *Uniform) Tokenize(text string, parseSpecial bool) ([]int32, error) {
	return u.base.Tokenize(text, parseSpecial)
}

// Detokenize implements LM with the base model's tokenizer.
func (u *Uniform) Detokenize(ids []int32) (string, error) { return u.base.Detokenize(ids) }

// RenderChat implements LM with the base model's chat template (images are
// left out: the uniform prior sees nothing).
func (u *Uniform) RenderChat(msgs []Message, opts ChatOptions) (string, error) {
	text := make([]Message, len(msgs))
	for i, m := range msgs {
		text[i] = Message{Role: m.Role, Content: m.Content}
	}
	return u.base.RenderChat(text, opts)
}

// NewSequence implements LM.
func (u *Uniform) NewSequence() (SeqID, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.allocLocked(0)
}

func (u *Uniform) allocLocked(n int) (SeqID, error) {
	if u.closed {
		return 0, ErrClosed
	}
	if len(u.seqs) >= u.slots {
		return 0, ErrNoSequences
	}
	id := u.next
	u.next++
	u.seqs[id] = n
	u.stats.SequencesInUse = len(u.seqs)
	return id, nil
}

// Fork implements LM.
func (u *Uniform) Fork(src SeqID, n int) (SeqID, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	l, ok := u.seqs[src]
	if !ok {
		return 0, fmt.Errorf("%w %d", ErrUnknownSequence, src)
	}
	if n < 0 || n > l {
		return 0, fmt.Errorf("models: fork of sequence %d at %d: it holds %d positions", src, n, l)
	}
	return u.allocLocked(n)
}

// Truncate implements LM.
func (u *Uniform) Truncate(seq SeqID, n int) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	l, ok := u.seqs[seq]
	if !ok {
		return fmt.Errorf("%w %d", ErrUnknownSequence, seq)
	}
	if n < 0 || n > l {
		return fmt.Errorf("models: truncate of sequence %d at %d: it holds %d positions", seq, n, l)
	}
	u.seqs[seq] = n
	return nil
}

// Release implements LM.
func (u *Uniform) Release(seq SeqID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.seqs, seq)
	u.stats.SequencesInUse = len(u.seqs)
}

// Len implements LM; unknown sequences have length 0.
func (u *Uniform) Len(seq SeqID) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seqs[seq]
}

// Eval implements LM: it appends the tokens to their sequences and returns
// rows of zeros (fresh ones: callers may write to them). It checks the
// requests as the engine does (known, distinct sequences; the context
// length) and changes nothing when one fails.
func (u *Uniform) Eval(ctx context.Context, reqs []EvalRequest) ([]EvalResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, ErrClosed
	}
	seen := make(map[SeqID]bool, len(reqs))
	for _, r := range reqs {
		l, ok := u.seqs[r.Seq]
		if !ok {
			return nil, fmt.Errorf("%w %d", ErrUnknownSequence, r.Seq)
		}
		if seen[r.Seq] {
			return nil, fmt.Errorf("models: sequence %d appears twice in one Eval", r.Seq)
		}
		seen[r.Seq] = true
		for _, t := range r.Tokens {
			if t < 0 || int(t) >= u.info.VocabSize {
				return nil, fmt.Errorf("models: token %d outside the vocabulary of %d", t, u.info.VocabSize)
			}
		}
		if len(r.Images) > 0 {
			return nil, ErrNoVision
		}
		if err := checkCandidates(r, u.info.VocabSize); err != nil {
			return nil, err
		}
		if l+len(r.Tokens) > u.info.ContextLength {
			return nil, fmt.Errorf("%w: sequence %d would hold %d positions, the context %d",
				ErrContextLength, r.Seq, l+len(r.Tokens), u.info.ContextLength)
		}
	}
	out := make([]EvalResult, len(reqs))
	for i, r := range reqs {
		u.seqs[r.Seq] += len(r.Tokens)
		rows := 0
		if len(r.Tokens) > 0 {
			rows = 1
			if r.AllLogits {
				rows = len(r.Tokens)
			}
		}
		out[i] = EvalResult{Logits: make([][]float32, rows), Positions: len(r.Tokens)}
		for j := range rows {
			if r.Candidates != nil && !r.AllLogits && r.CompactCandidates {
				out[i].Logits[j] = make([]float32, len(r.Candidates))
				continue
			}
			if r.Candidates != nil && !r.AllLogits {
				out[i].Logits[j] = maskedRow(u.info.VocabSize, r.Candidates, func(int32) float32 { return 0 })
				continue
			}
			out[i].Logits[j] = make([]float32, u.info.VocabSize)
		}
		u.stats.EvaluatedTokens += int64(len(r.Tokens))
	}
	u.stats.ModelCalls++
	return out, nil
}

// Stats implements LM: EvaluatedTokens counts the positions appended,
// ModelCalls the Eval calls (no forward pass runs).
func (u *Uniform) Stats() Stats {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.stats
}

// Close implements LM; it closes the base model. It is safe to call more
// than once.
func (u *Uniform) Close() error {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil
	}
	u.closed = true
	u.seqs = map[SeqID]int{}
	u.stats.SequencesInUse = 0
	u.mu.Unlock()
	if err := u.base.Close(); err != nil {
		return fmt.Errorf("models: closing the uniform prior's tokenizer model: %w", err)
	}
	return nil
}

var _ LM = (*Uniform)(nil)
