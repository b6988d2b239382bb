// Package envs holds the environments the benchmarks run in: ALFWorld (the
// 134 valid_unseen TextWorld games), VirtualHome (the EAI PDDL problems) and
// PlanBench Blocksworld, all behind one interface.
//
// # The interface
//
// An Env is a suite of tasks. Env.Open loads and grounds one task and
// returns an Episode: the hidden true state of the grounded pddl.Task plus
// the text the agent sees. The loop a benchmark runner or an exploration
// harness writes is
//
//	ep, err := env.Open(ctx, info.ID)
//	obs, err := ep.Reset()           // obs.Text: first observation; obs.Goal: the task
//	for !done {
//	    res, err := ep.Step(command) // command: text in the env's lexicon, e.g. "go to fridge 1"
//	    // res.Text: feedback ("Nothing happens." for a command that matches no applicable action)
//	    // res.Action: the ground action executed (-1 if none); res.Success: the goal holds
//	}
//
// Commands are the texts of the env's lexicon (Episode.Lexicon, a
// lexicon.Bound): a command is executed iff it is exactly (after trimming
// surrounding white space) the text of an action applicable in the true
// state; when several applicable actions share the text, the lowest action
// id runs (lexicon.Bound.Lookup). Anything else changes nothing and answers
// "Nothing happens.", as ALFWorld does. Success is judged only from the
// true state: the task's goal holds there (pddl.Task.GoalReached).
//
// # Observations and belief
//
// An observation is text only (Observation: what a real agent gets; the
// agent's side of an episode, Agent, hands out nothing else). The
// environment keeps its own account of what that text shows, for scoring
// perception: Episode.Truth, the fluent facts (ids of Task.Facts) whose
// truth value the agent perceives now and the objects it sees, and
// Episode.Belief, every visible fact's last value since Reset. Static facts (Task.Static: types,
// which receptacle is where, ...) are the domain model, not observations;
// the env does not hide them and does not report them.
//
// ALFWorld is partially observable, and the agent perceives what the text
// tells: where it is and what it holds, the receptacles at its location
// and whether they are open, the contents of the receptacle the last
// command went to, opened or examined (when it is open or cannot be
// closed; not those of other receptacles at the same location, which the
// text does not list), the objects "look" lists beside it, and the
// properties of the objects it sees; the contents of a closed receptacle
// stay unknown until it is opened.
// VirtualHome and Blocksworld are fully observable: Visible is every fluent
// fact and the text describes the whole state (initially) and every change.
// VirtualHome's partially observable variant (Suite.Partial, Options.Partial)
// hides the contents of closed containers until they are opened.
//
// ALFWorld renders the agent's view (Capabilities.Images, Episode.Image): a
// picture of what its text tells. VirtualHome and Blocksworld do not
// (Episode.Image returns ErrNoImage), so a harness knows to use the text.
//
// Episode.Admissible lists the commands applicable in the TRUE state (as
// ALFWorld's admissible_commands do); it may name objects the agent has not
// seen, so a harness that must not cheat builds its choices from the belief.
//
// An Env is safe for concurrent use (several Open calls at once); an Episode
// is not: use one per goroutine.
package envs

import (
	"context"
	"errors"
	"fmt"
	"image"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/pddl"
)

// NothingHappens is the feedback to a command that matches no applicable
// action (ALFWorld's text, used by every env).
const NothingHappens = "Nothing happens."

// ErrNoImage is returned by Episode.Image for environments that cannot render
// the agent's view (Capabilities.Images false).
var ErrNoImage = errors.New("envs: this environment renders no images; use the text observations")

// Env is a suite of tasks of one kind.
type Env interface {
	// Name is the environment's name: "alfworld", "virtualhome" or "blocksworld".
	Name() string
	// Capabilities says what the environment's episodes offer.
	Capabilities() Capabilities
	// Tasks lists the suite's tasks in a fixed order.
	Tasks() []TaskInfo
	// Open loads and grounds the task with this ID and returns a new episode;
	// call Reset before Step.
	Open(ctx context.Context, id string) (*Episode, error)
}

// Capabilities says what an environment offers.
type Capabilities struct {
	// PartiallyObservable: observations show only part of the true state
	// (Observation.Visible is not every fact).
	PartiallyObservable bool
	// Images: Episode.Image renders the agent's view (ALFWorld).
	Images bool
}

