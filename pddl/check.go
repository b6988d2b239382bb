package pddl

import (
	"fmt"
	"slices"
	"sort"

	"github.com/nesy-dev/nesy/internal/graph"
)

// This file checks a parsed domain (and, at grounding, a problem against its
// domain): declared names, arities, bound variables and types. Type
// mismatches of predicate arguments are warnings, not errors (ALFWorld's
// domain relies on them).

// typeTree is the type hierarchy of a domain: every type's parents, with
// "object" as the implicit root.
type typeTree struct {
	parents map[string][]string
	memo    map[[2]string]bool // isSubtype answers (hierarchies that are not trees)

	// For a hierarchy that is a tree under "object" (every type one
	// parent, no cycle): each type's DFS entry and exit times, so that
	// isSubtype is two comparisons however deep the tree.
	shaped    bool // the fields below are set (or the hierarchy is not a tree)
	pre, post map[string]int
}

func newTypeTree(d *Domain, p *parser) *typeTree {
	t := &typeTree{parents: map[string][]string{"object": nil}}
	for _, td := range d.Types {
		if td.Name == "object" {
			continue
		}
		if _, dup := t.parents[td.Name]; dup && p != nil {
			p.warnf(td.Pos, "type %s declared twice", td.Name)
		}
		t.parents[td.Name] = append(t.parents[td.Name], td.Types...)
	}
	// Parents used but never declared are types too (subtypes of object).
	for _, td := range d.Types {
		for _, par := range td.Types {
			if _, ok := t.parents[par]; !ok {
				t.parents[par] = []string{"object"}
			}
		}
	}
	if p != nil {
		cyclic := t.cyclic()
		for _, td := range d.Types {
			if td.Name != "object" && cyclic[td.Name] {
				p.errorf(td.Pos, "type %s is its own ancestor", td.Name)
			}
		}
	}
	return t
}

// cyclic returns the types that are their own ancestors: those on a cycle
// of the parent relation. It runs in time linear in the hierarchy (Tarjan's
// strongly connected components, iteratively, so a chain of many thousand
// types needs neither quadratic time nor a deep stack).
func (t *typeTree) cyclic() map[string]bool {
	names := make([]string, 0, len(t.parents))
	for v := range t.parents {
		names = append(names, v)
	}
	sort.Strings(names)
	out := map[string]bool{}
	for _, comp := range graph.SCC(names, func(v string) []string { return t.parents[v] }) {
		if len(comp) > 1 || slices.Contains(t.parents[comp[0]], comp[0]) {
			for _, x := range comp {
				out[x] = true // more than one member, or its own parent: a cycle
			}
		}
	}
	return out
}

// tree reports whether the hierarchy is a tree under "object", computing
// the DFS times on first use.
func (t *typeTree) tree() bool {
	if t.shaped {
		return t.pre != nil
	}
	t.shaped = true
	children := map[string][]string{}
	for c, ps := range t.parents {
		if c == "object" {
			continue
		}
		ps = slices.Compact(slices.Clone(ps))
		if len(ps) != 1 {
			return false
		}
		children[ps[0]] = append(children[ps[0]], c)
	}
	pre, post := map[string]int{"object": 0}, map[string]int{}
	clock := 1
	type frame struct {
		v    string
		next int
	}
	stack := []frame{{v: "object"}}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if cs := children[f.v]; f.next < len(cs) {
			c := cs[f.next]
			f.next++
			pre[c] = clock
			clock++
			stack = append(stack, frame{v: c})
			continue
		}
		post[f.v] = clock
		clock++
		stack = stack[:len(stack)-1]
	}
	if len(pre) != len(t.parents) {
		return false // a cycle, unreachable from object
	}
	t.pre, t.post = pre, post
	return true
}

// children returns every type's direct subtypes (the inverse of parents).
func (t *typeTree) children() map[string][]string {
	out := map[string][]string{}
	for c, ps := range t.parents {
		for _, p := range ps {
			out[p] = append(out[p], c)
		}
	}
	return out
}

func (t *typeTree) known(name string) bool { _, ok := t.parents[name]; return ok }

// isSubtype reports whether sub is anc or a descendant of anc: in a tree,
// by comparing DFS times; else by a walk whose answers are remembered, so
// checking many arguments walks a deep hierarchy once per pair of types.
// A typeTree is not safe for concurrent use.
func (t *typeTree) isSubtype(sub, anc string) bool {
	if anc == "object" || sub == anc {
		return true
	}
	if t.tree() {
		ps, ok1 := t.pre[sub]
		pa, ok2 := t.pre[anc]
		return ok1 && ok2 && pa <= ps && t.post[sub] <= t.post[anc]
	}
	k := [2]string{sub, anc}
	if r, ok := t.memo[k]; ok {
		return r
	}
	r := t.walkSubtype(sub, anc)
	if t.memo == nil {
		t.memo = map[[2]string]bool{}
	}
	t.memo[k] = r
	return r
}

