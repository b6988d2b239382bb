package lexicon

import (
	"sort"
	"strconv"
	"strings"

	"github.com/nesy-dev/nesy/pddl"
)

// alfworldActions are ALFWorld's command templates, as the TextWorld grammar
// of every game.tw-pddl spells them (GotoLocation's list template binds the
// action's own receptacle, so it is "go to {r}", as TextWorld's replan
// writes it). "help" exists only in the standalone alfred.pddl.
var alfworldActions = map[string]string{
	"gotolocation":      "go to {r}",
	"openobject":        "open {r}",
	"closeobject":       "close {r}",
	"pickupobject":      "take {o} from {r}",
	"putobject":         "put {o} in/on {r}",
	"cleanobject":       "clean {o} with {r}",
	"heatobject":        "heat {o} with {r}",
	"coolobject":        "cool {o} with {r}",
	"toggleobject":      "use {o}",
	"sliceobject":       "slice {co} with {ko}",
	"look":              "look",
	"inventory":         "inventory",
	"examinereceptacle": "examine {r}",
	"examineobject":     "examine {o}",
	"help":              "help",
}

// alfworldFacts are sentences for ALFWorld facts (used for goal and belief
// descriptions; the game's own text comes from its TextWorld grammar).
var alfworldFacts = map[string]string{
	"atlocation":           "you are at {2}",
	"inreceptacle":         "{1} is in/on {2}",
	"opened":               "{1} is open",
	"holds":                "you are holding {2}",
	"holdsany":             "you are holding something",
	"isclean":              "{1} is clean",
	"ishot":                "{1} is hot",
	"iscool":               "{1} is cool",
	"issliced":             "{1} is sliced",
	"istoggled":            "{1} is toggled",
	"ison":                 "{1} is on",
	"objectatlocation":     "{1} is at {2}",
	"receptacleatlocation": "{1} is at {2}",
}

// virtualhomeActions are the commands of the EAI VirtualHome PDDL domain.
// The character is left out (there is one); sleep and wake_up take an
// object their effects ignore, so it is left out too.
var virtualhomeActions = map[string]string{
	"walk_towards":     "walk to {obj}",
	"walk_into":        "walk into {room}",
	"find":             "find {obj}",
	"sit":              "sit on {obj}",
	"standup":          "stand up",
	"grab":             "grab {obj}",
	"open":             "open {obj}",
	"close":            "close {obj}",
	"put_on":           "put {obj1} on {obj2}",
	"put_on_character": "put on {obj}",
	"put_inside":       "put {obj1} inside {obj2}",
	"switch_on":        "switch on {obj}",
	"switch_off":       "switch off {obj}",
	"drink":            "drink {obj}",
	"turn_to":          "turn to {obj}",
	"look_at":          "look at {obj}",
	"wipe":             "wipe {obj1} with {obj2}",
	"drop":             "drop {obj}",
	"read":             "read {obj}",
	"touch":            "touch {obj}",
	"lie":              "lie on {obj}",
	"pour":             "pour {obj1} into {obj2}",
	"type":             "type on {obj}",
	"watch":            "watch {obj}",
	"move":             "move {obj}",
	"wash":             "wash {obj}",
	"squeeze":          "squeeze {obj}",
	"plug_in":          "plug in {obj}",
	"plug_out":         "unplug {obj}",
	"cut":              "cut {obj}",
	"eat":              "eat {obj}",
	"sleep":            "sleep",
	"wake_up":          "wake up",
}

// virtualhomeFacts describe VirtualHome facts; the character is "you".
var virtualhomeFacts = map[string]string{
	"closed":       "the {1} is closed",
	"open":         "the {1} is open",
	"on":           "the {1} is on",
	"off":          "the {1} is off",
	"plugged_in":   "the {1} is plugged in",
	"plugged_out":  "the {1} is unplugged",
	"sitting":      "you are sitting",
	"lying":        "you are lying down",
	"clean":        "the {1} is clean",
	"dirty":        "the {1} is dirty",
	"obj_ontop":    "the {1} is on the {2}",
	"ontop":        "you are on the {2}",
	"on_char":      "you are wearing the {1}",
	"inside_room":  "the {1} is in the {2}",
	"obj_inside":   "the {1} is inside the {2}",
	"inside":       "you are in the {2}",
	"obj_next_to":  "the {1} is next to the {2}",
	"next_to":      "you are next to the {2}",
	"between":      "the {1} is between the {2} and the {3}",
	"facing":       "you are facing the {2}",
	"holds_rh":     "you hold the {2} in your right hand",
	"holds_lh":     "you hold the {2} in your left hand",
	"grabbable":    "the {1} can be grabbed",
	"can_open":     "the {1} can be opened",
	"has_switch":   "the {1} has a switch",
	"has_plug":     "the {1} has a plug",
	"sittable":     "the {1} can be sat on",
	"lieable":      "the {1} can be lain on",
	"drinkable":    "the {1} is drinkable",
	"eatable":      "the {1} is eatable",
	"readable":     "the {1} can be read",
	"recipient":    "the {1} can hold liquid",
	"pourable":     "the {1} can be poured",
	"containers":   "the {1} is a container",
	"surfaces":     "the {1} has a surface",
	"movable":      "the {1} can be moved",
	"cuttable":     "the {1} can be cut",
	"lookable":     "the {1} can be looked at",
	"clothes":      "the {1} is clothing",
	"hangable":     "the {1} can be hung",
	"person":       "the {1} is a person",
	"body_part":    "the {1} is a body part",
	"cover_object": "the {1} is a cover",
	"cream":        "the {1} is a cream",
	"has_paper":    "the {1} has paper",
}

