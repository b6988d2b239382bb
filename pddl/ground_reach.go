package pddl

import "slices"

// Reachability: the relaxed fixpoint over the atoms the actions can add,
// from the initial atoms, before any action is instantiated.

// reach runs relaxed reachability to a fixpoint, recording the bindings of
// every variant and adding the atoms their effects may add.
func (g *grounder) reach(schemas []*cschema) {
	for changed := true; changed && g.err == nil; {
		changed = false
		for _, s := range schemas {
			nslots := len(s.slotTypes)
			for _, v := range s.variants {
				if v.evaluated && !g.grew(v) {
					continue
				}
				v.evaluated = true
				for k, i := range v.joinOrder {
					v.lastCount[k] = len(g.byPred[v.lits[i].pred])
				}
				var found [][]int32
				g.join(s, v, nslots, func(b []int32) {
					k := bindingKey(b)
					if v.seen[k] {
						return
					}
					v.seen[k] = true
					found = append(found, slices.Clone(b))
					if g.kept++; g.kept > g.lim.MaxBindings {
						g.fail(&LimitError{Action: s.a.Name, Pos: s.a.Pos, What: "join bindings", Count: int64(g.kept),
							Limit: float64(g.lim.MaxBindings), Estimate: s.estimate.n, Factors: s.estimate.String()})
					}
				})
				if g.err != nil {
					return
				}
				for _, b := range found {
					if !g.step(s.a.Name) {
						return
					}
					v.bindings = append(v.bindings, b)
					pk := bindingKey(b[:s.nparams])
					if i, ok := s.paramSeen[pk]; ok {
						v.paramOf = append(v.paramOf, i)
						continue
					}
					s.paramSeen[pk] = int32(len(s.paramBindings))
					v.paramOf = append(v.paramOf, int32(len(s.paramBindings)))
					s.paramBindings = append(s.paramBindings, b)
					if g.relaxedEffects(s, b, false) {
						changed = true
					}
				}
			}
			if s.condEffect {
				for _, b := range s.paramBindings {
					if g.relaxedEffects(s, b, true) {
						changed = true
					}
				}
			}
		}
		if len(g.atoms) > 4*g.lim.MaxActions {
			g.fail(&LimitError{What: "reachable atoms", Limit: float64(4 * g.lim.MaxActions), Count: int64(len(g.atoms))})
		}
	}
}

// grew reports whether a predicate v joins on gained atoms since v was last evaluated.
func (g *grounder) grew(v *cvariant) bool {
	for k, i := range v.joinOrder {
		if len(g.byPred[v.lits[i].pred]) != v.lastCount[k] {
			return true
		}
	}
	return false
}

// relaxedEffects adds the atoms that schema s adds under binding b: the
// unconditional ones (conditional false), or those with a condition or
// forall variables whose relaxed condition holds (conditional true).
func (g *grounder) relaxedEffects(s *cschema, b []int32, conditional bool) bool {
	added := false
	var buf [8]int32
	for i := range s.effects {
		e := &s.effects[i]
		if e.del || (e.cond != nil || len(e.vars) > 0) != conditional {
			continue
		}
		if !conditional {
			if g.addAtom(e.atom.pred, g.groundArgs(e.atom.args, b, buf[:0])) {
				added = true
			}
			continue
		}
		bb := slices.Clone(b)
		g.forEach(s.slotTypes, e.vars, bb, func() bool {
			if e.cond == nil || g.relaxedHolds(s.slotTypes, e.cond, bb) {
				if g.addAtom(e.atom.pred, g.groundArgs(e.atom.args, bb, buf[:0])) {
					added = true
				}
			}
			return g.step(s.a.Name)
		})
	}
	return added
}

// forEach binds vars to every combination of objects of their types and
// calls fn, stopping when fn returns false. It restores b.
func (g *grounder) forEach(slotTypes []*typeSet, vars []int, b []int32, fn func() bool) bool {
	if len(vars) == 0 {
		return fn()
	}
	v := vars[0]
	old := b[v]
	defer func() { b[v] = old }()
	for _, o := range slotTypes[v].list {
		b[v] = o
		if !g.forEach(slotTypes, vars[1:], b, fn) {
			return false
		}
	}
	return true
}

// relaxedHolds evaluates c ignoring negative literals and universal
// quantifiers (an over-approximation).
func (g *grounder) relaxedHolds(slotTypes []*typeSet, c *cond, b []int32) bool {
	switch c.kind {
	case cTrue:
		return true
	case cFalse:
		return false
	case cLit:
		var buf [8]int32
		args := g.groundArgs(c.lit.args, b, buf[:0])
		if c.lit.pred == eqPred {
			return (args[0] == args[1]) != c.lit.neg
		}
		if c.lit.neg {
			return !g.static[c.lit.pred] || g.lookup(c.lit.pred, args) < 0
		}
		return g.lookup(c.lit.pred, args) >= 0
	case cAnd:
		for _, s := range c.sub {
			if !g.relaxedHolds(slotTypes, s, b) {
				return false
			}
		}
		return true
	case cOr:
		for _, s := range c.sub {
			if g.relaxedHolds(slotTypes, s, b) {
				return true
			}
		}
		return false
	case cExists:
		found := false
		g.forEach(slotTypes, c.vars, b, func() bool {
			found = g.relaxedHolds(slotTypes, c.sub[0], b)
			return !found && g.step("condition")
		})
		return found
	case cForall:
		return true
	}
	return false
}
