package pddl

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Axioms at grounding: the domain's :derived rules and the conditions too
// large for disjunctive normal form become axiom schemas, compiled like
// action schemas (their bodies are preconditions, their one effect adds the
// head) so that relaxed reachability, the joins and the static folding
// serve both; build turns their ground instances into Task.Axioms.
//
// When expanding every condition into DNF exceeds a bound (maxGroundDNF,
// maxGoalDNF), the task is grounded again with every condition
// (precondition, effect condition, goal or rule body) whose ground DNF may
// have more than axiomBound disjuncts rewritten as Fast Downward's
// translator does: a universal (forall (?v) phi) becomes the
// negation of a new derived predicate N(free variables) with the rule
// N :- (exists (?v) (not phi)); a large disjunction or existential becomes a
// new derived predicate D(free variables) with one rule per disjunct. The
// new predicates are named new-axiom@N; they are facts of the task like any
// other derived predicate.

// axiomBound is the largest ground DNF (disjuncts per binding, an upper
// bound from the objects of the quantified types) a condition may have
// before its largest parts are compiled into derived predicates, once
// expanding every condition has failed (GroundContext).
const axiomBound = 256

// newDerivedPred registers a new derived predicate of the given arity and
// returns its id.
func (g *grounder) newDerivedPred(arity int) int32 {
	id := int32(len(g.predNames))
	name := fmt.Sprintf("new-axiom@%d", g.nNewAxioms)
	g.nNewAxioms++
	g.predNames = append(g.predNames, name)
	g.predIndex[name] = id
	g.predArity = append(g.predArity, arity)
	g.static = append(g.static, false)
	g.derived = append(g.derived, true)
	g.byPred = append(g.byPred, nil)
	m := make([]map[int32][]int32, arity)
	for j := range m {
		m[j] = map[int32][]int32{}
	}
	g.byArg = append(g.byArg, m)
	return id
}

// staticOnly reports whether every literal of c is of a static predicate
// or an equality: once grounded, c folds to true or false.
func (g *grounder) staticOnly(c *cond) bool {
	switch c.kind {
	case cLit:
		return c.lit.pred == eqPred || g.static[c.lit.pred]
	case cTrue, cFalse:
		return true
	}
	for _, s := range c.sub {
		if !g.staticOnly(s) {
			return false
		}
	}
	return true
}

// dnfSize bounds the disjuncts of c grounded under one binding of its free
// variables (static literals fold away). Existentials reached through
// conjunctions and disjunctions only (lifted) are bound by the join, not
// expanded, and count their body only.
func (g *grounder) dnfSize(c *cond, sl *slots, lifted bool) float64 {
	switch c.kind {
	case cAnd:
		p := 1.0
		for _, s := range c.sub {
			p *= g.dnfSize(s, sl, lifted)
		}
		return p
	case cOr:
		sum := 0.0
		for _, s := range c.sub {
			if !g.staticOnly(s) {
				sum += g.dnfSize(s, sl, lifted)
			}
		}
		return max(sum, 1)
	case cExists, cForall:
		if g.staticOnly(c.sub[0]) {
			return 1
		}
		b := g.dnfSize(c.sub[0], sl, lifted && c.kind == cExists)
		if c.kind == cExists && lifted {
			return b
		}
		n := 1.0
		for _, v := range c.vars {
			n *= float64(len(g.typeSetOf(sl.types[v]).list))
		}
		if c.kind == cExists {
			return b * n
		}
		if b <= 1 {
			return 1
		}
		return math.Pow(b, n)
	}
	return 1
}

// flatten rewrites the parts of c that make its ground DNF larger than
// axiomBound into derived predicates (see the file comment). lifted tells
// whether existentials at the top of c are bound by a join (preconditions,
// goals and rule bodies) rather than expanded (effect conditions).
func (g *grounder) flatten(c *cond, sl *slots, lifted bool, pos Pos) *cond {
	if g.err == nil && g.lim.CompileForalls {
		c = g.compileForalls(c, sl, pos)
	}
	if g.err != nil || g.compileBound <= 0 || g.dnfSize(c, sl, lifted) <= g.compileBound {
		return c
	}
	switch c.kind {
	case cAnd:
		subs := make([]*cond, len(c.sub))
		for i, s := range c.sub {
			subs[i] = g.flatten(s, sl, lifted, pos)
		}
		out := junction(cAnd, subs)
		for out.kind == cAnd && g.dnfSize(out, sl, lifted) > g.compileBound {
			best, bestSize := -1, 1.0
			for i, s := range out.sub {
				if n := g.dnfSize(s, sl, lifted); n > bestSize {
					best, bestSize = i, n
				}
			}
			if best < 0 {
				break
			}
			subs = slices.Clone(out.sub)
			subs[best] = g.derivedAtom(subs[best], sl, pos)
			out = junction(cAnd, subs)
		}
		return out
	case cOr, cExists:
		return g.derivedAtom(c, sl, pos)
	case cForall:
		n := g.derivedAtom(&cond{kind: cExists, vars: c.vars, sub: []*cond{negate(c.sub[0])}}, sl, pos)
		return negate(n)
	}
	return c
}

