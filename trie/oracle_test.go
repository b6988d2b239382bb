package trie

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// vocabulary is a test vocabulary: decoded token texts, special flags and end
// tokens, as NewIndex takes them.
type vocabulary struct {
	name    string
	text    [][]byte
	special []bool
	end     []int32
}

// bruteAllowed is the oracle: it checks every token of the vocabulary
// against the step texts by plain byte comparison, sharing no code with the
// tries. It returns, for each allowed token, the full step text it leads to
// (partial+text), and "" for end tokens.
func bruteAllowed(v vocabulary, spec Spec, partial []byte) map[int32]string {
	sep := spec.Separator
	if sep == "" {
		sep = "\n"
	}
	var rest []string // the step texts that start with partial, minus partial
	for _, a := range spec.Actions {
		if t := a + sep; strings.HasPrefix(t, string(partial)) {
			rest = append(rest, t[len(partial):])
		}
	}
	if spec.EndAllowed && spec.End != "" && strings.HasPrefix(spec.End, string(partial)) {
		rest = append(rest, spec.End[len(partial):])
	}
	slices.Sort(rest)
	isEnd := map[int32]bool{}
	for _, id := range v.end {
		isEnd[id] = true
	}
	var first [256]bool // first bytes of rest: a cheap first filter
	for _, r := range rest {
		if r != "" {
			first[r[0]] = true
		}
	}
	got := map[int32]string{}
	for id, t := range v.text {
		if len(t) == 0 || !first[t[0]] || v.special[id] || isEnd[int32(id)] {
			continue
		}
		// Is t a prefix of some r in rest? The smallest r >= t is the only
		// candidate.
		i, _ := slices.BinarySearch(rest, string(t))
		if i < len(rest) && strings.HasPrefix(rest[i], string(t)) {
			got[int32(id)] = string(partial) + string(t)
		}
	}
	if len(partial) == 0 && spec.EndAllowed {
		for _, id := range v.end {
			got[id] = ""
		}
	}
	return got
}

// bruteCompleted returns the lowest action index whose step text is s.
func bruteCompleted(spec Spec, s string) (int, bool) {
	sep := spec.Separator
	if sep == "" {
		sep = "\n"
	}
	for i, a := range spec.Actions {
		if a+sep == s {
			return i, true
		}
	}
	return -1, false
}

