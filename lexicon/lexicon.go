// Package lexicon maps ground actions to the text a language model reads and
// writes, and objects to display names.
//
// A Lexicon holds, per action schema, a command template such as
// "take {o} from {r}" (placeholders name schema parameters, case-insensitive,
// with or without '?'; {1}, {2}, ... name them by position, 1-based; "{{" and
// "}}" are literal braces), display names for objects (e.g.
// "countertop_bar__minus_00_dot_08_..." -> "countertop 1") and, optionally,
// sentence templates for facts ("the {1} is on top of the {2}", positional
// only). A schema without a template renders in the default form
// "name arg1 arg2" (with display names); an object without a display name
// shows its PDDL name.
//
// Lexicons are plain data and (de)serialize as JSON:
//
//	{"actions": {"pickupobject": "take {o} from {r}"},
//	 "objects": {"apple_bar__plus_01_dot_00": "apple 1"},
//	 "facts":   {"on": "the {1} is on top of the {2}"}}
//
// Bind checks a lexicon against a ground task and precomputes every action's
// text plus the reverse index from text to actions. Two actions may render
// to the same text (a template that leaves a parameter out, or two objects
// with one display name): Bound.Lookup then resolves the text to the LOWEST
// applicable action id, deterministically, and Bound.Ambiguities reports
// where that choice changes the outcome. Builtin and ForTask give the
// lexicons of the project's environments (ALFWorld in TextWorld's command
// forms, VirtualHome, PlanBench Blocksworld).
package lexicon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/nesy-dev/nesy/pddl"
)

// Lexicon is the text of one domain (and, for display names, one problem).
// The zero value is a valid lexicon that renders every action in the default
// form. Keys are matched case-insensitively.
type Lexicon struct {
	// Actions maps an action schema name to its command template.
	Actions map[string]string `json:"actions,omitempty"`
	// Objects maps an object name to its display name. Names of objects the
	// task does not have are ignored, so one lexicon may serve several
	// problems of a domain.
	Objects map[string]string `json:"objects,omitempty"`
	// Facts maps a predicate name to a sentence template with positional
	// placeholders ({1} is the first argument).
	Facts map[string]string `json:"facts,omitempty"`
}

// Parse reads a lexicon from JSON. Unknown fields, keys that differ only in
// case, and empty display names are errors; keys are lower-cased.
func Parse(data []byte) (*Lexicon, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var l Lexicon
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("lexicon: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("lexicon: trailing data after the JSON object")
	}
	var err error
	if l.Actions, err = lowerKeys("actions", l.Actions); err != nil {
		return nil, err
	}
	if l.Objects, err = lowerKeys("objects", l.Objects); err != nil {
		return nil, err
	}
	if l.Facts, err = lowerKeys("facts", l.Facts); err != nil {
		return nil, err
	}
	for k, v := range l.Objects {
		if strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("lexicon: objects: %q has an empty display name", k)
		}
	}
	return &l, nil
}

// MarshalIndent returns the lexicon as indented JSON (keys sorted).
func (l *Lexicon) MarshalIndent() ([]byte, error) { return json.MarshalIndent(l, "", "  ") }

func lowerKeys(what string, m map[string]string) (map[string]string, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		lk := strings.ToLower(k)
		if _, dup := out[lk]; dup {
			return nil, fmt.Errorf("lexicon: %s: %q is given twice (keys are case-insensitive)", what, lk)
		}
		out[lk] = v
	}
	return out, nil
}

// lookup finds key in m case-insensitively.
func lookup(m map[string]string, key string) (string, bool) {
	if v, ok := m[key]; ok {
		return v, true
	}
	for k, v := range m {
		if strings.EqualFold(k, key) {
			return v, true
		}
	}
	return "", false
}

// Name returns the display name of a PDDL object.
func (l *Lexicon) Name(obj string) string {
	if v, ok := lookup(l.Objects, obj); ok {
		return v
	}
	return obj
}

// Template is a parsed text template: literal text and argument slots.
type Template struct {
	src   string
	parts []part
}

// part is literal text (arg < 0) or the argument with index arg.
type part struct {
	lit string
	arg int
}

// String returns the template as written.
func (t *Template) String() string { return t.src }

// ParseTemplate parses a template whose placeholders name the given
// parameters ({name} case-insensitively, with or without '?') or positions
// ({1} is params[0]). params may be nil for a positional-only template of
// arity n: pass nil and n >= 0; with params != nil, n is ignored.
func ParseTemplate(src string, params []string, n int) (*Template, error) {
	if params != nil {
		n = len(params)
	}
	t := &Template{src: src}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, part{lit: lit.String(), arg: -1})
			lit.Reset()
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '{' && i+1 < len(src) && src[i+1] == '{':
			lit.WriteByte('{')
			i++
		case c == '}' && i+1 < len(src) && src[i+1] == '}':
			lit.WriteByte('}')
			i++
		case c == '}':
			return nil, fmt.Errorf("template %q: unmatched '}' at offset %d (write }} for a literal brace)", src, i)
		case c == '{':
			end := strings.IndexByte(src[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("template %q: unclosed '{' at offset %d", src, i)
			}
			ph := strings.TrimSpace(src[i+1 : i+end])
			idx, err := resolve(ph, params, n)
			if err != nil {
				return nil, fmt.Errorf("template %q: %w", src, err)
			}
			flush()
			t.parts = append(t.parts, part{arg: idx})
			i += end
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return t, nil
}

