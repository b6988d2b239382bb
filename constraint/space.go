package constraint

import (
	"container/list"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/trie"
)

// EndPolicy says when a constrained plan may end.
type EndPolicy uint8

const (
	// EndAnyTime lets the plan end at any action boundary (the zero value):
	// the model decides when it is done.
	EndAnyTime EndPolicy = iota
	// EndAtGoal lets the plan end only at a boundary where the goal holds.
	EndAtGoal
)

// String returns "any" or "goal".
func (p EndPolicy) String() string {
	if p == EndAtGoal {
		return "goal"
	}
	return "any"
}

// ParseEndPolicy reads "any" or "goal" (the CLI's --end).
func ParseEndPolicy(s string) (EndPolicy, error) {
	switch s {
	case "", "any":
		return EndAnyTime, nil
	case "goal":
		return EndAtGoal, nil
	}
	return 0, fmt.Errorf("unknown end policy %q (want any or goal)", s)
}

// EndReason says why a plan ended.
type EndReason uint8

const (
	// NotEnded: the plan is still open.
	NotEnded EndReason = iota
	// EndedByToken: the model wrote an end token (EOS, end of turn).
	EndedByToken
	// EndedByMarker: the model wrote the textual end marker
	// (Options.End).
	EndedByMarker
	// EndedAtGoal: Options.StopAtGoal and the goal holds.
	EndedAtGoal
	// EndedAtMaxActions: the plan has Options.MaxActions actions.
	EndedAtMaxActions
	// DeadEnd: no action applies and the plan may not end here (a failure).
	DeadEnd
)

var endReasonNames = [...]string{"", "end_token", "end_marker", "goal", "max_actions", "dead_end"}

// String returns a short name: "" (not ended), "end_token", "end_marker",
// "goal", "max_actions" or "dead_end".
func (r EndReason) String() string {
	if int(r) < len(endReasonNames) {
		return endReasonNames[r]
	}
	return fmt.Sprintf("EndReason(%d)", r)
}

// ErrEnded is returned when a cursor that has ended is advanced.
var ErrEnded = errors.New("constraint: the plan has ended")

// ErrNotAllowed is returned when a token or text does not continue an
// applicable action (or end the plan where that is allowed).
var ErrNotAllowed = errors.New("constraint: not allowed by the constraint")

// Options configure a Space. The zero value is usable: actions end with
// "\n", plans end by an end token at any boundary, with no length limit.
type Options struct {
	// Separator ends every action; "" means "\n" (one action per line).
	Separator string
	// End is a textual end marker the model may write at a boundary where
	// ending is allowed (e.g. "done\n", or "\n" for an empty line), besides
	// the model's end tokens. "" means end tokens only.
	End string
	// EndPolicy says where the plan may end (zero: at any boundary).
	EndPolicy EndPolicy
	// StopAtGoal ends the plan as soon as an action makes the goal hold
	// (and at the start when it holds initially), without waiting for an
	// end token.
	StopAtGoal bool
	// MaxActions ends the plan once it has this many actions; 0 means no
	// limit.
	MaxActions int
	// CacheSize bounds the number of states whose action tries are kept;
	// 0 means trie.DefaultCacheSize.
	CacheSize int
	// NoRevisit leaves out, at every boundary, the actions that lead back
	// to a state the plan has already been in (its start state included),
	// so that a plan without search cannot loop. Where every applicable
	// action would return to a visited state, those whose successor the
	// plan has been in least often stay allowed (leaving none would end the
	// plan at a dead end it may not be in; leaving all would let a plan
	// that has built itself into a corner, such as a Blocksworld tower in
	// the wrong order, cycle there: the counts push it out).
	// The allowed set then depends on the plan, not only on the state; a
	// boundary costs one successor state per applicable action (computed
	// once per state and cached with it).
	NoRevisit bool
	// RevisitAll, with NoRevisit, allows every applicable action where
	// all of them lead back to visited states, whatever their counts: the
	// rule before the counts, kept for the DAgger rollouts of the shipped
	// prior's recipe (train.DAggerOptions.NoRevisit), which must make the
	// same data.
	RevisitAll bool
	// Trace, when not nil, writes after every action's text, on the same
	// line, TraceSep and Trace of the state the action leads to (e.g. the
	// goal's facts still to reach: GoalTrace): the constraint forces those
	// tokens once the action's text is complete (the trie has one way on
	// from there), so a prior reads what the transition model knows about
	// where its plan stands instead of tracking it through the actions. A
	// "" Trace writes nothing. It must not contain the Separator. A
	// boundary then costs one successor state per applicable action.
	Trace func(pddl.State) string
}

