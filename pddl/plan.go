package pddl

import (
	"bytes"
	"strings"
)

// PlanStep is one action of a plan: a schema name and object names, lower-cased.
type PlanStep struct {
	Name string
	Args []string
	Pos  Pos
}

// String returns the step in PDDL plan syntax, e.g. "(stack a b)".
func (s PlanStep) String() string { return stepString(s.Name, s.Args) }

// ParsePlan reads a plan: one action per line, written "(name a b)" or
// "name a b"; text after ';' and blank lines are ignored, names are
// case-insensitive. A step number such as "3:" before the action and a
// duration such as "[1]" after it (as planners print them) are tolerated.
// Errors (an ErrorList) carry file:line:col positions.
func ParsePlan(filename string, src []byte) ([]PlanStep, error) {
	var steps []PlanStep
	var errs ErrorList
	for ln, line := range bytes.Split(src, []byte("\n")) {
		if len(errs) >= maxErrors {
			break
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		text := string(line)
		col := 1
		trim := func() {
			n := len(text)
			text = strings.TrimLeft(text, " \t\r\f\v\ufeff")
			col += n - len(text)
			text = strings.TrimRight(text, " \t\r\f\v")
		}
		trim()
		if text == "" {
			continue
		}
		pos := Pos{File: filename, Line: ln + 1, Col: col}
		// Optional step label "N:" or "N.M:".
		if i := strings.IndexByte(text, ':'); i > 0 && isNumber(text[:i]) {
			text = text[i+1:]
			col += i + 1
			trim()
			pos.Col = col
		}
		// Optional trailing duration "[d]".
		if strings.HasSuffix(text, "]") {
			if i := strings.LastIndexByte(text, '['); i > 0 && isNumber(text[i+1:len(text)-1]) {
				text = strings.TrimRight(text[:i], " \t")
			}
		}
		if strings.HasPrefix(text, "(") {
			if !strings.HasSuffix(text, ")") {
				errs.Add(pos, "'(' is not closed on this line")
				continue
			}
			inner := text[1 : len(text)-1]
			if strings.ContainsAny(inner, "()") {
				errs.Add(pos, "one action per line, without nested parentheses")
				continue
			}
			text = inner
		} else if strings.ContainsAny(text, "()") {
			errs.Add(pos, "unbalanced parentheses")
			continue
		}
		fields := strings.Fields(strings.ToLower(text))
		if len(fields) == 0 {
			errs.Add(pos, "empty action")
			continue
		}
		ok := true
		for _, f := range fields {
			if !validName(f) {
				errs.Addf(pos, "invalid name %q in action", f)
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		steps = append(steps, PlanStep{Name: fields[0], Args: fields[1:], Pos: pos})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return steps, nil
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	dot := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
		case c == '.' && !dot:
			dot = true
		default:
			return false
		}
	}
	return true
}
