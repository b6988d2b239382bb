package explore

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl"
)

func openEnv(t testing.TB, name string) envs.Env {
	t.Helper()
	env, err := envs.New(name, testenv.Datasets(t))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// oneOfEachType returns the first task of every type.
func oneOfEachType(env envs.Env) []envs.TaskInfo {
	seen := map[string]bool{}
	var out []envs.TaskInfo
	for _, ti := range env.Tasks() {
		if !seen[ti.Type] {
			seen[ti.Type] = true
			out = append(out, ti)
		}
	}
	return out
}

// agentOf returns the agent's side of ep.
// exploreTask opens task id of env and explores it with lm and the default
// options, failing the test on any error.
func exploreTask(t testing.TB, lm models.LM, env envs.Env, id string) (*envs.Episode, *Result) {
	t.Helper()
	ep, err := env.Open(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Explore(context.Background(), lm, agentOf(t, ep), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ep, res
}

func agentOf(t testing.TB, ep *envs.Episode) *envs.Agent {
	t.Helper()
	a, err := ep.Agent()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// recorder wraps the agent's side of an episode and keeps what the agent
// was shown (by the environment's account, which the harness never sees),
// so a test can check that every skill named only objects it had been
// shown.
type recorder struct {
	*envs.Agent
	ep      *envs.Episode
	objects map[string]bool
	// shownBefore[i] is what had been shown when command i was given.
	shown    strings.Builder
	commands []string
	seenAt   []string
	objsAt   []map[string]bool
	images   int
	render   bool
	noImages bool // the environment cannot render
}

func newRecorder(t testing.TB, ep *envs.Episode, render bool) *recorder {
	return &recorder{Agent: agentOf(t, ep), ep: ep, render: render}
}

func (r *recorder) note(o envs.Observation) {
	r.shown.WriteString(o.Text + "\n" + o.Goal + "\n")
	if r.objects == nil {
		r.objects = map[string]bool{}
	}
	for _, x := range r.ep.Truth().Objects {
		r.objects[x] = true
	}
}

func (r *recorder) Reset() (envs.Observation, error) {
	o, err := r.Agent.Reset()
	r.note(o)
	return o, err
}

func (r *recorder) Step(cmd string) (envs.Observation, error) {
	r.commands = append(r.commands, cmd)
	r.seenAt = append(r.seenAt, r.shown.String())
	r.objsAt = append(r.objsAt, maps(r.objects))
	o, err := r.Agent.Step(cmd)
	r.note(o)
	return o, err
}

// Image renders a small picture when render is set (standing in for an
// env that renders), else defers to the episode.
func (r *recorder) Image() (image.Image, error) {
	r.images++
	if r.noImages {
		return nil, envs.ErrNoImage
	}
	if !r.render {
		return r.Agent.Image()
	}
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{200, 10, 10, 255})
	return img, nil
}

func maps(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestExploreALFWorldGroundsTheGoal(t *testing.T) {
	lm := tinyModel(t)
	env := openEnv(t, "alfworld")
	for _, ti := range oneOfEachType(env) {
		t.Run(ti.Type, func(t *testing.T) {
			ep, err := env.Open(context.Background(), ti.ID)
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder(t, ep, false)
			res, err := Explore(context.Background(), lm, rec, Options{})
			if err != nil {
				t.Fatal(err)
			}
			task, truth := ep.Task(), ep.State()
			// The model could only pick valid skills: the environment carried
			// out every one.
			if res.Invalid != 0 {
				t.Fatalf("%d skills refused by the environment", res.Invalid)
			}
			for i, s := range res.Steps {
				if !s.Executed || s.Feedback == envs.NothingHappens {
					t.Fatalf("step %d %q not executed: %q", i, s.Skill, s.Feedback)
				}
				if s.Offered < 1 {
					t.Fatalf("step %d: %d skills offered", i, s.Offered)
				}
			}
			if res.Stop != StopReady || !res.Ready {
				t.Fatalf("stop %q ready %v after %d steps", res.Stop, res.Ready, len(res.Steps))
			}
			// Every skill named objects the agent had been shown before.
			for i, cmd := range rec.commands {
				ids := ep.Lexicon().Actions(cmd)
				if len(ids) == 0 {
					t.Fatalf("step %d: %q is no action text", i, cmd)
				}
				for _, o := range task.Actions[ids[0]].Args {
					name := ep.Lexicon().Name(o)
					if o == "agent1" || strings.HasPrefix(o, "loc_") {
						continue
					}
					if !rec.objsAt[i][o] && !mentions(rec.seenAt[i], name) {
						t.Fatalf("step %d %q names %s (%q), which the agent had not been shown", i, cmd, o, name)
					}
				}
			}
			// The belief holds only what was observed or done, and it is
			// right about everything it knows.
			envKnown := ep.Belief().Known
			for _, f := range res.Belief.Known.Facts() {
				if !envKnown.Has(f) && !inEffects(task, rec, f) {
					t.Fatalf("fact %s known without being observed or caused", task.Facts[f])
				}
				if res.Belief.True.Has(f) != truth.Has(f) {
					t.Fatalf("fact %s believed %v, true %v", task.Facts[f], res.Belief.True.Has(f), truth.Has(f))
				}
			}
			if !res.Estimate.Equal(res.Belief.True) || !res.Task.Init.Equal(res.Estimate) {
				t.Fatal("the estimate is not the belief's true facts, or the Phase II task does not start from it")
			}
			known := map[string]bool{}
			for _, o := range res.Known {
				known[o] = true
			}
			for _, f := range res.Task.Static {
				for _, o := range f.Args {
					if !known[o] {
						t.Fatalf("static fact %s of the Phase II task names unknown %s", f, o)
					}
				}
			}
			for name, o := range res.Binding {
				if ep.Lexicon().Name(o) != name || !known[o] {
					t.Fatalf("binding %q -> %s", name, o)
				}
			}
			g := Compare(res, task, truth, ep.Belief())
			if !g.Correct || g.Wrong != 0 || !g.PlanWorks {
				t.Fatalf("grounding %+v", g)
			}
			// The Phase II lexicon speaks the env's words.
			if len(res.ReadyPlan) > 0 {
				a := res.ReadyPlan[0]
				act := &res.Task.Actions[a]
				ids := task.LookupAction(act.Name, act.Args)
				if len(ids) == 0 || res.Lexicon.Text(a) != ep.Lexicon().Text(ids[0]) {
					t.Fatalf("Phase II text %q of %s is not the env's", res.Lexicon.Text(a), act)
				}
			}
			// The text reader uses no model: every choice is a skill.
			if res.Usage.Choices != len(res.Steps) {
				t.Fatalf("%d choices for %d steps", res.Usage.Choices, len(res.Steps))
			}
		})
	}
}

// inEffects reports whether f is an effect of an action the recorder's
// commands executed.
func inEffects(task *pddl.Task, rec *recorder, f int) bool {
	for _, cmd := range rec.commands {
		for _, a := range rec.Lexicon().Actions(cmd) {
			act := &task.Actions[a]
			if slices.Contains(act.Add, f) || slices.Contains(act.Del, f) {
				return true
			}
		}
	}
	return false
}

func TestExploreFullyObservableNeedsNoSteps(t *testing.T) {
	lm := tinyModel(t)
	for _, name := range []string{"blocksworld", "virtualhome"} {
		env := openEnv(t, name)
		ti := env.Tasks()[0]
		ep, res := exploreTask(t, lm, env, ti.ID)
		if len(res.Steps) != 0 || res.Stop != StopReady || !res.Ready {
			t.Fatalf("%s: %d steps, stop %q, ready %v", name, len(res.Steps), res.Stop, res.Ready)
		}
		// The text reader reads every true fact whose sentence is its own,
		// and none whose sentence the lexicon gives to several facts (the
		// text cannot tell them apart).
		truth := ep.State()
		facts := map[string]int{}
		for _, f := range ep.Task().Facts {
			facts[ep.Lexicon().FactText(f)]++
		}
		for _, f := range truth.Facts() {
			shared := facts[ep.Lexicon().FactText(ep.Task().Facts[f])] > 1
			if res.Estimate.Has(f) == shared {
				t.Fatalf("%s: true fact %s read %v (its sentence shared: %v)", name, ep.Task().Facts[f], res.Estimate.Has(f), shared)
			}
		}
		for _, f := range res.Estimate.Facts() {
			if !truth.Has(f) {
				t.Fatalf("%s: %s read but false", name, ep.Task().Facts[f])
			}
		}
		if res.Usage.ModelCalls != 0 {
			t.Fatalf("%s: %d model calls without a choice", name, res.Usage.ModelCalls)
		}
		// Fully observed, the estimate is right even without a plan from
		// the Ready check (as when its search runs out of expansions).
		noPlan := *res
		noPlan.ReadyPlan = nil
		for _, r := range []*Result{res, &noPlan} {
			g := Compare(r, ep.Task(), ep.State(), ep.Belief())
			if g.Wrong != 0 || g.All.Precision() != 1 || g.Goal.Precision() != 1 {
				t.Fatalf("%s: grounding %+v", name, g)
			}
			// Blocksworld's sentences are one a fact: everything is read.
			if name == "blocksworld" && (!g.Correct || g.All.Recall() != 1 || g.Believed != g.TrueFacts) {
				t.Fatalf("%s: grounding %+v", name, g)
			}
		}
	}
}

func TestExploreStopsAtTheBudget(t *testing.T) {
	lm := tinyModel(t)
	env := openEnv(t, "alfworld")
	cases := []struct {
		name string
		opts Options
	}{
		{"informative", Options{MaxSteps: 2}},
		{"all skills", Options{MaxSteps: 9, AllSkills: true}},
		{"all skills sampled", Options{MaxSteps: 9, AllSkills: true, Dialog: DialogOptions{Temperature: 3, Seed: 5}}},
	}
	for _, tc := range cases {
		ep, err := env.Open(context.Background(), env.Tasks()[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Explore(context.Background(), lm, agentOf(t, ep), tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Steps) > tc.opts.MaxSteps {
			t.Fatalf("%s: %d steps, budget %d", tc.name, len(res.Steps), tc.opts.MaxSteps)
		}
		if res.Stop == StopBudget && len(res.Steps) != tc.opts.MaxSteps {
			t.Fatalf("%s: stopped for the budget after %d steps", tc.name, len(res.Steps))
		}
		if res.Invalid != 0 {
			t.Fatalf("%s: %d invalid skills", tc.name, res.Invalid)
		}
		for _, s := range res.Steps {
			if !slices.Contains([]string{SkillGo, SkillOpen, SkillClose, SkillLook}, s.Kind) {
				t.Fatalf("%s: step of kind %q", tc.name, s.Kind)
			}
			if !tc.opts.AllSkills && s.Kind != SkillGo && s.Kind != SkillOpen {
				t.Fatalf("%s: uninformative skill %q offered", tc.name, s.Skill)
			}
		}
	}
}

func TestExploreCancelled(t *testing.T) {
	lm := tinyModel(t)
	env := openEnv(t, "alfworld")
	ep, err := env.Open(context.Background(), env.Tasks()[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Explore(ctx, lm, agentOf(t, ep), Options{})
	if err == nil || res == nil || res.Stop != StopCanceled {
		t.Fatalf("got %v, %+v", err, res)
	}
}

// skills() is what the model may choose from: "done" only when the goal is
// grounded and the model decides when to stop; opening comes first.
func TestSkillsOffered(t *testing.T) {
	env := openEnv(t, "alfworld")
	ep, err := env.Open(context.Background(), env.Tasks()[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, modelStops := range []bool{false, true} {
		ag := agentOf(t, ep)
		x, err := newExplorer(ag, Options{ModelStops: modelStops})
		if err != nil {
			t.Fatal(err)
		}
		x.per = NewTextReader(ag.Domain(), ag.Lexicon())
		obs, err := ag.Reset()
		if err != nil {
			t.Fatal(err)
		}
		if err := x.observe(context.Background(), obs, ""); err != nil {
			t.Fatal(err)
		}
		for _, ready := range []bool{false, true} {
			texts, kinds := x.skills(ready)
			wantDone := ready && modelStops
			if got := slices.Contains(texts, Done); got != wantDone {
				t.Fatalf("modelStops %v ready %v: done offered %v", modelStops, ready, got)
			}
			if len(texts) == 0 || len(texts) != len(kinds) {
				t.Fatalf("%d texts, %d kinds", len(texts), len(kinds))
			}
			for i, k := range kinds {
				if k != SkillGo && k != Done {
					t.Fatalf("at the start only going is informative, got %q (%s)", texts[i], k)
				}
			}
		}
		// At a closed receptacle with unknown contents, only opening is offered.
		task, lex := ep.Task(), ep.Lexicon()
		goClosed := ""
		for _, f := range task.Static {
			if f.Predicate != "openable" {
				continue
			}
			if id := task.FactID(pddl.Fact{Predicate: "opened", Args: f.Args}); id >= 0 && !ep.State().Has(id) {
				goClosed = "go to " + lex.Name(f.Args[0])
				break
			}
		}
		if goClosed == "" {
			t.Fatal("the task has no closed receptacle")
		}
		o, err := ag.Step(goClosed)
		if err != nil || o.Text == envs.NothingHappens {
			t.Fatalf("%q: %v %q", goClosed, err, o.Text)
		}
		if err := x.observe(context.Background(), o, goClosed); err != nil {
			t.Fatal(err)
		}
		texts, kinds := x.skills(false)
		if len(texts) != 1 || kinds[0] != SkillOpen || texts[0] != "open"+strings.TrimPrefix(goClosed, "go to") {
			t.Fatalf("after %q (%q): offered %q", goClosed, o.Text, texts)
		}
	}
}

func TestExploreImages(t *testing.T) {
	lm := tinyModel(t)
	env := openEnv(t, "alfworld")
	cases := []struct {
		name           string
		images, render bool
		wantImages     bool
	}{
		{"env renders, capability on", true, true, true},
		{"capability off", false, true, false},
		{"capability on, env cannot render", true, false, false},
	}
	for _, tc := range cases {
		ep, err := env.Open(context.Background(), env.Tasks()[3].ID)
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorder(t, ep, tc.render)
		rec.noImages = !tc.render
		res, err := Explore(context.Background(), lm, rec, Options{Images: tc.images, MaxSteps: 4})
		if err != nil {
			t.Fatal(err)
		}
		if !tc.images && rec.images != 0 {
			t.Fatalf("%s: the harness asked for %d images", tc.name, rec.images)
		}
		withImages := 0
		for _, m := range res.Transcript {
			for _, img := range m.Images {
				if m.Role != "user" || !bytes.HasPrefix(img, []byte("\x89PNG")) {
					t.Fatalf("%s: image on a %s message, or not a PNG", tc.name, m.Role)
				}
				withImages++
			}
		}
		want := 0
		if tc.wantImages {
			want = 1 + len(res.Steps) // the first observation and every feedback
		}
		if res.ImagesRendered != want || withImages != want {
			t.Fatalf("%s: %d rendered, %d attached, want %d", tc.name, res.ImagesRendered, withImages, want)
		}
		// The test model has no vision encoder: its template leaves the
		// images out, so it saw none.
		if res.Usage.Images != 0 {
			t.Fatalf("%s: a text model saw %d images", tc.name, res.Usage.Images)
		}
	}
}

// Compare must catch a wrong belief and a plan that does not work.
func TestCompareDetectsWrongEstimates(t *testing.T) {
	lm := tinyModel(t)
	env := openEnv(t, "alfworld")
	ep, res := exploreTask(t, lm, env, env.Tasks()[0].ID)
	task, truth := ep.Task(), ep.State()
	if g := Compare(res, task, truth, ep.Belief()); !g.Correct {
		t.Fatalf("baseline not correct: %+v", g)
	}
	// Flip a known goal-object fact in the truth: the belief is now wrong
	// about it.
	g0 := Compare(res, task, truth, ep.Belief())
	var flip = -1
	for _, c := range task.Goal {
		for _, f := range c.Pos {
			for _, o := range task.Facts[f].Args {
				for id, fact := range task.Facts {
					if slices.Contains(fact.Args, o) && res.Belief.Known.Has(id) && fact.Predicate == "inreceptacle" {
						flip = id
					}
				}
			}
		}
	}
	if flip < 0 {
		t.Skip("no known goal-object fact to flip")
	}
	bad := truth.Clone()
	if bad.Has(flip) {
		bad.Clear(flip)
	} else {
		bad.Set(flip)
	}
	g := Compare(res, task, bad, ep.Belief())
	if g.Wrong != g0.Wrong+1 || g.Correct {
		t.Fatalf("after flipping %s: %+v", task.Facts[flip], g)
	}
	// A plan that does not reach the goal is caught.
	short := *res
	short.ReadyPlan = res.ReadyPlan[:len(res.ReadyPlan)-1]
	if g := Compare(&short, task, truth, ep.Belief()); g.PlanWorks || g.Correct {
		t.Fatalf("a truncated plan passed: %+v", g)
	}
}

// TestExploreSuite runs Phase I over every ALFWorld task (NESY_FULL=1):
// the random model must ground most of them correctly, because it is only
// ever offered valid, informative skills.
func TestExploreSuite(t *testing.T) {
	if os.Getenv("NESY_FULL") != "1" {
		t.Skip("whole-suite sweep: set NESY_FULL=1")
	}
	lm := tinyModel(t)
	env := openEnv(t, "alfworld")
	ready, correct, steps, invalid := 0, 0, 0, 0
	tasks := env.Tasks()
	for _, ti := range tasks {
		ep, res := exploreTask(t, lm, env, ti.ID)
		g := Compare(res, ep.Task(), ep.State(), ep.Belief())
		if res.Ready {
			ready++
		}
		if g.Correct {
			correct++
		} else {
			t.Logf("%s: stop %s, grounding %+v", ti.ID, res.Stop, g)
		}
		steps += len(res.Steps)
		invalid += res.Invalid
	}
	n := len(tasks)
	t.Logf("ALFWorld: ready %d/%d, grounded correctly %d/%d, %.1f steps per task, %d invalid skills", ready, n, correct, n, float64(steps)/float64(n), invalid)
	if invalid != 0 || 2*correct <= n {
		t.Fatalf("grounded correctly %d/%d with %d invalid skills", correct, n, invalid)
	}
}
