package pddl

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Building the Task: ground actions with their effects and costs, facts,
// the static facts folded away, and the goal.

// groundEffects is the ground effect of one action binding, over atom ids.
type groundEffects struct {
	add, del []int32
	cond     []gcondEffect
	cost     int
}

type gcondEffect struct {
	c        gconj
	add, del []int32
}

func (g *grounder) effectsOf(s *cschema, b []int32, hasCosts bool) (*groundEffects, error) {
	ge := &groundEffects{}
	bb := slices.Clone(b)
	condIndex := map[string]int{}
	var buf [8]int32
	var ferr error
	for i := range s.effects {
		e := &s.effects[i]
		g.forEach(s.slotTypes, e.vars, bb, func() bool {
			args := g.groundArgs(e.atom.args, bb, buf[:0])
			id := g.lookup(e.atom.pred, args)
			if id < 0 {
				if e.del {
					return true // deleting a fact that never holds
				}
				if e.cond == nil {
					ferr = fmt.Errorf("internal error: effect atom of %s not reached", s.a.Name)
					return false
				}
			}
			var d []gconj
			if e.cond == nil {
				d = []gconj{{}}
			} else {
				var err error
				d, err = g.groundDNF(s.slotTypes, e.cond, bb, maxGroundDNF)
				if err != nil {
					ferr = &Error{Pos: s.a.Pos, Msg: fmt.Sprintf("action %s: effect condition has %v", s.a.Name, err)}
					return false
				}
			}
			if len(d) > 0 && id < 0 {
				ferr = fmt.Errorf("internal error: conditional effect atom of %s not reached", s.a.Name)
				return false
			}
			for _, c := range d {
				if len(c.pos)+len(c.neg) == 0 {
					if e.del {
						ge.del = append(ge.del, id)
					} else {
						ge.add = append(ge.add, id)
					}
					break
				}
				k := c.key()
				j, ok := condIndex[k]
				if !ok {
					j = len(ge.cond)
					condIndex[k] = j
					ge.cond = append(ge.cond, gcondEffect{c: c})
				}
				if e.del {
					ge.cond[j].del = append(ge.cond[j].del, id)
				} else {
					ge.cond[j].add = append(ge.cond[j].add, id)
				}
			}
			return g.step(s.a.Name)
		})
		if ferr != nil {
			return nil, ferr
		}
		if g.err != nil {
			return nil, g.err
		}
	}
	slices.Sort(ge.add)
	ge.add = slices.Compact(ge.add)
	slices.Sort(ge.del)
	ge.del = slices.Compact(ge.del)
	// Add after delete: a fact both added and deleted holds afterwards.
	ge.del = slices.DeleteFunc(ge.del, func(x int32) bool { _, found := slices.BinarySearch(ge.add, x); return found })
	for i := range ge.cond {
		ce := &ge.cond[i]
		slices.Sort(ce.add)
		ce.add = slices.Compact(ce.add)
		slices.Sort(ce.del)
		ce.del = slices.Compact(ce.del)
	}
	if !hasCosts {
		ge.cost = 1
		return ge, nil
	}
	total := 0.0
	for _, ct := range s.costs {
		v := ct.value
		if ct.fn != "" {
			args := g.groundArgs(ct.args, bb, buf[:0])
			names := make([]string, len(args))
			for i, a := range args {
				names[i] = g.objNames[a]
			}
			var ok bool
			v, ok = g.numeric[ct.fn+"("+strings.Join(names, " ")]
			if !ok {
				return nil, &Error{Pos: ct.pos, Msg: fmt.Sprintf("action %s: (%s %s) has no initial value", s.a.Name, ct.fn, strings.Join(names, " "))}
			}
		}
		total += v
	}
	if total < 0 || total != math.Trunc(total) || total > math.MaxInt32 {
		return nil, &Error{Pos: s.a.Pos, Msg: fmt.Sprintf("action %s: cost %s is not a non-negative integer", s.a.Name, formatNumber(total))}
	}
	ge.cost = int(total)
	return ge, nil
}

// axInstance is a ground axiom before fact ids are assigned.
type axInstance struct {
	head int32
	body gconj
}

