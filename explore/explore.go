package explore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/pddl/heuristic"
	"github.com/nesy-dev/nesy/pddl/search"
)

// Skill kinds (the values of Options.Skills).
const (
	SkillGo    = "go"
	SkillOpen  = "open"
	SkillClose = "close"
	SkillLook  = "look"
	// Done is the text of the skill that ends exploration.
	Done = "done"
)

// Stop reasons (Result.Stop).
const (
	StopReady     = "ready"     // the goal is grounded (the harness stopped)
	StopDone      = "done"      // the model said done (Options.ModelStops)
	StopBudget    = "budget"    // Options.MaxSteps skills were used
	StopExhausted = "exhausted" // no skill is left to offer: nothing more can be learned
	StopCanceled  = "canceled"  // the context ended
)

// Defaults for the zero values of Options.
const (
	DefaultMaxSteps        = 50
	DefaultReadyExpansions = 20000
)

// DefaultSystem is the exploration chat's system message.
const DefaultSystem = "You are an embodied agent in a household. Before a plan is made for your task, " +
	"you explore to find the objects and places the task needs. Each turn, answer with exactly one " +
	"of the actions you are offered (go to a place, open or close a receptacle, look), or done " +
	"when everything the task needs has been found."

// Episode is the agent's side of an environment episode; *envs.Agent
// (envs.Episode.Agent) implements it. Observations are text (and images):
// no fact list, no true state, no initial state (Domain's Init is empty).
// The harness uses Domain as the domain model (facts, actions, static
// facts, goal) and learns facts only through its Perceiver.
type Episode interface {
	Reset() (envs.Observation, error)
	Step(command string) (envs.Observation, error)
	Domain() *pddl.Task
	Lexicon() *lexicon.Bound
	Image() (image.Image, error)
}

// Options configure Explore. The zero value explores with informative
// skills and greedy choices, stops at Ready or after 50 skills.
type Options struct {
	// MaxSteps is the exploration budget in skills executed; 0 means
	// DefaultMaxSteps.
	MaxSteps int
	// AllSkills offers every valid skill (revisits, close, look) instead of
	// only the informative ones.
	AllSkills bool
	// ModelStops lets the model decide when to stop: the harness does not
	// stop at Ready but offers "done" from then on.
	ModelStops bool
	// Skills maps the task's exploration schemas to skill kinds (SkillGo,
	// SkillOpen, SkillClose, SkillLook); nil means DefaultSkills.
	Skills map[string]string
	// Images says the environment renders the agent's view
	// (envs.Capabilities.Images): each observation's image is attached to
	// its message.
	Images bool
	// System replaces DefaultSystem when not empty.
	System string
	// Dialog configures the model's choices (sampling, vocabulary index).
	Dialog DialogOptions
	// ReadyExpansions bounds the search that decides Ready; 0 means
	// DefaultReadyExpansions. A search that runs out of expansions without
	// proving the goal unreachable counts as Ready.
	ReadyExpansions int
	// Perception is the perception method: PerceiveText ("" too, the
	// deterministic reader of the environment's text) or PerceiveModel (the
	// exploring model writes the facts, configured by Reader).
	Perception string
	// Reader configures the model's perception (PerceiveModel).
	Reader ModelReaderOptions
	// Perceiver, when not nil, is the perception step to use instead of
	// the one Perception names (it belongs to this episode; Explore closes
	// it).
	Perceiver Perceiver
}

// Step is one skill of an exploration.
type Step struct {
	// Skill is the command given, Kind its kind (or Done).
	Skill string `json:"skill"`
	Kind  string `json:"kind"`
	// Offered is the number of skills the model chose among.
	Offered int `json:"offered"`
	// Feedback is the environment's answer.
	Feedback string `json:"feedback"`
	// Executed says the environment carried the skill out, as the agent
	// learns it from the feedback (not "Nothing happens."; false only if the
	// belief was wrong).
	Executed bool `json:"executed"`
	// Learned is the number of facts known after the step that were not
	// before.
	Learned int `json:"learned"`
}

