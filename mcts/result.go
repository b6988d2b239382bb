package mcts

import (
	"errors"
	"github.com/nesy-dev/nesy/constraint"
	"math"
	"time"

	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl"
)

// result builds the Result: the solution, else the best prefix, re-validated
// against the task.
func (s *searcher) result(stop string) *Result {
	res := &Result{Stop: stop}
	var cur constraint.Cursor
	var toks []int32
	switch {
	case s.solution != nil:
		cur, toks = s.solution.cur, s.solution.toks
	case s.bestOpen != nil:
		cur, toks = s.bestOpen.cur, pathTokens(s.bestOpen)
	}
	if toks != nil || cur.Len() > 0 {
		res.Plan = cur.Plan()
		// A terminal's last token may be an end token or text past the
		// plan: keep only what spells the plan's actions.
		res.Tokens = s.planTokens(toks, len(res.Plan))
	}
	steps := make([]pddl.PlanStep, len(res.Plan))
	for i, a := range res.Plan {
		act := &s.task.Actions[a]
		steps[i] = pddl.PlanStep{Name: act.Name, Args: act.Args}
		res.Lines = append(res.Lines, act.String())
		res.Texts = append(res.Texts, s.sp.ActionText(a))
	}
	res.Validation = s.task.Validate(steps)
	res.Valid, res.GoalReached = res.Validation.Valid, res.Validation.GoalReached
	if s.calls > 0 {
		res.Stats = s.stats
		res.Stats.BatchOccupancy = float64(s.leaves) / float64(s.calls*s.opts.Batch)
	} else {
		res.Stats = s.stats
	}
	res.Stats.Elapsed = time.Since(s.start)
	return res
}

// planTokens cuts toks after the token that completes the n-th action.
func (s *searcher) planTokens(toks []int32, n int) []int32 {
	if n == 0 {
		return nil
	}
	sep := s.sp.Options().Separator
	seen, text := 0, []byte(nil)
	for i, t := range toks {
		if s.idx.IsEnd(t) || !s.idx.IsText(t) {
			return toks[:i]
		}
		text = append(text, s.idx.Text(t)...)
		for len(text) >= len(sep) {
			j := indexOf(text, sep)
			if j < 0 {
				break
			}
			seen++
			text = text[j+len(sep):]
			if seen == n {
				return toks[:i+1]
			}
		}
	}
	return toks
}

func indexOf(b []byte, sep string) int {
	for i := 0; i+len(sep) <= len(b); i++ {
		if string(b[i:i+len(sep)]) == sep {
			return i
		}
	}
	return -1
}

// rollout is one leaf's rollout in progress.
type rollout struct {
	i      int
	toks   []int32
	cur    constraint.Cursor
	seq    models.SeqID
	logits []float32
	start  int
}

// stops reports whether the rollout ends at cur: the plan ended, or at an
// action boundary the goal holds or limit actions were taken.
func (r *rollout) stops(cur constraint.Cursor, limit int) bool {
	return cur.Ended() || (cur.AtBoundary() && (cur.GoalReached() || cur.Len()-r.start >= limit))
}

