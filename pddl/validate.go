package pddl

import (
	"fmt"
	"strings"
)

// lifted is the part of the lifted model a Task keeps to explain validation
// failures in PDDL terms: static preconditions, parameter types, unknown names.
type lifted struct {
	d        *Domain
	p        *Problem
	types    *typeTree
	objIndex map[string]int32
	typeSets map[string]*typeSet
	static   map[string]bool
}

// ValidationResult is the outcome of validating a plan.
type ValidationResult struct {
	// Valid reports whether every step was applicable in turn (the goal aside).
	Valid bool
	// GoalReached reports whether the plan is valid and its last state
	// satisfies the goal.
	GoalReached bool
	// Steps is the number of steps in the plan.
	Steps int
	// FailedStep is the 0-based index of the first inapplicable step, or -1.
	FailedStep int
	// Error names the first failing step and why it fails (the precondition
	// that is false, or an unknown action or object, or a wrong arity); ""
	// when the plan is valid.
	Error string
	// GoalError says which part of the goal is false when the plan is valid
	// but does not reach the goal; "" otherwise.
	GoalError string
	// Cost is the total cost of the applicable steps.
	Cost int
	// States are the states visited: States[0] is the initial state and
	// States[i+1] the state after step i, up to the first failing step.
	States []State
}

// Validate executes the plan from the initial state and reports whether
// every step applies and whether the goal is reached.
func (t *Task) Validate(steps []PlanStep) ValidationResult {
	r := ValidationResult{Steps: len(steps), FailedStep: -1, States: []State{t.Init}}
	s := t.Init
	for i, st := range steps {
		next, a, err := t.Execute(s, st.Name, st.Args)
		if err != nil {
			r.FailedStep = i
			msg := fmt.Sprintf("step %d %s: %v", i+1, stepString(st.Name, st.Args), err)
			if st.Pos.IsValid() {
				msg = st.Pos.String() + ": " + msg
			}
			r.Error = msg
			return r
		}
		r.Cost += t.Actions[a].Cost
		s = next
		r.States = append(r.States, s)
	}
	r.Valid = true
	r.GoalReached = t.GoalReached(s)
	if !r.GoalReached {
		r.GoalError = "goal not reached: " + t.ExplainGoal(s)
	}
	return r
}

func stepString(name string, args []string) string {
	if len(args) == 0 {
		return "(" + name + ")"
	}
	return "(" + name + " " + strings.Join(args, " ") + ")"
}

// Execute applies the ground action named by name and args (case-insensitive)
// in s. When several ground actions share the name and arguments (a
// disjunctive precondition), the first applicable one is used. It returns the
// successor, the action id, or an error saying exactly why the action does
// not apply: unknown action, wrong number of arguments, unknown object,
// object of the wrong type, or the first precondition (static ones included)
// that is false in s.
func (t *Task) Execute(s State, name string, args []string) (State, int, error) {
	name = strings.ToLower(name)
	low := make([]string, len(args))
	for i, a := range args {
		low[i] = strings.ToLower(a)
	}
	for _, a := range t.LookupAction(name, low) {
		if t.IsApplicable(s, a) {
			return t.Apply(s, a), a, nil
		}
	}
	return nil, -1, t.whyNotApplicable(s, name, low)
}

// whyNotApplicable explains why no ground action (name args) applies in s.
func (t *Task) whyNotApplicable(s State, name string, args []string) error {
	l := t.lifted
	if l == nil {
		if len(t.LookupAction(name, args)) == 0 {
			return fmt.Errorf("no such ground action")
		}
		return fmt.Errorf("precondition does not hold")
	}
	schema := l.d.Action(name)
	if schema == nil {
		return fmt.Errorf("unknown action %q", name)
	}
	if len(args) != len(schema.Params) {
		var ps []string
		for _, p := range schema.Params {
			ps = append(ps, p.String())
		}
		return fmt.Errorf("action %s takes %d argument(s) (%s), got %d", name, len(schema.Params), strings.Join(ps, " "), len(args))
	}
	env := map[string]string{}
	for i, p := range schema.Params {
		o, ok := l.objIndex[args[i]]
		if !ok {
			return fmt.Errorf("unknown object %q", args[i])
		}
		if !l.hasType(o, p.Types) {
			return fmt.Errorf("object %s is not of type %s (parameter %s of %s)", args[i], typeString(p.Types), p.Name, name)
		}
		env[p.Name] = args[i]
	}
	ev := &evaluator{t: t, s: s}
	if schema.Pre != nil && !ev.holds(schema.Pre, env) {
		return fmt.Errorf("precondition %s", ev.why(schema.Pre, env))
	}
	return fmt.Errorf("internal error: the precondition holds but the action has no applicable ground instance")
}

// ExplainGoal says which part of the goal is false in s ("" when it holds).
func (t *Task) ExplainGoal(s State) string {
	if t.GoalReached(s) {
		return ""
	}
	if t.lifted == nil || t.lifted.p.Goal == nil {
		return "no goal disjunct holds"
	}
	ev := &evaluator{t: t, s: s}
	g := t.lifted.p.Goal
	if ev.holds(g, map[string]string{}) {
		return "the goal holds in PDDL terms but not in the ground task (internal error)"
	}
	return ev.why(g, map[string]string{})
}

func (l *lifted) hasType(o int32, types []string) bool {
	for _, ty := range types {
		if ts, ok := l.typeSets[ty]; ok && ts.member[o] {
			return true
		}
	}
	return false
}

// objectsOf lists the objects of any of the types, in id order.
func (l *lifted) objectsOf(types []string, names []string) []string {
	if len(types) == 1 {
		if ts, ok := l.typeSets[types[0]]; ok {
			return ts.names
		}
	}
	var out []string
	for o := range names {
		if l.hasType(int32(o), types) {
			out = append(out, names[o])
		}
	}
	return out
}

