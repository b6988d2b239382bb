package pddl

import (
	"math"
	"slices"
)

// Compiling: each action schema's variants (normalize.go) planned for the
// join: slot order, the literals that bind each slot, the filters checked
// once a binding is complete.

// compileSchemas compiles every action schema.
func (g *grounder) compileSchemas() ([]*cschema, error) {
	var out []*cschema
	for _, a := range g.d.Actions {
		sl := &slots{}
		scope := map[string]int{}
		for _, p := range a.Params {
			scope[p.Name] = sl.add(p)
		}
		c := &compiler{g: g, slots: sl}
		pre, err := c.formula(a.Pre, scope, false)
		if err != nil {
			return nil, err
		}
		s := &cschema{a: a, nparams: len(a.Params), paramSeen: map[string]int32{}}
		if err := c.effects(a.Effect, scope, nil, nil, &s.effects, &s.costs); err != nil {
			return nil, err
		}
		for _, e := range s.effects {
			if e.cond != nil || len(e.vars) > 0 {
				s.condEffect = true
			}
		}
		s.slotNames = sl.names
		for _, ts := range sl.types {
			s.slotTypes = append(s.slotTypes, g.typeSetOf(ts))
		}
		params := make([]int, s.nparams)
		for i := range params {
			params[i] = i
		}
		s.variants = g.planVariants(liftedDNF(pre), params)
		out = append(out, s)
	}
	return out, nil
}

// planVariants drops contradictory variants and orders each one's join.
func (g *grounder) planVariants(vs []variant, params []int) []*cvariant {
	var out []*cvariant
	for _, v := range vs {
		if v.contradictory() {
			continue
		}
		cv := &cvariant{variant: v, seen: map[string]bool{}}
		cv.vars = append(slices.Clone(params), v.exvars...)
		var joins []int
		for i, l := range v.lits {
			switch {
			case l.pred == eqPred:
				cv.filters = append(cv.filters, i)
			case !l.neg:
				joins = append(joins, i)
			case g.static[l.pred]:
				cv.filters = append(cv.filters, i)
			}
		}
		// Greedy join order: most arguments already bound first, then
		// static predicates, then fewer atoms.
		bound := map[term]bool{}
		for len(joins) > 0 {
			best, bestScore := 0, math.MinInt
			for k, i := range joins {
				l := v.lits[i]
				nb := 0
				for _, t := range l.args {
					if !t.isVar() || bound[t] {
						nb++
					}
				}
				score := nb*4 - len(l.args)
				if nb == len(l.args) {
					score += 1000
				}
				if g.static[l.pred] {
					score += 2
				}
				score = score*100000 - min(len(g.byPred[l.pred]), 99999)
				if score > bestScore {
					best, bestScore = k, score
				}
			}
			i := joins[best]
			cv.joinOrder = append(cv.joinOrder, i)
			for _, t := range v.lits[i].args {
				if t.isVar() {
					bound[t] = true
				}
			}
			joins = slices.Delete(joins, best, best+1)
		}
		cv.lastCount = make([]int, len(cv.joinOrder))
		out = append(out, cv)
	}
	return out
}