// resolve maps a placeholder to an argument index.
func resolve(ph string, params []string, n int) (int, error) {
	if ph == "" {
		return 0, fmt.Errorf("empty placeholder {}")
	}
	if k, err := strconv.Atoi(ph); err == nil {
		if k < 1 || k > n {
			return 0, fmt.Errorf("placeholder {%s} is out of range: there are %d parameters ({1}..{%d})", ph, n, n)
		}
		return k - 1, nil
	}
	if params == nil {
		return 0, fmt.Errorf("placeholder {%s}: only positional placeholders {1}..{%d} are allowed here", ph, n)
	}
	want := strings.ToLower(strings.TrimPrefix(ph, "?"))
	for i, p := range params {
		if strings.ToLower(strings.TrimPrefix(p, "?")) == want {
			return i, nil
		}
	}
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = strings.TrimPrefix(p, "?")
	}
	return 0, fmt.Errorf("unknown placeholder {%s}: the parameters are %s", ph, strings.Join(names, ", "))
}

// Execute fills the template with args, shown through name (nil: as is).
func (t *Template) Execute(args []string, name func(string) string) string {
	var b strings.Builder
	for _, p := range t.parts {
		if p.arg < 0 {
			b.WriteString(p.lit)
			continue
		}
		if p.arg < len(args) {
			if name != nil {
				b.WriteString(name(args[p.arg]))
			} else {
				b.WriteString(args[p.arg])
			}
		}
	}
	return b.String()
}

// Args returns the argument indexes the template uses, in order.
func (t *Template) Args() []int {
	var out []int
	for _, p := range t.parts {
		if p.arg >= 0 {
			out = append(out, p.arg)
		}
	}
	return out
}

// schemaParams returns the parameter names of a schema of t, or nil and false
// when t does not know the schema.
func schemaParams(t *pddl.Task, schema string) ([]string, bool) {
	if t.Params != nil {
		if p, ok := t.Params[schema]; ok {
			if p == nil {
				p = []string{}
			}
			return p, true
		}
		return nil, false
	}
	for i := range t.Actions {
		if t.Actions[i].Name == schema {
			// Without Task.Params only positional placeholders resolve.
			return nil, true
		}
	}
	return nil, false
}

// schemaArity returns the number of parameters of a schema of t, -1 if unknown.
func schemaArity(t *pddl.Task, schema string) int {
	if p, ok := t.Params[schema]; ok {
		return len(p)
	}
	for i := range t.Actions {
		if t.Actions[i].Name == schema {
			return len(t.Actions[i].Args)
		}
	}
	return -1
}

// compileAction parses the template of schema against t.
func (l *Lexicon) compileAction(t *pddl.Task, schema, src string) (*Template, error) {
	params, ok := schemaParams(t, schema)
	if !ok {
		known := make([]string, 0, len(t.Params))
		for k := range t.Params {
			known = append(known, k)
		}
		sort.Strings(known)
		return nil, fmt.Errorf("lexicon: actions: unknown schema %q (domain %s has: %s)", schema, t.DomainName, strings.Join(known, ", "))
	}
	tpl, err := ParseTemplate(src, params, schemaArity(t, schema))
	if err != nil {
		return nil, fmt.Errorf("lexicon: actions: %s: %w", schema, err)
	}
	return tpl, nil
}

// predicateArities returns the arity of every predicate that occurs in t's
// facts (fluent or static).
func predicateArities(t *pddl.Task) map[string]int {
	ar := map[string]int{}
	for _, f := range t.Facts {
		ar[f.Predicate] = len(f.Args)
	}
	for _, f := range t.Static {
		ar[f.Predicate] = len(f.Args)
	}
	return ar
}

// compileFact parses a fact template; arity is -1 when the predicate does
// not occur in the task (then any positional placeholder is accepted).
func compileFact(pred, src string, arity int) (*Template, error) {
	n := arity
	if n < 0 {
		n = 1 << 20
	}
	tpl, err := ParseTemplate(src, nil, n)
	if err != nil {
		return nil, fmt.Errorf("lexicon: facts: %s: %w", pred, err)
	}
	return tpl, nil
}

// Validate checks the lexicon against a ground task: every action template
// names a schema of the task's domain and only that schema's parameters;
// fact templates are positional and within the predicate's arity; display
// names are not empty.
func (l *Lexicon) Validate(t *pddl.Task) error {
	_, err := l.Bind(t)
	return err
}

// Render returns the text of action a of t. It assumes a valid lexicon (see
// Validate): an action whose template does not parse renders in the default
// form. Use Bind to render many actions.
func (l *Lexicon) Render(t *pddl.Task, a int) string {
	act := &t.Actions[a]
	if src, ok := lookup(l.Actions, act.Name); ok {
		if tpl, err := l.compileAction(t, act.Name, src); err == nil {
			return tpl.Execute(act.Args, l.Name)
		}
	}
	return defaultText(act.Name, act.Args, l.Name)
}

// defaultText is the default form "name arg1 arg2".
func defaultText(name string, args []string, show func(string) string) string {
	var b strings.Builder
	b.WriteString(name)
	for _, a := range args {
		b.WriteByte(' ')
		b.WriteString(show(a))
	}
	return b.String()
}

// FactText returns the sentence for a fact: its template, or the default
// "pred arg1 arg2" with display names.
func (l *Lexicon) FactText(f pddl.Fact) string {
	if src, ok := lookup(l.Facts, f.Predicate); ok {
		if tpl, err := compileFact(f.Predicate, src, len(f.Args)); err == nil {
			return tpl.Execute(f.Args, l.Name)
		}
	}
	return defaultText(f.Predicate, f.Args, l.Name)
}

// Clone returns a deep copy of l.
func (l *Lexicon) Clone() *Lexicon {
	c := &Lexicon{}
	cp := func(m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		o := make(map[string]string, len(m))
		for k, v := range m {
			o[k] = v
		}
		return o
	}
	c.Actions, c.Objects, c.Facts = cp(l.Actions), cp(l.Objects), cp(l.Facts)
	return c
}