// Result is what exploration hands Phase II.
type Result struct {
	// Ready: the goal is grounded in the estimate (a plan reaches it there).
	Ready bool `json:"ready"`
	// Stop says why exploration ended (StopReady, StopDone, ...).
	Stop  string `json:"stop"`
	Steps []Step `json:"steps"`
	// Belief is the agent's knowledge: facts observed, or known from the
	// effects of executed skills, with their last values.
	Belief envs.Belief `json:"-"`
	// Estimate is the belief as a state (unknown facts false).
	Estimate pddl.State `json:"-"`
	// Known are the objects the agent knows (PDDL names, sorted); Binding
	// maps their display names to them.
	Known   []string          `json:"-"`
	Binding map[string]string `json:"binding"`
	// Task is the ground task restricted to the known objects (its actions
	// and static facts name only objects the agent knows; fact ids are the
	// domain's, action ids are not) with Init = Estimate; Lexicon is the
	// env's lexicon bound to it.
	Task    *pddl.Task     `json:"-"`
	Lexicon *lexicon.Bound `json:"-"`
	// ReadyPlan is the plan (ids of Task.Actions, the known-object task)
	// the Ready check found,
	// nil when none was found.
	ReadyPlan []int `json:"-"`
	// Perception is the perception method used; Perceived counts the
	// facts it wrote (true or false) over all observations.
	Perception string `json:"perception"`
	Perceived  int    `json:"perceived"`
	// Usage is the model's work (choosing skills and perceiving);
	// ImagesRendered the images attached to messages; Invalid the skills the
	// environment refused.
	Usage          Usage   `json:"usage"`
	ImagesRendered int     `json:"images_rendered"`
	Invalid        int     `json:"invalid"`
	Seconds        float64 `json:"seconds"`
	// Transcript is the exploration chat.
	Transcript []models.Message `json:"-"`
}

// DefaultSkills returns the exploration schemas of the built-in domains
// present in t: ALFWorld's gotolocation, openobject, closeobject and look;
// VirtualHome's walk_towards, walk_into, open, close and look_at. Other
// domains have none (exploration then ends at once).
func DefaultSkills(t *pddl.Task) map[string]string {
	var all map[string]string
	switch lexicon.Kind(t.DomainName) {
	case lexicon.ALFWorld:
		all = map[string]string{"gotolocation": SkillGo, "openobject": SkillOpen, "closeobject": SkillClose, "look": SkillLook}
	case lexicon.VirtualHome:
		all = map[string]string{"walk_towards": SkillGo, "walk_into": SkillGo, "open": SkillOpen, "close": SkillClose, "look_at": SkillLook}
	}
	out := map[string]string{}
	for s, k := range all {
		if _, ok := t.Params[s]; ok {
			out[s] = k
		}
	}
	return out
}

