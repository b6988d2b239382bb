package models

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"image"
	"image/png"

	"github.com/nesy-dev/nesy/models/ggmlthread"
	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/model"
	"github.com/ollama/ollama/model/input"
)

// mmStore holds the image embeddings of one request. A compute graph can't
// use another graph's tensors, so each image's encoder output is computed
// once when the image is encoded and copied into every batch that needs
// it (an image's positions may be split over passes only where the model
// allows it).
type mmStore struct {
	b       ml.Backend
	run     *ggmlthread.Runner // the engine's: encoder passes hold the device locks
	ctxs    []ml.Context       // encoder graphs, kept while the request runs (their tensors carry shapes and metadata)
	entries map[ml.Tensor]*mmEntry
}

type mmEntry struct {
	shape   []int
	dtype   ml.DType
	data    []float32
	reserve bool
}

func newMMStore(b ml.Backend, run *ggmlthread.Runner) *mmStore {
	return &mmStore{b: b, run: run, entries: map[ml.Tensor]*mmEntry{}}
}

// encode runs the vision encoder on one PNG or JPEG image. An image that
// does not decode, or whose preprocessing panics with a message (Ollama's
// image processors panic on sizes they cannot take), is an ErrBadImage;
// other panics (an error value: out of memory) are engine failures.
func (s *mmStore) encode(p model.MultimodalProcessor, img []byte) (mm []input.Multimodal, err error) {
	defer func() {
		if r := recover(); r != nil {
			if msg, ok := r.(string); ok {
				err = fmt.Errorf("%w: the vision encoder rejected it: %s", ErrBadImage, msg)
				return
			}
			err = panicError(r)
		}
	}()
	if _, _, err := image.DecodeConfig(bytes.NewReader(img)); err != nil {
		return nil, fmt.Errorf("%w: not a PNG or JPEG image: %v", ErrBadImage, err)
	}
	ctx := s.b.NewContext()
	s.ctxs = append(s.ctxs, ctx)
	mm, err = p.EncodeMultimodal(ctx, img)
	if err != nil {
		return nil, err
	}
	var ts []ml.Tensor
	for _, m := range mm {
		if m.Tensor != nil {
			ts = append(ts, m.Tensor)
		}
	}
	if len(ts) == 0 {
		return mm, nil
	}
	ctx.Forward(ts...)
	ctx.SetBatchSize(512) // an encoder pass is as heavy as a large batch
	unlock := s.run.LockBackend(s.b)
	defer unlock()
	ctx.Compute(ts...)
	for _, t := range ts {
		s.entries[t] = &mmEntry{shape: t.Shape(), dtype: t.DType(), data: t.Floats()}
	}
	return mm, nil
}

// tensors recreates a request's image tensors in a batch's graph.
func (s *mmStore) tensors(ctx ml.Context, in []input.Multimodal) ([]input.Multimodal, error) {
	out := make([]input.Multimodal, len(in))
	for i, m := range in {
		out[i].Data = m.Data
		if m.Tensor == nil {
			continue
		}
		e, ok := s.entries[m.Tensor]
		if !ok {
			return nil, fmt.Errorf("models: image embedding missing from the request's store")
		}
		if e.reserve {
			out[i].Tensor = ctx.Input().Empty(e.dtype, e.shape...)
		} else {
			out[i].Tensor = ctx.Input().FromFloats(e.data, e.shape...)
		}
	}
	return out, nil
}

// reserveImage builds the encoder graph for a large image (2048x2048) and
// reserves its memory, returning up to n inputs that place the image in a
// batch, as the worst case for reservation.
func (s *mmStore) reserveImage(p model.MultimodalProcessor, n int) ([]*input.Input, bool) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 2048, 2048))); err != nil {
		return nil, false
	}
	ctx := s.b.NewContext()
	s.ctxs = append(s.ctxs, ctx)
	mm, err := p.EncodeMultimodal(ctx, buf.Bytes())
	if err != nil {
		return nil, false
	}
	var ts []ml.Tensor
	for _, m := range mm {
		if m.Tensor != nil {
			ts = append(ts, m.Tensor)
		}
	}
	if len(ts) > 0 {
		ctx.Forward(ts...)
		ctx.SetBatchSize(512)
		ctx.Reserve()
	}
	for _, t := range ts {
		s.entries[t] = &mmEntry{shape: t.Shape(), dtype: t.DType(), reserve: true}
	}
	inputs, err := p.PostTokenize([]*input.Input{{Multimodal: mm}})
	if err != nil || len(inputs) == 0 {
		return nil, false
	}
	if g := 1 + inputs[0].SameBatch; g > n {
		inputs = inputs[:min(g, len(inputs))]
	} else {
		for i := 0; i < len(inputs); {
			g := 1 + inputs[i].SameBatch
			if i+g > n {
				inputs = inputs[:i]
				break
			}
			i += g
		}
	}
	for len(inputs) < n {
		inputs = append(inputs, &input.Input{})
	}
	return inputs, true
}

func (s *mmStore) close() {
	if s == nil {
		return
	}
	for _, c := range s.ctxs {
		c.Close()
	}
	s.ctxs = nil
}

// requestInputs turns a request's tokens and images into engine inputs,
// encoding the images and letting the model lay out their positions
// (PostTokenize). text marks the inputs that are the request's own text
// tokens.
func (e *Engine) requestInputs(r *reqState) (ins []*input.Input, text []bool, images int, err error) {
	req := r.req
	referenced := make([]bool, len(req.Images))
	for _, t := range req.Tokens {
		if n, ok := imageIndex(t); ok {
			referenced[n] = true
		}
	}
	isText := map[*input.Input]bool{}
	addImage := func(n int) error {
		if r.mm == nil {
			r.mm = newMMStore(e.model.Backend(), e.runner)
		}
		mm, err := r.mm.encode(e.mm, req.Images[n])
		if err != nil {
			return fmt.Errorf("models: image %d: %w", n, err)
		}
		h := fnv.New64a()
		h.Write(req.Images[n])
		ins = append(ins, &input.Input{Multimodal: mm, MultimodalHash: h.Sum64()})
		images++
		return nil
	}
	for n, ref := range referenced {
		if !ref {
			if err := addImage(n); err != nil {
				return nil, nil, 0, err
			}
		}
	}
	for _, t := range req.Tokens {
		if n, ok := imageIndex(t); ok {
			if err := addImage(n); err != nil {
				return nil, nil, 0, err
			}
			continue
		}
		in := &input.Input{Token: t}
		isText[in] = true
		ins = append(ins, in)
	}
	if images > 0 {
		if ins, err = e.postTokenize(ins); err != nil {
			return nil, nil, 0, fmt.Errorf("models: laying out images: %w", err)
		}
	}
	text = make([]bool, len(ins))
	for i, in := range ins {
		text[i] = isText[in]
	}
	return ins, text, images, nil
}

func (e *Engine) postTokenize(ins []*input.Input) (out []*input.Input, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(r)
		}
	}()
	return e.mm.PostTokenize(ins)
}
