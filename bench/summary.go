package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/nesy-dev/nesy/explore"
)

// Summary is a run's aggregate: summary.json.
type Summary struct {
	Env    string `json:"env"`
	Suite  string `json:"suite"`
	Method string `json:"method"`
	Mode   string `json:"mode"`
	Model  string `json:"model"`
	// Split is the dataset split (RunInfo.Split); PartiallyObservable
	// says the env hid part of the state.
	Split               string `json:"split,omitempty"`
	PartiallyObservable bool   `json:"partially_observable,omitempty"`
	// Tasks is the number of task records; Successes of them succeeded;
	// SuccessRate = Successes/Tasks; SuccessCI95 the task-cluster bootstrap
	// 95% interval of the rate.
	Tasks       int        `json:"tasks"`
	Successes   int        `json:"successes"`
	SuccessRate float64    `json:"success_rate"`
	SuccessCI95 [2]float64 `json:"success_ci95"`
	// PlanValid counts the tasks whose every command the environment carried
	// out.
	PlanValid     int     `json:"plan_valid"`
	PlanValidRate float64 `json:"plan_valid_rate"`
	// Ready and Grounded count two-phase tasks whose exploration grounded
	// the goal, and did so correctly (explore.Compare); Explored counts the
	// tasks that explored.
	Explored int `json:"explored,omitempty"`
	Ready    int `json:"ready,omitempty"`
	Grounded int `json:"grounded,omitempty"`
	// GroundedSuccesses counts the successes among the Grounded tasks
	// (success conditional on correct grounding).
	GroundedSuccesses int `json:"grounded_successes,omitempty"`
	// Perception is the perception method of the two-phase tasks;
	// GoalFacts and AllFacts sum their perceived-fact scores
	// (micro-averaged precision and recall: explore.PR).
	Perception string      `json:"perception,omitempty"`
	GoalFacts  *explore.PR `json:"goal_facts,omitempty"`
	AllFacts   *explore.PR `json:"all_facts,omitempty"`
	// Unsolvable counts the tasks whose goal is unreachable from the true
	// initial state; SolvableRate is the success rate over the others.
	Unsolvable   int     `json:"unsolvable"`
	SolvableRate float64 `json:"solvable_success_rate"`
	// Failures counts failed tasks by stage (Stages).
	Failures map[string]int `json:"failures"`
	// Stops counts the tasks by why planning ended (Record.Stop: "goal",
	// "time", "memory", "simulations", a decoder's end, ...; tasks without
	// one are not counted).
	Stops map[string]int `json:"stops,omitempty"`
	// Types breaks success down by task type.
	Types []TypeStat `json:"types"`
	// Costs per task.
	PromptTokens    Stat `json:"prompt_tokens"`
	GeneratedTokens Stat `json:"generated_tokens"`
	ThinkingTokens  Stat `json:"thinking_tokens"`
	EvaluatedTokens Stat `json:"evaluated_tokens"`
	ModelCalls      Stat `json:"model_calls"`
	Images          Stat `json:"images"`
	Seconds         Stat `json:"seconds"`
	PlanLength      Stat `json:"plan_length"`
	ExploreSteps    Stat `json:"explore_steps"`
	// InvalidActions are the commands the environment refused per task.
	InvalidActions Stat `json:"invalid_actions"`
}

// TypeStat is the success of one task type.
type TypeStat struct {
	Type        string  `json:"type"`
	Tasks       int     `json:"tasks"`
	Successes   int     `json:"successes"`
	SuccessRate float64 `json:"success_rate"`
}