// Explore resets the episode and explores it with lm choosing the skills,
// until the goal is grounded or another stop condition holds (see the
// package comment). It returns what Phase II plans from. The episode is left
// where exploration ended. A cancelled context returns the result so far
// (Stop StopCanceled) with the context's error.
func Explore(ctx context.Context, lm models.LM, ep Episode, opts Options) (*Result, error) {
	start := time.Now()
	if opts.MaxSteps <= 0 {
		opts.MaxSteps = DefaultMaxSteps
	}
	if opts.ReadyExpansions <= 0 {
		opts.ReadyExpansions = DefaultReadyExpansions
	}
	x, err := newExplorer(ep, opts)
	if err != nil {
		return nil, err
	}
	per := opts.Perceiver
	if per == nil {
		switch opts.Perception {
		case "", PerceiveText:
			per = NewTextReader(x.task, x.lex)
		case PerceiveModel:
			ro := opts.Reader
			if ro.Dialog.Index == nil {
				ro.Dialog.Index = opts.Dialog.Index
			}
			if ro.Dialog.Seed == 0 {
				ro.Dialog.Seed = opts.Dialog.Seed
			}
			if per, err = NewModelReader(lm, x.task, x.lex, ro); err != nil {
				return nil, err
			}
		default:
			return nil, errNoPerceiver(opts.Perception)
		}
	}
	defer per.Close()
	x.per = per
	obs, err := ep.Reset()
	if err != nil {
		return nil, fmt.Errorf("explore: %w", err)
	}
	if err := x.observe(ctx, obs, ""); err != nil {
		return nil, err
	}
	first := strings.TrimSpace(obs.Text)
	if g := strings.TrimSpace(obs.Goal); g != "" && !strings.Contains(first, g) {
		first += "\n\n" + g
	}
	sys := opts.System
	if sys == "" {
		sys = DefaultSystem
	}
	msgs := []models.Message{{Role: "system", Content: sys}, x.message(first)}
	d, err := NewDialog(lm, msgs, opts.Dialog)
	if err != nil {
		return nil, err
	}
	defer d.Close()

	res := &Result{}
	stop, err := x.loop(ctx, d, res)
	res.Stop = stop
	x.finish(res)
	res.Usage = d.Usage().Add(per.Usage())
	res.Perception, res.Perceived = per.Method(), x.perceived
	res.ImagesRendered = x.images
	res.Transcript = slices.Clone(d.Messages())
	res.Seconds = time.Since(start).Seconds()
	return res, err
}

// loop runs the turns and returns the stop reason.
func (x *explorer) loop(ctx context.Context, d *Dialog, res *Result) (string, error) {
	for {
		if err := ctx.Err(); err != nil {
			return StopCanceled, err
		}
		ready, plan, err := x.ready(ctx)
		if err != nil {
			return StopCanceled, err
		}
		res.Ready, res.ReadyPlan = ready, plan
		if ready && !x.opts.ModelStops {
			return StopReady, nil
		}
		if len(res.Steps) >= x.opts.MaxSteps {
			return StopBudget, nil
		}
		texts, kinds := x.skills(ready)
		if len(texts) == 0 {
			return StopExhausted, nil
		}
		note := "You can: " + strings.Join(texts, ", ") + "."
		i, err := d.ChooseNote(ctx, texts, note)
		if err != nil {
			if ctx.Err() != nil {
				return StopCanceled, err
			}
			return StopCanceled, fmt.Errorf("explore: choosing a skill: %w", err)
		}
		if kinds[i] == Done {
			res.Steps = append(res.Steps, Step{Skill: Done, Kind: Done, Offered: len(texts)})
			return StopDone, nil
		}
		before := x.belief.Known.Len()
		obs, err := x.ep.Step(texts[i])
		if err != nil {
			return StopCanceled, fmt.Errorf("explore: %w", err)
		}
		executed := strings.TrimSpace(obs.Text) != envs.NothingHappens
		if !executed {
			x.invalid++
		}
		if err := x.observe(ctx, obs, texts[i]); err != nil {
			return StopCanceled, err
		}
		d.Add(x.message(obs.Text))
		res.Steps = append(res.Steps, Step{Skill: texts[i], Kind: kinds[i], Offered: len(texts),
			Feedback: obs.Text, Executed: executed, Learned: x.belief.Known.Len() - before})
		res.Invalid = x.invalid
	}
}

// explorer is the state of one exploration.
type explorer struct {
	ep     Episode
	opts   Options
	per    Perceiver
	task   *pddl.Task
	lex    *lexicon.Bound
	skill  map[string]string // schema -> kind
	cands  []int             // actions of skill schemas
	belief envs.Belief
	// known objects, and per object the fluent facts naming it.
	known   map[string]bool
	factsOf map[string][]int
	names   []nameOf // display names of not-yet-known objects, to find in texts
	// kTask is the domain restricted to the kCount known objects, kH its
	// heuristic (see knownTask).
	kTask  *pddl.Task
	kH     heuristic.Heuristic
	kCount int
	// named holds the objects some command's text names; the others
	// (ALFWorld's locations, the agent) are implicit in the commands.
	named     map[string]bool
	images    int
	invalid   int
	perceived int
	// attachPending: the latest observation's image is still to attach.
	attachPending bool
	lastKey       string
	lastRdy       bool
	lastPln       []int
}