// TraceSep joins an action's text and its Trace.
const TraceSep = " => "

// GoalTrace returns a Trace that lists the facts of lex's goal not yet
// reached ("left: fact; fact", "left: none" at the goal), in the
// lexicon's fact sentences, capitalised when upper (as the prompt writes
// an upper-case goal); nil when the goal is not one conjunction.
func GoalTrace(lex *lexicon.Bound, upper bool) func(pddl.State) string {
	if len(lex.Task().Goal) != 1 {
		return nil
	}
	return NearestGoalTrace(lex, upper)
}

// trace returns what the model writes after an action's text that leads
// to next: TraceSep and next's Trace, or "" when that is empty.
func (sp *Space) trace(next pddl.State) string {
	if tr := sp.opts.Trace(next); tr != "" {
		return TraceSep + tr
	}
	return ""
}

// Space is the constraint of one task for one model: which tokens may come
// next after a partial plan, and what the plan becomes after each. It holds
// the model's vocabulary index, the task with its lexicon (action texts) and a
// cache of per-state action tries. The same Space serves greedy decoding and
// tree search; it is safe for concurrent use.
//
// The position in a plan is a Cursor, a small immutable value: Allowed gives
// its next tokens, Advance the cursor after one of them. Cursors are cheap to
// copy and share everything (states, tries, the plan's actions) with the
// cursors they came from.
type Space struct {
	idx    *trie.Index
	lex    *lexicon.Bound
	task   *pddl.Task
	opts   Options
	canEnd bool // the index has end tokens or there is an end marker
	steps  *stepCache
}

// NewIndex builds the vocabulary index of a model for constrained decoding:
// every text token by its decoded bytes, with the model's end tokens (EOS,
// end of turn) as the tokens that end a plan. It costs a fraction of a second
// for a 150k vocabulary; callers build it once per loaded model and share it.
func NewIndex(lm models.LM) (*trie.Index, error) {
	v := lm.Vocab()
	if v == nil {
		return nil, errors.New("constraint: model has no vocabulary")
	}
	idx, err := trie.NewIndex(v.Text, v.Special, trie.IndexOptions{EndTokens: v.EOS})
	if err != nil {
		return nil, fmt.Errorf("constraint: indexing the vocabulary: %w", err)
	}
	return idx, nil
}

// New returns the constraint space of the task lex is bound to, for the
// model whose vocabulary idx indexes.
func New(idx *trie.Index, lex *lexicon.Bound, opts Options) (*Space, error) {
	if idx == nil || lex == nil {
		return nil, errors.New("constraint: NewSpace needs an index and a bound lexicon")
	}
	if opts.Separator == "" {
		opts.Separator = trie.DefaultSeparator
	}
	if opts.MaxActions < 0 {
		return nil, fmt.Errorf("constraint: MaxActions %d is negative", opts.MaxActions)
	}
	if opts.EndPolicy > EndAtGoal {
		return nil, fmt.Errorf("constraint: unknown end policy %d", opts.EndPolicy)
	}
	return &Space{
		idx:    idx,
		lex:    lex,
		task:   lex.Task(),
		opts:   opts,
		canEnd: len(idx.EndTokens()) > 0 || opts.End != "",
		steps:  newStepCache(opts.CacheSize),
	}, nil
}

// Index returns the vocabulary index.
func (sp *Space) Index() *trie.Index { return sp.idx }

