package textworld

import (
	"fmt"
	"strings"
)

// Query is a conjunctive query such as
// "atlocation(a:agent, l:location) & not_inreceptacle(o:object, r:receptacle)".
// A predicate written not_p is the negation of p (negation as failure); its
// variables must be bound by the context or by a positive literal.
type Query struct {
	Lits []Literal
	src  string
}

// Literal is one conjunct of a Query.
type Literal struct {
	Neg  bool
	Pred string
	Args []Var
}

// Var is a typed placeholder: Name is the variable, Type the type it must
// have ("" when the query gives none).
type Var struct {
	Name, Type string
}

// String returns the query as written.
func (q *Query) String() string { return q.src }

// ParseQuery parses a conjunctive query: literals p(x:t, ...) joined by '&'.
func ParseQuery(src string) (*Query, error) {
	q := &Query{src: strings.TrimSpace(src)}
	if q.src == "" {
		return nil, fmt.Errorf("empty query")
	}
	for _, part := range strings.Split(q.src, "&") {
		part = strings.TrimSpace(part)
		open := strings.IndexByte(part, '(')
		if open <= 0 || !strings.HasSuffix(part, ")") {
			return nil, fmt.Errorf("query %q: %q is not of the form pred(x:type, ...)", q.src, part)
		}
		lit := Literal{Pred: strings.ToLower(strings.TrimSpace(part[:open]))}
		if p, ok := strings.CutPrefix(lit.Pred, "not_"); ok {
			lit.Neg, lit.Pred = true, p
		}
		for _, c := range lit.Pred {
			if !isIdent(byte(c)) && c != '-' {
				return nil, fmt.Errorf("query %q: bad predicate name %q", q.src, lit.Pred)
			}
		}
		inner := strings.TrimSpace(part[open+1 : len(part)-1])
		if inner != "" {
			for _, a := range strings.Split(inner, ",") {
				name, typ, _ := strings.Cut(strings.TrimSpace(a), ":")
				name, typ = strings.TrimSpace(name), strings.TrimSpace(typ)
				if name == "" {
					return nil, fmt.Errorf("query %q: empty argument in %q", q.src, part)
				}
				lit.Args = append(lit.Args, Var{Name: name, Type: typ})
			}
		}
		q.Lits = append(q.Lits, lit)
	}
	return q, nil
}

// World is what a grammar reads: the facts that hold now (fluent and
// static), object types and display names. Implementations must return facts
// in a fixed order; that order is the order of listed items.
type World interface {
	// Facts returns the argument lists of the facts of pred that hold.
	Facts(pred string) [][]string
	// Holds reports whether pred(args...) holds.
	Holds(pred string, args []string) bool
	// IsA reports whether obj has type typ (a query's x:typ).
	IsA(obj, typ string) bool
	// Name returns the display name of obj ("" when it has none).
	Name(obj string) string
}

// Assignments returns every extension of vars (placeholder -> object) that
// satisfies q in w, in the order w lists facts. vars is not modified.
func (q *Query) Assignments(w World, vars map[string]string) ([]map[string]string, error) {
	b := make(map[string]string, len(vars)+4)
	for k, v := range vars {
		b[k] = v
	}
	var pos, neg []Literal
	for _, l := range q.Lits {
		if l.Neg {
			neg = append(neg, l)
		} else {
			pos = append(pos, l)
		}
	}
	var out []map[string]string
	var err error
	var solve func(i int)
	solve = func(i int) {
		if err != nil {
			return
		}
		if i == len(pos) {
			for _, l := range neg {
				args := make([]string, len(l.Args))
				for k, a := range l.Args {
					v, ok := b[a.Name]
					if !ok {
						err = fmt.Errorf("query %q: variable %s of not_%s is bound by no positive literal", q.src, a.Name, l.Pred)
						return
					}
					args[k] = v
				}
				if w.Holds(l.Pred, args) {
					return
				}
			}
			m := make(map[string]string, len(b))
			for k, v := range b {
				m[k] = v
			}
			out = append(out, m)
			return
		}
		l := pos[i]
		args := make([]string, len(l.Args))
		bound := true
		for k, a := range l.Args {
			v, ok := b[a.Name]
			if !ok {
				bound = false
				break
			}
			args[k] = v
		}
		if bound {
			if w.Holds(l.Pred, args) {
				solve(i + 1)
			}
			return
		}
		for _, tup := range w.Facts(l.Pred) {
			if len(tup) != len(l.Args) {
				continue
			}
			var added []string
			ok := true
			for k, a := range l.Args {
				if v, has := b[a.Name]; has {
					if v != tup[k] {
						ok = false
						break
					}
					continue
				}
				if a.Type != "" && !w.IsA(tup[k], a.Type) {
					ok = false
					break
				}
				b[a.Name] = tup[k]
				added = append(added, a.Name)
			}
			if ok {
				solve(i + 1)
			}
			for _, n := range added {
				delete(b, n)
			}
			if err != nil {
				return
			}
		}
	}
	solve(0)
	return out, err
}
