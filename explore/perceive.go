package explore

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/pddl"
)

// Perception methods (the names of the Perceivers).
const (
	// PerceiveText is the deterministic reader of the environment's text
	// templates (NewTextReader): the baseline.
	PerceiveText = "text"
	// PerceiveModel is the language model writing facts by constrained
	// decoding (NewModelReader).
	PerceiveModel = "model"
)

// Input is what a perception step reads: the observation the agent
// received (text, and the image where the environment renders one), the
// command that led to it ("" after Reset) and whether that command was
// carried out (the agent learns it from the text), and the objects the agent
// knows so far. There is no fact list here: the facts are the perceiver's
// to write.
type Input struct {
	Obs      envs.Observation
	Command  string
	Executed bool
	// Image is the view as PNG (nil when there is none).
	Image []byte
	// Known reports whether the agent knows an object (PDDL name).
	Known func(obj string) bool
}

// Percept is what a perception step wrote about one observation: fluent
// facts (ids of the domain's Task.Facts) it read as true and as false, and
// the objects (PDDL names) the observation mentions.
type Percept struct {
	True, False []int
	Objects     []string
}

// Perceiver turns observations into facts: Phase I's perception step. A
// perceiver belongs to one episode (it may keep state across its
// observations) and is used by one goroutine.
type Perceiver interface {
	// Method names the perception method (PerceiveText, PerceiveModel).
	Method() string
	// Perceive reads one observation.
	Perceive(ctx context.Context, in Input) (Percept, error)
	// Covers reports whether the perceiver can ever write facts of the
	// predicate: exploration counts only those as still to learn.
	Covers(predicate string) bool
	// Usage is the model work perception did so far (zero for a reader that
	// uses no model).
	Usage() Usage
	// Close releases what the perceiver holds (a model's sequence).
	Close()
}

// NewTextReader returns the deterministic reader of the environment's text
// for a task of domain (the agent's domain model) and its lexicon: for
// ALFWorld, the feedback templates of TextWorld's grammar (the game's
// game.tw-pddl); for the environments told in the lexicon's fact sentences
// (VirtualHome, Blocksworld), those sentences.
func NewTextReader(domain *pddl.Task, lex *lexicon.Bound) Perceiver {
	if lexicon.Kind(domain.DomainName) == lexicon.ALFWorld {
		return newALFReader(domain, lex)
	}
	return newSentenceReader(domain, lex)
}

// names maps display names to objects.
type names struct {
	obj map[string]string
}

func newNames(domain *pddl.Task, lex *lexicon.Bound) names {
	n := names{obj: map[string]string{}}
	for _, o := range domain.Objects {
		n.obj[lex.Name(o)] = o
	}
	return n
}

// percept collects a perception's facts; a fact set twice keeps its last
// value.
type percept struct {
	domain *pddl.Task
	val    map[int]bool
	objs   map[string]bool
}

func newPercept(domain *pddl.Task) *percept {
	return &percept{domain: domain, val: map[int]bool{}, objs: map[string]bool{}}
}

// set records pred(args) with value v when it is a fluent fact.
func (p *percept) set(v bool, pred string, args ...string) {
	if id := p.domain.FactID(pddl.Fact{Predicate: pred, Args: args}); id >= 0 {
		p.val[id] = v
	}
}

func (p *percept) mention(objs ...string) {
	for _, o := range objs {
		if o != "" {
			p.objs[o] = true
		}
	}
}

func (p *percept) result() Percept {
	var out Percept
	for id, v := range p.val {
		if v {
			out.True = append(out.True, id)
		} else {
			out.False = append(out.False, id)
		}
	}
	for o := range p.objs {
		out.Objects = append(out.Objects, o)
	}
	sort.Ints(out.True)
	sort.Ints(out.False)
	sort.Strings(out.Objects)
	return out
}

// alfReader reads ALFWorld's feedback. Its patterns are the texts of the
// feedback rules of TextWorld's ALFWorld grammar (GotoLocation,
// OpenObject, CloseObject, examineReceptacle, look, inventory, the object
// actions; the grammar is the same in every game), each with the facts its
// rule's condition and list query state. A list ("a apple 1, a egg 1, and
// a mug 1", or "nothing") is closed: objects it does not name are read as
// not there. The start location (TextWorld's "middle of a room") is the one
// location where no receptacle stands (the domain's static facts say
// where each is).
type alfReader struct {
	domain *pddl.Task
	names  names
	agent  string
	locOf  map[string]string // receptacle -> location (static)
	locs   []string          // locations the agent can be at
	start  string            // the location without receptacles, if unique
	recs   []string          // receptacles
	objs   []string          // objects that can be in a receptacle
	byLoc  map[string][]string
	held   []string // objects the agent can hold
}

