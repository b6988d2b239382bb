package envs

import (
	"fmt"
	"image"

	"github.com/nesy-dev/nesy/lexicon"
	"github.com/nesy-dev/nesy/pddl"
)

// Agent is the agent's side of an episode: commands go in, text (and, where
// the environment renders one, an image) comes out, and the domain model
// (the ground task without its initial state, and the lexicon) says what
// commands and facts there are. It gives no way to the true state, the
// environment's fact lists (Truth, Belief, Perceived) or the task's initial
// state: whatever the agent believes, a perception step has to read from
// the text or the image. Not safe for concurrent use.
type Agent struct {
	ep     *Episode
	domain *pddl.Task
	lex    *lexicon.Bound
}

// Agent returns the agent's side of the episode. The episode itself (the
// harness's side) keeps the truth for scoring.
func (e *Episode) Agent() (*Agent, error) {
	d := *e.task
	d.Init = pddl.NewState(len(e.task.Facts)) // the truth stays with the environment
	lex, err := e.lex.Lexicon().Bind(&d)
	if err != nil {
		return nil, fmt.Errorf("%s: agent's lexicon: %w", e.info.ID, err)
	}
	return &Agent{ep: e, domain: &d, lex: lex}, nil
}

// Reset starts the episode over and returns the first observation.
func (a *Agent) Reset() (Observation, error) { return a.ep.Reset() }

// Step gives a command and returns the feedback. Whether the command was
// carried out the agent learns as a real one does: from the text
// (NothingHappens when it was not).
func (a *Agent) Step(command string) (Observation, error) {
	res, err := a.ep.Step(command)
	return res.Observation, err
}

// Image renders the agent's current view (ErrNoImage where the environment
// cannot).
func (a *Agent) Image() (image.Image, error) { return a.ep.Image() }

// Domain returns the domain model: the ground task (facts, actions, static
// facts, goal, objects) with an empty initial state.
func (a *Agent) Domain() *pddl.Task { return a.domain }

// Lexicon returns the text of the domain's actions, facts and objects,
// bound to Domain.
func (a *Agent) Lexicon() *lexicon.Bound { return a.lex }