// rollouts continues each evaluated open leaf by constrained greedy decoding
// for up to Options.Rollout actions, all leaves together (one forward pass
// per chosen token for the batch, the tokens forced after it in the same
// pass), and returns the value of each leaf: R_G when the rollout reaches
// the goal, a loss at a dead end, else the value of where it stopped.
// Leaves without logits or that are not open keep their static value.
func (s *searcher) rollouts(leaves []*node, rows [][]float32) ([]float64, []bool, error) {
	values := make([]float64, len(leaves))
	losses := make([]bool, len(leaves))
	var active []*rollout
	defer func() {
		for _, r := range active {
			s.lm.Release(r.seq)
		}
	}()
	for i, leaf := range leaves {
		values[i] = leaf.static
		if rows[i] == nil || leaf.kind != open || !leaf.hasSeq {
			continue
		}
		seq, err := s.lm.Fork(leaf.seq, leaf.depth)
		if err != nil {
			continue // no slot: value the leaf statically
		}
		active = append(active, &rollout{i: i, cur: leaf.cur, seq: seq, logits: rows[i], start: leaf.cur.Len(), toks: pathTokens(leaf)})
	}
	var reqs []models.EvalRequest
	var stepping []*rollout
	for len(active) > 0 {
		reqs, stepping = reqs[:0], stepping[:0]
		keep := active[:0]
		for _, r := range active {
			s.sp.Allowed(r.cur, &s.set)
			done := len(s.set.IDs) == 0
			if !done {
				best := s.rolloutToken(r.logits)
				tok := s.set.IDs[best]
				cur, err := s.sp.Advance(r.cur, s.set.Next[best])
				if err != nil {
					done = true
				} else {
					r.cur = cur
					r.toks = append(r.toks, tok)
					run := []int32{tok}
					done = r.stops(cur, s.opts.Rollout)
					// Tokens the constraint forces (the rest of an
					// action's only spelling, a goal trace) need no
					// logits to be chosen: they go to the model with the
					// chosen one, in one request, and only the last
					// position's logits are read (as cgreedy feeds them).
					for !done && len(run) < maxChain {
						k, ok := s.forcedToken(r.cur)
						if !ok {
							break
						}
						cur, err := s.sp.Advance(r.cur, s.set.Next[k])
						if err != nil {
							break
						}
						r.cur = cur
						r.toks = append(r.toks, s.set.IDs[k])
						run = append(run, s.set.IDs[k])
						done = r.stops(cur, s.opts.Rollout)
					}
					if !done {
						reqs = append(reqs, models.EvalRequest{Seq: r.seq, Tokens: run, Candidates: s.candidateIDs(r.cur), CompactCandidates: true})
						stepping = append(stepping, r)
					}
				}
			}
			if done {
				if r.cur.AtBoundary() && r.cur.GoalReached() {
					s.found(r.cur, r.toks)
				}
				values[r.i], losses[r.i] = s.rolloutValue(r.cur)
				s.lm.Release(r.seq)
				continue
			}
			keep = append(keep, r)
		}
		active = keep
		if len(reqs) == 0 {
			break
		}
		if _, done := s.stopReason(); done {
			// A budget is spent, the context is done or a rollout found
			// the goal: the rollouts still running leave their leaves the
			// static value, and the search stops before its next selection.
			break
		}
		res, err := s.lm.Eval(s.ctx, reqs)
		if errors.Is(err, models.ErrCacheFull) {
			// The rollouts outgrew the KV cache (long rollouts of a
			// traced prior at batch 16): those still running leave their
			// leaves the static value, as when a budget is spent; the
			// deferred release frees their cells for the tree.
			break
		}
		if err != nil {
			return nil, nil, err
		}
		s.stats.ModelCalls++
		for k, r := range stepping {
			r.logits = lastRow(res[k])
			s.stats.EvaluatedTokens += int64(res[k].Positions)
		}
	}
	return values, losses, nil
}

// forcedToken computes s.set for c and says which of its tokens a rollout
// writes at c without the model: the only one allowed, or, inside an
// action whose text is already the only one possible (the rest of a unique
// action name, a goal trace), the longest allowed token (the text is the
// same whichever spelling of it is written; the longest is the one a
// word-level vocabulary trains on).
func (s *searcher) forcedToken(c constraint.Cursor) (int, bool) {
	s.sp.Allowed(c, &s.set)
	switch {
	case len(s.set.IDs) == 1:
		return 0, true
	case len(s.set.IDs) == 0 || c.AtBoundary() || c.Trie().NumConsistent(c.Node()) != 1:
		return 0, false
	}
	best, n := -1, 0
	for k, id := range s.set.IDs {
		if s.set.Next[k] < 0 || !s.idx.IsText(id) {
			continue
		}
		if l := len(s.idx.Text(id)); l > n {
			best, n = k, l
		}
	}
	return best, best >= 0
}

// rolloutToken picks the index in s.set.IDs of a rollout's next token: the
// most likely allowed token (the first among equals), or with
// Options.RolloutTemperature a sample from the allowed tokens' softmax of
// logits/T. logits is read by candLogit (s.set.IDs is the mask's order,
// see searcher.mask).
func (s *searcher) rolloutToken(logits []float32) int {
	ids := s.set.IDs
	logit := func(k int) float32 { return candLogit(logits, ids, k) }
	best := 0
	for k := range ids {
		if logit(k) > logit(best) {
			best = k
		}
	}
	t := s.opts.RolloutTemperature
	if t <= 0 || len(ids) == 1 {
		return best
	}
	top := float64(logit(best))
	s.weights = s.weights[:0]
	var sum float64
	for k := range ids {
		w := math.Exp((float64(logit(k)) - top) / t)
		sum += w
		s.weights = append(s.weights, w)
	}
	u := s.rng.Float64() * sum
	for k, w := range s.weights {
		if u < w {
			return k
		}
		u -= w
	}
	return len(ids) - 1 // rounding left u at the very end
}

// rolloutValue values the cursor a rollout stopped at.
func (s *searcher) rolloutValue(c constraint.Cursor) (float64, bool) {
	if c.AtBoundary() && c.GoalReached() {
		return s.opts.GoalReward, false
	}
	if c.DeadEnd() {
		return 0, true
	}
	v, ok := s.staticValue(c)
	if !ok || math.IsInf(v, 0) {
		return 0, true
	}
	s.vr.add(v)
	return v, false
}
