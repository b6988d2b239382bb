package pddl

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
)

// This file grounds a lifted Domain and Problem into a Task.
//
// Names across stages: Problem.Objects and Domain.Constants -> grounder
// object ids (int32); Problem.Init -> the atom store (static atoms: of
// predicates no action changes; fluent atoms: the rest) -> Task.Static and
// Task.Init; each ActionSchema -> compiled variants (normalize.go) whose
// bindings are found by joining their positive literals against the atoms
// reached so far (relaxed reachability: negative literals and residual
// quantified formulas are ignored until instantiation), repeated until no new
// atom is reached -> Task.Actions (one ground action per binding and
// disjunct, static facts folded away); Problem.Goal -> Task.Goal (DNF).
// Bindings are never enumerated as a cross product of the parameter types,
// except for parameters that occur in no positive precondition.
//
// Bounded work: before any join runs, estimate.go bounds every action's
// ground actions and join bindings from its parameters' objects (pruned by
// the static facts) and refuses a task over GroundLimits with a
// *LimitError; the joins and quantifier expansions then count their steps
// against GroundLimits.MaxSteps and poll the context every few thousand
// steps, so a cancelled request stops within milliseconds.

// Limits that turn a grounding blow-up into a clear error.
const (
	// maxGroundDNF bounds the disjuncts of one ground precondition, effect
	// condition or the goal.
	maxGroundDNF = 1 << 12
	// maxGoalDNF bounds the disjuncts of the goal.
	maxGoalDNF = 1 << 16
	// ctxEvery is how many steps pass between two polls of the context.
	ctxEvery = 1 << 12
)

// Default GroundLimits (the values a zero field means).
const (
	DefaultMaxGroundActions = 2_000_000
	DefaultMaxJoinBindings  = 4_000_000
	DefaultMaxGroundSteps   = 200_000_000
	// DefaultMaxGroundEstimate is high because the estimate ignores
	// fluent preconditions: on IPC's caldera it exceeds the true count
	// by up to 5000 times.
	DefaultMaxGroundEstimate = 1e10
)

// GroundLimits bound the memory and time of one grounding. The zero value
// of every field means its default. Three bounds are counted as grounding
// goes (it stops as soon as one is passed, so memory stays in proportion to
// them) and one is checked before any join runs.
type GroundLimits struct {
	// MaxActions bounds the ground actions of the task (counted). 0 means
	// DefaultMaxGroundActions.
	MaxActions int
	// MaxBindings bounds the join bindings kept by reachability, all
	// actions together (counted; each costs about 250 bytes until the
	// task is built). 0 means DefaultMaxJoinBindings.
	MaxBindings int
	// MaxSteps bounds the work of the whole grounding: atoms tried by the
	// joins, objects enumerated for free variables and quantifiers,
	// type-hierarchy and estimate steps (counted). 0 means
	// DefaultMaxGroundSteps.
	MaxSteps int
	// MaxEstimate refuses, before any join runs, an action whose ground
	// actions or join bindings are estimated above it: an upper bound
	// from the objects each variable may take (its type, pruned by the
	// static facts it occurs in) and the static relations that bind
	// several variables together (estimate.go). 0 means
	// DefaultMaxGroundEstimate.
	MaxEstimate float64
}

func (l GroundLimits) withDefaults() GroundLimits {
	if l.MaxActions <= 0 {
		l.MaxActions = DefaultMaxGroundActions
	}
	if l.MaxBindings <= 0 {
		l.MaxBindings = DefaultMaxJoinBindings
	}
	if l.MaxSteps <= 0 {
		l.MaxSteps = DefaultMaxGroundSteps
	}
	if l.MaxEstimate <= 0 {
		l.MaxEstimate = DefaultMaxGroundEstimate
	}
	return l
}

// typeSet is the objects of a type (or of an either of types).
type typeSet struct {
	member []bool
	list   []int32
	names  []string // object names of list (filled when grounding ends)
}

// gatom is an atom of the store: a predicate id and object ids.
type gatom struct {
	pred int32
	args []int32
}