// Lexicon returns the bound lexicon (action texts).
func (sp *Space) Lexicon() *lexicon.Bound { return sp.lex }

// Task returns the task.
func (sp *Space) Task() *pddl.Task { return sp.task }

// Options returns the options with defaults filled in.
func (sp *Space) Options() Options { return sp.opts }

// step is everything about one state that the constraint needs, built once
// per state and shared by every cursor at it.
type step struct {
	key     string // state.Key()
	state   pddl.State
	at      *trie.ActionTrie
	actions []int    // trie action index -> task action id
	texts   []string // what the model writes for each of actions (traces included)
	goal    bool

	// NoRevisit: the successor state's key of each action, built once.
	succOnce sync.Once
	succ     []string
}

// Cursor is a position in a constrained plan: the current state, the partial
// text of the action being written (a node of the state's action trie), the
// actions so far, and whether the plan has ended. It is an immutable value;
// the zero Cursor is invalid (use Space.Start).
type Cursor struct {
	st        *step
	node      trie.Node
	plan      *planLink
	end       EndReason
	completed bool      // the Advance that made this cursor completed an action
	seen      *seenLink // NoRevisit: the states the plan has been in
}

// seenLink is a persistent list of the keys of the states a plan has been
// in, newest first, once per visit (NoRevisit only).
type seenLink struct {
	key  string
	prev *seenLink
}

// count returns how many times key is on the list.
func (l *seenLink) count(key string) int {
	n := 0
	for ; l != nil; l = l.prev {
		if l.key == key {
			n++
		}
	}
	return n
}

// planLink is a persistent list of a plan's actions, newest first, so that
// cursors share their common prefix.
type planLink struct {
	action int
	n      int // length of the plan ending here
	prev   *planLink
}

// Start returns the cursor at the task's initial state, with an empty plan.
func (sp *Space) Start() (Cursor, error) { return sp.StartAt(sp.task.Init) }

// StartAt returns a cursor at state s (treated as immutable), with an empty
// plan.
func (sp *Space) StartAt(s pddl.State) (Cursor, error) {
	st, err := sp.step(s)
	if err != nil {
		return Cursor{}, err
	}
	c := Cursor{st: st}
	if sp.opts.NoRevisit {
		c.seen = &seenLink{key: st.key}
		if c.st, err = sp.unvisited(st, c.seen); err != nil {
			return Cursor{}, err
		}
	}
	c.end = sp.boundaryEnd(c.st, 0)
	return c, nil
}

// boundaryEnd says whether a plan of n actions at st ends by itself.
func (sp *Space) boundaryEnd(st *step, n int) EndReason {
	switch {
	case sp.opts.StopAtGoal && st.goal:
		return EndedAtGoal
	case sp.opts.MaxActions > 0 && n >= sp.opts.MaxActions:
		return EndedAtMaxActions
	case len(st.actions) == 0 && !(sp.endAllowed(st) && sp.canEnd):
		return DeadEnd
	}
	return NotEnded
}

func (sp *Space) endAllowed(st *step) bool {
	return sp.opts.EndPolicy == EndAnyTime || st.goal
}

// step returns the cached step of state s, building it on a miss.
func (sp *Space) step(s pddl.State) (*step, error) {
	key := s.Key()
	if st, ok := sp.steps.get(key); ok {
		return st, nil
	}
	choices := sp.lex.Applicable(s)
	texts := make([]string, len(choices))
	ids := make([]int, len(choices))
	// The trace applies every action; with NoRevisit its successors' keys
	// are kept, so that unvisited does not apply them again.
	var succ []string
	if sp.opts.Trace != nil && sp.opts.NoRevisit {
		succ = make([]string, len(choices))
	}
	for i, ch := range choices {
		texts[i], ids[i] = ch.Text, ch.Action
		if sp.opts.Trace != nil {
			next := sp.task.Apply(s, ch.Action)
			texts[i] += sp.trace(next)
			if succ != nil {
				succ[i] = next.Key()
			}
		}
	}
	goal := sp.task.GoalReached(s)
	st := &step{key: key, state: s, actions: ids, texts: texts, goal: goal}
	if succ != nil {
		st.succOnce.Do(func() { st.succ = succ })
	}
	if err := sp.buildTrie(st, texts); err != nil {
		return nil, err
	}
	return sp.steps.put(key, st), nil
}