// evaluator evaluates lifted formulas in a state of the task, with static
// facts and facts that are never reachable taken into account.
type evaluator struct {
	t *Task
	s State
}

func (e *evaluator) atom(pred string, args []Term, env map[string]string) bool {
	var b strings.Builder
	b.WriteByte('(')
	b.WriteString(pred)
	for _, a := range args {
		b.WriteByte(' ')
		b.WriteString(e.term(a, env))
	}
	b.WriteByte(')')
	k := b.String()
	if e.t.lifted.static[k] {
		return true
	}
	if id, ok := e.t.factIndex[k]; ok {
		return e.s.Has(id)
	}
	return false
}

func (e *evaluator) term(a Term, env map[string]string) string {
	if v, ok := env[a.Name]; ok && a.Var {
		return v
	}
	return a.Name
}

// forAll calls fn with env extended by every binding of vars (env is
// modified in place and restored; fn must not keep it); it stops and returns
// false when fn does.
func (e *evaluator) forAll(vars []TypedName, env map[string]string, fn func(map[string]string) bool) bool {
	if len(vars) == 0 {
		return fn(env)
	}
	v := vars[0].Name
	old, had := env[v]
	defer func() {
		if had {
			env[v] = old
		} else {
			delete(env, v)
		}
	}()
	for _, o := range e.t.lifted.objectsOf(vars[0].Types, e.t.Objects) {
		env[v] = o
		if !e.forAll(vars[1:], env, fn) {
			return false
		}
	}
	return true
}

func (e *evaluator) holds(f *Formula, env map[string]string) bool {
	switch f.Kind {
	case FTrue:
		return true
	case FAtom:
		return e.atom(f.Pred, f.Args, env)
	case FEqual:
		return e.term(f.Args[0], env) == e.term(f.Args[1], env)
	case FNot:
		return !e.holds(f.Sub[0], env)
	case FAnd:
		for _, s := range f.Sub {
			if !e.holds(s, env) {
				return false
			}
		}
		return true
	case FOr:
		for _, s := range f.Sub {
			if e.holds(s, env) {
				return true
			}
		}
		return false
	case FImply:
		return !e.holds(f.Sub[0], env) || e.holds(f.Sub[1], env)
	case FExists:
		return e.exists(f, env)
	case FForall:
		return e.forAll(f.Vars, env, func(env map[string]string) bool { return e.holds(f.Sub[0], env) })
	}
	return false
}

// exists evaluates an existential formula, checking each conjunct of its
// body as soon as the variables it uses are bound.
func (e *evaluator) exists(f *Formula, env map[string]string) bool {
	body := f.Sub[0]
	conj := []*Formula{body}
	if body.Kind == FAnd {
		conj = body.Sub
	}
	at := make([][]*Formula, len(f.Vars)+1)
	for _, c := range conj {
		free := map[string]bool{}
		freeVars(c, nil, free)
		last := 0
		for i, v := range f.Vars {
			if free[v.Name] {
				last = i + 1
			}
		}
		at[last] = append(at[last], c)
	}
	var rec func(k int) bool
	rec = func(k int) bool {
		for _, c := range at[k] {
			if !e.holds(c, env) {
				return false
			}
		}
		if k == len(f.Vars) {
			return true
		}
		found := false
		e.forAll(f.Vars[k:k+1], env, func(env map[string]string) bool {
			found = rec(k + 1)
			return !found
		})
		return found
	}
	return rec(0)
}

// freeVars adds the free variables of f (those not in bound) to out.
func freeVars(f *Formula, bound map[string]bool, out map[string]bool) {
	switch f.Kind {
	case FAtom, FEqual:
		for _, a := range f.Args {
			if a.Var && !bound[a.Name] {
				out[a.Name] = true
			}
		}
	case FExists, FForall:
		inner := map[string]bool{}
		for k := range bound {
			inner[k] = true
		}
		for _, v := range f.Vars {
			inner[v.Name] = true
		}
		freeVars(f.Sub[0], inner, out)
	default:
		for _, s := range f.Sub {
			freeVars(s, bound, out)
		}
	}
}

// why explains why f, known to be false under env, is false: the first
// false conjunct, down to a literal where possible, with its position.
func (e *evaluator) why(f *Formula, env map[string]string) string {
	at := ""
	if f.Pos.IsValid() {
		at = " (" + f.Pos.String() + ")"
	}
	switch f.Kind {
	case FAnd:
		for _, s := range f.Sub {
			if !e.holds(s, env) {
				return e.why(s, env)
			}
		}
	case FForall:
		var msg string
		e.forAll(f.Vars, env, func(inner map[string]string) bool {
			if e.holds(f.Sub[0], inner) {
				return true
			}
			var bs []string
			for _, v := range f.Vars {
				bs = append(bs, v.Name+"="+inner[v.Name])
			}
			msg = fmt.Sprintf("%s is false for %s: %s", formatFormula(f, env), strings.Join(bs, " "), e.why(f.Sub[0], inner))
			return false
		})
		if msg != "" {
			return msg
		}
	case FImply:
		return fmt.Sprintf("%s is false%s: %s holds but %s", formatFormula(f, env), at, formatFormula(f.Sub[0], env), e.why(f.Sub[1], env))
	case FNot:
		if f.Sub[0].Kind == FAtom {
			return fmt.Sprintf("%s is false%s: %s holds", formatFormula(f, env), at, formatFormula(f.Sub[0], env))
		}
	}
	return formatFormula(f, env) + " is false" + at
}
