// Package trie answers the constrained decoder's question at every step:
// which tokens may come next so that the text stays a prefix of an
// applicable action?
//
// Two structures, one per lifetime:
//
//   - Index (once per model): a byte trie over the decoded text of every
//     token (models.Vocab's Text, special tokens left out). Tokens are sorted
//     by text so the tokens below a trie node are a contiguous run; it also
//     answers "which tokens start with this text" (WithPrefix) and "which
//     tokens are a prefix of this text" (PrefixesOf) without scanning the
//     vocabulary.
//   - ActionTrie (once per state, cached by the caller's state key in a
//     Cache): a byte trie over the step texts of a state: every applicable
//     action string followed by the separator ("\n" by default), plus an
//     end-of-plan marker where ending is allowed.
//
// Index.Allowed walks both tries together from the current node (the partial
// step text) and returns, into a reused Set, exactly the tokens v such that
// partial+text(v) is a prefix of some step text, with the node each leads
// to. Texts are compared as bytes, so non-canonical tokenizations, multi-byte
// UTF-8 characters split across tokens and SentencePiece byte-fallback
// tokens are all accepted. A token may end at the separator but not run
// past it: when Next is a Completed node the action is done, the caller
// applies it and starts the next step at the new state's Root. Two
// applicable actions spelled the same resolve to the lowest index.
//
// Per decoding step (one goroutine; Index and ActionTrie are shared and
// immutable):
//
//	idx, _ := trie.NewIndex(vocab.Text, vocab.Special, trie.IndexOptions{EndTokens: vocab.EOS})
//	cache := trie.NewCache[uint64](0)
//	var set trie.Set
//
//	at, _ := cache.Get(stateKey, func() (trie.Spec, error) {
//		return trie.Spec{Actions: applicable, EndAllowed: goalReached}, nil
//	})
//	node := trie.Root
//	for {
//		idx.Allowed(at, node, &set)        // set.IDs: tokens to keep, set.Next: where each leads
//		i := pickAmong(logits, set.IDs)    // mask / top-k / PUCB over set.IDs
//		node = set.Next[i]
//		if node == trie.EndToken || at.IsEnd(node) {
//			break // plan finished
//		}
//		if a, ok := at.Completed(node); ok {
//			state = apply(state, a)          // action a is done
//			at, _ = cache.Get(keyOf(state), ...)
//			node = trie.Root
//		}
//	}
//
// The package knows nothing of models or PDDL: token texts and action
// strings come in as bytes and strings.
package trie
