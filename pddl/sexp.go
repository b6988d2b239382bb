package pddl

import (
	"strings"
	"unicode/utf8"
)

// sexp is a node of the s-expression tree the PDDL parser reads: either an
// atom (a lower-cased name, variable, keyword or number) or a list.
type sexp struct {
	pos    Pos // position of the atom or of the opening parenthesis
	end    Pos // position of the closing parenthesis (lists only)
	atom   string
	list   []*sexp
	isList bool
}

func (s *sexp) String() string {
	if !s.isList {
		return s.atom
	}
	var b strings.Builder
	s.write(&b, 0)
	return b.String()
}

// write prints s, eliding deep or long lists so messages stay short.
func (s *sexp) write(b *strings.Builder, depth int) {
	if !s.isList {
		b.WriteString(s.atom)
		return
	}
	if depth > 3 || b.Len() > 120 {
		b.WriteString("(...)")
		return
	}
	b.WriteByte('(')
	for i, c := range s.list {
		if i > 0 {
			b.WriteByte(' ')
		}
		c.write(b, depth+1)
	}
	b.WriteByte(')')
}

// head returns the first atom of a list, or "".
func (s *sexp) head() string {
	if s.isList && len(s.list) > 0 && !s.list[0].isList {
		return s.list[0].atom
	}
	return ""
}

// maxDepth bounds list nesting so hostile input cannot exhaust memory.
const maxDepth = 1000

// reader turns source text into s-expressions, tracking positions.
type reader struct {
	file      string
	src       []byte
	off       int
	line, col int
	errs      ErrorList
	warns     []Warning
	commaSeen bool
}

func newReader(file string, src []byte) *reader {
	r := &reader{file: file, src: src, line: 1, col: 1}
	if len(src) >= 3 && src[0] == 0xef && src[1] == 0xbb && src[2] == 0xbf {
		r.off = 3 // a UTF-8 byte order mark
	}
	return r
}

func (r *reader) pos() Pos { return Pos{File: r.file, Line: r.line, Col: r.col} }

func (r *reader) advance() {
	if r.src[r.off] == '\n' {
		r.line++
		r.col = 1
	} else {
		r.col++
	}
	r.off++
}

// skip passes over whitespace, comments and commas (tolerated as separators
// with a warning).
func (r *reader) skip() {
	for r.off < len(r.src) {
		c := r.src[r.off]
		switch {
		case c == ';':
			for r.off < len(r.src) && r.src[r.off] != '\n' {
				r.advance()
			}
		case c == ',':
			r.warns = append(r.warns, Warning{Pos: r.pos(), Msg: "comma in a list is not PDDL; treated as a space"})
			r.advance()
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			r.advance()
		default:
			return
		}
	}
}

func isDelim(c byte) bool {
	switch c {
	case '(', ')', ';', ',', ' ', '\t', '\n', '\r', '\f', '\v':
		return true
	}
	return false
}

// readAll reads every top-level expression in the source.
func (r *reader) readAll() []*sexp {
	var out []*sexp
	for {
		r.skip()
		if r.off >= len(r.src) {
			return out
		}
		e := r.read(0)
		if e == nil {
			return out
		}
		out = append(out, e)
	}
}

// read reads one expression; it returns nil after reporting an error that
// makes the rest of the input meaningless (unbalanced parentheses).
func (r *reader) read(depth int) *sexp {
	r.skip()
	if r.off >= len(r.src) {
		r.errs.Add(r.pos(), "unexpected end of input")
		return nil
	}
	p := r.pos()
	switch c := r.src[r.off]; c {
	case ')':
		r.errs.Add(p, "unexpected ')'")
		return nil
	case '(':
		if depth >= maxDepth {
			r.errs.Addf(p, "lists nested deeper than %d", maxDepth)
			return nil
		}
		r.advance()
		n := &sexp{pos: p, isList: true}
		for {
			r.skip()
			if r.off >= len(r.src) {
				r.errs.Add(p, "'(' is never closed")
				return nil
			}
			if r.src[r.off] == ')' {
				n.end = r.pos()
				r.advance()
				return n
			}
			c := r.read(depth + 1)
			if c == nil {
				return nil
			}
			n.list = append(n.list, c)
		}
	default:
		start := r.off
		for r.off < len(r.src) && !isDelim(r.src[r.off]) {
			r.advance()
		}
		text := r.src[start:r.off]
		if !utf8.Valid(text) {
			r.errs.Add(p, "invalid UTF-8 in name")
		}
		return &sexp{pos: p, atom: strings.ToLower(string(text))}
	}
}
