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
		pre = g.flatten(pre, sl, true, a.Pos)
		for i := range s.effects {
			e := &s.effects[i]
			if e.cond != nil {
				e.cond = g.flatten(e.cond, sl, false, a.Pos)
			}
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

// compileGoal compiles the problem's goal (into g.goal), compiling its
// large parts into derived predicates.
func (g *grounder) compileGoal() error {
	sl := &slots{}
	c := &compiler{g: g, slots: sl}
	gc, err := c.formula(g.p.Goal, map[string]int{}, false)
	if err != nil {
		return err
	}
	g.goal = g.flatten(gc, sl, true, g.p.Goal.Pos)
	g.goalSlots = sl
	return g.err
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
