package explore

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
	"github.com/nesy-dev/nesy/pddl"
)

// The agent's side of an episode carries text only: the observation type
// has no field that could hold a fact list or a state, and no method of the
// agent's side hands out a state (the domain model's Init is empty).
func TestAgentSideHasNoFacts(t *testing.T) {
	obs := reflect.TypeOf(envs.Observation{})
	for i := 0; i < obs.NumField(); i++ {
		if f := obs.Field(i); f.Type.Kind() != reflect.String {
			t.Errorf("envs.Observation.%s is a %s: the agent's observation must be text only", f.Name, f.Type)
		}
	}
	state := reflect.TypeOf(pddl.State{})
	agent := reflect.TypeOf(&envs.Agent{})
	for i := 0; i < agent.NumMethod(); i++ {
		m := agent.Method(i)
		for j := 0; j < m.Type.NumOut(); j++ {
			if out := m.Type.Out(j); out == state || out == reflect.TypeOf(envs.Belief{}) || out == reflect.TypeOf(envs.Truth{}) {
				t.Errorf("envs.Agent.%s returns a %s", m.Name, out)
			}
		}
	}
	env := openEnv(t, "alfworld")
	for _, ti := range env.Tasks()[:3] {
		ep, err := env.Open(context.Background(), ti.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n := agentOf(t, ep).Domain().Init.Len(); n != 0 {
			t.Fatalf("%s: the agent's domain model holds %d true facts", ti.ID, n)
		}
	}
}

// blind perceives nothing, whatever it is shown.
type blind struct{}

func (blind) Method() string { return "blind" }
func (blind) Perceive(context.Context, Input) (Percept, error) {
	return Percept{}, nil
}
func (blind) Covers(string) bool { return true }
func (blind) Usage() Usage       { return Usage{} }
func (blind) Close()             {}

// An episode driven with a perception step that ignores its input grounds
// nothing: all the agent knows comes through perception.
func TestBlindPerceptionGroundsNothing(t *testing.T) {
	lm := tinyModel(t)
	for _, name := range []string{"alfworld", "virtualhome", "blocksworld"} {
		env := openEnv(t, name)
		ep, err := env.Open(context.Background(), env.Tasks()[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Explore(context.Background(), lm, agentOf(t, ep), Options{Perceiver: blind{}, MaxSteps: 5})
		if err != nil {
			t.Fatal(err)
		}
		// Nothing is perceived; what the belief holds comes only from the
		// effects of the skills the agent carried out (VirtualHome's walking
		// into a room needs nothing known).
		if res.Ready || res.Perceived != 0 || (len(res.Steps) == 0 && res.Belief.Known.Len() != 0) {
			t.Fatalf("%s: blind perception: ready %v, %d facts believed, %d known, %d perceived after %d steps",
				name, res.Ready, res.Estimate.Len(), res.Belief.Known.Len(), res.Perceived, len(res.Steps))
		}
		if g := Compare(res, ep.Task(), ep.State(), ep.Belief()); g.Correct {
			t.Fatalf("%s: blind perception grounded %+v", name, g)
		}
	}
}

// reading plays an ALFWorld episode's exploration skills with the text
// reader and checks every percept against the environment's truth.
func TestTextReaderAgainstTheTruth(t *testing.T) {
	lm := tinyModel(t)
	env := openEnv(t, "alfworld")
	var goal, all PR
	for _, ti := range oneOfEachType(env) {
		ep, err := env.Open(context.Background(), ti.ID)
		if err != nil {
			t.Fatal(err)
		}
		ag := agentOf(t, ep)
		check := &checker{t: t, ep: ep, inner: NewTextReader(ag.Domain(), ag.Lexicon())}
		res, err := Explore(context.Background(), lm, ag, Options{Perceiver: check})
		if err != nil {
			t.Fatal(err)
		}
		if check.reads == 0 {
			t.Fatalf("%s: the reader was never called", ti.ID)
		}
		g := Compare(res, ep.Task(), ep.State(), ep.Belief())
		goal, all = goal.Add(g.Goal), all.Add(g.All)
	}
	t.Logf("text reader: goal objects precision %.3f recall %.3f; all facts precision %.3f recall %.3f",
		goal.Precision(), goal.Recall(), all.Precision(), all.Recall())
	if goal.Precision() < 0.99 || goal.Recall() < 0.95 {
		t.Fatalf("text reader on the goal's objects: precision %.3f, recall %.3f", goal.Precision(), goal.Recall())
	}
}

// checker wraps a perceiver and checks each percept against the
// environment's account of what the agent saw.
type checker struct {
	t     *testing.T
	ep    *envs.Episode
	inner Perceiver
	reads int
}

func (c *checker) Method() string          { return c.inner.Method() }
func (c *checker) Covers(pred string) bool { return c.inner.Covers(pred) }
func (c *checker) Usage() Usage            { return c.inner.Usage() }
func (c *checker) Close()                  { c.inner.Close() }
func (c *checker) Perceive(ctx context.Context, in Input) (Percept, error) {
	p, err := c.inner.Perceive(ctx, in)
	c.reads++
	task, s, vis := c.ep.Task(), c.ep.State(), c.ep.Truth().Visible
	for _, f := range p.True {
		if !s.Has(f) {
			c.t.Errorf("read %s true after %q (%q), but it is false", task.Facts[f], in.Command, in.Obs.Text)
		}
		if !vis.Has(f) {
			c.t.Errorf("read %s after %q, which the agent cannot see", task.Facts[f], in.Command)
		}
	}
	for _, f := range p.False {
		if s.Has(f) {
			c.t.Errorf("read %s false after %q (%q), but it is true", task.Facts[f], in.Command, in.Obs.Text)
		}
		if !vis.Has(f) {
			c.t.Errorf("read %s after %q, which the agent cannot see", task.Facts[f], in.Command)
		}
	}
	// Every visible true fact of what the text describes (a receptacle's
	// contents, whether it is open) is read.
	read := map[int]bool{}
	for _, f := range p.True {
		read[f] = true
	}
	for _, f := range vis.Facts() {
		fa := task.Facts[f]
		if !s.Has(f) || read[f] || (fa.Predicate != "inreceptacle" && fa.Predicate != "opened") {
			continue
		}
		if r := fa.Args[len(fa.Args)-1]; mentions(in.Obs.Text, c.ep.Lexicon().Name(r)) {
			c.t.Errorf("visible true fact %s not read from %q", fa, in.Obs.Text)
		}
	}
	return p, err
}

// Phase II plans only over what the agent knows: no action of the
// Phase II task names an object the agent has not perceived, and in
// particular none names an object that was never shown (hidden in a
// receptacle left closed).
func TestUnknownObjectsActionsAreNeverOffered(t *testing.T) {
	lm := tinyModel(t)
	env := openEnv(t, "alfworld")
	hiddenSeen := 0
	for _, ti := range oneOfEachType(env) {
		ep, res := exploreTask(t, lm, env, ti.ID)
		known := map[string]bool{}
		for _, o := range res.Known {
			known[o] = true
		}
		shown := map[string]bool{}
		for _, o := range ep.Perceived() {
			shown[o] = true
		}
		lex := res.Lexicon
		for a := range res.Task.Actions {
			text := lex.Text(a)
			for _, o := range res.Task.Actions[a].Args {
				if mentions(text, lex.Name(o)) && !known[o] {
					t.Fatalf("%s: Phase II offers %q, naming %s, which the agent does not know", ti.ID, text, o)
				}
			}
		}
		// Objects the truth has but the agent was never shown.
		task := ep.Task()
		for _, f := range task.Facts {
			if f.Predicate != "inreceptacle" || shown[f.Args[0]] {
				continue
			}
			hidden := f.Args[0]
			if known[hidden] {
				continue // the goal's words may name it
			}
			hiddenSeen++
			for a := range res.Task.Actions {
				if strings.Contains(" "+strings.Join(res.Task.Actions[a].Args, " ")+" ", " "+hidden+" ") {
					t.Fatalf("%s: Phase II action %s names hidden %s", ti.ID, res.Task.Actions[a].String(), hidden)
				}
			}
			for _, c := range lex.Applicable(res.Task.Init) {
				if mentions(c.Text, lex.Name(hidden)) {
					t.Fatalf("%s: %q is offered in the estimate, naming hidden %s", ti.ID, c.Text, hidden)
				}
			}
		}
	}
	if hiddenSeen == 0 {
		t.Fatal("no hidden object to check")
	}
}

// The model's perception writes only well-formed facts about objects the
// agent knows or the observation mentions (with random weights what it
// writes is otherwise arbitrary).
func TestModelReaderWritesOnlyRealFacts(t *testing.T) {
	lm := tinyModel(t)
	env := openEnv(t, "alfworld")
	ep, err := env.Open(context.Background(), env.Tasks()[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	ag := agentOf(t, ep)
	inner, err := NewModelReader(lm, ag.Domain(), ag.Lexicon(), ModelReaderOptions{MaxFacts: 3})
	if err != nil {
		t.Fatal(err)
	}
	rec := &objectsChecker{t: t, inner: inner, domain: ag.Domain()}
	res, err := Explore(context.Background(), lm, ag, Options{Perceiver: rec, MaxSteps: 4})
	if err != nil {
		t.Fatal(err)
	}
	if res.Perception != PerceiveModel || rec.written == 0 || res.Usage.Choices <= len(res.Steps) {
		t.Fatalf("perception %q wrote %d facts with %d choices for %d steps", res.Perception, rec.written, res.Usage.Choices, len(res.Steps))
	}
	if _, err := NewModelReader(nil, ag.Domain(), ag.Lexicon(), ModelReaderOptions{}); err == nil {
		t.Fatal("a model reader without a model was accepted")
	}
	if _, err := Explore(context.Background(), lm, ag, Options{Perception: "telepathy"}); err == nil {
		t.Fatal("an unknown perception method was accepted")
	}
}

type objectsChecker struct {
	t       *testing.T
	inner   Perceiver
	domain  *pddl.Task
	written int
}

func (c *objectsChecker) Method() string          { return c.inner.Method() }
func (c *objectsChecker) Covers(pred string) bool { return c.inner.Covers(pred) }
func (c *objectsChecker) Usage() Usage            { return c.inner.Usage() }
func (c *objectsChecker) Close()                  { c.inner.Close() }
func (c *objectsChecker) Perceive(ctx context.Context, in Input) (Percept, error) {
	p, err := c.inner.Perceive(ctx, in)
	mentioned := map[string]bool{}
	for _, o := range p.Objects {
		mentioned[o] = true
	}
	for _, f := range p.True {
		c.written++
		if f < 0 || f >= len(c.domain.Facts) {
			c.t.Fatalf("fact id %d out of range", f)
		}
		for _, o := range c.domain.Facts[f].Args {
			if !mentioned[o] && !in.Known(o) {
				c.t.Fatalf("wrote %s about %s, neither known nor mentioned", c.domain.Facts[f], o)
			}
		}
	}
	return p, err
}

// A generated vision model sees the rendered views: every observation's
// image reaches it, in the skill dialog and in the model's perception.
func TestExploreWithAVisionModel(t *testing.T) {
	spec := gguf.Default(gguf.ArchGemma3)
	spec.Vision = true
	path := filepath.Join(t.TempDir(), "tiny-gemma3-vision.gguf")
	if err := gguf.Write(path, spec); err != nil {
		t.Fatal(err)
	}
	lm, err := models.Load(context.Background(), path, models.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	if !lm.Info().Vision {
		t.Fatal("the generated model has no vision encoder")
	}
	env := openEnv(t, "alfworld")
	if !env.Capabilities().Images {
		t.Fatal("ALFWorld renders no views")
	}
	for _, perception := range []string{PerceiveText, PerceiveModel} {
		ep, err := env.Open(context.Background(), env.Tasks()[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Explore(context.Background(), lm, agentOf(t, ep),
			Options{Images: true, MaxSteps: 2, Perception: perception, Reader: ModelReaderOptions{MaxFacts: 2}})
		if err != nil {
			t.Fatal(err)
		}
		want := 1 + len(res.Steps)
		if res.ImagesRendered != want {
			t.Fatalf("%s: %d images attached for %d observations", perception, res.ImagesRendered, want)
		}
		// The skill dialog saw each but the last (exploration ended at the
		// budget before another choice); the model's perception reads every
		// observation, the last too, with its image.
		seen := want - 1
		if perception == PerceiveModel {
			seen = 2*want - 1
		}
		if res.Usage.Images != seen {
			t.Fatalf("%s: the vision model saw %d images of %d", perception, res.Usage.Images, want)
		}
	}
}

// VirtualHome made partially observable: a goal object inside a closed
// container is not named by the first view, and what the text reader
// reads is right. (VirtualHome's domain lets a plan grab an object without
// knowing where it is, so Ready may hold before the container is opened:
// the reports measure what that costs.)
func TestExploreVirtualHomePartial(t *testing.T) {
	lm := tinyModel(t)
	full, err := envs.NewVirtualHome(filepath.Join(testenv.Datasets(t), "virtualhome"))
	if err != nil {
		t.Fatal(err)
	}
	env := full.Partial()
	if !env.Capabilities().PartiallyObservable || full.Capabilities().PartiallyObservable {
		t.Fatal("capabilities do not say which variant is partially observable")
	}
	hiddenGoals := 0
	var pr PR
	for _, ti := range env.Tasks() {
		ep, err := env.Open(context.Background(), ti.ID)
		if err != nil {
			t.Fatal(err)
		}
		ag := agentOf(t, ep)
		obs, err := ag.Reset()
		if err != nil {
			t.Fatal(err)
		}
		// Only tasks whose goal names an object the first view hides.
		shown := map[string]bool{}
		for _, o := range ep.Truth().Objects {
			shown[o] = true
		}
		hides := false
		task := ep.Task()
		for _, c := range task.Goal {
			for _, f := range c.Pos {
				for _, o := range task.Facts[f].Args {
					if !shown[o] {
						hides = true
						if strings.Contains(obs.Text, "Here is what you see: ") &&
							mentions(obs.Text[strings.Index(obs.Text, "Here is what you see: "):], ep.Lexicon().Name(o)) {
							t.Fatalf("%s: the first view names hidden %s", ti.ID, o)
						}
					}
				}
			}
		}
		if !hides {
			continue
		}
		hiddenGoals++
		res, err := Explore(context.Background(), lm, ag, Options{MaxSteps: 30})
		if err != nil {
			t.Fatal(err)
		}
		pr = pr.Add(Compare(res, task, ep.State(), ep.Belief()).All)
		if hiddenGoals == 6 {
			break
		}
	}
	if hiddenGoals == 0 {
		t.Fatal("no VirtualHome task hides a goal object")
	}
	if pr.Precision() != 1 || pr.Recall() != 1 {
		t.Fatalf("text reader on partial VirtualHome: %+v", pr)
	}
}

// ALFWorld's first observation ("the middle of a room") names no place; the
// start is the one location where no receptacle stands, which the domain's
// static facts give. Both readers get it, so the model reader can start
// exploring: after Reset it believes the agent there and nowhere else.
func TestModelReaderKnowsTheStart(t *testing.T) {
	lm := tinyModel(t)
	env := openEnv(t, "alfworld")
	for _, ti := range env.Tasks()[:3] {
		ep, err := env.Open(context.Background(), ti.ID)
		if err != nil {
			t.Fatal(err)
		}
		ag := agentOf(t, ep)
		dom := ag.Domain()
		withRec := map[string]bool{}
		for _, f := range dom.Static {
			if f.Predicate == "receptacleatlocation" {
				withRec[f.Args[1]] = true
			}
		}
		want := ""
		for _, f := range dom.Facts {
			if f.Predicate == "atlocation" && !withRec[f.Args[1]] {
				want = f.Args[1]
			}
		}
		obs, err := ag.Reset()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []struct {
			name string
			new  func() (Perceiver, error)
		}{
			{"text", func() (Perceiver, error) { return NewTextReader(dom, ag.Lexicon()), nil }},
			{"model", func() (Perceiver, error) {
				return NewModelReader(lm, dom, ag.Lexicon(), ModelReaderOptions{MaxFacts: 1})
			}},
		} {
			per, err := r.new()
			if err != nil {
				t.Fatal(err)
			}
			p, err := per.Perceive(context.Background(), Input{Obs: obs, Known: func(string) bool { return false }})
			per.Close()
			if err != nil {
				t.Fatal(err)
			}
			var at []string
			for _, f := range p.True {
				if dom.Facts[f].Predicate == "atlocation" {
					at = append(at, dom.Facts[f].Args[1])
				}
			}
			if want == "" || len(at) != 1 || at[0] != want {
				t.Fatalf("%s, %s reader: the agent is believed at %v after Reset, want only %q", ti.ID, r.name, at, want)
			}
		}
	}
}