// TaskInfo describes one task of a suite.
type TaskInfo struct {
	// ID is unique in the suite: ALFWorld "<task folder>/<trial>",
	// VirtualHome the problem id ("201_1"), Blocksworld "instance-N".
	ID string
	// Type is the task family: the ALFWorld task type
	// ("pick_heat_then_place_in_recep", ...), the VirtualHome task folder
	// ("Wash_clothes", ...), "blocksworld".
	Type string
	// Domain and Problem are the files the task is read from; for ALFWorld
	// both are the game.tw-pddl file (it holds the domain, problem and text).
	Domain, Problem string
}

// Observation is what the agent receives after Reset or a Step: text only,
// as a real agent gets it. It deliberately has no fact lists or state: what
// the agent learns from it is for a perception step to read (package
// explore). The environment's own account of what the agent could see is
// Episode.Truth, for scoring.
type Observation struct {
	// Text is what the model reads: the first observation after Reset, the
	// feedback of the command after Step.
	Text string
	// Goal is the task, in words (ALFWorld: "Your task is to: ...").
	Goal string
}

// Truth is the environment's account of what the agent perceives in the
// current state: the hidden truth a perception step is scored against. It
// never reaches the agent's side (Agent has no way to it).
type Truth struct {
	// Visible holds the fluent facts (ids of Task.Facts) whose truth value
	// the agent perceives in the current state; their values are those of
	// the true state (see Episode.Belief).
	Visible pddl.State
	// Objects are the objects the agent perceives now (PDDL names, sorted).
	Objects []string
}

// StepResult is the outcome of one command.
type StepResult struct {
	Observation
	// Command is the command as given.
	Command string
	// Action is the ground action executed, or -1 when the command matched no
	// applicable action (nothing changed and Text is NothingHappens).
	Action int
	// Success reports whether the goal holds in the true state after the step.
	Success bool
	// Steps counts the commands given since Reset, this one included (valid
	// or not).
	Steps int
}

// Belief is what the agent knows from its observations: the facts it has
// seen and the value each had when last seen.
type Belief struct {
	// Known holds the facts observed at least once.
	Known pddl.State
	// True holds, of the Known facts, those that held when last observed.
	True pddl.State
}

// Value reports whether fact f was true when last observed, and whether it
// was observed at all.
func (b Belief) Value(f int) (value, known bool) {
	return b.True.Has(f), b.Known.Has(f)
}

// observe records the visible facts of the true state s.
func (b *Belief) observe(visible, s pddl.State) {
	for i := range b.Known {
		b.Known[i] |= visible[i]
		b.True[i] = b.True[i]&^visible[i] | s[i]&visible[i]
	}
}

// world is what an environment adds to a grounded task: its text and what
// the agent sees.
type world interface {
	// intro returns the first observation in the initial state s.
	intro(s pddl.State) (string, error)
	// goal returns the task in words.
	goal() (string, error)
	// feedback returns the text after action a was applied, reaching s.
	feedback(prev, s pddl.State, a int) (string, error)
	// visible returns the fluent facts and objects the agent perceives in
	// s, reached by action a (-1 after Reset or a command not carried out).
	visible(s pddl.State, a int) (pddl.State, []string)
}

// Episode is one task being played: the hidden true state and the text
// interface to it. Not safe for concurrent use.
type Episode struct {
	info      TaskInfo
	task      *pddl.Task
	lex       *lexicon.Bound
	w         world
	goal      string
	state     pddl.State
	steps     int
	started   bool
	belief    Belief
	perceived map[string]bool
	truth     Truth
	last      int // the action that reached the state (-1 if none)
}

func newEpisode(info TaskInfo, task *pddl.Task, lex *lexicon.Bound, w world) (*Episode, error) {
	g, err := w.goal()
	if err != nil {
		return nil, fmt.Errorf("%s: goal text: %w", info.ID, err)
	}
	return &Episode{info: info, task: task, lex: lex, w: w, goal: g, state: task.Init}, nil
}

// Info returns the task's description.
func (e *Episode) Info() TaskInfo { return e.info }

// Task returns the grounded task (its Init is the initial true state).
func (e *Episode) Task() *pddl.Task { return e.task }

// Lexicon returns the text of the task's actions and objects: the commands
// Step accepts are its action texts.
func (e *Episode) Lexicon() *lexicon.Bound { return e.lex }