// cschema is a compiled action schema with its grounding state.
type cschema struct {
	a          *ActionSchema
	nparams    int
	slotTypes  []*typeSet
	slotNames  []string
	variants   []*cvariant
	effects    []effEntry
	costs      []costTerm
	condEffect bool // has entries with a condition or forall variables

	paramSeen     map[string]int32 // parameter binding -> index in paramBindings
	paramBindings [][]int32        // full bindings of new parameter bindings, in discovery order
	estimate      estimate         // upper bound on the ground actions (checkEstimates)
}

// cvariant is a variant with its join plan and the bindings found.
type cvariant struct {
	variant
	vars      []int // params and existential slots
	joinOrder []int // positive non-equality literals, in join order
	filters   []int // equality and negative static literals
	lastCount []int // atoms per joined predicate at the last evaluation
	evaluated bool
	seen      map[string]bool
	bindings  [][]int32
	paramOf   []int32 // index in the schema's paramBindings of each binding
}

// grounder holds the state of one grounding.
type grounder struct {
	ctx   context.Context
	lim   GroundLimits
	d     *Domain
	p     *Problem
	types *typeTree

	objNames []string
	objIndex map[string]int32
	objTypes [][]string // declared types of each object
	typeSets map[string]*typeSet
	children map[string][]string // subtypes of each type (built on first use)

	predNames []string
	predIndex map[string]int32
	predArity []int
	static    []bool

	atoms     []gatom
	atomIndex map[string]int32
	byPred    [][]int32
	byArg     [][]map[int32][]int32
	keyBuf    []byte

	numeric map[string]float64
	steps   int
	kept    int // join bindings kept by reach
	err     error
}

// Ground checks p against d and grounds them into a Task, within the
// default GroundLimits. Errors carry the positions of the offending PDDL.
func Ground(d *Domain, p *Problem) (*Task, error) {
	t, _, err := GroundContext(context.Background(), d, p, GroundLimits{})
	return t, err
}

// GroundWarnings is Ground that also returns the warnings of checking p
// against d (objects of unexpected types, undeclared names tolerated, ...).
func GroundWarnings(d *Domain, p *Problem) (*Task, []Warning, error) {
	return GroundContext(context.Background(), d, p, GroundLimits{})
}

// GroundContext is GroundWarnings that stops when ctx ends (returning an
// error that wraps ctx.Err()) and refuses tasks over lim with a *LimitError
// before allocating their ground actions. It is what a server grounding
// untrusted PDDL calls.
func GroundContext(ctx context.Context, d *Domain, p *Problem, lim GroundLimits) (t *Task, warns []Warning, err error) {
	defer func() {
		// A bug must not take the caller down: report it as an error.
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("internal error while grounding: %v", r)
		}
		// Positioned errors are always returned as an ErrorList.
		if pe, ok := err.(*Error); ok {
			err = ErrorList{pe}
		}
	}()
	if d == nil || p == nil {
		return nil, nil, fmt.Errorf("ground: nil domain or problem")
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("grounding stopped: %w", err)
	}
	ps := &parser{}
	c := newChecker(d, ps, false)
	c.checkProblem(p)
	if err := ps.result(); err != nil {
		return nil, ps.warns, err
	}
	g := &grounder{ctx: ctx, lim: lim.withDefaults(), d: d, p: p, types: c.types}
	if err := g.setup(); err != nil {
		return nil, ps.warns, err
	}
	schemas, err := g.compileSchemas()
	if err != nil {
		return nil, ps.warns, err
	}
	if g.err != nil {
		return nil, ps.warns, g.err
	}
	if err := g.checkEstimates(schemas); err != nil {
		return nil, ps.warns, err
	}
	g.reach(schemas)
	if g.err != nil {
		return nil, ps.warns, g.err
	}
	t, err = g.build(schemas)
	if err != nil {
		return nil, ps.warns, err
	}
	if len(t.Goal) == 0 {
		ps.warnf(p.Goal.Pos, "the goal is unreachable even ignoring delete effects")
	}
	return t, ps.warns, nil
}

