package server

import (
	"context"
	"errors"
)

// runPlanner runs the request's method on its model.
func (s *Server) runPlanner(ctx context.Context, job *planJob) (planOutcome, error) {
	return planOutcome{}, errors.New("planner not wired yet")
}