type nameOf struct{ obj, name string }

func newExplorer(ep Episode, opts Options) (*explorer, error) {
	task, lex := ep.Domain(), ep.Lexicon()
	if task == nil || lex == nil {
		return nil, errors.New("explore: the episode has no task or lexicon")
	}
	skill := opts.Skills
	if skill == nil {
		skill = DefaultSkills(task)
	}
	n := len(task.Facts)
	x := &explorer{
		ep: ep, opts: opts, task: task, lex: lex, skill: skill,
		belief:  envs.Belief{Known: pddl.NewState(n), True: pddl.NewState(n)},
		known:   map[string]bool{},
		factsOf: map[string][]int{},
	}
	for a := range task.Actions {
		if _, ok := skill[task.Actions[a].Name]; ok {
			x.cands = append(x.cands, a)
		}
	}
	x.named = map[string]bool{}
	for a := range task.Actions {
		for _, o := range task.Actions[a].Args {
			if !x.named[o] && mentions(lex.Text(a), lex.Name(o)) {
				x.named[o] = true
			}
		}
	}
	for id, f := range task.Facts {
		for _, o := range f.Args {
			if l := x.factsOf[o]; len(l) == 0 || l[len(l)-1] != id {
				x.factsOf[o] = append(l, id)
			}
		}
	}
	for _, o := range task.Objects {
		if len(x.factsOf[o]) == 0 {
			x.known[o] = true // a constant of the domain model (a type)
		} else {
			x.names = append(x.names, nameOf{o, lex.Name(o)})
		}
	}
	return x, nil
}

// observe updates the belief after an observation: the effects of the
// command (when the text says it was carried out, the domain model says
// what it did, as the belief understood it) first, then what the
// perception step reads in the observation, which wins. It then updates
// the known objects.
func (x *explorer) observe(ctx context.Context, obs envs.Observation, command string) error {
	b := x.belief
	set := func(f int, v bool) {
		b.Known.Set(f)
		if v {
			b.True.Set(f)
		} else {
			b.True.Clear(f)
		}
	}
	executed := command != "" && strings.TrimSpace(obs.Text) != envs.NothingHappens
	if a, ok := x.lex.Lookup(x.estimate(), strings.TrimSpace(command)); executed && ok {
		act := &x.task.Actions[a]
		prior := b.True.Clone()
		knownPrior := b.Known.Clone()
		for _, f := range act.Del {
			set(f, false)
		}
		for _, f := range act.Add {
			set(f, true)
		}
		for _, ce := range act.Cond {
			if !conjKnown(ce.Cond, knownPrior) || !ce.Cond.Holds(prior) {
				continue
			}
			for _, f := range ce.Del {
				set(f, false)
			}
			for _, f := range ce.Add {
				set(f, true)
			}
		}
	}
	in := Input{Obs: obs, Command: command, Executed: executed, Known: func(o string) bool { return x.known[o] }}
	if x.opts.Images {
		if img, err := x.ep.Image(); err == nil && img != nil {
			var buf bytes.Buffer
			if png.Encode(&buf, img) == nil {
				in.Image = buf.Bytes()
			}
		}
	}
	pc, err := x.per.Perceive(ctx, in)
	if err != nil {
		return fmt.Errorf("explore: perception: %w", err)
	}
	for _, f := range pc.False {
		if f >= 0 && f < len(x.task.Facts) {
			set(f, false)
			x.perceived++
		}
	}
	for _, f := range pc.True {
		if f >= 0 && f < len(x.task.Facts) {
			set(f, true)
			x.perceived++
		}
	}
	for _, o := range pc.Objects {
		x.known[o] = true
	}
	for _, f := range b.True.Facts() {
		for _, o := range x.task.Facts[f].Args {
			x.known[o] = true
		}
	}
	x.names = slices.DeleteFunc(x.names, func(n nameOf) bool {
		if x.known[n.obj] {
			return true
		}
		if mentions(obs.Text, n.name) || mentions(obs.Goal, n.name) {
			x.known[n.obj] = true
			return true
		}
		return false
	})
	if x.opts.Images {
		x.attachPending = true
	}
	return nil
}

