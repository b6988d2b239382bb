package explore

import (
	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/pddl"
)

// PR scores perceived facts against the hidden truth: Believed counts the
// facts the agent holds true at the end (its estimate), Correct those of
// them true in the true state (precision = Correct/Believed); Shown counts
// the true facts the environment showed the agent (its visibility rules,
// values when last shown), Recalled those of them the agent holds true
// (recall = Recalled/Shown).
type PR struct {
	Believed int `json:"believed"`
	Correct  int `json:"correct"`
	Shown    int `json:"shown"`
	Recalled int `json:"recalled"`
}

// Add returns the sum of two scores (micro-averaging).
func (p PR) Add(o PR) PR {
	return PR{p.Believed + o.Believed, p.Correct + o.Correct, p.Shown + o.Shown, p.Recalled + o.Recalled}
}

// Precision is Correct/Believed (1 when nothing is believed).
func (p PR) Precision() float64 { return ratio(p.Correct, p.Believed) }

// Recall is Recalled/Shown (1 when nothing was shown).
func (p PR) Recall() float64 { return ratio(p.Recalled, p.Shown) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}

// Grounding compares an exploration's estimate with the true state on the
// goal's objects. It is for evaluation (benchmarks, tests): the harness
// itself never sees the truth.
type Grounding struct {
	// GoalObjects is the number of objects the goal names (over all its
	// alternatives); GoalFacts the fluent facts naming one of them.
	GoalObjects int `json:"goal_objects"`
	GoalFacts   int `json:"goal_facts"`
	// TrueFacts counts the goal facts true in the true state; Believed those
	// of them the estimate holds true (recall = Believed/TrueFacts).
	TrueFacts int `json:"true_facts"`
	Believed  int `json:"believed"`
	// Wrong counts the goal facts the belief knows with the wrong value
	// (believed true but false, or seen false but true). Facts never
	// observed are unknown, not wrong.
	Wrong int `json:"wrong"`
	// PlanWorks says the plan found by the Ready check, executed from the
	// true state, applies at every step and reaches the goal.
	PlanWorks bool `json:"plan_works"`
	// Correct: Ready, nothing wrong, and the estimate's plan works in the
	// truth; when the Ready check found no plan (its search ran out of
	// expansions), the estimate must instead hold every true goal fact.
	Correct bool `json:"correct"`
	// Goal and All score the perceived facts on the goal's objects and on
	// all fluent facts.
	Goal PR `json:"goal_pr"`
	All  PR `json:"all_pr"`
}

// Compare measures res against truth, the true state where exploration
// ended, of task (the episode's task), and shown, what the environment
// showed the agent (envs.Episode.Belief).
func Compare(res *Result, task *pddl.Task, truth pddl.State, shown envs.Belief) Grounding {
	var g Grounding
	objs := map[string]bool{}
	for _, c := range task.Goal {
		for _, f := range c.Pos {
			for _, o := range task.Facts[f].Args {
				objs[o] = true
			}
		}
		for _, f := range c.Neg {
			for _, o := range task.Facts[f].Args {
				objs[o] = true
			}
		}
	}
	g.GoalObjects = len(objs)
	for id, f := range task.Facts {
		about := false
		for _, o := range f.Args {
			if objs[o] {
				about = true
				break
			}
		}
		var pr PR
		if res.Estimate != nil && res.Estimate.Has(id) {
			pr.Believed++
			if truth.Has(id) {
				pr.Correct++
			}
		}
		if shown.True != nil && shown.True.Has(id) {
			pr.Shown++
			if res.Estimate != nil && res.Estimate.Has(id) {
				pr.Recalled++
			}
		}
		g.All = g.All.Add(pr)
		if !about {
			continue
		}
		g.Goal = g.Goal.Add(pr)
		g.GoalFacts++
		tv := truth.Has(id)
		if tv {
			g.TrueFacts++
			if res.Estimate.Has(id) {
				g.Believed++
			}
		}
		if res.Belief.Known != nil && res.Belief.Known.Has(id) && res.Belief.True.Has(id) != tv {
			g.Wrong++
		}
	}
	if res.Ready && res.ReadyPlan != nil && res.Task != nil {
		s := truth
		g.PlanWorks = true
		for _, a := range res.ReadyPlan {
			id := -1
			if a >= 0 && a < len(res.Task.Actions) {
				act := &res.Task.Actions[a]
				for _, c := range task.LookupAction(act.Name, act.Args) {
					if task.IsApplicable(s, c) {
						id = c
						break
					}
				}
			}
			if id < 0 {
				g.PlanWorks = false
				break
			}
			s = task.Apply(s, id)
		}
		g.PlanWorks = g.PlanWorks && task.GoalReached(s)
	}
	g.Correct = res.Ready && g.Wrong == 0 && (g.PlanWorks || res.ReadyPlan == nil && g.Believed == g.TrueFacts)
	return g
}