// compileForalls rewrites every universal quantification in c whose body
// is not static into the negation of a new derived predicate
// (GroundLimits.CompileForalls); the rest of c is left for the DNF.
func (g *grounder) compileForalls(c *cond, sl *slots, pos Pos) *cond {
	switch c.kind {
	case cForall:
		if g.staticOnly(c.sub[0]) {
			return c
		}
		return g.derivedAtom(c, sl, pos)
	case cAnd, cOr:
		subs := make([]*cond, len(c.sub))
		changed := false
		for i, s := range c.sub {
			subs[i] = g.compileForalls(s, sl, pos)
			changed = changed || subs[i] != s
		}
		if !changed {
			return c
		}
		return junction(c.kind, subs)
	case cExists:
		b := g.compileForalls(c.sub[0], sl, pos)
		if b == c.sub[0] {
			return c
		}
		return &cond{kind: cExists, vars: c.vars, sub: []*cond{b}}
	}
	return c
}

// derivedAtom returns a literal of a new derived predicate over the free
// variables of c that holds exactly when c does. A forall becomes the
// negation of the predicate of its negated body's existential closure.
func (g *grounder) derivedAtom(c *cond, sl *slots, pos Pos) *cond {
	if c.kind == cForall {
		n := g.derivedAtom(&cond{kind: cExists, vars: c.vars, sub: []*cond{negate(c.sub[0])}}, sl, pos)
		return negate(n)
	}
	free := freeSlots(c)
	pred := g.newDerivedPred(len(free))
	g.addRule(pred, sl, free, c, pos)
	args := make([]term, len(free))
	for i, v := range free {
		args[i] = term(v)
	}
	return &cond{kind: cLit, lit: lit{pred: pred, args: args}}
}

// addRule adds the axiom schemas of head(params) :- body, where body's
// variables are slots of sl: one schema per top-level disjunct, each with
// the head's variables first in its own slot table.
func (g *grounder) addRule(head int32, sl *slots, params []int, body *cond, pos Pos) {
	if g.err != nil {
		return
	}
	if body.kind == cOr {
		for _, s := range body.sub {
			g.addRule(head, sl, params, s, pos)
		}
		return
	}
	// Renumber: the head's variables first, then the other slots.
	m := make(map[int]int, len(sl.names))
	nsl := &slots{}
	for _, p := range params {
		m[p] = nsl.add(TypedName{Name: sl.names[p], Types: sl.types[p]})
	}
	for j := range sl.names {
		if _, ok := m[j]; !ok {
			m[j] = nsl.add(TypedName{Name: sl.names[j], Types: sl.types[j]})
		}
	}
	body = remapCond(body, m)
	if body.kind == cExists {
		body = &cond{kind: cExists, vars: body.vars, sub: []*cond{g.flatten(body.sub[0], nsl, true, pos)}}
	} else {
		body = g.flatten(body, nsl, true, pos)
	}
	if body.kind == cFalse {
		return
	}
	k := len(params)
	hargs := make([]term, k)
	names := make([]TypedName, k)
	for i := range hargs {
		hargs[i] = term(i)
		names[i] = TypedName{Name: nsl.names[i], Types: nsl.types[i]}
	}
	s := &cschema{a: &ActionSchema{Name: "axiom " + g.predNames[head], Params: names, Pos: pos}, nparams: k,
		paramSeen: map[string]int32{}, axiom: true, head: head, body: body}
	s.effects = []effEntry{{atom: lit{pred: head, args: hargs}}}
	s.slotNames = nsl.names
	for _, ts := range nsl.types {
		s.slotTypes = append(s.slotTypes, g.typeSetOf(ts))
	}
	ps := make([]int, k)
	for i := range ps {
		ps[i] = i
	}
	s.variants = g.planVariants(liftedDNF(body), ps)
	g.rules = append(g.rules, s)
}