// Goal returns the task in words.
func (e *Episode) Goal() string { return e.goal }

// Reset starts the episode over from the initial state and returns the
// first observation.
func (e *Episode) Reset() (Observation, error) {
	e.state = e.task.Init
	e.steps = 0
	e.started = true
	n := len(e.task.Init)
	e.belief = Belief{Known: make(pddl.State, n), True: make(pddl.State, n)}
	e.perceived = map[string]bool{}
	text, err := e.w.intro(e.state)
	if err != nil {
		return Observation{}, fmt.Errorf("%s: first observation: %w", e.info.ID, err)
	}
	return e.observe(text, -1), nil
}

// observe builds the observation of the current state, reached by action a
// (-1 if none), and updates the belief.
func (e *Episode) observe(text string, a int) Observation {
	vis, objs := e.w.visible(e.state, a)
	e.belief.observe(vis, e.state)
	for _, o := range objs {
		e.perceived[o] = true
	}
	e.truth = Truth{Visible: vis, Objects: objs}
	e.last = a
	return Observation{Text: text, Goal: e.goal}
}

// Truth returns what the agent perceives in the current state by the
// environment's visibility rules (a copy). It is for scoring perception and
// for tests; an agent must not see it.
func (e *Episode) Truth() Truth {
	return Truth{Visible: e.truth.Visible.Clone(), Objects: slices.Clone(e.truth.Objects)}
}

// Step executes a command. A command is executed iff, with surrounding white
// space trimmed, it is the text of an action applicable in the true state;
// otherwise nothing changes and the feedback is NothingHappens. The error is
// for internal failures only (text generation), never for a bad command.
func (e *Episode) Step(command string) (StepResult, error) {
	if !e.started {
		return StepResult{}, fmt.Errorf("%s: Step before Reset", e.info.ID)
	}
	e.steps++
	res := StepResult{Command: command, Action: -1, Steps: e.steps}
	a, ok := e.lex.Lookup(e.state, trimSpace(command))
	if !ok {
		res.Observation = e.observe(NothingHappens, -1)
		res.Success = e.task.GoalReached(e.state)
		return res, nil
	}
	prev := e.state
	e.state = e.task.Apply(prev, a)
	text, err := e.w.feedback(prev, e.state, a)
	if err != nil {
		return StepResult{}, fmt.Errorf("%s: feedback of %s: %w", e.info.ID, e.task.Actions[a].String(), err)
	}
	res.Action = a
	res.Observation = e.observe(text, a)
	res.Success = e.task.GoalReached(e.state)
	return res, nil
}

func trimSpace(s string) string {
	i, j := 0, len(s)
	for i < j && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	for j > i && (s[j-1] == ' ' || s[j-1] == '\t' || s[j-1] == '\n' || s[j-1] == '\r') {
		j--
	}
	return s[i:j]
}

// State returns a copy of the hidden true state. It is for harnesses and
// tests; an agent must not see it.
func (e *Episode) State() pddl.State { return e.state.Clone() }

// Success reports whether the goal holds in the true state.
func (e *Episode) Success() bool { return e.task.GoalReached(e.state) }

// Steps returns the number of commands given since Reset.
func (e *Episode) Steps() int { return e.steps }

// Belief returns a copy of what the agent has observed since Reset.
func (e *Episode) Belief() Belief {
	return Belief{Known: e.belief.Known.Clone(), True: e.belief.True.Clone()}
}

// Perceived returns the objects the agent has perceived since Reset, sorted.
func (e *Episode) Perceived() []string {
	out := make([]string, 0, len(e.perceived))
	for o := range e.perceived {
		out = append(out, o)
	}
	sort.Strings(out)
	return out
}

// Admissible returns the distinct texts of the actions applicable in the
// true state, sorted (ALFWorld's admissible commands). It may name objects
// the agent has not perceived.
func (e *Episode) Admissible() []string {
	ch := e.lex.Applicable(e.state)
	out := make([]string, len(ch))
	for i, c := range ch {
		out[i] = c.Text
	}
	sort.Strings(out)
	return out
}

