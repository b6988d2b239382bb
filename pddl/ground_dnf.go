package pddl

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// Ground conditions in disjunctive normal form: preconditions, effect
// conditions and the goal, with the size bound that turns a blow-up into an
// error.

// gconj is a ground conjunction over atom ids.
type gconj struct {
	pos, neg []int32
}

// normalize sorts and deduplicates the literals; it reports false when the
// conjunction is contradictory.
func (c *gconj) normalize() bool {
	slices.Sort(c.pos)
	c.pos = slices.Compact(c.pos)
	slices.Sort(c.neg)
	c.neg = slices.Compact(c.neg)
	i, j := 0, 0
	for i < len(c.pos) && j < len(c.neg) {
		switch {
		case c.pos[i] == c.neg[j]:
			return false
		case c.pos[i] < c.neg[j]:
			i++
		default:
			j++
		}
	}
	return true
}

func (c gconj) key() string {
	buf := make([]byte, 0, 4*(len(c.pos)+len(c.neg))+4)
	for _, x := range c.pos {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(x))
	}
	buf = binary.LittleEndian.AppendUint32(buf, math.MaxUint32)
	for _, x := range c.neg {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(x))
	}
	return string(buf)
}

// dedupe removes repeated conjunctions (each already normalized).
func dedupe(cs []gconj) []gconj {
	if len(cs) < 2 {
		return cs
	}
	seen := make(map[string]bool, len(cs))
	out := cs[:0]
	for _, c := range cs {
		k := c.key()
		if !seen[k] {
			seen[k] = true
			out = append(out, c)
		}
	}
	return out
}

// dnfTooLarge is the error of a ground formula whose DNF exceeds the limit.
type dnfTooLarge struct{ limit int }

func (e dnfTooLarge) Error() string {
	return fmt.Sprintf("more than %d disjuncts in disjunctive normal form", e.limit)
}

// trueDNF returns the DNF of true, one empty conjunction. It is shared:
// callers read the DNFs groundDNF returns and never modify them in place.
func (g *grounder) trueDNF() []gconj {
	if g.dnfTrue == nil {
		g.dnfTrue = []gconj{{}}
	}
	return g.dnfTrue
}

// groundDNF grounds c under b into a DNF over fluent atom ids, folding static
// atoms (true iff in the initial state) and unreachable atoms (false). nil is
// false; a single empty conjunction is true.
func (g *grounder) groundDNF(slotTypes []*typeSet, c *cond, b []int32, limit int) ([]gconj, error) {
	switch c.kind {
	case cTrue:
		return g.trueDNF(), nil
	case cFalse:
		return nil, nil
	case cLit:
		var buf [8]int32
		args := g.groundArgs(c.lit.args, b, buf[:0])
		if c.lit.pred == eqPred {
			if (args[0] == args[1]) != c.lit.neg {
				return g.trueDNF(), nil
			}
			return nil, nil
		}
		id := g.lookup(c.lit.pred, args)
		if g.static[c.lit.pred] || id < 0 {
			if (id >= 0) != c.lit.neg {
				return g.trueDNF(), nil
			}
			return nil, nil
		}
		if c.lit.neg {
			return []gconj{{neg: []int32{id}}}, nil
		}
		return []gconj{{pos: []int32{id}}}, nil
	case cAnd, cForall:
		acc := []gconj{{}}
		var err error
		conjoin := func(sub *cond) bool {
			var d []gconj
			d, err = g.groundDNF(slotTypes, sub, b, limit)
			if err != nil || len(d) == 0 {
				acc = nil
				return false
			}
			if len(d) == 1 && len(d[0].pos)+len(d[0].neg) == 0 {
				return true
			}
			if len(acc)*len(d) > limit {
				err = dnfTooLarge{limit}
				g.blewUp = true
				return false
			}
			next := make([]gconj, 0, len(acc)*len(d))
			for _, x := range acc {
				for _, y := range d {
					z := gconj{pos: append(slices.Clone(x.pos), y.pos...), neg: append(slices.Clone(x.neg), y.neg...)}
					if z.normalize() {
						next = append(next, z)
					}
				}
			}
			acc = dedupe(next)
			return len(acc) > 0
		}
		if c.kind == cAnd {
			for _, s := range c.sub {
				if !conjoin(s) {
					break
				}
			}
		} else {
			g.forEach(slotTypes, c.vars, b, func() bool { return conjoin(c.sub[0]) && g.step("formula") })
		}
		if g.err != nil {
			return nil, g.err
		}
		return acc, err
	case cOr, cExists:
		var acc []gconj
		var err error
		disjoin := func(sub *cond) bool {
			var d []gconj
			d, err = g.groundDNF(slotTypes, sub, b, limit)
			if err != nil {
				return false
			}
			for _, x := range d {
				if len(x.pos)+len(x.neg) == 0 {
					acc = []gconj{{}}
					return false // true: stop
				}
			}
			acc = append(acc, d...)
			if len(acc) > limit {
				acc = dedupe(acc)
				if len(acc) > limit {
					err = dnfTooLarge{limit}
					g.blewUp = true
					return false
				}
			}
			return true
		}
		if c.kind == cOr {
			for _, s := range c.sub {
				if !disjoin(s) {
					break
				}
			}
		} else {
			g.forEach(slotTypes, c.vars, b, func() bool { return disjoin(c.sub[0]) && g.step("formula") })
		}
		if g.err != nil {
			return nil, g.err
		}
		return dedupe(acc), err
	}
	return nil, nil
}
