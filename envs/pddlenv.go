package envs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/pddl"
)

// Suite is a fully observable environment over plain PDDL files: one domain
// and a folder of problems. VirtualHome and Blocksworld are Suites.
//
// Text: commands are the lexicon's action texts (lexicon.Builtin: "walk to
// {obj}", "grab {obj}", "put {obj1} on {obj2}", ... for VirtualHome, with
// object names written with spaces; PlanBench's "pick up the {1}", "stack
// the {1} on top of the {2}", ... with its colour names for Blocksworld).
// The first observation describes the whole state with the lexicon's fact
// sentences (Blocksworld: PlanBench's "As initial conditions I have that,
// the red block is clear, ... and the hand is empty."); the feedback of a
// command is "You <command>." followed by what changed ("Now ... No longer
// ..."); the goal lists the goal facts (Blocksworld: "My goal is to have
// that ..."). Commands that match no applicable action answer "Nothing
// happens.".
type Suite struct {
	name    string
	kind    string // lexicon kind
	domain  *pddl.Domain
	dpath   string // the domain file
	tasks   []TaskInfo
	partial bool
	split   string // VirtualHome's split, "" for all (see Split), or Blocksworld's held-out one
	// srcs holds the problems of a generated suite (the held-out
	// Blocksworld split) by task ID; nil when the problems are files.
	srcs map[string][]byte
}

// Partial returns the suite made partially observable (VirtualHome): the
// contents of closed containers (obj_inside o c, c can_open and closed; an
// object the data puts in several is seen once one is open) are hidden,
// in the text and in Truth, until it is opened. The first observation
// describes what is not hidden; a command's feedback tells what changed
// among what the agent sees and what it sees now that it did not ("You
// see ..."). The fully observable suite stays as it was.
func (s *Suite) Partial() *Suite {
	c := *s
	c.partial = true
	return &c
}

