package envs

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nesy-dev/nesy/envs/textworld"
	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/pddl/search"
)

// full reports whether the whole-suite sweeps run (NESY_FULL=1); otherwise
// tests run a representative slice: one task of every type.
func full() bool { return os.Getenv("NESY_FULL") == "1" }

func openEnv(t *testing.T, name string) Env {
	t.Helper()
	env, err := New(name, testenv.Datasets(t))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// slice returns every task under NESY_FULL=1, else the first task of each
// type (ALFWorld: one trial per task type) plus every step-th task.
func slice(env Env, step int) []TaskInfo {
	all := env.Tasks()
	if full() {
		return all
	}
	seen := map[string]bool{}
	var out []TaskInfo
	for i, ti := range all {
		if !seen[ti.Type] || (step > 0 && i%step == 0) {
			seen[ti.Type] = true
			out = append(out, ti)
		}
	}
	return out
}

func open(t *testing.T, env Env, id string) (*Episode, Observation) {
	t.Helper()
	ep, err := env.Open(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := ep.Reset()
	if err != nil {
		t.Fatal(err)
	}
	return ep, obs
}

// play executes a plan (action ids of ep's task) through the text commands
// and checks every step: the command runs an action with the plan's effect,
// success is the goal test on the true state, the goal is reached only at
// the end. It returns the final success.
func play(t *testing.T, ep *Episode, plan []int) bool {
	t.Helper()
	task := ep.Task()
	for i, a := range plan {
		want := task.Apply(ep.State(), a)
		cmd := ep.Lexicon().Text(a)
		res, err := ep.Step(cmd)
		if err != nil {
			t.Fatal(err)
		}
		if res.Action < 0 || res.Text == NothingHappens {
			t.Fatalf("step %d: %q (%s) was not executed: %q", i+1, cmd, task.Actions[a].String(), res.Text)
		}
		if !ep.State().Equal(want) {
			t.Fatalf("step %d: %q ran %s, which differs in effect from the plan's %s", i+1, cmd, task.Actions[res.Action].String(), task.Actions[a].String())
		}
		if res.Success != task.GoalReached(ep.State()) || res.Success != ep.Success() {
			t.Fatalf("step %d: success %v disagrees with the goal test on the true state", i+1, res.Success)
		}
		if res.Steps != i+1 {
			t.Fatalf("step %d: Steps = %d", i+1, res.Steps)
		}
	}
	return ep.Success()
}

// TestExpertPlans: plans of the reference planner (GBFS + h_FF) succeed when
// executed as text commands, success judged from the true state.
func TestExpertPlans(t *testing.T) {
	cases := []struct {
		env  string
		step int // also every step-th task in the CI slice
		// limit bounds the planner; a task it cannot solve within the limit
		// is skipped (VirtualHome's gold plans are checked in TestGoldPlans).
		limit int
	}{
		{"alfworld", 8, 200000},
		{"blocksworld", 50, 200000},
		{"virtualhome", 0, 20000},
	}
	for _, c := range cases {
		t.Run(c.env, func(t *testing.T) {
			env := openEnv(t, c.env)
			solved := 0
			for _, info := range slice(env, c.step) {
				t.Run(info.ID, func(t *testing.T) {
					ep, _ := open(t, env, info.ID)
					res, err := search.Solve(context.Background(), ep.Task(), search.Options{MaxExpansions: c.limit, Timeout: time.Minute})
					if err != nil {
						t.Fatal(err)
					}
					if res.Status != search.Solved {
						if c.env == "alfworld" {
							t.Fatalf("the planner did not solve a solvable ALFWorld game: %s", res.Status)
						}
						t.Skipf("planner: %s after %d expansions", res.Status, res.Expanded)
					}
					if ep.Success() != (len(res.Plan) == 0) {
						t.Fatalf("goal holds before any step: %v, plan length %d", ep.Success(), len(res.Plan))
					}
					if !play(t, ep, res.Plan) {
						t.Fatalf("the planner's plan (%d steps) did not reach the goal in the environment", len(res.Plan))
					}
					solved++
				})
			}
			if solved == 0 {
				t.Fatal("no task was solved")
			}
		})
	}
}

// TestGoldPlans: the datasets' own plans (PlanBench ground truth,
// VirtualHome gold plans) executed as text commands agree, step by step,
// with executing them on the ground task, and all reach their goal.
func TestGoldPlans(t *testing.T) {
	cases := []struct {
		env, file string
		parse     func(step string) (string, []string)
	}{
		{"blocksworld", "planbench-blocksworld/ground_truth_plans.json", func(s string) (string, []string) {
			f := strings.Fields(strings.Trim(s, "()"))
			return f[0], f[1:]
		}},
		{"virtualhome", "virtualhome/gold_pddl_plan.json", func(s string) (string, []string) {
			f := strings.Fields(s)
			return f[0], f[1:]
		}},
	}
	for _, c := range cases {
		t.Run(c.env, func(t *testing.T) {
			env := openEnv(t, c.env)
			data, err := os.ReadFile(filepath.Join(testenv.Datasets(t), c.file))
			if err != nil {
				t.Fatal(err)
			}
			var plans map[string][]string
			if err := json.Unmarshal(data, &plans); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, info := range env.Tasks() {
				plan, ok := plans[info.ID]
				if !ok {
					continue
				}
				n++
				ep, _ := open(t, env, info.ID)
				task := ep.Task()
				ids := make([]int, len(plan))
				s := task.Init
				for i, step := range plan {
					name, args := c.parse(step)
					ids[i] = -1
					for _, a := range task.LookupAction(name, args) {
						if task.IsApplicable(s, a) {
							ids[i] = a
							break
						}
					}
					if ids[i] < 0 {
						t.Fatalf("%s: gold step %d %q is not applicable", info.ID, i+1, step)
					}
					s = task.Apply(s, ids[i])
				}
				if !play(t, ep, ids) {
					t.Fatalf("%s: the gold plan does not reach the goal in the environment", info.ID)
				}
			}
			if n == 0 {
				t.Fatal("no gold plan matched a task id")
			}
		})
	}
}

// TestInvalidCommands: a command that is not the exact text of an
// applicable action changes nothing and is answered "Nothing happens.".
func TestInvalidCommands(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			env := openEnv(t, name)
			tasks := env.Tasks()
			for _, info := range []TaskInfo{tasks[0], tasks[len(tasks)-1]} {
				ep, _ := open(t, env, info.ID)
				task := ep.Task()
				adm := ep.Admissible()
				if len(adm) == 0 {
					t.Fatal("no admissible command in the initial state")
				}
				// The text of an action that is not applicable now.
				inapplicable := ""
				for a := range task.Actions {
					if _, ok := ep.Lexicon().Lookup(task.Init, ep.Lexicon().Text(a)); !ok {
						inapplicable = ep.Lexicon().Text(a)
						break
					}
				}
				cmds := []string{"", "   ", "xyzzy", "Nothing happens.", strings.ToUpper(adm[0]), adm[0] + " now", "please " + adm[0], inapplicable}
				for _, cmd := range cmds {
					before := ep.State()
					belief := ep.Belief()
					steps := ep.Steps()
					res, err := ep.Step(cmd)
					if err != nil {
						t.Fatal(err)
					}
					if res.Action != -1 || res.Text != NothingHappens {
						t.Fatalf("%q: action %d, text %q; want -1 and %q", cmd, res.Action, res.Text, NothingHappens)
					}
					if !ep.State().Equal(before) {
						t.Fatalf("%q changed the true state", cmd)
					}
					if b := ep.Belief(); !b.Known.Equal(belief.Known) || !b.True.Equal(belief.True) {
						t.Fatalf("%q changed the belief although the state did not change", cmd)
					}
					if res.Success != task.GoalReached(before) || res.Steps != steps+1 {
						t.Fatalf("%q: success %v, steps %d", cmd, res.Success, res.Steps)
					}
				}
				// Surrounding white space is not part of a command.
				res, err := ep.Step("  " + adm[0] + "\n")
				if err != nil || res.Action < 0 {
					t.Fatalf("%q with spaces around was not executed: %+v %v", adm[0], res, err)
				}
			}
		})
	}
}

