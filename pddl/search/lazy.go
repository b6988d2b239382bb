package search

import "github.com/nesy-dev/nesy/pddl/heuristic"

// lazy runs lazy greedy best-first search, as Fast Downward's
// lazy_greedy([h], preferred=[ff()]): the open lists hold (state, action)
// pairs keyed by the state's heuristic value; the successor is generated,
// checked for duplicates and the goal, and evaluated only when its pair is
// taken. With PreferredOperators the pairs of FF's helpful actions also go
// into a second list, the two lists are taken from in turn, and the
// preferred list gets 1000 extra turns whenever a state with a new best h
// is evaluated. Successors are pushed in increasing action id order,
// preferred ones first, so ties go to the preferred and then the first
// generated. With TypeBased every pair also goes into a type-based
// exploration list (typeOpen), taken from in turn with the others. The
// search is reproducible (the exploration list's random source is seeded).
func (s *searcher) lazy() Result {
	t := s.t
	root, _ := s.nodes.insert(t.Init, -1, -1, 0)
	if t.GoalReached(t.Init) {
		s.res.InitialH, _ = s.eval(t.Init)
		return s.solved(root)
	}
	h0, dead := s.evalLazy(root)
	s.res.InitialH = h0
	if dead {
		return s.end(Unsolvable)
	}
	s.pushSuccessors(root, h0)
	best := h0
	// Turns taken from the lists (see next).
	var turns [3]int
	for s.greedy.len() > 0 || s.greedyPref.len() > 0 || s.typesLen() > 0 {
		if st, ok := s.stop(); ok {
			return s.end(st)
		}
		e := s.next(&turns)
		parent, a := e.node, int(e.action)
		succ := t.Apply(s.nodes.state(parent), a)
		s.res.Generated++
		m, isNew := s.nodes.insert(succ, parent, int32(a), s.nodes.g[parent]+s.costs[a])
		if !isNew {
			continue
		}
		if t.GoalReached(succ) {
			return s.solved(m)
		}
		hv, dead := s.evalLazy(m)
		if dead {
			s.nodes.closed[m] = true
			continue
		}
		s.res.Expanded++
		if hv < best {
			best = hv
			turns[1] -= 1000
		}
		s.pushSuccessors(m, hv)
	}
	return s.end(Unsolvable)
}

// evalLazy evaluates node n's state and, with preferred operators, marks
// its preferred actions in s.preferred (one relaxed plan serves both when
// the heuristic is the preference's h_FF). These are Fast Downward's
// preferred operators (heuristic.FF.Preferred): an action whose
// conditional effect in the relaxed plan would not fire in the state is
// not preferred. Flashfill p02 needed this: with every applicable relaxed
// plan action preferred (FF's helpful actions), lazy search went past
// 830,000 expansions in 60 s without a plan; with FD's rule it finds a
// 37-step plan (as long as FD's) after 864,928 expansions (FD: 60,830).
func (s *searcher) evalLazy(n int32) (float64, bool) {
	st := s.nodes.state(n)
	if s.pref == nil {
		return s.eval(st)
	}
	for _, a := range s.helpful {
		s.preferred[a] = false
	}
	var hv float64
	var dead bool
	var plan []int
	if ff, ok := s.h.(*heuristic.FF); ok && ff == s.pref {
		s.res.Evaluated++
		plan, hv, dead = ff.Preferred(st, s.helpful[:0])
		if dead {
			s.res.DeadEnds++
			s.helpful = plan[:0]
			return hv, true
		}
	} else {
		if hv, dead = s.eval(st); dead {
			return hv, true
		}
		plan, _, _ = s.pref.Preferred(st, s.helpful[:0])
	}
	// Preferred operators are applicable but for negated derived
	// conditions, which the relaxation drops.
	s.helpful = plan[:0]
	for _, a := range plan {
		if s.t.IsApplicable(st, a) {
			s.helpful = append(s.helpful, a)
		}
	}
	for _, a := range s.helpful {
		s.preferred[a] = true
	}
	return hv, false
}

// pushSuccessors puts the pairs of node n and every action applicable in
// its state into the open lists under n's value hv: the preferred (helpful)
// actions first, and into the preferred list too.
func (s *searcher) pushSuccessors(n int32, hv float64) {
	s.nodes.closed[n] = true
	s.buf = s.t.Applicable(s.nodes.state(n), s.buf[:0])
	if s.types != nil {
		g := s.nodes.g[n]
		for _, a := range s.buf {
			s.types.push(typeKey{hv, g + s.costs[a]}, greedyEntry{n, int32(a)})
		}
	}
	if s.pref != nil {
		for _, a := range s.buf {
			if s.preferred[a] {
				s.greedyPref.push(hv, n, int32(a))
				s.greedy.push(hv, n, int32(a))
			}
		}
	}
	for _, a := range s.buf {
		if s.pref == nil || !s.preferred[a] {
			s.greedy.push(hv, n, int32(a))
		}
	}
}

// typesLen is the number of entries in the type-based list (0 when off).
func (s *searcher) typesLen() int {
	if s.types == nil {
		return 0
	}
	return s.types.len()
}