// checkAllowed compares Index.AllowedAfter with the oracle for one partial
// step text and checks every reported next node.
func checkAllowed(t *testing.T, x *Index, v vocabulary, at *ActionTrie, spec Spec, partial []byte, set *Set) {
	t.Helper()
	node := x.AllowedAfter(at, partial, set)
	want := bruteAllowed(v, spec, partial)
	ctx := func() string {
		return fmt.Sprintf("%s: actions %q end %v/%q partial %q", v.name, spec.Actions, spec.EndAllowed, spec.End, partial)
	}
	if len(set.IDs) != len(want) || len(set.Next) != len(set.IDs) || set.count() != len(want) {
		var extra, missing []string
		for _, id := range set.IDs {
			if _, ok := want[id]; !ok {
				extra = append(extra, fmt.Sprintf("%d:%q", id, v.text[id]))
			}
		}
		for id := range want {
			if !set.Has(id) {
				missing = append(missing, fmt.Sprintf("%d:%q", id, v.text[id]))
			}
		}
		t.Fatalf("%s\ngot %d tokens (bits %d), want %d\nextra %v\nmissing %v", ctx(), len(set.IDs), set.count(), len(want), extra, missing)
	}
	if node == NoNode {
		if len(want) != 0 {
			t.Fatalf("%s: walk failed but oracle allows %d tokens", ctx(), len(want))
		}
		return
	}
	// Text tokens come sorted by (text, id), end tokens last.
	for i := 1; i < len(set.IDs); i++ {
		a, b := set.IDs[i-1], set.IDs[i]
		if x.IsEnd(b) {
			continue
		}
		if x.IsEnd(a) || bytes.Compare(v.text[a], v.text[b]) > 0 || bytes.Equal(v.text[a], v.text[b]) && a > b {
			t.Fatalf("%s: IDs out of order at %d: %d %q, %d %q", ctx(), i, a, v.text[a], b, v.text[b])
		}
	}
	var buf []byte
	for i, id := range set.IDs {
		full, ok := want[id]
		if !ok || !set.Has(id) {
			t.Fatalf("%s: token %d %q allowed, oracle disagrees", ctx(), id, v.text[id])
		}
		next := set.Next[i]
		if full == "" { // end token
			if next != EndToken {
				t.Fatalf("%s: end token %d leads to %d", ctx(), id, next)
			}
			continue
		}
		if buf = at.Text(next, buf[:0]); string(buf) != full {
			t.Fatalf("%s: token %d %q leads to node %d spelling %q, want %q", ctx(), id, v.text[id], next, buf, full)
		}
		a, ok := at.Completed(next)
		wa, wok := bruteCompleted(spec, full)
		if a != wa || ok != wok {
			t.Fatalf("%s: token %d %q: Completed = %d %v, want %d %v", ctx(), id, v.text[id], a, ok, wa, wok)
		}
		if ok && !at.IsLeaf(next) {
			t.Fatalf("%s: completed node %q has children", ctx(), full)
		}
		if at.IsEnd(next) != (spec.EndAllowed && spec.End != "" && full == spec.End) {
			t.Fatalf("%s: token %d %q: IsEnd = %v", ctx(), id, v.text[id], at.IsEnd(next))
		}
	}
}

// randomPartial returns a partial step text: usually a prefix of a step text
// cut at any byte (also inside a UTF-8 character), sometimes a prefix of
// nothing.
func randomPartial(r *rand.Rand, spec Spec) []byte {
	sep := spec.Separator
	if sep == "" {
		sep = "\n"
	}
	switch k := r.IntN(20); {
	case k == 0:
		return nil
	case k == 1:
		return []byte("zz\xff not an action")
	case k == 2 && len(spec.Actions) > 0:
		// A prefix of an action with a wrong byte appended.
		a := spec.Actions[r.IntN(len(spec.Actions))]
		return append([]byte(a[:r.IntN(len(a))]), '#')
	}
	targets := []string{}
	for _, a := range spec.Actions {
		targets = append(targets, a+sep)
	}
	if spec.EndAllowed && spec.End != "" {
		targets = append(targets, spec.End)
	}
	if len(targets) == 0 {
		return nil
	}
	tgt := targets[r.IntN(len(targets))]
	return []byte(tgt[:r.IntN(len(tgt)+1)])
}

// ALFWorld-like vocabulary of names, with non-ASCII display names mixed in.
var (
	testReceptacles = []string{"countertop", "cabinet", "drawer", "fridge", "microwave", "sinkbasin", "stoveburner",
		"shelf", "sidetable", "diningtable", "garbagecan", "coffeemachine", "toaster", "dresser", "bed", "sofa",
		"armchair", "desk", "safe", "bathtubbasin", "toilet", "towelholder", "cart", "Kühlschrank", "冰箱", "étagère"}
	testObjects = []string{"apple", "mug", "knife", "butterknife", "spatula", "potato", "tomato", "lettuce", "egg",
		"bread", "cup", "plate", "bowl", "pan", "pot", "kettle", "fork", "spoon", "saltshaker", "soapbottle",
		"dishsponge", "creditcard", "cellphone", "keychain", "pen", "pencil", "book", "alarmclock", "vase",
		"laptop", "remotecontrol", "pillow", "towel", "candle", "cloth", "spraybottle", "desklamp",
		"café", "tasse", "čajník", "苹果", "ナイフ", "🍎"}
)