// nameRE matches a display name as a whole ("apple 1" not in "apple 10").
func nameRE(name string) *regexp.Regexp {
	return regexp.MustCompile(`(^|[^a-z0-9])` + regexp.QuoteMeta(name) + `($|[^a-z0-9])`)
}

// alfworldScene re-derives, independently of the environment, which
// receptacles are at the agent's location and which are open or cannot be
// opened, from the true state and the static facts.
type alfworldScene struct {
	task    *pddl.Task
	static  map[string]bool
	recepAt map[string]string // receptacle -> location
}

func newScene(task *pddl.Task) *alfworldScene {
	sc := &alfworldScene{task: task, static: map[string]bool{}, recepAt: map[string]string{}}
	for _, f := range task.Static {
		sc.static[f.String()] = true
		if f.Predicate == "receptacleatlocation" {
			sc.recepAt[f.Args[0]] = f.Args[1]
		}
	}
	return sc
}

func (sc *alfworldScene) holds(s pddl.State, pred string, args ...string) bool {
	f := pddl.Fact{Predicate: pred, Args: args}
	if sc.static[f.String()] {
		return true
	}
	id := sc.task.FactID(f)
	return id >= 0 && s.Has(id)
}

// closed reports whether r can be opened and is closed in s.
func (sc *alfworldScene) closed(s pddl.State, r string) bool {
	return sc.holds(s, "openable", r) && !sc.holds(s, "opened", r)
}

