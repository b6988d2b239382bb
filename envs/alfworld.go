package envs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/nesy-dev/nesy/envs/textworld"
	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/pddl"
)

// ALFWorld is the ALFWorld text environment: TextWorld games given as
// game.tw-pddl files (PDDL domain and problem plus TextWorld's grammar).
//
// Commands and feedback follow the game's grammar exactly as ALFWorld's
// TextWorld does: commands are the grammar's templates ("go to {r}",
// "open {r}", "take {o} from {r}", "put {o} in/on {r}", "heat {o} with
// {r}", "use {o}", "examine {o}", "look", "inventory", ...) over ALFWorld's
// object names ("countertop 1": lexicon.AlfredNames), feedback is the
// grammar's derivation after the action ("You arrive at loc 7. On the
// countertop 1, you see a apple 1, and a knife 2."), the first observation
// is the grammar's #intro# (with the task) and the goal its #task#
// ("Your task is to: ..."). Lists name their items in sorted PDDL-name
// order, which is what puts "a cabinet 4, a cabinet 3, ..." in ALFWorld's
// order. One deliberate difference: "look" lists as "next to" the agent
// only objects at its location that are in no receptacle there (TextWorld's
// query also lists objects inside a closed receptacle whenever a second
// receptacle shares the location, which would reveal them).
type ALFWorld struct {
	dir   string
	tasks []TaskInfo
}

