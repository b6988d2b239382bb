package explore

import "github.com/nesy-dev/nesy/pddl"

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
}

// Compare measures res against truth, the true state where exploration
// ended, of task (the episode's task).
func Compare(res *Result, task *pddl.Task, truth pddl.State) Grounding {
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
		if !about {
			continue
		}
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
	if res.Ready && res.ReadyPlan != nil {
		s := truth
		g.PlanWorks = true
		for _, a := range res.ReadyPlan {
			if a < 0 || a >= len(task.Actions) || !task.IsApplicable(s, a) {
				g.PlanWorks = false
				break
			}
			s = task.Apply(s, a)
		}
		g.PlanWorks = g.PlanWorks && task.GoalReached(s)
	}
	g.Correct = res.Ready && g.Wrong == 0 && (g.PlanWorks || res.ReadyPlan == nil && g.Believed == g.TrueFacts)
	return g
}
