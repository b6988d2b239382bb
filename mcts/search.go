package mcts

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/nesy-dev/nesy/constraint"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/pddl/heuristic"
	"github.com/nesy-dev/nesy/trie"
)

// Stop reasons (Result.Stop).
const (
	StopGoal        = "goal"        // a plan reached the goal (and Exhaust was not set)
	StopTime        = "time"        // Options.Time passed
	StopSimulations = "simulations" // Options.Simulations were run
	StopTokens      = "tokens"      // Options.Tokens were evaluated
	StopExhausted   = "exhausted"   // every node within reach was searched
	StopCanceled    = "canceled"    // the context was cancelled or its deadline passed
	StopMemory      = "memory"      // Options.MaxNodes were created
)

// Result is the outcome of a search.
type Result struct {
	// Plan is the best plan found, as task action ids: the first (or, with
	// Exhaust, the shortest) plan that reaches the goal, else the prefix
	// with the best value. It may be empty.
	Plan []int
	// Lines is Plan in PDDL plan syntax, "(name a b)", one per action, as
	// `nesy validate` reads it; Texts is Plan in the lexicon's words.
	Lines, Texts []string
	// Tokens are the model tokens that spell Plan (one action per line).
	Tokens []int32
	// Validation is Plan re-validated against the task from its initial
	// state; Valid and GoalReached repeat its verdict.
	Validation  pddl.ValidationResult
	Valid       bool
	GoalReached bool
	// Stop says why the search ended (StopGoal, StopTime, ...).
	Stop  string
	Stats Stats
}

// Stats count a search's work.
type Stats struct {
	// Simulations is the number of leaves selected, evaluated and backed up.
	Simulations int `json:"simulations"`
	// Expanded is the number of nodes evaluated by the model (the root
	// included); Nodes the number created; Terminals those created as
	// terminal (goal, end, dead end, loop, duplicate, invalid); Widened the
	// nodes that got children beyond Width after the first ones were
	// exhausted.
	Expanded  int `json:"expanded"`
	Nodes     int `json:"nodes"`
	Terminals int `json:"terminals"`
	Widened   int `json:"widened"`
	// Collisions counts selection walks that ended at a node with nothing
	// left to select in the current batch (its live children all pending or
	// blocked) and restarted from the root.
	Collisions int `json:"collisions"`
	// PromptTokens is the prompt's length; EvaluatedTokens every position
	// the search's forward passes computed (prompt, tree tokens,
	// recomputation after evictions, rollouts, passes lost to a full
	// cache); RecomputedTokens the part recomputed because a sequence had
	// been evicted or a pass was lost; ModelCalls the Eval calls made (each
	// one or more forward passes of the merged batch).
	PromptTokens     int64 `json:"prompt_tokens"`
	EvaluatedTokens  int64 `json:"evaluated_tokens"`
	RecomputedTokens int64 `json:"recomputed_tokens"`
	ModelCalls       int64 `json:"model_calls"`
	// Forks and Evictions count sequences forked, and evicted for lack of
	// sequence slots or cache cells.
	Forks     int `json:"forks"`
	Evictions int `json:"evictions"`
	// MaxDepth is the deepest node in tokens below the root; MaxActions the
	// longest plan prefix in the tree.
	MaxDepth   int `json:"max_depth"`
	MaxActions int `json:"max_actions"`
	// BatchOccupancy is the mean number of leaves per model call over
	// Options.Batch (1 = every call full).
	BatchOccupancy float64 `json:"batch_occupancy"`
	// HeuristicEvals counts heuristic evaluations (cached by state);
	// MaskHits and MaskMisses the allowed-token cache.
	HeuristicEvals int `json:"heuristic_evals"`
	MaskHits       int `json:"mask_hits"`
	MaskMisses     int `json:"mask_misses"`
	// FirstGoal is when the first plan reaching the goal was found (0 when
	// none); Elapsed the whole search. JSON gives nanoseconds.
	FirstGoal time.Duration `json:"first_goal_ns"`
	Elapsed   time.Duration `json:"elapsed_ns"`
}

