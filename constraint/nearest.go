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
	// The words of every fact's sentence, once: a trace is made for every
	// applicable action of every state.
	words := map[int][]string{}    // positive facts
	notWords := map[int][]string{} // negated facts, with their "not:" prefix
	sentence := func(f int, prefix string) []string {
		s := lex.FactText(task.Facts[f])
		if upper {
			s = strings.ToUpper(s)
		}
		return strings.Split(prefix+s, " ")
	}
	for _, c := range task.Goal {
		for _, f := range c.Pos {
			if _, ok := words[f]; !ok {
				words[f] = sentence(f, "")
			}
		}
		for _, f := range c.Neg {
			if _, ok := notWords[f]; !ok {
				notWords[f] = sentence(f, "not: ")
			}
		}
	}
	// left appends the words of c's facts not reached in s to dst.
	left := func(dst [][]string, c pddl.Conj, s pddl.State) [][]string {
		for _, f := range c.Pos {
			if !s.Has(f) {
				dst = append(dst, words[f])
			}
		}
		for _, f := range c.Neg {
			if s.Has(f) {
				dst = append(dst, notWords[f])
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
		best, nearest := -1, []int(nil)
		for i, c := range task.Goal {
			switch n := count(c, s); {
			case best < 0 || n < best:
				best, nearest = n, append(nearest[:0], i)
			case n == best:
				nearest = append(nearest, i)
			}
		}
		if best == 0 {
			return "left: none"
		}
		merged := left(nil, task.Goal[nearest[0]], s)
		if len(nearest) > 1 {
			merged = mergeWords(merged, nearest[1:], func(i int, dst [][]string) [][]string { return left(dst, task.Goal[i], s) })
		}
		var b strings.Builder
		b.WriteString("left: ")
		for i, fact := range merged {
			if i > 0 {
				b.WriteString("; ")
			}
			b.WriteString(strings.Join(fact, " "))
		}
		return b.String()
	}
}

// mergeWords merges the facts left of the disjuncts others (leftOf
// appends them) into first's, word by word, a word any of them disagrees
// on becoming TraceWildcard; first itself when any of them differs in
// shape (another number of facts, or of words in a fact). first's word
// slices are never written: a fact with a wildcard is a new slice.
func mergeWords(first [][]string, others []int, leftOf func(int, [][]string) [][]string) [][]string {
	var wild [][]bool // wild[j][k]: word k of fact j differs somewhere
	var buf [][]string
	for _, i := range others {
		buf = leftOf(i, buf[:0])
		if len(buf) != len(first) {
			return first
		}
		for j, fact := range buf {
			if len(fact) != len(first[j]) {
				return first
			}
			for k, w := range fact {
				if w == first[j][k] {
					continue
				}
				if wild == nil {
					wild = make([][]bool, len(first))
				}
				if wild[j] == nil {
					wild[j] = make([]bool, len(first[j]))
				}
				wild[j][k] = true
			}
		}
	}
	if wild == nil {
		return first
	}
	out := make([][]string, len(first))
	for j, fact := range first {
		if wild[j] == nil {
			out[j] = fact
			continue
		}
		out[j] = make([]string, len(fact))
		for k, w := range fact {
			if wild[j][k] {
				w = TraceWildcard
			}
			out[j][k] = w
		}
	}
	return out
}
