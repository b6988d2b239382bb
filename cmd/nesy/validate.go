package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/nesy-dev/nesy/pddl"
	"github.com/spf13/cobra"
)

// validateJSON is the --json output of nesy validate (the CLI contract).
type validateJSON struct {
	Valid       bool   `json:"valid"`
	GoalReached bool   `json:"goal_reached"`
	Steps       int    `json:"steps"`
	Error       string `json:"error"`
}

func newValidateCmd() *cobra.Command {
	var domain, problem, plan string
	var asJSON, warnings bool
	cmd := &cobra.Command{
		Use:   "validate --domain D --problem P --plan F [--json]",
		Short: "Check that a plan is executable from the initial state and reaches the goal",
		Long: `Validate executes a plan (one action per line, "(name a b)" or "name a b",
";" comments) on a PDDL task and reports the first step whose precondition
fails, naming the precondition. It exits 0 iff every step applies and the
goal holds at the end, 1 when the plan is invalid or misses the goal, and 2
when the input cannot be read (errors then carry file:line:col).

--problem may be an ALFWorld game.tw-pddl file; its embedded domain is used
when --domain is omitted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			report := func(res validateJSON, code int) error {
				if asJSON {
					writeJSON(out, res)
				}
				return exitCode(code)
			}
			inputError := func(err error) error {
				printInputError(errw, "validate", err)
				return report(validateJSON{Error: err.Error()}, 2)
			}
			if problem == "" || plan == "" {
				return inputError(errors.New("--problem and --plan are required"))
			}
			task, warns, err := pddl.LoadFiles(domain, problem)
			if warnings {
				for _, w := range warns {
					fmt.Fprintln(errw, w)
				}
			}
			if err != nil {
				return inputError(err)
			}
			src, err := os.ReadFile(plan)
			if err != nil {
				return inputError(fmt.Errorf("reading plan: %w", err))
			}
			steps, err := pddl.ParsePlan(plan, src)
			if err != nil {
				return inputError(err)
			}
			r := task.Validate(steps)
			res := validateJSON{Valid: r.Valid, GoalReached: r.GoalReached, Steps: r.Steps, Error: r.Error}
			switch {
			case !r.Valid:
				fmt.Fprintln(errw, "plan invalid:", r.Error)
			case !r.GoalReached:
				fmt.Fprintf(errw, "plan valid (%d steps) but %s\n", r.Steps, r.GoalError)
			case !asJSON:
				fmt.Fprintf(out, "plan valid, goal reached (%d steps, cost %d)\n", r.Steps, r.Cost)
			}
			if !r.GoalReached {
				return report(res, 1)
			}
			return report(res, 0)
		},
	}
	f := cmd.Flags()
	f.StringVar(&domain, "domain", "", "PDDL domain file (optional when --problem is a game.tw-pddl file)")
	f.StringVar(&problem, "problem", "", "PDDL problem file, or an ALFWorld game.tw-pddl file")
	f.StringVar(&plan, "plan", "", "plan file: one action per line")
	f.BoolVar(&asJSON, "json", false, `print {"valid":bool,"goal_reached":bool,"steps":N,"error":"..."}`)
	f.BoolVar(&warnings, "warnings", false, "print warnings about tolerated oddities of the PDDL")
	return cmd
}
