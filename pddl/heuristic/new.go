package heuristic

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/nesy-dev/nesy/pddl"
)

// Names returns the base heuristic names New accepts (besides mix).
func Names() []string { return []string{"ff", "add", "max", "lmcut", "goalcount", "blind"} }

// DefaultMix is the specification "mix" without arguments stands for: the
// mean of h_FF and LM-cut.
const DefaultMix = "mix(0.5*ff+0.5*lmcut)"

// Mix is a weighted sum of heuristics. It reports a dead end when any term
// does (every term's dead ends are true dead ends).
type Mix struct {
	name    string
	weights []float64
	terms   []Heuristic
}

// Name implements Heuristic.
func (m *Mix) Name() string { return m.name }

// Eval implements Heuristic.
func (m *Mix) Eval(s pddl.State) (float64, bool) {
	var sum float64
	for i, h := range m.terms {
		v, dead := h.Eval(s)
		if dead {
			return math.Inf(1), true
		}
		sum += m.weights[i] * v
	}
	return sum, false
}

// New builds the heuristic named by spec for t with the default Options.
// See NewWithOptions for the syntax.
func New(spec string, t *pddl.Task) (Heuristic, error) {
	return NewWithOptions(spec, t, Options{})
}

// NewWithOptions builds the heuristic named by spec for t. This is the one
// place heuristic names are parsed; the grammar is
//
//	spec  = base | "mix" | "mix(" term { ("+" | ",") term } ")"
//	term  = [ weight "*" ] base
//	base  = name { ":unit" | ":cost" | ":noneg" | ":negax" }
//	name  = "ff" | "add" | "max" | "lmcut" | "goalcount" | "blind"
//	        (aliases: "hff", "hadd", "hmax", "lm-cut", "gc")
//
// ":unit" counts every action as cost 1 for that heuristic, ":cost" uses the
// task's action costs even when opts.UnitCost is set, ":noneg" ignores
// negative literals (Options.IgnoreNegative), ":negax" negates axioms
// (Options.NegatedAxioms). "mix" alone is
// DefaultMix. Examples: "ff", "lmcut:unit", "mix(1*ff+1*lmcut+0.5*goalcount)".
// Names are case-insensitive; spaces are ignored.
func NewWithOptions(spec string, t *pddl.Task, opts Options) (Heuristic, error) {
	if t == nil {
		return nil, fmt.Errorf("heuristic %q: nil task", spec)
	}
	b := &builder{t: t, opts: opts}
	norm := strings.ToLower(strings.Join(strings.Fields(spec), ""))
	if norm == "mix" {
		norm = DefaultMix
	}
	if rest, ok := strings.CutPrefix(norm, "mix"); ok {
		if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
			return nil, fmt.Errorf("heuristic %q: mix takes a list of terms in parentheses, e.g. %s", spec, DefaultMix)
		}
		body := rest[1 : len(rest)-1]
		if body == "" {
			return nil, fmt.Errorf("heuristic %q: empty mix", spec)
		}
		m := &Mix{}
		var names []string
		for _, term := range strings.FieldsFunc(body, func(r rune) bool { return r == '+' || r == ',' }) {
			w := 1.0
			base := term
			if ws, hs, ok := strings.Cut(term, "*"); ok {
				v, err := strconv.ParseFloat(ws, 64)
				if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					return nil, fmt.Errorf("heuristic %q: bad weight %q in term %q (want a non-negative number)", spec, ws, term)
				}
				w, base = v, hs
			}
			h, err := b.base(base)
			if err != nil {
				return nil, fmt.Errorf("heuristic %q: %w", spec, err)
			}
			m.weights = append(m.weights, w)
			m.terms = append(m.terms, h)
			names = append(names, strconv.FormatFloat(w, 'g', -1, 64)+"*"+h.Name())
		}
		if len(m.terms) == 0 {
			return nil, fmt.Errorf("heuristic %q: empty mix", spec)
		}
		m.name = "mix(" + strings.Join(names, "+") + ")"
		return m, nil
	}
	h, err := b.base(norm)
	if err != nil {
		return nil, fmt.Errorf("heuristic %q: %w", spec, err)
	}
	return h, nil
}

// builder shares one compiled relaxed task per cost mode and negation mode
// among the terms of a mix.
type builder struct {
	t    *pddl.Task
	opts Options
	rel  [2][3]*relaxed // [unit costs][negation mode]
}

func (b *builder) relaxed(unit bool, neg negMode) (*relaxed, error) {
	// Without declared costs both cost modes are the same.
	u := unit || !b.t.HasCosts
	i, j := 0, int(neg)
	if u {
		i = 1
	}
	if b.rel[i][j] == nil {
		r, err := compile(b.t, u, neg)
		if err != nil {
			return nil, err
		}
		b.rel[i][j] = r
	}
	return b.rel[i][j], nil
}

func (b *builder) base(s string) (Heuristic, error) {
	name, mods, _ := strings.Cut(s, ":")
	unit, noneg, negax := b.opts.UnitCost, b.opts.IgnoreNegative, b.opts.NegatedAxioms
	if mods != "" {
		for _, mod := range strings.Split(mods, ":") {
			switch mod {
			case "unit":
				unit = true
			case "cost":
				unit = false
			case "noneg":
				noneg = true
			case "negax":
				negax = true
			default:
				return nil, fmt.Errorf("unknown modifier %q in %q (want :unit, :cost, :noneg or :negax)", mod, s)
			}
		}
	}
	switch name {
	case "goalcount", "gc":
		if mods != "" {
			return nil, fmt.Errorf("goalcount takes no modifier (%q)", s)
		}
		return &GoalCount{t: b.t}, nil
	case "ff", "hff", "add", "hadd", "max", "hmax", "lmcut", "lm-cut", "blind":
	default:
		return nil, fmt.Errorf("unknown heuristic %q (want one of %s, or mix(...))", name, strings.Join(Names(), ", "))
	}
	if (name == "lmcut" || name == "lm-cut") && len(b.t.Axioms) > 0 {
		return nil, fmt.Errorf("lmcut does not support axioms (derived predicates, or conditions compiled into them): the task has %d; use ff, add or max, which treat axioms as zero-cost relaxed rules", len(b.t.Axioms))
	}
	neg := negBasic
	switch {
	case noneg:
		neg = negIgnore
	case negax:
		neg = negAxioms
	}
	r, err := b.relaxed(unit, neg)
	if err != nil {
		return nil, err
	}
	switch name {
	case "ff", "hff":
		return &FF{r: r}, nil
	case "add", "hadd":
		return &HAdd{r: r}, nil
	case "max", "hmax":
		return &HMax{r: r}, nil
	case "lmcut", "lm-cut":
		return &LMCut{r: r}, nil
	default:
		return &Blind{r: r}, nil
	}
}