// NewALFWorld reads the task list of an ALFWorld split: dir holds
// <task>/<trial>/game.tw-pddl (e.g. datasets/alfworld/valid_unseen).
func NewALFWorld(dir string) (*ALFWorld, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*", "*", "game.tw-pddl"))
	if err != nil {
		return nil, fmt.Errorf("envs: alfworld: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("envs: alfworld: no games (<task>/<trial>/game.tw-pddl) under %s", dir)
	}
	e := &ALFWorld{dir: dir}
	for _, f := range files {
		trial := filepath.Dir(f)
		task := filepath.Dir(trial)
		typ, _, _ := strings.Cut(filepath.Base(task), "-")
		e.tasks = append(e.tasks, TaskInfo{
			ID:   filepath.Base(task) + "/" + filepath.Base(trial),
			Type: typ, Domain: f, Problem: f,
		})
	}
	sort.Slice(e.tasks, func(i, j int) bool { return e.tasks[i].ID < e.tasks[j].ID })
	return e, nil
}

// Split returns the dataset split the games come from: the folder's name
// ("valid_unseen", the evaluation split; "valid_train" for training).
func (e *ALFWorld) Split() string { return filepath.Base(e.dir) }

// Name returns "alfworld".
func (e *ALFWorld) Name() string { return "alfworld" }

// Capabilities: partially observable, renders the agent's view.
func (e *ALFWorld) Capabilities() Capabilities {
	return Capabilities{PartiallyObservable: true, Images: true}
}

// Tasks lists the games sorted by ID ("<task folder>/<trial>").
func (e *ALFWorld) Tasks() []TaskInfo { return slices.Clone(e.tasks) }

// Open loads and grounds one game.
func (e *ALFWorld) Open(ctx context.Context, id string) (*Episode, error) {
	info, err := find(e.tasks, id)
	if err != nil {
		return nil, err
	}
	return openGame(ctx, info)
}

// OpenALFWorldGame opens any game.tw-pddl file as an episode (the task ID is
// the path).
func OpenALFWorldGame(ctx context.Context, path string) (*Episode, error) {
	typ, _, _ := strings.Cut(filepath.Base(filepath.Dir(filepath.Dir(path))), "-")
	return openGame(ctx, TaskInfo{ID: path, Type: typ, Domain: path, Problem: path})
}

// OpenALFWorldGameData opens a game.tw-pddl file's contents as an episode
// of task family typ (an ALFWorld task type such as
// "pick_and_place_simple"); id names it in errors and reports. Package
// train opens the games it writes (further goals on a training scene) with
// it, without a file.
func OpenALFWorldGameData(ctx context.Context, id, typ string, data []byte) (*Episode, error) {
	return openGameData(ctx, TaskInfo{ID: id, Type: typ, Domain: id, Problem: id}, data)
}

func openGame(ctx context.Context, info TaskInfo) (*Episode, error) {
	data, err := os.ReadFile(info.Problem)
	if err != nil {
		return nil, fmt.Errorf("envs: alfworld: %w", err)
	}
	return openGameData(ctx, info, data)
}

func openGameData(ctx context.Context, info TaskInfo, data []byte) (*Episode, error) {
	game, err := textworld.ParseGame(info.Problem, data)
	if err != nil {
		return nil, fmt.Errorf("envs: alfworld: %w", err)
	}
	d, _, err := pddl.ParseDomain(info.Problem+" (pddl_domain)", []byte(game.Domain))
	if err != nil {
		return nil, fmt.Errorf("envs: alfworld: %w", err)
	}
	task, prob, err := ground(ctx, d, info.Problem+" (pddl_problem)", []byte(game.Problem))
	if err != nil {
		return nil, fmt.Errorf("envs: alfworld: %w", err)
	}
	lex, err := ALFWorldLexicon(task, game)
	if err != nil {
		return nil, fmt.Errorf("envs: alfworld: %s: %w", info.ID, err)
	}
	w, err := newALFWorldWorld(task, game, lex, d, prob)
	if err != nil {
		return nil, fmt.Errorf("envs: alfworld: %s: %w", info.ID, err)
	}
	return newEpisode(info, task, lex, w)
}

// ALFWorldLexicon returns the bound lexicon of an ALFWorld task: the game's
// command templates (textworld.Action.PlaceholderTemplate) for the schemas
// the grammar describes, lexicon's built-in ALFWorld templates for any other,
// and ALFWorld's object names.
func ALFWorldLexicon(task *pddl.Task, game *textworld.Game) (*lexicon.Bound, error) {
	lex := lexicon.ForTask(task)
	if lex.Actions == nil {
		lex.Actions = map[string]string{}
	}
	for schema, params := range task.Params {
		act, ok := game.Actions[schema]
		if !ok {
			continue
		}
		tpl, err := act.PlaceholderTemplate(params)
		if err != nil {
			return nil, err
		}
		lex.Actions[schema] = tpl
	}
	return lex.Bind(task)
}

// alfworld is the world of one ALFWorld game.
type alfworld struct {
	task    *pddl.Task
	game    *textworld.Game
	grammar *textworld.Grammar
	lex     *lexicon.Bound
	agent   string
	types   map[string][]string // object -> declared types
	parents map[string][]string // type -> parent types
	byPred  map[string][]factEntry
	static  map[string]bool // static facts by Fact.String()
	// Fluent facts the visibility rules read, by predicate.
	fluentOf map[string][]int
}

// factEntry is a fact of a predicate: static (id -1) or fluent (its id).
type factEntry struct {
	args []string
	id   int
}

func newALFWorldWorld(task *pddl.Task, game *textworld.Game, lex *lexicon.Bound, d *pddl.Domain, p *pddl.Problem) (*alfworld, error) {
	w := &alfworld{
		task: task, game: game, lex: lex,
		types: map[string][]string{}, parents: map[string][]string{},
		byPred: map[string][]factEntry{}, static: map[string]bool{}, fluentOf: map[string][]int{},
	}
	for _, tn := range d.Types {
		w.parents[tn.Name] = tn.Types
	}
	for _, tn := range append(slices.Clone(d.Constants), p.Objects...) {
		w.types[tn.Name] = tn.Types
	}
	for _, f := range task.Static {
		w.byPred[f.Predicate] = append(w.byPred[f.Predicate], factEntry{args: f.Args, id: -1})
		w.static[f.String()] = true
	}
	for id, f := range task.Facts {
		w.byPred[f.Predicate] = append(w.byPred[f.Predicate], factEntry{args: f.Args, id: id})
		w.fluentOf[f.Predicate] = append(w.fluentOf[f.Predicate], id)
	}
	for _, es := range w.byPred {
		sort.SliceStable(es, func(i, j int) bool { return slices.Compare(es[i].args, es[j].args) < 0 })
	}
	for _, o := range task.Objects {
		if w.isa(o, "agent") {
			w.agent = o
			break
		}
	}
	if w.agent == "" {
		return nil, fmt.Errorf("the problem has no object of type agent")
	}
	w.grammar = game.Grammar.Override("list_objects_on_the_floor", w.floorList)
	return w, nil
}

// isa reports whether obj has type typ or a subtype of it.
func (w *alfworld) isa(obj, typ string) bool {
	seen := map[string]bool{}
	todo := slices.Clone(w.types[obj])
	for len(todo) > 0 {
		t := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if t == typ {
			return true
		}
		if !seen[t] {
			seen[t] = true
			todo = append(todo, w.parents[t]...)
		}
	}
	return false
}

// view is the world in one state, as the grammar reads it.
type view struct {
	w *alfworld
	s pddl.State
}

func (v view) Facts(pred string) [][]string {
	var out [][]string
	for _, e := range v.w.byPred[pred] {
		if e.id < 0 || v.s.Has(e.id) {
			out = append(out, e.args)
		}
	}
	return out
}

func (v view) Holds(pred string, args []string) bool {
	f := pddl.Fact{Predicate: pred, Args: args}
	if v.w.static[f.String()] {
		return true
	}
	id := v.w.task.FactID(f)
	return id >= 0 && v.s.Has(id)
}

func (v view) IsA(obj, typ string) bool { return v.w.isa(obj, typ) }
func (v view) Name(obj string) string   { return v.w.lex.Name(obj) }

// Type returns the first declared type of obj ({x.type} in the grammar).
func (v view) Type(obj string) string {
	if ts := v.w.types[obj]; len(ts) > 0 {
		return ts[0]
	}
	return ""
}

// location returns the agent's location in s ("" if none).
func (w *alfworld) location(s pddl.State) string {
	for _, id := range w.fluentOf["atlocation"] {
		if f := w.task.Facts[id]; s.Has(id) && len(f.Args) == 2 && f.Args[0] == w.agent {
			return f.Args[1]
		}
	}
	return ""
}

// scene is what the agent sees in a state.
type scene struct {
	loc        string
	here       map[string]bool // receptacles at loc
	accessible map[string]bool // of those, the open or not openable ones
	objects    map[string]bool // objects seen: in accessible receptacles, held, on the floor at loc
}

func (w *alfworld) scene(s pddl.State) scene {
	v := view{w, s}
	sc := scene{loc: w.location(s), here: map[string]bool{}, accessible: map[string]bool{}, objects: map[string]bool{}}
	for _, f := range v.Facts("receptacleatlocation") {
		if len(f) == 2 && f[1] == sc.loc {
			sc.here[f[0]] = true
			if !v.Holds("openable", f[:1]) || v.Holds("opened", f[:1]) {
				sc.accessible[f[0]] = true
			}
		}
	}
	inSome := map[string]bool{}
	for _, f := range v.Facts("inreceptacle") {
		if len(f) == 2 {
			inSome[f[0]] = true
			if sc.accessible[f[1]] {
				sc.objects[f[0]] = true
			}
		}
	}
	for _, f := range v.Facts("holds") {
		if len(f) == 2 && f[0] == w.agent {
			sc.objects[f[1]] = true
		}
	}
	for _, o := range w.floor(v, sc.loc, inSome) {
		sc.objects[o] = true
	}
	return sc
}

// floor returns the objects at loc that are in no receptacle, sorted.
func (w *alfworld) floor(v view, loc string, inSome map[string]bool) []string {
	var out []string
	for _, f := range v.Facts("objectatlocation") {
		if len(f) == 2 && f[1] == loc && !inSome[f[0]] {
			out = append(out, f[0])
		}
	}
	return out
}

// floorList produces #list_objects_on_the_floor#: "a chair 1, and a window 2"
// for the objects at the agent's location that are in no receptacle (see
// the ALFWorld doc comment for why this differs from TextWorld's query).
func (w *alfworld) floorList(ctx textworld.Context) (string, error) {
	v, ok := ctx.World.(view)
	if !ok {
		return "", fmt.Errorf("not an ALFWorld view")
	}
	loc := ctx.Vars["l"]
	if loc == "" || !v.IsA(loc, "location") {
		loc = w.location(v.s)
	}
	inSome := map[string]bool{}
	for _, f := range v.Facts("inreceptacle") {
		inSome[f[0]] = true
	}
	var items []string
	for _, o := range w.floor(v, loc, inSome) {
		items = append(items, "a "+v.Name(o))
	}
	return w.grammar.List(items, ctx)
}

func (w *alfworld) intro(s pddl.State) (string, error) {
	return w.grammar.Derive("#intro#", textworld.Context{World: view{w, s}, Vars: map[string]string{}})
}

func (w *alfworld) goal() (string, error) {
	return w.grammar.Derive("#task#", textworld.Context{World: view{w, w.task.Init}, Vars: map[string]string{}})
}

func (w *alfworld) feedback(_, s pddl.State, a int) (string, error) {
	act := &w.task.Actions[a]
	ga, ok := w.game.Actions[act.Name]
	if !ok {
		return "", fmt.Errorf("the grammar has no text for action %s", act.Name)
	}
	params := w.task.Params[act.Name]
	vars := make(map[string]string, len(params))
	for i, p := range params {
		if i < len(act.Args) {
			vars[p] = act.Args[i]
		}
	}
	return w.grammar.Derive(ga.Feedback, textworld.Context{World: view{w, s}, Vars: vars})
}

// described returns the receptacle whose contents the feedback of action
// a lists (going to it, opening it, examining it), or "".
func (w *alfworld) described(a int) string {
	if a < 0 {
		return ""
	}
	act := &w.task.Actions[a]
	switch act.Name {
	case "gotolocation", "openobject", "examinereceptacle":
		if n := len(act.Args); n > 0 {
			return act.Args[n-1]
		}
	}
	return ""
}

// visible: the agent's own location (its location is also among the
// objects perceived) and what it holds, the open/closed state of the
// receptacles at its location, the contents of the receptacle the text
// describes (if accessible), the objects "look" lists beside it (and that
// they are at its location), and the one-place properties (hot, clean,
// sliced, ...) of the objects and receptacles it sees.
func (w *alfworld) visible(s pddl.State, a int) (pddl.State, []string) {
	sc := w.scene(s)
	// The text lists the contents of one receptacle at most, and the floor
	// only after "look".
	desc := w.described(a)
	look := a >= 0 && w.task.Actions[a].Name == "look"
	v := view{w, s}
	seen := map[string]bool{}
	for _, f := range v.Facts("holds") {
		if len(f) == 2 && f[0] == w.agent {
			seen[f[1]] = true
		}
	}
	if desc != "" && sc.accessible[desc] {
		for _, f := range v.Facts("inreceptacle") {
			if len(f) == 2 && f[1] == desc {
				seen[f[0]] = true
			}
		}
	}
	floor := map[string]bool{}
	if look {
		inSome := map[string]bool{}
		for _, f := range v.Facts("inreceptacle") {
			inSome[f[0]] = true
		}
		for _, o := range w.floor(v, sc.loc, inSome) {
			seen[o] = true
			floor[o] = true
		}
	}
	sc.objects = seen
	vis := pddl.NewState(len(w.task.Facts))
	for id, f := range w.task.Facts {
		a := f.Args
		switch {
		case f.Predicate == "atlocation" || f.Predicate == "holds" || strings.HasPrefix(f.Predicate, "holdsany"):
			if len(a) > 0 && a[0] == w.agent {
				vis.Set(id)
			}
		case f.Predicate == "opened":
			if len(a) == 1 && sc.here[a[0]] {
				vis.Set(id)
			}
		case f.Predicate == "inreceptacle":
			if len(a) == 2 && a[1] == desc && sc.accessible[a[1]] {
				vis.Set(id)
			}
		case f.Predicate == "objectatlocation":
			// Only "look" tells where an object is (next to the agent); the
			// data's locations of objects in receptacles need not be their
			// receptacle's.
			if len(a) == 2 && a[1] == sc.loc && floor[a[0]] {
				vis.Set(id)
			}
		case len(a) == 1:
			if sc.objects[a[0]] || sc.here[a[0]] {
				vis.Set(id)
			}
		}
	}
	objs := make([]string, 0, len(sc.here)+len(sc.objects)+1)
	if sc.loc != "" {
		objs = append(objs, sc.loc)
	}
	for o := range sc.here {
		objs = append(objs, o)
	}
	for o := range sc.objects {
		if !sc.here[o] {
			objs = append(objs, o)
		}
	}
	sort.Strings(objs)
	return vis, objs
}
