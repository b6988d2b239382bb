package explore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/trie"
)

// DefaultReplyTokens bounds a free reply (Dialog.Reply) when its maxTokens
// argument is 0.
const DefaultReplyTokens = 48

// Usage counts a dialog's model work.
type Usage struct {
	// PromptTokens counts the prompt tokens the model read for the first
	// time: the conversation's tokens minus those it generated, each counted
	// once however many turns reuse it (a prefix kept in the KV cache is not
	// read again; a prefix dropped to fit the context is).
	PromptTokens int `json:"prompt_tokens"`
	// GeneratedTokens counts the tokens the model chose (forced completions
	// of a choice, which need no model, are not counted).
	GeneratedTokens int `json:"generated_tokens"`
	// EvaluatedTokens counts every position a forward pass computed (text
	// tokens and image embeddings); ModelCalls the Eval calls.
	EvaluatedTokens int `json:"evaluated_tokens"`
	ModelCalls      int `json:"model_calls"`
	// Images counts the images the model saw (a vision model, encoded);
	// images given to a text-only model are left out and not counted.
	Images int `json:"images"`
	// Choices counts Choose calls; Forced those with a single option (no
	// model call).
	Choices int `json:"choices"`
	Forced  int `json:"forced"`
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		PromptTokens:    u.PromptTokens + o.PromptTokens,
		GeneratedTokens: u.GeneratedTokens + o.GeneratedTokens,
		EvaluatedTokens: u.EvaluatedTokens + o.EvaluatedTokens,
		ModelCalls:      u.ModelCalls + o.ModelCalls,
		Images:          u.Images + o.Images,
		Choices:         u.Choices + o.Choices,
		Forced:          u.Forced + o.Forced,
	}
}

// DialogOptions configure a Dialog. The zero value is greedy choice with the
// model's vocabulary index built on first use.
type DialogOptions struct {
	// Index is the model's vocabulary index for constrained choices (as
	// constraint.NewIndex builds it: text tokens by their bytes, the model's
	// end tokens as end tokens); nil builds one.
	Index *trie.Index
	// Temperature > 0 samples each token from the softmax of the logits
	// divided by it (among the allowed tokens, for a choice); 0 is greedy.
	Temperature float64
	// Seed seeds the sampler.
	Seed uint64
	// KeepTurns is the least number of latest turns (a turn: an assistant
	// message and the user message after it) kept when the conversation
	// outgrows the context: older turns between the first user message and
	// them are dropped. 0 means 4.
	KeepTurns int
}

// Dialog is a multi-turn conversation with a language model whose answers
// are single lines: a choice among given options, spelled under a
// constraint so that only an option can come out (Choose), or free text
// (Reply). The conversation is rendered with the model's chat template at
// every turn and kept in one KV-cache sequence: only the part that differs
// from what the cache holds (the new messages, usually) is evaluated.
//
// A Dialog is used by one goroutine at a time. Close releases its sequence.
type Dialog struct {
	lm      models.LM
	idx     *trie.Index
	opts    DialogOptions
	sampler *decoder.Sampler
	msgs    []models.Message
	// seq holds the cached conversation: toks[i] is its i-th token (an
	// ImageToken placeholder for an image) and ends[i] the number of cache
	// positions after it (an image takes several).
	seq    models.SeqID
	hasSeq bool
	toks   []int32
	ends   []int
	usage  Usage
	set    trie.Set
}

// NewDialog starts a conversation with lm from the given messages (usually a
// system message and the first user message).
func NewDialog(lm models.LM, msgs []models.Message, opts DialogOptions) (*Dialog, error) {
	if lm == nil {
		return nil, errors.New("explore: dialog without a model")
	}
	if opts.Temperature < 0 || math.IsNaN(opts.Temperature) || math.IsInf(opts.Temperature, 0) {
		return nil, fmt.Errorf("explore: temperature %v is not a non-negative number", opts.Temperature)
	}
	if opts.KeepTurns <= 0 {
		opts.KeepTurns = 4
	}
	d := &Dialog{lm: lm, idx: opts.Index, opts: opts, msgs: slices.Clone(msgs),
		sampler: decoder.NewSampler(decoder.Sampling{Temperature: opts.Temperature, Seed: opts.Seed})}
	return d, nil
}

