package pddl

import (
	"fmt"
	"sort"
	"strings"
)

// Pos is a position in a source file. Line and Col are 1-based; Col counts
// bytes. The zero Pos is "no position".
type Pos struct {
	File      string
	Line, Col int
}

// IsValid reports whether p names a line.
func (p Pos) IsValid() bool { return p.Line > 0 }

// String returns "file:line:col", "line:col" without a file name, or the
// file name alone (or "-") when p has no line.
func (p Pos) String() string {
	if !p.IsValid() {
		if p.File != "" {
			return p.File
		}
		return "-"
	}
	if p.File == "" {
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Error is a problem in PDDL or plan input, with the position it was found at.
type Error struct {
	Pos Pos
	Msg string
}

// Error returns "file:line:col: message".
func (e *Error) Error() string {
	if e.Pos.IsValid() || e.Pos.File != "" {
		return e.Pos.String() + ": " + e.Msg
	}
	return e.Msg
}

// ErrorList is a list of positioned errors, sortable by position, in the
// manner of go/scanner.ErrorList. It implements error.
type ErrorList []*Error

// Add appends an error at pos.
func (l *ErrorList) Add(pos Pos, msg string) { *l = append(*l, &Error{Pos: pos, Msg: msg}) }

// Addf appends a formatted error at pos.
func (l *ErrorList) Addf(pos Pos, format string, args ...any) {
	l.Add(pos, fmt.Sprintf(format, args...))
}

// Len implements sort.Interface.
func (l ErrorList) Len() int { return len(l) }

// Swap implements sort.Interface.
func (l ErrorList) Swap(i, j int) { l[i], l[j] = l[j], l[i] }

// Less orders errors by file, line, column and message.
func (l ErrorList) Less(i, j int) bool {
	a, b := l[i].Pos, l[j].Pos
	if a.File != b.File {
		return a.File < b.File
	}
	if a.Line != b.Line {
		return a.Line < b.Line
	}
	if a.Col != b.Col {
		return a.Col < b.Col
	}
	return l[i].Msg < l[j].Msg
}

// Sort sorts the list by position.
func (l ErrorList) Sort() { sort.Stable(l) }

// Error returns the first error and how many more there are.
func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	return fmt.Sprintf("%s (and %d more errors)", l[0], len(l)-1)
}

// Err returns nil for an empty list, else the list as an error.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Detail returns every error, one per line.
func (l ErrorList) Detail() string {
	var b strings.Builder
	for _, e := range l {
		b.WriteString(e.Error())
		b.WriteByte('\n')
	}
	return b.String()
}

// Warning is a tolerated oddity in the input (e.g. a comma in a variable
// list, or a predicate applied to an argument of another type than declared).
type Warning struct {
	Pos Pos
	Msg string
}

// String returns "file:line:col: warning: message".
func (w Warning) String() string { return w.Pos.String() + ": warning: " + w.Msg }

// maxErrors bounds how many errors one parse collects.
const maxErrors = 50