// TestALFWorldPartialObservability plays expert plans and seeded random
// walks (random admissible commands: look, examine, open, take, ...) and
// checks at every step that observations reveal nothing the agent could not
// see: no observation text names an object the agent has not perceived
// (unless the command named it), objects inside closed receptacles are not
// perceived, no visible fact is about the contents of a closed receptacle,
// and the belief agrees with the true state on what was seen.
func TestALFWorldPartialObservability(t *testing.T) {
	env := openEnv(t, "alfworld")
	if !env.Capabilities().PartiallyObservable {
		t.Fatal("ALFWorld must be partially observable")
	}
	walks := 3
	if full() {
		walks = 2
	}
	for _, info := range slice(env, 8) {
		t.Run(info.ID, func(t *testing.T) {
			ep, _ := env.Open(context.Background(), info.ID)
			res, err := search.Solve(context.Background(), ep.Task(), search.Options{MaxExpansions: 200000})
			if err != nil || res.Status != search.Solved {
				t.Fatalf("planner: %v %v", res.Status, err)
			}
			task := ep.Task()
			sc := newScene(task)
			lex := ep.Lexicon()
			// Objects that start inside a closed receptacle only.
			hidden := map[string]bool{}
			for _, f := range task.Init.Facts() {
				if fa := task.Facts[f]; fa.Predicate == "inreceptacle" && sc.closed(task.Init, fa.Args[1]) {
					hidden[fa.Args[0]] = true
				}
			}
			for _, f := range task.Init.Facts() {
				if fa := task.Facts[f]; fa.Predicate == "inreceptacle" && !sc.closed(task.Init, fa.Args[1]) {
					delete(hidden, fa.Args[0])
				}
			}
			receptacles := map[string]bool{}
			for r := range sc.recepAt {
				receptacles[r] = true
			}
			initIn := map[string]bool{}
			agent := ""
			for _, f := range task.Init.Facts() {
				switch fa := task.Facts[f]; fa.Predicate {
				case "inreceptacle":
					initIn[fa.Args[0]+" "+fa.Args[1]] = true
				case "atlocation":
					agent = fa.Args[0]
				}
			}
			if len(hidden) == 0 {
				t.Logf("no object starts hidden in %s", info.ID)
			}
			for w := 0; w <= walks; w++ {
				obs, err := ep.Reset()
				if err != nil {
					t.Fatal(err)
				}
				r := rand.New(rand.NewPCG(uint64(w), 7))
				openedEver := map[string]bool{}
				check := func(cmd string, o Observation) {
					t.Helper()
					s := ep.State()
					perceived := map[string]bool{}
					for _, p := range ep.Perceived() {
						perceived[p] = true
					}
					for _, obj := range task.Objects {
						name := lex.Name(obj)
						// Objects without an ALFWorld name (agent1, types, the
						// bare type objects "bowl", ...) are not in the scene.
						if perceived[obj] || receptacles[obj] || name == obj {
							continue
						}
						if nameRE(name).MatchString(o.Text) && !nameRE(name).MatchString(cmd) {
							t.Fatalf("after %q the text names %s (%q), which the agent has not seen:\n%s", cmd, obj, name, o.Text)
						}
					}
					tr := ep.Truth()
					for _, obj := range tr.Objects {
						if receptacles[obj] || sc.holds(s, "holds", agent, obj) {
							continue
						}
						// A perceived object is not only inside closed receptacles.
						in, open := false, false
						for r := range receptacles {
							if sc.holds(s, "inreceptacle", obj, r) {
								in = true
								open = open || !sc.closed(s, r)
							}
						}
						if in && !open {
							t.Fatalf("after %q the agent perceives %s, which is only inside closed receptacles", cmd, obj)
						}
					}
					for _, f := range tr.Visible.Facts() {
						if fa := task.Facts[f]; fa.Predicate == "inreceptacle" && sc.closed(s, fa.Args[1]) {
							t.Fatalf("after %q the fact %s about a closed receptacle is visible", cmd, fa)
						}
					}
					b := ep.Belief()
					for i := range b.Known {
						if tr.Visible[i]&^b.Known[i] != 0 || (b.True[i]^s[i])&tr.Visible[i] != 0 {
							t.Fatalf("after %q the belief does not record the visible facts", cmd)
						}
					}
					// An object that started inside closed receptacles only is
					// perceived only once one of them has been opened.
					for r := range receptacles {
						if sc.holds(s, "opened", r) {
							openedEver[r] = true
						}
					}
					for obj := range hidden {
						if !perceived[obj] {
							continue
						}
						ok := false
						for r := range openedEver {
							ok = ok || initIn[obj+" "+r]
						}
						if !ok {
							t.Fatalf("after %q the agent perceives %s, hidden in a closed receptacle that was never opened", cmd, obj)
						}
					}
				}
				check("", obs)
				var cmds []string
				if w == 0 {
					for _, a := range res.Plan {
						cmds = append(cmds, lex.Text(a))
					}
				}
				for i := 0; i < 60 || len(cmds) > 0; i++ {
					var cmd string
					if len(cmds) > 0 {
						cmd, cmds = cmds[0], cmds[1:]
					} else {
						adm := ep.Admissible()
						cmd = adm[r.IntN(len(adm))]
					}
					o, err := ep.Step(cmd)
					if err != nil {
						t.Fatal(err)
					}
					if o.Action < 0 {
						t.Fatalf("admissible command %q was not executed", cmd)
					}
					check(cmd, o.Observation)
				}
			}
		})
	}
}