// Close releases the dialog's KV-cache sequence. It is safe to call more
// than once.
func (d *Dialog) Close() {
	if d.hasSeq {
		d.lm.Release(d.seq)
		d.hasSeq = false
		d.toks, d.ends = nil, nil
	}
}

// Usage returns the model work so far.
func (d *Dialog) Usage() Usage { return d.usage }

// Messages returns the conversation so far (the caller must not modify it).
func (d *Dialog) Messages() []models.Message { return d.msgs }

// Add appends a message (usually the environment's feedback as a user
// message).
func (d *Dialog) Add(m models.Message) { d.msgs = append(d.msgs, m) }

// index returns the vocabulary index, building it on first use.
func (d *Dialog) index() (*trie.Index, error) {
	if d.idx == nil {
		v := d.lm.Vocab()
		idx, err := trie.NewIndex(v.Text, v.Special, trie.IndexOptions{EndTokens: v.EOS})
		if err != nil {
			return nil, fmt.Errorf("explore: vocabulary index: %w", err)
		}
		d.idx = idx
	}
	return d.idx, nil
}

// Choose makes the model answer with one of options (non-empty strings
// without line breaks, each at most once) and returns its position. The
// answer is constrained token by token to the prefixes of the options
// followed by a line break; once a single option is consistent with the
// text so far it is complete (the model need not spell the rest). A single
// option is chosen without consulting the model. The option is appended to
// the conversation as the assistant's message.
func (d *Dialog) Choose(ctx context.Context, options []string) (int, error) {
	return d.ChooseNote(ctx, options, "")
}

// ChooseNote is Choose with note appended to the last message for this
// turn only (e.g. the list of options, which later turns need not repeat).
func (d *Dialog) ChooseNote(ctx context.Context, options []string, note string) (int, error) {
	if len(options) == 0 {
		return -1, errors.New("explore: nothing to choose from")
	}
	d.usage.Choices++
	if len(options) == 1 {
		d.usage.Forced++
		d.msgs = append(d.msgs, models.Message{Role: "assistant", Content: options[0]})
		return 0, nil
	}
	idx, err := d.index()
	if err != nil {
		return -1, err
	}
	at, err := trie.NewActionTrie(trie.Spec{Actions: options})
	if err != nil {
		return -1, fmt.Errorf("explore: options: %w", err)
	}
	// The model computes only the logits the choice reads: the tokens
	// that continue toward an option (models.EvalRequest.Candidates), the
	// set each step computes before it feeds the token it chose.
	node := trie.Root
	idx.Allowed(at, node, &d.set)
	var logits []float32
	if last := len(d.msgs) - 1; note != "" && last >= 0 {
		saved := d.msgs[last].Content
		d.msgs[last].Content = strings.TrimRight(saved, "\n") + "\n\n" + note
		logits, err = d.prompt(ctx, 64, d.set.IDs)
		d.msgs[len(d.msgs)-1].Content = saved // still the last: dropTurn keeps the latest turns
	} else {
		logits, err = d.prompt(ctx, 64, d.set.IDs)
	}
	if err != nil {
		return -1, err
	}
	var consistent []int32
	for {
		if d.set.Len() == 0 {
			return -1, fmt.Errorf("explore: no token of the vocabulary continues %q toward an option", at.Text(node, nil))
		}
		i := d.sampler.Pick(logits, d.set.IDs)
		tok := d.set.IDs[i]
		node = d.set.Next[i]
		d.usage.GeneratedTokens++
		if a, ok := at.Completed(node); ok {
			return d.chose(options, a)
		}
		if consistent = at.Consistent(node, consistent[:0]); len(consistent) == 1 {
			return d.chose(options, int(consistent[0]))
		}
		idx.Allowed(at, node, &d.set)
		if logits, err = d.eval(ctx, []int32{tok}, nil, d.set.IDs); err != nil {
			return -1, err
		}
	}
}