// buildTrie builds st's action trie over texts (st.actions' texts).
func (sp *Space) buildTrie(st *step, texts []string) error {
	at, err := trie.NewActionTrie(trie.Spec{
		Actions:    texts,
		Separator:  sp.opts.Separator,
		EndAllowed: sp.endAllowed(st),
		End:        sp.opts.End,
	})
	if err != nil {
		return fmt.Errorf("constraint: action trie: %w", err)
	}
	st.at = at
	return nil
}

// unvisited returns st restricted to the actions whose successor is on
// seen least often (not at all where some action leads somewhere new): st
// itself when that is every action, otherwise a step of the same state
// over those (cached by state and left-out actions).
func (sp *Space) unvisited(st *step, seen *seenLink) (*step, error) {
	st.succOnce.Do(func() {
		st.succ = make([]string, len(st.actions))
		for i, a := range st.actions {
			st.succ[i] = sp.task.Apply(st.state, a).Key()
		}
	})
	counts := make([]int, len(st.succ))
	least := -1
	for i, k := range st.succ {
		counts[i] = seen.count(k)
		if least < 0 || counts[i] < least {
			least = counts[i]
		}
	}
	if sp.opts.RevisitAll && least > 0 {
		return st, nil
	}
	var keep []int
	var key strings.Builder
	for i := range st.succ {
		if counts[i] > least {
			if key.Len() == 0 {
				key.WriteString(st.key)
				key.WriteString("\x00norevisit")
			}
			fmt.Fprintf(&key, " %d", i)
			continue
		}
		keep = append(keep, i)
	}
	if key.Len() == 0 || len(keep) == 0 {
		return st, nil
	}
	if f, ok := sp.steps.get(key.String()); ok {
		return f, nil
	}
	f := &step{key: st.key, state: st.state, goal: st.goal, actions: make([]int, len(keep)), texts: make([]string, len(keep))}
	for j, i := range keep {
		f.actions[j], f.texts[j] = st.actions[i], st.texts[i]
	}
	if err := sp.buildTrie(f, f.texts); err != nil {
		return nil, err
	}
	return sp.steps.put(key.String(), f), nil
}

// Allowed computes into set the tokens that may follow c: those that
// continue an applicable action's text (plus separator), and at a boundary
// where ending is allowed the end tokens and the end marker's first tokens.
// set.Next[i] is what to pass to Advance after set.IDs[i]. The set is empty
// when c has ended (including at a dead end). It allocates nothing once set's
// buffers have grown; its cost does not depend on the vocabulary size.
func (sp *Space) Allowed(c Cursor, set *trie.Set) {
	if c.st == nil || c.end != NotEnded {
		sp.idx.Allowed(emptyTrie, trie.NoNode, set)
		return
	}
	sp.idx.Allowed(c.st.at, c.node, set)
}

// emptyTrie gives Allowed an empty set for ended cursors.
var emptyTrie, _ = trie.NewActionTrie(trie.Spec{})

