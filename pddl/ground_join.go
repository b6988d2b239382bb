package pddl

import (
	"encoding/binary"
	"fmt"
)

// Joining: the bindings of a variant's parameters, found by joining its
// positive literals against the atoms reached so far, with step counting
// and context polls that bound the work.

func (g *grounder) fail(err error) {
	if g.err == nil {
		g.err = err
	}
}

// step counts one step of work for what (an action's name, "the goal",
// ...) and reports whether grounding may go on: false after the step
// budget is spent, the context has ended or another error. It polls the
// context every ctxEvery steps.
func (g *grounder) step(what string) bool {
	g.steps++
	if g.steps%ctxEvery == 0 && g.err == nil {
		if err := g.ctx.Err(); err != nil {
			g.fail(fmt.Errorf("grounding stopped in %s: %w", what, err))
			return false
		}
	}
	if g.steps > g.lim.MaxSteps && g.err == nil {
		g.fail(&LimitError{What: "grounding steps", Limit: float64(g.lim.MaxSteps), Count: int64(g.steps),
			Detail: "(at " + what + ")"})
		return false
	}
	return g.err == nil
}

// join calls emit with every binding of v's slots (params and existential
// variables) that satisfies its positive literals over the stored atoms,
// the slot types and its filters. emit must not keep b.
func (g *grounder) join(s *cschema, v *cvariant, nslots int, emit func(b []int32)) {
	b := make([]int32, nslots)
	for i := range b {
		b[i] = -1
	}
	var rec func(i int)
	rec = func(i int) {
		if g.err != nil {
			return
		}
		if i == len(v.joinOrder) {
			g.enumFree(s.a.Name, s.slotTypes, v, b, 0, emit)
			return
		}
		l := &v.lits[v.joinOrder[i]]
		cands := g.byPred[l.pred]
		for pos, t := range l.args {
			o := int32(-1)
			if !t.isVar() {
				o = t.obj()
			} else if b[t] >= 0 {
				o = b[t]
			}
			if o >= 0 {
				if c := g.byArg[l.pred][pos][o]; len(c) < len(cands) {
					cands = c
				}
			}
		}
		var buf [8]term
		for _, ai := range cands {
			if !g.step(s.a.Name) {
				return
			}
			args := g.atoms[ai].args
			newly := buf[:0]
			ok := true
			for pos, t := range l.args {
				x := args[pos]
				switch {
				case !t.isVar():
					ok = t.obj() == x
				case b[t] >= 0:
					ok = b[t] == x
				case !s.slotTypes[t].member[x]:
					ok = false
				default:
					b[t] = x
					newly = append(newly, t)
				}
				if !ok {
					break
				}
			}
			if ok {
				rec(i + 1)
			}
			for _, t := range newly {
				b[t] = -1
			}
		}
	}
	rec(0)
}

// enumFree binds the variant's slots that no positive literal bound, over
// their types, then applies the filters.
func (g *grounder) enumFree(what string, slotTypes []*typeSet, v *cvariant, b []int32, k int, emit func([]int32)) {
	for k < len(v.vars) && b[v.vars[k]] >= 0 {
		k++
	}
	if k == len(v.vars) {
		if g.passFilters(v, b) {
			emit(b)
		}
		return
	}
	slot := v.vars[k]
	for _, o := range slotTypes[slot].list {
		if !g.step(what) {
			return
		}
		b[slot] = o
		g.enumFree(what, slotTypes, v, b, k+1, emit)
	}
	b[slot] = -1
}

func (g *grounder) groundArgs(args []term, b []int32, dst []int32) []int32 {
	dst = dst[:0]
	for _, t := range args {
		if t.isVar() {
			dst = append(dst, b[t])
		} else {
			dst = append(dst, t.obj())
		}
	}
	return dst
}

func (g *grounder) passFilters(v *cvariant, b []int32) bool {
	var buf [8]int32
	for _, i := range v.filters {
		l := &v.lits[i]
		args := g.groundArgs(l.args, b, buf[:0])
		if l.pred == eqPred {
			if (args[0] == args[1]) == l.neg {
				return false
			}
			continue
		}
		// Negative static literal: false when the atom is in the initial state.
		if g.lookup(l.pred, args) >= 0 {
			return false
		}
	}
	return true
}

func bindingKey(b []int32) string {
	buf := make([]byte, 0, 4*len(b))
	for _, x := range b {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(x))
	}
	return string(buf)
}