func (d *Dialog) chose(options []string, a int) (int, error) {
	d.msgs = append(d.msgs, models.Message{Role: "assistant", Content: options[a]})
	return a, nil
}

// Reply lets the model write freely, up to maxTokens tokens (0 means
// DefaultReplyTokens), an end token or the end of the first non-empty line,
// and returns that line trimmed ("" when it wrote none). The line is
// appended to the conversation as the assistant's message. (Chats are
// rendered with thinking off, for models that have the switch.)
func (d *Dialog) Reply(ctx context.Context, maxTokens int) (string, error) {
	if maxTokens <= 0 {
		maxTokens = DefaultReplyTokens
	}
	logits, err := d.prompt(ctx, maxTokens, nil)
	if err != nil {
		return "", err
	}
	v := d.lm.Vocab()
	var text []byte
	ctxLen := d.lm.Info().ContextLength
	for n := 1; ; n++ {
		tok := int32(d.sampler.Pick(logits, nil))
		if slices.Contains(v.EOS, tok) {
			break
		}
		d.usage.GeneratedTokens++
		if int(tok) < len(v.Text) {
			text = append(text, v.Text[tok]...)
		}
		if _, ok := firstLine(string(text)); ok || n >= maxTokens {
			break
		}
		if ctxLen > 0 && d.lm.Len(d.seq)+1 >= ctxLen {
			break
		}
		if logits, err = d.eval(ctx, []int32{tok}, nil, nil); err != nil {
			return "", err
		}
	}
	line, ok := firstLine(string(text))
	if !ok {
		line = strings.TrimSpace(string(text))
	}
	d.msgs = append(d.msgs, models.Message{Role: "assistant", Content: line})
	return line, nil
}

// firstLine returns the first non-empty line of text, trimmed, when a line
// break ends it.
func firstLine(text string) (string, bool) {
	for {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			return "", false
		}
		if l := strings.TrimSpace(text[:i]); l != "" {
			return l, true
		}
		text = text[i+1:]
	}
}

// prompt renders the conversation with the generation prompt, makes the
// cache hold it (evaluating only what differs from what it holds) and
// returns the logits after it. room is how many tokens the answer needs:
// older turns are dropped until the prompt leaves that much of the context.
// cands are the tokens whose logits the caller reads (nil: all).
func (d *Dialog) prompt(ctx context.Context, room int, cands []int32) ([]float32, error) {
	ctxLen := d.lm.Info().ContextLength
	for {
		text, err := d.lm.RenderChat(d.msgs, models.ChatOptions{})
		if err != nil {
			return nil, fmt.Errorf("explore: rendering the chat: %w", err)
		}
		toks, err := d.lm.Tokenize(text, true)
		if err != nil {
			return nil, fmt.Errorf("explore: tokenizing the chat: %w", err)
		}
		if len(toks) == 0 {
			return nil, errors.New("explore: the chat has no tokens")
		}
		if ctxLen <= 0 || len(toks)+room+imagePositions(toks) <= ctxLen {
			return d.sync(ctx, toks, models.ChatImages(d.msgs), cands)
		}
		if !d.dropTurn() {
			return nil, fmt.Errorf("explore: the conversation needs %d tokens, the context holds %d: %w",
				len(toks)+room, ctxLen, models.ErrContextLength)
		}
	}
}

// imagePositions is a rough allowance for the positions images take beyond
// their placeholder token (unknown before encoding): 256 each.
func imagePositions(toks []int32) int {
	n := 0
	for _, t := range toks {
		if t < 0 {
			n += 256
		}
	}
	return n
}

// dropTurn removes the oldest turn after the first user message, keeping
// the latest KeepTurns; it reports whether it could.
func (d *Dialog) dropTurn() bool {
	first := 0
	for first < len(d.msgs) && d.msgs[first].Role != "user" {
		first++
	}
	start := first + 1 // the first message that may go
	keep := 2 * d.opts.KeepTurns
	if len(d.msgs)-start <= keep {
		return false
	}
	end := start + 1
	for end < len(d.msgs) && d.msgs[end].Role != "assistant" {
		end++
	}
	d.msgs = slices.Delete(d.msgs, start, end)
	return true
}

