package pddl

import (
	"strconv"
	"strings"
)

// This file defines the lifted model that the parser produces: a Domain and a
// Problem, with a position on every node. Names are lower-cased.

// TypedName is a name with its declared types: an object, a constant, a
// variable (Name starts with '?') or a type with its parent types. Types has
// one element, or several for (either t1 t2 ...); it is ["object"] when the
// source gave no type.
type TypedName struct {
	Name  string
	Types []string
	Pos   Pos
}

// String returns "name - type" or "name - (either t1 t2)".
func (t TypedName) String() string {
	switch len(t.Types) {
	case 0:
		return t.Name
	case 1:
		return t.Name + " - " + t.Types[0]
	}
	return t.Name + " - (either " + strings.Join(t.Types, " ") + ")"
}

// PredicateDecl is a predicate declared in the domain's :predicates.
type PredicateDecl struct {
	Name   string
	Params []TypedName
	Pos    Pos
}

// FunctionDecl is a numeric function declared in the domain's :functions
// (only (total-cost) and cost functions read in increase effects are used).
type FunctionDecl struct {
	Name   string
	Params []TypedName
	Pos    Pos
}

// Term is an argument of an atom: a variable (Var, Name starts with '?') or
// an object or constant name.
type Term struct {
	Name string
	Var  bool
	Pos  Pos
}

// FormulaKind tells what a Formula node is.
type FormulaKind int

// Formula kinds.
const (
	FTrue   FormulaKind = iota // the empty conjunction
	FAtom                      // (Pred Args...)
	FEqual                     // (= Args[0] Args[1])
	FNot                       // (not Sub[0])
	FAnd                       // (and Sub...)
	FOr                        // (or Sub...)
	FImply                     // (imply Sub[0] Sub[1])
	FExists                    // (exists (Vars) Sub[0])
	FForall                    // (forall (Vars) Sub[0])
)

// Formula is a goal description: a precondition, a goal, or the condition of
// a conditional effect.
type Formula struct {
	Kind FormulaKind
	Pos  Pos
	Pred string
	Args []Term
	Sub  []*Formula
	Vars []TypedName
}

// EffectKind tells what an Effect node is.
type EffectKind int

// Effect kinds.
const (
	EAnd      EffectKind = iota // (and Sub...)
	EAdd                        // (Pred Args...)
	EDel                        // (not (Pred Args...))
	EForall                     // (forall (Vars) Sub[0])
	EWhen                       // (when Cond Sub[0])
	EIncrease                   // (increase (total-cost) Amount)
)

// Effect is an action effect.
type Effect struct {
	Kind EffectKind
	Pos  Pos
	Pred string
	Args []Term
	Sub  []*Effect
	Vars []TypedName
	Cond *Formula
	// Amount is the increase of total-cost (EIncrease).
	Amount NumExpr
}

// NumExpr is a number or a ground-able function term such as (distance ?a ?b).
type NumExpr struct {
	Value float64
	Fn    string // non-empty for a function term
	Args  []Term
	Pos   Pos
}

// ActionSchema is an action schema of the domain.
type ActionSchema struct {
	Name   string
	Params []TypedName
	// Pre is the precondition; nil means true.
	Pre *Formula
	// Effect is nil for an action without effects.
	Effect *Effect
	Pos    Pos
}

// DerivedRule is a rule (:derived (Pred ?x ...) Body) of the domain (PDDL
// 2.2 derived predicates): Pred holds of the arguments exactly when some
// rule's Body holds of them, in the least fixpoint computed stratum by
// stratum (negation as failure). A predicate may have several rules; no
// action effect may change it.
type DerivedRule struct {
	Pred string
	// Params are the head's variables, typed as written or, when untyped,
	// by the predicate's declaration.
	Params []TypedName
	Body   *Formula
	Pos    Pos
}

// Domain is a parsed PDDL domain.
type Domain struct {
	Name         string
	Pos          Pos
	Requirements []string
	// Types are the declared types with their parents (["object"] for none).
	Types      []TypedName
	Constants  []TypedName
	Predicates []*PredicateDecl
	Functions  []*FunctionDecl
	Actions    []*ActionSchema
	// Derived are the (:derived ...) rules, in source order.
	Derived []*DerivedRule
	// Strata maps each derived predicate to its stratum (0, 1, ...): a
	// predicate's rules read derived predicates of lower strata under
	// negation and of lower or equal strata otherwise.
	Strata map[string]int
	// HasCosts reports whether the domain uses action costs (the
	// :action-costs requirement or an increase of total-cost).
	HasCosts bool

	// undeclared are the uses of names that are not domain constants (ALFWorld
	// uses problem objects in its domain); Ground checks them.
	undeclared []Term
}

// Predicate returns the declared predicate called name, or nil.
func (d *Domain) Predicate(name string) *PredicateDecl {
	for _, p := range d.Predicates {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Action returns the action schema called name, or nil.
func (d *Domain) Action(name string) *ActionSchema {
	for _, a := range d.Actions {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// Atom is a ground atom of a problem's :init, with its position.
type Atom struct {
	Pred string
	Args []string
	Pos  Pos
}

// NumericFact is an initial function value, e.g. (= (distance a b) 5).
type NumericFact struct {
	Fn    string
	Args  []string
	Value float64
	Pos   Pos
}

// Problem is a parsed PDDL problem. It is checked against its domain when
// grounded.
type Problem struct {
	Name         string
	DomainName   string
	Pos          Pos
	DomainPos    Pos
	Requirements []string
	Objects      []TypedName
	Init         []Atom
	NumericInit  []NumericFact
	// Goal is the goal formula (never nil for a parsed problem).
	Goal *Formula
	// Metric is the :metric expression as written, or "".
	Metric string
}

// formatFormula prints f in PDDL syntax, replacing variables bound in env.
func formatFormula(f *Formula, env map[string]string) string {
	var b strings.Builder
	writeFormula(&b, f, env)
	return b.String()
}

func writeTerms(b *strings.Builder, args []Term, env map[string]string) {
	for _, a := range args {
		b.WriteByte(' ')
		if v, ok := env[a.Name]; ok && a.Var {
			b.WriteString(v)
		} else {
			b.WriteString(a.Name)
		}
	}
}

func writeFormula(b *strings.Builder, f *Formula, env map[string]string) {
	if f == nil {
		b.WriteString("(and)")
		return
	}
	switch f.Kind {
	case FTrue:
		b.WriteString("(and)")
	case FAtom:
		b.WriteString("(" + f.Pred)
		writeTerms(b, f.Args, env)
		b.WriteByte(')')
	case FEqual:
		b.WriteString("(=")
		writeTerms(b, f.Args, env)
		b.WriteByte(')')
	case FNot, FAnd, FOr, FImply:
		b.WriteString([...]string{FNot: "(not", FAnd: "(and", FOr: "(or", FImply: "(imply"}[f.Kind])
		for _, s := range f.Sub {
			b.WriteByte(' ')
			writeFormula(b, s, env)
		}
		b.WriteByte(')')
	case FExists, FForall:
		if f.Kind == FExists {
			b.WriteString("(exists (")
		} else {
			b.WriteString("(forall (")
		}
		for i, v := range f.Vars {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(v.String())
		}
		b.WriteString(") ")
		writeFormula(b, f.Sub[0], env)
		b.WriteByte(')')
	}
}

func formatNumber(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
