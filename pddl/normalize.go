package pddl

import (
	"fmt"
	"slices"
)

// This file compiles lifted formulas and effects into an internal form over
// variable slots and object ids, in negation normal form: implications are
// rewritten, negations pushed down to atoms (not (exists ...)) becomes
// (forall ... (not ...)), and so on. Preconditions and goals are then split
// into "variants": conjunctions of literals, one per disjunct of a lifted
// disjunctive normal form, in which existential variables become extra
// parameters. Universal quantifiers, and disjunctions whose lifted DNF would
// be too large, stay as residual formulas that grounding expands per binding
// (after static facts are folded away, which keeps them small).

// term is an argument of a compiled atom: a variable slot (>= 0) or an
// object id o encoded as -(o+1).
type term int32

func objTerm(o int32) term { return term(-o - 1) }
func (t term) isVar() bool { return t >= 0 }
func (t term) obj() int32  { return int32(-t - 1) }

// eqPred is the predicate id of equality literals.
const eqPred = -1

// lit is a compiled literal.
type lit struct {
	pred int32
	args []term
	neg  bool
}

type condKind uint8

const (
	cTrue condKind = iota
	cFalse
	cLit
	cAnd
	cOr
	cForall
	cExists
)

// cond is a compiled formula in negation normal form.
type cond struct {
	kind condKind
	lit  lit
	sub  []*cond
	vars []int // quantified slots
}

var (
	trueCond  = &cond{kind: cTrue}
	falseCond = &cond{kind: cFalse}
)

// slots allocates variable slots for one action schema (or the goal).
type slots struct {
	names []string
	types [][]string
}

func (s *slots) add(tn TypedName) int {
	s.names = append(s.names, tn.Name)
	s.types = append(s.types, tn.Types)
	return len(s.names) - 1
}

// compiler turns formulas and effects into conds and effect entries.
type compiler struct {
	g     *grounder
	slots *slots
}

func (c *compiler) term(t Term, scope map[string]int) (term, error) {
	if t.Var {
		s, ok := scope[t.Name]
		if !ok {
			return 0, &Error{Pos: t.Pos, Msg: "undefined variable " + t.Name}
		}
		return term(s), nil
	}
	o, ok := c.g.objIndex[t.Name]
	if !ok {
		return 0, &Error{Pos: t.Pos, Msg: "unknown object " + t.Name}
	}
	return objTerm(o), nil
}

func (c *compiler) atom(pred string, args []Term, scope map[string]int, pos Pos) (lit, error) {
	p, ok := c.g.predIndex[pred]
	if !ok {
		return lit{}, &Error{Pos: pos, Msg: "unknown predicate " + pred}
	}
	if len(args) != c.g.predArity[p] {
		return lit{}, &Error{Pos: pos, Msg: fmt.Sprintf("predicate %s takes %d argument(s), found %d", pred, c.g.predArity[p], len(args))}
	}
	l := lit{pred: p, args: make([]term, len(args))}
	for i, a := range args {
		t, err := c.term(a, scope)
		if err != nil {
			return lit{}, err
		}
		l.args[i] = t
	}
	return l, nil
}

func withVars(scope map[string]int, s *slots, vars []TypedName) (map[string]int, []int) {
	n := make(map[string]int, len(scope)+len(vars))
	for k, v := range scope {
		n[k] = v
	}
	ids := make([]int, len(vars))
	for i, v := range vars {
		ids[i] = s.add(v)
		n[v.Name] = ids[i]
	}
	return n, ids
}

// formula compiles f (negated when neg) into negation normal form.
func (c *compiler) formula(f *Formula, scope map[string]int, neg bool) (*cond, error) {
	if f == nil {
		if neg {
			return falseCond, nil
		}
		return trueCond, nil
	}
	switch f.Kind {
	case FTrue:
		if neg {
			return falseCond, nil
		}
		return trueCond, nil
	case FAtom:
		l, err := c.atom(f.Pred, f.Args, scope, f.Pos)
		if err != nil {
			return nil, err
		}
		l.neg = neg
		return &cond{kind: cLit, lit: l}, nil
	case FEqual:
		l := lit{pred: eqPred, args: make([]term, 2), neg: neg}
		for i, a := range f.Args {
			t, err := c.term(a, scope)
			if err != nil {
				return nil, err
			}
			l.args[i] = t
		}
		if !l.args[0].isVar() && !l.args[1].isVar() {
			if (l.args[0] == l.args[1]) != neg {
				return trueCond, nil
			}
			return falseCond, nil
		}
		return &cond{kind: cLit, lit: l}, nil
	case FNot:
		return c.formula(f.Sub[0], scope, !neg)
	case FAnd, FOr:
		kind := cAnd
		if (f.Kind == FOr) != neg {
			kind = cOr
		}
		subs := make([]*cond, 0, len(f.Sub))
		for _, s := range f.Sub {
			x, err := c.formula(s, scope, neg)
			if err != nil {
				return nil, err
			}
			subs = append(subs, x)
		}
		return junction(kind, subs), nil
	case FImply:
		// a -> b == (or (not a) b); negated: (and a (not b)).
		a, err := c.formula(f.Sub[0], scope, !neg)
		if err != nil {
			return nil, err
		}
		b, err := c.formula(f.Sub[1], scope, neg)
		if err != nil {
			return nil, err
		}
		if neg {
			return junction(cAnd, []*cond{a, b}), nil
		}
		return junction(cOr, []*cond{a, b}), nil
	case FExists, FForall:
		inner, ids := withVars(scope, c.slots, f.Vars)
		body, err := c.formula(f.Sub[0], inner, neg)
		if err != nil {
			return nil, err
		}
		kind := cExists
		if (f.Kind == FForall) != neg {
			kind = cForall
		}
		// A constant body is kept under its quantifier: over an empty type
		// (exists ...) is false and (forall ...) true whatever the body.
		return &cond{kind: kind, vars: ids, sub: []*cond{body}}, nil
	}
	return nil, &Error{Pos: f.Pos, Msg: "unsupported formula"}
}