// alfworldActions generates an ALFWorld-like state's applicable action
// strings: about n of them (duplicates possible).
func alfworldActions(r *rand.Rand, n int) []string {
	var out []string
	recep := func() string {
		return fmt.Sprintf("%s %d", testReceptacles[r.IntN(len(testReceptacles))], 1+r.IntN(12))
	}
	obj := func() string {
		return fmt.Sprintf("%s %d", testObjects[r.IntN(len(testObjects))], 1+r.IntN(4))
	}
	for len(out) < n {
		switch r.IntN(12) {
		case 0, 1, 2:
			out = append(out, "go to "+recep())
		case 3, 4:
			out = append(out, "take "+obj()+" from "+recep())
		case 5, 6:
			prep := "in"
			if r.IntN(2) == 0 {
				prep = "on"
			}
			out = append(out, "put "+obj()+" "+prep+" "+recep())
		case 7:
			out = append(out, "open "+recep(), "close "+recep())
		case 8:
			out = append(out, "examine "+recep(), "examine "+obj())
		case 9:
			verb := []string{"heat", "cool", "clean", "slice"}[r.IntN(4)]
			out = append(out, verb+" "+obj()+" with "+recep())
		case 10:
			out = append(out, "use "+obj())
		default:
			out = append(out, []string{"inventory", "look", "go to countertop 1", "go to countertop 10"}[r.IntN(4)])
		}
	}
	return out[:n]
}

// randomSpec builds a random state for the oracle tests.
func randomSpec(r *rand.Rand, maxActions int) Spec {
	s := Spec{Actions: alfworldActions(r, 1+r.IntN(maxActions))}
	switch r.IntN(4) {
	case 0:
		s.EndAllowed = true
	case 1:
		s.EndAllowed, s.End = true, "\n"
	case 2:
		s.EndAllowed, s.End = true, "done\n"
	}
	if r.IntN(10) == 0 {
		s.Separator = "; "
		if s.End == "done\n" {
			s.End = "done; "
		}
	}
	return s
}

// generatedVocabulary is a small vocabulary built to stress the edge cases:
// all 256 single bytes, random strings over an alphabet of letters, digits,
// spaces, separators and UTF-8 pieces (whole characters, and their first
// bytes and last bytes on their own), pieces of real action strings
// (including across the separator: "1\ngo", "\n\n"), duplicate texts under
// different ids, special tokens whose text would match, empty texts, and end
// tokens.
func generatedVocabulary(r *rand.Rand, n int) vocabulary {
	v := vocabulary{name: "generated"}
	add := func(s string, special bool) {
		v.text = append(v.text, []byte(s))
		v.special = append(v.special, special)
	}
	for b := 0; b < 256; b++ {
		add(string([]byte{byte(b)}), false)
	}
	alphabet := []string{"a", "e", "o", "t", "g", "n", " ", " ", "1", "0", "\n", ";", "é", "中", "\xc3", "\xa9", "\xe5", "\x86\xb0", "🍎"[:2], "🍎"[2:]}
	steps := alfworldActions(r, 200)
	for len(v.text) < n {
		switch r.IntN(6) {
		case 0, 1:
			var sb strings.Builder
			for k := 1 + r.IntN(6); k > 0; k-- {
				sb.WriteString(alphabet[r.IntN(len(alphabet))])
			}
			add(sb.String(), false)
		case 2, 3:
			// A substring of an action text, possibly crossing into the
			// separator and the next action.
			s := steps[r.IntN(len(steps))] + "\n" + steps[r.IntN(len(steps))]
			i := r.IntN(len(s))
			j := i + 1 + r.IntN(min(12, len(s)-i))
			add(s[i:j], false)
		case 4:
			add(string(v.text[r.IntN(len(v.text))]), false) // duplicate text
		default:
			s := steps[r.IntN(len(steps))]
			add(s[:1+r.IntN(len(s))], r.IntN(3) == 0) // a prefix, sometimes special
		}
	}
	add("", false)
	add("go", true)
	add("<eos>", true)
	add("\n", false) // end token with plain text: must not count as text
	v.end = []int32{int32(len(v.text) - 2), int32(len(v.text) - 1)}
	return v
}

