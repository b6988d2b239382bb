package search

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nesy-dev/nesy/pddl"
)

// PortfolioResult is the outcome of Portfolio: the result of the member
// that ended the run, which member that was, and the work of all of them.
type PortfolioResult struct {
	Result
	// Member is the index of the member whose plan (or unsolvability
	// proof) is the result, -1 when none ended the run (every member hit
	// a limit). Result.Cost is the plan's cost counted as members[0]
	// counts costs, whatever the member.
	Member int
	// Members are the members' own results (plan-less), in order.
	Members []Result
}

// Portfolio runs the searches members describe on t at once, one goroutine
// each, and returns as soon as one finds a plan or proves the task
// unsolvable; the others are cancelled and waited for. When none does, the
// result is the first member's (its status says which limit ended it).
// Result's counters (Expanded, Generated, Evaluated, DeadEnds) add up every
// member's work; InitialH is the first member's.
//
// Greedy search on large tasks has heavy-tailed run times: which plateau its
// tie-breaking leads it into decides whether it finishes in a second or not
// in a minute, and a different configuration falls into different tails.
// Running diverse configurations side by side (Fast Downward's portfolios,
// LAMA's cost-ignoring first iteration) trades a core per member for the
// shortest of their run times. Members share the task (read-only during
// search) and nothing else; give each its own heuristic when a heuristic
// keeps per-search state (this package's do not).
func Portfolio(ctx context.Context, t *pddl.Task, members []Options) (PortfolioResult, error) {
	if len(members) == 0 {
		return PortfolioResult{}, fmt.Errorf("search: empty portfolio")
	}
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type outcome struct {
		i   int
		res Result
		err error
	}
	outs := make(chan outcome, len(members))
	var wg sync.WaitGroup
	for i, o := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := Solve(ctx, t, o)
			outs <- outcome{i, r, err}
		}()
	}
	go func() { wg.Wait(); close(outs) }()
	pr := PortfolioResult{Member: -1, Members: make([]Result, len(members))}
	var firstErr error
	for out := range outs {
		if out.err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("search: portfolio member %d: %w", out.i, out.err)
			}
			cancel()
			continue
		}
		pr.Members[out.i] = out.res
		pr.Members[out.i].Plan = nil
		if pr.Member < 0 && (out.res.Status == Solved || out.res.Status == Unsolvable) {
			pr.Member = out.i
			pr.Result = out.res
			cancel()
		}
	}
	if firstErr != nil {
		return PortfolioResult{}, firstErr
	}
	if pr.Member < 0 {
		pr.Result = pr.Members[0]
	}
	pr.Expanded, pr.Generated, pr.Evaluated, pr.DeadEnds = 0, 0, 0, 0
	for _, r := range pr.Members {
		pr.Expanded += r.Expanded
		pr.Generated += r.Generated
		pr.Evaluated += r.Evaluated
		pr.DeadEnds += r.DeadEnds
	}
	pr.InitialH = pr.Members[0].InitialH
	if pr.Status == Solved {
		pr.Cost = 0
		for _, a := range pr.Plan {
			pr.Cost += int(actionCost(t, a, members[0].UnitCost))
		}
	}
	pr.Elapsed = time.Since(start)
	return pr, nil
}