// sync makes the cached sequence hold toks (images: the conversation's
// images, referenced by their ImageToken placeholders) and returns the
// logits after its last token. The longest common prefix with what the
// cache holds is kept; at least the last token is evaluated again so that
// its logits are known. cands are as for prompt.
func (d *Dialog) sync(ctx context.Context, toks []int32, images [][]byte, cands []int32) ([]float32, error) {
	if !d.hasSeq {
		seq, err := d.lm.NewSequence()
		if err != nil {
			return nil, fmt.Errorf("explore: %w", err)
		}
		d.seq, d.hasSeq = seq, true
	}
	k := 0
	for k < len(toks) && k < len(d.toks) && toks[k] == d.toks[k] {
		k++
	}
	if k == len(toks) {
		k--
	}
	if k < len(d.toks) {
		// Placeholders are single tokens, so a cut between tokens never
		// splits an image.
		pos := 0
		if k > 0 {
			pos = d.ends[k-1]
		}
		if err := d.lm.Truncate(d.seq, pos); err != nil {
			// A model that cannot drop a tail starts over.
			d.lm.Release(d.seq)
			seq, err := d.lm.NewSequence()
			if err != nil {
				d.hasSeq = false
				return nil, fmt.Errorf("explore: %w", err)
			}
			d.seq, k = seq, 0
		}
		d.toks, d.ends = d.toks[:k], d.ends[:k]
	}
	n := len(toks) - k
	d.usage.PromptTokens += n
	return d.eval(ctx, toks[k:], images, cands)
}

// eval appends toks to the cached sequence and returns the logits after the
// last one. Image placeholders index images; each image goes in its own
// request (with its placeholder renumbered to the request's image 0) so
// that the positions it takes are known. cands are the tokens whose logits
// the caller reads after the last one (nil: all); the rows of the chunks
// before it are not read, so they ask for one token's.
func (d *Dialog) eval(ctx context.Context, toks []int32, images [][]byte, cands []int32) ([]float32, error) {
	var logits []float32
	parts := chunks(toks)
	for i, c := range parts {
		req := models.EvalRequest{Seq: d.seq, Tokens: c, Candidates: cands}
		if i < len(parts)-1 {
			req.Candidates = []int32{0}
		}
		if c[0] < 0 {
			n := int(-1 - c[0])
			if n >= len(images) {
				return nil, fmt.Errorf("explore: image placeholder %d without an image", n)
			}
			req.Tokens = append([]int32{models.ImageToken(0)}, c[1:]...)
			req.Images = [][]byte{images[n]}
		}
		res, err := d.lm.Eval(ctx, []models.EvalRequest{req})
		if err != nil {
			return nil, fmt.Errorf("explore: %w", err)
		}
		d.usage.ModelCalls++
		if len(res) == 0 || len(res[0].Logits) == 0 {
			return nil, errors.New("explore: the model returned no logits")
		}
		r := res[0]
		d.usage.EvaluatedTokens += r.Positions
		d.usage.Images += r.Images
		base := 0
		if len(d.ends) > 0 {
			base = d.ends[len(d.ends)-1]
		}
		// The text tokens take one position each; an image the rest.
		extra := r.Positions - len(c)
		for i, t := range c {
			base++
			if i == 0 && t < 0 {
				base += extra
			}
			d.toks = append(d.toks, t)
			d.ends = append(d.ends, base)
		}
		logits = r.Logits[len(r.Logits)-1]
	}
	return logits, nil
}

// chunks splits toks before every image placeholder (a negative token), so
// that each chunk holds at most one image, at its start.
func chunks(toks []int32) [][]int32 {
	var out [][]int32
	start := 0
	for i := 1; i < len(toks); i++ {
		if toks[i] < 0 {
			out = append(out, toks[start:i])
			start = i
		}
	}
	if start < len(toks) {
		out = append(out, toks[start:])
	}
	return out
}
