package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/prior"
)

// uniformModel is the --model value of the uniform prior (zero logits).
const uniformModel = models.UniformName

// defaultModel is what --model means when it is omitted: the trained prior
// embedded in the binary.
const defaultModel = prior.Name

// ensurePrior returns the path of the embedded trained prior, written once
// into the user's cache folder (nesy/prior-<hash>.gguf).
func ensurePrior() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return prior.Ensure(filepath.Join(cache, "nesy"))
}

// loadLM loads the model a --model flag names: a GGUF path or Ollama name,
// "prior" or "" (the trained prior embedded in the binary), "tiny" (the
// generated random-weight model, see ensureTinyModel) or "uniform"
// (models.NewUniform over the tiny model's vocabulary and chat template: no
// forward pass runs). It returns the model and the name reports give it.
func loadLM(ctx context.Context, log io.Writer, model, tokenizer string, seed uint64, opts models.Options) (models.LM, string, error) {
	if model == "" {
		model = defaultModel
	}
	path, name := model, model
	if model == prior.Name {
		p, err := ensurePrior()
		if err != nil {
			return nil, "", err
		}
		path = p
	}
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
