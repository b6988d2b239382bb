package bench

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/explore"
	"github.com/nesy-dev/nesy/mcts"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/planner"
)

// small returns a CI-sized configuration.
// small is a one-task run bounded by work (simulations, tokens, actions,
// steps), not by time: the seconds budget is only a backstop, generous so
// that a loaded machine still reads the prompt within it.
func small(t *testing.T, env envs.Env, method, mode string) Config {
	return Config{
		Env: env, Method: method, Mode: mode, Model: tinyModel(t), ModelName: "tiny-test",
		Out: t.TempDir(), Limit: 1, Seconds: 300, Simulations: 24, MaxActions: 8, MaxSteps: 4, MaxTokens: 96,
		Explore: explore.Options{MaxSteps: 30},
	}
}

func TestRunMethods(t *testing.T) {
	cases := []struct{ env, mode, method string }{
		{"blocksworld", ModeTrueState, MethodDirect},
		{"blocksworld", ModeTrueState, MethodGreedy},
		{"blocksworld", ModeTrueState, MethodCGreedy},
		{"blocksworld", ModeTrueState, MethodMCTS},
		{"blocksworld", ModeTrueState, MethodCMCTS},
		{"blocksworld", ModeTrueState, MethodThinking},
		{"alfworld", ModeTwoPhase, MethodCMCTS},
		{"alfworld", ModeTwoPhase, MethodCGreedy},
		{"alfworld", ModeTwoPhase, MethodDirect},
		{"alfworld", ModeTrueState, MethodCMCTS},
		{"virtualhome", ModeTwoPhase, MethodCMCTS},
		{"virtualhome", ModeTrueState, MethodGreedy},
	}
	envCache := map[string]envs.Env{}
	for _, tc := range cases {
		t.Run(tc.env+"/"+tc.mode+"/"+tc.method, func(t *testing.T) {
			env := envCache[tc.env]
			if env == nil {
				env = openEnv(t, tc.env)
				envCache[tc.env] = env
			}
			cfg := small(t, env, tc.method, tc.mode)
			sum, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := ReadRecords(filepath.Join(cfg.Out, TasksFile))
			if err != nil || len(recs) != 1 || sum.Tasks != 1 {
				t.Fatalf("records %v, summary tasks %d, %v", recs, sum.Tasks, err)
			}
			r := recs[0]
			if r.Task != env.Tasks()[0].ID || r.Method != tc.method || r.Mode != tc.mode || r.Env != tc.env {
				t.Fatalf("record names %q %q %q %q", r.Task, r.Method, r.Mode, r.Env)
			}
			if r.FailureStage == StageError {
				t.Fatalf("task error: %s", r.Error)
			}
			if r.Plan == nil {
				t.Fatal(`"plan" is null, want a list`)
			}
			if r.Success != (r.FailureStage == "") || (!r.Success && !slices.Contains(Stages, r.FailureStage)) {
				t.Fatalf("success %v with failure stage %q", r.Success, r.FailureStage)
			}
			if !r.Success && r.Reason == "" {
				t.Fatal("a failure without a reason")
			}
			constrained := tc.method == MethodCGreedy || tc.method == MethodCMCTS
			if constrained && (!r.PlanValid || r.FailureStage == StageGrounding) {
				t.Fatalf("constrained plan not valid: %+v", r)
			}
			if r.GeneratedTokens == 0 && len(r.Plan) > 0 || r.EvaluatedTokens < r.GeneratedTokens || r.ModelCalls == 0 {
				t.Fatalf("token accounting: generated %d evaluated %d calls %d", r.GeneratedTokens, r.EvaluatedTokens, r.ModelCalls)
			}
			if r.Seconds <= 0 || r.PlanSeconds <= 0 || r.PlanSeconds > r.Seconds {
				t.Fatalf("seconds %v, plan seconds %v", r.Seconds, r.PlanSeconds)
			}
			if tc.method == MethodThinking && r.ThinkingTokens == 0 {
				t.Fatal("thinking method without thinking tokens")
			}
			twoPhase := tc.mode == ModeTwoPhase && tc.method != MethodDirect
			if twoPhase != (r.Ready != nil) {
				t.Fatalf("ready recorded %v in mode %s", r.Ready != nil, tc.mode)
			}
			if twoPhase && tc.env == "alfworld" && (r.ExploreSteps == 0 || !*r.Ready || !*r.Grounded) {
				t.Fatalf("exploration: %d steps, ready %v, grounded %v", r.ExploreSteps, *r.Ready, *r.Grounded)
			}
			// Perception is scored against the truth in two-phase runs.
			if twoPhase != (r.Perception != "" && r.GoalFacts != nil && r.AllFacts != nil) {
				t.Fatalf("perception %q recorded %v in mode %s", r.Perception, r.GoalFacts != nil, tc.mode)
			}
			if twoPhase && (r.AllFacts.Correct > r.AllFacts.Believed || r.AllFacts.Recalled > r.AllFacts.Shown) {
				t.Fatalf("perception scores %+v", *r.AllFacts)
			}
			// Invalid actions attempted: none for constrained methods, and
			// as many as the commands the environment did not carry out.
			if constrained && r.InvalidActions != 0 {
				t.Fatalf("a constrained method attempted %d invalid actions", r.InvalidActions)
			}
			if tc.method == MethodDirect && r.InvalidActions != r.Steps-r.Executed {
				t.Fatalf("direct: %d invalid actions for %d of %d commands executed", r.InvalidActions, r.Executed, r.Steps)
			}
			if want := map[string]string{"alfworld": "valid_unseen"}[tc.env]; sum.Split != want {
				t.Fatalf("split %q, want %q", sum.Split, want)
			}
			report, err := os.ReadFile(filepath.Join(cfg.Out, ReportFile))
			if err != nil || !strings.Contains(string(report), "Invalid actions attempted") ||
				twoPhase != strings.Contains(string(report), "## Perception") {
				t.Fatalf("report lacks invalid actions or perception: %v", err)
			}
			// From the true initial state the executed plan, replayed by the
			// validator, reaches the goal exactly when the run says it
			// succeeded (an independent check of execution and success).
			if tc.mode == ModeTrueState && r.PlanValid && len(r.Plan) > 0 {
				ep, err := env.Open(context.Background(), r.Task)
				if err != nil {
					t.Fatal(err)
				}
				steps, err := pddl.ParsePlan("plan", []byte(strings.Join(r.Plan, "\n")))
				if err != nil {
					t.Fatal(err)
				}
				v := ep.Task().Validate(steps)
				if !v.Valid || v.GoalReached != r.Success {
					t.Fatalf("validator: valid %v goal %v (%s), record success %v", v.Valid, v.GoalReached, v.Error, r.Success)
				}
			}
			for _, f := range []string{TasksFile, SummaryFile, ReportFile, RunFile, SuccessPlot, TokensPlot} {
				if st, err := os.Stat(filepath.Join(cfg.Out, f)); err != nil || st.Size() == 0 {
					t.Fatalf("%s: %v", f, err)
				}
			}
		})
	}
}

