package decoder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/nesy-dev/nesy/constraint"
	"strings"
	"sync"
	"time"

	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/trie"
)

// DefaultMaxThinkTokens bounds Qwen's thinking when Options.MaxThinkTokens
// is 0.
const DefaultMaxThinkTokens = 1024

// Decoder generates plans with one model. It is safe for concurrent use;
// build one per loaded model (it holds the model's vocabulary index).
type Decoder struct {
	lm  models.LM
	idx *trie.Index
}

// New returns a decoder for lm. idx is the model's vocabulary index
// (NewIndex); nil builds it.
func New(lm models.LM, idx *trie.Index) (*Decoder, error) {
	if lm == nil {
		return nil, errors.New("decoder: no model")
	}
	if idx == nil {
		var err error
		if idx, err = constraint.NewIndex(lm); err != nil {
			return nil, err
		}
	}
	if idx.Size() != len(lm.Vocab().Text) {
		return nil, fmt.Errorf("decoder: index of %d tokens for a model of %d", idx.Size(), len(lm.Vocab().Text))
	}
	return &Decoder{lm: lm, idx: idx}, nil
}

// Model returns the decoder's model.
func (d *Decoder) Model() models.LM { return d.lm }

// Index returns the model's vocabulary index.
func (d *Decoder) Index() *trie.Index { return d.idx }

// Request is what to plan: the task (through its bound lexicon), the prompt
// and the constraint's options.
type Request struct {
	Lexicon *lexicon.Bound
	Prompt  PromptOptions
	// Space configures the constraint (separator, end marker and policy,
	// StopAtGoal, MaxActions). Unconstrained decoding uses the separator,
	// end marker, StopAtGoal and MaxActions too; EndPolicy only binds the
	// constrained mode.
	Space constraint.Options
}

// Options configure one decode. The zero value is unconstrained greedy
// decoding up to the context length.
type Options struct {
	// Constrained masks every step to the tokens that continue an
	// applicable action (Space.Allowed).
	Constrained bool
	// Sampling chooses among the candidates (zero: greedy).
	Sampling Sampling
	// MaxTokens bounds the answer's tokens (thinking excluded); 0 means
	// what the context length leaves after the prompt.
	MaxTokens int
	// MaxThinkTokens bounds the thinking of a thinking prompt; at the bound
	// "</think>" is written for the model. 0 means DefaultMaxThinkTokens.
	MaxThinkTokens int
	// FeedEachToken feeds every constrained token to the model in a call
	// of its own. Otherwise a run of tokens the constraint forces (the rest
	// of an action's only spelling, a goal trace) is fed in one call when
	// the next choice needs the logits: the same plans up to float
	// rounding (a pass over several tokens sums in another order), in
	// fewer model calls.
	FeedEachToken bool
	// OnEvent, when not nil, is called synchronously for every token,
	// committed action, invalid step and the end (for streaming).
	OnEvent func(Event)
}

// EventKind tells what an Event reports.
type EventKind uint8

const (
	// EventToken: the model wrote a token (Token, Text, Thinking).
	EventToken EventKind = iota
	// EventAction: an action was committed to the plan (Step, Action,
	// ActionText, Line).
	EventAction
	// EventInvalid: an unconstrained step is not an applicable action
	// (Step, ActionText as written, Reason). Reported once, for the first.
	EventInvalid
	// EventEnd: the plan ended (Reason: the EndReason's name or "max_tokens").
	EventEnd
)

// Event is one step of a decode, for streaming.
type Event struct {
	Kind     EventKind
	Token    int32
	Text     string
	Thinking bool
	Step     int // 0-based index of the action in the plan
	Action   int // ground action id
	// ActionText is the action in the lexicon's words (as the model wrote it).
	ActionText string
	// Line is the action in PDDL plan syntax, "(name a b)".
	Line   string
	Reason string
}

// InvalidStep is the first step of an unconstrained plan that is not an
// applicable action.
type InvalidStep struct {
	Step   int    `json:"step"`   // 0-based index among the plan's lines
	Text   string `json:"text"`   // the line as written (trimmed)
	Reason string `json:"reason"` // unknown action text, or the failing precondition
}

// MaskBuckets are the upper bounds of Result.MaskHistogram's buckets (the
// last bucket has none).
var MaskBuckets = [...]time.Duration{time.Microsecond, 10 * time.Microsecond, 100 * time.Microsecond, time.Millisecond}

