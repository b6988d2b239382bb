package main

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/pddl/heuristic"
	"github.com/nesy-dev/nesy/pddl/search"
)

// solveJSON is the --json output of nesy solve (the CLI contract: solved,
// plan, expanded, seconds; the rest are extras). Seconds is the whole
// command (parse, ground, heuristic set-up and search); SearchSeconds is
// the search alone, the denominator of evaluations per second.
type solveJSON struct {
	Solved        bool     `json:"solved"`
	Plan          []string `json:"plan"`
	Expanded      int      `json:"expanded"`
	Seconds       float64  `json:"seconds"`
	SearchSeconds float64  `json:"search_seconds"`
	Status        string   `json:"status"`
	Cost          int      `json:"cost"`
	Generated     int      `json:"generated"`
	Evaluated     int      `json:"evaluated"`
	Search        string   `json:"search"`
	Heuristic     string   `json:"heuristic"`
	// InitialH is the heuristic value of the initial state (absent when
	// the search did not evaluate it, or it is a dead end).
	InitialH *float64 `json:"initial_h,omitempty"`
	// Member names the portfolio member whose plan this is (--search
	// portfolio only).
	Member string `json:"portfolio_member,omitempty"`
	Error  string `json:"error,omitempty"`
}

// The --search portfolio value and the names of its members.
const (
	searchPortfolio = "portfolio"
	// memberLazy is Fast Downward's lazy_greedy([h], preferred=[ff()]).
	memberLazy = "lazy"
	// memberTypeUnit is lazy GBFS with preferred operators and type-based
	// exploration, ignoring action costs (LAMA's first iteration ignores
	// them too).
	memberTypeUnit = "lazy-type-unit"
)