// groundPre grounds the precondition of variant v of s under binding b into
// a DNF: the variant's literals (static ones folded away) and its residual
// formulas. nil means false.
func (g *grounder) groundPre(s *cschema, v *cvariant, b []int32) ([]gconj, error) {
	base := gconj{}
	var buf [8]int32
	for _, l := range v.lits {
		if l.pred == eqPred || g.static[l.pred] {
			continue // checked by the join and filters
		}
		args := g.groundArgs(l.args, b, buf[:0])
		id := g.lookup(l.pred, args)
		switch {
		case id >= 0 && l.neg:
			base.neg = append(base.neg, id)
		case id >= 0:
			base.pos = append(base.pos, id)
		case !l.neg:
			return nil, fmt.Errorf("internal error: precondition atom of %s not reached", s.a.Name)
		}
	}
	if !base.normalize() {
		return nil, nil
	}
	if len(v.resid) == 0 {
		return []gconj{base}, nil
	}
	d, err := g.groundDNF(s.slotTypes, junction(cAnd, v.resid), slices.Clone(b), maxGroundDNF)
	if err != nil {
		what := "precondition"
		if s.axiom {
			what = "body"
		}
		return nil, &Error{Pos: s.a.Pos, Msg: fmt.Sprintf("%s%s: %s has %v", schemaName(s), g.argString(b[:s.nparams]), what, err)}
	}
	var disj []gconj
	for _, c := range d {
		z := gconj{pos: append(slices.Clone(base.pos), c.pos...), neg: append(slices.Clone(base.neg), c.neg...)}
		if z.normalize() {
			disj = append(disj, z)
		}
	}
	return disj, nil
}

// schemaName is "action NAME" or "axiom PREDICATE" for messages.
func schemaName(s *cschema) string {
	if s.axiom {
		return s.a.Name
	}
	return "action " + s.a.Name
}

// instance is a ground action before fact ids are assigned.
type instance struct {
	schema int
	args   []int32
	pre    gconj
	eff    *groundEffects
}

