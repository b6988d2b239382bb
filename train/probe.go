package train

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/nesy-dev/nesy/constraint"
	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/models"
)

// GoalProbe says whether a prior reads the goal's object: at the first
// "take" of ALFWorld demonstrations, where the place holds objects of two
// or more types, which object the prior finds most likely, teacher-forced
// on the planner's steps before it.
type GoalProbe struct {
	// Decisions are the first takes probed.
	Decisions int
	// Right are those where the prior's most likely object is of the type
	// the planner took (the goal's).
	Right int
	// Chance is the Right a prior choosing uniformly among the objects
	// there would score in expectation.
	Chance float64
	// Follows are the Decisions where, with the goal's object type replaced
	// in the prompt's goal lines by another type at the place (the first
	// other in alphabetical order), the prior's choice is of that type: a
	// prior that ignores the goal follows about as often as chance.
	Follows int
	// FollowChance is Follows' expectation for a uniform choice.
	FollowChance float64
}

var (
	probeTake = regexp.MustCompile(`^take (\S+) \d+ from (.+)$`)
	probeAt   = regexp.MustCompile(`^- (\S+ \d+) is in/on (.+)$`)
)

// ProbeGoal runs the probe of GoalProbe with lm (a prior trained on the
// compact prompt) over ALFWorld demonstrations (ALFWorldDemos with the
// compact prompt; others are skipped). Each candidate object's take line
// is scored by the sum of its tokens' log-probabilities.
func ProbeGoal(ctx context.Context, lm models.LM, demos []Demo) (GoalProbe, error) {
	var res GoalProbe
	for _, d := range demos {
		if d.Env != "" || len(d.Messages) != 1 || len(d.Prefix) > 0 {
			continue
		}
		// A prior trained with the goal trace reads " => left: ..." after
		// each action (forced tokens): the take is the text before it, and
		// the line a candidate is scored by ends at the place, where the
		// trace would begin, instead of at the newline.
		k, typ, place, end := -1, "", "", "\n"
		for i, a := range d.Plan {
			act, _, traced := strings.Cut(a, constraint.TraceSep)
			if m := probeTake.FindStringSubmatch(act); m != nil {
				k, typ, place = i, m[1], m[2]
				if traced {
					end = ""
				}
				break
			}
		}
		if k < 0 {
			continue
		}
		content := d.Messages[0].Content
		var objs []string
		types := map[string]int{}
		for _, line := range strings.Split(content, "\n") {
			if m := probeAt.FindStringSubmatch(line); m != nil && m[2] == place {
				objs = append(objs, m[1])
				types[strings.Fields(m[1])[0]]++
			}
		}
		if len(types) < 2 || types[typ] == 0 {
			continue
		}
		other := ""
		var names []string
		for t := range types {
			names = append(names, t)
		}
		sort.Strings(names)
		for _, t := range names {
			if t != typ {
				other = t
				break
			}
		}
		choose := func(content string, plan []string) (string, error) {
			p, err := decoder.RenderPrompt(lm, []models.Message{{Role: "user", Content: content}}, false)
			if err != nil {
				return "", err
			}
			prefix := p.Text + d.PrefixText() + lines(plan)
			base, err := lm.Tokenize(prefix, true)
			if err != nil {
				return "", err
			}
			best, bestScore := "", math.Inf(-1)
			for _, o := range objs {
				s, err := lineScore(ctx, lm, base, prefix+"take "+o+" from "+place+end)
				if err != nil {
					return "", err
				}
				if s > bestScore {
					best, bestScore = o, s
				}
			}
			return strings.Fields(best)[0], nil
		}
		got, err := choose(content, d.Plan[:k])
		if err != nil {
			return res, fmt.Errorf("train: probing %s: %w", d.ID, err)
		}
		swapped := swapGoalWord(content, typ, other)
		gotSwapped, err := choose(swapped, swapTraceWord(d.Plan[:k], typ, other))
		if err != nil {
			return res, fmt.Errorf("train: probing %s: %w", d.ID, err)
		}
		res.Decisions++
		res.Chance += float64(types[typ]) / float64(len(objs))
		res.FollowChance += float64(types[other]) / float64(len(objs))
		if got == typ {
			res.Right++
		}
		if gotSwapped == other {
			res.Follows++
		}
	}
	return res, nil
}

// swapGoalWord replaces the word from by to in the "Goal:" lines of a
// compact prompt, in capitals where the goal is (UpperGoal).
func swapGoalWord(content, from, to string) string {
	swap := wordSwapper(from, to)
	ls := strings.Split(content, "\n")
	for i, l := range ls {
		if strings.HasPrefix(l, "Goal:") {
			ls[i] = swap(l)
		}
	}
	return strings.Join(ls, "\n")
}

// swapTraceWord replaces the word from by to in the goal traces of plan
// lines (what follows constraint.TraceSep: the goal's facts still to
// reach), so that a swapped goal's plan so far reads as that goal's would.
func swapTraceWord(plan []string, from, to string) []string {
	swap := wordSwapper(from, to)
	out := make([]string, len(plan))
	for i, l := range plan {
		if act, tr, ok := strings.Cut(l, constraint.TraceSep); ok {
			l = act + constraint.TraceSep + swap(tr)
		}
		out[i] = l
	}
	return out
}

// wordSwapper returns a function that replaces the whole word from (any
// case) by to, in capitals where the word was not lower case.
func wordSwapper(from, to string) func(string) string {
	word := regexp.MustCompile(`(?i)\b` + regexp.QuoteMeta(from) + `\b`)
	return func(l string) string {
		return word.ReplaceAllStringFunc(l, func(m string) string {
			if m != strings.ToLower(m) {
				return strings.ToUpper(to)
			}
			return to
		})
	}
}

// lineScore is the log-probability lm gives the tokens of text after its
// first len(base) tokens (base: text's prefix, tokenized alone).
func lineScore(ctx context.Context, lm models.LM, base []int32, text string) (float64, error) {
	full, err := lm.Tokenize(text, true)
	if err != nil {
		return 0, err
	}
	if len(full) <= len(base) || len(base) == 0 || !slices.Equal(full[:len(base)], base) {
		return 0, fmt.Errorf("the prompt's tokens are not a prefix of its continuation's (%d and %d tokens)", len(base), len(full))
	}
	seq, err := lm.NewSequence()
	if err != nil {
		return 0, err
	}
	defer lm.Release(seq)
	out, err := lm.Eval(ctx, []models.EvalRequest{{Seq: seq, Tokens: full, AllLogits: true}})
	if err != nil {
		return 0, err
	}
	s := 0.0
	for i := len(base); i < len(full); i++ {
		row := out[0].Logits[i-1]
		mx := row[0]
		for _, v := range row {
			mx = max(mx, v)
		}
		z := 0.0
		for _, v := range row {
			z += math.Exp(float64(v - mx))
		}
		s += float64(row[full[i]]-mx) - math.Log(z)
	}
	return s, nil
}