func newSolveCmd() *cobra.Command {
	var (
		domain, problem, alg, hname          string
		asJSON, unit, warnings, prf, foralls bool
		typeBased                            bool
		seed                                 uint64
		maxExp, maxStates                    int
		weight, compile                      float64
		timeout                              time.Duration
	)
	cmd := &cobra.Command{
		Use:   "solve --domain D --problem P [--search gbfs|lazy|astar|portfolio] [--heuristic ff|add|max|lmcut|goalcount] [--json]",
		Short: "Find a plan with the symbolic reference planner (GBFS, lazy GBFS, A* or a portfolio)",
		Long: `Solve grounds the task and searches for a plan with greedy best-first search
(gbfs, the default), lazy greedy best-first search (lazy: states are evaluated
when taken from the open list, not when generated; with --preferred it is Fast
Downward's lazy_greedy([ff()], preferred=[ff()]), the stronger choice on large
ADL tasks), A* (astar; optimal with an admissible heuristic: max, lmcut,
blind) or a portfolio, and a planning heuristic.

--search portfolio runs two lazy searches with preferred operators side by
side, one thread each, and keeps the first plan: "lazy" (as --search lazy
--preferred) and "lazy-type-unit" (the same with --type-based exploration
and --unit-cost, the configuration of LAMA's cost-ignoring first iteration
plus exploration). Greedy search has heavy-tailed run times and the two fall
into different tails, so the portfolio solves what either solves, in about
the time of the faster, for twice the CPU (on one core they share it). Its
plan's cost counts the task's action costs unless --unit-cost is given;
--max-expansions and --max-states bound each member, --seed seeds the
exploration, and --json's expanded/evaluated add up both members' work.

Every plan is re-validated with the task's transition model (by action name,
as nesy validate does) before it is printed: one action per line,
"(name a b)", and a summary on stderr; with --json
{"solved":bool,"plan":[...],"expanded":N,"seconds":x,"status":...,"cost":N,...}.

Heuristics: ff, add, max, lmcut, goalcount, blind, or a weighted mix such as
"mix(1*ff+1*lmcut+0.5*goalcount)"; a ":unit" modifier (or --unit-cost) ignores
declared action costs, ":noneg" ignores negative preconditions (the plain
delete relaxation; faster, less informed), ":negax" gives negated derived
conditions negated axioms instead of relaxing them to true (Fast Downward's
approximate_negative_cycles; see pddl/heuristic). Tasks with axioms (PDDL 2.2
:derived predicates, or conditions too large for DNF, which grounding
compiles into derived predicates) work with ff, add, max, goalcount and
blind, which treat axioms as zero-cost relaxed rules; lmcut refuses them.
Like Fast Downward's translator, solve compiles conditions with more than
--compile-bound disjuncts (quantified preconditions such as miconic's) into
derived predicates rather than copying the action once per disjunct, which
leaves h_FF better informed; --compile-bound 0 keeps the DNF copies (what
plan, bench and serve ground), and lmcut keeps them by default.

--problem may be an ALFWorld game.tw-pddl file; its embedded domain is used
when --domain is omitted.

Exit status: 0 when solved, 1 when no plan was found (proved unsolvable, or a
limit was hit), 2 when the input cannot be read or the options are wrong.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			start := time.Now()
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			res := solveJSON{Plan: []string{}, Search: alg, Heuristic: hname}
			report := func(code int) error {
				res.Seconds = time.Since(start).Seconds()
				if asJSON {
					writeJSON(out, res)
				} else {
					for _, a := range res.Plan {
						fmt.Fprintln(out, a)
					}
					if res.Error == "" {
						fmt.Fprintf(errw, "; %s: %d steps, cost %d, %d expanded, %d evaluated, %.3f s (%s, %s)\n",
							res.Status, len(res.Plan), res.Cost, res.Expanded, res.Evaluated, res.Seconds, res.Search, res.Heuristic)
					}
				}
				return exitCode(code)
			}
			inputError := func(err error) error {
				printInputError(errw, "solve", err)
				res.Status, res.Error = "error", err.Error()
				return report(2)
			}
			if problem == "" {
				return inputError(errors.New("--problem is required"))
			}
			if alg != search.GBFS && alg != search.Lazy && alg != search.AStar && alg != searchPortfolio {
				return inputError(fmt.Errorf("--search %q: want %s, %s, %s or %s", alg, search.GBFS, search.Lazy, search.AStar, searchPortfolio))
			}
			// LM-cut cannot handle axioms: for it conditions stay in DNF
			// unless --compile-bound is given.
			if strings.Contains(hname, "lmcut") && !cmd.Flags().Changed("compile-bound") {
				compile = 0
			}
			task, warns, err := pddl.LoadFilesLimits(domain, problem, pddl.GroundLimits{CompileBound: compile, CompileForalls: foralls, RelevantAxioms: true})
			if warnings {
				for _, w := range warns {
					fmt.Fprintln(errw, w)
				}
			}
			if err != nil {
				return inputError(err)
			}
			h, err := heuristic.NewWithOptions(hname, task, heuristic.Options{UnitCost: unit})
			if err != nil {
				return inputError(err)
			}
			res.Heuristic = h.Name()
			opts := search.Options{
				Algorithm: alg, Heuristic: h, MaxExpansions: maxExp, MaxStates: maxStates, Timeout: timeout, UnitCost: unit, Weight: weight,
				PreferredOperators: prf, TypeBased: typeBased, Seed: seed,
			}
			var r search.Result
			if alg == searchPortfolio {
				hu, err := heuristic.NewWithOptions(hname, task, heuristic.Options{UnitCost: true})
				if err != nil {
					return inputError(err)
				}
				a, b := opts, opts
				a.Algorithm, a.PreferredOperators, a.TypeBased = search.Lazy, true, false
				b.Algorithm, b.PreferredOperators, b.TypeBased, b.UnitCost, b.Heuristic = search.Lazy, true, true, true, hu
				pr, err := search.Portfolio(cmd.Context(), task, []search.Options{a, b})
				if err != nil {
					return inputError(err)
				}
				r = pr.Result
				if pr.Member >= 0 {
					res.Member = []string{memberLazy, memberTypeUnit}[pr.Member]
				}
			} else {
				r, err = search.Solve(cmd.Context(), task, opts)
				if err != nil {
					return inputError(err)
				}
			}
			res.Status, res.Cost = r.Status.String(), r.Cost
			res.Expanded, res.Generated, res.Evaluated = r.Expanded, r.Generated, r.Evaluated
			res.SearchSeconds = r.Elapsed.Seconds()
			if r.Evaluated > 0 && !math.IsInf(r.InitialH, 1) {
				res.InitialH = &r.InitialH
			}
			if r.Status != search.Solved {
				return report(1)
			}
			// Re-validate by name with the task's transition model before
			// anything is printed.
			steps := make([]pddl.PlanStep, len(r.Plan))
			for i, a := range r.Plan {
				steps[i] = pddl.PlanStep{Name: task.Actions[a].Name, Args: task.Actions[a].Args}
			}
			if v := task.Validate(steps); !v.Valid || !v.GoalReached {
				return fmt.Errorf("solve: internal error: the plan found does not validate: %s%s", v.Error, v.GoalError)
			}
			res.Solved = true
			for _, st := range steps {
				res.Plan = append(res.Plan, st.String())
			}
			return report(0)
		},
	}
	f := cmd.Flags()
	f.StringVar(&domain, "domain", "", "PDDL domain file (optional when --problem is a game.tw-pddl file)")
	f.StringVar(&problem, "problem", "", "PDDL problem file, or an ALFWorld game.tw-pddl file")
	f.StringVar(&alg, "search", search.GBFS, "search algorithm: gbfs, lazy, astar or portfolio (lazy and lazy with type-based exploration and unit costs, side by side)")
	f.StringVar(&hname, "heuristic", "ff", "heuristic: ff, add, max, lmcut, goalcount, blind or mix(...)")
	f.BoolVar(&asJSON, "json", false, `print {"solved":bool,"plan":[...],"expanded":N,"seconds":x,...}`)
	f.BoolVar(&unit, "unit-cost", false, "count every action as cost 1 even when the domain declares action costs")
	f.Float64Var(&weight, "weight", 1, "astar only: f = g + weight*h (weighted A*; plans within weight times optimal with an admissible heuristic)")
	f.BoolVar(&prf, "preferred", false, "gbfs and lazy: favour successors reached by preferred operators (a boosted second open list): FF's helpful actions in gbfs, Fast Downward's preferred operators in lazy")
	f.BoolVar(&typeBased, "type-based", false, "gbfs and lazy: add type-based exploration (a third open list bucketed by (h, g), a random bucket's random entry taken in turn), which cuts greedy search's heavy tails")
	f.Uint64Var(&seed, "seed", 0, "seed of --type-based's random choices")
	f.IntVar(&maxExp, "max-expansions", 0, "stop after this many expansions (0: no limit)")
	f.IntVar(&maxStates, "max-states", 0, "stop once this many distinct states are stored, a memory bound (0: no limit)")
	f.DurationVar(&timeout, "timeout", 0, "stop after this long, e.g. 30s (0: no limit)")
	f.BoolVar(&warnings, "warnings", false, "print warnings about tolerated oddities of the PDDL")
	f.BoolVar(&foralls, "compile-foralls", false, "compile every universally quantified condition into a derived predicate, whatever its size, and leave disjunctions and existentials to action copies, as Fast Downward's translator shapes a task")
	f.Float64Var(&compile, "compile-bound", pddl.TranslateCompileBound, "compile conditions whose DNF may exceed this many disjuncts into derived predicates, as Fast Downward's translator does (0: expand into DNF, compiling only past 4096; lmcut defaults to 0)")
	return cmd
}