// build instantiates actions and the goal and assembles the Task.
func (g *grounder) build(schemas []*cschema) (*Task, error) {
	hasCosts := g.d.HasCosts
	var insts []instance
	var axInsts []axInstance
	for si, s := range schemas {
		effs := make([]*groundEffects, len(s.paramBindings))
		for _, v := range s.variants {
			for bi, b := range v.bindings {
				if !g.step(s.a.Name) {
					return nil, g.err
				}
				disj, err := g.groundPre(s, v, b)
				if err != nil {
					return nil, err
				}
				if s.axiom {
					var buf [8]int32
					head := g.lookup(s.head, g.groundArgs(s.effects[0].atom.args, b, buf[:0]))
					if head < 0 {
						return nil, fmt.Errorf("internal error: head of %s not reached", s.a.Name)
					}
					for _, c := range disj {
						axInsts = append(axInsts, axInstance{head: head, body: c})
					}
					continue
				}
				if len(disj) == 0 {
					continue
				}
				eff := effs[v.paramOf[bi]]
				if eff == nil {
					var err error
					eff, err = g.effectsOf(s, b, hasCosts)
					if err != nil {
						return nil, err
					}
					effs[v.paramOf[bi]] = eff
				}
				for _, c := range disj {
					insts = append(insts, instance{schema: si, args: b[:s.nparams], pre: c, eff: eff})
				}
				if len(insts) > g.lim.MaxActions {
					return nil, &LimitError{Action: s.a.Name, Pos: s.a.Pos, What: "ground actions", Limit: float64(g.lim.MaxActions),
						Count: int64(len(insts)), Estimate: s.estimate.n, Factors: s.estimate.String()}
				}
			}
		}
	}
	// Deterministic order: schema, arguments, precondition. Sorting an index
	// permutation avoids moving the (pointer-holding) instances around.
	order := make([]int32, len(insts))
	for i := range order {
		order[i] = int32(i)
	}
	cmpInst := func(x, y int32) int {
		a, b := &insts[x], &insts[y]
		if c := cmp.Compare(a.schema, b.schema); c != 0 {
			return c
		}
		if c := slices.Compare(a.args, b.args); c != 0 {
			return c
		}
		if c := slices.Compare(a.pre.pos, b.pre.pos); c != 0 {
			return c
		}
		return slices.Compare(a.pre.neg, b.pre.neg)
	}
	slices.SortFunc(order, cmpInst)
	order = slices.CompactFunc(order, func(x, y int32) bool { return cmpInst(x, y) == 0 })

	// Fluent facts, sorted by predicate then arguments.
	var fluent []int32
	for id, a := range g.atoms {
		if !g.static[a.pred] {
			fluent = append(fluent, int32(id))
		}
	}
	slices.SortFunc(fluent, func(x, y int32) int {
		a, b := &g.atoms[x], &g.atoms[y]
		if c := cmp.Compare(a.pred, b.pred); c != 0 {
			return c
		}
		return slices.Compare(a.args, b.args)
	})
	factOf := make([]int32, len(g.atoms))
	for i := range factOf {
		factOf[i] = -1
	}
	t := &Task{DomainName: g.d.Name, ProblemName: g.p.Name, Objects: g.objNames, HasCosts: hasCosts,
		factIndex: make(map[string]int, len(fluent)), Params: map[string][]string{}}
	for _, a := range g.d.Actions {
		names := make([]string, len(a.Params))
		for i, p := range a.Params {
			names[i] = strings.TrimPrefix(p.Name, "?")
		}
		t.Params[a.Name] = names
	}
	for i, id := range fluent {
		factOf[id] = int32(i)
		f := g.fact(id)
		t.Facts = append(t.Facts, f)
		t.factIndex[f.String()] = i
	}
	for id, a := range g.atoms {
		if g.static[a.pred] {
			t.Static = append(t.Static, g.fact(int32(id)))
		}
	}
	t.Init = NewState(len(t.Facts))
	for _, a := range g.p.Init {
		pid := g.predIndex[a.Pred]
		if g.static[pid] {
			continue
		}
		args := make([]int32, len(a.Args))
		for i, s := range a.Args {
			args[i] = g.objIndex[s]
		}
		t.Init.Set(int(factOf[g.lookup(pid, args)]))
	}
	ids := func(xs []int32) []int {
		if len(xs) == 0 {
			return nil
		}
		out := make([]int, len(xs))
		for i, x := range xs {
			out[i] = int(factOf[x])
		}
		slices.Sort(out)
		return out
	}
	conj := func(c gconj) Conj { return Conj{Pos: ids(c.pos), Neg: ids(c.neg)} }
	t.Actions = make([]Action, len(order))
	for i, k := range order {
		in := &insts[k]
		s := schemas[in.schema]
		args := make([]string, len(in.args))
		for j, o := range in.args {
			args[j] = g.objNames[o]
		}
		a := Action{Name: s.a.Name, Args: args, Pre: conj(in.pre), Add: ids(in.eff.add), Del: ids(in.eff.del), Cost: in.eff.cost}
		for _, ce := range in.eff.cond {
			a.Cond = append(a.Cond, CondEffect{Cond: conj(ce.c), Add: ids(ce.add), Del: ids(ce.del)})
		}
		t.Actions[i] = a
	}
	t.Axioms = make([]Axiom, 0, len(axInsts))
	for _, in := range axInsts {
		t.Axioms = append(t.Axioms, Axiom{Head: int(factOf[in.head]), Body: conj(in.body), Stratum: g.strata[g.atoms[in.head].pred]})
	}
	slices.SortFunc(t.Axioms, func(a, b Axiom) int {
		if c := cmp.Compare(a.Stratum, b.Stratum); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Head, b.Head); c != 0 {
			return c
		}
		if c := slices.Compare(a.Body.Pos, b.Body.Pos); c != 0 {
			return c
		}
		return slices.Compare(a.Body.Neg, b.Body.Neg)
	})
	t.Axioms = slices.CompactFunc(t.Axioms, func(a, b Axiom) bool {
		return a.Head == b.Head && slices.Equal(a.Body.Pos, b.Body.Pos) && slices.Equal(a.Body.Neg, b.Body.Neg)
	})
	goal, err := g.groundGoal()
	if err != nil {
		return nil, err
	}
	for _, c := range goal {
		t.Goal = append(t.Goal, conj(c))
	}
	if g.lim.RelevantAxioms {
		t.Axioms = relevantAxioms(t)
	}
	for _, ts := range g.typeSets {
		ts.names = make([]string, len(ts.list))
		for i, o := range ts.list {
			ts.names[i] = g.objNames[o]
		}
	}
	t.lifted = &lifted{d: g.d, p: g.p, types: g.types, objIndex: g.objIndex, typeSets: g.typeSets, static: map[string]bool{}}
	for _, f := range t.Static {
		t.lifted.static[f.String()] = true
	}
	if len(t.Axioms) > 0 {
		// Init's derived facts first: the successor index built by finish
		// estimates from Init how likely each fact is to hold.
		t.axioms = newAxiomEval(t)
		t.EvalAxioms(t.Init)
	}
	t.finish()
	return t, nil
}