// blocksworldActions and blocksworldFacts are PlanBench's Blocksworld text
// (configs/blocksworld.yaml: actions, predicates). Positional, so they fit
// the IPC "blocks" domain too.
var blocksworldActions = map[string]string{
	"pick-up":  "pick up the {1}",
	"put-down": "put down the {1}",
	"stack":    "stack the {1} on top of the {2}",
	"unstack":  "unstack the {1} from on top of the {2}",
}

var blocksworldFacts = map[string]string{
	"ontable":   "the {1} is on the table",
	"clear":     "the {1} is clear",
	"handempty": "the hand is empty",
	"holding":   "the hand is currently holding {1}",
	"on":        "the {1} is on top of the {2}",
}

// planbenchColors are PlanBench's encoded object names (a -> red block, ...).
var planbenchColors = []string{"red", "blue", "orange", "yellow", "white", "magenta", "black", "cyan", "green", "violet", "silver", "gold"}

// Domain kinds known to Builtin.
const (
	ALFWorld    = "alfworld"
	VirtualHome = "virtualhome"
	Blocksworld = "blocksworld"
)

// Kind returns the built-in lexicon kind for a PDDL domain name ("alfred" ->
// ALFWorld, "virtualhome" -> VirtualHome, "blocksworld-4ops", "blocksworld"
// and "blocks" -> Blocksworld), or "".
func Kind(domain string) string {
	switch strings.ToLower(domain) {
	case "alfred":
		return ALFWorld
	case "virtualhome":
		return VirtualHome
	case "blocksworld-4ops", "blocksworld", "blocks":
		return Blocksworld
	}
	return ""
}

// Builtin returns the action and fact templates of a built-in kind (see
// Kind), without display names, or nil for an unknown kind. The templates
// cover every schema of the standard domain file; ForTask keeps only those
// the task's domain has.
func Builtin(kind string) *Lexicon {
	var a, f map[string]string
	switch kind {
	case ALFWorld:
		a, f = alfworldActions, alfworldFacts
	case VirtualHome:
		a, f = virtualhomeActions, virtualhomeFacts
	case Blocksworld:
		a, f = blocksworldActions, blocksworldFacts
	default:
		return nil
	}
	return (&Lexicon{Actions: a, Facts: f}).Clone()
}

// ForTask returns the lexicon of a ground task: the built-in templates of its
// domain (see Kind) restricted to the schemas the task's domain declares,
// and display names for its objects (ALFWorld's TextWorld names,
// VirtualHome's names with spaces, PlanBench's colour names). For an unknown
// domain it returns an empty lexicon (default forms).
func ForTask(t *pddl.Task) *Lexicon {
	kind := Kind(t.DomainName)
	l := Builtin(kind)
	if l == nil {
		return &Lexicon{}
	}
	for schema := range l.Actions {
		if _, ok := schemaParams(t, schema); !ok {
			delete(l.Actions, schema)
		}
	}
	switch kind {
	case ALFWorld:
		l.Objects = AlfredNames(InitObjects(t))
	case VirtualHome:
		l.Objects = map[string]string{}
		for _, o := range t.Objects {
			l.Objects[o] = strings.ReplaceAll(o, "_", " ")
		}
	case Blocksworld:
		l.Objects = PlanBenchNames(t.Objects)
	}
	return l
}

// InitObjects returns the objects that occur in some fact of t's initial
// state (fluent or static), sorted: the entities TextWorld knows a game by.
func InitObjects(t *pddl.Task) []string {
	seen := map[string]bool{}
	for _, f := range t.Init.Facts() {
		for _, a := range t.Facts[f].Args {
			seen[a] = true
		}
	}
	for _, f := range t.Static {
		for _, a := range f.Args {
			seen[a] = true
		}
	}
	out := make([]string, 0, len(seen))
	for o := range seen {
		out = append(out, o)
	}
	sort.Strings(out)
	return out
}

// AlfredNames gives ALFWorld's display names to mangled ALFRED object names,
// as ALFWorld's AlfredDemangler does (without shuffling): the type is the
// text before the first "_bar_" (plus "basin" when the name contains
// "basin", so "sink_bar_..._bar_sinkbasin" is a "sinkbasin"), and the
// objects of one type, in sorted name order, are numbered from the count
// down to 1 (ALFWorld pops the numbers off the end of [1..count]). Names
// without "_bar_" (agent1, types) keep their name. ids should be every
// object of the game (see InitObjects): numbering depends on all of them.
func AlfredNames(ids []string) map[string]string {
	sorted := append([]string(nil), ids...)
	for i := range sorted {
		sorted[i] = strings.ToLower(sorted[i])
	}
	sort.Strings(sorted)
	typ := func(id string) (string, bool) {
		name, _, ok := strings.Cut(id, "_bar_")
		if !ok {
			return "", false
		}
		if strings.Contains(id, "basin") {
			name += "basin"
		}
		return name, true
	}
	count := map[string]int{}
	for _, id := range sorted {
		if n, ok := typ(id); ok {
			count[n]++
		}
	}
	out := make(map[string]string, len(sorted))
	for _, id := range sorted {
		n, ok := typ(id)
		if !ok {
			out[id] = id
			continue
		}
		out[id] = n + " " + strconv.Itoa(count[n])
		count[n]--
	}
	return out
}

// PlanBenchNames names single-letter blocks as PlanBench does (a -> "red
// block", ..., l -> "gold block"); other objects keep their name.
func PlanBenchNames(objs []string) map[string]string {
	out := make(map[string]string, len(objs))
	for _, o := range objs {
		if len(o) == 1 && o[0] >= 'a' && int(o[0]-'a') < len(planbenchColors) {
			out[o] = planbenchColors[o[0]-'a'] + " block"
		} else {
			out[o] = o
		}
	}
	return out
}
