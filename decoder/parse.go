package decoder

import (
	"bytes"
	"fmt"
	"github.com/nesy-dev/nesy/constraint"
	"strings"

	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/pddl"
)

// Parsed is free plan text mapped to actions.
type Parsed struct {
	// Plan is the actions of the valid steps before the first invalid one.
	Plan []int
	// Steps counts the action lines (blank lines and the end marker aside).
	Steps int
	// FirstInvalid is the first line that is not an applicable action, or nil.
	FirstInvalid *InvalidStep
	// EndReason is "end_marker", "goal" or "max_actions" when the text ended
	// the plan before its end, else "".
	EndReason string
}

// ParseOutput maps free plan text (as an unconstrained model writes it) to
// actions, line by line (lines split at opts.Separator, "\n" by default):
// each trimmed line must be exactly the lexicon text of an action applicable
// in the state the previous lines lead to (lexicon.Bound.Lookup). Blank lines
// are skipped; the end marker (opts.End; an empty line when it is "\n") ends
// the plan, and so do StopAtGoal and MaxActions. The first line that is not
// an applicable action is reported with the reason (no action has that text,
// or the precondition that fails); later lines are counted but not applied.
func ParseOutput(lex *lexicon.Bound, text string, opts constraint.Options) Parsed {
	if opts.Separator == "" {
		opts.Separator = "\n"
	}
	var p Parsed
	lp := newLineParser(lex, opts, func(e Event) {
		if e.Kind == EventEnd {
			p.EndReason = e.Reason
		}
	})
	lp.write([]byte(text))
	lp.flush()
	p.Plan, p.Steps, p.FirstInvalid = lp.plan, lp.steps, lp.invalid
	return p
}

// lineParser maps unconstrained output to actions as it is written.
type lineParser struct {
	lex     *lexicon.Bound
	task    *pddl.Task
	opts    constraint.Options
	state   pddl.State
	plan    []int
	steps   int
	line    []byte
	invalid *InvalidStep
	ended   bool
	on      func(Event) // actions, the first invalid step, the end
}

// newLineParser reads lines of lex's task with the separator, end marker
// and limits of opts (whose Separator must be set).
func newLineParser(lex *lexicon.Bound, opts constraint.Options, on func(Event)) *lineParser {
	return &lineParser{lex: lex, task: lex.Task(), opts: opts, state: lex.Task().Init, on: on}
}

// write appends text and handles every complete line.
func (lp *lineParser) write(text []byte) {
	lp.line = append(lp.line, text...)
	sep := []byte(lp.opts.Separator)
	for !lp.ended {
		i := bytes.Index(lp.line, sep)
		if i < 0 {
			return
		}
		line := string(lp.line[:i])
		lp.line = lp.line[i+len(sep):]
		lp.handle(line)
	}
}

// flush handles a last line written without separator (the text ended).
func (lp *lineParser) flush() {
	if !lp.ended && len(bytes.TrimSpace(lp.line)) > 0 {
		line := string(lp.line)
		lp.line = lp.line[:0]
		lp.handle(line)
	}
}

// cutOff handles a last line cut off by a token limit: it is written but is
// no action (even if its text so far spells one, the model had not ended it),
// so it is the first invalid step unless there was one before.
func (lp *lineParser) cutOff() {
	text := strings.TrimSpace(string(lp.line))
	lp.line = lp.line[:0]
	if lp.ended || text == "" {
		return
	}
	step := lp.steps
	lp.steps++
	if lp.invalid == nil {
		lp.invalid = &InvalidStep{Step: step, Text: text, Reason: "the line was cut off by the token limit"}
		lp.on(Event{Kind: EventInvalid, Step: step, ActionText: text, Reason: lp.invalid.Reason})
	}
}

func (lp *lineParser) end(reason string) {
	lp.ended = true
	lp.on(Event{Kind: EventEnd, Reason: reason})
}

// handle maps one line to an action in the current state.
func (lp *lineParser) handle(line string) {
	opts := lp.opts
	text := strings.TrimSpace(line)
	end := strings.TrimSpace(opts.End)
	if text == "" {
		if opts.End != "" && end == "" { // an empty line ends the plan
			lp.end(constraint.EndedByMarker.String())
		}
		return
	}
	if opts.End != "" && text == end {
		lp.end(constraint.EndedByMarker.String())
		return
	}
	if opts.Trace != nil {
		// What follows the action is the trace the constraint would force:
		// information for the model, not part of the action.
		if a, _, ok := strings.Cut(text, constraint.TraceSep); ok {
			text = strings.TrimSpace(a)
		}
	}
	step := lp.steps
	lp.steps++
	task := lp.task
	if lp.invalid == nil {
		if a, ok := lp.lex.Lookup(lp.state, text); ok {
			lp.state = task.Apply(lp.state, a)
			lp.plan = append(lp.plan, a)
			lp.on(Event{Kind: EventAction, Step: step, Action: a, ActionText: text, Line: task.Actions[a].String()})
			if opts.StopAtGoal && task.GoalReached(lp.state) {
				lp.end(constraint.EndedAtGoal.String())
				return
			}
		} else {
			lp.invalid = &InvalidStep{Step: step, Text: text, Reason: explain(lp.lex, lp.state, text)}
			lp.on(Event{Kind: EventInvalid, Step: step, ActionText: text, Reason: lp.invalid.Reason})
		}
	}
	if opts.MaxActions > 0 && lp.steps >= opts.MaxActions {
		lp.end(constraint.EndedAtMaxActions.String())
	}
}

// explain says why text is not an applicable action in state s: no action
// has that text, or the precondition that fails (pddl.Task.Execute's
// reason, as the validator reports it).
func explain(lex *lexicon.Bound, s pddl.State, text string) string {
	ids := lex.Actions(text)
	if len(ids) == 0 {
		return fmt.Sprintf("%q is not the text of any action", text)
	}
	task := lex.Task()
	a := task.Actions[ids[0]]
	if _, _, err := task.Execute(s, a.Name, a.Args); err != nil {
		return fmt.Sprintf("%s: %v", a.String(), err)
	}
	return fmt.Sprintf("%s is not applicable", a.String())
}
