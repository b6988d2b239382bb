package lexicon

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/internal/testenv"
	"github.com/nesy-dev/nesy/pddl"
)

// groundText parses and grounds a domain and a problem given as text.
func groundText(tb testing.TB, name, domain, problem string) *pddl.Task {
	tb.Helper()
	d, _, err := pddl.ParseDomain(name+" (domain)", []byte(domain))
	if err != nil {
		tb.Fatal(err)
	}
	p, _, err := pddl.ParseProblem(name, []byte(problem))
	if err != nil {
		tb.Fatal(err)
	}
	t, err := pddl.Ground(d, p)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

func groundFiles(tb testing.TB, domainPath, problemPath string) *pddl.Task {
	tb.Helper()
	d, err := os.ReadFile(domainPath)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := os.ReadFile(problemPath)
	if err != nil {
		tb.Fatal(err)
	}
	return groundText(tb, problemPath, string(d), string(p))
}

// groundGame grounds an ALFWorld game.tw-pddl file.
func groundGame(tb testing.TB, path string) *pddl.Task {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var g struct {
		Domain  string `json:"pddl_domain"`
		Problem string `json:"pddl_problem"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		tb.Fatal(err)
	}
	return groundText(tb, path, g.Domain, g.Problem)
}

func full() bool { return os.Getenv("NESY_FULL") == "1" }

// alfworldGames returns the ALFWorld game files: all of them under
// NESY_FULL=1, else the first trial of every task type.
func alfworldGames(tb testing.TB) []string {
	tb.Helper()
	dir := testenv.Shared(tb, "datasets/alfworld/valid_unseen")
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*", "game.tw-pddl"))
	sort.Strings(files)
	if len(files) == 0 {
		tb.Fatalf("no games under %s", dir)
	}
	if full() {
		return files
	}
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		typ, _, _ := strings.Cut(filepath.Base(filepath.Dir(filepath.Dir(f))), "-")
		if !seen[typ] {
			seen[typ] = true
			out = append(out, f)
		}
	}
	return out
}

func blocksworld(tb testing.TB, n int) *pddl.Task {
	tb.Helper()
	dir := testenv.Shared(tb, "datasets/planbench-blocksworld")
	return groundFiles(tb, filepath.Join(dir, "domain.pddl"), filepath.Join(dir, "instances", "instance-"+strconv.Itoa(n)+".pddl"))
}

func virtualhome(tb testing.TB, rel string) *pddl.Task {
	tb.Helper()
	dir := testenv.Shared(tb, "datasets/virtualhome")
	return groundFiles(tb, filepath.Join(dir, "virtualhome.pddl"), filepath.Join(dir, "problems", rel))
}

func TestParseTemplate(t *testing.T) {
	params := []string{"a", "l", "o", "R"}
	args := []string{"agent1", "loc1", "apple_x", "fridge_y"}
	show := func(s string) string { return strings.ToUpper(s) }
	cases := []struct {
		src, want, err string
	}{
		{src: "take {o} from {r}", want: "take APPLE_X from FRIDGE_Y"},
		{src: "take {?O} from {4}", want: "take APPLE_X from FRIDGE_Y"},
		{src: "{{literal}} {1}", want: "{literal} AGENT1"},
		{src: "no placeholders", want: "no placeholders"},
		{src: "", want: ""},
		{src: "take {x}", err: "unknown placeholder {x}: the parameters are a, l, o, R"},
		{src: "take {5}", err: "out of range"},
		{src: "take {0}", err: "out of range"},
		{src: "take {o", err: "unclosed '{'"},
		{src: "take o}", err: "unmatched '}'"},
		{src: "take {}", err: "empty placeholder"},
	}
	for _, c := range cases {
		t.Run(c.src, func(t *testing.T) {
			tpl, err := ParseTemplate(c.src, params, 0)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tpl.Execute(args, show); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			if tpl.String() != c.src {
				t.Fatalf("String() = %q", tpl.String())
			}
		})
	}
	if _, err := ParseTemplate("{o} is here", nil, 2); err == nil || !strings.Contains(err.Error(), "only positional") {
		t.Fatalf("named placeholder in a positional template: %v", err)
	}
}

func TestParseJSON(t *testing.T) {
	l := &Lexicon{
		Actions: map[string]string{"stack": "stack the {1} on the {2}"},
		Objects: map[string]string{"a": "red block"},
		Facts:   map[string]string{"on": "the {1} is on the {2}"},
	}
	data, err := l.MarshalIndent()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, l) {
		t.Fatalf("round trip changed the lexicon: %+v", back)
	}
	up, err := Parse([]byte(`{"actions": {"PICK-UP": "lift {1}"}}`))
	if err != nil || up.Actions["pick-up"] != "lift {1}" {
		t.Fatalf("keys are not lower-cased: %+v %v", up, err)
	}
	bad := []struct{ src, want string }{
		{`{"action": {}}`, "unknown field"},
		{`{"actions": {"Stack": "x", "stack": "y"}}`, "given twice"},
		{`{"objects": {"a": "  "}}`, "empty display name"},
		{`{"actions": {}} {}`, "trailing data"},
		{`[1]`, "cannot unmarshal"},
	}
	for _, c := range bad {
		if _, err := Parse([]byte(c.src)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%s): %v, want an error containing %q", c.src, err, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	task := blocksworld(t, 1)
	cases := []struct {
		name string
		lex  Lexicon
		want string
	}{
		{"builtin", *Builtin(Blocksworld), ""},
		{"named placeholders", Lexicon{Actions: map[string]string{"stack": "put {ob} on {underob}"}}, ""},
		{"unknown schema", Lexicon{Actions: map[string]string{"fly": "fly"}}, `unknown schema "fly"`},
		{"unknown placeholder", Lexicon{Actions: map[string]string{"stack": "put {x} on {2}"}}, "stack: template \"put {x} on {2}\": unknown placeholder {x}: the parameters are ob, underob"},
		{"out of range", Lexicon{Actions: map[string]string{"pick-up": "lift {2}"}}, "out of range"},
		{"fact out of range", Lexicon{Facts: map[string]string{"clear": "{1} {2}"}}, "facts: clear"},
		{"fact named placeholder", Lexicon{Facts: map[string]string{"on": "{ob} on {2}"}}, "only positional"},
		{"case-insensitive duplicate", Lexicon{Actions: map[string]string{"Stack": "a", "stack": "b"}}, "given twice"},
		{"unknown objects are ignored", Lexicon{Objects: map[string]string{"zz": "no such block"}}, ""},
		{"empty display name", Lexicon{Objects: map[string]string{"a": ""}}, "empty display name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.lex.Validate(task)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// roundTrip checks, in state s, that every applicable action's text looks
// up to an applicable action with the same successor state, and that
// Applicable lists each text once with the action Lookup picks.
func roundTrip(t *testing.T, b *Bound, s pddl.State) {
	t.Helper()
	task := b.Task()
	texts := map[string]bool{}
	for _, a := range task.Applicable(s, nil) {
		text := b.Text(a)
		texts[text] = true
		got, ok := b.Lookup(s, text)
		if !ok {
			t.Fatalf("%s: applicable action %s renders as %q, which looks up to nothing", task.ProblemName, task.Actions[a].String(), text)
		}
		if got > a {
			t.Fatalf("%s: %q looked up to %d, not the lowest applicable id (%d is applicable)", task.ProblemName, text, got, a)
		}
		if !task.Apply(s, got).Equal(task.Apply(s, a)) {
			t.Fatalf("%s: %q stands for %s and %s, which lead to different states", task.ProblemName, text, task.Actions[a].String(), task.Actions[got].String())
		}
	}
	if amb := b.Ambiguities(s); len(amb) > 0 {
		t.Fatalf("%s: ambiguous texts %v", task.ProblemName, amb)
	}
	ch := b.Applicable(s)
	if len(ch) != len(texts) {
		t.Fatalf("%s: Applicable lists %d texts, there are %d", task.ProblemName, len(ch), len(texts))
	}
	for _, c := range ch {
		if a, _ := b.Lookup(s, c.Text); a != c.Action {
			t.Fatalf("%s: Applicable pairs %q with %d, Lookup gives %d", task.ProblemName, c.Text, c.Action, a)
		}
	}
}

// walk visits the states of a seeded random walk of n steps from the
// initial state, calling fn on each.
func walk(task *pddl.Task, seed uint64, n int, fn func(s pddl.State)) {
	r := rand.New(rand.NewPCG(seed, 1))
	s := task.Init
	for i := 0; i <= n; i++ {
		fn(s)
		app := task.Applicable(s, nil)
		if len(app) == 0 {
			return
		}
		s = task.Apply(s, app[r.IntN(len(app))])
	}
}

// TestRoundTrip: in every visited state of real tasks, the texts of the
// applicable actions map back to actions with the same effect, and Render
// agrees with Bind.
func TestRoundTrip(t *testing.T) {
	type tc struct {
		name string
		task func(testing.TB) *pddl.Task
	}
	var cases []tc
	for _, g := range alfworldGames(t) {
		g := g
		cases = append(cases, tc{filepath.Base(filepath.Dir(filepath.Dir(g))), func(tb testing.TB) *pddl.Task { return groundGame(tb, g) }})
	}
	for _, n := range []int{1, 2, 100, 500} {
		n := n
		cases = append(cases, tc{"blocksworld-" + strconv.Itoa(n), func(tb testing.TB) *pddl.Task { return blocksworld(tb, n) }})
	}
	vh, _ := filepath.Glob(filepath.Join(testenv.Shared(t, "datasets/virtualhome"), "problems", "*", "*.pddl"))
	sort.Strings(vh)
	if !full() && len(vh) > 30 {
		vh = vh[:30]
	}
	for _, p := range vh {
		rel, _ := filepath.Rel(filepath.Join(testenv.Shared(t, "datasets/virtualhome"), "problems"), p)
		cases = append(cases, tc{"virtualhome-" + rel, func(tb testing.TB) *pddl.Task { return virtualhome(tb, rel) }})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			task := c.task(t)
			lex := ForTask(task)
			b, err := lex.Bind(task)
			if err != nil {
				t.Fatal(err)
			}
			for a := range task.Actions {
				if got := lex.Render(task, a); got != b.Text(a) {
					t.Fatalf("Render(%d) = %q, Bind gives %q", a, got, b.Text(a))
				}
			}
			if nc := b.NameCollisions(); len(nc) > 0 {
				t.Fatalf("display names shared by several objects: %v", nc)
			}
			for seed := uint64(1); seed <= 3; seed++ {
				walk(task, seed, 40, func(s pddl.State) { roundTrip(t, b, s) })
			}
		})
	}
}

// TestLookupLowestID: a template that leaves out a parameter makes several
// applicable actions share a text; Lookup picks the lowest id and
// Ambiguities reports the text.
func TestLookupLowestID(t *testing.T) {
	task := blocksworld(t, 1) // a, b, c, d; b on c; a, c... on the table
	lex := &Lexicon{Actions: map[string]string{"stack": "stack the {1}"}}
	b, err := lex.Bind(task)
	if err != nil {
		t.Fatal(err)
	}
	// Pick up a clear block on the table, then look at the stack texts.
	var s pddl.State
	for _, a := range task.Applicable(task.Init, nil) {
		if task.Actions[a].Name == "pick-up" {
			s = task.Apply(task.Init, a)
			break
		}
	}
	if s == nil {
		t.Fatal("no pick-up applicable in the initial state")
	}
	var stacks []int
	for _, a := range task.Applicable(s, nil) {
		if task.Actions[a].Name == "stack" {
			stacks = append(stacks, a)
		}
	}
	if len(stacks) < 2 {
		t.Fatalf("want several applicable stack actions, have %d", len(stacks))
	}
	text := b.Text(stacks[0])
	got, ok := b.Lookup(s, text)
	if !ok || got != stacks[0] {
		t.Fatalf("Lookup(%q) = %d, %v; want the lowest applicable id %d", text, got, ok, stacks[0])
	}
	amb := b.Ambiguities(s)
	if len(amb) != 1 || amb[0].Text != text || !reflect.DeepEqual(amb[0].Actions, stacks) {
		t.Fatalf("Ambiguities = %+v, want %q over %v", amb, text, stacks)
	}
	if _, ok := b.Lookup(task.Init, text); ok {
		t.Fatalf("%q looked up in a state where no stack applies", text)
	}
	if _, ok := b.Lookup(s, "stack the"); ok {
		t.Fatal("a prefix of a text looked up")
	}
	all := b.Actions(text)
	if len(all) < len(stacks) || !sort.IntsAreSorted(all) {
		t.Fatalf("Actions(%q) = %v", text, all)
	}
}

// TestDefaultForm: without a lexicon every action is "name arg1 arg2".
func TestDefaultForm(t *testing.T) {
	task := blocksworld(t, 2)
	var nilLex *Lexicon
	b, err := nilLex.Bind(task)
	if err != nil {
		t.Fatal(err)
	}
	for a := range task.Actions {
		act := &task.Actions[a]
		want := strings.TrimSpace(act.Name + " " + strings.Join(act.Args, " "))
		if b.Text(a) != want {
			t.Fatalf("default text %q, want %q", b.Text(a), want)
		}
		if "("+want+")" != act.String() {
			t.Fatalf("default text %q is not the PDDL action %s without parentheses", want, act.String())
		}
	}
}

// TestAlfredNames checks ALFWorld's numbering on every game: one name per
// object, each type numbered 1..count, counting down in sorted id order.
func TestAlfredNames(t *testing.T) {
	for _, g := range alfworldGames(t) {
		task := groundGame(t, g)
		ids := InitObjects(task)
		names := AlfredNames(ids)
		byType := map[string][]string{}
		seen := map[string]string{}
		for _, id := range ids {
			n := names[id]
			if other, dup := seen[n]; dup {
				t.Fatalf("%s: %s and %s are both %q", g, other, id, n)
			}
			seen[n] = id
			typ, num, ok := strings.Cut(n, " ")
			if !strings.Contains(id, "_bar_") {
				if n != id {
					t.Fatalf("%s: unmangled %s named %q", g, id, n)
				}
				continue
			}
			if !ok || !strings.HasPrefix(id, strings.TrimSuffix(typ, "basin")) {
				t.Fatalf("%s: %s named %q", g, id, n)
			}
			if strings.HasSuffix(typ, "basin") != strings.Contains(id, "basin") {
				t.Fatalf("%s: %s named %q (basin)", g, id, n)
			}
			byType[typ] = append(byType[typ], num)
		}
		for typ, nums := range byType {
			// ids are sorted, so numbers must run count, count-1, ..., 1.
			for i, s := range nums {
				if s != strconv.Itoa(len(nums)-i) {
					t.Fatalf("%s: %s numbered %v, want %d down to 1", g, typ, nums, len(nums))
				}
			}
		}
	}
}

// TestForTaskFiltersSchemas: the game files' domain lacks alfred.pddl's
// "help"; ForTask keeps only the schemas the task has, so it validates.
func TestForTaskFiltersSchemas(t *testing.T) {
	task := groundGame(t, alfworldGames(t)[0])
	if _, ok := task.Params["help"]; ok {
		t.Skip("this domain has help")
	}
	if err := Builtin(ALFWorld).Validate(task); err == nil || !strings.Contains(err.Error(), `unknown schema "help"`) {
		t.Fatalf("the full built-in lexicon should not validate: %v", err)
	}
	l := ForTask(task)
	if err := l.Validate(task); err != nil {
		t.Fatal(err)
	}
	if len(l.Actions) != len(task.Params) {
		t.Fatalf("ForTask has templates for %d schemas, the domain has %d", len(l.Actions), len(task.Params))
	}
	if got := Kind("unknown-domain"); got != "" || Builtin(got) != nil {
		t.Fatal("unknown domains have no built-in lexicon")
	}
}

func TestFactText(t *testing.T) {
	task := blocksworld(t, 1)
	b, err := ForTask(task).Bind(task)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		f    pddl.Fact
		want string
	}{
		{pddl.Fact{Predicate: "on", Args: []string{"b", "c"}}, "the blue block is on top of the orange block"},
		{pddl.Fact{Predicate: "handempty"}, "the hand is empty"},
		{pddl.Fact{Predicate: "holding", Args: []string{"a"}}, "the hand is currently holding red block"},
		{pddl.Fact{Predicate: "unknown", Args: []string{"a", "d"}}, "unknown red block yellow block"},
	}
	for _, c := range cases {
		if got := b.FactText(c.f); got != c.want {
			t.Errorf("FactText(%s) = %q, want %q", c.f, got, c.want)
		}
		if got := ForTask(task).FactText(c.f); got != c.want {
			t.Errorf("Lexicon.FactText(%s) = %q, want %q", c.f, got, c.want)
		}
	}
}

func BenchmarkBindALFWorld(b *testing.B) {
	task := groundGame(b, alfworldGames(b)[0])
	lex := ForTask(task)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := lex.Bind(task); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkApplicableALFWorld(b *testing.B) {
	task := groundGame(b, alfworldGames(b)[0])
	bound, err := ForTask(task).Bind(task)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = bound.Applicable(task.Init)
	}
}

// TestActionForms: the forms are sorted and distinct, at most one per
// schema, "name <p1> <p2>" (the domain's parameter names) without a lexicon, and every ground action's text
// fits some form of its task (each <param> standing for one or more words).
func TestActionForms(t *testing.T) {
	var none *Lexicon
	bw := blocksworld(t, 2)
	tests := []struct {
		name string
		lex  func(*pddl.Task) *Lexicon
		task func(t *testing.T) *pddl.Task
	}{
		{"blocksworld default", func(*pddl.Task) *Lexicon { return none }, func(*testing.T) *pddl.Task { return bw }},
		{"blocksworld built-in", ForTask, func(*testing.T) *pddl.Task { return bw }},
		{"alfworld", ForTask, func(t *testing.T) *pddl.Task { return groundGame(t, alfworldGames(t)[0]) }},
	}
	param := regexp.MustCompile(`<[^>]+>`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := tt.task(t)
			lex := tt.lex(task)
			b, err := lex.Bind(task)
			if err != nil {
				t.Fatal(err)
			}
			forms := b.ActionForms()
			if !sort.StringsAreSorted(forms) || len(forms) == 0 || len(forms) > len(task.Params) {
				t.Fatalf("%d forms for %d schemas: %q", len(forms), len(task.Params), forms)
			}
			if lex == nil && !slices.Contains(forms, "stack <ob> <underob>") {
				t.Fatalf("default forms %q lack the domain's \"stack <ob> <underob>\"", forms)
			}
			var res []*regexp.Regexp
			for i, f := range forms {
				if i > 0 && forms[i-1] == f {
					t.Fatalf("duplicate form %q", f)
				}
				pat := param.ReplaceAllString(regexp.QuoteMeta(f), `\S+(?: \S+)*`)
				res = append(res, regexp.MustCompile("^"+pat+"$"))
			}
			for a := range task.Actions {
				text := b.Text(a)
				if !slices.ContainsFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(text) }) {
					t.Fatalf("%q fits no form of %q", text, forms)
				}
			}
		})
	}
}
