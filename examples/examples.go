// Package examples holds the example tasks of the repository (the task
// `make demo` plans for), embedded so that programs can fall back on them
// when no dataset folder is at hand.
package examples

import _ "embed"

// BlocksDomain is examples/blocks/domain.pddl: a typed four-operator
// blocks world.
//
//go:embed blocks/domain.pddl
var BlocksDomain string

// BlocksProblem is examples/blocks/problem.pddl: reverse a tower of three
// blocks.
//
//go:embed blocks/problem.pddl
var BlocksProblem string
