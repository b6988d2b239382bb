// Package mcts is the batched token-level Monte Carlo tree search over
// executable plan prefixes ("Neurosymbolic Embodied Agents", Albinhassan et
// al., 2026): the language model's next-token distribution, masked to the
// tokens that continue an applicable action, is the prior of a PUCB search
// whose leaves are valued by a planning heuristic.
//
// # Entry point
//
//	idx, _ := constraint.NewIndex(lm) // once per model (lm: a models.LM with SuggestedSequences slots)
//	sp, _ := constraint.New(idx, lex, constraint.Options{StopAtGoal: true})
//	p, _ := decoder.BuildPrompt(lm, lex, decoder.PromptOptions{})
//	res, err := mcts.Search(ctx, lm, sp, p.Tokens, mcts.Options{Time: 60 * time.Second})
//	// res.Plan (task action ids), res.Lines ("(name a b)"), res.GoalReached,
//	// res.Stats (simulations, evaluated tokens, model calls, ...)
//
// The constraint is decoder's: the same Space, Cursor, Allowed and Advance
// the greedy decoder uses. Options' zero value is the default search (see
// Options); Options.Unconstrained is the ablation without the constraint.
// Every returned plan is re-validated against the task (Result.Validation).
//
// # The tree
//
// A node is a position in the plan: the symbolic state and the partial text
// of the action being written (a constraint.Cursor), reached by one token (or a
// collapsed chain of forced tokens, see below) from its parent, plus, while
// it may still be forked, the model sequence holding the prompt and its path.
// Its children are its allowed next tokens, the Width (16) with the highest
// constrained prior p(v|s,u) (the softmax of the model's logits renormalised
// over the allowed tokens). A child's edge may complete an action: the
// Space applies it and the child is at the successor state.
//
// Selection descends by PUCB,
//
//	Q(n,v) + c * p(v|s,u) * sqrt(N(n)) / (1 + N(n,v)),
//
// with c = 2.5 (Options.C), or AlphaZero's growing
// c(N) = log((1 + N + base)/base) + c when Options.Base is set (the paper's
// base constant is 10; the constant form is the default). Options.Batch
// leaves (16) are selected per iteration, each adding a virtual loss on its
// path so the next selections look elsewhere, and evaluated in ONE
// models.LM.Eval call: each leaf is a fork of its parent's sequence plus its
// edge tokens. Their logits give the leaves' children and priors; their
// values are backed up.
//
// # Values
//
// A plan that reaches the goal is worth R_G (Options.GoalReward) and, by
// default, ends the search (Options.Exhaust keeps going and returns the
// shortest). A plan that ended otherwise (end token at a non-goal state, the
// action limit) is worth -h(s) - lambda*|plan|. An open node is valued
// without rollouts: at an action boundary by -h(s) - lambda*|plan|, inside an
// action by its best completion, -min_a h(s·a) - lambda*(|plan|+1) over the
// applicable actions a whose text still starts with the partial text
// (Options.NoLookahead turns this off). h is any heuristic of package
// heuristic by name (Options.Heuristic: "ff", "lmcut", "goalcount",
// "mix(0.5*ff+0.5*lmcut)", ...), cached per state. Options.Rollout adds
// short constrained-greedy rollouts.
//
// Options.Helpful adds a bonus for FF's helpful actions to the best
// completion (off by default).
//
// Normalisation: Q is measured in heuristic units relative to the root,
// Q = (V - V(root)) / ValueScale (NormalizeUnit, the default), with
// ValueScale 0.1: one unit of heuristic progress is worth 10 in Q and one
// action's length penalty (lambda = 0.1) is worth 1, while the exploration
// term c * p * sqrt(N) / (1 + N(n,v)) is at most c * p = 2.5 * p at a fresh
// node and reaches 10 only after N = (4/p)^2 visits. So the heuristic
// decides where it sees a difference, and the model's prior orders what it
// does not; both are on a scale where neither drowns the other for the
// first hundreds of visits of a node. NormalizeRange instead maps values
// into [0, 1] by the smallest and largest in the tree (MuZero), under which
// a one-unit heuristic difference is a small fraction of the prior term.
// A child not yet visited has Q = its own value (computed when it is
// created, no model call needed). The backup is the maximum
// (Options.Backup; "mean" is AlphaZero's), the right statistic for
// deterministic transitions, recomputed from the children: once a node is
// expanded its Q is the best of its live children's, not its own estimate,
// so an optimistic estimate (a partial action whose best completion looked
// good) does not outlive children that all fall short of it.
//
// Terminal children are resolved when created and never selected: a goal
// is recorded (and stops the search); a dead end, a text that leaves every
// action (unconstrained), an action that returns to a state already on the
// path (a loop; Options.AllowLoops keeps them), or a node at the same state
// and partial text as another node of the tree with a plan no longer (a
// duplicate, typically another tokenization of the same text or another
// order of independent actions; Options.KeepDuplicates keeps them) ends its
// branch. A node whose children are all exhausted is exhausted itself; in
// the constrained search it first gets its next Width allowed tokens, so
// every executable plan stays reachable. The search stops at the first goal
// plan, at the budget (Options.Time, Simulations, Tokens), when the tree is
// exhausted, or when the context ends.
//
// # Tokens and the engine
//
// Where only one token is allowed, the chain of forced tokens is one edge
// (one node, one evaluation request with all its tokens; Options.NoCollapse
// turns this off). An allowed token is folded into the longest allowed
// token that extends its text and leaves the same actions possible (its
// prior added to it; Options.AllTokens turns this off), so the tree does not
// split simulations over tokenizations of one action. Allowed-token sets and
// the dominance between them are cached per (state, partial text) across the
// tree.
//
// The engine has a fixed number of sequence slots (models.Options.Sequences;
// SuggestedSequences is a good number) and a finite KV cache. Nodes release their
// sequence once their children are all evaluated, and whole subtrees when
// exhausted; when the engine still reports models.ErrNoSequences or
// models.ErrCacheFull, the least recently used sequences (never the root's
// prompt) are evicted, and leaves below them recompute the lost tokens from
// the nearest ancestor that still holds a sequence. Recomputed tokens are
// counted as evaluated tokens (and in Stats.RecomputedTokens).
//
// # Determinism
//
// Children of equal score are ordered by a shuffle seeded by Options.Seed;
// everything else is deterministic, so the same model, seed and batch size
// give the same search (and plan), budgets in time aside.
package mcts