// Result is a generated plan with its accounting.
type Result struct {
	// Plan is the plan's action ids; Lines the same in PDDL plan syntax
	// ("(name a b)", what `nesy validate` reads); Texts in the lexicon's
	// words. For an unconstrained decode they stop before the first invalid
	// step.
	Plan  []int
	Lines []string
	Texts []string
	// Valid: every step the model wrote is an applicable action (always
	// true for a constrained plan), confirmed by re-validating Lines with
	// pddl.Task.Validate. GoalReached: valid and the goal holds at the end.
	Valid       bool
	GoalReached bool
	// FirstInvalid is the first invalid step of an unconstrained plan, or nil.
	FirstInvalid *InvalidStep
	// StepsWritten counts the action lines the model wrote (valid or not).
	StepsWritten int
	// ValidationError is the validator's error when re-validation rejects
	// the plan (a bug for a constrained plan), else "".
	ValidationError string
	// GoalError says which part of the goal is false, when it is.
	GoalError string
	// States are the states the plan visits (States[0] the initial state),
	// from the re-validation.
	States []pddl.State
	// EndReason is why decoding stopped: an EndReason name, or "max_tokens".
	EndReason string
	// DeadEnd: a constrained decode reached a state where no action applies
	// and the plan may not end.
	DeadEnd bool

	// Text is the answer as written (thinking excluded); Tokens its tokens.
	Text   string
	Tokens []int32
	// Thinking is the thinking text of a thinking prompt.
	Thinking string

	Constrained bool
	// PromptTokens is the prompt's length. GeneratedTokens counts the
	// answer's tokens (end token excluded), ThinkingTokens the thinking's.
	PromptTokens    int
	GeneratedTokens int
	ThinkingTokens  int
	// EvaluatedTokens counts every token this request submitted to a
	// forward pass (the prompt when this decode prefilled it, each token
	// fed back). ModelCalls counts its Eval calls.
	EvaluatedTokens int
	ModelCalls      int
	// Mask accounting (constrained): MaskSteps steps, total and largest
	// time spent computing allowed sets and advancing the cursor, and a
	// histogram by MaskBuckets.
	MaskSteps      int
	MaskSeconds    float64
	MaskMaxSeconds float64
	MaskHistogram  [len(MaskBuckets) + 1]int
	// Seconds is the wall time of the decode (prefill included when this
	// decode did it); ModelSeconds the part spent waiting for the model's
	// forward passes. The rest is the decoder's own overhead (masks,
	// sampling, parsing).
	Seconds      float64
	ModelSeconds float64
}

// Session is a prompt evaluated once, from which any number of plans can be
// decoded (each on a fork of the prompt's sequence). Close releases it.
// Decode may be called concurrently.
type Session struct {
	d      *Decoder
	space  *constraint.Space
	prompt *Prompt
	seq    models.SeqID
	logits []float32 // the prompt's last row

	prefillSeconds float64

	mu        sync.Mutex // protects prefilled and closed
	prefilled bool       // the prefill's cost was reported by a decode
	closed    bool
}

// Prepare builds the prompt and the constraint space of a request, and
// evaluates the prompt into a new sequence.
func (d *Decoder) Prepare(ctx context.Context, req Request) (*Session, error) {
	if req.Lexicon == nil {
		return nil, errors.New("decoder: request without a lexicon")
	}
	if req.Prompt.End == "" {
		req.Prompt.End = req.Space.End
	}
	sp, err := constraint.New(d.idx, req.Lexicon, req.Space)
	if err != nil {
		return nil, err
	}
	p, err := BuildPrompt(d.lm, req.Lexicon, req.Prompt)
	if err != nil {
		return nil, err
	}
	if n := d.lm.Info().ContextLength; n > 0 && len(p.Tokens) >= n {
		return nil, fmt.Errorf("decoder: %w", &models.PromptTooLongError{Tokens: len(p.Tokens), ContextLength: n})
	}
	start := time.Now()
	seq, err := d.lm.NewSequence()
	if err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	res, err := d.lm.Eval(ctx, []models.EvalRequest{{Seq: seq, Tokens: p.Tokens}})
	if err != nil {
		d.lm.Release(seq)
		return nil, fmt.Errorf("decoder: evaluating the prompt: %w", err)
	}
	s := &Session{d: d, space: sp, prompt: p, seq: seq, logits: lastRow(res)}
	if s.logits == nil {
		d.lm.Release(seq)
		return nil, errors.New("decoder: the model returned no logits for the prompt")
	}
	s.prefillSeconds = time.Since(start).Seconds()
	return s, nil
}

