package train

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strings"
)

// Goal is a goal of one of ALFWorld's six task types on a game's scene:
// the further goals a training game's scene affords besides its own
// (SceneGoals), each written as ALFWorld writes its goals, in PDDL and in
// words.
type Goal struct {
	Type       string // the task type, e.g. "pick_heat_then_place_in_recep"
	Object     string // the object type, e.g. "AppleType"
	Receptacle string // the receptacle type (the lamp's object type for look_at_obj_in_light)
	Text       string // "Your task is to: put a hot apple in fridge."
	PDDL       string // the problem's (:goal ...) section
}

// The six ALFWorld task types.
const (
	pickPlace = "pick_and_place_simple"
	pickTwo   = "pick_two_obj_and_place"
	pickClean = "pick_clean_then_place_in_recep"
	pickHeat  = "pick_heat_then_place_in_recep"
	pickCool  = "pick_cool_then_place_in_recep"
	lookAt    = "look_at_obj_in_light"
)

// goalPhrasings are ALFWorld's two phrasings of each task type ({o}: the
// object type's word, {r}: the receptacle's or lamp's), as the training
// games' grammars write them.
var goalPhrasings = map[string][2]string{
	pickPlace: {"put a {o} in {r}.", "put some {o} on {r}."},
	pickTwo:   {"put two {o} in {r}.", "find two {o} and put them in {r}."},
	pickClean: {"put a clean {o} in {r}.", "clean some {o} and put it in {r}."},
	pickHeat:  {"put a hot {o} in {r}.", "heat some {o} and put it in {r}."},
	pickCool:  {"put a cool {o} in {r}.", "cool some {o} and put it in {r}."},
	lookAt:    {"look at {o} under the {r}.", "examine the {o} with the {r}."},
}

// goalTypes lists the task types in a fixed order.
var goalTypes = []string{pickPlace, pickTwo, pickClean, pickHeat, pickCool, lookAt}

// stateFact matches the init facts SceneGoals reads.
var stateFact = regexp.MustCompile(`\((objectType|receptacleType|pickupable|cleanable|heatable|coolable|toggleable|canContain)\s+([^\s()]+)(?:\s+([^\s()]+))?\s*\)`)

// typeWord is the word ALFWorld's goals use for a type ("DeskLampType":
// "desklamp").
func typeWord(t string) string { return strings.ToLower(strings.TrimSuffix(t, "Type")) }

// gameFile is the part of a game.tw-pddl file SceneGoals and WithGoal read
// and rewrite; other fields are kept as they are.
type gameFile map[string]json.RawMessage

// readGame parses a game.tw-pddl file's data and returns it with its PDDL
// problem.
func readGame(data []byte) (gameFile, string, error) {
	var g gameFile
	if err := json.Unmarshal(data, &g); err != nil {
		return nil, "", fmt.Errorf("train: reading the game: %w", err)
	}
	prob, err := g.str("pddl_problem")
	if err != nil {
		return nil, "", err
	}
	return g, prob, nil
}

func (g gameFile) str(key string) (string, error) {
	raw, ok := g[key]
	if !ok {
		return "", fmt.Errorf("train: the game has no %s", key)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("train: the game's %s: %w", key, err)
	}
	return s, nil
}

// SceneGoals returns every goal of the six task types that the scene of a
// game.tw-pddl file affords, in a fixed order: an object type with a
// pickupable instance (two for pick_two_obj_and_place; cleanable,
// heatable or coolable for those types, with a sink basin, microwave or
// fridge in the scene) and a receptacle type in the scene that can contain
// it (canContain), or a lamp for look_at_obj_in_light. Each is phrased in
// one of ALFWorld's two ways, chosen by rng.
func SceneGoals(data []byte, rng *rand.Rand) ([]Goal, error) {
	_, prob, err := readGame(data)
	if err != nil {
		return nil, err
	}
	init := prob
	if i := strings.Index(prob, "(:init"); i >= 0 {
		init = prob[i:]
	}
	if i := strings.Index(init, "(:goal"); i >= 0 {
		init = init[:i]
	}
	otype := map[string]string{} // object: its type
	rtypes := map[string]bool{}
	props := map[string]map[string]bool{} // property: objects
	contain := map[[2]string]bool{}       // (receptacle type, object type)
	for _, m := range stateFact.FindAllStringSubmatch(init, -1) {
		switch m[1] {
		case "objectType":
			otype[m[2]] = m[3]
		case "receptacleType":
			rtypes[m[3]] = true
		case "canContain":
			contain[[2]string{m[2], m[3]}] = true
		default:
			if props[m[1]] == nil {
				props[m[1]] = map[string]bool{}
			}
			props[m[1]][m[2]] = true
		}
	}
	count := map[string]map[string]int{} // property: object type: instances
	for o, t := range otype {
		for p, objs := range props {
			if objs[o] {
				if count[p] == nil {
					count[p] = map[string]int{}
				}
				count[p][t]++
			}
		}
	}
	sorted := func(m map[string]int, least int) []string {
		var out []string
		for k, n := range m {
			if n >= least {
				out = append(out, k)
			}
		}
		sort.Strings(out)
		return out
	}
	var recs []string
	for r := range rtypes {
		recs = append(recs, r)
	}
	sort.Strings(recs)
	var out []Goal
	add := func(typ, o, r string) {
		ph := goalPhrasings[typ][rng.IntN(2)]
		text := strings.NewReplacer("{o}", typeWord(o), "{r}", typeWord(r)).Replace(ph)
		out = append(out, Goal{Type: typ, Object: o, Receptacle: r, Text: "Your task is to: " + text, PDDL: goalPDDL(typ, o, r)})
	}
	place := func(typ string, objs []string, needs string) {
		if needs != "" && !rtypes[needs] {
			return
		}
		for _, o := range objs {
			for _, r := range recs {
				if contain[[2]string{r, o}] {
					add(typ, o, r)
				}
			}
		}
	}
	place(pickPlace, sorted(count["pickupable"], 1), "")
	place(pickTwo, sorted(count["pickupable"], 2), "")
	place(pickClean, sorted(count["cleanable"], 1), "SinkBasinType")
	place(pickHeat, sorted(count["heatable"], 1), "MicrowaveType")
	place(pickCool, sorted(count["coolable"], 1), "FridgeType")
	for _, lamp := range sorted(count["toggleable"], 1) {
		if lamp != "DeskLampType" && lamp != "FloorLampType" {
			continue
		}
		for _, o := range sorted(count["pickupable"], 1) {
			add(lookAt, o, lamp)
		}
	}
	return out, nil
}

