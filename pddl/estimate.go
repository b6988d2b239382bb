package pddl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// This file bounds a grounding before it allocates: for every compiled
// variant of every action (grounder.planVariants), an upper bound on the
// bindings its join can find, from the objects each variable may take
// (its type, pruned by the unary projections of the positive static
// literals it occurs in) and the sizes of the static relations that cover
// several variables at once. Fluent literals prune nothing here: their
// atoms are only known after reachability. The bound is sound: the join
// never finds more bindings, so a task under the limits cannot exceed them
// by its joins (the ground actions are still counted when built, since a
// residual disjunctive precondition may split one binding into several).

// LimitError is a grounding refused or stopped because it would go, or
// went, over a GroundLimits bound. The server answers it with a 4xx; it
// names the action and its estimate so the author can see what to change.
type LimitError struct {
	// Action is the action schema's name; "" when the limit is the whole
	// task's (steps, reachable atoms).
	Action string
	// Pos is the action's position (zero for task-wide limits).
	Pos Pos
	// What is what went over: "ground actions", "join bindings",
	// "grounding steps" or "reachable atoms".
	What string
	// Count is how many were counted when a limit was hit while grounding;
	// 0 when the estimate refused the task before grounding.
	Count int64
	// Limit is the bound that was passed (MaxEstimate's, rounded, when
	// Count is 0).
	Limit float64
	// Estimate is the action's upper bound on its ground actions (or join
	// bindings, when What says so) computed before grounding; 0 when
	// unknown. It may exceed the int64 range.
	Estimate float64
	// Factors spells the estimate, e.g. "20 * 20 * 20": the objects each
	// variable may take, or a static relation's size or degree for the
	// variables it binds.
	Factors string
	// Detail says where a task-wide limit was hit ("(at pick-up)").
	Detail string
}

// Error returns e.g. "d.pddl:3:3: action a: up to 64000000 ground actions
// (20 * 20 * 20 * 20 * 20 * 20), over the limit of 10000000", or "d.pddl:3:3: action a: more than 400000 join
// bindings (estimated up to 2560000: 40 * 40 * 40 * 40)".
func (e *LimitError) Error() string {
	var b strings.Builder
	if e.Pos.IsValid() {
		b.WriteString(e.Pos.String())
		b.WriteString(": ")
	}
	if e.Action != "" {
		fmt.Fprintf(&b, "action %s: ", e.Action)
	}
	if e.Count == 0 {
		fmt.Fprintf(&b, "up to %s %s", formatCount(e.Estimate), e.What)
		if e.Factors != "" {
			fmt.Fprintf(&b, " (%s)", e.Factors)
		}
		fmt.Fprintf(&b, ", over the limit of %s", formatCount(e.Limit))
		return b.String()
	}
	fmt.Fprintf(&b, "more than %s %s", formatCount(e.Limit), e.What)
	if e.Detail != "" {
		fmt.Fprintf(&b, " %s", e.Detail)
	}
	if e.Estimate > 0 {
		fmt.Fprintf(&b, " (estimated up to %s ground actions", formatCount(e.Estimate))
		if e.Factors != "" {
			fmt.Fprintf(&b, ": %s", e.Factors)
		}
		b.WriteString(")")
	}
	b.WriteString("; the task is too large to ground")
	return b.String()
}

