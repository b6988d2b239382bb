package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/nesy-dev/nesy/models"
)

// uniformModel is the --model value of the uniform prior (zero logits).
const uniformModel = models.UniformName

// loadLM loads the model a --model flag names: a GGUF path or Ollama name,
// "tiny" (the generated random-weight model, see ensureTinyModel) or
// "uniform" (models.NewUniform over the tiny model's vocabulary and chat
// template: no forward pass runs). It returns the model and the name
// reports give it.
func loadLM(ctx context.Context, log io.Writer, model, tokenizer string, seed uint64, opts models.Options) (models.LM, string, error) {
	path, name := model, model
	if model == tinyModel || model == uniformModel {
		p, err := ensureTinyModel(log, tokenizer, seed)
		if err != nil {
			return nil, "", err
		}
		path = p
		if model == tinyModel {
			name = strings.TrimSuffix(filepath.Base(p), ".gguf")
		}
	}
	if model == uniformModel {
		// The base model only tokenizes: one sequence slot and a short
		// context keep its cache small.
		base := opts
		base.Sequences, base.ContextLength = 1, 512
		lm, err := models.Load(ctx, path, base)
		if err != nil {
			return nil, "", fmt.Errorf("loading the uniform prior's vocabulary (%s): %w", path, err)
		}
		return models.NewUniform(lm, 0), name, nil
	}
	lm, err := models.Load(ctx, path, opts)
	if err != nil {
		return nil, "", fmt.Errorf("loading %s: %w", model, err)
	}
	return lm, name, nil
}
