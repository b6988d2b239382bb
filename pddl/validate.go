package pddl

// lifted is the part of the lifted model a Task keeps to explain validation
// failures in PDDL terms.
type lifted struct {
	d        *Domain
	p        *Problem
	types    *typeTree
	objIndex map[string]int32
	typeSets map[string]*typeSet
	static   map[string]bool
}