// setup numbers objects and predicates and loads the initial atoms.
func (g *grounder) setup() error {
	g.objIndex = map[string]int32{}
	addObj := func(tn TypedName) {
		id, ok := g.objIndex[tn.Name]
		if !ok {
			id = int32(len(g.objNames))
			g.objIndex[tn.Name] = id
			g.objNames = append(g.objNames, tn.Name)
			g.objTypes = append(g.objTypes, nil)
		}
		g.objTypes[id] = append(g.objTypes[id], tn.Types...)
	}
	for _, k := range g.d.Constants {
		addObj(k)
	}
	for _, o := range g.p.Objects {
		addObj(o)
	}
	// Type sets are built on first use (typeSetOf): only the types the
	// domain and goal quantify over, each in one pass over the objects.
	g.typeSets = map[string]*typeSet{}

	g.predIndex = map[string]int32{}
	for _, pd := range g.d.Predicates {
		if _, dup := g.predIndex[pd.Name]; dup {
			continue
		}
		g.predIndex[pd.Name] = int32(len(g.predNames))
		g.predNames = append(g.predNames, pd.Name)
		g.predArity = append(g.predArity, len(pd.Params))
	}
	n := len(g.predNames)
	g.static = make([]bool, n)
	for i := range g.static {
		g.static[i] = true
	}
	var markFluent func(e *Effect)
	markFluent = func(e *Effect) {
		if e == nil {
			return
		}
		switch e.Kind {
		case EAdd, EDel:
			if id, ok := g.predIndex[e.Pred]; ok {
				g.static[id] = false
			}
		}
		for _, s := range e.Sub {
			markFluent(s)
		}
	}
	for _, a := range g.d.Actions {
		markFluent(a.Effect)
	}
	g.atomIndex = map[string]int32{}
	g.byPred = make([][]int32, n)
	g.byArg = make([][]map[int32][]int32, n)
	for i := range g.byArg {
		g.byArg[i] = make([]map[int32][]int32, g.predArity[i])
		for j := range g.byArg[i] {
			g.byArg[i][j] = map[int32][]int32{}
		}
	}
	for _, a := range g.p.Init {
		if !g.step("the initial state") {
			return g.err
		}
		pid := g.predIndex[a.Pred]
		args := make([]int32, len(a.Args))
		for i, s := range a.Args {
			args[i] = g.objIndex[s]
		}
		g.addAtom(pid, args)
	}
	g.numeric = map[string]float64{}
	for _, nf := range g.p.NumericInit {
		g.numeric[nf.Fn+"("+strings.Join(nf.Args, " ")] = nf.Value
	}
	return nil
}

// typeSetOf returns the objects of a type list (an either): the objects
// declared of one of the types or of a subtype. It counts its work as steps
// (a hierarchy may be a chain of thousands of types); after a failed step
// the set may be incomplete, and g.err says so.
func (g *grounder) typeSetOf(types []string) *typeSet {
	key := strings.Join(types, " ")
	if ts, ok := g.typeSets[key]; ok {
		return ts
	}
	ts := &typeSet{member: make([]bool, len(g.objNames))}
	g.typeSets[key] = ts
	switch {
	case len(types) > 1:
		for _, t := range types {
			for _, o := range g.typeSetOf([]string{t}).list {
				ts.member[o] = true
			}
		}
	case len(types) == 1 && types[0] == "object":
		for o := range ts.member {
			ts.member[o] = true
		}
	case len(types) == 1:
		if g.children == nil {
			g.children = g.types.children()
		}
		// The type and its descendants.
		desc := map[string]bool{types[0]: true}
		queue := []string{types[0]}
		for len(queue) > 0 && g.step("the type hierarchy") {
			t := queue[0]
			queue = queue[1:]
			for _, c := range g.children[t] {
				if !desc[c] {
					desc[c] = true
					queue = append(queue, c)
				}
			}
		}
		for o, tys := range g.objTypes {
			if !g.step("the type hierarchy") {
				break
			}
			for _, t := range tys {
				if desc[t] {
					ts.member[o] = true
					break
				}
			}
		}
	}
	for o, m := range ts.member {
		if m {
			ts.list = append(ts.list, int32(o))
		}
	}
	g.typeSets[key] = ts
	return ts
}

