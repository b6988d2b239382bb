// Command nesy is the neurosymbolic planning server and its tools: PDDL
// validation and reference planning, constrained plan generation with
// language models, benchmarks, test-model generation and the HTTP server.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// exitError carries a process exit status through cobra without printing
// anything more (the command has already reported what went wrong).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "nesy",
		Short:         "Executable-by-construction plan generation with language models",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newValidateCmd(),
		newSolveCmd(),
		newPlanCmd(),
		newMkmodelCmd(),
		newServeCmd(),
		newBenchCmd(),
	)
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		if e, ok := err.(exitError); ok {
			os.Exit(e.code)
		}
		fmt.Fprintln(os.Stderr, "nesy:", err)
		os.Exit(1)
	}
}
