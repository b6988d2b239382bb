package textworld

import (
	"fmt"
	"strings"
)

// Grammar is a set of named rules. A Grammar is immutable after parsing and
// safe for concurrent use.
type Grammar struct {
	rules  map[string][]*rule
	native map[string]NativeRule
}

// rule is one alternative of a named rule: it applies when cond (if any) has
// at least one satisfying assignment in the context.
type rule struct {
	rhs  []*symbol
	cond *Query
}

// NativeRule produces the text of a symbol in Go instead of from the
// grammar's rules (see Grammar.Override).
type NativeRule func(ctx Context) (string, error)

// Context is what a derivation reads: the world and the entities bound so
// far (placeholder name -> object id), e.g. an action's parameters.
type Context struct {
	World World
	Vars  map[string]string
}

// Has reports whether the grammar defines a rule (or override) called name.
func (g *Grammar) Has(name string) bool {
	_, ok := g.rules[name]
	_, nat := g.native[name]
	return ok || nat
}

// Override returns a copy of g in which the symbol #name# is produced by fn
// instead of by the grammar's rules. g is not changed.
func (g *Grammar) Override(name string, fn NativeRule) *Grammar {
	n := &Grammar{rules: g.rules, native: make(map[string]NativeRule, len(g.native)+1)}
	for k, v := range g.native {
		n.native[k] = v
	}
	n.native[name] = fn
	return n
}

// maxDepth bounds rule expansion so that a recursive grammar fails instead of
// overflowing the stack.
const maxDepth = 64