// junction builds an and/or, flattening nested ones of the same kind and
// folding constants.
func junction(kind condKind, subs []*cond) *cond {
	var out []*cond
	for _, s := range subs {
		switch {
		case s.kind == kind:
			out = append(out, s.sub...)
		case s.kind == cTrue && kind == cAnd, s.kind == cFalse && kind == cOr:
			// neutral
		case s.kind == cFalse && kind == cAnd:
			return falseCond
		case s.kind == cTrue && kind == cOr:
			return trueCond
		default:
			out = append(out, s)
		}
	}
	switch len(out) {
	case 0:
		if kind == cAnd {
			return trueCond
		}
		return falseCond
	case 1:
		return out[0]
	}
	return &cond{kind: kind, sub: out}
}

// variant is one disjunct of a lifted precondition or goal: a conjunction of
// literals (with existential variables as extra slots to bind) plus residual
// formulas expanded at grounding.
type variant struct {
	lits   []lit
	resid  []*cond
	exvars []int
}

// maxLiftedVariants bounds the lifted DNF of one formula; beyond it parts
// stay residual.
const maxLiftedVariants = 64

// liftedDNF splits c into variants.
func liftedDNF(c *cond) []variant {
	switch c.kind {
	case cTrue:
		return []variant{{}}
	case cFalse:
		return nil
	case cLit:
		return []variant{{lits: []lit{c.lit}}}
	case cForall:
		return []variant{{resid: []*cond{c}}}
	case cExists:
		vs := liftedDNF(c.sub[0])
		for i := range vs {
			vs[i].exvars = append(slices.Clone(c.vars), vs[i].exvars...)
		}
		return vs
	case cOr:
		var out []variant
		for _, s := range c.sub {
			out = append(out, liftedDNF(s)...)
			if len(out) > maxLiftedVariants {
				return []variant{{resid: []*cond{c}}}
			}
		}
		return out
	case cAnd:
		acc := []variant{{}}
		for _, s := range c.sub {
			alts := liftedDNF(s)
			if len(alts) == 0 {
				return nil
			}
			if len(acc)*len(alts) > maxLiftedVariants {
				for i := range acc {
					acc[i].resid = append(slices.Clone(acc[i].resid), s)
				}
				continue
			}
			next := make([]variant, 0, len(acc)*len(alts))
			for _, a := range acc {
				for _, b := range alts {
					next = append(next, variant{
						lits:   append(slices.Clone(a.lits), b.lits...),
						resid:  append(slices.Clone(a.resid), b.resid...),
						exvars: append(slices.Clone(a.exvars), b.exvars...),
					})
				}
			}
			acc = next
		}
		return acc
	}
	return nil
}

// contradictory reports whether v holds a literal and its negation with the
// same arguments, or an equality that can never hold.
func (v *variant) contradictory() bool {
	for i := range v.lits {
		a := &v.lits[i]
		if a.pred == eqPred && a.neg && a.args[0] == a.args[1] {
			return true
		}
		for j := i + 1; j < len(v.lits); j++ {
			b := &v.lits[j]
			if a.pred == b.pred && a.neg != b.neg && slices.Equal(a.args, b.args) {
				return true
			}
		}
	}
	return false
}

// effEntry is one literal of a flattened effect: under the forall variables
// vars, when cond holds (nil: always), add or delete the atom.
type effEntry struct {
	vars []int
	cond *cond
	del  bool
	atom lit
}

// costTerm is one (increase (total-cost) ...) of an action.
type costTerm struct {
	value float64
	fn    string
	args  []term
	pos   Pos
}

// effects flattens e into entries and cost terms.
func (c *compiler) effects(e *Effect, scope map[string]int, vars []int, when *cond, out *[]effEntry, costs *[]costTerm) error {
	if e == nil {
		return nil
	}
	switch e.Kind {
	case EAnd:
		for _, s := range e.Sub {
			if err := c.effects(s, scope, vars, when, out, costs); err != nil {
				return err
			}
		}
	case EAdd, EDel:
		l, err := c.atom(e.Pred, e.Args, scope, e.Pos)
		if err != nil {
			return err
		}
		*out = append(*out, effEntry{vars: vars, cond: when, del: e.Kind == EDel, atom: l})
	case EForall:
		inner, ids := withVars(scope, c.slots, e.Vars)
		return c.effects(e.Sub[0], inner, append(slices.Clone(vars), ids...), when, out, costs)
	case EWhen:
		cd, err := c.formula(e.Cond, scope, false)
		if err != nil {
			return err
		}
		if when != nil {
			cd = junction(cAnd, []*cond{when, cd})
		}
		if cd.kind == cFalse {
			return nil
		}
		if cd.kind == cTrue {
			cd = nil
		}
		return c.effects(e.Sub[0], scope, vars, cd, out, costs)
	case EIncrease:
		if len(vars) > 0 || when != nil {
			return &Error{Pos: e.Pos, Msg: "conditional or universal cost effects are not supported"}
		}
		ct := costTerm{value: e.Amount.Value, fn: e.Amount.Fn, pos: e.Amount.Pos}
		for _, a := range e.Amount.Args {
			t, err := c.term(a, scope)
			if err != nil {
				return err
			}
			ct.args = append(ct.args, t)
		}
		*costs = append(*costs, ct)
	}
	return nil
}
