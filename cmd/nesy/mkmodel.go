package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newMkmodelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "mkmodel",
		Short: "not implemented yet",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("mkmodel: not implemented yet")
		},
	}
}
