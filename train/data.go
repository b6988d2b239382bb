package train

import (
	"fmt"

	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
)

// Example is a tokenized demonstration: the prompt as the decoder builds
// it, then the plan; the loss is on Tokens[PlanStart:].
type Example struct {
	ID        string
	Scene     string // the game whose scene the task is on (Demo.Scene)
	Tokens    []int32
	PlanStart int
}

// DemoTexts returns the texts a vocabulary is learned from: every
// message and plan of the demonstrations.
func DemoTexts(demos []Demo) []string {
	var out []string
	for _, d := range demos {
		for _, m := range d.Messages {
			out = append(out, m.Content)
		}
		out = append(out, d.PlanText())
	}
	return out
}

// NewTokenizer learns the prior's byte-level BPE vocabulary (up to merges
// merges) from the demonstrations' texts.
func NewTokenizer(demos []Demo, merges int) *gguf.Tokenizer {
	return gguf.TrainBPE(DemoTexts(demos), merges, "")
}

// Tokenize renders every demonstration's prompt with lm's chat template
// (decoder.RenderPrompt, as the planner does) and appends the plan's
// tokens.
func Tokenize(lm models.LM, demos []Demo) ([]Example, error) {
	out := make([]Example, 0, len(demos))
	for _, d := range demos {
		p, err := decoder.RenderPrompt(lm, d.Messages, false)
		if err != nil {
			return nil, fmt.Errorf("train: %s: %w", d.ID, err)
		}
		plan, err := lm.Tokenize(d.PlanText(), false)
		if err != nil {
			return nil, fmt.Errorf("train: %s: tokenizing the plan: %w", d.ID, err)
		}
		toks := append(append([]int32(nil), p.Tokens...), plan...)
		out = append(out, Example{ID: d.ID, Scene: d.Scene, Tokens: toks, PlanStart: len(p.Tokens)})
	}
	return out, nil
}