func (g *grounder) key(pred int32, args []int32) []byte {
	b := g.keyBuf[:0]
	b = binary.LittleEndian.AppendUint32(b, uint32(pred))
	for _, a := range args {
		b = binary.LittleEndian.AppendUint32(b, uint32(a))
	}
	g.keyBuf = b
	return b
}

// lookup returns the id of a stored atom, or -1.
func (g *grounder) lookup(pred int32, args []int32) int32 {
	if id, ok := g.atomIndex[string(g.key(pred, args))]; ok {
		return id
	}
	return -1
}

// addAtom stores an atom if new and reports whether it was new.
func (g *grounder) addAtom(pred int32, args []int32) bool {
	k := g.key(pred, args)
	if _, ok := g.atomIndex[string(k)]; ok {
		return false
	}
	id := int32(len(g.atoms))
	g.atomIndex[string(k)] = id
	a := gatom{pred: pred, args: slices.Clone(args)}
	g.atoms = append(g.atoms, a)
	g.byPred[pred] = append(g.byPred[pred], id)
	for i, o := range a.args {
		g.byArg[pred][i][o] = append(g.byArg[pred][i][o], id)
	}
	return true
}

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

func (g *grounder) fail(err error) {
	if g.err == nil {
		g.err = err
	}
}

// step counts one step of work for what (an action's name, "the goal",
// ...) and reports whether grounding may go on: false after the step
// budget is spent, the context has ended or another error. It polls the
// context every ctxEvery steps.
func (g *grounder) step(what string) bool {
	g.steps++
	if g.steps%ctxEvery == 0 && g.err == nil {
		if err := g.ctx.Err(); err != nil {
			g.fail(fmt.Errorf("grounding stopped in %s: %w", what, err))
			return false
		}
	}
	if g.steps > g.lim.MaxSteps && g.err == nil {
		g.fail(&LimitError{What: "grounding steps", Limit: float64(g.lim.MaxSteps), Count: int64(g.steps),
			Detail: "(at " + what + ")"})
		return false
	}
	return g.err == nil
}

// join calls emit with every binding of v's slots (params and existential
// variables) that satisfies its positive literals over the stored atoms,
// the slot types and its filters. emit must not keep b.
func (g *grounder) join(s *cschema, v *cvariant, nslots int, emit func(b []int32)) {
	b := make([]int32, nslots)
	for i := range b {
		b[i] = -1
	}
	var rec func(i int)
	rec = func(i int) {
		if g.err != nil {
			return
		}
		if i == len(v.joinOrder) {
			g.enumFree(s.a.Name, s.slotTypes, v, b, 0, emit)
			return
		}
		l := &v.lits[v.joinOrder[i]]
		cands := g.byPred[l.pred]
		for pos, t := range l.args {
			o := int32(-1)
			if !t.isVar() {
				o = t.obj()
			} else if b[t] >= 0 {
				o = b[t]
			}
			if o >= 0 {
				if c := g.byArg[l.pred][pos][o]; len(c) < len(cands) {
					cands = c
				}
			}
		}
		var buf [8]term
		for _, ai := range cands {
			if !g.step(s.a.Name) {
				return
			}
			args := g.atoms[ai].args
			newly := buf[:0]
			ok := true
			for pos, t := range l.args {
				x := args[pos]
				switch {
				case !t.isVar():
					ok = t.obj() == x
				case b[t] >= 0:
					ok = b[t] == x
				case !s.slotTypes[t].member[x]:
					ok = false
				default:
					b[t] = x
					newly = append(newly, t)
				}
				if !ok {
					break
				}
			}
			if ok {
				rec(i + 1)
			}
			for _, t := range newly {
				b[t] = -1
			}
		}
	}
	rec(0)
}