func newIndexT(t testing.TB, v vocabulary) *Index {
	t.Helper()
	x, err := NewIndex(v.text, v.special, IndexOptions{EndTokens: v.end})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestAllowedMatchesBruteForceGenerated compares Allowed with the oracle on
// generated vocabularies and thousands of random states and partial steps.
func TestAllowedMatchesBruteForceGenerated(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var set Set
	for vi := 0; vi < 4; vi++ {
		v := generatedVocabulary(r, 2000+r.IntN(3000))
		x := newIndexT(t, v)
		for state := 0; state < 800; state++ {
			spec := randomSpec(r, 60)
			at, err := NewActionTrie(spec)
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k < 4; k++ {
				checkAllowed(t, x, v, at, spec, randomPartial(r, spec), &set)
			}
		}
	}
}

// TestAllowedNeverStuck decodes random actions token by token, choosing a
// random allowed token at each step, and checks that the walk always
// reaches a completed action (a vocabulary with every single byte never
// leaves the decoder without a choice), and that the completed action is
// the lowest index spelled as decoded.
func TestAllowedNeverStuck(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	v := generatedVocabulary(r, 3000)
	x := newIndexT(t, v)
	var set Set
	var text []byte
	for state := 0; state < 300; state++ {
		spec := randomSpec(r, 80)
		at, err := NewActionTrie(spec)
		if err != nil {
			t.Fatal(err)
		}
		node := Root
		text = text[:0]
		for steps := 0; ; steps++ {
			if steps > 1000 {
				t.Fatalf("no completion after %d tokens: %q", steps, text)
			}
			x.Allowed(at, node, &set)
			if set.Len() == 0 {
				t.Fatalf("stuck after %q in %q", text, spec.Actions)
			}
			i := r.IntN(set.Len())
			node = set.Next[i]
			if node == EndToken || at.IsEnd(node) {
				break
			}
			text = append(text, v.text[set.IDs[i]]...)
			if a, ok := at.Completed(node); ok {
				s := strings.TrimSuffix(string(text), at.Separator())
				if first := slices.Index(spec.Actions, s); first != a {
					t.Fatalf("completed %q as action %d, lowest index spelled so is %d", text, a, first)
				}
				if b, ok := at.Resolve(s); !ok || b != a {
					t.Fatalf("Resolve(%q) = %d %v, want %d", s, b, ok, a)
				}
				break
			}
		}
	}
}

// TestIndexQueriesMatchBruteForce checks WithPrefix and PrefixesOf against a
// scan of the vocabulary.
func TestIndexQueriesMatchBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	v := generatedVocabulary(r, 3000)
	x := newIndexT(t, v)
	steps := alfworldActions(r, 100)
	for k := 0; k < 500; k++ {
		s := steps[r.IntN(len(steps))] + "\n"
		s = s[r.IntN(len(s)):]
		s = s[:r.IntN(len(s)+1)]
		var wantWith, wantPre []int32
		for id, tx := range v.text {
			if !x.IsText(int32(id)) {
				continue
			}
			if bytes.HasPrefix(tx, []byte(s)) {
				wantWith = append(wantWith, int32(id))
			}
			if bytes.HasPrefix([]byte(s), tx) {
				wantPre = append(wantPre, int32(id))
			}
		}
		gotWith := slices.Clone(x.WithPrefix([]byte(s)))
		gotPre := x.PrefixesOf([]byte(s), nil)
		slices.Sort(gotWith)
		slices.Sort(gotPre)
		if !slices.Equal(gotWith, wantWith) || !slices.Equal(gotPre, wantPre) {
			t.Fatalf("%q: WithPrefix %v want %v; PrefixesOf %v want %v", s, gotWith, wantWith, gotPre, wantPre)
		}
	}
}