// formatCount prints an estimate exactly when it is an integer below 1e15,
// else in scientific notation.
func formatCount(x float64) string {
	if x < 1e15 {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}

// estimate is an upper bound with its factors spelled out.
type estimate struct {
	n       float64
	factors []string
}

func (e estimate) String() string { return strings.Join(e.factors, " * ") }

// checkEstimates records every action's estimated ground actions and
// refuses a task where one action's estimate (of ground actions, or of one
// variant's join bindings) exceeds MaxEstimate.
func (g *grounder) checkEstimates(schemas []*cschema) error {
	over := func(s *cschema, what string, e estimate) error {
		return &LimitError{Action: s.a.Name, Pos: s.a.Pos, What: what, Estimate: e.n, Factors: e.String(), Limit: g.lim.MaxEstimate}
	}
	for _, s := range schemas {
		for _, v := range s.variants {
			params, all, ok := g.estimateVariant(s, v)
			if !ok {
				return g.err
			}
			if params.n > g.lim.MaxEstimate {
				return over(s, "ground actions", params)
			}
			if all.n > g.lim.MaxEstimate {
				return over(s, "join bindings", all)
			}
			if s.estimate.n == 0 || params.n > s.estimate.n {
				s.estimate.factors = params.factors
			}
			s.estimate.n += params.n
		}
		if s.estimate.n > g.lim.MaxEstimate {
			return over(s, "ground actions", s.estimate)
		}
	}
	return nil
}

// estimateVariant bounds the bindings of v's parameters (its ground
// actions) and of all its join variables. ok is false when a step failed
// (budget or context; g.err says which).
func (g *grounder) estimateVariant(s *cschema, v *cvariant) (params, all estimate, ok bool) {
	// Variables a positive equality makes equal are one (their
	// representative, the first in v.vars); one equal to a constant takes
	// that object alone.
	repOf := map[int]int{}
	for _, x := range v.vars {
		repOf[x] = x
	}
	find := func(x int) int {
		for repOf[x] != x {
			x = repOf[x]
		}
		return x
	}
	var fixed [][2]int32 // variable, object
	for _, l := range v.lits {
		if l.pred != eqPred || l.neg {
			continue
		}
		a, b := l.args[0], l.args[1]
		switch {
		case a.isVar() && b.isVar():
			ra, rb := find(int(a)), find(int(b))
			if slices.Index(v.vars, rb) < slices.Index(v.vars, ra) {
				ra, rb = rb, ra
			}
			repOf[rb] = ra
		case a.isVar():
			fixed = append(fixed, [2]int32{int32(a), b.obj()})
		case b.isVar():
			fixed = append(fixed, [2]int32{int32(b), a.obj()})
		}
	}
	rep := func(t term) int { return find(int(t)) }
	// dom[r]: the objects representative r may take: of every type of the
	// variables it stands for, and the constant they equal.
	dom := map[int][]bool{}
	size := map[int]int{}
	domOf := func(r int) []bool {
		if d, ok := dom[r]; ok {
			return d
		}
		d := slices.Clone(s.slotTypes[r].member)
		for _, x := range v.vars {
			if x != r && find(x) == r {
				for o, in := range s.slotTypes[x].member {
					d[o] = d[o] && in
				}
			}
		}
		for _, f := range fixed {
			if find(int(f[0])) == r {
				for o := range d {
					d[o] = d[o] && int32(o) == f[1]
				}
			}
		}
		n := 0
		for _, in := range d {
			if in {
				n++
			}
		}
		dom[r], size[r] = d, n
		return d
	}
	// Positive static literals, with the atoms that fit their constants.
	type rel struct {
		l     *lit
		atoms []int32
		vars  []int // distinct variables
	}
	var rels []rel
	for _, i := range v.joinOrder {
		l := &v.lits[i]
		if !g.static[l.pred] {
			continue
		}
		r := rel{l: l}
		for _, t := range l.args {
			if t.isVar() && !slices.Contains(r.vars, rep(t)) {
				r.vars = append(r.vars, rep(t))
				domOf(rep(t))
			}
		}
		rels = append(rels, r)
	}
	// Prune: a variable takes only objects at its place in some atom of
	// each static relation it occurs in. Twice, so that a relation sees
	// the pruning of the others.
	for round := 0; round < 2; round++ {
		for k := range rels {
			r := &rels[k]
			seen := map[int]map[int32]bool{}
			for _, x := range r.vars {
				seen[x] = map[int32]bool{}
			}
			r.atoms = r.atoms[:0]
		atoms:
			for _, ai := range g.byPred[r.l.pred] {
				if !g.step(s.a.Name) {
					return params, all, false
				}
				args := g.atoms[ai].args
				for pos, t := range r.l.args {
					if !t.isVar() && t.obj() != args[pos] || t.isVar() && !dom[rep(t)][args[pos]] {
						continue atoms
					}
					// A variable repeated in the literal (or made equal
					// to another in it) takes one object.
					if t.isVar() {
						for q := range pos {
							if u := r.l.args[q]; u.isVar() && rep(u) == rep(t) && args[q] != args[pos] {
								continue atoms
							}
						}
					}
				}
				r.atoms = append(r.atoms, ai)
				for pos, t := range r.l.args {
					if t.isVar() {
						seen[rep(t)][args[pos]] = true
					}
				}
			}
			for _, x := range r.vars {
				d := dom[x]
				for o, in := range d {
					if in && !seen[x][int32(o)] {
						d[o] = false
						size[x]--
					}
				}
			}
		}
	}
	// maxDegree is the most atoms of r that agree on the variables of
	// bound: how many ways r extends one binding of them.
	maxDegree := func(r *rel, bound map[int]bool) (int, bool) {
		counts := map[string]int{}
		best := 0
		var key []byte
		for _, ai := range r.atoms {
			if !g.step(s.a.Name) {
				return 0, false
			}
			key = key[:0]
			for pos, t := range r.l.args {
				if t.isVar() && bound[rep(t)] {
					key = append(key, byte(pos), byte(g.atoms[ai].args[pos]), byte(g.atoms[ai].args[pos]>>8),
						byte(g.atoms[ai].args[pos]>>16), byte(g.atoms[ai].args[pos]>>24))
				}
			}
			counts[string(key)]++
			best = max(best, counts[string(key)])
		}
		return best, true
	}
	bound := func(vars []int) (estimate, bool) {
		e := estimate{n: 1}
		covered := map[int]bool{}
		want := map[int]bool{}
		var reps []int
		for _, x := range vars {
			if r := find(x); !want[r] {
				want[r] = true
				reps = append(reps, r)
			}
		}
		// Greedily, the static relation that extends the bindings so far
		// the least, while that is fewer than the product of the objects
		// of the wanted variables it binds: the bindings of the covered
		// variables are at most the product of the chosen relations'
		// sizes (the first) and degrees (given what is already bound).
		used := make([]bool, len(rels))
		for {
			best, bestCost := -1, 0.0
			for k := range rels {
				r := &rels[k]
				if used[k] {
					continue
				}
				prod, fresh := 1.0, false
				for _, x := range r.vars {
					if want[x] && !covered[x] {
						prod *= float64(size[x])
						fresh = true
					}
				}
				if !fresh {
					continue
				}
				deg, ok := maxDegree(r, covered)
				if !ok {
					return e, false
				}
				if c := float64(deg); c < prod && (best < 0 || c < bestCost) {
					best, bestCost = k, c
				}
			}
			if best < 0 {
				break
			}
			used[best] = true
			r := &rels[best]
			e.n *= bestCost
			e.factors = append(e.factors, fmt.Sprintf("%s (%s)", formatCount(bestCost), g.predNames[r.l.pred]))
			for _, x := range r.vars {
				covered[x] = true
			}
		}
		for _, r := range reps {
			if covered[r] {
				continue
			}
			domOf(r)
			e.n *= float64(size[r])
			e.factors = append(e.factors, strconv.Itoa(size[r]))
		}
		return e, true
	}
	if params, ok = bound(v.vars[:s.nparams]); !ok {
		return params, all, false
	}
	all, ok = bound(v.vars)
	return params, all, ok
}