// goalPDDL writes a goal as ALFWorld's problems do.
func goalPDDL(typ, o, r string) string {
	switch typ {
	case pickTwo:
		return fmt.Sprintf("(:goal (and (exists (?r - receptacle) (exists (?o1 - object) (and (objectType ?o1 %s) (receptacleType ?r %s) (inReceptacle ?o1 ?r) "+
			"(exists (?o2 - object) (and (not (= ?o1 ?o2)) (objectType ?o2 %s) (receptacleType ?r %s) (inReceptacle ?o2 ?r))))))))", o, r, o, r)
	case lookAt:
		return fmt.Sprintf("(:goal (and (exists (?ot - object ?r - receptacle ?a - agent ?l - location) (and (objectType ?ot %s) (toggleable ?ot) (isToggled ?ot) "+
			"(receptacleAtLocation ?r ?l) (atLocation ?a ?l) (inReceptacle ?ot ?r))) (exists (?o - object ?a - agent) (and (objectType ?o %s) (holds ?a ?o)))))", r, o)
	}
	prop, state := "", ""
	switch typ {
	case pickClean:
		prop, state = "(cleanable ?o) ", " (isClean ?o)"
	case pickHeat:
		prop, state = "(heatable ?o) ", " (isHot ?o)"
	case pickCool:
		prop, state = "(coolable ?o) ", " (isCool ?o)"
	}
	return fmt.Sprintf("(:goal (and (exists (?r - receptacle) (exists (?o - object) (and %s(objectType ?o %s) (receptacleType ?r %s)%s (inReceptacle ?o ?r))))))", prop, o, r, state)
}

// taskRule matches the grammar's #task# rule.
var taskRule = regexp.MustCompile(`("task"\s*:\s*\[\s*\{\s*"rhs"\s*:\s*")([^"]*)(")`)

// WithGoal returns the game.tw-pddl file data with its problem's goal and
// its grammar's task replaced by goal's.
func WithGoal(data []byte, goal Goal) ([]byte, error) {
	g, prob, err := readGame(data)
	if err != nil {
		return nil, err
	}
	start := strings.Index(prob, "(:goal")
	if start < 0 {
		return nil, fmt.Errorf("train: the game's problem has no goal")
	}
	end, depth := -1, 0
	for i := start; i < len(prob) && end < 0; i++ {
		switch prob[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				end = i + 1
			}
		}
	}
	if end < 0 {
		return nil, fmt.Errorf("train: the game's goal is not closed")
	}
	prob = prob[:start] + goal.PDDL + prob[end:]
	grammar, err := replaceTask(g, goal.Text)
	if err != nil {
		return nil, err
	}
	for k, v := range map[string]string{"pddl_problem": prob, "grammar": grammar} {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		g[k] = raw
	}
	out, err := json.Marshal(g)
	if err != nil {
		return nil, fmt.Errorf("train: writing the game: %w", err)
	}
	return out, nil
}

// replaceTask returns the game's grammar with the task rule's text
// replaced by text.
func replaceTask(g gameFile, text string) (string, error) {
	grammar, err := g.str("grammar")
	if err != nil {
		return "", err
	}
	q, err := json.Marshal(text) // the rule's text is a JSON string inside the grammar
	if err != nil {
		return "", fmt.Errorf("train: %w", err)
	}
	inner := string(q[1 : len(q)-1])
	if !taskRule.MatchString(grammar) {
		return "", fmt.Errorf("train: the game's grammar has no task rule")
	}
	done := false
	out := taskRule.ReplaceAllStringFunc(grammar, func(m string) string {
		if done {
			return m
		}
		done = true
		sub := taskRule.FindStringSubmatch(m)
		return sub[1] + inner + sub[3]
	})
	return out, nil
}
