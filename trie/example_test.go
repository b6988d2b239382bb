package trie_test

import (
	"fmt"

	"github.com/nesy-dev/nesy/trie"
)

// A step of constrained decoding with a toy vocabulary: which tokens may
// follow "go to c", where each leads, and when an action is complete.
func Example() {
	text := [][]byte{[]byte("go"), []byte(" to"), []byte(" c"), []byte("ab"), []byte("abinet 1"), []byte("abinet 1\n"),
		[]byte("ounter"), []byte("\n"), []byte("<eos>")}
	special := []bool{false, false, false, false, false, false, false, false, true}
	idx, err := trie.NewIndex(text, special, trie.IndexOptions{EndTokens: []int32{8}})
	if err != nil {
		panic(err)
	}
	at, err := trie.NewActionTrie(trie.Spec{Actions: []string{"go to cabinet 1", "go to counter"}, EndAllowed: true})
	if err != nil {
		panic(err)
	}
	var set trie.Set
	node := idx.AllowedAfter(at, []byte("go to c"), &set)
	fmt.Println("after", fmt.Sprintf("%q", at.Text(node, nil)), "actions still possible:", at.NumConsistent(node))
	for i, id := range set.IDs {
		next := set.Next[i]
		a, done := at.Completed(next)
		fmt.Printf("%q completes=%v action=%d\n", text[id], done, a)
	}
	idx.Allowed(at, trie.Root, &set)
	fmt.Println("at the root:", len(set.IDs), "tokens; end token allowed:", set.Has(8))
	// Output:
	// after "go to c" actions still possible: 2
	// "ab" completes=false action=-1
	// "abinet 1" completes=false action=-1
	// "abinet 1\n" completes=true action=0
	// "ounter" completes=false action=-1
	// at the root: 2 tokens; end token allowed: true
}
