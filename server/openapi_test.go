package server

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/mcts"
)

// jsonFields returns the JSON names of a struct type's fields.
func jsonFields(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case name == "-":
			continue
		case name == "":
			name = f.Name
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// TestOpenAPIMatchesTypes checks openapi.json's schemas field by field
// against the Go types the handlers encode and decode: a field added to a
// request or response without its documentation (or documented but gone)
// fails here.
func TestOpenAPIMatchesTypes(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	types := map[string]any{
		"Error":        apiError{},
		"Position":     Position{},
		"Sampling":     SamplingParams{},
		"Search":       SearchParams{},
		"PlanRequest":  PlanRequest{},
		"TaskSummary":  TaskSummary{},
		"Timings":      Timings{},
		"PlanResponse": PlanResponse{},
		"PlanEvent":    PlanEvent{},
		"ModelInfo":    modelInfo{},
		"Health":       healthResponse{},
		"TreeNode":     mcts.TreeNode{},
		"TreeDelta":    mcts.TreeDelta{},
		// The OpenAI-compatible routes (openai.go).
		"ModelList":             modelsResponse{},
		"OpenAIModel":           openAIModel{},
		"PDDLConstraint":        PDDLConstraint{},
		"ChatMessage":           ChatMessage{},
		"StreamOptions":         StreamOptions{},
		"ChatCompletionRequest": ChatCompletionRequest{},
		"CompletionRequest":     CompletionRequest{},
		"Usage":                 Usage{},
		"TopLogprob":            TopLogprob{},
		"TokenLogprob":          TokenLogprob{},
		"ChatLogprobs":          ChatLogprobs{},
		"TextLogprobs":          TextLogprobs{},
		"ChatChoice":            ChatChoice{},
		"ChatCompletion":        ChatCompletion{},
		"ChatDelta":             ChatDelta{},
		"ChatChunkChoice":       ChatChunkChoice{},
		"ChatCompletionChunk":   ChatCompletionChunk{},
		"TextChoice":            TextChoice{},
		"TextCompletion":        TextCompletion{},
		"OpenAIError":           OpenAIError{},
		"OpenAIErrorBody":       OpenAIErrorBody{},
	}
	for name, v := range types {
		s, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("openapi.json has no schema %s", name)
			continue
		}
		var documented []string
		for p := range s.Properties {
			documented = append(documented, p)
		}
		slices.Sort(documented)
		fields := jsonFields(reflect.TypeOf(v))
		for _, f := range fields {
			if !slices.Contains(documented, f) {
				t.Errorf("%s: field %q is not documented", name, f)
			}
		}
		for _, p := range documented {
			if !slices.Contains(fields, p) {
				t.Errorf("%s: documented property %q is not a field of %T", name, p, v)
			}
		}
	}
}