// TestALFWorldText checks the TextWorld text on real games: the intro and
// task come from the grammar, going to a closed receptacle does not list its
// contents, opening it lists them (in sorted-name order) and makes them
// perceived.
func TestALFWorldText(t *testing.T) {
	env := openEnv(t, "alfworld")
	tested := 0
	for _, info := range slice(env, 0) {
		ep, obs := open(t, env, info.ID)
		task := ep.Task()
		lex := ep.Lexicon()
		if !strings.HasPrefix(obs.Text, "-= Welcome to TextWorld, ALFRED! =-\n\n") {
			t.Fatalf("%s: intro %q", info.ID, obs.Text)
		}
		if !strings.HasPrefix(obs.Goal, "Your task is to: ") || !strings.HasSuffix(obs.Text, "\n\n"+obs.Goal) || ep.Goal() != obs.Goal {
			t.Fatalf("%s: goal %q, intro %q", info.ID, obs.Goal, obs.Text)
		}
		sc := newScene(task)
		// A closed receptacle with something inside, and the command to go there.
		var target string
		var contents []string
		for _, f := range task.Init.Facts() {
			if fa := task.Facts[f]; fa.Predicate == "inreceptacle" && sc.closed(task.Init, fa.Args[1]) && (target == "" || target == fa.Args[1]) {
				target = fa.Args[1]
				contents = append(contents, fa.Args[0])
			}
		}
		if target == "" {
			continue
		}
		tested++
		goTo, open := "go to "+lex.Name(target), "open "+lex.Name(target)
		res, err := ep.Step(goTo)
		if err != nil || res.Action < 0 {
			t.Fatalf("%s: %q: %+v %v", info.ID, goTo, res, err)
		}
		want := regexp.MustCompile(`^You arrive at loc \d+\. The ` + regexp.QuoteMeta(lex.Name(target)) + ` is closed\.$`)
		if !want.MatchString(res.Text) {
			t.Fatalf("%s: %q answered %q", info.ID, goTo, res.Text)
		}
		res, err = ep.Step(open)
		if err != nil || res.Action < 0 {
			t.Fatalf("%s: %q: %+v %v", info.ID, open, res, err)
		}
		// contents are in fact order, i.e. sorted by PDDL name.
		items := make([]string, len(contents))
		for i, o := range contents {
			items[i] = "a " + lex.Name(o)
		}
		list := items[0]
		if len(items) > 1 {
			list = strings.Join(items[:len(items)-1], ", ") + ", and " + items[len(items)-1]
		}
		wantText := "You open the " + lex.Name(target) + ". The " + lex.Name(target) + " is open. In it, you see " + list + "."
		if res.Text != wantText {
			t.Fatalf("%s: %q answered\n%q, want\n%q", info.ID, open, res.Text, wantText)
		}
		perceived := strings.Join(ep.Perceived(), " ")
		for _, o := range contents {
			if !strings.Contains(" "+perceived+" ", " "+o+" ") {
				t.Fatalf("%s: %s is not perceived after opening %s", info.ID, o, target)
			}
			if v, known := ep.Belief().Value(task.FactID(pddl.Fact{Predicate: "inreceptacle", Args: []string{o, target}})); !v || !known {
				t.Fatalf("%s: the belief does not hold that %s is in %s", info.ID, o, target)
			}
		}
		res, _ = ep.Step("look")
		if !strings.HasPrefix(res.Text, "You are facing the ") || !strings.Contains(res.Text, lex.Name(target)) {
			t.Fatalf("%s: look: %q", info.ID, res.Text)
		}
		res, _ = ep.Step("inventory")
		if res.Text != "You are not carrying anything." {
			t.Fatalf("%s: inventory: %q", info.ID, res.Text)
		}
	}
	if tested == 0 {
		t.Fatal("no game with a closed, non-empty receptacle in the slice")
	}
}