// Advance returns the cursor after a token whose next node is next (an
// element of Set.Next from Allowed(c, ...)). When the token completes an
// action the action is applied: the new cursor is at the successor state's
// Root, with the action appended to its plan and Completed reporting it,
// and ends by itself if StopAtGoal, MaxActions or a dead end says so. An end
// token (next == trie.EndToken) or the end marker ends the plan. Advancing an
// ended cursor returns ErrEnded; a node that is not a continuation returns
// ErrNotAllowed.
func (sp *Space) Advance(c Cursor, next trie.Node) (Cursor, error) {
	if c.st == nil {
		return c, errors.New("constraint: zero Cursor (use Space.Start)")
	}
	if c.end != NotEnded {
		return c, ErrEnded
	}
	at := c.st.at
	if next == trie.EndToken {
		if c.node != trie.Root || !at.EndAllowed() || len(sp.idx.EndTokens()) == 0 {
			return c, ErrNotAllowed
		}
		c.end, c.completed = EndedByToken, false
		return c, nil
	}
	if next < 0 || next >= trie.Node(at.Nodes()) {
		return c, ErrNotAllowed
	}
	if i, ok := at.Completed(next); ok {
		return sp.apply(c, c.st.actions[i])
	}
	c.completed = false
	if at.IsEnd(next) {
		c.node, c.end = next, EndedByMarker
		return c, nil
	}
	c.node = next
	return c, nil
}

// apply returns the cursor after action a (applicable in c's state).
func (sp *Space) apply(c Cursor, a int) (Cursor, error) {
	st, err := sp.step(sp.task.Apply(c.st.state, a))
	if err != nil {
		return c, err
	}
	n := 1
	if c.plan != nil {
		n = c.plan.n + 1
	}
	var seen *seenLink
	if sp.opts.NoRevisit {
		seen = &seenLink{key: st.key, prev: c.seen}
		if st, err = sp.unvisited(st, seen); err != nil {
			return c, err
		}
	}
	return Cursor{
		st:        st,
		node:      trie.Root,
		plan:      &planLink{action: a, n: n, prev: c.plan},
		end:       sp.boundaryEnd(st, n),
		completed: true,
		seen:      seen,
	}, nil
}

// AdvanceToken is Advance by token id: it finds where the token's text leads
// (or checks that an end token may end the plan here). It costs one trie
// step per byte of the token; Advance with the node from Allowed is cheaper.
func (sp *Space) AdvanceToken(c Cursor, tok int32) (Cursor, error) {
	if c.st == nil {
		return c, errors.New("constraint: zero Cursor (use Space.Start)")
	}
	if c.end != NotEnded {
		return c, ErrEnded
	}
	if sp.idx.IsEnd(tok) {
		return sp.Advance(c, trie.EndToken)
	}
	if !sp.idx.IsText(tok) {
		return c, fmt.Errorf("token %d is not text: %w", tok, ErrNotAllowed)
	}
	n := c.st.at.Walk(c.node, sp.idx.Text(tok))
	if n == trie.NoNode {
		return c, fmt.Errorf("token %d %q: %w", tok, sp.idx.Text(tok), ErrNotAllowed)
	}
	return sp.Advance(c, n)
}

// AdvanceText follows text byte by byte across any number of actions,
// applying each completed one, and stops early when the plan ends (by the
// end marker, StopAtGoal, MaxActions or a dead end). It returns the cursor
// reached and the number of bytes consumed; when the text leaves the
// constraint the error wraps ErrNotAllowed and the cursor is where it was
// before the offending byte. End tokens are not text: use Advance with
// trie.EndToken.
func (sp *Space) AdvanceText(c Cursor, text []byte) (Cursor, int, error) {
	if c.st == nil {
		return c, 0, errors.New("constraint: zero Cursor (use Space.Start)")
	}
	for i, b := range text {
		if c.end != NotEnded {
			return c, i, ErrEnded
		}
		n := c.st.at.Step(c.node, b)
		if n == trie.NoNode {
			return c, i, fmt.Errorf("byte %d (%q) after %q: %w", i, b, c.Partial(), ErrNotAllowed)
		}
		var err error
		if c, err = sp.Advance(c, n); err != nil {
			return c, i, err
		}
	}
	return c, len(text), nil
}

// Choices returns a copy of Allowed's result for c (ids and next nodes),
// for callers that keep the options of many cursors at once (a search
// tree's nodes).
func (sp *Space) Choices(c Cursor) ([]int32, []trie.Node) {
	var set trie.Set
	sp.Allowed(c, &set)
	return append([]int32(nil), set.IDs...), append([]trie.Node(nil), set.Next...)
}