func newALFReader(domain *pddl.Task, lex *lexicon.Bound) *alfReader {
	r := &alfReader{domain: domain, names: newNames(domain, lex), locOf: map[string]string{}, byLoc: map[string][]string{}}
	seen := map[string]map[string]bool{"loc": {}, "obj": {}, "held": {}}
	add := func(kind, o string, list *[]string) {
		if !seen[kind][o] {
			seen[kind][o] = true
			*list = append(*list, o)
		}
	}
	for _, f := range domain.Facts {
		switch {
		case f.Predicate == "atlocation" && len(f.Args) == 2:
			r.agent = f.Args[0]
			add("loc", f.Args[1], &r.locs)
		case f.Predicate == "inreceptacle" && len(f.Args) == 2:
			add("obj", f.Args[0], &r.objs)
		case f.Predicate == "holds" && len(f.Args) == 2:
			add("held", f.Args[1], &r.held)
		}
	}
	for _, f := range domain.Static {
		if f.Predicate == "receptacleatlocation" && len(f.Args) == 2 {
			r.locOf[f.Args[0]] = f.Args[1]
			r.recs = append(r.recs, f.Args[0])
			r.byLoc[f.Args[1]] = append(r.byLoc[f.Args[1]], f.Args[0])
		}
	}
	var empty []string
	for _, l := range r.locs {
		if len(r.byLoc[l]) == 0 {
			empty = append(empty, l)
		}
	}
	if len(empty) == 1 {
		r.start = empty[0]
	}
	return r
}

// The feedback templates of ALFWorld's grammar, as patterns ({x.name} is
// a name, [ ... ] a list).
var (
	alfMiddle   = regexp.MustCompile(`You are in the middle of a room\. Looking quickly around you, you see (.*?)\.(?:\n|$)`)
	alfArrive   = regexp.MustCompile(`You arrive at ([^.]+)\.`)
	alfOpenIn   = regexp.MustCompile(`The ([^.]+?) is open\. In it, you see (.*?)\.(?:\n|$| )`)
	alfClosed   = regexp.MustCompile(`The ([^.]+?) is closed\.`)
	alfOn       = regexp.MustCompile(`On the ([^.,]+), you see (.*?)\.(?:\n|$| )`)
	alfOpen     = regexp.MustCompile(`You open the ([^.]+)\.`)
	alfClose    = regexp.MustCompile(`You close the ([^.]+)\.`)
	alfPick     = regexp.MustCompile(`You pick up the ([^.]+?) from the ([^.]+)\.`)
	alfPut      = regexp.MustCompile(`You put the ([^.]+?) in/on the ([^.]+)\.`)
	alfTreat    = regexp.MustCompile(`You (heat|clean|cool) the ([^.]+?) using the ([^.]+)\.`)
	alfSlice    = regexp.MustCompile(`You sliced the ([^.]+?) with the ([^.]+)\.`)
	alfToggle   = regexp.MustCompile(`You turn (on|off) the ([^.]+)\.`)
	alfCarry    = regexp.MustCompile(`You are carrying: (.*?)\.(?:\n|$| )`)
	alfCarryNot = regexp.MustCompile(`You are not carrying anything\.`)
	alfFacing   = regexp.MustCompile(`You are facing the (.*?)\. Next to it, you see (.*?)\.(?:\n|$| )`)
)

// list splits a grammar list ("a apple 1, a egg 1, and a mug 1", "a cup
// 1", "nothing") into the objects it names; unknown names are skipped.
func (r *alfReader) list(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" || s == "nothing" {
		return nil
	}
	var out []string
	for _, item := range strings.Split(s, ", ") {
		item = strings.TrimPrefix(item, "and ")
		for _, art := range []string{"a ", "an ", "the "} {
			if o, ok := r.names.obj[strings.TrimPrefix(item, art)]; ok && strings.HasPrefix(item, art) {
				out = append(out, o)
				break
			}
		}
		if o, ok := r.names.obj[item]; ok {
			out = append(out, o)
		}
	}
	return out
}

// alfCovered are the predicates ALFWorld's feedback speaks of (where an
// object in a receptacle is, objectatlocation, it does not say: the
// data's object locations need not be their receptacle's).
var alfCovered = map[string]bool{"atlocation": true, "opened": true, "inreceptacle": true, "holds": true, "holdsany": true, "ishot": true, "isclean": true,
	"iscool": true, "issliced": true, "istoggled": true}