// TestALFWorldTemplatesMatchBuiltin: the command templates read from each
// game's grammar are lexicon's built-in ALFWorld templates, so the built-in
// lexicon (used without a game file) speaks exactly TextWorld's commands.
func TestALFWorldTemplatesMatchBuiltin(t *testing.T) {
	env := openEnv(t, "alfworld")
	builtin := lexicon.Builtin(lexicon.ALFWorld)
	for _, info := range slice(env, 0) {
		data, err := os.ReadFile(info.Problem)
		if err != nil {
			t.Fatal(err)
		}
		game, err := textworld.ParseGame(info.Problem, data)
		if err != nil {
			t.Fatal(err)
		}
		ep, _ := open(t, env, info.ID)
		for schema, params := range ep.Task().Params {
			act, ok := game.Actions[schema]
			if !ok {
				t.Fatalf("%s: the grammar has no text for %s", info.ID, schema)
			}
			tpl, err := act.PlaceholderTemplate(params)
			if err != nil {
				t.Fatal(err)
			}
			if tpl != builtin.Actions[schema] {
				t.Fatalf("%s: %s: grammar template %q, built-in %q", info.ID, schema, tpl, builtin.Actions[schema])
			}
		}
	}
}

func TestSuites(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			env := openEnv(t, name)
			if env.Name() != name {
				t.Fatalf("Name() = %q", env.Name())
			}
			tasks := env.Tasks()
			ids := map[string]bool{}
			for _, ti := range tasks {
				if ids[ti.ID] || ti.ID == "" || ti.Type == "" {
					t.Fatalf("bad or duplicate task %+v", ti)
				}
				ids[ti.ID] = true
				if _, err := os.Stat(ti.Problem); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := env.Open(context.Background(), "no-such-task"); err == nil {
				t.Fatal("opened a task that does not exist")
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := env.Open(ctx, tasks[0].ID); !errors.Is(err, context.Canceled) {
				t.Fatalf("Open with a canceled context: %v", err)
			}
			ep, err := env.Open(context.Background(), tasks[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ep.Step("look"); err == nil {
				t.Fatal("Step before Reset was accepted")
			}
			obs, err := ep.Reset()
			if err != nil {
				t.Fatal(err)
			}
			tr := ep.Truth()
			if obs.Text == "" || obs.Goal == "" || (!env.Capabilities().PartiallyObservable && len(tr.Objects) != len(ep.Task().Objects)) {
				t.Fatalf("empty first observation %+v", obs)
			}
			img, err := ep.Image()
			if env.Capabilities().Images != (err == nil && img != nil) || (err != nil && !errors.Is(err, ErrNoImage)) {
				t.Fatalf("capability Images %v, but Image gives %v, %v", env.Capabilities().Images, img, err)
			}
			partial := env.Capabilities().PartiallyObservable
			if all := tr.Visible.Len() == len(ep.Task().Facts); all == partial {
				t.Fatalf("partially observable %v, but %d of %d facts visible", partial, tr.Visible.Len(), len(ep.Task().Facts))
			}
		})
	}
	if _, err := New("minecraft", testenv.Datasets(t)); err == nil {
		t.Fatal("unknown environment accepted")
	}
	if _, err := NewALFWorld(t.TempDir()); err == nil {
		t.Fatal("ALFWorld without games accepted")
	}
}

// TestConcurrentOpen opens and plays episodes of one Env from several
// goroutines (run with -race).
func TestConcurrentOpen(t *testing.T) {
	for _, name := range Names() {
		env := openEnv(t, name)
		tasks := env.Tasks()[:4]
		errs := make(chan error, len(tasks))
		for _, ti := range tasks {
			go func() {
				ep, err := env.Open(context.Background(), ti.ID)
				if err == nil {
					_, err = ep.Reset()
				}
				if err == nil {
					_, err = ep.Step(ep.Admissible()[0])
				}
				errs <- err
			}()
		}
		for range tasks {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
}

func BenchmarkALFWorldStep(b *testing.B) {
	env, err := New("alfworld", testenv.Datasets(b))
	if err != nil {
		b.Fatal(err)
	}
	ep, err := env.Open(context.Background(), env.Tasks()[0].ID)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ep.Reset(); err != nil {
		b.Fatal(err)
	}
	cmds := ep.Admissible()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ep.Step(cmds[i%len(cmds)]); err != nil {
			b.Fatal(err)
		}
		if i%len(cmds) == len(cmds)-1 {
			ep.Reset()
			cmds = ep.Admissible()
		}
	}
}

func BenchmarkALFWorldOpen(b *testing.B) {
	env, err := New("alfworld", testenv.Datasets(b))
	if err != nil {
		b.Fatal(err)
	}
	id := env.Tasks()[0].ID
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := env.Open(context.Background(), id); err != nil {
			b.Fatal(err)
		}
	}
}
