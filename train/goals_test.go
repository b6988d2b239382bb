package train

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/pddl/search"
)

// gameData reads the first valid_train game of a task directory prefix.
func gameData(t *testing.T, prefix string) (string, []byte) {
	t.Helper()
	dir := filepath.Join(testenv.Datasets(t), "alfworld", "valid_train")
	paths, err := filepath.Glob(filepath.Join(dir, prefix+"*", "*", "game.tw-pddl"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no game %s in %s: %v", prefix, dir, err)
	}
	data, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	return paths[0], data
}

// TestSceneGoals checks the goals two scenes afford against what their
// problems say, hand-checked: the bedroom of look_at_obj_in_light-Book-
// None-DeskLamp-302 has a desk lamp and no sink basin, microwave or
// fridge; the kitchen of pick_heat_then_place_in_recep-Apple-None-Fridge-6
// has all three, and its apples are heatable and fit in the fridge.
func TestSceneGoals(t *testing.T) {
	tests := []struct {
		game      string
		has       []Goal // (Type, Object, Receptacle) only
		types     map[string]bool
		wantTypes []string
	}{
		{game: "look_at_obj_in_light-Book-None-DeskLamp-302",
			has:       []Goal{{Type: lookAt, Object: "BookType", Receptacle: "DeskLampType"}, {Type: pickPlace, Object: "BookType", Receptacle: "BedType"}},
			wantTypes: []string{pickPlace, pickTwo, lookAt}},
		{game: "pick_heat_then_place_in_recep-Apple-None-Fridge-6",
			has: []Goal{{Type: pickHeat, Object: "AppleType", Receptacle: "FridgeType"}, {Type: pickCool, Object: "AppleType", Receptacle: "MicrowaveType"},
				{Type: pickClean, Object: "AppleType", Receptacle: "SinkBasinType"}, {Type: pickTwo, Object: "AppleType", Receptacle: "CounterTopType"}},
			wantTypes: []string{pickPlace, pickTwo, pickClean, pickHeat, pickCool}},
	}
	for _, tc := range tests {
		t.Run(tc.game, func(t *testing.T) {
			_, data := gameData(t, tc.game)
			goals, err := SceneGoals(data, rand.New(rand.NewPCG(1, 2)))
			if err != nil {
				t.Fatal(err)
			}
			types := map[string]bool{}
			key := map[[3]string]bool{}
			for _, g := range goals {
				types[g.Type] = true
				key[[3]string{g.Type, g.Object, g.Receptacle}] = true
				word := typeWord(g.Object)
				if !strings.HasPrefix(g.Text, "Your task is to: ") || !strings.Contains(g.Text, word) || !strings.Contains(g.PDDL, g.Object) {
					t.Errorf("goal %+v: text or PDDL does not name the object", g)
				}
				if !strings.Contains(string(data), "(objectType ") || !strings.Contains(string(data), " "+g.Object+")") {
					t.Errorf("goal %+v: object type not in the scene", g)
				}
			}
			for _, h := range tc.has {
				if !key[[3]string{h.Type, h.Object, h.Receptacle}] {
					t.Errorf("missing goal %s %s %s", h.Type, h.Object, h.Receptacle)
				}
			}
			var got []string
			for _, typ := range goalTypes {
				if types[typ] {
					got = append(got, typ)
				}
			}
			if !reflect.DeepEqual(got, tc.wantTypes) {
				t.Errorf("task types %v, want %v", got, tc.wantTypes)
			}
		})
	}
}

// TestWithGoal: a game rewritten with the goal it already has (its own
// task type, object and receptacle, read from its folder's name) opens with
// the new words and is solved by exactly the plans of the original: the
// reference planner's plan for each reaches the other's goal; a rewritten
// game with another goal is another task, which its own plan solves and the
// original's plan does not.
func TestWithGoal(t *testing.T) {
	ctx := context.Background()
	path, data := gameData(t, "pick_heat_then_place_in_recep-Apple-None-Fridge-6")
	orig, err := envs.OpenALFWorldGame(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	planOf := func(ep *envs.Episode) []string {
		t.Helper()
		res, err := search.Solve(ctx, ep.Task(), search.Options{PreferredOperators: true})
		if err != nil || res.Status != search.Solved {
			t.Fatalf("%s: %v %v", ep.Info().ID, res.Status, err)
		}
		var out []string
		for _, a := range res.Plan {
			out = append(out, ep.Lexicon().Text(a))
		}
		return out
	}
	reaches := func(ep *envs.Episode, plan []string) bool {
		t.Helper()
		if _, err := ep.Reset(); err != nil {
			t.Fatal(err)
		}
		for _, text := range plan {
			res, err := ep.Step(text)
			if err != nil {
				t.Fatal(err)
			}
			if res.Action < 0 {
				return false
			}
		}
		return ep.Success()
	}
	same := Goal{Type: pickHeat, Object: "AppleType", Receptacle: "FridgeType", Text: "Your task is to: heat some apple and put it in fridge."}
	same.PDDL = goalPDDL(same.Type, same.Object, same.Receptacle)
	other := Goal{Type: pickTwo, Object: "AppleType", Receptacle: "CounterTopType", Text: "Your task is to: put two apple in countertop."}
	other.PDDL = goalPDDL(other.Type, other.Object, other.Receptacle)
	for _, tc := range []struct {
		goal Goal
		same bool
	}{{same, true}, {other, false}} {
		game, err := WithGoal(data, tc.goal)
		if err != nil {
			t.Fatal(err)
		}
		ep, err := envs.OpenALFWorldGameData(ctx, "rewritten", tc.goal.Type, game)
		if err != nil {
			t.Fatal(err)
		}
		if ep.Goal() != tc.goal.Text {
			t.Errorf("goal in words %q, want %q", ep.Goal(), tc.goal.Text)
		}
		obs, err := ep.Reset()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(obs.Text, tc.goal.Text) {
			t.Errorf("the first observation does not end with the new goal:\n%s", obs.Text)
		}
		own := planOf(ep)
		if !reaches(ep, own) {
			t.Errorf("%s: its own plan %v does not reach its goal", tc.goal.Type, own)
		}
		if got := reaches(orig, own); got != tc.same {
			t.Errorf("%s: plan %v reaches the original goal: %v, want %v", tc.goal.Type, own, got, tc.same)
		}
		if got := reaches(ep, planOf(orig)); got != tc.same {
			t.Errorf("%s: the original's plan reaches the new goal: %v, want %v", tc.goal.Type, got, tc.same)
		}
	}
}

// TestDemosWithGoals: further goals are demonstrated on their game's scene
// (Scene names it), every plan reaches its goal in the environment, the
// goals are spread over the task types, and the result depends on the seed
// only, not on the workers.
func TestDemosWithGoals(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(testenv.Datasets(t), "alfworld", "valid_train")
	o := DemoOptions{Prompt: decoder.PromptOptions{Compact: true}, Limit: 2, Goals: 4, Seed: 7, Workers: 1}
	demos, unsolved, err := ALFWorldDemos(ctx, dir, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range unsolved {
		// A further goal a scene seems to afford can be unreachable (an
		// instance no action can take); a game's own goal never is.
		if !strings.Contains(id, "#goal") {
			t.Errorf("the game %s is unsolved", id)
		}
	}
	env, err := envs.NewALFWorld(dir)
	if err != nil {
		t.Fatal(err)
	}
	scenes := map[string]int{}
	goalsSeen := map[string]bool{}
	for _, d := range demos {
		scenes[d.Scene]++
		if !strings.HasPrefix(d.ID, d.Scene) {
			t.Errorf("%s is not on its scene %s", d.ID, d.Scene)
		}
		goal := strings.TrimPrefix(strings.SplitN(d.Messages[0].Content, "\n", 2)[0], "Goal: ")
		goalsSeen[goal] = true
		// Replay the plan on the scene's game rewritten with the demo's goal
		// (the game's own goal for the game's own demo).
		ep, err := env.Open(ctx, d.Scene)
		if err != nil {
			t.Fatal(err)
		}
		if d.ID != d.Scene {
			info := ep.Info()
			data, err := os.ReadFile(info.Problem)
			if err != nil {
				t.Fatal(err)
			}
			var g *Goal
			goals, _ := SceneGoals(data, rand.New(rand.NewPCG(1, 1)))
			for _, c := range goals {
				for _, ph := range goalPhrasings[c.Type] {
					text := "Your task is to: " + strings.NewReplacer("{o}", typeWord(c.Object), "{r}", typeWord(c.Receptacle)).Replace(ph)
					if text == goal {
						c.Text = text
						g = &c
					}
				}
			}
			if g == nil {
				t.Fatalf("%s: goal %q is none the scene affords", d.ID, goal)
			}
			game, err := WithGoal(data, *g)
			if err != nil {
				t.Fatal(err)
			}
			if ep, err = envs.OpenALFWorldGameData(ctx, d.ID, g.Type, game); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := ep.Reset(); err != nil {
			t.Fatal(err)
		}
		for _, text := range d.Plan {
			res, err := ep.Step(text)
			if err != nil || res.Action < 0 {
				t.Fatalf("%s: %q refused: %v", d.ID, text, err)
			}
		}
		if !ep.Success() {
			t.Errorf("%s: the plan %v does not reach %q", d.ID, d.Plan, goal)
		}
	}
	if len(scenes) != 2 || len(demos) < 6 || len(goalsSeen) < 6 {
		t.Errorf("%d demonstrations on %d scenes with %d goals, want about 5 a scene", len(demos), len(scenes), len(goalsSeen))
	}
	o.Workers = 3
	again, _, err := ALFWorldDemos(ctx, dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, demos) {
		t.Error("the demonstrations depend on the workers")
	}
}

// TestConstrainedSets: every plan token of every demonstration (further
// goals included) is among the tokens the constraint allows before it, the
// first token of an action has many options (where to go, what to take)
// and some tokens are forced (one option), so the constrained loss is
// zero there.
func TestConstrainedSets(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(testenv.Datasets(t), "alfworld", "valid_train")
	demos, _, err := ALFWorldDemos(ctx, dir, DemoOptions{Prompt: decoder.PromptOptions{Compact: true}, Limit: 2, Goals: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	_, lm := tinyPrior(t, demos, 500)
	ex, err := Tokenize(lm, demos)
	if err != nil {
		t.Fatal(err)
	}
	left, err := ConstrainedSets(ctx, lm, Sources{ALFWorld: dir}, demos, ex)
	if err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d examples left the constraint", left)
	}
	forced, choices := 0, 0
	for _, x := range ex {
		plan := x.Tokens[x.PlanStart:]
		if len(x.Allowed) != len(plan) {
			t.Fatalf("%s: %d allowed sets for %d plan tokens", x.ID, len(x.Allowed), len(plan))
		}
		for k, tok := range plan {
			if !slices.Contains(x.Allowed[k], tok) {
				t.Fatalf("%s: plan token %d (%d) not allowed: %v", x.ID, k, tok, x.Allowed[k])
			}
			switch n := len(x.Allowed[k]); {
			case n == 1:
				forced++
			case n >= 5:
				choices++
			}
		}
	}
	if forced == 0 || choices == 0 {
		t.Errorf("forced tokens %d, tokens with at least 5 options %d", forced, choices)
	}
}