// enumFree binds the variant's slots that no positive literal bound, over
// their types, then applies the filters.
func (g *grounder) enumFree(what string, slotTypes []*typeSet, v *cvariant, b []int32, k int, emit func([]int32)) {
	for k < len(v.vars) && b[v.vars[k]] >= 0 {
		k++
	}
	if k == len(v.vars) {
		if g.passFilters(v, b) {
			emit(b)
		}
		return
	}
	slot := v.vars[k]
	for _, o := range slotTypes[slot].list {
		if !g.step(what) {
			return
		}
		b[slot] = o
		g.enumFree(what, slotTypes, v, b, k+1, emit)
	}
	b[slot] = -1
}

func (g *grounder) groundArgs(args []term, b []int32, dst []int32) []int32 {
	dst = dst[:0]
	for _, t := range args {
		if t.isVar() {
			dst = append(dst, b[t])
		} else {
			dst = append(dst, t.obj())
		}
	}
	return dst
}

func (g *grounder) passFilters(v *cvariant, b []int32) bool {
	var buf [8]int32
	for _, i := range v.filters {
		l := &v.lits[i]
		args := g.groundArgs(l.args, b, buf[:0])
		if l.pred == eqPred {
			if (args[0] == args[1]) == l.neg {
				return false
			}
			continue
		}
		// Negative static literal: false when the atom is in the initial state.
		if g.lookup(l.pred, args) >= 0 {
			return false
		}
	}
	return true
}

func bindingKey(b []int32) string {
	buf := make([]byte, 0, 4*len(b))
	for _, x := range b {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(x))
	}
	return string(buf)
}

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

// gconj is a ground conjunction over atom ids.
type gconj struct {
	pos, neg []int32
}

// normalize sorts and deduplicates the literals; it reports false when the
// conjunction is contradictory.
func (c *gconj) normalize() bool {
	slices.Sort(c.pos)
	c.pos = slices.Compact(c.pos)
	slices.Sort(c.neg)
	c.neg = slices.Compact(c.neg)
	i, j := 0, 0
	for i < len(c.pos) && j < len(c.neg) {
		switch {
		case c.pos[i] == c.neg[j]:
			return false
		case c.pos[i] < c.neg[j]:
			i++
		default:
			j++
		}
	}
	return true
}

func (c gconj) key() string {
	buf := make([]byte, 0, 4*(len(c.pos)+len(c.neg))+4)
	for _, x := range c.pos {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(x))
	}
	buf = binary.LittleEndian.AppendUint32(buf, math.MaxUint32)
	for _, x := range c.neg {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(x))
	}
	return string(buf)
}

// dedupe removes repeated conjunctions (each already normalized).
func dedupe(cs []gconj) []gconj {
	if len(cs) < 2 {
		return cs
	}
	seen := make(map[string]bool, len(cs))
	out := cs[:0]
	for _, c := range cs {
		k := c.key()
		if !seen[k] {
			seen[k] = true
			out = append(out, c)
		}
	}
	return out
}

// dnfTooLarge is the error of a ground formula whose DNF exceeds the limit.
type dnfTooLarge struct{ limit int }

func (e dnfTooLarge) Error() string {
	return fmt.Sprintf("more than %d disjuncts in disjunctive normal form", e.limit)
}

