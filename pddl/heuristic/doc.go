// Package heuristic estimates the cost of reaching a ground task's goal from a
// state: goal count, h_max, h_add, h_FF (with its relaxed plan), LM-cut, a
// blind heuristic and weighted mixes of these.
//
// # The relaxed task
//
// All heuristics but goal count and blind work on the delete relaxation of
// the pddl.Task, compiled once per task into flat arrays (see relaxed.go):
//
//   - all delete effects are dropped. A fact f used negatively (in a
//     precondition, an effect condition or the goal) gets a complement fact
//     not(f), which holds in a state without f, is added by the actions that
//     delete f (unless they unconditionally add it back) and replaces the
//     negative literal. This is the usual compilation of negative
//     conditions (as in Fast Downward): the compiled task is equivalent to
//     the original, so its delete relaxation still bounds h* from below,
//     and it sees traps the plain relaxation misses (VirtualHome's "open
//     needs the oven off", ALFWorld's "pick up needs empty hands").
//     Options.IgnoreNegative (":noneg") drops negative literals instead:
//     less informed, and on ALFWorld about 3-5x faster, because fewer
//     operators are relevant;
//   - each ground action becomes one relaxed operator with its precondition
//     (positive facts and complements) and its unconditional add effects; a
//     conditional effect whose condition is already implied by the
//     precondition (or empty in the relaxation, as ALFWorld's
//     "(when (not (isOn ?o)) (isOn ?o))" is under ":noneg") is merged into
//     that operator;
//   - an action with exactly one remaining conditional effect gets a second
//     operator whose precondition also holds the effect's condition and whose
//     adds are the unconditional and the conditional ones, at the action's
//     cost: this is exact for the relaxation;
//   - an action with two or more remaining conditional effects gets an
//     auxiliary fact "applied(a)" added by its main operator, and one
//     zero-cost operator per conditional effect with precondition
//     {applied(a)} plus the effect's condition. This compilation lets a
//     conditional effect fire after the action was applied once, so it is a
//     further relaxation: every heuristic value stays a lower bound of the
//     original relaxed task's h+ wherever it was (h_max, LM-cut) and
//     relaxed dead ends stay true dead ends;
//   - each axiom (Task.Axioms: derived predicates) becomes a zero-cost
//     operator from its body to its head that belongs to no action, as in
//     Fast Downward's relaxation heuristics: a relaxed plan goes through it
//     to the actions that achieve its body. By default derived facts get
//     no complement: a negated derived condition is relaxed to true, as
//     Fast Downward's relaxation heuristics do with
//     axioms=approximate_negative. Options.NegatedAxioms (":negax") is
//     its default, approximate_negative_cycles, instead: a derived fact v
//     used negatively gets a complement not(v) with one zero-cost negated
//     axiom per disjunct of the DNF of not(B_1) and ... and not(B_k) over
//     v's rules v <- B_i (the complements of their positive literals, the
//     facts of their negative ones), unless v is on a cycle of positive
//     dependencies or the DNF has more than 512 disjuncts (then not(v)
//     stays relaxed to true). Either way h_max stays admissible and
//     relaxed dead ends stay true dead ends. LM-cut refuses tasks with
//     axioms (New returns an error) rather than return a value whose
//     guarantees were not checked;
//   - the DNF goal becomes an artificial fact GOAL, reached by one zero-cost
//     operator per disjunct whose precondition is the disjunct's literals;
//     an artificial fact TRUE, holding in every state, is the precondition
//     of operators that have none;
//   - operators that duplicate an earlier one, or none of whose adds can
//     lead to GOAL (relevance analysis), are dropped.
//
// # Costs
//
// When the task declares action costs (Task.HasCosts) operators cost the
// action's Cost (which may be 0, e.g. ALFWorld's look and examine); otherwise
// every action costs 1. Options.UnitCost (or the ":unit" modifier of a name,
// see NewWithOptions) makes every action cost 1 regardless.
//
// # Concurrency
//
// A Heuristic built by New is safe for concurrent use by several goroutines:
// the compiled relaxed task is read-only and each Eval takes its scratch
// arrays from a sync.Pool.
package heuristic