// negate returns the negation normal form of (not c).
func negate(c *cond) *cond {
	switch c.kind {
	case cTrue:
		return falseCond
	case cFalse:
		return trueCond
	case cLit:
		l := c.lit
		l.neg = !l.neg
		return &cond{kind: cLit, lit: l}
	case cAnd, cOr:
		subs := make([]*cond, len(c.sub))
		for i, s := range c.sub {
			subs[i] = negate(s)
		}
		if c.kind == cAnd {
			return junction(cOr, subs)
		}
		return junction(cAnd, subs)
	case cExists:
		return &cond{kind: cForall, vars: c.vars, sub: []*cond{negate(c.sub[0])}}
	case cForall:
		return &cond{kind: cExists, vars: c.vars, sub: []*cond{negate(c.sub[0])}}
	}
	return c
}

// freeSlots returns the variable slots c uses that it does not quantify,
// in increasing order.
func freeSlots(c *cond) []int {
	seen := map[int]bool{}
	var walk func(c *cond, bound map[int]bool)
	walk = func(c *cond, bound map[int]bool) {
		switch c.kind {
		case cLit:
			for _, a := range c.lit.args {
				if a.isVar() && !bound[int(a)] {
					seen[int(a)] = true
				}
			}
		case cExists, cForall:
			inner := make(map[int]bool, len(bound)+len(c.vars))
			for k := range bound {
				inner[k] = true
			}
			for _, v := range c.vars {
				inner[v] = true
			}
			walk(c.sub[0], inner)
		default:
			for _, s := range c.sub {
				walk(s, bound)
			}
		}
	}
	walk(c, map[int]bool{})
	out := make([]int, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// remapCond returns c with every variable slot v renamed to m[v].
func remapCond(c *cond, m map[int]int) *cond {
	switch c.kind {
	case cTrue, cFalse:
		return c
	case cLit:
		l := c.lit
		l.args = make([]term, len(c.lit.args))
		for i, a := range c.lit.args {
			if a.isVar() {
				a = term(m[int(a)])
			}
			l.args[i] = a
		}
		return &cond{kind: cLit, lit: l}
	}
	n := &cond{kind: c.kind, sub: make([]*cond, len(c.sub))}
	for i, s := range c.sub {
		n.sub[i] = remapCond(s, m)
	}
	for _, v := range c.vars {
		n.vars = append(n.vars, m[v])
	}
	return n
}

// compileRules makes the axiom schemas of the domain's :derived rules.
func (g *grounder) compileRules() {
	for _, r := range g.d.Derived {
		sl := &slots{}
		scope := map[string]int{}
		params := make([]int, len(r.Params))
		for i, p := range r.Params {
			params[i] = sl.add(p)
			scope[p.Name] = params[i]
		}
		c := &compiler{g: g, slots: sl}
		body, err := c.formula(r.Body, scope, false)
		if err != nil {
			g.fail(err)
			return
		}
		g.addRule(g.predIndex[r.Pred], sl, params, body, r.Pos)
	}
}

// stratifyRules assigns every derived predicate its stratum (g.strata),
// over the rules of the domain and the compiled ones.
func (g *grounder) stratifyRules() error {
	index := map[int32]int{}
	var preds []int32
	for _, s := range g.rules {
		if _, ok := index[s.head]; !ok {
			index[s.head] = len(preds)
			preds = append(preds, s.head)
		}
	}
	var edges []depEdge
	for _, s := range g.rules {
		h := index[s.head]
		var walk func(c *cond)
		walk = func(c *cond) {
			if c.kind == cLit {
				if b, ok := index[c.lit.pred]; ok {
					edges = append(edges, depEdge{from: b, to: h, neg: c.lit.neg})
				}
				return
			}
			for _, sub := range c.sub {
				walk(sub)
			}
		}
		walk(s.body)
	}
	strata, cycle := stratify(len(preds), edges)
	if cycle != nil {
		var names []string
		for _, i := range cycle {
			names = append(names, g.predNames[preds[i]])
		}
		pos := g.d.Pos
		if len(g.d.Derived) > 0 {
			pos = g.d.Derived[0].Pos
		}
		return &Error{Pos: pos, Msg: "derived predicates cannot be stratified once quantifiers are compiled into axioms: " +
			strings.Join(names, ", ") + " depend on each other through negation"}
	}
	g.strata = make([]int, len(g.predNames))
	for i, p := range preds {
		g.strata[p] = strata[i]
	}
	return nil
}
