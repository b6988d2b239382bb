package heuristic

import (
	"slices"

	"github.com/nesy-dev/nesy/internal/graph"
	"github.com/nesy-dev/nesy/pddl"
)

// maxNegatedDisjuncts bounds the disjunctive normal form of one derived
// fact's negation (negateAxioms): above it the negation is relaxed to true.
const maxNegatedDisjuncts = 512

// negLit is a literal of a negated axiom's body: fact f, or its complement
// not(f) when comp.
type negLit struct {
	f    int32
	comp bool
}

// negatedAxiom says that not(head) holds once every literal of body does.
type negatedAxiom struct {
	head int32
	body []negLit
}

// negateAxioms derives, for the derived facts of t in used (those some
// condition uses negatively) and the derived facts their rules use
// positively, how their complement not(v) can be reached: v is false
// exactly when every rule v <- B_1, ..., v <- B_k has a false body, so
// not(v) <- (not B_1) and ... and (not B_k), where not B_i is the
// disjunction of B_i's literals negated; multiplied out into disjunctive
// normal form, each disjunct is one negated axiom. This is Fast Downward's
// approximate_negative_cycles: a derived fact on a cycle of positive
// dependencies (where the rule set is a least fixpoint that the negation
// does not capture), or whose negation has more than maxNegatedDisjuncts
// disjuncts, gets none and its negation stays relaxed to true. It returns
// the derived facts that get a complement (in dependency order) and their
// negated axioms; a fact with a complement but no negated axiom is true in
// every state (a rule with an empty body).
func negateAxioms(t *pddl.Task, used []int) (heads []int32, axioms []negatedAxiom) {
	rules := map[int32][]int32{} // head -> axiom indexes
	for i := range t.Axioms {
		h := int32(t.Axioms[i].Head)
		rules[h] = append(rules[h], int32(i))
	}
	// The derived facts needed negatively: used, and closed under the
	// positive derived literals of their rules' bodies.
	need := map[int32]bool{}
	var stack []int32
	push := func(f int) {
		if t.IsDerived(f) && !need[int32(f)] {
			need[int32(f)] = true
			stack = append(stack, int32(f))
		}
	}
	for _, f := range used {
		push(f)
	}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, ai := range rules[v] {
			for _, p := range t.Axioms[ai].Body.Pos {
				push(p)
			}
		}
	}
	if len(need) == 0 {
		return nil, nil
	}
	// Strongly connected components of the positive dependencies among
	// the needed facts: they come out dependencies first.
	succ := func(v int32) []int32 {
		var out []int32
		for _, ai := range rules[v] {
			for _, p := range t.Axioms[ai].Body.Pos {
				if need[int32(p)] {
					out = append(out, int32(p))
				}
			}
		}
		return out
	}
	order := make([]int32, 0, len(need))
	for v := range need {
		order = append(order, v)
	}
	slices.Sort(order) // deterministic
	comps := graph.SCC(order, succ)
	has := map[int32]bool{} // derived facts that get a complement
	for _, comp := range comps {
		if len(comp) > 1 {
			continue // a cycle: relaxed to true
		}
		v := comp[0]
		if slices.Contains(succ(v), v) {
			continue // a self-loop: a cycle too
		}
		dnf, ok := negateRules(t, rules[v], has)
		if !ok {
			continue
		}
		has[v] = true
		heads = append(heads, v)
		for _, d := range dnf {
			axioms = append(axioms, negatedAxiom{head: v, body: d})
		}
	}
	return heads, axioms
}

// negateRules returns the disjunctive normal form of the negation of the
// disjunction of the bodies of rules (axiom indexes of t), with the
// complements of derived facts only where has says they exist (a clause
// with a literal whose negation is relaxed to true is true and dropped).
// ok is false when it has more than maxNegatedDisjuncts disjuncts.
func negateRules(t *pddl.Task, rules []int32, has map[int32]bool) (dnf [][]negLit, ok bool) {
	dnf = [][]negLit{{}} // true
	for _, ai := range rules {
		body := t.Axioms[ai].Body
		var clause []negLit
		trivial := false
		for _, p := range body.Pos {
			if t.IsDerived(p) && !has[int32(p)] {
				trivial = true
				break
			}
			clause = append(clause, negLit{int32(p), true})
		}
		if trivial {
			continue
		}
		for _, w := range body.Neg {
			clause = append(clause, negLit{int32(w), false})
		}
		var next [][]negLit
		for _, d := range dnf {
			for _, l := range clause {
				if slices.Contains(d, negLit{l.f, !l.comp}) {
					continue // contradictory: never holds
				}
				nd := slices.Clone(d)
				if !slices.Contains(nd, l) {
					nd = append(nd, l)
					slices.SortFunc(nd, cmpNegLit)
				}
				next = append(next, nd)
			}
		}
		dnf = absorb(next)
		if len(dnf) > maxNegatedDisjuncts {
			return nil, false
		}
	}
	return dnf, true
}

func cmpNegLit(a, b negLit) int {
	if a.f != b.f {
		return int(a.f - b.f)
	}
	switch {
	case a.comp == b.comp:
		return 0
	case a.comp:
		return 1
	}
	return -1
}

// absorb drops the duplicate disjuncts of dnf and those that contain
// another (sorted literal sets): the disjunction is the same.
func absorb(dnf [][]negLit) [][]negLit {
	slices.SortFunc(dnf, func(a, b []negLit) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return slices.CompareFunc(a, b, cmpNegLit)
	})
	out := dnf[:0]
next:
	for _, d := range dnf {
		for _, e := range out {
			if subset(e, d) {
				continue next
			}
		}
		out = append(out, d)
	}
	return out
}

// subset reports whether the sorted literal set a is contained in b.
func subset(a, b []negLit) bool {
	i := 0
	for _, l := range b {
		if i < len(a) && a[i] == l {
			i++
		}
	}
	return i == len(a)
}
