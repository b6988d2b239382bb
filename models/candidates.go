package models

import (
	"fmt"
	"math"
	"reflect"
	"slices"

	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/ml/nn"
	"github.com/ollama/ollama/model"
)

// Candidate logits. A constrained decoder reads the logits of the few
// tokens its constraint allows at a position (EvalRequest.Candidates), not
// the vocabulary's: for Qwen's 151,936 tokens the output projection is a
// 117M-weight matrix at a hidden size of 768, more than the rest of a small
// model, and a pass that needs only some rows of it reads or multiplies
// all of them. When every row a pass returns names its candidates, the
// engine gathers the union of their rows of the output weight
// (get_rows) and multiplies only those: the same dot products (up to the
// summation order of the kernel ggml picks for the smaller matrix), over a
// matrix of a few hundred rows. Passes with any other row (a request
// without candidates, AllLogits) compute the full projection; a pass whose
// rows nobody asked for (a prompt's earlier chunks) computes one tile of
// 16 logits. The returned rows are the same either way: the candidates'
// logits and -Inf at every other token. GPU engines compute every logit
// (ggml's CUDA get_rows lacks the k-quants output weights often use; not
// yet measured there).

// outputLinear returns the model's output projection, the field Output
// (an *nn.Linear without bias) of its struct or of a struct it embeds
// (gemma3's text model), or nil.
func outputLinear(m model.Model) *nn.Linear {
	v := reflect.ValueOf(m)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil
	}
	f, ok := v.Type().FieldByName("Output")
	if !ok || f.Type != reflect.TypeFor[*nn.Linear]() {
		return nil
	}
	fv, err := v.FieldByIndexErr(f.Index)
	if err != nil {
		return nil
	}
	l, _ := fv.Interface().(*nn.Linear)
	if l == nil || l.Weight == nil || l.Bias != nil {
		return nil
	}
	return l
}

// maxSelectShare bounds the gathered rows of a pass to this share of the
// vocabulary (1/n): beyond it the gather costs about what it saves.
const maxSelectShare = 8

// selection returns the output rows a pass computes when it need not
// compute them all: the sorted union of the candidates of its rows, or
// one token when nobody asked for its row; nil for the full projection.
func (e *Engine) selection(b *batch) []int32 {
	if e.output == nil {
		return nil
	}
	var sel []int32
	for _, p := range b.parts {
		for _, i := range p.rows {
			if !p.r.selects(i) {
				return nil
			}
			sel = append(sel, p.r.req.Candidates...)
		}
	}
	if b.dummy {
		sel = append(sel, 0)
	}
	slices.Sort(sel)
	sel = slices.Compact(sel)
	if len(sel) == 0 || len(sel)*maxSelectShare > e.tok.vocabSize {
		return nil
	}
	// Whole tiles: ggml's CPU matrix kernel (tinyBLAS) takes row counts
	// of a multiple of 4 only, and falls back to a slower dot product
	// with another summation order otherwise. The repeats of the last
	// token cost a few rows.
	for len(sel)%selectTile != 0 {
		sel = append(sel, sel[len(sel)-1])
	}
	return sel
}

// selectTile rounds a selection's rows up (see selection).
const selectTile = 16

// selects says whether row i of r is masked to the request's candidates.
func (r *reqState) selects(i int) bool {
	return r.req.Candidates != nil && !r.req.AllLogits && i == len(r.inputs)-1
}

// selectOutput makes the model's output projection compute the rows sel
// only, for the graph built until restore is called.
func (e *Engine) selectOutput(ctx ml.Context, sel []int32) (restore func()) {
	if sel == nil {
		return func() {}
	}
	w := e.output.Weight
	e.output.Weight = w.Rows(ctx, ctx.Input().FromInts(sel, len(sel)))
	return func() { e.output.Weight = w }
}

// rowOf returns logit row k of a pass's output (width columns: the
// vocabulary, or len(sel) for a pass with a selection) as a vocabulary row
// for request r's input i: masked to r's candidates when it asked for
// them (-Inf elsewhere), or just the candidates' logits when it asked for
// them compact.
func (e *Engine) rowOf(out []float32, k, width int, sel []int32, r *reqState, i int) []float32 {
	src := out[k*width : (k+1)*width]
	if !r.selects(i) {
		return slices.Clone(src)
	}
	logit := func(t int32) float32 {
		if sel == nil {
			return src[t]
		}
		j, _ := slices.BinarySearch(sel, t) // sel holds every candidate
		return src[j]
	}
	if r.req.CompactCandidates {
		row := make([]float32, len(r.req.Candidates))
		for j, t := range r.req.Candidates {
			row[j] = logit(t)
		}
		return row
	}
	return maskedRow(e.tok.vocabSize, r.req.Candidates, logit)
}

// maskedRow returns a vocabulary row holding logit(t) at each candidate t
// and -Inf everywhere else.
func maskedRow(vocab int, candidates []int32, logit func(t int32) float32) []float32 {
	row := make([]float32, vocab)
	inf := float32(math.Inf(-1))
	for j := range row {
		row[j] = inf
	}
	for _, t := range candidates {
		row[t] = logit(t)
	}
	return row
}

// checkCandidates checks that a request's candidates are in the
// vocabulary.
func checkCandidates(r EvalRequest, vocab int) error {
	for _, t := range r.Candidates {
		if t < 0 || int(t) >= vocab {
			return fmt.Errorf("models: eval: candidate token %d outside the vocabulary (%d tokens)", t, vocab)
		}
	}
	return nil
}