func taskIDs(t *testing.T, dir string) []string {
	t.Helper()
	recs, err := ReadRecords(filepath.Join(dir, TasksFile))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.Task)
	}
	return ids
}

func TestRunResumesAndShards(t *testing.T) {
	env := openEnv(t, "blocksworld")
	base := small(t, env, MethodCGreedy, ModeTrueState)
	base.Limit = 5
	base.MaxActions = 3
	var want []string
	for _, ti := range env.Tasks()[:5] {
		want = append(want, ti.ID)
	}

	// Two shards into one folder make the whole suite, each task once.
	for i := 0; i < 2; i++ {
		cfg := base
		cfg.Shard = Shard{I: i, N: 2}
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	got := taskIDs(t, base.Out)
	if len(got) != 5 || !sameSet(got, want) {
		t.Fatalf("after both shards: %v, want %v", got, want)
	}
	if ids := taskIDs(t, base.Out); !slices.Equal(ids[:3], []string{want[0], want[2], want[4]}) {
		t.Fatalf("shard 0/2 ran %v", ids[:3])
	}

	// A rerun does nothing: every task is resumed, the file is unchanged.
	before, _ := os.ReadFile(filepath.Join(base.Out, TasksFile))
	var first Progress
	cfg := base
	cfg.Progress = func(p Progress) {
		if p.Last == nil {
			first = p
		} else {
			t.Errorf("task %s rerun", p.Last.Task)
		}
	}
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(base.Out, TasksFile))
	if first.Resumed != 5 || first.Done != 5 || string(before) != string(after) || sum.Tasks != 5 {
		t.Fatalf("rerun: progress %+v, file changed %v, summary tasks %d", first, string(before) != string(after), sum.Tasks)
	}

	// A write cut short (a crash in the middle of a line) loses only that
	// task, which the next run redoes.
	cut := before[:len(before)-20]
	if err := os.WriteFile(filepath.Join(base.Out, TasksFile), cut, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := taskIDs(t, base.Out); len(got) != 4 {
		t.Fatalf("after the cut: %v", got)
	}
	if _, err := Run(context.Background(), base); err != nil {
		t.Fatal(err)
	}
	if got := taskIDs(t, base.Out); len(got) != 5 || !sameSet(got, want) {
		t.Fatalf("after resuming a cut file: %v", got)
	}
	data, _ := os.ReadFile(filepath.Join(base.Out, TasksFile))
	if n := strings.Count(string(data), "\n"); n != 5 || !strings.HasSuffix(string(data), "\n") {
		t.Fatalf("the file has %d lines", n)
	}

	// An interrupted run keeps the finished tasks and the next one completes.
	cfg = base
	cfg.Out = t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Progress = func(p Progress) {
		if p.Done == 2 {
			cancel()
		}
	}
	if _, err := Run(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	if got := taskIDs(t, cfg.Out); !slices.Equal(got, want[:2]) {
		t.Fatalf("after the interruption: %v", got)
	}
	cfg.Progress = nil
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if got := taskIDs(t, cfg.Out); !slices.Equal(got, want) {
		t.Fatalf("after resuming: %v", got)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestRunRefusesAnotherRunsFolder(t *testing.T) {
	env := openEnv(t, "blocksworld")
	cfg := small(t, env, MethodCGreedy, ModeTrueState)
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	for _, change := range []func(*Config){
		func(c *Config) { c.Method = MethodGreedy },
		func(c *Config) { c.Mode = ModeTwoPhase },
		func(c *Config) { c.ModelName = "other" },
		func(c *Config) { c.Suite = "types" },
	} {
		other := cfg
		change(&other)
		if _, err := Run(context.Background(), other); err == nil || !strings.Contains(err.Error(), "holds a run of") {
			t.Errorf("got %v, want a refusal", err)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	env := openEnv(t, "blocksworld")
	for _, change := range []func(*Config){
		func(c *Config) { c.Method = "beam" },
		func(c *Config) { c.Mode = "oracle" },
		func(c *Config) { c.Shard = Shard{I: 2, N: 2} },
		func(c *Config) { c.Seconds = -1 },
		func(c *Config) { c.SearchMemory = -1 },
		func(c *Config) { c.Suite = "no-such-task" },
		func(c *Config) { c.Out = "" },
	} {
		cfg := small(t, env, MethodCGreedy, ModeTrueState)
		change(&cfg)
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

func TestSelectTasksAndShards(t *testing.T) {
	tasks := []envs.TaskInfo{
		{ID: "a-1/t1", Type: "a"}, {ID: "a-1/t2", Type: "a"}, {ID: "a-2/t1", Type: "a"},
		{ID: "b-1/t1", Type: "b"}, {ID: "c-1/t1", Type: "c"},
	}
	cases := []struct {
		suite string
		want  []string
	}{
		{"", []string{"a-1/t1", "a-1/t2", "a-2/t1", "b-1/t1", "c-1/t1"}},
		{"all", []string{"a-1/t1", "a-1/t2", "a-2/t1", "b-1/t1", "c-1/t1"}},
		{"types", []string{"a-1/t1", "b-1/t1", "c-1/t1"}},
		{"a-1", []string{"a-1/t1", "a-1/t2"}},
		{"b, c", []string{"b-1/t1", "c-1/t1"}},
		{"a-2/t1", []string{"a-2/t1"}},
	}
	for _, tc := range cases {
		got, err := SelectTasks(tasks, tc.suite)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, ti := range got {
			ids = append(ids, ti.ID)
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("suite %q: %v, want %v", tc.suite, ids, tc.want)
		}
	}
	if _, err := SelectTasks(tasks, "zzz"); err == nil {
		t.Error("a suite selecting nothing was accepted")
	}
	// Shards partition the tasks.
	for n := 1; n <= 6; n++ {
		var union []string
		for i := 0; i < n; i++ {
			sh, err := ParseShard(strings.Join([]string{itoa(i), itoa(n)}, "/"))
			if err != nil {
				t.Fatal(err)
			}
			for _, ti := range sh.Select(tasks) {
				union = append(union, ti.ID)
			}
		}
		if len(union) != len(tasks) || !sameSet(union, cases[0].want) {
			t.Errorf("%d shards: %v", n, union)
		}
	}
	for _, bad := range []string{"2/2", "-1/3", "a/b", "1", "0/0", "1/2/3"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("shard %q accepted", bad)
		}
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

func TestClusterOf(t *testing.T) {
	cases := []struct {
		env  string
		task envs.TaskInfo
		want string
	}{
		{"alfworld", envs.TaskInfo{ID: "pick_and_place_simple-Mug-None-Desk-308/trial_T1", Type: "pick_and_place_simple"}, "pick_and_place_simple-Mug-None-Desk-308"},
		{"virtualhome", envs.TaskInfo{ID: "201_1", Type: "Wash_clothes"}, "Wash_clothes"},
		{"blocksworld", envs.TaskInfo{ID: "instance-3", Type: "blocksworld"}, "instance-3"},
	}
	for _, tc := range cases {
		if got := ClusterOf(tc.env, tc.task); got != tc.want {
			t.Errorf("ClusterOf(%s, %s) = %q, want %q", tc.env, tc.task.ID, got, tc.want)
		}
	}
}

// The report files are written from the records alone.
func TestWriteReport(t *testing.T) {
	yes, no := true, false
	runs := []struct {
		info RunInfo
		recs []Record
	}{
		{RunInfo{Env: "alfworld", Method: "cmcts", Mode: ModeTwoPhase, Model: "m"}, []Record{
			{Task: "f1/t1", Type: "pick", Cluster: "f1", Success: true, PlanValid: true, Ready: &yes, Grounded: &yes, GeneratedTokens: 10, EvaluatedTokens: 100, Seconds: 1},
			{Task: "f1/t2", Type: "pick", Cluster: "f1", Success: false, FailureStage: StageGoal, Reason: "r", Ready: &yes, Grounded: &yes, GeneratedTokens: 20, EvaluatedTokens: 300, Seconds: 2},
			{Task: "f2/t1", Type: "heat", Cluster: "f2", Success: false, FailureStage: StageExploration, Reason: "r", Ready: &no, Grounded: &no, Seconds: 3},
			{Task: "f3/t1", Type: "heat", Cluster: "f3", Success: true, PlanValid: true, Ready: &yes, Grounded: &yes, GeneratedTokens: 5, EvaluatedTokens: 50, Seconds: 4},
		}},
		{RunInfo{Env: "virtualhome", Method: "greedy", Mode: ModeTrueState, Model: "m"}, []Record{
			{Task: "1_1", Type: "Wash", Cluster: "Wash", Success: false, FailureStage: StageGrounding, Reason: "r", Seconds: 1},
			{Task: "2_1", Type: "Wash", Cluster: "Wash", Success: false, FailureStage: StageError, Error: "boom", Seconds: 1},
			{Task: "3_1", Type: "Mail", Cluster: "Mail", Success: false, FailureStage: StageUnsolvable, Unsolvable: true, Reason: "r", Seconds: 1},
		}},
	}
	var dirs []string
	for _, r := range runs {
		dir := t.TempDir()
		dirs = append(dirs, dir)
		if err := checkRunInfo(dir, r.info); err != nil {
			t.Fatal(err)
		}
		app, err := openAppender(filepath.Join(dir, TasksFile))
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range r.recs {
			if err := app.Append(rec); err != nil {
				t.Fatal(err)
			}
		}
		app.Close()
	}
	s, err := WriteReport(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	if s.Tasks != 4 || s.Successes != 2 || s.SuccessRate != 0.5 || s.Explored != 4 || s.Ready != 3 || s.Grounded != 3 ||
		s.Failures[StageGoal] != 1 || s.Failures[StageExploration] != 1 || len(s.Types) != 2 ||
		s.GeneratedTokens.Total != 35 || s.Seconds.Median != 2.5 || s.Seconds.Max != 4 || s.PlanValid != 2 {
		t.Fatalf("summary %+v", s)
	}
	if s.SuccessCI95[0] < 0 || s.SuccessCI95[0] > 0.5 || s.SuccessCI95[1] < 0.5 || s.SuccessCI95[1] > 1 {
		t.Fatalf("interval %v", s.SuccessCI95)
	}
	read, err := ReadSummary(dirs[0])
	if err != nil || read.Tasks != 4 {
		t.Fatalf("summary.json: %+v %v", read, err)
	}
	report, _ := os.ReadFile(filepath.Join(dirs[0], ReportFile))
	for _, want := range []string{"| Method | ALFWorld |", "| cmcts (two-phase) | 50.0 (2/4) |", "| heat | 2 | 50.0 (1) |",
		"| exploration / representation | 1 | 50.0% |", "grounded the goal in 3/4", "![success](success.svg)"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report.md lacks %q:\n%s", want, report)
		}
	}
	page, _ := os.ReadFile(filepath.Join(dirs[0], ReportHTMLFile))
	for _, want := range []string{"<table>", "<td>cmcts (two-phase)</td>", `<img src="data:image/svg+xml;base64,`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Contains(string(page), `src="success.svg"`) {
		t.Error("report.html links its plot instead of holding it")
	}
	checkSVG(t, filepath.Join(dirs[0], SuccessPlot), "success by task type", "heat (2)")
	checkSVG(t, filepath.Join(dirs[0], TokensPlot), "tokens per task", "generated tokens")

	out := t.TempDir()
	sums, err := WriteTable(out, dirs)
	if err != nil || len(sums) != 2 {
		t.Fatal(err)
	}
	table, _ := os.ReadFile(filepath.Join(out, ReportFile))
	for _, want := range []string{"| Method | ALFWorld | VirtualHome |", "| greedy (true-state) | – | 0.0 (0/3) |", "| cmcts (two-phase) | 50.0 (2/4) | – |"} {
		if !strings.Contains(string(table), want) {
			t.Errorf("combined report lacks %q:\n%s", want, table)
		}
	}
	if strings.Index(string(table), "greedy (true-state)") > strings.Index(string(table), "cmcts (two-phase)") {
		t.Error("rows are not in method order")
	}
	checkSVG(t, filepath.Join(out, SuccessPlot), "success per method", "VirtualHome")
	if page, err := os.ReadFile(filepath.Join(out, ReportHTMLFile)); err != nil || !strings.Contains(string(page), "data:image/svg+xml;base64,") {
		t.Errorf("combined report.html: %v", err)
	}
	report2, _ := os.ReadFile(filepath.Join(dirs[1], ReportFile))
	for _, want := range []string{"`2_1`: boom", "1 of the tasks cannot be solved", "| unsolvable task | 1 | 33.3% |"} {
		if !strings.Contains(string(report2), want) {
			t.Errorf("report lacks %q:\n%s", want, report2)
		}
	}
	if s2 := sums[1]; s2.Unsolvable != 1 || s2.SolvableRate != 0 || s2.Failures[StageUnsolvable] != 1 {
		t.Errorf("summary of the second run: %+v", s2)
	}
}

// checkSVG checks that path is well-formed SVG holding the given texts.
func checkSVG(t *testing.T, path string, texts ...string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var root struct {
		XMLName xml.Name
	}
	if err := xml.Unmarshal(data, &root); err != nil || root.XMLName.Local != "svg" {
		t.Fatalf("%s: not SVG (%v, root %q)", path, err, root.XMLName.Local)
	}
	for _, s := range texts {
		if !strings.Contains(string(data), s) {
			t.Errorf("%s lacks %q", path, s)
		}
	}
}

// A task whose goal no plan reaches is attributed to the task, whatever
// the method did.
func TestUnsolvableTasks(t *testing.T) {
	env := openEnv(t, "virtualhome")
	for _, mode := range Modes {
		cfg := small(t, env, MethodCGreedy, mode)
		cfg.Suite = "562_1" // Wash_hands; no gold plan, and none exists
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		recs, err := ReadRecords(filepath.Join(cfg.Out, TasksFile))
		if err != nil || len(recs) != 1 {
			t.Fatal(recs, err)
		}
		if r := recs[0]; !r.Unsolvable || r.Success || r.FailureStage != StageUnsolvable {
			t.Fatalf("%s: unsolvable %v success %v stage %q", mode, r.Unsolvable, r.Success, r.FailureStage)
		}
		// A solvable task is not flagged.
		cfg = small(t, env, MethodCGreedy, mode)
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		if recs, _ := ReadRecords(filepath.Join(cfg.Out, TasksFile)); recs[0].Unsolvable {
			t.Fatalf("%s: %s flagged unsolvable", mode, recs[0].Task)
		}
	}
}

// TestCheckRunInfoResume: a folder holding a run resumes only the same run;
// a change of the settings that change plans (no_revisit, the search batch,
// no_collapse and rollouts among them) is refused with the folder named.
func TestCheckRunInfoResume(t *testing.T) {
	base := RunInfo{Env: "alfworld", Method: "cgreedy", Mode: ModeTrueState, Model: "m", Split: "valid_train"}
	tests := []struct {
		name    string
		change  func(*RunInfo)
		wantErr string
	}{
		{"same run", func(*RunInfo) {}, ""},
		{"other method", func(r *RunInfo) { r.Method = "cmcts" }, "holds a run of"},
		{"other split", func(r *RunInfo) { r.Split = "valid_unseen" }, "on split"},
		{"no_revisit on", func(r *RunInfo) { r.NoRevisit = true }, "no_revisit false"},
		{"end at the goal", func(r *RunInfo) { r.End = "goal" }, `end "any"; use another --out for end "goal"`},
		{"search batch 1", func(r *RunInfo) { r.Batch = 1 }, "batch 0, no_collapse false"},
		{"no_collapse on", func(r *RunInfo) { r.NoCollapse = true }, "batch 0, no_collapse false"},
		{"rollouts", func(r *RunInfo) { r.Rollout = 50 }, "rollout 0, rollout temperature 0; use another --out"},
		{"sampled rollouts", func(r *RunInfo) { r.RolloutTemperature = 1 }, "rollout temperature 0; use another --out"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := checkRunInfo(dir, base); err != nil {
				t.Fatal(err)
			}
			next := base
			tc.change(&next)
			err := checkRunInfo(dir, next)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("resume refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), dir)):
				t.Fatalf("error %v, want one naming %s and saying %q", err, dir, tc.wantErr)
			}
		})
	}
}

// TestBatchDefaultNamed: --batch 16 is the default batch named, so a run
// folder written without --batch resumes with it and records no batch;
// --batch 1 is another run.
func TestBatchDefaultNamed(t *testing.T) {
	env := openEnv(t, "blocksworld")
	for _, tc := range []struct{ batch, want int }{{0, 0}, {planner.DefaultBatch, 0}, {1, 1}} {
		cfg := small(t, env, MethodCMCTS, ModeTrueState)
		cfg.Batch = tc.batch
		if err := cfg.normalize(); err != nil {
			t.Fatal(err)
		}
		if got := cfg.info().Batch; got != tc.want {
			t.Errorf("--batch %d: run.json batch %d, want %d", tc.batch, got, tc.want)
		}
	}
}

// TestSearchMemory: a search run's memory bound reaches the search, which
// stops with stop "memory" once its tree holds that many nodes' worth
// (mcts.NodeBytes each), and run.json records the bound; unset, it is
// mcts.DefaultSearchMemory; a decoding method records none.
func TestSearchMemory(t *testing.T) {
	env := openEnv(t, "blocksworld")
	for _, tc := range []struct {
		name, method string
		mem, want    int64
		stop         string
	}{
		{"a few nodes", MethodCMCTS, 4 * mcts.NodeBytes, 4 * mcts.NodeBytes, "memory"},
		{"default", MethodCMCTS, 0, mcts.DefaultSearchMemory(), "simulations"},
		{"decoding", MethodCGreedy, 4 * mcts.NodeBytes, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := small(t, env, tc.method, ModeTrueState)
			cfg.SearchMemory = tc.mem
			if _, err := Run(context.Background(), cfg); err != nil {
				t.Fatal(err)
			}
			info, err := ReadRunInfo(cfg.Out)
			if err != nil || info.SearchMemory != tc.want {
				t.Fatalf("run.json search_memory %d, want %d (%v)", info.SearchMemory, tc.want, err)
			}
			recs, err := ReadRecords(filepath.Join(cfg.Out, TasksFile))
			if err != nil || len(recs) != 1 {
				t.Fatalf("records %v, %v", recs, err)
			}
			if tc.stop != "" && recs[0].Stop != tc.stop {
				t.Fatalf("stop %q, want %q (%s)", recs[0].Stop, tc.stop, recs[0].Reason)
			}
			// The summary and the report count the tasks by why planning
			// ended.
			data, err := os.ReadFile(filepath.Join(cfg.Out, SummaryFile))
			var sum Summary
			if err == nil {
				err = json.Unmarshal(data, &sum)
			}
			if err != nil || sum.Stops[recs[0].Stop] != 1 || len(sum.Stops) != 1 {
				t.Fatalf("summary stops %v for a task that stopped with %q (%v)", sum.Stops, recs[0].Stop, err)
			}
			report, err := os.ReadFile(filepath.Join(cfg.Out, ReportFile))
			if err != nil || !strings.Contains(string(report), "## Why planning ended") || !strings.Contains(string(report), "| "+recs[0].Stop+" | 1 |") {
				t.Fatalf("report lacks the stop table: %v", err)
			}
		})
	}
	if mcts.DefaultSearchMemory() <= 0 {
		t.Fatalf("default search memory %d", mcts.DefaultSearchMemory())
	}
}

// TestResumeRevisitRule: a folder of a run made with the revisit mask
// before its least-visited rule (run.json without "revisit") is not
// resumed by a run with the rule, and a run with the rule records it.
func TestResumeRevisitRule(t *testing.T) {
	env := openEnv(t, "blocksworld")
	cfg := small(t, env, MethodCGreedy, ModeTrueState)
	cfg.NoRevisit = true
	if err := cfg.normalize(); err != nil {
		t.Fatal(err)
	}
	info := cfg.info()
	if info.Revisit != RevisitLeastVisited {
		t.Fatalf("run.json revisit %q, want %q", info.Revisit, RevisitLeastVisited)
	}
	dir := t.TempDir()
	old := info
	old.Revisit = ""
	if err := checkRunInfo(dir, old); err != nil {
		t.Fatal(err)
	}
	if err := checkRunInfo(dir, info); err == nil || !strings.Contains(err.Error(), "earlier rule") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("resume of an earlier-rule run: %v, want a refusal naming %s", err, dir)
	}
	if err := checkRunInfo(t.TempDir(), info); err != nil {
		t.Fatal(err)
	}
}
