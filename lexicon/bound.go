package lexicon

import (
	"fmt"
	"sort"
	"strings"

	"github.com/nesy-dev/nesy/pddl"
)

// Bound is a lexicon checked against one ground task, with every action's
// text precomputed and an index from text to actions. It is immutable and
// safe for concurrent use.
type Bound struct {
	task   *pddl.Task
	lex    *Lexicon
	names  map[string]string // object -> display name (task objects only)
	facts  map[string]*Template
	text   []string         // action id -> text
	byText map[string][]int // text -> action ids, ascending
}

// Choice is an executable text and the action it stands for.
type Choice struct {
	Text   string
	Action int
}

// Collision is a text shared by several actions.
type Collision struct {
	Text    string
	Actions []int // ascending
}

// Bind validates l against t (see Validate) and precomputes the text of
// every action. A nil lexicon binds as the zero Lexicon (default forms).
func (l *Lexicon) Bind(t *pddl.Task) (*Bound, error) {
	if t == nil {
		return nil, fmt.Errorf("lexicon: nil task")
	}
	if l == nil {
		l = &Lexicon{}
	}
	b := &Bound{task: t, lex: l, names: map[string]string{}, facts: map[string]*Template{}}
	tpls := map[string]*Template{}
	keys := make([]string, 0, len(l.Actions))
	for k := range l.Actions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		schema := strings.ToLower(k)
		if _, dup := tpls[schema]; dup {
			return nil, fmt.Errorf("lexicon: actions: %q is given twice (keys are case-insensitive)", schema)
		}
		tpl, err := l.compileAction(t, schema, l.Actions[k])
		if err != nil {
			return nil, err
		}
		tpls[schema] = tpl
	}
	ar := predicateArities(t)
	keys = keys[:0]
	for k := range l.Facts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		pred := strings.ToLower(k)
		if _, dup := b.facts[pred]; dup {
			return nil, fmt.Errorf("lexicon: facts: %q is given twice (keys are case-insensitive)", pred)
		}
		arity, ok := ar[pred]
		if !ok {
			arity = -1
		}
		tpl, err := compileFact(pred, l.Facts[k], arity)
		if err != nil {
			return nil, err
		}
		b.facts[pred] = tpl
	}
	objs := map[string]bool{}
	for _, o := range t.Objects {
		objs[o] = true
	}
	for k, v := range l.Objects {
		o := strings.ToLower(k)
		if !objs[o] {
			continue
		}
		if strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("lexicon: objects: %q has an empty display name", o)
		}
		b.names[o] = v
	}
	b.text = make([]string, len(t.Actions))
	b.byText = make(map[string][]int, len(t.Actions))
	for i := range t.Actions {
		act := &t.Actions[i]
		var s string
		if tpl, ok := tpls[act.Name]; ok {
			s = tpl.Execute(act.Args, b.Name)
		} else {
			s = defaultText(act.Name, act.Args, b.Name)
		}
		b.text[i] = s
		b.byText[s] = append(b.byText[s], i)
	}
	return b, nil
}

// Task returns the task the lexicon is bound to.
func (b *Bound) Task() *pddl.Task { return b.task }

// Lexicon returns the lexicon that was bound.
func (b *Bound) Lexicon() *Lexicon { return b.lex }

// Name returns the display name of an object (its PDDL name if it has none).
func (b *Bound) Name(obj string) string {
	if v, ok := b.names[obj]; ok {
		return v
	}
	return obj
}

// Text returns the text of action a.
func (b *Bound) Text(a int) string { return b.text[a] }

// FactText returns the sentence for a fact (see Lexicon.FactText).
func (b *Bound) FactText(f pddl.Fact) string {
	if tpl, ok := b.facts[f.Predicate]; ok {
		return tpl.Execute(f.Args, b.Name)
	}
	return defaultText(f.Predicate, f.Args, b.Name)
}

// HasFactTemplate reports whether the lexicon gives a sentence for pred.
func (b *Bound) HasFactTemplate(pred string) bool {
	_, ok := b.facts[pred]
	return ok
}

// Actions returns the ids of all actions (applicable or not) whose text is
// exactly text, in increasing order. The slice must not be modified.
func (b *Bound) Actions(text string) []int { return b.byText[text] }

// Lookup returns the action that text stands for in state s: the lowest id
// among the applicable actions whose text is exactly text. ok is false when
// no applicable action has that text.
func (b *Bound) Lookup(s pddl.State, text string) (action int, ok bool) {
	for _, a := range b.byText[text] {
		if b.task.IsApplicable(s, a) {
			return a, true
		}
	}
	return -1, false
}

// Applicable returns one Choice per distinct text of the actions applicable
// in s, each with the action Lookup would pick, in increasing action order.
func (b *Bound) Applicable(s pddl.State) []Choice {
	ids := b.task.Applicable(s, nil)
	seen := make(map[string]bool, len(ids))
	out := make([]Choice, 0, len(ids))
	for _, a := range ids {
		t := b.text[a]
		if seen[t] {
			continue
		}
		seen[t] = true
		out = append(out, Choice{Text: t, Action: a})
	}
	return out
}

// Ambiguities returns the texts that, in state s, stand for several
// applicable actions with different successor states (so that picking the
// lowest id, as Lookup does, may not be what the writer meant). Sorted by
// text; each Actions lists the applicable actions with that text.
func (b *Bound) Ambiguities(s pddl.State) []Collision {
	groups := map[string][]int{}
	for _, a := range b.task.Applicable(s, nil) {
		groups[b.text[a]] = append(groups[b.text[a]], a)
	}
	var out []Collision
	for text, ids := range groups {
		if len(ids) < 2 {
			continue
		}
		next := b.task.Apply(s, ids[0])
		for _, a := range ids[1:] {
			if !b.task.Apply(s, a).Equal(next) {
				out = append(out, Collision{Text: text, Actions: ids})
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Text < out[j].Text })
	return out
}

// NameCollisions returns display names shared by several objects of the
// task, each with the objects (sorted), sorted by name.
func (b *Bound) NameCollisions() map[string][]string {
	by := map[string][]string{}
	for _, o := range b.task.Objects {
		n := b.Name(o)
		by[n] = append(by[n], o)
	}
	out := map[string][]string{}
	for n, objs := range by {
		if len(objs) > 1 {
			sort.Strings(objs)
			out[n] = objs
		}
	}
	return out
}

// ActionForms lists the action schemas of the task in the lexicon's words,
// each parameter shown as <name>: "take <o> from <r>", or in the default
// form "pick-up <ob>" (the domain's parameter names) where the lexicon has
// no template. Sorted, without duplicates (the command list of a prompt).
func (b *Bound) ActionForms() []string {
	seen := map[string]bool{}
	var out []string
	for schema, params := range b.task.Params {
		slots := make([]string, len(params))
		for i, p := range params {
			slots[i] = "<" + p + ">"
		}
		form := strings.TrimSpace(schema + " " + strings.Join(slots, " "))
		if src, ok := b.lex.Actions[schema]; ok {
			if t, err := ParseTemplate(src, params, 0); err == nil {
				form = t.Execute(slots, nil)
			}
		}
		if !seen[form] {
			seen[form] = true
			out = append(out, form)
		}
	}
	sort.Strings(out)
	return out
}