func (g *grounder) fact(id int32) Fact {
	a := &g.atoms[id]
	f := Fact{Predicate: g.predNames[a.pred], Args: make([]string, len(a.args))}
	for i, o := range a.args {
		f.Args[i] = g.objNames[o]
	}
	return f
}

func (g *grounder) argString(b []int32) string {
	var s strings.Builder
	for _, o := range b {
		s.WriteByte(' ')
		s.WriteString(g.objNames[o])
	}
	return s.String()
}

// groundGoal grounds the goal into a DNF over fluent atom ids.
func (g *grounder) groundGoal() ([]gconj, error) {
	sl, gc := g.goalSlots, g.goal
	var slotTypes []*typeSet
	for _, ts := range sl.types {
		slotTypes = append(slotTypes, g.typeSetOf(ts))
	}
	vs := liftedDNF(gc)
	allContradictory := len(vs) > 0
	for i := range vs {
		if !vs[i].contradictory() {
			allContradictory = false
		}
	}
	if allContradictory {
		return nil, &Error{Pos: g.p.Goal.Pos, Msg: "the goal is contradictory: it requires a fact and its negation"}
	}
	s := &cschema{a: &ActionSchema{Name: "goal", Pos: g.p.Goal.Pos}, slotTypes: slotTypes}
	var out []gconj
	seen := map[string]bool{}
	for _, v := range g.planVariants(vs, nil) {
		var ferr error
		g.join(s, v, len(slotTypes), func(b []int32) {
			if ferr != nil {
				return
			}
			base := gconj{}
			var buf [8]int32
			for _, l := range v.lits {
				if l.pred == eqPred || g.static[l.pred] {
					continue
				}
				id := g.lookup(l.pred, g.groundArgs(l.args, b, buf[:0]))
				if id >= 0 && l.neg {
					base.neg = append(base.neg, id)
				} else if id >= 0 {
					base.pos = append(base.pos, id)
				}
			}
			if !base.normalize() {
				return
			}
			disj := []gconj{base}
			if len(v.resid) > 0 {
				d, err := g.groundDNF(slotTypes, junction(cAnd, v.resid), slices.Clone(b), maxGoalDNF)
				if err != nil {
					ferr = &Error{Pos: g.p.Goal.Pos, Msg: "the goal has " + err.Error()}
					return
				}
				disj = disj[:0]
				for _, c := range d {
					z := gconj{pos: append(slices.Clone(base.pos), c.pos...), neg: append(slices.Clone(base.neg), c.neg...)}
					if z.normalize() {
						disj = append(disj, z)
					}
				}
			}
			for _, c := range disj {
				if k := c.key(); !seen[k] {
					seen[k] = true
					out = append(out, c)
				}
			}
			if len(out) > maxGoalDNF {
				g.blewUp = true
				ferr = &Error{Pos: g.p.Goal.Pos, Msg: fmt.Sprintf("the goal has more than %d disjuncts in disjunctive normal form", maxGoalDNF)}
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		if g.err != nil {
			return nil, g.err
		}
	}
	// A disjunct that is true makes the others redundant.
	for _, c := range out {
		if len(c.pos)+len(c.neg) == 0 {
			return []gconj{{}}, nil
		}
	}
	return out, nil
}
