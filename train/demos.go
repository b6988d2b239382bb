// Package train makes planner demonstrations on training tasks and trains
// a small decoder-only llama transformer on them with gorgonia, exported as
// a GGUF the engine (package models) loads: nesy's own planning prior.
//
// It is the only package that imports gorgonia; the server and the planner
// never do (internal/archtest checks it).
package train

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl/search"
)

// Demo is one demonstration: the planning chat the decoder builds for a
// task (decoder.Messages) and the reference planner's plan, written as the
// decoder writes it (one action text per line).
type Demo struct {
	ID       string // the task
	Messages []models.Message
	Plan     []string // action texts, in order
}

// PlanText is the text the model writes for d: every action text followed
// by a newline.
func (d Demo) PlanText() string {
	var b strings.Builder
	for _, a := range d.Plan {
		b.WriteString(a + "\n")
	}
	return b.String()
}

// CheckTrainingSplit refuses a folder of evaluation tasks (ALFWorld's
// valid_unseen and valid_seen, PlanBench, a test split): demonstrations
// come from training tasks only.
func CheckTrainingSplit(dir string) error {
	for _, part := range strings.Split(filepath.ToSlash(filepath.Clean(dir)), "/") {
		switch part {
		case "valid_unseen", "valid_seen", "planbench-blocksworld", "test":
			return fmt.Errorf("train: %s is an evaluation split (%s): demonstrations come from training tasks only", dir, part)
		}
	}
	return nil
}

// DemoOptions configure ALFWorldDemos.
type DemoOptions struct {
	// Prompt are the prompt options (the goal in words is filled in per
	// task); they must be those the planner uses with the trained model.
	Prompt decoder.PromptOptions
	// Limit bounds the tasks (0: all).
	Limit int
	// Timeout bounds the reference planner per task (0: 30 s).
	Timeout time.Duration
}

// ALFWorldDemos solves the ALFWorld games under dir (a training split such
// as datasets/alfworld/valid_train) from their true initial states with the
// reference planner (GBFS over h_FF with preferred operators, as nesy solve)
// and returns one demonstration per solved game, in task order, and the IDs
// of the games it could not solve.
func ALFWorldDemos(ctx context.Context, dir string, o DemoOptions) ([]Demo, []string, error) {
	if err := CheckTrainingSplit(dir); err != nil {
		return nil, nil, err
	}
	env, err := envs.NewALFWorld(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("train: %w", err)
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	var demos []Demo
	var unsolved []string
	for i, info := range env.Tasks() {
		if o.Limit > 0 && i >= o.Limit {
			break
		}
		ep, err := env.Open(ctx, info.ID)
		if err != nil {
			return nil, nil, fmt.Errorf("train: %s: %w", info.ID, err)
		}
		task, lex := ep.Task(), ep.Lexicon()
		res, err := search.Solve(ctx, task, search.Options{PreferredOperators: true, Timeout: o.Timeout})
		if err != nil {
			return nil, nil, fmt.Errorf("train: solving %s: %w", info.ID, err)
		}
		if res.Status != search.Solved {
			unsolved = append(unsolved, info.ID)
			continue
		}
		popts := o.Prompt
		popts.Goal = ep.Goal()
		d := Demo{ID: info.ID, Messages: decoder.Messages(lex, popts)}
		for _, a := range res.Plan {
			d.Plan = append(d.Plan, lex.Text(a))
		}
		demos = append(demos, d)
	}
	return demos, unsolved, nil
}
