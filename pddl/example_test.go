package pddl_test

import (
	"fmt"

	"github.com/nesy-dev/nesy/pddl"
)

func Example() {
	domain := `(define (domain lights) (:requirements :strips :negative-preconditions)
  (:predicates (on ?l) (wired ?l))
  (:action switch-on :parameters (?l) :precondition (and (wired ?l) (not (on ?l))) :effect (on ?l)))`
	problem := `(define (problem p) (:domain lights) (:objects a b)
  (:init (wired a))
  (:goal (on a)))`
	d, _, err := pddl.ParseDomain("lights.pddl", []byte(domain))
	if err != nil {
		fmt.Println(err)
		return
	}
	p, _, err := pddl.ParseProblem("p.pddl", []byte(problem))
	if err != nil {
		fmt.Println(err)
		return
	}
	task, err := pddl.Ground(d, p)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range task.Applicable(task.Init, nil) {
		fmt.Println("applicable:", task.Actions[a].String())
	}
	plan, _ := pddl.ParsePlan("plan.txt", []byte("(switch-on b)\n"))
	fmt.Println(task.Validate(plan).Error)
	plan, _ = pddl.ParsePlan("plan.txt", []byte("switch-on A\n"))
	r := task.Validate(plan)
	fmt.Println(r.Valid, r.GoalReached)
	// Output:
	// applicable: (switch-on a)
	// plan.txt:1:1: step 1 (switch-on b): precondition (wired b) is false (lights.pddl:3:58)
	// true true
}