func lastRow(res []models.EvalResult) []float32 {
	if len(res) == 0 || len(res[0].Logits) == 0 {
		return nil
	}
	rows := res[0].Logits
	return rows[len(rows)-1]
}

// Space returns the session's constraint space.
func (s *Session) Space() *constraint.Space { return s.space }

// Prompt returns the session's prompt.
func (s *Session) Prompt() *Prompt { return s.prompt }

// Sequence returns the prompt's sequence (fork it; do not extend it).
func (s *Session) Sequence() models.SeqID { return s.seq }

// PromptLogits returns the logits after the prompt (do not modify them).
func (s *Session) PromptLogits() []float32 { return s.logits }

// TakePrefill reports the prefill's cost (evaluated tokens, model calls,
// seconds) to the first caller and zeros to later ones, so that the prompt is
// counted once over all decodes (and searches) of a session.
func (s *Session) TakePrefill() (evaluated, calls int, seconds float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prefilled {
		return 0, 0, 0
	}
	s.prefilled = true
	return len(s.prompt.Tokens), 1, s.prefillSeconds
}

// Close releases the prompt's sequence. It is safe to call more than once.
func (s *Session) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.d.lm.Release(s.seq)
	}
}

// Decode is Prepare, one Session.Decode and Close.
func (d *Decoder) Decode(ctx context.Context, req Request, opts Options) (*Result, error) {
	s, err := d.Prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Decode(ctx, opts)
}

// Decode generates one plan on a fork of the prompt's sequence. On
// cancellation (or a model error) it returns the plan so far, re-validated,
// with the error.
func (s *Session) Decode(ctx context.Context, opts Options) (*Result, error) {
	if err := opts.Sampling.Check(); err != nil {
		return nil, err
	}
	if opts.MaxTokens < 0 || opts.MaxThinkTokens < 0 {
		return nil, errors.New("decoder: negative token limit")
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errors.New("decoder: session closed")
	}
	start := time.Now()
	r := &run{s: s, sp: s.space, lm: s.d.lm, idx: s.d.idx, opts: opts, sm: NewSampler(opts.Sampling)}
	r.res = &Result{Constrained: opts.Constrained, PromptTokens: len(s.prompt.Tokens)}
	ev, calls, secs := s.TakePrefill()
	r.res.EvaluatedTokens, r.res.ModelCalls = ev, calls
	seq, err := r.lm.Fork(s.seq, len(s.prompt.Tokens))
	if err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	defer r.lm.Release(seq)
	r.seq = seq
	r.logits = s.logits
	err = r.decode(ctx)
	r.finish()
	r.res.Seconds = time.Since(start).Seconds() + secs
	r.res.ModelSeconds += secs
	return r.res, err
}

// onLine reacts to what the line parser found in unconstrained output.
func (r *run) onLine(e Event) {
	switch e.Kind {
	case EventEnd:
		r.end(e.Reason)
	default:
		r.emit(e)
	}
}

// run is the state of one decode.
type run struct {
	s      *Session
	sp     *constraint.Space
	lm     models.LM
	idx    *trie.Index
	opts   Options
	sm     *Sampler
	res    *Result
	seq    models.SeqID
	logits []float32
	// compact says logits holds only the candidates of the last feed, in
	// their order (models.EvalRequest.CompactCandidates), not a
	// vocabulary row.
	compact bool
	pos     int // tokens in the sequence

	// constrained
	cur constraint.Cursor
	set trie.Set

	plan  []int
	ended bool
	text  bytes.Buffer
	// pending holds constrained tokens written but not yet fed to the
	// model: a token the constraint forces needs no logits, so a run of
	// forced tokens (the rest of a unique action name, a goal trace) is
	// fed in one model call when the next choice needs the logits.
	pending []int32

	// unconstrained
	lp *lineParser
}

func (r *run) emit(e Event) {
	if r.opts.OnEvent != nil {
		r.opts.OnEvent(e)
	}
}

