package textworld

import (
	"fmt"
	"strings"
)

// symKind tells what a grammar symbol is.
type symKind int

const (
	symText        symKind = iota // literal text
	symNonterminal                // #tag#
	symEval                       // an expression (only inside {...})
	symCond                       // {expr} or {expr | query}
	symList                       // [{expr | query}]
)

// symbol is one element of a rule's right-hand side.
type symbol struct {
	kind  symKind
	text  string  // literal text (symText) or tag (symNonterminal)
	expr  *expr   // symEval
	inner *symbol // symCond: the expression (symNonterminal or symEval); symList: the symCond
	given *Query  // symCond: optional query
}

// parseSymbols parses a right-hand side in TextWorld's CSG notation. It is
// lenient where TextWorld's parser silently stops: a stray '}' or ']' is kept
// as literal text.
func parseSymbols(src string) ([]*symbol, error) {
	var out []*symbol
	i := 0
	for i < len(src) {
		switch src[i] {
		case '#':
			end := strings.IndexByte(src[i+1:], '#')
			if end < 0 {
				return nil, fmt.Errorf("unterminated #symbol# at offset %d in %q", i, src)
			}
			tag := src[i+1 : i+1+end]
			if strings.TrimSpace(tag) == "" {
				return nil, fmt.Errorf("empty #symbol# at offset %d in %q", i, src)
			}
			out = append(out, &symbol{kind: symNonterminal, text: tag})
			i += end + 2
		case '{':
			sym, n, err := parseCond(src, i)
			if err != nil {
				return nil, err
			}
			out = append(out, sym)
			i = n
		case '[':
			j := i + 1
			for j < len(src) && (src[j] == ' ' || src[j] == '\t') {
				j++
			}
			if j >= len(src) || src[j] != '{' {
				return nil, fmt.Errorf("list at offset %d in %q must hold a {expression | query}", i, src)
			}
			cond, n, err := parseCond(src, j)
			if err != nil {
				return nil, err
			}
			for n < len(src) && (src[n] == ' ' || src[n] == '\t') {
				n++
			}
			if n >= len(src) || src[n] != ']' {
				return nil, fmt.Errorf("list at offset %d in %q is not closed by ']'", i, src)
			}
			out = append(out, &symbol{kind: symList, inner: cond})
			i = n + 1
		default:
			j := i
			for j < len(src) && src[j] != '#' && src[j] != '{' && src[j] != '[' {
				j++
			}
			out = append(out, &symbol{kind: symText, text: src[i:j]})
			i = j
		}
	}
	return out, nil
}

// parseCond parses "{expression [| query]}" starting at src[i] == '{' and
// returns the symbol and the offset after the closing brace.
func parseCond(src string, i int) (*symbol, int, error) {
	end := strings.IndexByte(src[i:], '}')
	if end < 0 {
		return nil, 0, fmt.Errorf("unterminated {expression} at offset %d in %q", i, src)
	}
	body := src[i+1 : i+end]
	exprPart, givenPart, hasGiven := strings.Cut(body, "|")
	exprPart = strings.TrimSpace(exprPart)
	sym := &symbol{kind: symCond}
	if len(exprPart) >= 2 && exprPart[0] == '#' && exprPart[len(exprPart)-1] == '#' {
		sym.inner = &symbol{kind: symNonterminal, text: exprPart[1 : len(exprPart)-1]}
	} else {
		e, err := parseExpr(exprPart)
		if err != nil {
			return nil, 0, fmt.Errorf("{%s} in %q: %w", body, src, err)
		}
		sym.inner = &symbol{kind: symEval, expr: e}
	}
	if hasGiven {
		q, err := ParseQuery(givenPart)
		if err != nil {
			return nil, 0, fmt.Errorf("{%s} in %q: %w", body, src, err)
		}
		sym.given = q
	}
	return sym, i + end + 1, nil
}

// exprKind tells what an expression node is.
type exprKind int

const (
	exStr  exprKind = iota // 'literal'
	exVar                  // x or x.attr
	exPlus                 // a + b
	exOr                   // a or b (Python semantics: a if a is non-empty, else b)
)

// expr is a node of the small expression language of {...} symbols.
type expr struct {
	kind        exprKind
	str         string // exStr
	name, attr  string // exVar
	left, right *expr
}

// parseExpr parses: or := add ('or' add)*; add := primary ('+' primary)*;
// primary := 'string' | "string" | name ['.' attr].
func parseExpr(src string) (*expr, error) {
	p := &exprParser{src: src}
	e, err := p.or()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i < len(p.src) {
		return nil, fmt.Errorf("unexpected %q in expression %q", p.src[p.i:], src)
	}
	return e, nil
}

type exprParser struct {
	src string
	i   int
}

func (p *exprParser) space() {
	for p.i < len(p.src) && (p.src[p.i] == ' ' || p.src[p.i] == '\t') {
		p.i++
	}
}

func isIdent(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func (p *exprParser) ident() string {
	start := p.i
	for p.i < len(p.src) && isIdent(p.src[p.i]) {
		p.i++
	}
	return p.src[start:p.i]
}

func (p *exprParser) or() (*expr, error) {
	left, err := p.add()
	if err != nil {
		return nil, err
	}
	for {
		p.space()
		if strings.HasPrefix(p.src[p.i:], "or") && (p.i+2 == len(p.src) || !isIdent(p.src[p.i+2])) {
			p.i += 2
			right, err := p.add()
			if err != nil {
				return nil, err
			}
			left = &expr{kind: exOr, left: left, right: right}
			continue
		}
		return left, nil
	}
}

func (p *exprParser) add() (*expr, error) {
	left, err := p.primary()
	if err != nil {
		return nil, err
	}
	for {
		p.space()
		if p.i < len(p.src) && p.src[p.i] == '+' {
			p.i++
			right, err := p.primary()
			if err != nil {
				return nil, err
			}
			left = &expr{kind: exPlus, left: left, right: right}
			continue
		}
		return left, nil
	}
}

func (p *exprParser) primary() (*expr, error) {
	p.space()
	if p.i >= len(p.src) {
		return nil, fmt.Errorf("expression %q ends early", p.src)
	}
	switch c := p.src[p.i]; {
	case c == '\'' || c == '"':
		end := strings.IndexByte(p.src[p.i+1:], c)
		if end < 0 {
			return nil, fmt.Errorf("unterminated string in expression %q", p.src)
		}
		s := p.src[p.i+1 : p.i+1+end]
		p.i += end + 2
		return &expr{kind: exStr, str: s}, nil
	case isIdent(c):
		name := p.ident()
		e := &expr{kind: exVar, name: name}
		if p.i < len(p.src) && p.src[p.i] == '.' {
			p.i++
			e.attr = p.ident()
			if e.attr == "" {
				return nil, fmt.Errorf("missing attribute after %q. in expression %q", name, p.src)
			}
			switch e.attr {
			case "name", "id", "indefinite", "definite", "type":
			default:
				return nil, fmt.Errorf("unknown attribute %s.%s in expression %q (known: name, id, indefinite, definite, type)", name, e.attr, p.src)
			}
		}
		return e, nil
	default:
		return nil, fmt.Errorf("unexpected %q in expression %q", p.src[p.i:], p.src)
	}
}
