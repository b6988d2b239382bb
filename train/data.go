package train

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/nesy-dev/nesy/constraint"
	"github.com/nesy-dev/nesy/decoder"
	"github.com/nesy-dev/nesy/envs"
	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gguf"
	"github.com/nesy-dev/nesy/trie"
)

// Example is a tokenized demonstration: the prompt as the decoder builds
// it, then the plan; the loss is on Tokens[PlanStart:].
type Example struct {
	ID    string
	Scene string // the game whose scene the task is on (Demo.Scene)
	// Allowed, when not nil, are the tokens the constraint allows before
	// each plan token (Allowed[k] before Tokens[PlanStart+k]): the loss is
	// then over the constrained distribution, as the prior is used.
	Allowed   [][]int32
	Tokens    []int32
	PlanStart int
	// PromptEnd, when above 0, is where the prompt ends and a prefix of
	// actions already taken (Demo.Prefix) begins: Tokens[PromptEnd:PlanStart]
	// are plan text the loss does not cover. 0: the plan starts at
	// PlanStart.
	PromptEnd int
}

// DemoTexts returns the texts a vocabulary is learned from: every
// message and plan of the demonstrations.
func DemoTexts(demos []Demo) []string {
	var out []string
	for _, d := range demos {
		for _, m := range d.Messages {
			out = append(out, m.Content)
		}
		out = append(out, d.PrefixText()+d.PlanText())
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
		plan, err := lm.Tokenize(d.PrefixText()+d.PlanText(), false)
		if err != nil {
			return nil, fmt.Errorf("train: %s: tokenizing the plan: %w", d.ID, err)
		}
		x := Example{ID: d.ID, Scene: d.Scene, Tokens: append(append([]int32(nil), p.Tokens...), plan...), PlanStart: len(p.Tokens)}
		if len(d.Prefix) > 0 {
			pre, err := lm.Tokenize(d.PrefixText(), false)
			if err != nil {
				return nil, fmt.Errorf("train: %s: tokenizing the prefix: %w", d.ID, err)
			}
			// The decoder writes action after action: the prefix's tokens
			// must be the first of the whole text's.
			if len(pre) >= len(plan) || !slices.Equal(pre, plan[:len(pre)]) {
				return nil, fmt.Errorf("train: %s: the prefix does not tokenize as the start of prefix and plan", d.ID)
			}
			x.PromptEnd, x.PlanStart = len(p.Tokens), len(p.Tokens)+len(pre)
		}
		out = append(out, x)
	}
	return out, nil
}

// Sources are where demonstrations' tasks are reopened from (Demo.Env).
type Sources struct {
	// ALFWorld is the folder of the ALFWorld games (a training split).
	ALFWorld string
	// Blocksworld is PlanBench's suite, for its domain and words (generated
	// problems carry their own PDDL); nil when no demonstration needs it.
	Blocksworld *envs.Suite
	// VirtualHome is VirtualHome's training split; nil when none needs it.
	VirtualHome *envs.Suite

	alfworld *envs.ALFWorld // opened on first use
}

// open reopens d's task as it was demonstrated.
func (s *Sources) open(ctx context.Context, d Demo) (*envs.Episode, error) {
	id := d.task()
	switch d.Env {
	case EnvBlocksworld:
		if s.Blocksworld == nil {
			return nil, fmt.Errorf("no Blocksworld suite to reopen %s", id)
		}
		return s.Blocksworld.OpenProblem(ctx, id, EnvBlocksworld, id+".pddl", []byte(d.Problem))
	case EnvVirtualHome:
		if s.VirtualHome == nil {
			return nil, fmt.Errorf("no VirtualHome suite to reopen %s", id)
		}
		return s.VirtualHome.Open(ctx, id)
	case "":
	default:
		return nil, fmt.Errorf("unknown environment %q", d.Env)
	}
	if s.alfworld == nil {
		env, err := envs.NewALFWorld(s.ALFWorld)
		if err != nil {
			return nil, err
		}
		s.alfworld = env
	}
	ep, err := s.alfworld.Open(ctx, d.Scene)
	if err != nil || d.Goal == nil {
		return ep, err
	}
	data, err := os.ReadFile(ep.Info().Problem)
	if err != nil {
		return nil, err
	}
	game, err := WithGoal(data, *d.Goal)
	if err != nil {
		return nil, err
	}
	return envs.OpenALFWorldGameData(ctx, id, d.Goal.Type, game)
}

// ConstrainedSets sets every example's Allowed, so that the loss is over the
// distribution the planner uses (the model's, masked to the tokens that
// extend an applicable action): it reopens each demonstration's task from
// src (an ALFWorld game rewritten with its further goal, a generated
// Blocksworld problem, a VirtualHome problem), builds the constraint
// of lm's vocabulary for it and follows the plan's tokens through it,
// recording the allowed tokens before each. examples[i] must be demos[i]'s.
// An example whose tokens leave the constraint keeps Allowed nil; their
// number is returned.
func ConstrainedSets(ctx context.Context, lm models.LM, src Sources, demos []Demo, examples []Example) (int, error) {
	if len(demos) != len(examples) {
		return 0, fmt.Errorf("train: %d demonstrations and %d examples", len(demos), len(examples))
	}
	idx, err := constraint.NewIndex(lm)
	if err != nil {
		return 0, fmt.Errorf("train: %w", err)
	}
	left := 0
	var set trie.Set
	for i, d := range demos {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("train: %w", err)
		}
		ep, err := src.open(ctx, d)
		if err != nil {
			return 0, fmt.Errorf("train: %s: %w", d.ID, err)
		}
		// The constraint as the planner builds it for this model's prompt
		// (the goal trace, when the model is trained with it).
		popts := decoder.PromptOptions{Goal: ep.Goal()}.WithKind(lm.Info().Prompt)
		sp, err := constraint.New(idx, ep.Lexicon(), constraint.Options{StopAtGoal: true, Trace: popts.Trace(ep.Lexicon())})
		if err != nil {
			return 0, fmt.Errorf("train: %s: %w", d.ID, err)
		}
		c, err := sp.Start()
		if err != nil {
			return 0, fmt.Errorf("train: %s: %w", d.ID, err)
		}
		x := &examples[i]
		if x.PromptEnd > 0 {
			// The prefix's actions were taken: follow them unrecorded.
			for _, tok := range x.Tokens[x.PromptEnd:x.PlanStart] {
				if c, err = sp.AdvanceToken(c, tok); err != nil {
					break
				}
			}
			if err != nil {
				left++
				continue
			}
		}
		sets := make([][]int32, 0, len(x.Tokens)-x.PlanStart)
		for _, tok := range x.Tokens[x.PlanStart:] {
			sp.Allowed(c, &set)
			sets = append(sets, slices.Clone(set.IDs))
			if c, err = sp.AdvanceToken(c, tok); err != nil {
				sets = nil
				break
			}
		}
		if sets == nil {
			left++
			continue
		}
		x.Allowed = sets
	}
	return left, nil
}