// Image renders the agent's current view, where the environment can
// (Capabilities.Images: ALFWorld draws the receptacles at the agent's
// location, labelled, with the objects the text lists on or in them, what
// it holds and what "look" saw); others return ErrNoImage.
func (e *Episode) Image() (image.Image, error) {
	r, ok := e.w.(renderer)
	if !ok {
		return nil, ErrNoImage
	}
	if !e.started {
		return nil, fmt.Errorf("%s: Image before Reset", e.info.ID)
	}
	return r.render(e.state, e.last), nil
}

// Names lists the environments New knows.
func Names() []string { return []string{"alfworld", "virtualhome", "blocksworld"} }

// New opens an environment by name from the shared datasets folder (the one
// holding alfworld/, virtualhome/ and planbench-blocksworld/). ALFWorld's
// suite is valid_unseen.
func New(name, datasets string) (Env, error) {
	return NewWith(name, datasets, Options{})
}

// Options select a variant of an environment.
type Options struct {
	// Partial makes VirtualHome partially observable (Suite.Partial);
	// ALFWorld always is, and Blocksworld has nothing to hide.
	Partial bool
	// Split is ALFWorld's dataset split: "valid_unseen" (the default, for
	// evaluation only) or "valid_train" (the games nesy train learns from,
	// where settings may be tuned); or VirtualHome's: "train" or "test"
	// (VirtualHomeSplit; "" is all 338 problems, as before the split); or
	// Blocksworld's: "planbench" (the default, evaluation only) or
	// "heldout" (NewBlocksworldHeldOut).
	Split string
}

// ALFWorldSplits are the ALFWorld splits Options.Split may name.
var ALFWorldSplits = []string{"valid_unseen", "valid_train"}

// VirtualHomeSplits are the VirtualHome splits Options.Split may name.
var VirtualHomeSplits = []string{VirtualHomeTrain, VirtualHomeTest}

// NewWith is New with options.
func NewWith(name, datasets string, opts Options) (Env, error) {
	if name == "virtualhome" {
		s, err := NewVirtualHome(filepath.Join(datasets, "virtualhome"))
		if err != nil {
			return nil, err
		}
		if opts.Split != "" {
			if s, err = s.Split(opts.Split); err != nil {
				return nil, err
			}
		}
		if opts.Partial {
			s = s.Partial()
		}
		return s, nil
	}
	if opts.Partial && name == "blocksworld" {
		return nil, fmt.Errorf("envs: blocksworld has no partially observable variant")
	}
	if opts.Split != "" && name != "alfworld" && name != "blocksworld" {
		return nil, fmt.Errorf("envs: %s has no splits (alfworld: %s; virtualhome: %s; blocksworld: %s)", name,
			strings.Join(ALFWorldSplits, ", "), strings.Join(VirtualHomeSplits, ", "), strings.Join(BlocksworldSplits, ", "))
	}
	switch name {
	case "alfworld":
		split := opts.Split
		if split == "" {
			split = ALFWorldSplits[0]
		}
		if !slices.Contains(ALFWorldSplits, split) {
			return nil, fmt.Errorf("envs: alfworld has no split %q (known: %s)", split, strings.Join(ALFWorldSplits, ", "))
		}
		return NewALFWorld(filepath.Join(datasets, "alfworld", split))
	case "blocksworld":
		dir := filepath.Join(datasets, "planbench-blocksworld")
		switch opts.Split {
		case "", BlocksworldPlanBench:
			return NewBlocksworld(dir)
		case BlocksworldHeldOut:
			return NewBlocksworldHeldOut(dir)
		}
		return nil, fmt.Errorf("envs: blocksworld has no split %q (known: %s)", opts.Split, strings.Join(BlocksworldSplits, ", "))
	}
	return nil, fmt.Errorf("envs: unknown environment %q (known: alfworld, virtualhome, blocksworld)", name)
}

// find returns the task with this id.
func find(tasks []TaskInfo, id string) (TaskInfo, error) {
	for _, t := range tasks {
		if t.ID == id {
			return t, nil
		}
	}
	return TaskInfo{}, fmt.Errorf("envs: no task %q", id)
}

// ground parses and grounds a domain and a problem given as text.
func ground(ctx context.Context, d *pddl.Domain, problemName string, problem []byte) (*pddl.Task, *pddl.Problem, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	p, _, err := pddl.ParseProblem(problemName, problem)
	if err != nil {
		return nil, nil, err
	}
	t, err := pddl.Ground(d, p)
	if err != nil {
		return nil, nil, err
	}
	return t, p, ctx.Err()
}
