package pddl

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// This file turns s-expressions into the lifted model (syntax only); check.go
// then checks names, arities and types against the domain.

// parser holds the errors and warnings of one parse.
type parser struct {
	errs  ErrorList
	warns []Warning
}

func (p *parser) errorf(pos Pos, format string, args ...any) {
	if len(p.errs) < maxErrors {
		p.errs.Addf(pos, format, args...)
	}
}

func (p *parser) warnf(pos Pos, format string, args ...any) {
	p.warns = append(p.warns, Warning{Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

// readDefine reads the single (define (KIND name) ...) of a file and returns
// its name and the sections after the header.
func (p *parser) readDefine(filename string, src []byte, kind string) (name string, namePos Pos, head *sexp, sections []*sexp, ok bool) {
	r := newReader(filename, src)
	tops := r.readAll()
	p.warns = append(p.warns, r.warns...)
	if len(r.errs) > 0 {
		p.errs = append(p.errs, r.errs...)
		return "", Pos{}, nil, nil, false
	}
	if len(tops) == 0 {
		p.errorf(Pos{File: filename, Line: 1, Col: 1}, "empty input: expected (define (%s ...) ...)", kind)
		return "", Pos{}, nil, nil, false
	}
	top := tops[0]
	if len(tops) > 1 {
		p.errorf(tops[1].pos, "unexpected %s after the %s definition", describe(tops[1]), kind)
	}
	if top.head() != "define" {
		p.errorf(top.pos, "expected (define (%s ...) ...), found %s", kind, describe(top))
		return "", Pos{}, nil, nil, false
	}
	if len(top.list) < 2 || !top.list[1].isList || top.list[1].head() != kind {
		at := top.pos
		if len(top.list) >= 2 {
			at = top.list[1].pos
		}
		p.errorf(at, "expected (%s NAME) after define", kind)
		return "", Pos{}, nil, nil, false
	}
	h := top.list[1]
	if len(h.list) != 2 || h.list[1].isList {
		p.errorf(h.pos, "expected (%s NAME)", kind)
		return "", Pos{}, nil, nil, false
	}
	return h.list[1].atom, h.list[1].pos, top, top.list[2:], true
}

// describe names an s-expression for messages.
func describe(s *sexp) string {
	if s.isList {
		str := s.String()
		if len(str) > 60 {
			str = str[:57] + "..."
		}
		return "'" + str + "'"
	}
	return "'" + s.atom + "'"
}

// ParseDomain parses a PDDL domain. Errors (an ErrorList) carry file:line:col
// positions; warnings report tolerated oddities. Names are lower-cased.
func ParseDomain(filename string, src []byte) (*Domain, []Warning, error) {
	p := &parser{}
	name, namePos, _, sections, ok := p.readDefine(filename, src, "domain")
	if !ok {
		return nil, p.warns, p.result()
	}
	d := &Domain{Name: name, Pos: namePos}
	var actions, derived []*sexp
	seen := map[string]bool{}
	for _, s := range sections {
		h := s.head()
		if !s.isList || !strings.HasPrefix(h, ":") {
			p.errorf(s.pos, "expected a domain section such as (:predicates ...), found %s", describe(s))
			continue
		}
		if h != ":action" && h != ":derived" && seen[h] {
			p.errorf(s.pos, "duplicate %s section", h)
			continue
		}
		seen[h] = true
		switch h {
		case ":requirements":
			d.Requirements = append(d.Requirements, p.parseRequirements(s.list[1:])...)
		case ":types":
			d.Types = p.parseTypedList(s.list[1:], false, "type")
		case ":constants":
			d.Constants = p.parseTypedList(s.list[1:], false, "constant")
		case ":predicates":
			for _, ps := range s.list[1:] {
				if pd := p.parseSkeleton(ps, "predicate"); pd != nil {
					d.Predicates = append(d.Predicates, &PredicateDecl{Name: pd.Name, Params: pd.Params, Pos: pd.Pos})
				}
			}
		case ":functions":
			d.Functions = p.parseFunctions(s.list[1:])
		case ":action":
			actions = append(actions, s)
		case ":derived":
			derived = append(derived, s)
		case ":durative-action", ":constraints", ":process", ":event":
			p.errorf(s.pos, "%s is not supported", h)
		default:
			p.errorf(s.pos, "unknown domain section %s", h)
		}
	}
	for _, s := range actions {
		if a := p.parseAction(s); a != nil {
			d.Actions = append(d.Actions, a)
		}
	}
	for _, s := range derived {
		if r := p.parseDerived(s); r != nil {
			d.Derived = append(d.Derived, r)
		}
	}
	if len(p.errs) == 0 {
		c := newChecker(d, p, true)
		c.checkDomain()
	}
	if err := p.result(); err != nil {
		return nil, p.warns, err
	}
	return d, p.warns, nil
}

// ParseProblem parses a PDDL problem (syntax only: names are checked against
// the domain by Ground). Errors carry file:line:col positions.
func ParseProblem(filename string, src []byte) (*Problem, []Warning, error) {
	p := &parser{}
	name, namePos, top, sections, ok := p.readDefine(filename, src, "problem")
	if !ok {
		return nil, p.warns, p.result()
	}
	pr := &Problem{Name: name, Pos: namePos}
	seen := map[string]bool{}
	for _, s := range sections {
		h := s.head()
		if !s.isList || !strings.HasPrefix(h, ":") {
			p.errorf(s.pos, "expected a problem section such as (:init ...), found %s", describe(s))
			continue
		}
		if seen[h] {
			p.errorf(s.pos, "duplicate %s section", h)
			continue
		}
		seen[h] = true
		args := s.list[1:]
		switch h {
		case ":domain":
			if len(args) != 1 || args[0].isList {
				p.errorf(s.pos, "expected (:domain NAME)")
				continue
			}
			pr.DomainName, pr.DomainPos = args[0].atom, args[0].pos
		case ":requirements":
			pr.Requirements = p.parseRequirements(args)
		case ":objects":
			pr.Objects = p.parseTypedList(args, false, "object")
		case ":init":
			p.parseInit(pr, args)
		case ":goal":
			if len(args) != 1 {
				p.errorf(s.pos, "expected (:goal FORMULA) with one formula, found %d formulas", len(args))
				continue
			}
			pr.Goal = p.parseFormula(args[0])
			if pr.Goal != nil && isEmptyFormula(pr.Goal) {
				// VirtualHome ships problems with (:goal (and)): tolerated.
				p.warnf(args[0].pos, "empty goal: every state satisfies it")
			}
		case ":metric":
			if len(args) == 0 || args[0].isList || (args[0].atom != "minimize" && args[0].atom != "maximize") {
				p.errorf(s.pos, "expected (:metric minimize|maximize EXPR)")
				continue
			}
			pr.Metric = s.String()
		case ":length":
			p.warnf(s.pos, "(:length ...) is ignored")
		case ":constraints", ":timed-initial-literals":
			p.errorf(s.pos, "%s is not supported", h)
		default:
			p.errorf(s.pos, "unknown problem section %s", h)
		}
	}
	if pr.Goal == nil && !seen[":goal"] {
		p.errorf(top.end, "problem has no (:goal ...)")
	}
	if err := p.result(); err != nil {
		return nil, p.warns, err
	}
	return pr, p.warns, nil
}

func (p *parser) result() error {
	if len(p.errs) == 0 {
		return nil
	}
	p.errs.Sort()
	return p.errs
}

// isEmptyFormula reports whether f is an empty conjunction (possibly nested).
func isEmptyFormula(f *Formula) bool {
	switch f.Kind {
	case FTrue:
		return true
	case FAnd:
		for _, s := range f.Sub {
			if !isEmptyFormula(s) {
				return false
			}
		}
		return true
	}
	return false
}

// knownRequirements maps each requirement the package understands to whether it is supported.
var knownRequirements = map[string]bool{
	":strips": true, ":typing": true, ":negative-preconditions": true, ":equality": true,
	":disjunctive-preconditions": true, ":existential-preconditions": true,
	":universal-preconditions": true, ":quantified-preconditions": true,
	":conditional-effects": true, ":adl": true, ":action-costs": true,
	":numeric-fluents": false, ":fluents": false, ":object-fluents": false, ":durative-actions": false,
	":derived-predicates": true, ":domain-axioms": false, ":timed-initial-literals": false,
	":preferences": false, ":constraints": false, ":duration-inequalities": false,
	":continuous-effects": false, ":safety-constraints": false, ":expression-evaluation": false,
	":open-world": false, ":true-negation": false, ":ucpop": false, ":time": false,
}

func (p *parser) parseRequirements(items []*sexp) []string {
	var out []string
	for _, it := range items {
		if it.isList || !strings.HasPrefix(it.atom, ":") {
			p.errorf(it.pos, "expected a requirement such as :strips, found %s", describe(it))
			continue
		}
		supported, known := knownRequirements[it.atom]
		switch {
		case !known:
			p.errorf(it.pos, "unknown requirement %s", it.atom)
		case !supported:
			p.errorf(it.pos, "requirement %s is not supported", it.atom)
		default:
			out = append(out, it.atom)
		}
	}
	return out
}

// validName reports whether s can name an object, type, predicate or action.
func validName(s string) bool {
	return s != "" && s[0] != '?' && s[0] != ':' && s != "-"
}

// parseTypedList parses "a b - t c - (either t1 t2) d". With vars, every
// name must be a variable ?x.
func (p *parser) parseTypedList(items []*sexp, vars bool, what string) []TypedName {
	var out []TypedName
	pending := 0
	for i := 0; i < len(items); i++ {
		it := items[i]
		if !it.isList && it.atom == "-" {
			if pending == 0 {
				p.errorf(it.pos, "'-' with no %s names before it", what)
			}
			if i+1 >= len(items) {
				p.errorf(it.pos, "missing type after '-'")
				return out
			}
			i++
			types := p.parseType(items[i])
			for j := len(out) - pending; j < len(out); j++ {
				out[j].Types = types
			}
			pending = 0
			continue
		}
		if it.isList {
			p.errorf(it.pos, "expected a %s name, found %s", what, describe(it))
			continue
		}
		if vars && (!strings.HasPrefix(it.atom, "?") || len(it.atom) < 2) {
			p.errorf(it.pos, "expected a variable such as ?x, found %s", describe(it))
			continue
		}
		if !vars && !validName(it.atom) {
			p.errorf(it.pos, "invalid %s name %s", what, describe(it))
			continue
		}
		out = append(out, TypedName{Name: it.atom, Pos: it.pos})
		pending++
	}
	for j := len(out) - pending; j < len(out); j++ {
		out[j].Types = []string{"object"}
	}
	return out
}

// parseType parses "t" or "(either t1 t2 ...)".
func (p *parser) parseType(s *sexp) []string {
	if !s.isList {
		if !validName(s.atom) {
			p.errorf(s.pos, "invalid type name %s", describe(s))
			return []string{"object"}
		}
		return []string{s.atom}
	}
	if s.head() != "either" || len(s.list) < 2 {
		p.errorf(s.pos, "expected a type name or (either TYPE...), found %s", describe(s))
		return []string{"object"}
	}
	var out []string
	for _, t := range s.list[1:] {
		if t.isList || !validName(t.atom) {
			p.errorf(t.pos, "invalid type name %s", describe(t))
			continue
		}
		out = append(out, t.atom)
	}
	if len(out) == 0 {
		out = []string{"object"}
	}
	return out
}

// parseSkeleton parses "(name ?x - t ...)".
func (p *parser) parseSkeleton(s *sexp, what string) *PredicateDecl {
	if !s.isList || len(s.list) == 0 || s.list[0].isList || !validName(s.list[0].atom) {
		p.errorf(s.pos, "expected a %s such as (name ?x - type), found %s", what, describe(s))
		return nil
	}
	return &PredicateDecl{Name: s.list[0].atom, Pos: s.list[0].pos, Params: p.parseTypedList(s.list[1:], true, "parameter")}
}

func (p *parser) parseFunctions(items []*sexp) []*FunctionDecl {
	var out []*FunctionDecl
	for i := 0; i < len(items); i++ {
		it := items[i]
		if !it.isList && it.atom == "-" {
			if i+1 >= len(items) {
				p.errorf(it.pos, "missing type after '-'")
				return out
			}
			i++
			if t := items[i]; t.isList || t.atom != "number" {
				p.errorf(t.pos, "only numeric functions are supported, found type %s", describe(t))
			}
			continue
		}
		if pd := p.parseSkeleton(it, "function"); pd != nil {
			out = append(out, &FunctionDecl{Name: pd.Name, Params: pd.Params, Pos: pd.Pos})
		}
	}
	return out
}

func (p *parser) parseAction(s *sexp) *ActionSchema {
	if len(s.list) < 2 || s.list[1].isList || !validName(s.list[1].atom) {
		p.errorf(s.pos, "expected (:action NAME ...)")
		return nil
	}
	a := &ActionSchema{Name: s.list[1].atom, Pos: s.list[1].pos}
	rest := s.list[2:]
	seen := map[string]bool{}
	for i := 0; i < len(rest); i++ {
		k := rest[i]
		if k.isList || !strings.HasPrefix(k.atom, ":") {
			p.errorf(k.pos, "expected :parameters, :precondition or :effect, found %s", describe(k))
			continue
		}
		if i+1 >= len(rest) {
			p.errorf(k.pos, "%s has no value", k.atom)
			break
		}
		if seen[k.atom] {
			p.errorf(k.pos, "duplicate %s", k.atom)
		}
		seen[k.atom] = true
		i++
		v := rest[i]
		switch k.atom {
		case ":parameters":
			if !v.isList {
				p.errorf(v.pos, "expected a parameter list (?x - type ...), found %s", describe(v))
				continue
			}
			a.Params = p.parseTypedList(v.list, true, "parameter")
		case ":precondition":
			a.Pre = p.parseFormula(v)
			if a.Pre != nil && isEmptyFormula(a.Pre) {
				a.Pre = nil
			}
		case ":effect":
			a.Effect = p.parseEffect(v)
		default:
			p.errorf(k.pos, "unknown action key %s", k.atom)
		}
	}
	return a
}

// parseDerived parses (:derived (pred ?x - t ...) FORMULA).
func (p *parser) parseDerived(s *sexp) *DerivedRule {
	if len(s.list) != 3 {
		p.errorf(s.pos, "expected (:derived (PREDICATE ?x ...) FORMULA), found %d element(s) after :derived", len(s.list)-1)
		return nil
	}
	head := p.parseSkeleton(s.list[1], "derived predicate head")
	if head == nil {
		return nil
	}
	body := p.parseFormula(s.list[2])
	if body == nil {
		return nil
	}
	return &DerivedRule{Pred: head.Name, Params: head.Params, Body: body, Pos: head.Pos}
}

// parseTerms parses the arguments of an atom.
func (p *parser) parseTerms(items []*sexp) ([]Term, bool) {
	out := make([]Term, 0, len(items))
	ok := true
	for _, it := range items {
		if it.isList {
			p.errorf(it.pos, "expected an object or variable, found %s", describe(it))
			ok = false
			continue
		}
		if !strings.HasPrefix(it.atom, "?") && !validName(it.atom) || it.atom == "?" {
			p.errorf(it.pos, "expected an object or variable, found %s", describe(it))
			ok = false
			continue
		}
		out = append(out, Term{Name: it.atom, Var: strings.HasPrefix(it.atom, "?"), Pos: it.pos})
	}
	return out, ok
}

// parseFormula parses a goal description; it returns nil after an error.
func (p *parser) parseFormula(s *sexp) *Formula {
	if !s.isList {
		p.errorf(s.pos, "expected a formula in parentheses, found %s", describe(s))
		return nil
	}
	if len(s.list) == 0 {
		return &Formula{Kind: FTrue, Pos: s.pos}
	}
	if s.list[0].isList {
		p.errorf(s.pos, "expected a predicate or connective at the start of %s", describe(s))
		return nil
	}
	h, args := s.list[0].atom, s.list[1:]
	f := &Formula{Pos: s.pos}
	switch h {
	case "and", "or":
		f.Kind = FAnd
		if h == "or" {
			f.Kind = FOr
		}
		for _, a := range args {
			sub := p.parseFormula(a)
			if sub == nil {
				return nil
			}
			f.Sub = append(f.Sub, sub)
		}
	case "not", "imply":
		f.Kind, f.Pred = FNot, ""
		want := 1
		if h == "imply" {
			f.Kind, want = FImply, 2
		}
		if len(args) != want {
			p.errorf(s.pos, "(%s ...) takes %d argument(s), found %d", h, want, len(args))
			return nil
		}
		for _, a := range args {
			sub := p.parseFormula(a)
			if sub == nil {
				return nil
			}
			f.Sub = append(f.Sub, sub)
		}
	case "exists", "forall":
		f.Kind = FExists
		if h == "forall" {
			f.Kind = FForall
		}
		if len(args) != 2 || !args[0].isList {
			p.errorf(s.pos, "expected (%s (?x - type ...) FORMULA)", h)
			return nil
		}
		f.Vars = p.parseTypedList(args[0].list, true, "variable")
		sub := p.parseFormula(args[1])
		if sub == nil {
			return nil
		}
		f.Sub = []*Formula{sub}
	case "=":
		f.Kind = FEqual
		if len(args) != 2 {
			p.errorf(s.pos, "(= ...) takes 2 arguments, found %d", len(args))
			return nil
		}
		terms, ok := p.parseTerms(args)
		if !ok {
			return nil
		}
		f.Args = terms
	case "<", ">", "<=", ">=":
		p.errorf(s.pos, "numeric conditions such as (%s ...) are not supported", h)
		return nil
	case "when", "increase", "decrease", "assign":
		p.errorf(s.pos, "(%s ...) is not allowed in a formula", h)
		return nil
	default:
		if !validName(h) {
			p.errorf(s.list[0].pos, "expected a predicate name, found %s", describe(s.list[0]))
			return nil
		}
		terms, ok := p.parseTerms(args)
		if !ok {
			return nil
		}
		f.Kind, f.Pred, f.Args = FAtom, h, terms
	}
	return f
}

// parseEffect parses an effect; it returns nil for an empty effect or after an error.
func (p *parser) parseEffect(s *sexp) *Effect {
	if !s.isList {
		p.errorf(s.pos, "expected an effect in parentheses, found %s", describe(s))
		return nil
	}
	if len(s.list) == 0 {
		return nil
	}
	if s.list[0].isList {
		p.errorf(s.pos, "expected a predicate or connective at the start of %s", describe(s))
		return nil
	}
	h, args := s.list[0].atom, s.list[1:]
	e := &Effect{Pos: s.pos}
	switch h {
	case "and":
		e.Kind = EAnd
		for _, a := range args {
			if sub := p.parseEffect(a); sub != nil {
				e.Sub = append(e.Sub, sub)
			}
		}
	case "not":
		if len(args) != 1 || !args[0].isList || len(args[0].list) == 0 || args[0].list[0].isList {
			p.errorf(s.pos, "expected (not (PREDICATE ...)) in an effect")
			return nil
		}
		switch a := args[0].list[0].atom; a {
		case "and", "or", "not", "forall", "exists", "when", "=", "imply":
			p.errorf(s.pos, "expected (not (PREDICATE ...)) in an effect, found (not (%s ...))", a)
			return nil
		}
		at := p.parseFormula(args[0])
		if at == nil {
			return nil
		}
		e.Kind, e.Pred, e.Args = EDel, at.Pred, at.Args
	case "forall":
		if len(args) != 2 || !args[0].isList {
			p.errorf(s.pos, "expected (forall (?x - type ...) EFFECT)")
			return nil
		}
		e.Kind = EForall
		e.Vars = p.parseTypedList(args[0].list, true, "variable")
		sub := p.parseEffect(args[1])
		if sub == nil {
			return nil
		}
		e.Sub = []*Effect{sub}
	case "when":
		if len(args) != 2 {
			p.errorf(s.pos, "expected (when CONDITION EFFECT)")
			return nil
		}
		e.Kind = EWhen
		e.Cond = p.parseFormula(args[0])
		if e.Cond == nil {
			return nil
		}
		sub := p.parseEffect(args[1])
		if sub == nil {
			return nil
		}
		e.Sub = []*Effect{sub}
	case "increase":
		if len(args) != 2 {
			p.errorf(s.pos, "expected (increase (total-cost) AMOUNT)")
			return nil
		}
		if !args[0].isList || len(args[0].list) != 1 || args[0].head() != "total-cost" {
			p.errorf(args[0].pos, "only (increase (total-cost) AMOUNT) is supported, found %s", describe(args[0]))
			return nil
		}
		e.Kind = EIncrease
		amt, ok := p.parseNumExpr(args[1])
		if !ok {
			return nil
		}
		e.Amount = amt
	case "decrease", "assign", "scale-up", "scale-down":
		p.errorf(s.pos, "numeric effect (%s ...) is not supported (only (increase (total-cost) AMOUNT))", h)
		return nil
	case "or", "exists", "imply", "=":
		p.errorf(s.pos, "(%s ...) is not allowed in an effect", h)
		return nil
	default:
		at := p.parseFormula(s)
		if at == nil {
			return nil
		}
		e.Kind, e.Pred, e.Args = EAdd, at.Pred, at.Args
	}
	return e
}

// parseNumExpr parses a number or a function term such as (distance ?a ?b).
func (p *parser) parseNumExpr(s *sexp) (NumExpr, bool) {
	if !s.isList {
		v, err := strconv.ParseFloat(s.atom, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			p.errorf(s.pos, "expected a number, found %s", describe(s))
			return NumExpr{}, false
		}
		return NumExpr{Value: v, Pos: s.pos}, true
	}
	if len(s.list) == 0 || s.list[0].isList || !validName(s.list[0].atom) {
		p.errorf(s.pos, "expected a number or a function term, found %s", describe(s))
		return NumExpr{}, false
	}
	switch s.list[0].atom {
	case "+", "-", "*", "/":
		p.errorf(s.pos, "arithmetic expressions are not supported, found %s", describe(s))
		return NumExpr{}, false
	}
	terms, ok := p.parseTerms(s.list[1:])
	if !ok {
		return NumExpr{}, false
	}
	return NumExpr{Fn: s.list[0].atom, Args: terms, Pos: s.pos}, true
}

func (p *parser) parseInit(pr *Problem, items []*sexp) {
	for _, it := range items {
		if !it.isList || len(it.list) == 0 || it.list[0].isList {
			p.errorf(it.pos, "expected an atom such as (p a b) in :init, found %s", describe(it))
			continue
		}
		switch h := it.list[0].atom; h {
		case "=":
			if len(it.list) != 3 || !it.list[1].isList || it.list[2].isList {
				p.errorf(it.pos, "expected (= (FUNCTION ARGS...) NUMBER) in :init")
				continue
			}
			fn, ok := p.parseNumExpr(it.list[1])
			if !ok {
				continue
			}
			v, err := strconv.ParseFloat(it.list[2].atom, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				p.errorf(it.list[2].pos, "expected a number, found %s", describe(it.list[2]))
				continue
			}
			nf := NumericFact{Fn: fn.Fn, Value: v, Pos: it.pos}
			for _, a := range fn.Args {
				if a.Var {
					p.errorf(a.Pos, "variable %s in :init", a.Name)
				}
				nf.Args = append(nf.Args, a.Name)
			}
			pr.NumericInit = append(pr.NumericInit, nf)
		case "not":
			p.warnf(it.pos, "negative literal in :init ignored (the initial state is closed-world)")
		case "and", "or", "forall", "exists", "when", "imply":
			p.errorf(it.pos, "(%s ...) is not allowed in :init", h)
		default:
			if !validName(h) {
				p.errorf(it.pos, "expected an atom such as (p a b) in :init, found %s", describe(it))
				continue
			}
			terms, ok := p.parseTerms(it.list[1:])
			if !ok {
				continue
			}
			a := Atom{Pred: h, Pos: it.pos}
			for _, t := range terms {
				if t.Var {
					p.errorf(t.Pos, "variable %s in :init", t.Name)
					ok = false
				}
				a.Args = append(a.Args, t.Name)
			}
			if ok {
				pr.Init = append(pr.Init, a)
			}
		}
	}
}