// searcher is one search's state. It is used by one goroutine.
type searcher struct {
	ctx  context.Context
	lm   models.LM
	sp   *constraint.Space
	task *pddl.Task
	idx  *trie.Index
	opts Options
	heur heuristic.Heuristic
	rng  *rand.Rand

	root   *node
	vr     valueRange
	masks  map[maskKey]*mask
	seen   map[maskKey]int // shortest plan length reaching each (state, partial)
	hcache map[string]float64
	// ff gives helpful actions (nil when Options.Helpful is off); hcache2
	// caches them by state.
	ff      *heuristic.FF
	hcache2 map[string]map[int]bool
	actBuf  []int
	set     trie.Set
	weights []float64 // rolloutToken's sampling weights
	idxBuf  []int32
	holders []*node // nodes holding a sequence (root first, pinned)
	tick    int64
	batch   int // number of the current batch (see node.blocked)
	ctxLen  int
	maxActs int

	solution  *found // best plan reaching the goal
	bestOpen  *node  // best-valued boundary node without the goal
	bestValue float64
	start     time.Time
	// ids numbers nodes for OnTree; lastTree is when it was last called.
	ids      int32
	lastTree time.Time
	leaves   int // leaves evaluated in model calls (for occupancy)
	calls    int // model calls for leaves
	stats    Stats
}

// Search runs the tree search for the task of sp on the model lm, after the
// prompt (the planning prompt's tokens, e.g. decoder.BuildPrompt tokenized;
// it must not be empty). It returns the best plan found, re-validated
// against the task, with statistics. A budget running out is not an error;
// a cancelled context returns the result so far with the context's error.
func Search(ctx context.Context, lm models.LM, sp *constraint.Space, prompt []int32, opts Options) (*Result, error) {
	return searchTree(ctx, lm, sp, prompt, opts, nil)
}