func conjKnown(c pddl.Conj, known pddl.State) bool {
	for _, f := range c.Pos {
		if !known.Has(f) {
			return false
		}
	}
	for _, f := range c.Neg {
		if !known.Has(f) {
			return false
		}
	}
	return true
}

// mentions reports whether text names name as a whole phrase (not inside
// a longer word or number: "drawer 1" is not in "drawer 10").
func mentions(text, name string) bool {
	if name == "" {
		return false
	}
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		s, e := i+j, i+j+len(name)
		if (s == 0 || !isWord(text[s-1])) && (e == len(text) || !isWord(text[e])) {
			return true
		}
		i = s + 1
	}
}

func isWord(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// message builds a user message with the current view's image when the
// environment renders one.
func (x *explorer) message(text string) models.Message {
	m := models.Message{Role: "user", Content: text}
	if x.opts.Images && x.attachPending {
		x.attachPending = false
		if img, err := x.ep.Image(); err == nil && img != nil {
			var buf bytes.Buffer
			if png.Encode(&buf, img) == nil {
				m.Images = [][]byte{buf.Bytes()}
				x.images++
			}
		}
	}
	return m
}

// estimate is the belief as a state: facts last seen true (unknown facts
// are false).
func (x *explorer) estimate() pddl.State { return x.belief.True.Clone() }

// taskAt returns the task restricted to the known objects (see known)
// with Init = s (the indexes are shared: they do not depend on Init).
func (x *explorer) taskAt(s pddl.State) (*pddl.Task, heuristic.Heuristic, error) {
	k, h, err := x.knownTask()
	if err != nil {
		return nil, nil, err
	}
	t := *k
	t.Init = s
	return &t, h, nil
}

// knownTask returns the domain restricted to what the agent knows: the
// ground actions all of whose objects are known or implicit (named by no
// command: ALFWorld's locations) and the static facts all of whose objects
// are known (an action over an object the agent has not perceived is not
// in it, so no plan can use it and no prompt names it), and an FF
// heuristic for it. It is rebuilt when the
// known objects grow. Action ids differ from the domain's; fact ids do not.
func (x *explorer) knownTask() (*pddl.Task, heuristic.Heuristic, error) {
	if x.kTask != nil && x.kCount == len(x.known) {
		return x.kTask, x.kH, nil
	}
	t := *x.task
	t.Actions = nil
	for _, a := range x.task.Actions {
		if x.allKnown(a.Args) {
			t.Actions = append(t.Actions, a)
		}
	}
	t.Static = slices.DeleteFunc(slices.Clone(x.task.Static), func(f pddl.Fact) bool {
		for _, o := range f.Args {
			if !x.known[o] {
				return true
			}
		}
		return false
	})
	t.Reindex()
	h, err := heuristic.New("ff", &t)
	if err != nil {
		return nil, nil, fmt.Errorf("explore: %w", err)
	}
	x.kTask, x.kH, x.kCount = &t, h, len(x.known)
	return x.kTask, x.kH, nil
}

// allKnown reports whether every object of objs is known or implicit (named
// by no command: ALFWorld's locations, the agent).
func (x *explorer) allKnown(objs []string) bool {
	for _, o := range objs {
		if !x.known[o] && x.named[o] {
			return false
		}
	}
	return true
}

// ready decides whether the goal is grounded in the estimate: relaxed
// reachability first (cheap), then a bounded greedy best-first search. The
// answer is cached by estimate.
func (x *explorer) ready(ctx context.Context) (bool, []int, error) {
	est := x.estimate()
	key := est.Key()
	if key == x.lastKey {
		return x.lastRdy, x.lastPln, nil
	}
	x.lastKey = key
	x.lastRdy, x.lastPln = false, nil
	t, h, err := x.taskAt(est)
	if err != nil {
		return false, nil, err
	}
	if _, dead := h.Eval(est); dead {
		return false, nil, nil
	}
	r, err := search.Solve(ctx, t, search.Options{Heuristic: h, MaxExpansions: x.opts.ReadyExpansions})
	if err != nil {
		return false, nil, fmt.Errorf("explore: ready check: %w", err)
	}
	switch r.Status {
	case search.Solved:
		x.lastRdy, x.lastPln = true, r.Plan
	case search.ExpansionLimit, search.TimeLimit:
		x.lastRdy = true
	case search.Canceled:
		x.lastKey = ""
		return false, nil, ctx.Err()
	}
	return x.lastRdy, x.lastPln, nil
}

// skills returns the skills to offer (texts, sorted, and their kinds): see
// the package comment.
func (x *explorer) skills(ready bool) ([]string, []string) {
	est := x.estimate()
	type sk struct{ text, kind string }
	var opens, others []sk
	seen := map[string]bool{}
	for _, a := range x.cands {
		act := &x.task.Actions[a]
		if !x.task.IsApplicable(est, a) {
			continue
		}
		target := ""
		if len(act.Args) > 0 {
			target = act.Args[len(act.Args)-1]
			if !x.known[target] {
				continue
			}
		}
		kind := x.skill[act.Name]
		text := x.lex.Text(a)
		if seen[text] {
			continue
		}
		if !x.opts.AllSkills {
			if kind != SkillGo && kind != SkillOpen || !x.informative(target) {
				continue
			}
		}
		seen[text] = true
		if kind == SkillOpen && !x.opts.AllSkills {
			opens = append(opens, sk{text, kind})
		} else {
			others = append(others, sk{text, kind})
		}
	}
	list := others
	if len(opens) > 0 {
		list = opens // a closed receptacle at hand with unknown contents: open it first
	}
	sort.Slice(list, func(i, j int) bool { return list[i].text < list[j].text })
	if ready && x.opts.ModelStops {
		list = append(list, sk{Done, Done})
	}
	texts := make([]string, len(list))
	kinds := make([]string, len(list))
	for i, s := range list {
		texts[i], kinds[i] = s.text, s.kind
	}
	return texts, kinds
}

// informative reports whether some fluent fact naming obj that the
// perceiver can write is still unknown.
func (x *explorer) informative(obj string) bool {
	for _, f := range x.factsOf[obj] {
		if !x.belief.Known.Has(f) && (x.per == nil || x.per.Covers(x.task.Facts[f].Predicate)) {
			return true
		}
	}
	return false
}

// finish fills the result's belief, estimate, known objects, binding and
// Phase II task.
func (x *explorer) finish(res *Result) {
	res.Belief = envs.Belief{Known: x.belief.Known.Clone(), True: x.belief.True.Clone()}
	res.Estimate = x.estimate()
	res.Binding = map[string]string{}
	for o := range x.known {
		res.Known = append(res.Known, o)
		if len(x.factsOf[o]) > 0 {
			res.Binding[x.lex.Name(o)] = o
		}
	}
	sort.Strings(res.Known)
	t, _, err := x.taskAt(res.Estimate)
	if err != nil {
		t = x.taskAt0(res.Estimate)
	}
	res.Task = t
	if lex, err := x.lex.Lexicon().Bind(t); err == nil {
		res.Lexicon = lex
	} else {
		res.Lexicon = x.lex
	}
}

// taskAt0 is the whole domain with Init = s (a fallback that cannot fail).
func (x *explorer) taskAt0(s pddl.State) *pddl.Task {
	t := *x.task
	t.Init = s
	return &t
}
