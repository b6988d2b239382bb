package pddl

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// The ground*.go files ground a lifted Domain and Problem into a Task, one
// phase a file: ground.go (entry points, limits, the atom store),
// ground_compile.go (variants planned for the join), ground_reach.go (the
// relaxed fixpoint), ground_join.go (bindings), ground_dnf.go (ground
// conditions) and ground_build.go (the Task).
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
	// CompileBound, when above 0, grounds with every condition (precondition,
	// effect condition, goal, rule body) whose disjunctive normal form may
	// have more than CompileBound disjuncts per binding compiled into
	// derived predicates from the start, as Fast Downward's translator
	// compiles quantified conditions into axioms (TranslateCompileBound is
	// the bound nesy solve uses). 0, the default, expands conditions into
	// DNF and compiles only when one exceeds its DNF bound, so that tasks
	// without large conditions keep exactly the ground actions their PDDL
	// spells (what the environments and the decoder's action texts rely on).
	CompileBound float64
	// CompileForalls grounds with every universally quantified subformula
	// of a condition (after negations are pushed to the literals, so a
	// negated existential too) compiled into the negation of a derived
	// predicate, whatever its size, the shape Fast Downward's translator
	// gives a task: its remove_universal_quantifiers makes the foralls
	// axioms, and only then are disjunctions split into action copies and
	// existentials made parameters (here: the DNF variants and the join's
	// existential variables). CompileBound, when also set, then compiles
	// what still exceeds it.
	CompileForalls bool
	// RelevantAxioms keeps only the axioms whose derived facts a goal, an
	// action precondition or an effect condition needs, directly or through
	// the bodies of other kept axioms, as Fast Downward's translator keeps
	// only the necessary axiom literals; every other derived fact is then
	// never derived (false in every state). Planners lose nothing by it
	// and evaluate fewer axioms per state (psr-middle p21: 4,643 ground
	// axioms, of which FD keeps 590); false keeps every axiom, so that every
	// derived fact has its PDDL value.
	RelevantAxioms bool
}

// TranslateCompileBound is the GroundLimits.CompileBound of the reference
// planner (nesy solve): conditions with more than two disjuncts become
// derived predicates. On miconic-fulladl the DNF copies of stop's
// quantified precondition leave h_FF far weaker than over the compiled
// conditions (f30-3: no plan in 60 s by lazy GBFS with preferred
// operators, against 808 expansions compiled).
const TranslateCompileBound = 2

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

	// An axiom schema (a derived rule) has axiom set: its instances are
	// axioms deriving head, its body is its precondition.
	axiom bool
	head  int32
	body  *cond
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
	derived   []bool // predicates with rules (of the domain or compiled)

	rules []*cschema // axiom schemas
	// compileBound is the ground DNF size above which conditions are
	// compiled into derived predicates (0: never); blewUp records that a
	// condition's DNF exceeded its limit.
	compileBound float64
	blewUp       bool
	dnfTrue      []gconj // see trueDNF
	strata       []int   // stratum of each derived predicate
	nNewAxioms   int
	goal         *cond // the goal, compiled by compileGoal
	goalSlots    *slots

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
// untrusted PDDL calls. When a condition's disjunctive normal form exceeds
// its bound, grounding starts again with the large conditions compiled into
// derived predicates (ground_axioms.go); lim bounds each of the two
// attempts.
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
	// Unless lim.CompileBound asks to compile from the start, conditions are
	// first expanded into DNF as far as they go; only when one exceeds its
	// bound is the task grounded again with the large conditions compiled
	// into derived predicates. Tasks that ground without axioms (every
	// dataset but ipc-adl's) keep their ground actions exactly.
	t, g, err := groundOnce(ctx, d, p, c.types, lim, lim.CompileBound)
	if err != nil && g != nil && g.blewUp && lim.CompileBound <= 0 {
		t, _, err = groundOnce(ctx, d, p, c.types, lim, axiomBound)
	}
	if err != nil {
		return nil, ps.warns, err
	}
	if len(t.Goal) == 0 {
		ps.warnf(p.Goal.Pos, "the goal is unreachable even ignoring delete effects")
	}
	return t, ps.warns, nil
}

// groundOnce grounds a checked task. compileBound > 0 compiles the
// conditions whose ground DNF may exceed it into derived predicates; 0
// expands every condition (the grounder's blewUp then tells whether one
// exceeded its DNF bound).
func groundOnce(ctx context.Context, d *Domain, p *Problem, types *typeTree, lim GroundLimits, compileBound float64) (*Task, *grounder, error) {
	g := &grounder{ctx: ctx, lim: lim.withDefaults(), d: d, p: p, types: types, compileBound: compileBound}
	if err := g.setup(); err != nil {
		return nil, g, err
	}
	schemas, err := g.compileSchemas()
	if err != nil {
		return nil, g, err
	}
	if err := g.compileGoal(); err != nil {
		return nil, g, err
	}
	g.compileRules()
	if g.err != nil {
		return nil, g, g.err
	}
	if err := g.stratifyRules(); err != nil {
		return nil, g, err
	}
	schemas = append(schemas, g.rules...)
	if err := g.checkEstimates(schemas); err != nil {
		return nil, g, err
	}
	g.reach(schemas)
	if g.err != nil {
		return nil, g, g.err
	}
	t, err := g.build(schemas)
	return t, g, err
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
	g.derived = make([]bool, n)
	for _, r := range g.d.Derived {
		if id, ok := g.predIndex[r.Pred]; ok {
			g.static[id] = false
			g.derived[id] = true
		}
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
