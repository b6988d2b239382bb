package textworld

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
)

// mapWorld is a small hand-written world: facts by predicate, types and
// display names. Facts are listed in the order given.
type mapWorld struct {
	facts map[string][][]string
	types map[string]string
	names map[string]string
}

func (w *mapWorld) Facts(pred string) [][]string { return w.facts[pred] }
func (w *mapWorld) Holds(pred string, args []string) bool {
	for _, t := range w.facts[pred] {
		if strings.Join(t, " ") == strings.Join(args, " ") {
			return true
		}
	}
	return false
}
func (w *mapWorld) IsA(obj, typ string) bool { return w.types[obj] == typ }
func (w *mapWorld) Name(obj string) string   { return w.names[obj] }

// alfworldGames returns the game files of the ALFWorld valid_unseen split.
func alfworldGames(t *testing.T) []string {
	t.Helper()
	dir := testenv.Shared(t, "datasets/alfworld/valid_unseen")
	files, err := filepath.Glob(filepath.Join(dir, "*", "*", "game.tw-pddl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no game.tw-pddl under %s: %v", dir, err)
	}
	sort.Strings(files)
	return files
}

func loadGame(t *testing.T, path string) *Game {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := ParseGame(path, data)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// symbolsIn collects the nonterminals a symbol list refers to.
func symbolsIn(syms []*symbol, out map[string]bool) {
	for _, s := range syms {
		switch s.kind {
		case symNonterminal:
			out[s.text] = true
		case symCond, symList:
			symbolsIn([]*symbol{s.inner}, out)
		}
	}
}

func TestParseGameALFWorld(t *testing.T) {
	for _, path := range alfworldGames(t) {
		g := loadGame(t, path)
		if !strings.Contains(g.Domain, "(define (domain alfred)") || !strings.Contains(g.Problem, "(:goal") {
			t.Fatalf("%s: domain/problem text not read", path)
		}
		for _, want := range []string{"gotolocation", "openobject", "pickupobject", "putobject", "heatobject", "look", "inventory"} {
			if _, ok := g.Actions[want]; !ok {
				t.Fatalf("%s: action %s missing from grammar", path, want)
			}
		}
		// Every symbol reachable from the intro, the task and every action's
		// feedback must be defined.
		todo := map[string]bool{"intro": true, "task": true}
		for _, a := range g.Actions {
			syms, err := parseSymbols(a.Feedback)
			if err != nil {
				t.Fatalf("%s: action %s feedback: %v", path, a.Name, err)
			}
			symbolsIn(syms, todo)
		}
		done := map[string]bool{}
		for len(todo) > 0 {
			for name := range todo {
				delete(todo, name)
				if done[name] {
					continue
				}
				done[name] = true
				if !g.Grammar.Has(name) {
					t.Fatalf("%s: symbol #%s# is used but not defined", path, name)
				}
				for _, r := range g.Grammar.rules[name] {
					symbolsIn(r.rhs, todo)
				}
			}
		}
	}
}

func TestPlaceholderTemplate(t *testing.T) {
	g := loadGame(t, alfworldGames(t)[0])
	cases := []struct {
		action string
		params []string
		want   string
	}{
		{"gotolocation", []string{"?a", "?lstart", "?lend", "?r"}, "go to {r}"},
		{"pickupobject", []string{"?a", "?l", "?o", "?r"}, "take {o} from {r}"},
		{"putobject", []string{"?a", "?l", "?o", "?r", "?ot", "?rt"}, "put {o} in/on {r}"},
		{"heatobject", []string{"?a", "?l", "?r", "?o"}, "heat {o} with {r}"},
		{"sliceobject", []string{"?a", "?l", "?co", "?ko"}, "slice {co} with {ko}"},
		{"toggleobject", []string{"?a", "?l", "?o", "?r"}, "use {o}"},
		{"inventory", []string{"?a"}, "inventory"},
	}
	for _, c := range cases {
		got, err := g.Actions[c.action].PlaceholderTemplate(c.params)
		if err != nil {
			t.Errorf("%s: %v", c.action, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s: template %q, want %q", c.action, got, c.want)
		}
	}
	if _, err := g.Actions["pickupobject"].PlaceholderTemplate([]string{"?a", "?l"}); err == nil {
		t.Error("template naming a parameter the schema lacks was accepted")
	}
}

// kitchen is a small ALFWorld-like world for derivation tests.
func kitchen() *mapWorld {
	return &mapWorld{
		facts: map[string][][]string{
			"atlocation":           {{"agent1", "loc1"}},
			"receptacleatlocation": {{"countertop_a", "loc2"}, {"fridge_a", "loc3"}, {"drawer_a", "loc4"}},
			"openable":             {{"fridge_a"}, {"drawer_a"}},
			"opened":               {{"fridge_a"}},
			"inreceptacle":         {{"apple_a", "fridge_a"}, {"egg_a", "fridge_a"}, {"mug_a", "fridge_a"}, {"knife_a", "drawer_a"}},
			"holds":                {{"agent1", "bread_a"}},
			"holdsany":             {{"agent1"}},
			"ishot":                {{"bread_a"}},
		},
		types: map[string]string{
			"agent1": "agent", "loc1": "location", "loc2": "location", "loc3": "location", "loc4": "location",
			"countertop_a": "receptacle", "fridge_a": "receptacle", "drawer_a": "receptacle",
			"apple_a": "object", "egg_a": "object", "mug_a": "object", "knife_a": "object", "bread_a": "object",
		},
		names: map[string]string{
			"loc1": "loc 1", "loc2": "loc 2", "loc3": "loc 3", "loc4": "loc 4",
			"countertop_a": "countertop 1", "fridge_a": "fridge 1", "drawer_a": "drawer 1",
			"apple_a": "apple 1", "egg_a": "egg 1", "mug_a": "mug 1", "knife_a": "knife 1", "bread_a": "bread 1",
		},
	}
}

func TestDeriveALFWorldFeedback(t *testing.T) {
	g := loadGame(t, alfworldGames(t)[0])
	w := kitchen()
	cases := []struct {
		name    string
		symbols string
		vars    map[string]string
		want    string
	}{
		{"arrive at an open receptacle lists its contents", "#GotoLocation.feedback#",
			map[string]string{"a": "agent1", "lend": "loc3", "r": "fridge_a"},
			"You arrive at loc 3. The fridge 1 is open. In it, you see a apple 1, a egg 1, and a mug 1."},
		{"arrive at a closed receptacle hides its contents", "#GotoLocation.feedback#",
			map[string]string{"a": "agent1", "lend": "loc4", "r": "drawer_a"},
			"You arrive at loc 4. The drawer 1 is closed."},
		{"empty surface says nothing", "#GotoLocation.feedback#",
			map[string]string{"a": "agent1", "lend": "loc2", "r": "countertop_a"},
			"You arrive at loc 2. On the countertop 1, you see nothing."},
		{"pick up", "#PickupObject.feedback#",
			map[string]string{"o": "apple_a", "r": "fridge_a"}, "You pick up the apple 1 from the fridge 1."},
		{"inventory", "#inventory.feedback#", map[string]string{"a": "agent1"}, "You are carrying: a bread 1."},
		{"examine a hot object", "#examineObject.feedback#", map[string]string{"o": "bread_a"}, "This is a hot bread 1."},
		{"examine a plain object", "#examineObject.feedback#", map[string]string{"o": "egg_a"}, "There's nothing special about egg 1."},
		{"intro away from receptacles lists them all", "#look.feedback#", map[string]string{},
			"You are in the middle of a room. Looking quickly around you, you see a countertop 1, a fridge 1, and a drawer 1."},
		{"two items use the last separator", "[{o.name | inreceptacle(o:object, r:receptacle)}]",
			map[string]string{"r": "fridge_a"}, "apple 1, egg 1, and mug 1"},
		{"types filter free variables", "[{x.name | inreceptacle(x:receptacle, r:receptacle)}]",
			map[string]string{"r": "fridge_a"}, "nothing"},
		{"or falls back to the id", "{r.id or r.name}", map[string]string{"r": "drawer_a"}, "drawer_a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := g.Grammar.Derive(c.symbols, Context{World: w, Vars: c.vars})
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestDeriveErrors(t *testing.T) {
	g := loadGame(t, alfworldGames(t)[0])
	w := kitchen()
	cases := []struct {
		name, symbols, want string
	}{
		{"unknown symbol", "#nosuchrule#", "unknown symbol"},
		{"unbound variable", "{zz.name}", "unbound variable"},
		{"unsafe negation", "{o.name | not_holds(a:agent, o:object)}", "bound by no positive literal"},
		{"unterminated symbol", "#intro", "unterminated"},
		{"bad attribute", "{o.colour}", "unknown attribute"},
		{"bad query", "{o.name | holds a o}", "not of the form"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := g.Grammar.Derive(c.symbols, Context{World: w, Vars: map[string]string{"o": "egg_a"}})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestOverride(t *testing.T) {
	g := loadGame(t, alfworldGames(t)[0])
	o := g.Grammar.Override("list_empty", func(Context) (string, error) { return "no thing", nil })
	w := kitchen()
	ctx := Context{World: w, Vars: map[string]string{"r": "countertop_a"}}
	got, err := o.Derive("#examineReceptacle.feedback#", ctx)
	if err != nil || got != "On the countertop 1, you see no thing." {
		t.Fatalf("override: %q, %v", got, err)
	}
	orig, _ := g.Grammar.Derive("#examineReceptacle.feedback#", ctx)
	if orig != "On the countertop 1, you see nothing." {
		t.Fatalf("Override changed the original grammar: %q", orig)
	}
}

func TestParseDocumentErrors(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"junk at top level", "hello", "expected 'grammar' or 'action'"},
		{"bad json", `grammar :: """ {"a": [ """;`, "not valid JSON"},
		{"missing semicolon", `grammar :: """{}"""`, "expected ';'"},
		{"unclosed action", `action A { template :: "x";`, "not closed"},
		{"action without template", `action A { feedback :: "#x#"; }`, "has no template"},
		{"bad rule", `grammar :: """{"r": [{"rhs": "#oops"}]}""";`, `rule "r"`},
		{"line numbers", "\n\naction A {\n nonsense :: \"x\"; }", "line 4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ParseDocument(c.src)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
	if _, err := ParseGame("x.tw-pddl", []byte(`{"pddl_domain": "", "grammar": ""}`)); err == nil || !strings.Contains(err.Error(), "no pddl_problem") {
		t.Fatalf("game without problem: %v", err)
	}
}

func FuzzParseSymbols(f *testing.F) {
	for _, s := range []string{"#a#", "{o.name | p(o:object)}", "[{#x# | q(a:b)}]", "You {x} [ {y}", "}]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = parseSymbols(s)
		_, _ = parseExpr(s)
		_, _ = ParseQuery(s)
		_, _, _ = ParseDocument(s)
	})
}
