package models

import (
	"github.com/ollama/ollama/model/input"
	"github.com/ollama/ollama/model/models/qwen3vl"
)

// ropeMark says that from logical position at on, a sequence's positions
// are rotated as position - shift: Qwen3.5's multi-axis RoPE gives an
// image's tokens one time position (its grid spreads them over the height
// and width axes) and the text after it the time position after the grid's
// longer side, so a sequence's rotary positions fall behind its logical
// ones by each image's tokens less that side (what Ollama's PostTokenize
// lays out for one request from position 0; here kept per sequence, so
// images anywhere in a sequence, forks and other sequences beside it keep
// their own positions).
type ropeMark struct {
	at    int
	shift int32
}

// shiftAt is the shift of logical position pos under marks.
func shiftAt(marks []ropeMark, pos int) int32 {
	var s int32
	for _, m := range marks {
		if m.at > pos {
			break
		}
		s = m.shift
	}
	return s
}

// marksUpTo returns the marks that apply to the first n positions (a copy).
func marksUpTo(marks []ropeMark, n int) []ropeMark {
	var out []ropeMark
	for _, m := range marks {
		if m.at <= n {
			out = append(out, m)
		}
	}
	return out
}

// ropePositions lays out the rotary time positions of a request's inputs
// for a model whose images shift positions (mergeSize > 0: the vision
// tower merges mergeSize x mergeSize patches per token): the pending
// recomputation's (pre inputs from logical position start-pre) by the
// sequence's marks, then the request's own, an image's tokens (the input
// with its Grid and the tokens after it) all at one position and the
// input after them the grid's longer side further on. It returns nil when
// every position is its logical one (no image in the sequence or the
// request), and the shift after the request's last input.
func ropePositions(marks []ropeMark, inputs []*input.Input, pre, start, mergeSize int) ([]int32, int32) {
	shift := shiftAt(marks, start)
	images := false
	for _, in := range inputs[pre:] {
		if in.Multimodal != nil {
			images = true
		}
	}
	if !images && len(marks) == 0 {
		return nil, 0
	}
	rope := make([]int32, len(inputs))
	for i := range pre {
		pos := start - pre + i
		rope[i] = int32(pos) - shiftAt(marks, pos)
	}
	p := int32(start) - shift
	for i := pre; i < len(inputs); i++ {
		in := inputs[i]
		var grid *qwen3vl.Grid
		if len(in.Multimodal) > 0 {
			grid, _ = in.Multimodal[0].Data.(*qwen3vl.Grid)
		}
		if grid == nil || in.Multimodal[0].Tensor == nil {
			rope[i] = p
			p++
			continue
		}
		tokens := in.Multimodal[0].Tensor.Dim(1)
		for j := 0; j < tokens && i+j < len(inputs); j++ {
			rope[i+j] = p
		}
		i += tokens - 1
		p += int32(max(grid.Width/mergeSize, grid.Height/mergeSize))
	}
	return rope, int32(start+len(inputs)-pre) - p
}