// NewVirtualHome reads the EAI VirtualHome problems: dir holds
// virtualhome.pddl and problems/<task>/<id>.pddl. Task IDs are the problem
// ids ("201_1"), types the task folders ("Wash_clothes").
func NewVirtualHome(dir string) (*Suite, error) {
	files, err := filepath.Glob(filepath.Join(dir, "problems", "*", "*.pddl"))
	if err != nil {
		return nil, fmt.Errorf("envs: virtualhome: %w", err)
	}
	s, err := newSuite("virtualhome", lexicon.VirtualHome, filepath.Join(dir, "virtualhome.pddl"), files, func(f string) (string, string) {
		return strings.TrimSuffix(filepath.Base(f), ".pddl"), filepath.Base(filepath.Dir(f))
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(s.tasks, func(i, j int) bool {
		a, b := s.tasks[i], s.tasks[j]
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		return a.ID < b.ID
	})
	return s, nil
}

// NewBlocksworld reads PlanBench Blocksworld: dir holds domain.pddl and
// instances/instance-N.pddl. Task IDs are "instance-N" (in order of N).
func NewBlocksworld(dir string) (*Suite, error) {
	files, err := filepath.Glob(filepath.Join(dir, "instances", "instance-*.pddl"))
	if err != nil {
		return nil, fmt.Errorf("envs: blocksworld: %w", err)
	}
	s, err := newSuite("blocksworld", lexicon.Blocksworld, filepath.Join(dir, "domain.pddl"), files, func(f string) (string, string) {
		return strings.TrimSuffix(filepath.Base(f), ".pddl"), "blocksworld"
	})
	if err != nil {
		return nil, err
	}
	num := func(id string) int { n, _ := strconv.Atoi(strings.TrimPrefix(id, "instance-")); return n }
	sort.Slice(s.tasks, func(i, j int) bool { return num(s.tasks[i].ID) < num(s.tasks[j].ID) })
	return s, nil
}

func newSuite(name, kind, domainPath string, problems []string, id func(string) (string, string)) (*Suite, error) {
	if len(problems) == 0 {
		return nil, fmt.Errorf("envs: %s: no problem files beside %s", name, domainPath)
	}
	src, err := os.ReadFile(domainPath)
	if err != nil {
		return nil, fmt.Errorf("envs: %s: %w", name, err)
	}
	d, _, err := pddl.ParseDomain(domainPath, src)
	if err != nil {
		return nil, fmt.Errorf("envs: %s: %w", name, err)
	}
	s := &Suite{name: name, kind: kind, domain: d, dpath: domainPath}
	seen := map[string]string{}
	for _, f := range problems {
		tid, typ := id(f)
		if other, dup := seen[tid]; dup {
			return nil, fmt.Errorf("envs: %s: task id %q names both %s and %s", name, tid, other, f)
		}
		seen[tid] = f
		s.tasks = append(s.tasks, TaskInfo{ID: tid, Type: typ, Domain: domainPath, Problem: f})
	}
	return s, nil
}

// Name returns "virtualhome" or "blocksworld".
func (s *Suite) Name() string { return s.name }

// Capabilities: fully observable unless made Partial; no images.
func (s *Suite) Capabilities() Capabilities { return Capabilities{PartiallyObservable: s.partial} }

// Tasks lists the problems (VirtualHome by task folder then id, Blocksworld
// by instance number, its held-out split in order of generation).
func (s *Suite) Tasks() []TaskInfo { return slices.Clone(s.tasks) }

// Open loads and grounds one problem.
func (s *Suite) Open(ctx context.Context, id string) (*Episode, error) {
	info, err := find(s.tasks, id)
	if err != nil {
		return nil, err
	}
	if src, ok := s.srcs[id]; ok {
		return s.open(ctx, info, src)
	}
	src, err := os.ReadFile(info.Problem)
	if err != nil {
		return nil, fmt.Errorf("envs: %s: %w", s.name, err)
	}
	return s.open(ctx, info, src)
}

// OpenProblem grounds a problem of the suite's domain that is not one of
// its files (a generated Blocksworld instance, say) and opens it as Open
// opens the suite's own: same lexicon, text and feedback. id and typ name
// it in reports; path names it in errors.
func (s *Suite) OpenProblem(ctx context.Context, id, typ, path string, src []byte) (*Episode, error) {
	return s.open(ctx, TaskInfo{ID: id, Type: typ, Domain: s.dpath, Problem: path}, src)
}

func (s *Suite) open(ctx context.Context, info TaskInfo, src []byte) (*Episode, error) {
	id := info.ID
	task, _, err := ground(ctx, s.domain, info.Problem, src)
	if err != nil {
		return nil, fmt.Errorf("envs: %s: %w", s.name, err)
	}
	lex, err := lexicon.ForTask(task).Bind(task)
	if err != nil {
		return nil, fmt.Errorf("envs: %s: %s: %w", s.name, id, err)
	}
	w := &described{task: task, lex: lex, kind: s.kind, title: info.Type, partial: s.partial}
	return newEpisode(info, task, lex, w)
}

// described is a fully observable world told in the lexicon's fact
// sentences.
type described struct {
	task  *pddl.Task
	lex   *lexicon.Bound
	kind  string
	title string // VirtualHome task folder
	// partial hides the contents of closed containers (Suite.Partial).
	partial bool
}

// hidden returns the objects inside a closed container in s: objects
// inside some container that can open (can_open; rooms cannot) all of whose
// such containers are closed (nil when the world is fully observable).
func (w *described) hidden(s pddl.State) map[string]bool {
	if !w.partial {
		return nil
	}
	closed, openable := map[string]bool{}, map[string]bool{}
	for _, f := range s.Facts() {
		if fa := w.task.Facts[f]; fa.Predicate == "closed" && len(fa.Args) == 1 {
			closed[fa.Args[0]] = true
		}
	}
	for _, f := range w.task.Static {
		if f.Predicate == "can_open" && len(f.Args) == 1 {
			openable[f.Args[0]] = true
		}
	}
	in := map[string]bool{}  // inside some container that opens
	out := map[string]bool{} // inside one that is open
	add := func(fa pddl.Fact) {
		if fa.Predicate == "obj_inside" && len(fa.Args) == 2 && openable[fa.Args[1]] {
			in[fa.Args[0]] = true
			if !closed[fa.Args[1]] {
				out[fa.Args[0]] = true
			}
		}
	}
	for _, f := range s.Facts() {
		add(w.task.Facts[f])
	}
	for _, f := range w.task.Static {
		add(f)
	}
	hid := map[string]bool{}
	for o := range in {
		if !out[o] {
			hid[o] = true
		}
	}
	return hid
}

// seen reports whether no argument of fa is hidden.
func seen(fa pddl.Fact, hidden map[string]bool) bool {
	for _, o := range fa.Args {
		if hidden[o] {
			return false
		}
	}
	return true
}

// sentences returns the sentences of the fluent facts that hold in s (in
// fact id order).
func (w *described) sentences(ids []int) []string {
	out := make([]string, 0, len(ids))
	for _, f := range ids {
		out = append(out, w.lex.FactText(w.task.Facts[f]))
	}
	return out
}

// joinAnd joins "a, b and c" as PlanBench does.
func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func (w *described) intro(s pddl.State) (string, error) {
	hid := w.hidden(s)
	var ids []int
	for _, f := range s.Facts() {
		if seen(w.task.Facts[f], hid) {
			ids = append(ids, f)
		}
	}
	facts := w.sentences(ids)
	if w.kind == lexicon.Blocksworld {
		return "As initial conditions I have that, " + joinAnd(facts) + ".", nil
	}
	// Static relations (which room things are in, ...) are part of the scene.
	for _, f := range w.task.Static {
		if len(f.Args) >= 2 && w.lex.HasFactTemplate(f.Predicate) && seen(f, hid) {
			facts = append(facts, w.lex.FactText(f))
		}
	}
	return "You are in a house. Here is what you see: " + joinAnd(facts) + ".", nil
}

func (w *described) goal() (string, error) {
	var alts []string
	for _, c := range w.task.Goal {
		items := w.sentences(c.Pos)
		for _, f := range c.Neg {
			items = append(items, "it is not the case that "+w.lex.FactText(w.task.Facts[f]))
		}
		if len(items) == 0 {
			items = []string{"nothing more"}
		}
		alts = append(alts, joinAnd(items))
	}
	g := strings.Join(alts, ", or ")
	if len(alts) == 0 {
		g = "something that can never be reached"
	}
	if w.kind == lexicon.Blocksworld {
		return "My goal is to have that " + g + ".", nil
	}
	return "Your task is to: " + strings.ToLower(strings.ReplaceAll(w.title, "_", " ")) + ". The goal is reached when " + g + ".", nil
}

func (w *described) feedback(prev, s pddl.State, a int) (string, error) {
	var b strings.Builder
	b.WriteString("You ")
	b.WriteString(w.lex.Text(a))
	b.WriteString(".")
	var added, deleted, revealed []int
	hidPrev, hid := w.hidden(prev), w.hidden(s)
	for f := range w.task.Facts {
		fa := w.task.Facts[f]
		if !seen(fa, hid) {
			continue // the agent does not see it now
		}
		switch {
		case !seen(fa, hidPrev):
			if s.Has(f) {
				revealed = append(revealed, f)
			}
		case s.Has(f) && !prev.Has(f):
			added = append(added, f)
		case !s.Has(f) && prev.Has(f):
			deleted = append(deleted, f)
		}
	}
	if len(added) > 0 {
		b.WriteString(" Now " + joinAnd(w.sentences(added)) + ".")
	}
	if len(revealed) > 0 {
		b.WriteString(" You see that " + joinAnd(w.sentences(revealed)) + ".")
	}
	if len(deleted) > 0 {
		b.WriteString(" No longer " + joinAnd(w.sentences(deleted)) + ".")
	}
	return b.String(), nil
}

// visible: everything, or (partial) everything not naming an object inside
// a closed container.
func (w *described) visible(s pddl.State, _ int) (pddl.State, []string) {
	hid := w.hidden(s)
	vis := pddl.NewState(len(w.task.Facts))
	for f := range w.task.Facts {
		if seen(w.task.Facts[f], hid) {
			vis.Set(f)
		}
	}
	objs := slices.DeleteFunc(slices.Clone(w.task.Objects), func(o string) bool { return hid[o] })
	sort.Strings(objs)
	return vis, objs
}