// feed evaluates toks on the run's sequence and keeps the last logit row;
// cands, when not nil, are the only tokens whose logits the run reads
// next (models.EvalRequest.Candidates), and then come back compact: just
// their logits, in their order.
func (r *run) feed(ctx context.Context, toks, cands []int32) error {
	t0 := time.Now()
	r.compact = cands != nil
	res, err := r.lm.Eval(ctx, []models.EvalRequest{{Seq: r.seq, Tokens: toks, Candidates: cands, CompactCandidates: r.compact}})
	r.res.ModelSeconds += time.Since(t0).Seconds()
	r.res.ModelCalls++
	if err != nil {
		return err
	}
	r.res.EvaluatedTokens += len(toks)
	r.pos += len(toks)
	if r.logits = lastRow(res); r.logits == nil {
		return errors.New("decoder: the model returned no logits")
	}
	return nil
}

func (r *run) decode(ctx context.Context) error {
	r.pos = len(r.s.prompt.Tokens)
	ctxLen := r.lm.Info().ContextLength
	room := func() int { // tokens that still fit (the last one need not be fed back)
		if ctxLen <= 0 {
			return 1 << 30
		}
		return ctxLen - r.pos - len(r.pending)
	}
	if r.s.prompt.Think {
		if err := r.think(ctx, room); err != nil {
			return err
		}
		if r.ended {
			return nil
		}
	}
	var err error
	if r.cur, err = r.sp.Start(); err != nil {
		return err
	}
	r.lp = newLineParser(r.sp.Lexicon(), r.sp.Options(), r.onLine)
	if r.cur.Ended() && (r.opts.Constrained || r.cur.EndReason() == constraint.EndedAtGoal) {
		// StopAtGoal with the goal holding initially, or a dead end
		r.end(r.cur.EndReason().String())
		return nil
	}
	maxTok := r.opts.MaxTokens
	for {
		if maxTok > 0 && r.res.GeneratedTokens >= maxTok || room() <= 0 {
			if !r.opts.Constrained {
				r.lp.cutOff()
			}
			r.end("max_tokens")
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		var tok int32
		if r.opts.Constrained {
			t0 := time.Now()
			r.sp.Allowed(r.cur, &r.set)
			d := time.Since(t0)
			if r.set.Len() == 0 { // cannot happen on an open cursor; be safe
				r.end(constraint.DeadEnd.String())
				return nil
			}
			i := 0
			switch {
			case r.set.Len() > 1:
				if err := r.flush(ctx, r.set.IDs); err != nil {
					return err
				}
				if r.compact && len(r.logits) == r.set.Len() {
					// The flush's row: the allowed tokens' logits in
					// order, so a position in it is a position in IDs.
					i = r.sm.Pick(r.logits, nil)
				} else {
					i = r.sm.Pick(r.logits, r.set.IDs)
				}
			case !r.opts.Sampling.Greedy():
				// A forced token: the logits do not matter (they may be
				// masked to an earlier choice's candidates), but the
				// sampler draws as it always does, so that a seed gives
				// the same plan however the tokens are fed.
				r.sm.Skip()
			}
			tok = r.set.IDs[i]
			t1 := time.Now()
			next, err := r.sp.Advance(r.cur, r.set.Next[i])
			r.mask(d + time.Since(t1))
			if err != nil {
				return err
			}
			prev := r.cur
			r.cur = next
			if next.EndReason() != constraint.EndedByToken {
				r.token(tok, false)
			}
			if a, ok := next.Completed(); ok {
				r.plan = append(r.plan, a)
				r.res.StepsWritten++
				r.emitAction(prev.Len(), a)
			}
			if next.Ended() {
				r.end(next.EndReason().String())
				return nil
			}
		} else {
			tok = int32(r.sm.Pick(r.logits, nil))
			if r.idx.IsEnd(tok) || !r.idx.IsText(tok) {
				r.lp.flush()
				if !r.ended {
					r.end(constraint.EndedByToken.String())
				}
				return nil
			}
			r.token(tok, false)
			r.lp.write(r.idx.Text(tok))
			if r.ended {
				return nil
			}
		}
		if r.opts.Constrained {
			r.pending = append(r.pending, tok)
			if r.opts.FeedEachToken {
				if err := r.flush(ctx, nil); err != nil {
					return err
				}
			}
			continue
		}
		if err := r.feed(ctx, []int32{tok}, nil); err != nil {
			return err
		}
	}
}

// flush feeds the pending constrained tokens in one model call; cands are
// the tokens allowed after them, whose logits the run reads next (nil:
// all).
func (r *run) flush(ctx context.Context, cands []int32) error {
	if len(r.pending) == 0 {
		return nil
	}
	err := r.feed(ctx, r.pending, cands)
	r.pending = r.pending[:0]
	return err
}

// think lets the model think freely until it closes its think block (or the
// budget forces it closed).
func (r *run) think(ctx context.Context, room func() int) error {
	limit := r.opts.MaxThinkTokens
	if limit == 0 {
		limit = DefaultMaxThinkTokens
	}
	var text strings.Builder
	for !strings.Contains(text.String(), "</think>") {
		if err := ctx.Err(); err != nil {
			return err
		}
		if r.res.ThinkingTokens >= limit || room() <= 8 {
			close, err := r.lm.Tokenize("\n</think>\n\n", true)
			if err != nil {
				return err
			}
			text.WriteString("\n</think>\n\n")
			r.res.Thinking = text.String()
			return r.feed(ctx, close, nil)
		}
		tok := int32(r.sm.Pick(r.logits, nil))
		if r.idx.IsEnd(tok) || (!r.idx.IsText(tok) && !bytes.Equal(r.idx.Text(tok), []byte("</think>"))) {
			r.res.Thinking = text.String()
			r.end(constraint.EndedByToken.String())
			return nil
		}
		text.Write(r.idx.Text(tok))
		r.res.ThinkingTokens++
		r.emit(Event{Kind: EventToken, Token: tok, Text: string(r.idx.Text(tok)), Thinking: true})
		if err := r.feed(ctx, []int32{tok}, nil); err != nil {
			return err
		}
	}
	r.res.Thinking = text.String()
	return nil
}

func (r *run) token(tok int32, thinking bool) {
	r.res.GeneratedTokens++
	r.res.Tokens = append(r.res.Tokens, tok)
	t := r.idx.Text(tok)
	r.text.Write(t)
	r.emit(Event{Kind: EventToken, Token: tok, Text: string(t), Thinking: thinking})
}

func (r *run) mask(d time.Duration) {
	r.res.MaskSteps++
	s := d.Seconds()
	r.res.MaskSeconds += s
	r.res.MaskMaxSeconds = max(r.res.MaskMaxSeconds, s)
	b := len(MaskBuckets)
	for i, ub := range MaskBuckets {
		if d < ub {
			b = i
			break
		}
	}
	r.res.MaskHistogram[b]++
}

func (r *run) emitAction(step, a int) {
	r.emit(Event{Kind: EventAction, Step: step, Action: a, ActionText: r.sp.Lexicon().Text(a), Line: r.sp.Task().Actions[a].String()})
}

func (r *run) end(reason string) {
	r.ended = true
	r.res.EndReason = reason
	r.res.DeadEnd = reason == constraint.DeadEnd.String()
	r.emit(Event{Kind: EventEnd, Reason: reason})
}

// finish fills the plan's texts and re-validates it.
func (r *run) finish() {
	res := r.res
	res.Text = r.text.String()
	if res.EndReason == "" {
		res.EndReason = "interrupted"
	}
	task := r.sp.Task()
	if r.lp != nil && !r.opts.Constrained {
		r.plan = r.lp.plan
		res.StepsWritten = r.lp.steps
		res.FirstInvalid = r.lp.invalid
	}
	res.Plan = r.plan
	res.Lines = make([]string, len(r.plan))
	res.Texts = make([]string, len(r.plan))
	for i, a := range r.plan {
		res.Lines[i] = task.Actions[a].String()
		res.Texts[i] = r.sp.Lexicon().Text(a)
	}
	vr, err := Revalidate(task, res.Lines)
	if err != nil {
		res.ValidationError = err.Error()
		return
	}
	res.States = vr.States
	res.ValidationError = vr.Error
	res.Valid = vr.Valid && res.FirstInvalid == nil
	res.GoalReached = res.Valid && vr.GoalReached
	if res.Valid && !vr.GoalReached {
		res.GoalError = vr.GoalError
	}
}

// Revalidate checks printed plan lines ("(name a b)") the way `nesy
// validate` does: pddl.ParsePlan, then pddl.Task.Validate.
func Revalidate(task *pddl.Task, lines []string) (pddl.ValidationResult, error) {
	src := strings.Join(lines, "\n")
	steps, err := pddl.ParsePlan("plan", []byte(src))
	if err != nil {
		return pddl.ValidationResult{}, fmt.Errorf("decoder: the printed plan does not parse: %w", err)
	}
	return task.Validate(steps), nil
}