func (r *alfReader) Covers(pred string) bool { return alfCovered[pred] }
func (r *alfReader) Method() string          { return PerceiveText }
func (r *alfReader) Usage() Usage            { return Usage{} }
func (r *alfReader) Close()                  {}

// at records that the agent is at loc (and nowhere else).
func (r *alfReader) at(p *percept, loc string) {
	for _, l := range r.locs {
		p.set(l == loc, "atlocation", r.agent, l)
	}
	p.mention(r.agent, loc)
}

// contents records that rec holds exactly the objects listed.
func (r *alfReader) contents(p *percept, rec string, listed []string) {
	in := map[string]bool{}
	for _, o := range listed {
		in[o] = true
	}
	for _, o := range r.objs {
		p.set(in[o], "inreceptacle", o, rec)
	}
	p.mention(rec)
	p.mention(listed...)
}

func (r *alfReader) Perceive(_ context.Context, in Input) (Percept, error) {
	p := newPercept(r.domain)
	text := in.Obs.Text
	name := func(s string) string { return r.names.obj[strings.TrimSpace(s)] }
	for _, m := range alfMiddle.FindAllStringSubmatch(text, -1) {
		p.mention(r.list(m[1])...)
		if r.start != "" {
			r.at(p, r.start)
		}
	}
	for _, m := range alfArrive.FindAllStringSubmatch(text, -1) {
		if l := name(m[1]); l != "" {
			r.at(p, l)
		}
	}
	for _, m := range alfOpen.FindAllStringSubmatch(text, -1) {
		if rec := name(m[1]); rec != "" {
			p.set(true, "opened", rec)
			p.mention(rec)
		}
	}
	for _, m := range alfOpenIn.FindAllStringSubmatch(text, -1) {
		if rec := name(m[1]); rec != "" {
			p.set(true, "opened", rec)
			r.contents(p, rec, r.list(m[2]))
		}
	}
	for _, m := range alfClosed.FindAllStringSubmatch(text, -1) {
		if rec := name(m[1]); rec != "" {
			p.set(false, "opened", rec)
			p.mention(rec)
		}
	}
	for _, m := range alfClose.FindAllStringSubmatch(text, -1) {
		if rec := name(m[1]); rec != "" {
			p.set(false, "opened", rec)
			p.mention(rec)
		}
	}
	for _, m := range alfOn.FindAllStringSubmatch(text, -1) {
		if rec := name(m[1]); rec != "" {
			p.set(false, "opened", rec) // the grammar's rule for receptacles that do not open
			r.contents(p, rec, r.list(m[2]))
		}
	}
	for _, m := range alfFacing.FindAllStringSubmatch(text, -1) {
		recs := r.list(m[1])
		p.mention(recs...)
		if len(recs) > 0 {
			loc := r.locOf[recs[0]]
			r.at(p, loc)
			for _, o := range r.list(m[2]) {
				p.set(true, "objectatlocation", o, loc)
				p.mention(o)
			}
		}
	}
	for _, m := range alfPick.FindAllStringSubmatch(text, -1) {
		if o, rec := name(m[1]), name(m[2]); o != "" && rec != "" {
			p.set(true, "holds", r.agent, o)
			p.set(true, "holdsany", r.agent)
			p.set(false, "inreceptacle", o, rec)
			p.mention(o, rec)
		}
	}
	for _, m := range alfPut.FindAllStringSubmatch(text, -1) {
		if o, rec := name(m[1]), name(m[2]); o != "" && rec != "" {
			p.set(false, "holds", r.agent, o)
			p.set(true, "inreceptacle", o, rec)
			p.mention(o, rec)
		}
	}
	for _, m := range alfTreat.FindAllStringSubmatch(text, -1) {
		if o := name(m[2]); o != "" {
			p.set(true, map[string]string{"heat": "ishot", "clean": "isclean", "cool": "iscool"}[m[1]], o)
			p.mention(o, name(m[3]))
		}
	}
	for _, m := range alfSlice.FindAllStringSubmatch(text, -1) {
		if o := name(m[1]); o != "" {
			p.set(true, "issliced", o)
			p.mention(o, name(m[2]))
		}
	}
	for _, m := range alfToggle.FindAllStringSubmatch(text, -1) {
		if o := name(m[2]); o != "" {
			p.set(m[1] == "on", "istoggled", o)
			p.mention(o)
		}
	}
	carried := func(listed []string) {
		in := map[string]bool{}
		for _, o := range listed {
			in[o] = true
		}
		for _, o := range r.held {
			p.set(in[o], "holds", r.agent, o)
		}
		p.set(len(listed) > 0, "holdsany", r.agent)
		p.mention(listed...)
	}
	for _, m := range alfCarry.FindAllStringSubmatch(text, -1) {
		carried(r.list(m[1]))
	}
	if alfCarryNot.MatchString(text) {
		carried(nil)
	}
	return p.result(), nil
}