// Derive expands a symbol string such as "#intro#" or
// "You arrive at {lend.name}. #examineReceptacle.feedback#" in ctx.
func (g *Grammar) Derive(symbols string, ctx Context) (string, error) {
	syms, err := parseSymbols(symbols)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := g.derive(syms, ctx, &b, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

func (g *Grammar) derive(syms []*symbol, ctx Context, b *strings.Builder, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("grammar expansion deeper than %d symbols (recursive rules?)", maxDepth)
	}
	for _, s := range syms {
		switch s.kind {
		case symText:
			b.WriteString(s.text)
		case symNonterminal:
			if err := g.expand(s.text, ctx, b, depth); err != nil {
				return err
			}
		case symCond:
			items, err := g.items(s, ctx, depth)
			if err != nil {
				return err
			}
			for _, it := range items {
				b.WriteString(it)
			}
		case symList:
			items, err := g.items(s.inner, ctx, depth)
			if err != nil {
				return err
			}
			if err := g.list(items, ctx, b, depth); err != nil {
				return err
			}
		default:
			return fmt.Errorf("expression outside {...}")
		}
	}
	return nil
}

// expand writes the first applicable alternative of rule name.
func (g *Grammar) expand(name string, ctx Context, b *strings.Builder, depth int) error {
	if fn, ok := g.native[name]; ok {
		s, err := fn(ctx)
		if err != nil {
			return fmt.Errorf("#%s#: %w", name, err)
		}
		b.WriteString(s)
		return nil
	}
	alts, ok := g.rules[name]
	if !ok {
		return fmt.Errorf("unknown symbol #%s#", name)
	}
	for _, r := range alts {
		if r.cond != nil {
			as, err := r.cond.Assignments(ctx.World, ctx.Vars)
			if err != nil {
				return fmt.Errorf("#%s#: %w", name, err)
			}
			if len(as) == 0 {
				continue
			}
		}
		return g.derive(r.rhs, ctx, b, depth+1)
	}
	return fmt.Errorf("no alternative of #%s# applies", name)
}

// items derives a {expr | query} symbol once per satisfying assignment (once
// when there is no query).
func (g *Grammar) items(s *symbol, ctx Context, depth int) ([]string, error) {
	ctxs := []Context{ctx}
	if s.given != nil {
		as, err := s.given.Assignments(ctx.World, ctx.Vars)
		if err != nil {
			return nil, err
		}
		ctxs = ctxs[:0]
		for _, a := range as {
			ctxs = append(ctxs, Context{World: ctx.World, Vars: a})
		}
	}
	out := make([]string, 0, len(ctxs))
	for _, c := range ctxs {
		switch s.inner.kind {
		case symEval:
			v, err := eval(s.inner.expr, c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		default:
			var b strings.Builder
			if err := g.derive([]*symbol{s.inner}, c, &b, depth+1); err != nil {
				return nil, err
			}
			out = append(out, b.String())
		}
	}
	return out, nil
}

// list writes items as TextWorld does: #list_empty# for none, the item for
// one, else "a#list_separator#b#list_last_separator#c".
func (g *Grammar) list(items []string, ctx Context, b *strings.Builder, depth int) error {
	switch len(items) {
	case 0:
		return g.expand("list_empty", ctx, b, depth)
	case 1:
		b.WriteString(items[0])
		return nil
	}
	for i, it := range items {
		switch {
		case i == len(items)-1:
			if err := g.expand("list_last_separator", ctx, b, depth); err != nil {
				return err
			}
		case i > 0:
			if err := g.expand("list_separator", ctx, b, depth); err != nil {
				return err
			}
		}
		b.WriteString(it)
	}
	return nil
}

// eval evaluates an expression; entities have name (display name), id,
// indefinite ("a", as TextWorld's PDDL games set it), definite ("the") and
// type; a bare variable is its display name.
func eval(e *expr, ctx Context) (string, error) {
	switch e.kind {
	case exStr:
		return e.str, nil
	case exPlus, exOr:
		l, err := eval(e.left, ctx)
		if err != nil {
			return "", err
		}
		if e.kind == exOr && l != "" {
			return l, nil
		}
		r, err := eval(e.right, ctx)
		if err != nil {
			return "", err
		}
		if e.kind == exOr {
			return r, nil
		}
		return l + r, nil
	}
	id, ok := ctx.Vars[e.name]
	if !ok {
		return "", fmt.Errorf("unbound variable %q", e.name)
	}
	switch e.attr {
	case "", "name":
		return ctx.World.Name(id), nil
	case "id":
		return id, nil
	case "indefinite":
		return "a", nil
	case "definite":
		return "the", nil
	case "type":
		return typeOf(ctx.World, id), nil
	}
	return "", fmt.Errorf("unknown attribute %s.%s", e.name, e.attr)
}

// typeOf returns the type of id if the world can tell it (it implements
// interface{ Type(string) string }), else "".
func typeOf(w World, id string) string {
	if t, ok := w.(interface{ Type(string) string }); ok {
		return t.Type(id)
	}
	return ""
}

// PlaceholderTemplate converts an action's command template to the plain
// placeholder form used by package lexicon: "take {o} from {r}" stays as it
// is, and a list naming one bound parameter, e.g. GotoLocation's
// "go to [{r.name | receptacleatlocation(r:receptacle, lend:location)}]",
// becomes "go to {r}" (TextWorld binds r to the action's own receptacle
// parameter, so the list has exactly that one element; TextWorld's replan
// spells the command "go to {r}" too). Literal braces are doubled. params
// are the schema's parameter names; a template naming anything else is an
// error.
func (a Action) PlaceholderTemplate(params []string) (string, error) {
	syms, err := parseSymbols(a.Template)
	if err != nil {
		return "", fmt.Errorf("action %s: %w", a.Name, err)
	}
	known := map[string]bool{}
	for _, p := range params {
		known[strings.ToLower(strings.TrimPrefix(p, "?"))] = true
	}
	var b strings.Builder
	param := func(e *expr) (string, bool) {
		if e.kind == exVar && (e.attr == "" || e.attr == "name") && known[strings.ToLower(e.name)] {
			return strings.ToLower(e.name), true
		}
		return "", false
	}
	for _, s := range syms {
		switch s.kind {
		case symText:
			b.WriteString(strings.NewReplacer("{", "{{", "}", "}}").Replace(s.text))
			continue
		case symCond:
			if s.given == nil && s.inner.kind == symEval {
				if p, ok := param(s.inner.expr); ok {
					b.WriteString("{" + p + "}")
					continue
				}
			}
		case symList:
			c := s.inner
			if c.given != nil && c.inner.kind == symEval {
				if p, ok := param(c.inner.expr); ok && mentions(c.given, p) {
					b.WriteString("{" + p + "}")
					continue
				}
			}
		}
		return "", fmt.Errorf("action %s: template %q: only literal text, {param} and [{param.name | query}] naming a parameter (%s) can become a command template",
			a.Name, a.Template, strings.Join(params, ", "))
	}
	return b.String(), nil
}

// mentions reports whether the query uses variable v.
func mentions(q *Query, v string) bool {
	for _, l := range q.Lits {
		for _, a := range l.Args {
			if strings.EqualFold(a.Name, v) {
				return true
			}
		}
	}
	return false
}

// List formats items as the grammar's [ ... ] lists do: #list_empty# for
// none, else items joined by #list_separator# and #list_last_separator#.
func (g *Grammar) List(items []string, ctx Context) (string, error) {
	var b strings.Builder
	if err := g.list(items, ctx, &b, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}