func (t *typeTree) walkSubtype(sub, anc string) bool {
	seen := map[string]bool{}
	stack := []string{sub}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if x == anc {
			return true
		}
		if seen[x] {
			continue
		}
		seen[x] = true
		stack = append(stack, t.parents[x]...)
	}
	return false
}

// compatible reports whether every type in have is a subtype of some type in want.
func (t *typeTree) compatible(have, want []string) bool {
	for _, h := range have {
		ok := false
		for _, w := range want {
			if t.isSubtype(h, w) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func typeString(ts []string) string {
	if len(ts) == 1 {
		return ts[0]
	}
	s := "(either"
	for _, t := range ts {
		s += " " + t
	}
	return s + ")"
}

// requirement features a domain may use without declaring (warned about).
const (
	featNegative    = ":negative-preconditions"
	featDisjunctive = ":disjunctive-preconditions"
	featExistential = ":existential-preconditions"
	featUniversal   = ":universal-preconditions"
	featConditional = ":conditional-effects"
	featEquality    = ":equality"
	featTyping      = ":typing"
	featCosts       = ":action-costs"
	featDerived     = ":derived-predicates"
)

// impliedRequirements expands composite requirements.
var impliedRequirements = map[string][]string{
	":adl": {":strips", featTyping, featNegative, featDisjunctive, featEquality, featExistential,
		featUniversal, featConditional},
	":quantified-preconditions": {featExistential, featUniversal},
}

// checker checks names and types of a domain, or of a problem against its domain.
type checker struct {
	d        *Domain
	p        *parser
	types    *typeTree
	preds    map[string]*PredicateDecl
	funcs    map[string]*FunctionDecl
	objects  map[string][]string // constants (domain mode) or constants+objects (problem mode)
	problem  bool                // names that are not objects are errors
	used     map[string]Pos      // first use of each feature
	warnedC  map[string]bool     // undeclared constants already warned about
	undecl   []Term              // constants used by the domain but not declared in it
	inEffect bool
	derived  map[string]bool // predicates with (:derived ...) rules
}

// newChecker prepares checks of d; with domainChecks it also reports
// problems of the type declarations (done once, by ParseDomain).
func newChecker(d *Domain, p *parser, domainChecks bool) *checker {
	c := &checker{d: d, p: p, preds: map[string]*PredicateDecl{}, funcs: map[string]*FunctionDecl{},
		objects: map[string][]string{}, used: map[string]Pos{}, warnedC: map[string]bool{}}
	if domainChecks {
		c.types = newTypeTree(d, p)
	} else {
		c.types = newTypeTree(d, nil)
	}
	for _, pd := range d.Predicates {
		c.preds[pd.Name] = pd
	}
	for _, f := range d.Functions {
		c.funcs[f.Name] = f
	}
	c.derived = map[string]bool{}
	for _, r := range d.Derived {
		c.derived[r.Pred] = true
	}
	for _, k := range d.Constants {
		c.objects[k.Name] = k.Types
	}
	return c
}

func (c *checker) use(feature string, pos Pos) {
	if _, ok := c.used[feature]; !ok {
		c.used[feature] = pos
	}
}

func (c *checker) checkTypes(ts []string, pos Pos) {
	for _, t := range ts {
		if !c.types.known(t) {
			c.p.errorf(pos, "unknown type %s", t)
		} else if t != "object" {
			c.use(featTyping, pos)
		}
	}
}

// checkDomain checks the whole domain and records warnings and errors in c.p.
func (c *checker) checkDomain() {
	d := c.d
	for _, td := range d.Types {
		if td.Name != "object" {
			c.use(featTyping, td.Pos)
		}
	}
	seen := map[string]bool{}
	for _, k := range d.Constants {
		c.checkTypes(k.Types, k.Pos)
		if seen[k.Name] {
			c.p.warnf(k.Pos, "constant %s declared twice", k.Name)
		}
		seen[k.Name] = true
	}
	seen = map[string]bool{}
	for _, pd := range d.Predicates {
		if seen[pd.Name] {
			c.p.errorf(pd.Pos, "predicate %s declared twice", pd.Name)
		}
		seen[pd.Name] = true
		c.checkParams(pd.Params, false)
	}
	c.checkDerived()
	seen = map[string]bool{}
	for _, a := range d.Actions {
		if seen[a.Name] {
			c.p.errorf(a.Pos, "action %s declared twice", a.Name)
		}
		seen[a.Name] = true
		scope := c.checkParams(a.Params, true)
		if a.Pre != nil {
			c.inEffect = false
			c.checkFormula(a.Pre, scope)
		}
		if a.Effect != nil {
			c.inEffect = true
			c.checkEffect(a.Effect, scope)
			c.inEffect = false
		}
	}
	d.undeclared = c.undecl
	declared := map[string]bool{}
	for _, r := range d.Requirements {
		declared[r] = true
		for _, x := range impliedRequirements[r] {
			declared[x] = true
		}
	}
	if declared[featCosts] {
		d.HasCosts = true
	}
	var feats []string
	for f := range c.used {
		feats = append(feats, f)
	}
	sort.Strings(feats)
	for _, f := range feats {
		if !declared[f] {
			c.p.warnf(c.used[f], "domain uses %s features without declaring that requirement", f)
		}
	}
}

// checkParams checks a parameter list and returns the scope it opens. A
// repeated name is an error in an action and a warning in a predicate
// declaration (where names do not matter; logistics has (in ?obj ?obj)).
func (c *checker) checkParams(ps []TypedName, action bool) map[string][]string {
	scope := map[string][]string{}
	for _, v := range ps {
		if _, dup := scope[v.Name]; dup {
			if action {
				c.p.errorf(v.Pos, "parameter %s declared twice", v.Name)
			} else {
				c.p.warnf(v.Pos, "parameter %s declared twice", v.Name)
			}
		}
		c.checkTypes(v.Types, v.Pos)
		scope[v.Name] = v.Types
	}
	return scope
}

func extend(scope map[string][]string, vars []TypedName) map[string][]string {
	n := make(map[string][]string, len(scope)+len(vars))
	for k, v := range scope {
		n[k] = v
	}
	for _, v := range vars {
		n[v.Name] = v.Types
	}
	return n
}

// checkArgs checks the terms of an atom of predicate pred (or of "=" when pd is nil).
func (c *checker) checkArgs(what string, pd []TypedName, args []Term, scope map[string][]string) {
	for i, a := range args {
		var have []string
		if a.Var {
			ts, ok := scope[a.Name]
			if !ok {
				c.p.errorf(a.Pos, "undefined variable %s", a.Name)
				continue
			}
			have = ts
		} else {
			ts, ok := c.objects[a.Name]
			if !ok {
				if c.problem {
					c.p.errorf(a.Pos, "unknown object %s", a.Name)
				} else {
					c.undecl = append(c.undecl, a)
					if !c.warnedC[a.Name] {
						c.warnedC[a.Name] = true
						c.p.warnf(a.Pos, "%s is not a declared constant of the domain; the problem must declare it as an object", a.Name)
					}
				}
				continue
			}
			have = ts
		}
		if pd != nil && i < len(pd) && !c.types.compatible(have, pd[i].Types) {
			c.p.warnf(a.Pos, "%s: argument %d (%s) is of type %s, declared %s", what, i+1, a.Name, typeString(have), typeString(pd[i].Types))
		}
	}
}

func (c *checker) checkAtom(pred string, args []Term, pos Pos, scope map[string][]string) {
	pd, ok := c.preds[pred]
	if !ok {
		c.p.errorf(pos, "unknown predicate %s", pred)
		return
	}
	if len(args) != len(pd.Params) {
		c.p.errorf(pos, "predicate %s takes %d argument(s), found %d", pred, len(pd.Params), len(args))
		return
	}
	c.checkArgs(pred, pd.Params, args, scope)
}

func (c *checker) checkFormula(f *Formula, scope map[string][]string) {
	switch f.Kind {
	case FAtom:
		c.checkAtom(f.Pred, f.Args, f.Pos, scope)
	case FEqual:
		c.use(featEquality, f.Pos)
		c.checkArgs("=", nil, f.Args, scope)
	case FNot:
		if k := f.Sub[0].Kind; k == FAtom {
			if !c.inEffect {
				c.use(featNegative, f.Pos)
			}
		} else if k != FEqual {
			c.use(featDisjunctive, f.Pos)
		}
		c.checkFormula(f.Sub[0], scope)
	case FAnd:
		for _, s := range f.Sub {
			c.checkFormula(s, scope)
		}
	case FOr, FImply:
		c.use(featDisjunctive, f.Pos)
		for _, s := range f.Sub {
			c.checkFormula(s, scope)
		}
	case FExists, FForall:
		if f.Kind == FExists {
			c.use(featExistential, f.Pos)
		} else {
			c.use(featUniversal, f.Pos)
		}
		for _, v := range f.Vars {
			c.checkTypes(v.Types, v.Pos)
		}
		c.checkFormula(f.Sub[0], extend(scope, f.Vars))
	}
}

func (c *checker) checkEffect(e *Effect, scope map[string][]string) {
	switch e.Kind {
	case EAnd:
		for _, s := range e.Sub {
			c.checkEffect(s, scope)
		}
	case EAdd, EDel:
		if c.derived[e.Pred] {
			c.p.errorf(e.Pos, "effect changes derived predicate %s (derived predicates hold by their :derived rules only)", e.Pred)
			return
		}
		c.checkAtom(e.Pred, e.Args, e.Pos, scope)
	case EForall:
		c.use(featConditional, e.Pos)
		for _, v := range e.Vars {
			c.checkTypes(v.Types, v.Pos)
		}
		c.checkEffect(e.Sub[0], extend(scope, e.Vars))
	case EWhen:
		c.use(featConditional, e.Pos)
		c.inEffect = false
		c.checkFormula(e.Cond, scope)
		c.inEffect = true
		c.checkEffect(e.Sub[0], scope)
	case EIncrease:
		c.use(featCosts, e.Pos)
		c.d.HasCosts = true
		if _, ok := c.funcs["total-cost"]; !ok && !c.warnedC["(total-cost)"] {
			c.warnedC["(total-cost)"] = true
			c.p.warnf(e.Pos, "(total-cost) is not declared in :functions")
		}
		if e.Amount.Fn != "" {
			fd, ok := c.funcs[e.Amount.Fn]
			if !ok {
				c.p.errorf(e.Amount.Pos, "unknown function %s", e.Amount.Fn)
				return
			}
			if len(fd.Params) != len(e.Amount.Args) {
				c.p.errorf(e.Amount.Pos, "function %s takes %d argument(s), found %d", fd.Name, len(fd.Params), len(e.Amount.Args))
				return
			}
			c.checkArgs(fd.Name, fd.Params, e.Amount.Args, scope)
		} else if e.Amount.Value < 0 {
			c.p.errorf(e.Amount.Pos, "negative action cost %s", formatNumber(e.Amount.Value))
		}
	}
}

// checkProblem checks pr against the domain: objects, init atoms and the
// goal. Errors and warnings go to c.p.
func (c *checker) checkProblem(pr *Problem) {
	c.problem = true
	if pr.DomainName != "" && pr.DomainName != c.d.Name {
		c.p.warnf(pr.DomainPos, "problem is for domain %s, not %s", pr.DomainName, c.d.Name)
	}
	for _, o := range pr.Objects {
		c.checkTypes(o.Types, o.Pos)
		if prev, ok := c.objects[o.Name]; ok {
			if fmt.Sprint(prev) != fmt.Sprint(o.Types) {
				c.p.warnf(o.Pos, "object %s declared again with type %s (was %s); it has both", o.Name, typeString(o.Types), typeString(prev))
				c.objects[o.Name] = append(append([]string(nil), prev...), o.Types...)
			} else {
				c.p.warnf(o.Pos, "object %s declared twice", o.Name)
			}
			continue
		}
		c.objects[o.Name] = o.Types
	}
	for _, u := range c.d.undeclared {
		if _, ok := c.objects[u.Name]; !ok {
			c.p.errorf(u.Pos, "unknown object %s (neither a domain constant nor an object of problem %s)", u.Name, pr.Name)
		}
	}
	for _, a := range pr.Init {
		terms := make([]Term, len(a.Args))
		for i, s := range a.Args {
			terms[i] = Term{Name: s, Pos: a.Pos}
		}
		c.checkAtom(a.Pred, terms, a.Pos, nil)
		if c.derived[a.Pred] {
			c.p.errorf(a.Pos, "derived predicate %s in :init (it holds by its :derived rules only)", a.Pred)
		}
	}
	for _, nf := range pr.NumericInit {
		if _, ok := c.funcs[nf.Fn]; !ok && nf.Fn != "total-cost" {
			c.p.warnf(nf.Pos, "function %s is not declared in the domain", nf.Fn)
		}
		for _, s := range nf.Args {
			if _, ok := c.objects[s]; !ok {
				c.p.errorf(nf.Pos, "unknown object %s", s)
			}
		}
	}
	if pr.Goal == nil {
		c.p.errorf(pr.Pos, "problem has no goal")
		return
	}
	c.checkFormula(pr.Goal, map[string][]string{})
}
