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
	name   string
	kind   string // lexicon kind
	domain *pddl.Domain
	tasks  []TaskInfo
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
	s := &Suite{name: name, kind: kind, domain: d}
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

// Capabilities: fully observable, no images.
func (s *Suite) Capabilities() Capabilities { return Capabilities{} }

// Tasks lists the problems (VirtualHome by task folder then id, Blocksworld
// by instance number).
func (s *Suite) Tasks() []TaskInfo { return slices.Clone(s.tasks) }

// Open loads and grounds one problem.
func (s *Suite) Open(ctx context.Context, id string) (*Episode, error) {
	info, err := find(s.tasks, id)
	if err != nil {
		return nil, err
	}
	src, err := os.ReadFile(info.Problem)
	if err != nil {
		return nil, fmt.Errorf("envs: %s: %w", s.name, err)
	}
	task, _, err := ground(ctx, s.domain, info.Problem, src)
	if err != nil {
		return nil, fmt.Errorf("envs: %s: %w", s.name, err)
	}
	lex, err := lexicon.ForTask(task).Bind(task)
	if err != nil {
		return nil, fmt.Errorf("envs: %s: %s: %w", s.name, id, err)
	}
	w := &described{task: task, lex: lex, kind: s.kind, title: info.Type}
	return newEpisode(info, task, lex, w)
}

// described is a fully observable world told in the lexicon's fact
// sentences.
type described struct {
	task  *pddl.Task
	lex   *lexicon.Bound
	kind  string
	title string // VirtualHome task folder
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
	facts := w.sentences(s.Facts())
	if w.kind == lexicon.Blocksworld {
		return "As initial conditions I have that, " + joinAnd(facts) + ".", nil
	}
	// Static relations (which room things are in, ...) are part of the scene.
	for _, f := range w.task.Static {
		if len(f.Args) >= 2 && w.lex.HasFactTemplate(f.Predicate) {
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
	var added, deleted []int
	for f := range w.task.Facts {
		switch {
		case s.Has(f) && !prev.Has(f):
			added = append(added, f)
		case !s.Has(f) && prev.Has(f):
			deleted = append(deleted, f)
		}
	}
	if len(added) > 0 {
		b.WriteString(" Now " + joinAnd(w.sentences(added)) + ".")
	}
	if len(deleted) > 0 {
		b.WriteString(" No longer " + joinAnd(w.sentences(deleted)) + ".")
	}
	return b.String(), nil
}

// visible: everything (fully observable).
func (w *described) visible(pddl.State, int) (pddl.State, []string) {
	vis := pddl.NewState(len(w.task.Facts))
	for f := range w.task.Facts {
		vis.Set(f)
	}
	objs := slices.Clone(w.task.Objects)
	sort.Strings(objs)
	return vis, objs
}
