package pddl

// successorGen answers "which actions apply in s". Placeholder: a scan of all
// actions; to be replaced by an index that does not visit every action.
type successorGen struct {
	t *Task
}

func newSuccessorGen(t *Task) *successorGen { return &successorGen{t: t} }

func (g *successorGen) applicable(s State, buf []int) []int {
	for i := range g.t.Actions {
		if g.t.Actions[i].Pre.Holds(s) {
			buf = append(buf, i)
		}
	}
	return buf
}
