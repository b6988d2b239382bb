// Command nesy is the neurosymbolic planning server and its tools: PDDL
// validation and reference planning, constrained plan generation with
// language models, benchmarks, test-model generation and the HTTP server.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/nesy-dev/nesy/internal/hugepages"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/spf13/cobra"
)

// exitError carries a process exit status through cobra without printing
// anything more (the command has already reported what went wrong).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitCode is nil for 0, else the exitError with the code.
func exitCode(code int) error {
	if code != 0 {
		return exitError{code}
	}
	return nil
}

// writeJSON prints v as one line of JSON (the --json output of the
// commands; their result types always marshal).
func writeJSON(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintln(w, string(b))
}

// printInputError reports unreadable input on w: a PDDL error list with
// each error's file:line:col and source line, anything else on one line
// after the command's name.
func printInputError(w io.Writer, command string, err error) {
	var el pddl.ErrorList
	if errors.As(err, &el) {
		fmt.Fprint(w, el.Detail())
		return
	}
	fmt.Fprintf(w, "nesy %s: %v\n", command, err)
}

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
		newTrainCmd(),
		newMkmodelCmd(),
		newServeCmd(),
		newBenchCmd(),
	)
	return root
}

func main() {
	// Large engine buffers on transparent huge pages where the kernel
	// gives them on request: re-executes this binary once, with glibc's
	// malloc told to ask (NESY_HUGEPAGES=0 keeps the process as it is).
	if err := hugepages.Reexec(); err != nil {
		fmt.Fprintln(os.Stderr, "nesy: running without huge pages:", err)
	}
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