// Stat summarizes one per-task quantity.
type Stat struct {
	Total  float64 `json:"total"`
	Mean   float64 `json:"mean"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

func stat(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	var st Stat
	for _, x := range s {
		st.Total += x
	}
	st.Mean = st.Total / float64(len(s))
	st.Median = quantile(s, 0.5)
	st.Max = s[len(s)-1]
	return st
}

// Summarize aggregates records (info names the run).
func Summarize(info RunInfo, recs []Record) *Summary {
	s := &Summary{Env: info.Env, Suite: info.Suite, Method: info.Method, Mode: info.Mode, Model: info.Model, Split: info.Split,
		PartiallyObservable: info.PartiallyObservable,
		Tasks:               len(recs), Failures: map[string]int{}, Stops: map[string]int{}}
	types := map[string]*TypeStat{}
	groups := map[string]Cluster{}
	var order []string
	var pt, gt, tt, et, mc, im, sec, pl, es, inv []float64
	for _, r := range recs {
		if r.Success {
			s.Successes++
		} else if r.FailureStage != "" {
			s.Failures[r.FailureStage]++
		}
		if r.Stop != "" {
			s.Stops[r.Stop]++
		}
		if r.PlanValid {
			s.PlanValid++
		}
		if r.Unsolvable {
			s.Unsolvable++
		}
		if r.Ready != nil {
			s.Explored++
			if *r.Ready {
				s.Ready++
			}
			if r.Grounded != nil && *r.Grounded {
				s.Grounded++
				if r.Success {
					s.GroundedSuccesses++
				}
			}
		}
		if r.Perception != "" {
			s.Perception = r.Perception
		}
		if r.GoalFacts != nil && r.AllFacts != nil {
			if s.GoalFacts == nil {
				s.GoalFacts, s.AllFacts = &explore.PR{}, &explore.PR{}
			}
			*s.GoalFacts = s.GoalFacts.Add(*r.GoalFacts)
			*s.AllFacts = s.AllFacts.Add(*r.AllFacts)
		}
		inv = append(inv, float64(r.InvalidActions))
		ts := types[r.Type]
		if ts == nil {
			ts = &TypeStat{Type: r.Type}
			types[r.Type] = ts
		}
		ts.Tasks++
		v := 0.0
		if r.Success {
			ts.Successes++
			v = 1
		}
		key := r.Cluster
		if key == "" {
			key = r.Task
		}
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], v)
		pt = append(pt, float64(r.PromptTokens))
		gt = append(gt, float64(r.GeneratedTokens))
		tt = append(tt, float64(r.ThinkingTokens))
		et = append(et, float64(r.EvaluatedTokens))
		mc = append(mc, float64(r.ModelCalls))
		im = append(im, float64(r.Images))
		sec = append(sec, r.Seconds)
		pl = append(pl, float64(len(r.Plan)))
		es = append(es, float64(r.ExploreSteps))
	}
	if s.Tasks > 0 {
		s.SuccessRate = float64(s.Successes) / float64(s.Tasks)
		s.PlanValidRate = float64(s.PlanValid) / float64(s.Tasks)
	}
	if n := s.Tasks - s.Unsolvable; n > 0 {
		s.SolvableRate = float64(s.Successes) / float64(n)
	}
	cs := make([]Cluster, len(order))
	for i, k := range order {
		cs[i] = groups[k]
	}
	s.SuccessCI95[0], s.SuccessCI95[1] = Bootstrap(cs, DefaultResamples, 0.95, 1)
	for _, ts := range types {
		ts.SuccessRate = float64(ts.Successes) / float64(ts.Tasks)
		s.Types = append(s.Types, *ts)
	}
	sort.Slice(s.Types, func(i, j int) bool { return s.Types[i].Type < s.Types[j].Type })
	s.PromptTokens, s.GeneratedTokens, s.ThinkingTokens = stat(pt), stat(gt), stat(tt)
	s.EvaluatedTokens, s.ModelCalls, s.Images = stat(et), stat(mc), stat(im)
	s.Seconds, s.PlanLength, s.ExploreSteps = stat(sec), stat(pl), stat(es)
	s.InvalidActions = stat(inv)
	return s
}

// ReadRun reads a run folder: its run.json and task records.
func ReadRun(dir string) (RunInfo, []Record, error) {
	info, err := ReadRunInfo(dir)
	if err != nil {
		return info, nil, err
	}
	recs, err := ReadRecords(filepath.Join(dir, TasksFile))
	return info, recs, err
}

// WriteReport (re)writes a run folder's summary.json, report.md (and its
// HTML twin report.html, plots inline) and plots
// from its run.json and tasks.jsonl, and returns the summary.
func WriteReport(dir string) (*Summary, error) {
	info, recs, err := ReadRun(dir)
	if err != nil {
		return nil, err
	}
	s := Summarize(info, recs)
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, SummaryFile), append(data, '\n')); err != nil {
		return nil, err
	}
	plots, err := writeRunPlots(dir, s, recs)
	if err != nil {
		return nil, err
	}
	title := fmt.Sprintf("nesy bench: %s on %s (%s)", s.Method, envTitle(s.Env), s.Mode)
	if err := writeReportFiles(dir, title, runReport(s, recs, plots)); err != nil {
		return nil, err
	}
	return s, nil
}

// ReadSummary reads a run folder's summary.json.
func ReadSummary(dir string) (*Summary, error) {
	data, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", filepath.Join(dir, SummaryFile), err)
	}
	return &s, nil
}