// groundDNF grounds c under b into a DNF over fluent atom ids, folding static
// atoms (true iff in the initial state) and unreachable atoms (false). nil is
// false; a single empty conjunction is true.
func (g *grounder) groundDNF(slotTypes []*typeSet, c *cond, b []int32, limit int) ([]gconj, error) {
	switch c.kind {
	case cTrue:
		return []gconj{{}}, nil
	case cFalse:
		return nil, nil
	case cLit:
		var buf [8]int32
		args := g.groundArgs(c.lit.args, b, buf[:0])
		if c.lit.pred == eqPred {
			if (args[0] == args[1]) != c.lit.neg {
				return []gconj{{}}, nil
			}
			return nil, nil
		}
		id := g.lookup(c.lit.pred, args)
		if g.static[c.lit.pred] || id < 0 {
			if (id >= 0) != c.lit.neg {
				return []gconj{{}}, nil
			}
			return nil, nil
		}
		if c.lit.neg {
			return []gconj{{neg: []int32{id}}}, nil
		}
		return []gconj{{pos: []int32{id}}}, nil
	case cAnd, cForall:
		acc := []gconj{{}}
		var err error
		conjoin := func(sub *cond) bool {
			var d []gconj
			d, err = g.groundDNF(slotTypes, sub, b, limit)
			if err != nil || len(d) == 0 {
				acc = nil
				return false
			}
			if len(d) == 1 && len(d[0].pos)+len(d[0].neg) == 0 {
				return true
			}
			if len(acc)*len(d) > limit {
				err = dnfTooLarge{limit}
				return false
			}
			next := make([]gconj, 0, len(acc)*len(d))
			for _, x := range acc {
				for _, y := range d {
					z := gconj{pos: append(slices.Clone(x.pos), y.pos...), neg: append(slices.Clone(x.neg), y.neg...)}
					if z.normalize() {
						next = append(next, z)
					}
				}
			}
			acc = dedupe(next)
			return len(acc) > 0
		}
		if c.kind == cAnd {
			for _, s := range c.sub {
				if !conjoin(s) {
					break
				}
			}
		} else {
			g.forEach(slotTypes, c.vars, b, func() bool { return conjoin(c.sub[0]) && g.step("formula") })
		}
		if g.err != nil {
			return nil, g.err
		}
		return acc, err
	case cOr, cExists:
		var acc []gconj
		var err error
		disjoin := func(sub *cond) bool {
			var d []gconj
			d, err = g.groundDNF(slotTypes, sub, b, limit)
			if err != nil {
				return false
			}
			for _, x := range d {
				if len(x.pos)+len(x.neg) == 0 {
					acc = []gconj{{}}
					return false // true: stop
				}
			}
			acc = append(acc, d...)
			if len(acc) > limit {
				acc = dedupe(acc)
				if len(acc) > limit {
					err = dnfTooLarge{limit}
					return false
				}
			}
			return true
		}
		if c.kind == cOr {
			for _, s := range c.sub {
				if !disjoin(s) {
					break
				}
			}
		} else {
			g.forEach(slotTypes, c.vars, b, func() bool { return disjoin(c.sub[0]) && g.step("formula") })
		}
		if g.err != nil {
			return nil, g.err
		}
		return dedupe(acc), err
	}
	return nil, nil
}

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
	for si, s := range schemas {
		effs := make([]*groundEffects, len(s.paramBindings))
		for _, v := range s.variants {
			for bi, b := range v.bindings {
				if !g.step(s.a.Name) {
					return nil, g.err
				}
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
					continue
				}
				disj := []gconj{base}
				if len(v.resid) > 0 {
					d, err := g.groundDNF(s.slotTypes, junction(cAnd, v.resid), slices.Clone(b), maxGroundDNF)
					if err != nil {
						return nil, &Error{Pos: s.a.Pos, Msg: fmt.Sprintf("action %s%s: precondition has %v", s.a.Name, g.argString(b[:s.nparams]), err)}
					}
					disj = disj[:0]
					for _, c := range d {
						z := gconj{pos: append(slices.Clone(base.pos), c.pos...), neg: append(slices.Clone(base.neg), c.neg...)}
						if z.normalize() {
							disj = append(disj, z)
						}
					}
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
	goal, err := g.groundGoal()
	if err != nil {
		return nil, err
	}
	for _, c := range goal {
		t.Goal = append(t.Goal, conj(c))
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
	sl := &slots{}
	c := &compiler{g: g, slots: sl}
	gc, err := c.formula(g.p.Goal, map[string]int{}, false)
	if err != nil {
		return nil, err
	}
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