// sentenceReader reads texts told in the lexicon's fact sentences
// (VirtualHome, Blocksworld: "... Here is what you see: S1, S2 and S3.",
// "You <command>. Now S1. No longer S2."): every fluent fact whose sentence
// occurs as a whole phrase is read true, false after "No longer"; a whole
// scene (the first observation) is closed: a fact about objects it
// mentions that it does not state is read false. Where the lexicon gives
// several facts one sentence (VirtualHome's "you are facing the computer"
// for facing(x, computer) whatever x is), the text cannot tell them apart
// and none of them is read, true or false.
type sentenceReader struct {
	domain *pddl.Task
	lex    *lexicon.Bound
	shared map[int]bool // facts whose sentence stands for others too
	facts  []sentence
}

type sentence struct {
	text string
	ids  []int
}

func newSentenceReader(domain *pddl.Task, lex *lexicon.Bound) *sentenceReader {
	r := &sentenceReader{domain: domain, lex: lex, shared: map[int]bool{}}
	at := map[string]int{}
	for id, f := range domain.Facts {
		if !lex.HasFactTemplate(f.Predicate) {
			continue
		}
		s := lex.FactText(f)
		if i, ok := at[s]; ok {
			r.facts[i].ids = append(r.facts[i].ids, id)
			continue
		}
		at[s] = len(r.facts)
		r.facts = append(r.facts, sentence{s, []int{id}})
	}
	for _, f := range r.facts {
		if len(f.ids) > 1 {
			for _, id := range f.ids {
				r.shared[id] = true
			}
		}
	}
	// Longer sentences first, so that a sentence inside a longer one is
	// not read twice.
	sort.SliceStable(r.facts, func(i, j int) bool { return len(r.facts[i].text) > len(r.facts[j].text) })
	return r
}

func (r *sentenceReader) Covers(pred string) bool { return r.lex.HasFactTemplate(pred) }
func (r *sentenceReader) Method() string          { return PerceiveText }
func (r *sentenceReader) Usage() Usage            { return Usage{} }
func (r *sentenceReader) Close()                  {}

func (r *sentenceReader) Perceive(_ context.Context, in Input) (Percept, error) {
	p := newPercept(r.domain)
	text := in.Obs.Text
	pos, neg := text, ""
	if i := strings.Index(text, " No longer "); i >= 0 {
		pos, neg = text[:i], text[i:]
	}
	ambiguous := map[int]bool{}
	read := func(s string, v bool) {
		for _, f := range r.facts {
			if !mentions(s, f.text) {
				continue
			}
			s = strings.ReplaceAll(s, f.text, "")
			if len(f.ids) > 1 {
				// The text cannot tell which of these facts it states: read
				// none of them (they stay unknown).
				for _, id := range f.ids {
					ambiguous[id] = true
					p.mention(r.domain.Facts[id].Args[len(r.domain.Facts[id].Args)-1:]...)
				}
				continue
			}
			fact := r.domain.Facts[f.ids[0]]
			p.set(v, fact.Predicate, fact.Args...)
			p.mention(fact.Args...)
		}
	}
	read(pos, true)
	read(neg, false)
	// A whole scene ("Here is what you see: ...", "As initial conditions I
	// have that, ...") lists every true fact about what it shows: a fact
	// about the objects it mentions that it does not list is false.
	if strings.Contains(text, "Here is what you see:") || strings.HasPrefix(text, "As initial conditions") {
		for id, f := range r.domain.Facts {
			if _, set := p.val[id]; set || ambiguous[id] || r.shared[id] || !r.lex.HasFactTemplate(f.Predicate) {
				continue
			}
			all := true
			for _, o := range f.Args {
				all = all && p.objs[o]
			}
			if all {
				p.val[id] = false
			}
		}
	}
	return p.result(), nil
}

// compile-time checks
var (
	_ Perceiver = (*alfReader)(nil)
	_ Perceiver = (*sentenceReader)(nil)
)

// errNoPerceiver names an unknown perception method.
func errNoPerceiver(method string) error {
	return fmt.Errorf("explore: unknown perception method %q (known: %s, %s)", method, PerceiveText, PerceiveModel)
}
