package constraint

import (
	"strings"

	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/pddl"
)

// TraceWildcard stands, in a NearestGoalTrace, for a word the goal's
// nearest disjuncts disagree on (an object or a receptacle any of several
// would do for).
const TraceWildcard = "?"

// NearestGoalTrace returns a Trace for a goal of any number of disjuncts
// (the alternatives of an ALFWorld goal: any kettle, any cabinet): the
// facts still to reach of its nearest disjuncts, those with the fewest
// facts left. With one nearest disjunct the text is GoalTrace's (so for a
// goal of one conjunction the two traces are the same): "left: fact;
// fact", "left: none" at the goal. With several, their facts left are
// merged word by word where they have the same number of facts and each
// fact the same number of words, a word they disagree on written
// TraceWildcard ("left: KETTLE ? IS IN/ON CABINET ?; KETTLE ? IS CLEAN";
// after kettle 2 is cleaned "left: KETTLE 2 IS IN/ON CABINET ?"): the trace
// says what every nearest way to the goal still needs without choosing one
// of them. Where they differ in shape, the first of them in the goal's
// order is written. nil for a goal without disjuncts.
func NearestGoalTrace(lex *lexicon.Bound, upper bool) func(pddl.State) string {
	task := lex.Task()
	if len(task.Goal) == 0 {
		return nil
	}
	// Every goal fact's sentence and its words, once: a trace is made for
	// every applicable action of every state.
	pos, neg := map[int]*goalFact{}, map[int]*goalFact{}
	sentence := func(f int, prefix string) *goalFact {
		s := lex.FactText(task.Facts[f])
		if upper {
			s = strings.ToUpper(s)
		}
		s = prefix + s
		return &goalFact{text: s, words: strings.Split(s, " ")}
	}
	for _, c := range task.Goal {
		for _, f := range c.Pos {
			if pos[f] == nil {
				pos[f] = sentence(f, "")
			}
		}
		for _, f := range c.Neg {
			if neg[f] == nil {
				neg[f] = sentence(f, "not: ")
			}
		}
	}
	// left appends c's facts not reached in s to dst.
	left := func(dst []*goalFact, c pddl.Conj, s pddl.State) []*goalFact {
		for _, f := range c.Pos {
			if !s.Has(f) {
				dst = append(dst, pos[f])
			}
		}
		for _, f := range c.Neg {
			if s.Has(f) {
				dst = append(dst, neg[f])
			}
		}
		return dst
	}
	count := func(c pddl.Conj, s pddl.State) int {
		n := 0
		for _, f := range c.Pos {
			if !s.Has(f) {
				n++
			}
		}
		for _, f := range c.Neg {
			if s.Has(f) {
				n++
			}
		}
		return n
	}
	return func(s pddl.State) string {
		best, first, ties := -1, 0, 0
		for i, c := range task.Goal {
			switch n := count(c, s); {
			case best < 0 || n < best:
				best, first, ties = n, i, 1
			case n == best:
				ties++
			}
		}
		if best == 0 {
			return "left: none"
		}
		facts := left(nil, task.Goal[first], s)
		var wild [][]bool // wild[j][k]: the nearest disjuncts disagree on word k of fact j
		if ties > 1 {
			var others []pddl.Conj
			for _, c := range task.Goal[first+1:] {
				if count(c, s) == best {
					others = append(others, c)
				}
			}
			wild = wildWords(facts, others, func(dst []*goalFact, c pddl.Conj) []*goalFact { return left(dst, c, s) })
		}
		var b strings.Builder
		b.WriteString("left: ")
		for j, f := range facts {
			if j > 0 {
				b.WriteString("; ")
			}
			if wild == nil || wild[j] == nil {
				b.WriteString(f.text)
				continue
			}
			for k, w := range f.words {
				if k > 0 {
					b.WriteByte(' ')
				}
				if wild[j][k] {
					w = TraceWildcard
				}
				b.WriteString(w)
			}
		}
		return b.String()
	}
}

// goalFact is a goal fact's sentence in a trace, whole and in words.
type goalFact struct {
	text  string
	words []string
}

// wildWords compares the facts left of the disjuncts others (leftOf
// appends them) with first's, word by word: the result marks the words
// any of them disagrees on (nil where none does). It is nil too, so that
// first is written as it is, when any of them differs in shape (another
// number of facts, or of words in a fact).
func wildWords(first []*goalFact, others []pddl.Conj, leftOf func([]*goalFact, pddl.Conj) []*goalFact) [][]bool {
	var wild [][]bool
	var buf []*goalFact
	for _, c := range others {
		buf = leftOf(buf[:0], c)
		if len(buf) != len(first) {
			return nil
		}
		for j, f := range buf {
			if len(f.words) != len(first[j].words) {
				return nil
			}
			if f == first[j] {
				continue
			}
			for k, w := range f.words {
				if w == first[j].words[k] {
					continue
				}
				if wild == nil {
					wild = make([][]bool, len(first))
				}
				if wild[j] == nil {
					wild[j] = make([]bool, len(first[j].words))
				}
				wild[j][k] = true
			}
		}
	}
	return wild
}
