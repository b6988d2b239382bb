// Package pddl parses PDDL domains and problems (STRIPS and ADL: typing with
// either, constants, negative, disjunctive, existential and universal
// preconditions, equality, conditional effects, action costs and PDDL 2.2
// derived predicates), grounds
// them into a compact Task (facts as integers, states as bitsets, static
// facts folded away), generates successors, and validates plans.
//
// The stages, each one's output the next one's only input:
//
//	ParseDomain, ParseProblem   source -> lifted Domain, Problem (positions on every node)
//	Ground                      Domain + Problem -> Task (normalize.go, ground.go)
//	Task.Applicable, Task.Apply successor generation (successor.go, task.go)
//	ParsePlan, Task.Validate    plan text -> steps -> ValidationResult
//
// Derived predicates (:derived rules) are stratified when the domain is
// parsed (a rule set that negates a predicate it depends on is an error
// naming the predicates), grounded into Task.Axioms and evaluated stratum by
// stratum, with negation as failure, in Task.Init and in every state Apply
// makes, so A(s), the goal test and validation all see them. Conditions too
// large for disjunctive normal form (a universal or negated existential over
// a fluent disjunction, deep nesting) are compiled into new derived
// predicates named new-axiom@N, as Fast Downward's translator does.
//
// Errors are values with file:line:col positions, collected in an ErrorList;
// tolerated oddities of real data (a comma in a variable list, a predicate
// applied to arguments of undeclared types) are returned as Warnings.
// LoadFiles reads a domain and a problem from files, including ALFWorld's
// game.tw-pddl JSON files that hold both.
package pddl
