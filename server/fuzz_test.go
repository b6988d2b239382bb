package server

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// FuzzPlanTask feeds PDDL text through what the plan handler does before
// any model is involved (request checks, parsing, the problem's names,
// bounded grounding, the solvability check, the lexicon): whatever the
// text, it must answer with a task or a 4xx, never a panic or a 500, and
// stay within the grounding limits. Run: go test ./server/ -run '^$'
// -fuzz FuzzPlanTask -fuzztime 10m.
func FuzzPlanTask(f *testing.F) {
	chainDomain, chainProblem := slowGroundingTask(40, 40)
	for _, seed := range [][2]string{
		{bwDomain, bwProblem},
		{bwDomain, bwShort},
		{bwUnsolvableDomain, bwUnsolvableProblem},
		{wideDomain6, wideProblem20},
		{chainDomain, chainProblem},
		{bwDomain, "(define (problem p) (:domain blocksworld-4ops) (:objects a a) (:init) (:goal (on a a)))"},
		{bwDomain, "(define (problem p) (:domain other) (:objects a b) (:init (handempty)) (:goal (exists (?x) (on ?x a))))"},
	} {
		f.Add(seed[0], seed[1])
	}
	s := &Server{opts: Options{MaxGroundActions: 10000, MaxGroundSteps: 2_000_000}.withDefaults(), envs: newEnvCache("")}
	f.Fuzz(func(t *testing.T, domain, problem string) {
		req := PlanRequest{Domain: domain, Problem: problem}
		// An input that runs this long is a bug the engine should record:
		// a panic here crashes the worker, which saves the input.
		tm := time.AfterFunc(30*time.Second, func() {
			buf := make([]byte, 1<<20)
			panic(fmt.Sprintf("one input ran over 30s:\n%s", buf[:runtime.Stack(buf, true)]))
		})
		defer tm.Stop()
		check := func(err error) {
			t.Helper()
			if ae := asAPIError(err); ae.Status >= http.StatusInternalServerError {
				t.Fatalf("%d %s: %s", ae.Status, ae.Code, ae.Message)
			}
		}
		if err := s.checkPlanRequest(&req); err != nil {
			check(err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		task, _, _, _, err := s.buildTask(ctx, &req)
		if err != nil {
			check(err)
			return
		}
		if n := len(task.Actions); n > s.opts.MaxGroundActions {
			t.Fatalf("%d ground actions, over the cap of %d", n, s.opts.MaxGroundActions)
		}
	})
}
