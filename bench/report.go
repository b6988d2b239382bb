package bench

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/nesy-dev/nesy/explore"
	"gonum.org/v1/plot/vg"
)

// envTitle is an environment's name in tables.
func envTitle(env string) string {
	switch env {
	case "alfworld":
		return "ALFWorld"
	case "virtualhome":
		return "VirtualHome"
	case "blocksworld":
		return "Blocksworld"
	}
	return env
}

// methodLabel names a run's row: the method, with the mode.
func methodLabel(method, mode string) string { return method + " (" + mode + ")" }

// cell is a success rate as the tables show it: "90.3 (121/134)".
func cell(s *Summary) string {
	if s == nil || s.Tasks == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f (%d/%d)", 100*s.SuccessRate, s.Successes, s.Tasks)
}

// runReport is a run's report.md.
func runReport(s *Summary, recs []Record, plots []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# nesy bench: %s on %s (%s)\n\n", s.Method, envTitle(s.Env), s.Mode)
	suite := s.Suite
	if suite == "" {
		suite = "all"
	}
	fmt.Fprintf(&b, "Model `%s`, suite `%s`, %d tasks", s.Model, suite, s.Tasks)
	if s.Split != "" {
		fmt.Fprintf(&b, " of split `%s`", s.Split)
	}
	if s.PartiallyObservable {
		b.WriteString(", partially observable")
	} else {
		b.WriteString(", fully observable")
	}
	b.WriteString(".\n\n")

	b.WriteString("## Success (layout of the paper's Table 2: method x environment)\n\n")
	b.WriteString(Table([]*Summary{s}))
	fmt.Fprintf(&b, "\nSuccess rate %.1f%%, task-cluster bootstrap 95%% interval [%.1f, %.1f]. "+
		"Plans the environment carried out in full: %d/%d.\n",
		100*s.SuccessRate, 100*s.SuccessCI95[0], 100*s.SuccessCI95[1], s.PlanValid, s.Tasks)
	if s.Unsolvable > 0 {
		fmt.Fprintf(&b, "\n%d of the tasks cannot be solved from their true initial state (the goal is a dead end of the "+
			"delete relaxation); success on the %d others: %.1f%%.\n", s.Unsolvable, s.Tasks-s.Unsolvable, 100*s.SolvableRate)
	}
	if s.Explored > 0 {
		fmt.Fprintf(&b, "\nPhase I: exploration grounded the goal in %d/%d tasks, correctly (estimate right on the goal's "+
			"objects and its plan working in the true state) in %d/%d; %.1f exploration steps per task on average.\n",
			s.Ready, s.Explored, s.Grounded, s.Explored, s.ExploreSteps.Mean)
		if s.Grounded > 0 {
			fmt.Fprintf(&b, "Success conditional on correct grounding: %.1f%% (%d/%d).\n",
				100*float64(s.GroundedSuccesses)/float64(s.Grounded), s.GroundedSuccesses, s.Grounded)
		}
	}
	if s.GoalFacts != nil && s.AllFacts != nil {
		fmt.Fprintf(&b, "\n## Perception (%s)\n\nPerceived facts against the hidden truth: precision over the facts "+
			"believed true at the end of Phase I, recall over the true facts the environment showed.\n\n"+
			"| Facts | Precision | Recall | Believed | Correct | Shown | Recalled |\n|---|---:|---:|---:|---:|---:|---:|\n", s.Perception)
		for _, row := range []struct {
			name string
			pr   *explore.PR
		}{{"about the goal's objects", s.GoalFacts}, {"all", s.AllFacts}} {
			fmt.Fprintf(&b, "| %s | %.1f%% | %.1f%% | %d | %d | %d | %d |\n", row.name, 100*row.pr.Precision(),
				100*row.pr.Recall(), row.pr.Believed, row.pr.Correct, row.pr.Shown, row.pr.Recalled)
		}
	}
	fmt.Fprintf(&b, "\nInvalid actions attempted (commands the environment refused): %.0f in all, %.2f per task.\n",
		s.InvalidActions.Total, s.InvalidActions.Mean)

	if len(s.Types) > 1 {
		b.WriteString("\n## By task type\n\n| Type | Tasks | Success |\n|---|---:|---:|\n")
		for _, t := range s.Types {
			fmt.Fprintf(&b, "| %s | %d | %.1f (%d) |\n", t.Type, t.Tasks, 100*t.SuccessRate, t.Successes)
		}
	}

	failed := s.Tasks - s.Successes
	b.WriteString("\n## Failures by stage\n\n| Stage | Tasks | Share of failures |\n|---|---:|---:|\n")
	for _, st := range Stages {
		n := s.Failures[st]
		share := 0.0
		if failed > 0 {
			share = 100 * float64(n) / float64(failed)
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f%% |\n", stageTitle(st), n, share)
	}

	if len(s.Stops) > 0 {
		// Why planning ended: a budget ("time", "memory", ...) that ends
		// many tasks says the run was cut short, not that the method failed.
		b.WriteString("\n## Why planning ended\n\n| Stop | Tasks |\n|---|---:|\n")
		for _, st := range slices.Sorted(maps.Keys(s.Stops)) {
			fmt.Fprintf(&b, "| %s | %d |\n", st, s.Stops[st])
		}
	}

	b.WriteString("\n## Cost per task\n\n| | Mean | Median | Max | Total |\n|---|---:|---:|---:|---:|\n")
	for _, row := range []struct {
		name string
		st   Stat
		sec  bool
	}{
		{"prompt tokens", s.PromptTokens, false},
		{"generated tokens", s.GeneratedTokens, false},
		{"thinking tokens", s.ThinkingTokens, false},
		{"evaluated tokens", s.EvaluatedTokens, false},
		{"model calls", s.ModelCalls, false},
		{"images", s.Images, false},
		{"plan length", s.PlanLength, false},
		{"exploration steps", s.ExploreSteps, false},
		{"invalid actions attempted", s.InvalidActions, false},
		{"seconds", s.Seconds, true},
	} {
		f := "%.0f"
		if row.sec {
			f = "%.2f"
		}
		fmt.Fprintf(&b, "| %s | "+f+" | "+f+" | "+f+" | "+f+" |\n", row.name, row.st.Mean, row.st.Median, row.st.Max, row.st.Total)
	}

	if len(plots) > 0 {
		b.WriteString("\n## Plots\n\n")
		for _, p := range plots {
			fmt.Fprintf(&b, "![%s](%s)\n\n", strings.TrimSuffix(p, ".svg"), p)
		}
	}

	var errs []Record
	for _, r := range recs {
		if r.FailureStage == StageError {
			errs = append(errs, r)
		}
	}
	if len(errs) > 0 {
		b.WriteString("## Errors\n\n")
		for _, r := range errs {
			fmt.Fprintf(&b, "- `%s`: %s\n", r.Task, r.Error)
		}
	}
	return b.String()
}

func stageTitle(st string) string {
	switch st {
	case StageExploration:
		return "exploration / representation"
	case StageGrounding:
		return "grounding / semantics"
	case StageGoal:
		return "goal not reached"
	case StageUnsolvable:
		return "unsolvable task"
	case StageError:
		return "error"
	}
	return st
}

// Table renders runs as the paper's Table 2: one row per method (and
// mode), one column per environment, success rates in percent with the
// counts. Rows follow Methods and Modes; columns ALFWorld, VirtualHome,
// Blocksworld, then any other environment. When two runs share a row and a
// column the later one is shown.
func Table(runs []*Summary) string {
	var envs, rows []string
	cells := map[[2]string]*Summary{}
	for _, s := range runs {
		row := methodLabel(s.Method, s.Mode)
		if !slices.Contains(envs, s.Env) {
			envs = append(envs, s.Env)
		}
		if !slices.Contains(rows, row) {
			rows = append(rows, row)
		}
		cells[[2]string{row, s.Env}] = s
	}
	order := func(list []string, known []string) {
		sort.SliceStable(list, func(i, j int) bool {
			a, b := slices.Index(known, list[i]), slices.Index(known, list[j])
			if a < 0 {
				a = len(known)
			}
			if b < 0 {
				b = len(known)
			}
			return a < b
		})
	}
	order(envs, []string{"alfworld", "virtualhome", "blocksworld"})
	var known []string
	for _, m := range Methods {
		for _, md := range Modes {
			known = append(known, methodLabel(m, md))
		}
	}
	order(rows, known)
	var b strings.Builder
	b.WriteString("| Method |")
	for _, e := range envs {
		b.WriteString(" " + envTitle(e) + " |")
	}
	b.WriteString("\n|---|")
	for range envs {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + r + " |")
		for _, e := range envs {
			b.WriteString(" " + cell(cells[[2]string{r, e}]) + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// WriteTable writes a report over several run folders to dir: report.md
// (and report.html, plots inline) with the Table 2 layout and each run's cost, and success.svg (success per
// method, grouped by environment). It returns the summaries read.
func WriteTable(dir string, runs []string) ([]*Summary, error) {
	var sums []*Summary
	for _, r := range runs {
		s, err := WriteReport(r)
		if err != nil {
			return nil, err
		}
		sums = append(sums, s)
	}
	var b strings.Builder
	b.WriteString("# nesy bench: success (layout of the paper's Table 2)\n\n")
	b.WriteString(Table(sums))
	b.WriteString("\n## Runs\n\n| Run | Env | Method | Mode | Model | Tasks | Success | 95% CI | Invalid actions/task | Gen. tokens/task | Eval. tokens/task | s/task |\n" +
		"|---|---|---|---|---|---:|---:|---|---:|---:|---:|---:|\n")
	for i, s := range sums {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | `%s` | %d | %.1f | [%.1f, %.1f] | %.2f | %.0f | %.0f | %.2f |\n",
			runs[i], envTitle(s.Env), s.Method, s.Mode, s.Model, s.Tasks, 100*s.SuccessRate,
			100*s.SuccessCI95[0], 100*s.SuccessCI95[1], s.InvalidActions.Mean, s.GeneratedTokens.Mean, s.EvaluatedTokens.Mean, s.Seconds.Mean)
	}
	if len(sums) > 0 {
		if err := writeTablePlot(dir, sums); err != nil {
			return nil, err
		}
		b.WriteString("\n![success per method](" + SuccessPlot + ")\n")
	}
	return sums, writeReportFiles(dir, "nesy bench: success", b.String())
}

// writeTablePlot draws success per method, grouped by environment.
func writeTablePlot(dir string, sums []*Summary) error {
	var envs, rows []string
	val := map[[2]string]float64{}
	for _, s := range sums {
		row := methodLabel(s.Method, s.Mode)
		if !slices.Contains(envs, s.Env) {
			envs = append(envs, s.Env)
		}
		if !slices.Contains(rows, row) {
			rows = append(rows, row)
		}
		val[[2]string{row, s.Env}] = 100 * s.SuccessRate
	}
	labels := make([]string, len(envs))
	for i, e := range envs {
		labels[i] = envTitle(e)
	}
	values := make([][]float64, len(rows))
	for i, r := range rows {
		for _, e := range envs {
			values[i] = append(values[i], val[[2]string{r, e}])
		}
	}
	p, err := barPlot("success per method", "success (%)", labels, rows, values)
	if err != nil {
		return err
	}
	return saveSVG(p, filepath.Join(dir, SuccessPlot), 7*vg.Inch, 4.5*vg.Inch)
}