// ActionText returns the lexicon text of action a (what the model writes).
func (sp *Space) ActionText(a int) string { return sp.lex.Text(a) }

// PlanLines returns the plan of c in PDDL plan syntax, one "(name a b)" per
// action, as `nesy validate` reads it.
func (sp *Space) PlanLines(c Cursor) []string {
	plan := c.Plan()
	out := make([]string, len(plan))
	for i, a := range plan {
		out[i] = sp.task.Actions[a].String()
	}
	return out
}

// State returns the cursor's state (the state after its plan). Do not
// modify it.
func (c Cursor) State() pddl.State { return c.st.state }

// Node returns the action-trie node of the partial action text (trie.Root at
// a boundary).
func (c Cursor) Node() trie.Node { return c.node }

// Trie returns the action trie of the cursor's state.
func (c Cursor) Trie() *trie.ActionTrie { return c.st.at }

// AtBoundary reports whether no action text has been started since the last
// completed action (the cursor is at its state's Root).
func (c Cursor) AtBoundary() bool { return c.node == trie.Root }

// Partial returns the text written of the action in progress.
func (c Cursor) Partial() string {
	if c.st == nil || c.node <= trie.Root {
		return ""
	}
	return string(c.st.at.Text(c.node, nil))
}

// Len returns the number of actions in the plan.
func (c Cursor) Len() int {
	if c.plan == nil {
		return 0
	}
	return c.plan.n
}

// Plan returns the plan's action ids, oldest first (a new slice).
func (c Cursor) Plan() []int {
	out := make([]int, c.Len())
	for l := c.plan; l != nil; l = l.prev {
		out[l.n-1] = l.action
	}
	return out
}

// LastAction returns the plan's last action, or -1 for an empty plan.
func (c Cursor) LastAction() int {
	if c.plan == nil {
		return -1
	}
	return c.plan.action
}

// Completed reports whether the Advance that produced c completed an action
// (an action boundary was crossed), and which.
func (c Cursor) Completed() (action int, ok bool) {
	if !c.completed {
		return -1, false
	}
	return c.plan.action, true
}

// GoalReached reports whether the goal holds in the cursor's state.
func (c Cursor) GoalReached() bool { return c.st != nil && c.st.goal }

// Ended reports whether the plan has ended (for any reason, dead end
// included).
func (c Cursor) Ended() bool { return c.end != NotEnded }

// EndReason says why the plan ended (NotEnded while it is open).
func (c Cursor) EndReason() EndReason { return c.end }

// DeadEnd reports whether the plan is stuck: no action applies and it may not
// end here.
func (c Cursor) DeadEnd() bool { return c.end == DeadEnd }

// TrieAction returns the action (its id in the task) of action i of c's
// trie (Trie().Action(i) is its text, which carries the Trace when the
// Space writes one, so it is not the lexicon's text of the action).
func (c Cursor) TrieAction(i int) int { return c.st.actions[i] }

// NumApplicable returns the number of distinct action texts applicable in
// the cursor's state.
func (c Cursor) NumApplicable() int { return len(c.st.actions) }

// stepCache is a least-recently-used cache of steps by state key. mu
// protects ll and m.
type stepCache struct {
	mu   sync.Mutex
	size int
	ll   *list.List // of *cacheEntry, most recent first
	m    map[string]*list.Element
}

type cacheEntry struct {
	key string
	st  *step
}

func newStepCache(size int) *stepCache {
	if size <= 0 {
		size = trie.DefaultCacheSize
	}
	return &stepCache{size: size, ll: list.New(), m: make(map[string]*list.Element)}
}

func (c *stepCache) get(key string) (*step, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*cacheEntry).st, true
	}
	return nil, false
}

// put stores st unless another goroutine stored the key first; it returns
// the stored step.
func (c *stepCache) put(key string, st *step) *step {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*cacheEntry).st
	}
	c.m[key] = c.ll.PushFront(&cacheEntry{key, st})
	for c.ll.Len() > c.size {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.m, last.Value.(*cacheEntry).key)
	}
	return st
}
