// Package constraint is the constraint of constrained decoding and search:
// after a partial plan, which tokens may come next, and what the plan
// becomes after each. Package decoder (one token at a time) and package
// mcts (a tree of token prefixes) both follow it.
//
// A Space is the constraint of one task for one model. It joins three things
// built elsewhere: the model's vocabulary index (trie.Index, built once per
// model by NewIndex), the ground task with its action texts (a
// lexicon.Bound), and per state an action trie (trie.ActionTrie) over the
// texts of the applicable actions, each followed by the separator ("\n"),
// plus the end marker where ending is allowed. Tries are cached by state.
//
// A position in a plan is a Cursor: the state, the partial text of the action
// being written (a trie node), the actions so far, and whether and why the
// plan ended. Cursors are immutable values of a few words; states, tries
// and plan prefixes are shared between a cursor and the cursors derived from
// it, so a search tree can hold one per node. One decoding step is
//
//	sp.Allowed(cur, &set)             // set.IDs: allowed tokens, set.Next: their trie nodes
//	i := choose(logits, set.IDs)      // argmax, sample, or PUCB over set.IDs only
//	cur, err = sp.Advance(cur, set.Next[i])
//	if a, ok := cur.Completed(); ok { // an action boundary was crossed: a was applied
//	}
//	if cur.Ended() {                  // EOS / end marker / goal / max actions / dead end
//	}
//
// Data flows: the lexicon renders ground actions (pddl.Task.Actions) to text;
// Space.step turns the actions applicable in a state (lexicon.Bound.Applicable,
// one per distinct text, the lowest action id for duplicates) into a
// trie.Spec whose action index i stands for task action step.actions[i];
// Advance maps a completed trie action back to the task action and applies
// it with pddl.Task.Apply.
package constraint
