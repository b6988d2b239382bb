package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newSolveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "solve",
		Short: "not implemented yet",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("solve: not implemented yet")
		},
	}
}
