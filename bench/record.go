package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/nesy-dev/nesy/explore"
)

// Failure stages (Record.FailureStage).
const (
	// StageExploration: exploration/representation. Phase I did not ground
	// the goal, or a plan valid in the grounded state failed in the
	// environment (the estimate was wrong).
	StageExploration = "exploration"
	// StageGrounding: grounding/semantics. The model wrote a step that is
	// not an applicable action of its task (or a direct policy issued
	// commands the environment rejected).
	StageGrounding = "grounding"
	// StageGoal: every step executed, the goal was not reached.
	StageGoal = "goal_not_reached"
	// StageUnsolvable: the goal cannot be reached from the task's true
	// initial state (a dead end of the delete relaxation proves it), so no
	// method could succeed; it takes precedence over the other stages.
	StageUnsolvable = "unsolvable"
	// StageError: the run of the task failed (model error, context too
	// small, ...); Record.Error says why.
	StageError = "error"
)

// Stages lists the failure stages in report order.
var Stages = []string{StageExploration, StageGrounding, StageGoal, StageUnsolvable, StageError}

// Record is one task's outcome: a line of tasks.jsonl.
type Record struct {
	Task string `json:"task"`
	// Type is the task family (ALFWorld task type, VirtualHome task
	// folder); Cluster the unit the bootstrap resamples (see ClusterOf).
	Type    string `json:"type"`
	Cluster string `json:"cluster"`
	Env     string `json:"env"`
	Method  string `json:"method"`
	Mode    string `json:"mode"`
	Success bool   `json:"success"`
	// Plan is the plan in PDDL syntax ("(name a b)"); Commands the commands
	// given to the environment (the plan's texts, or a direct policy's
	// lines); Executed how many of them the environment carried out.
	Plan     []string `json:"plan"`
	Commands []string `json:"commands,omitempty"`
	Executed int      `json:"executed"`
	// PlanValid: every command given to the environment was carried out.
	PlanValid bool `json:"plan_valid"`
	// Steps counts the environment steps of Phase II (the commands given);
	// ExploreSteps those of Phase I.
	Steps        int `json:"steps"`
	ExploreSteps int `json:"explore_steps"`
	// ExploreStop says why exploration ended (explore.Result.Stop).
	ExploreStop string `json:"explore_stop,omitempty"`
	// Ready: exploration grounded the goal (two-phase only). Grounded: the
	// estimate was correct on the goal's objects (see explore.Compare).
	Ready    *bool `json:"ready,omitempty"`
	Grounded *bool `json:"grounded,omitempty"`
	// Perception is Phase I's perception method (explore.PerceiveText or
	// explore.PerceiveModel); GoalFacts and AllFacts score the perceived
	// facts against the truth on the goal's objects and on all facts (see
	// explore.PR). Two-phase only.
	Perception string      `json:"perception,omitempty"`
	GoalFacts  *explore.PR `json:"goal_facts,omitempty"`
	AllFacts   *explore.PR `json:"all_facts,omitempty"`
	// InvalidActions counts the commands the environment refused, over
	// both phases (exploration skills, plan steps, a direct policy's
	// lines): a constrained method attempts none.
	InvalidActions int `json:"invalid_actions"`
	// Unsolvable: the goal is unreachable from the true initial state.
	Unsolvable bool `json:"unsolvable,omitempty"`
	// Token accounting over both phases (see explore.Usage and the
	// decoder's and search's results).
	PromptTokens    int `json:"prompt_tokens"`
	GeneratedTokens int `json:"generated_tokens"`
	ThinkingTokens  int `json:"thinking_tokens,omitempty"`
	EvaluatedTokens int `json:"evaluated_tokens"`
	ModelCalls      int `json:"model_calls"`
	Images          int `json:"images"`
	// Simulations are the tree search's simulations (mcts, cmcts; it stops
	// at its first goal plan unless told otherwise).
	Simulations int `json:"simulations,omitempty"`
	// Seconds is the task's wall time; ExploreSeconds and PlanSeconds its
	// phases.
	Seconds        float64 `json:"seconds"`
	ExploreSeconds float64 `json:"explore_seconds,omitempty"`
	PlanSeconds    float64 `json:"plan_seconds"`
	// Stop says why planning ended (decoder end reason, search stop
	// reason, or the direct policy's "success"/"steps"/"time").
	Stop         string `json:"stop,omitempty"`
	FailureStage string `json:"failure_stage,omitempty"`
	// Reason details the failure (first invalid step, refused command,
	// unreached goal); Error is set for StageError.
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
	Seed   uint64 `json:"seed"`
}

// TasksFile, SummaryFile, ReportFile and RunFile are the names of a run's
// files in its output folder.
const (
	TasksFile   = "tasks.jsonl"
	SummaryFile = "summary.json"
	ReportFile  = "report.md"
	RunFile     = "run.json"
)

// ReadRecords reads a tasks.jsonl file. A last line without its line break
// (a write cut short) is ignored, as are blank lines; any other line that is
// not a record is an error naming the file and line. A missing file is an
// empty list. When a task appears more than once the last record wins.
func ReadRecords(path string) ([]Record, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i < len(data)-1 {
		data = data[:i+1] // drop a partial last line
	}
	var out []Record
	at := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<16), 1<<26)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("bench: %s:%d: not a task record: %w", path, line, err)
		}
		if r.Task == "" {
			return nil, fmt.Errorf("bench: %s:%d: record without a task", path, line)
		}
		if i, ok := at[r.Task]; ok {
			out[i] = r
			continue
		}
		at[r.Task] = len(out)
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", path, err)
	}
	return out, nil
}

// appender appends records to a tasks.jsonl file, one whole line per write,
// synced to disk before the next task starts, so an interrupted run leaves
// only whole records (at worst a partial last line, which ReadRecords
// ignores and repair removes).
type appender struct {
	f *os.File
}

// openAppender opens (creating) path for appending, first cutting off a
// partial last line left by an interrupted write.
func openAppender(path string) (*appender, error) {
	if err := repair(path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return &appender{f: f}, nil
}

// repair truncates path after its last line break, if it does not end with
// one.
func repair(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	// Find the last line break, reading backwards in blocks.
	const block = 4096
	end := st.Size()
	buf := make([]byte, block)
	for pos := end; pos > 0; {
		n := int64(block)
		if pos < n {
			n = pos
		}
		pos -= n
		if _, err := f.ReadAt(buf[:n], pos); err != nil && err != io.EOF {
			return fmt.Errorf("bench: %w", err)
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			if cut := pos + int64(i) + 1; cut < end {
				return f.Truncate(cut)
			}
			return nil
		}
	}
	return f.Truncate(0)
}

// Append writes r as one line and syncs the file.
func (a *appender) Append(r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	b = append(b, '\n')
	if _, err := a.f.Write(b); err != nil {
		return fmt.Errorf("bench: writing %s: %w", a.f.Name(), err)
	}
	if err := a.f.Sync(); err != nil {
		return fmt.Errorf("bench: syncing %s: %w", a.f.Name(), err)
	}
	return nil
}

func (a *appender) Close() error { return a.f.Close() }

// writeFileAtomic writes data to path through a temporary file in the same
// folder and a rename, so readers see the old or the new file, never half.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	_, werr := tmp.Write(data)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("bench: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}