// searchTree is Search with a hook that sees the tree before it is released
// (for tests).
func searchTree(ctx context.Context, lm models.LM, sp *constraint.Space, prompt []int32, opts Options, hook func(*searcher)) (*Result, error) {
	if lm == nil || sp == nil {
		return nil, errors.New("mcts: Search needs a model and a Space")
	}
	if len(prompt) == 0 {
		return nil, errors.New("mcts: empty prompt")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	heur := o.Evaluator
	if heur == nil {
		if heur, err = heuristic.New(o.Heuristic, sp.Task()); err != nil {
			return nil, fmt.Errorf("mcts: heuristic: %w", err)
		}
	}
	s := &searcher{
		ctx: ctx, lm: lm, sp: sp, task: sp.Task(), idx: sp.Index(), opts: o, heur: heur,
		rng:       rand.New(rand.NewPCG(o.Seed, 0x6d637473)),
		vr:        newRange(),
		masks:     make(map[maskKey]*mask),
		seen:      make(map[maskKey]int),
		hcache:    make(map[string]float64),
		ctxLen:    lm.Info().ContextLength,
		maxActs:   o.MaxActions,
		bestValue: math.Inf(-1),
		start:     time.Now(),
	}
	if o.Helpful > 0 {
		ff, ok := heur.(*heuristic.FF)
		if !ok {
			h, err := heuristic.New("ff", sp.Task())
			if err != nil {
				return nil, fmt.Errorf("mcts: helpful actions: %w", err)
			}
			ff = h.(*heuristic.FF)
		}
		s.ff = ff
		s.hcache2 = make(map[string]map[int]bool)
	}
	if m := sp.Options().MaxActions; m > 0 && m < s.maxActs {
		s.maxActs = m
	}
	defer s.releaseAll()
	stop, err := s.run(prompt)
	if s.opts.OnTree != nil && s.root != nil {
		s.observe(true)
	}
	if hook != nil {
		hook(s)
	}
	res := s.result(stop)
	return res, err
}

// run evaluates the prompt and iterates select / evaluate / back up until a
// stop condition holds. It returns the stop reason, and an error for a
// cancelled context or a model failure.
func (s *searcher) run(prompt []int32) (string, error) {
	if len(prompt) >= s.ctxLen {
		return "", fmt.Errorf("mcts: %w", &models.PromptTooLongError{Tokens: len(prompt), ContextLength: s.ctxLen})
	}
	cur, err := s.sp.Start()
	if err != nil {
		return "", fmt.Errorf("mcts: %w", err)
	}
	s.root = &node{cur: cur, depth: len(prompt), best: math.Inf(-1), rollout: math.Inf(-1)}
	s.root.boundary = s.root
	s.classify(s.root)
	s.stats.Nodes++
	s.stats.PromptTokens = int64(len(prompt))
	if s.root.kind != open {
		s.stats.Terminals++
		if s.root.kind == goal {
			return StopGoal, nil
		}
		return StopExhausted, nil
	}
	seq, err := s.lm.NewSequence()
	if err != nil {
		return "", fmt.Errorf("mcts: prompt sequence: %w", err)
	}
	s.hold(s.root, seq)
	res, err := s.lm.Eval(s.ctx, []models.EvalRequest{{Seq: seq, Tokens: prompt, Candidates: s.candidateIDs(s.root.cur), CompactCandidates: true}})
	if err != nil {
		if cerr := s.ctx.Err(); cerr != nil {
			return StopCanceled, cerr
		}
		return "", fmt.Errorf("mcts: evaluating the prompt: %w", err)
	}
	s.stats.ModelCalls++
	s.stats.EvaluatedTokens += int64(res[0].Positions)
	s.root.phase = expanded
	s.stats.Expanded++
	s.expand(s.root, lastRow(res[0]))
	if s.root.live == 0 {
		s.exhaust(s.root)
	}
	for {
		if s.opts.OnTree != nil && time.Since(s.lastTree) >= s.opts.TreeEvery {
			s.observe(false)
		}
		if r, done := s.stopReason(); done {
			if r == StopCanceled {
				return r, s.ctx.Err()
			}
			return r, nil
		}
		leaves := s.selectBatch()
		if len(leaves) == 0 {
			// Only when the root is exhausted: between batches no leaf is
			// pending, so a selection always ends at a fresh one.
			return StopExhausted, nil
		}
		rows, err := s.evaluate(leaves)
		if err != nil {
			if cerr := s.ctx.Err(); cerr != nil {
				return StopCanceled, cerr
			}
			return "", err
		}
		var values []float64
		var losses []bool
		if s.opts.Rollout > 0 {
			values, losses, err = s.rollouts(leaves, rows)
			if err != nil {
				if cerr := s.ctx.Err(); cerr != nil {
					return StopCanceled, cerr
				}
				return "", err
			}
		}
		for i, leaf := range leaves {
			if rows[i] == nil { // deferred: no sequence slot
				continue
			}
			leaf.phase = expanded
			s.stats.Expanded++
			s.stats.Simulations++
			if p := leaf.parent; p != nil {
				p.unevaluated--
				s.maybeReleaseParent(p)
			}
			s.expand(leaf, rows[i])
			if values != nil {
				s.backup(leaf, values[i], losses[i])
			} else {
				s.backup(leaf, leaf.static, false)
			}
			if leaf.live == 0 {
				s.exhaust(leaf)
			}
		}
	}
}

// stopReason checks the budget, the context and the goal: between batches,
// and between the rollout steps of a batch (so long rollouts of a slow
// model do not run past the budget).
func (s *searcher) stopReason() (string, bool) {
	switch {
	case s.solution != nil && !s.opts.Exhaust:
		return StopGoal, true
	case s.ctx.Err() != nil:
		return StopCanceled, true
	case s.root.exhausted:
		return StopExhausted, true
	case s.opts.Time > 0 && time.Since(s.start) >= s.opts.Time:
		return StopTime, true
	case s.opts.Simulations > 0 && s.stats.Simulations >= s.opts.Simulations:
		return StopSimulations, true
	case s.opts.Tokens > 0 && s.stats.EvaluatedTokens >= s.opts.Tokens:
		return StopTokens, true
	case s.opts.MaxNodes > 0 && s.stats.Nodes >= s.opts.MaxNodes:
		return StopMemory, true
	}
	return "", false
}

// selectBatch selects up to Batch distinct fresh leaves, each adding a
// virtual loss on its path so that the next selections look elsewhere
// (see selectLeaf for how pending leaves are skipped).
func (s *searcher) selectBatch() []*node {
	s.batch++
	var leaves []*node
	want := s.opts.Batch
	if s.opts.Simulations > 0 {
		want = min(want, s.opts.Simulations-s.stats.Simulations)
	}
	for len(leaves) < want {
		leaf := s.selectLeaf()
		if leaf == nil {
			break
		}
		leaf.phase, leaf.blocked = pending, s.batch
		s.addVirtualLoss(leaf, s.opts.VirtualLoss)
		leaves = append(leaves, leaf)
	}
	return leaves
}

// candidateIDs returns the tokens whose logits the search reads at c (the
// allowed ones; nil, all of them, without the constraint), so that the
// model may compute only those (models.EvalRequest.Candidates).
func (s *searcher) candidateIDs(c constraint.Cursor) []int32 {
	if s.opts.Unconstrained {
		return nil
	}
	return s.mask(c).ids
}

// candLogit is the logit of ids[i] in logits: a row of ids' logits in
// their order, as the search asks for them
// (models.EvalRequest.CompactCandidates, ids being the mask's), or a
// vocabulary row, read by token.
func candLogit(logits []float32, ids []int32, i int) float32 {
	if len(logits) == len(ids) {
		return logits[i]
	}
	return logits[ids[i]]
}

// lastRow returns the logits of a result's last position.
func lastRow(r models.EvalResult) []float32 {
	if len(r.Logits) == 0 {
		return nil
	}
	return r.Logits[len(r.Logits)-1]
}

// expand creates the children of a just-evaluated node from its logits.
func (s *searcher) expand(n *node, logits []float32) {
	cands := s.candidates(n, logits)
	take := min(len(cands), s.opts.Width)
	if !s.opts.Unconstrained {
		n.rest = cands[take:]
	}
	s.addChildren(n, cands[:take])
}

// addChildren creates children for cands (shuffled by the seed, so that
// ties in score are broken at random but reproducibly).
func (s *searcher) addChildren(n *node, cands []cand) {
	first := len(n.children)
	for _, c := range cands {
		ch := s.newChild(n, c)
		n.children = append(n.children, ch)
		s.stats.Nodes++
		if ch.kind != open {
			s.stats.Terminals++
			ch.exhausted = true
			s.terminal(ch)
			continue
		}
		n.live++
		n.unevaluated++
	}
	added := n.children[first:]
	s.rng.Shuffle(len(added), func(i, j int) { added[i], added[j] = added[j], added[i] })
}

// widen gives an exhausted node's parent its next Width allowed tokens; it
// reports whether any of them is live.
func (s *searcher) widen(n *node) bool {
	for n.live == 0 && len(n.rest) > 0 {
		take := min(len(n.rest), s.opts.Width)
		c := n.rest[:take]
		n.rest = n.rest[take:]
		s.stats.Widened++
		s.addChildren(n, c)
	}
	if s.opts.Backup == BackupMax && n.phase == expanded {
		s.refresh(n)
	}
	return n.live > 0
}

// terminal records a terminal node: a goal plan (the first or shortest),
// or a candidate for the best plan without the goal.
func (s *searcher) terminal(n *node) {
	switch n.kind {
	case goal:
		before := s.solution
		s.found(n.cur, pathTokens(n))
		if s.solution != before {
			s.solution.at = n
		}
	case terminal:
		if v, ok := s.planValue(n.cur); ok && v > s.bestValue {
			s.bestOpen, s.bestValue = n, v
		}
	}
}

// found is a plan that reaches the goal: where it ends and its tokens.
type found struct {
	cur  constraint.Cursor
	toks []int32
	at   *node // the tree node it ends at (nil for a rollout's plan)
}

// found records a plan reaching the goal if it is the first or shorter.
func (s *searcher) found(c constraint.Cursor, toks []int32) {
	if s.solution == nil {
		s.stats.FirstGoal = time.Since(s.start)
	}
	if s.solution == nil || c.Len() < s.solution.cur.Len() {
		s.solution = &found{cur: c, toks: toks}
	}
}

// pathTokens returns the tokens from the root to n.
func pathTokens(n *node) []int32 {
	var path []*node
	for x := n; x != nil && x.parent != nil; x = x.parent {
		path = append(path, x)
	}
	var toks []int32
	for i := len(path) - 1; i >= 0; i-- {
		toks = append(toks, path[i].toks...)
	}
	return toks
}

// candidates returns the allowed next tokens of n (constrained) or the top
// Width tokens of the full distribution (unconstrained), best prior first.
func (s *searcher) candidates(n *node, logits []float32) []cand {
	if s.opts.Unconstrained {
		return s.topTokens(logits)
	}
	m := s.mask(n.cur)
	out := make([]cand, len(m.ids))
	mx := math.Inf(-1)
	for i := range m.ids {
		mx = max(mx, float64(candLogit(logits, m.ids, i)))
	}
	sum := 0.0
	for i, id := range m.ids {
		p := math.Exp(float64(candLogit(logits, m.ids, i)) - mx)
		out[i] = cand{id: id, next: int32(m.next[i]), prior: p}
		sum += p
	}
	for i := range out {
		out[i].prior /= sum
	}
	if !s.opts.AllTokens {
		for i, j := range m.into {
			if int(j) != i {
				out[j].prior += out[i].prior
				out[i].prior = -1
			}
		}
		out = slices.DeleteFunc(out, func(c cand) bool { return c.prior < 0 })
	}
	slices.SortStableFunc(out, func(a, b cand) int {
		if c := cmp.Compare(b.prior, a.prior); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	return out
}

// topTokens returns the Width most likely tokens with their probabilities
// under the full softmax, best first.
func (s *searcher) topTokens(logits []float32) []cand {
	w := s.opts.Width
	mx := math.Inf(-1)
	for _, l := range logits {
		mx = max(mx, float64(l))
	}
	sum := 0.0
	top := make([]cand, 0, w+1)
	for id, l := range logits {
		sum += math.Exp(float64(l) - mx)
		if len(top) == w && float64(l) <= top[w-1].prior {
			continue
		}
		c := cand{id: int32(id), prior: float64(l)}
		i, _ := slices.BinarySearchFunc(top, c, func(a, b cand) int {
			if c := cmp.Compare(b.prior, a.prior); c != 0 {
				return c
			}
			return cmp.Compare(a.id, b.id)
		})
		top = slices.Insert(top, i, c)
		if len(top) > w {
			top = top[:w]
		}
	}
	for i := range top {
		top[i].prior = math.Exp(top[i].prior-mx) / sum
	}
	return top
}

// newChild creates the child of p by token c (followed by its forced
// chain) and classifies it.
func (s *searcher) newChild(p *node, c cand) *node {
	ch := &node{parent: p, prior: c.prior, best: math.Inf(-1), rollout: math.Inf(-1), toks: []int32{c.id}, id: s.nextID()}
	ch.depth = p.depth + 1
	ch.boundary = p.boundary
	step := freeOpen
	if s.opts.Unconstrained {
		ch.cur, step = s.advanceFree(p.cur, c.id)
	} else {
		var err error
		if ch.cur, err = s.sp.Advance(p.cur, trie.Node(c.next)); err != nil {
			step = freeInvalid
		}
	}
	switch step {
	case freeInvalid:
		ch.cur, ch.kind = p.cur, dead
		return ch
	case freeEnd:
		ch.kind = terminal
		if v, ok := s.planValue(ch.cur); ok {
			ch.static = v
		} else {
			ch.kind = dead
		}
		return ch
	}
	if ch.cur.AtBoundary() {
		ch.boundary = ch
	}
	s.classify(ch)
	for ch.kind == open && !s.opts.Unconstrained && !s.opts.NoCollapse && len(ch.toks) < maxChain {
		m := s.mask(ch.cur)
		k, ok := m.forced(s.opts.AllTokens)
		if !ok {
			break
		}
		cur, err := s.sp.Advance(ch.cur, m.next[k])
		if err != nil {
			break
		}
		ch.toks = append(ch.toks, m.ids[k])
		ch.cur = cur
		ch.depth++
		if cur.AtBoundary() {
			ch.boundary = ch
		}
		s.classify(ch)
	}
	s.stats.MaxDepth = max(s.stats.MaxDepth, ch.depth-s.root.depth)
	s.stats.MaxActions = max(s.stats.MaxActions, ch.cur.Len())
	return ch
}

// maxChain bounds a collapsed forced chain.
const maxChain = 64

// classify sets n's kind and static value from its cursor.
func (s *searcher) classify(n *node) {
	c := n.cur
	switch {
	case c.AtBoundary() && c.GoalReached() && c.EndReason() != constraint.DeadEnd:
		n.kind = goal
		n.static = s.opts.GoalReward
		return
	case c.Ended():
		switch c.EndReason() {
		case constraint.DeadEnd:
			n.kind = dead
		default:
			n.kind = terminal
		}
	case c.AtBoundary() && c.Len() >= s.maxActs:
		n.kind = terminal
	case n.depth >= s.ctxLen-1:
		n.kind = terminal
	case c.AtBoundary() && n.parent != nil && !s.opts.AllowLoops && s.loops(n):
		n.kind = dead
	case !s.opts.KeepDuplicates && s.duplicate(c):
		n.kind = dead
	case s.opts.Exhaust && s.solution != nil && c.Len()+1 >= s.solution.cur.Len():
		// Bound: this branch cannot give a shorter goal plan.
		n.kind = dead
	}
	switch n.kind {
	case dead:
		return
	case terminal:
		v, ok := s.planValue(c)
		if !ok {
			n.kind = dead
			return
		}
		n.static = v
		return
	}
	v, ok := s.staticValue(c)
	if !ok {
		n.kind = dead
		return
	}
	n.static = v
	s.vr.add(v)
	if c.AtBoundary() {
		if pv, ok := s.planValue(c); ok && pv > s.bestValue {
			s.bestOpen, s.bestValue = n, pv
		}
	}
}

// duplicate reports whether another node of the tree is at the same state
// and partial action text with a plan no longer than c's (and records c's
// position otherwise).
func (s *searcher) duplicate(c constraint.Cursor) bool {
	k := maskKey{c.Trie(), c.Node()}
	if n, ok := s.seen[k]; ok && n <= c.Len() {
		return true
	}
	s.seen[k] = c.Len()
	return false
}

// loops reports whether n's state (n at a boundary) already occurs at an
// earlier boundary on its path.
func (s *searcher) loops(n *node) bool {
	st := n.cur.State()
	for b := n.parent.boundary; b != nil; {
		if b.cur.State().Equal(st) {
			return true
		}
		if b.parent == nil {
			break
		}
		b = b.parent.boundary
	}
	return false
}

// freeStep is what a token does to a plan in the unconstrained search.
type freeStep uint8

const (
	freeOpen    freeStep = iota // the text continues the plan (the plan may have ended by itself)
	freeEnd                     // an end token at an action boundary the Space does not let end
	freeInvalid                 // the text leaves every applicable action, or ends inside one
)

// advanceFree follows token id from c without the constraint (unconstrained
// search). Text that completes an action reaching the goal stops there (the
// rest of the token is not plan text).
func (s *searcher) advanceFree(c constraint.Cursor, id int32) (constraint.Cursor, freeStep) {
	if s.idx.IsEnd(id) {
		if !c.AtBoundary() {
			return c, freeInvalid
		}
		if nc, err := s.sp.Advance(c, trie.EndToken); err == nil {
			return nc, freeOpen
		}
		return c, freeEnd
	}
	if !s.idx.IsText(id) {
		return c, freeInvalid
	}
	for _, b := range s.idx.Text(id) {
		if c.Ended() || (c.AtBoundary() && c.GoalReached()) {
			return c, freeOpen
		}
		n := c.Trie().Step(c.Node(), b)
		if n == trie.NoNode {
			return c, freeInvalid
		}
		var err error
		if c, err = s.sp.Advance(c, n); err != nil {
			return c, freeInvalid
		}
	}
	return c, freeOpen
}
