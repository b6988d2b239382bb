package models

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nesy-dev/nesy/models/gguf"
)

// testImage draws a small gradient picture; shade changes it.
func testImage(t *testing.T, shade uint8, asJPEG bool) []byte {
	t.Helper()
	m := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for y := range 30 {
		for x := range 40 {
			m.Set(x, y, color.RGBA{shade, uint8(x * 6), uint8(y * 8), 255})
		}
	}
	var b bytes.Buffer
	var err error
	if asJPEG {
		err = jpeg.Encode(&b, m, nil)
	} else {
		err = png.Encode(&b, m)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestVision runs images through a generated gemma3 model with a tiny
// SigLIP tower, over the engine's multimodal path (EncodeMultimodal,
// PostTokenize, embeddings placed in the batch), with the weights in F16
// (gemma3's default), BF16 and Q8_0 (a BF16 patch convolution aborted
// inside ggml: gguf.Write keeps it F16).
func TestVision(t *testing.T) {
	for _, dt := range []gguf.DType{gguf.F16, gguf.BF16, gguf.Q8_0} {
		t.Run(string(dt), func(t *testing.T) { testVision(t, dt) })
	}
}

func testVision(t *testing.T, dt gguf.DType) {
	spec := gguf.Default(gguf.ArchGemma3)
	spec.Vision, spec.DType = true, dt
	e := newTestEngine(t, spec, Options{})
	info := e.Info()
	if !info.Vision || info.Family != FamilyGemma3 {
		t.Fatalf("Info = %+v, want a gemma3 vision model", info)
	}
	ctx := context.Background()
	red, blue := testImage(t, 250, false), testImage(t, 5, true)
	msgs := []Message{{Role: "user", Content: "What is on the table?", Images: [][]byte{red}}}
	text, err := e.RenderChat(msgs, ChatOptions{})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := e.Tokenize(text, true)
	if err != nil {
		t.Fatal(err)
	}
	placeholders := 0
	for _, tok := range toks {
		if tok == ImageToken(0) {
			placeholders++
		}
	}
	if placeholders != 1 {
		t.Fatalf("Tokenize(%q) has %d image placeholders, want 1", text, placeholders)
	}

	eval := func(toks []int32, images [][]byte) EvalResult {
		t.Helper()
		s, err := e.NewSequence()
		if err != nil {
			t.Fatal(err)
		}
		defer e.Release(s)
		res, err := e.Eval(ctx, []EvalRequest{{Seq: s, Tokens: toks, Images: images}})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Len(s); got != res[0].Positions {
			t.Errorf("Len %d, Positions %d", got, res[0].Positions)
		}
		return res[0]
	}
	before := e.Stats().Images
	a := eval(toks, [][]byte{red})
	if a.Images != 1 || e.Stats().Images != before+1 {
		t.Errorf("Images = %d (stats +%d), want 1", a.Images, e.Stats().Images-before)
	}
	// Gemma 3 puts an image in "\n\n<start_of_image>" + 4 embeddings (the
	// pooled 2x2 patch grid) + "<end_of_image>\n\n".
	if want := len(toks) - 1 + spec.TokensPerImageOrDefault() + 4; a.Positions != want {
		t.Errorf("Positions = %d, want %d", a.Positions, want)
	}
	b := eval(toks, [][]byte{blue})
	if maxAbsDiff(a.Logits[0], b.Logits[0]) == 0 {
		t.Error("logits do not depend on the image")
	}
	again := eval(toks, [][]byte{red})
	assertClose(t, "same image twice", again.Logits[0], a.Logits[0], 1e-5)

	// An image request batched with a text request gets its logits alone.
	textToks := testTokens(3, 9, info.VocabSize)
	textAlone := evalAlone(t, e, textToks)
	s1, _ := e.NewSequence()
	s2, _ := e.NewSequence()
	res, err := e.Eval(ctx, []EvalRequest{{Seq: s1, Tokens: toks, Images: [][]byte{red}}, {Seq: s2, Tokens: textToks}})
	if err != nil {
		t.Fatal(err)
	}
	assertClose(t, "image request in a batch", res[0].Logits[0], a.Logits[0], tolFor(e))
	assertClose(t, "text request beside an image", res[1].Logits[0], textAlone[len(textAlone)-1], tolFor(e))

	// A fork after the image continues as the original does.
	f, err := e.Fork(s1, e.Len(s1))
	if err != nil {
		t.Fatal(err)
	}
	next := []int32{5, 6}
	r1, err := e.Eval(ctx, []EvalRequest{{Seq: f, Tokens: next}})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := e.Eval(ctx, []EvalRequest{{Seq: s1, Tokens: next}})
	if err != nil {
		t.Fatal(err)
	}
	assertClose(t, "fork after an image", r1[0].Logits[0], r2[0].Logits[0], tolFor(e))

	// Images not referenced by a placeholder go before the tokens.
	if r := eval([]int32{7, 8}, [][]byte{blue}); r.Images != 1 || r.Positions != 2+spec.TokensPerImageOrDefault()+4 {
		t.Errorf("unreferenced image: %d images, %d positions", r.Images, r.Positions)
	}

	// Bad images fail cleanly and leave the sequence as it was.
	s3, _ := e.NewSequence()
	for _, bad := range [][]EvalRequest{
		{{Seq: s3, Tokens: []int32{ImageToken(0), 5}, Images: [][]byte{[]byte("not an image")}}},
		{{Seq: s3, Tokens: []int32{ImageToken(1), 5}, Images: [][]byte{red}}},
	} {
		if _, err := e.Eval(ctx, bad); err == nil {
			t.Errorf("Eval(%v) succeeded", bad[0].Tokens)
		}
		if e.Len(s3) != 0 {
			t.Errorf("Len after a failed image request = %d", e.Len(s3))
		}
	}
}

// TestNoVisionModel: text models leave images out of chats and refuse
// image placeholders.
func TestNoVisionModel(t *testing.T) {
	e := newTestEngine(t, gguf.Default(gguf.ArchQwen3), Options{})
	msgs := []Message{{Role: "user", Content: "hi", Images: [][]byte{testImage(t, 1, false)}}}
	text, _ := e.RenderChat(msgs, ChatOptions{})
	toks, _ := e.Tokenize(text+"[img-0]", true)
	for _, tok := range toks {
		if tok < 0 {
			t.Fatalf("text model produced an image placeholder: %v", toks)
		}
	}
	s, _ := e.NewSequence()
	_, err := e.Eval(context.Background(), []EvalRequest{{Seq: s, Tokens: []int32{ImageToken(0)}, Images: [][]byte{{1}}}})
	if !errors.Is(err, ErrNoVision) {
		t.Errorf("Eval with an image on a text model: %v", err)
	}
}

// TestVisionUnsupportedKernel: a file whose patch convolution's kernel is
// BF16 (ggml's convolution aborts the process on it, at the first image)
// loads as a text model: an image request fails with ErrNoVision naming
// the tensor and its type, and text still evaluates.
func TestVisionUnsupportedKernel(t *testing.T) {
	spec := gguf.Default(gguf.ArchGemma3)
	spec.Vision = true // F16 weights: the kernel is F16 in the file
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := gguf.Write(path, spec); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The tensor's header entry: its name, 4 dimensions, then its type. F16
	// and BF16 take the same bytes, so only the type changes.
	name := "v.patch_embedding.weight"
	i := bytes.Index(data, []byte(name))
	if i < 0 {
		t.Fatalf("%s not in the file", name)
	}
	at := i + len(name) + 4 + 4*8
	if dims := binary.LittleEndian.Uint32(data[i+len(name):]); dims != 4 {
		t.Fatalf("%s has %d dimensions, want 4", name, dims)
	}
	if typ := binary.LittleEndian.Uint32(data[at:]); typ != 1 {
		t.Fatalf("%s has type %d, want F16 (1)", name, typ)
	}
	binary.LittleEndian.PutUint32(data[at:], 30) // BF16
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := Load(context.Background(), path, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if info := e.Info(); info.Vision || !strings.Contains(info.VisionOff, name) {
		t.Errorf("Info(): Vision %v, VisionOff %q; want false and the reason naming %s", info.Vision, info.VisionOff, name)
	}
	s, err := e.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Eval(context.Background(), []EvalRequest{{Seq: s, Tokens: []int32{ImageToken(0)}, Images: [][]byte{testImage(t, 9, false)}}})
	if !errors.Is(err, ErrNoVision) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "BF16") {
		t.Errorf("an image on the BF16-kernel model: %v, want ErrNoVision naming %s and BF16", err, name)
	}
	if _, err := e.Eval(context.Background(), []EvalRequest{{Seq: s, Tokens: testTokens(1, 8, e.Info().VocabSize)}}); err != nil {
		t.Errorf("text on the same model: %v", err)
	}
}

// sizedImage is a w x h PNG with a gradient (shade in the red channel).
func sizedImage(t *testing.T, w, h int, shade uint8) []byte {
	t.Helper()
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.Set(x, y, color.RGBA{shade, uint8(x * 255 / w), uint8(y * 255 / h), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestQwen35Vision: a Qwen3.5 model (qwen35 and qwen35moe) that carries
// its vision tower (as Ollama's GGUFs of it do) runs every pass through
// hybridForward, so its searches keep batching: an image prompt and its
// continuation give the logits of the model's own Forward (one sequence a
// pass, images placed by Ollama's PostTokenize), forks of the image
// sequence evaluated in one pass beside a text-only sequence give the
// Forward's logits and the text sequence's alone, an image in a later
// request is placed as in a first one, cuts before an image continue as a
// sequence without one, and a cut that would recompute an image is
// refused.
func TestQwen35Vision(t *testing.T) {
	partial := gguf.Default(gguf.ArchQwen35)
	partial.HeadDim, partial.RopeDim = 32, 8 // rotary on a quarter of each head, as Qwen3.5
	for name, spec := range map[string]gguf.Spec{"qwen35": gguf.Default(gguf.ArchQwen35), "qwen35moe": gguf.Default(gguf.ArchQwen35MoE), "qwen35-partial-rope": partial} {
		t.Run(name, func(t *testing.T) {
			spec.Vision = true
			testQwen35Vision(t, spec)
		})
	}
}

func testQwen35Vision(t *testing.T, spec gguf.Spec) {
	e := newTestEngine(t, spec, Options{})
	if !e.Info().Vision || e.hybrid == nil || e.hybrid.merge != 2 || len(e.hybrid.mrope) == 0 {
		t.Fatalf("Info %+v, hybrid %v: want a vision model run by hybridForward with multi-axis RoPE", e.Info(), e.hybrid)
	}
	ref := newTestEngine(t, spec, Options{noHybrid: true})
	if ref.hybrid != nil {
		t.Fatal("reference engine has a hybridForward")
	}
	ctx := context.Background()
	vocab := e.Info().VocabSize
	img := sizedImage(t, 300, 200, 90) // 4x2 merged patches after resizing
	prompt := append(testTokens(1, 5, vocab), ImageToken(0))
	prompt = append(prompt, testTokens(2, 4, vocab)...)
	newSeq := func(e *Engine) SeqID {
		s, err := e.NewSequence()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	eval := func(e *Engine, reqs ...EvalRequest) []EvalResult {
		t.Helper()
		res, err := e.Eval(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	last := func(r EvalResult) []float32 { return r.Logits[len(r.Logits)-1] }

	se, sr := newSeq(e), newSeq(ref)
	ge := eval(e, EvalRequest{Seq: se, Tokens: prompt, Images: [][]byte{img}, AllLogits: true})[0]
	gr := eval(ref, EvalRequest{Seq: sr, Tokens: prompt, Images: [][]byte{img}, AllLogits: true})[0]
	if ge.Images != 1 || ge.Positions != gr.Positions || len(ge.Logits) != len(gr.Logits) || len(ge.Logits) != len(prompt)-1 {
		t.Fatalf("image prompt: %d images, %d positions, %d rows; reference %d positions, %d rows", ge.Images, ge.Positions, len(ge.Logits), gr.Positions, len(gr.Logits))
	}
	for i := range ge.Logits {
		assertClose(t, fmt.Sprintf("image prompt, text row %d", i), ge.Logits[i], gr.Logits[i], 1e-3)
	}
	cont := testTokens(3, 6, vocab)
	assertClose(t, "continuation", last(eval(e, EvalRequest{Seq: se, Tokens: cont})[0]), last(eval(ref, EvalRequest{Seq: sr, Tokens: cont})[0]), 1e-3)

	// Two forks of the image sequence and a text-only sequence, one token
	// each, in one pass.
	text := testTokens(4, 7, vocab)
	sb := newSeq(e)
	eval(e, EvalRequest{Seq: sb, Tokens: text})
	fork := func(e *Engine, s SeqID, back int) SeqID {
		t.Helper()
		f, err := e.Fork(s, e.Len(s)-back)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f1, f2 := fork(e, se, 0), fork(e, se, 2)
	tok := testTokens(5, 3, vocab)
	calls := e.Stats().ModelCalls
	got := eval(e, EvalRequest{Seq: f1, Tokens: tok[:1]}, EvalRequest{Seq: f2, Tokens: tok[1:2]}, EvalRequest{Seq: sb, Tokens: tok[2:3]})
	if n := e.Stats().ModelCalls - calls; n != 1 {
		t.Errorf("three one-token requests took %d passes, want 1", n)
	}
	r1, r2 := fork(ref, sr, 0), fork(ref, sr, 2)
	assertClose(t, "fork at the end", last(got[0]), last(eval(ref, EvalRequest{Seq: r1, Tokens: tok[:1]})[0]), 1e-3)
	assertClose(t, "fork two back", last(got[1]), last(eval(ref, EvalRequest{Seq: r2, Tokens: tok[1:2]})[0]), 1e-3)
	// The text-only sequence alone, on an engine that has seen no image.
	alone := newTestEngine(t, spec, Options{})
	sa := newSeq(alone)
	eval(alone, EvalRequest{Seq: sa, Tokens: text})
	assertClose(t, "text sequence beside the forks", last(got[2]), last(eval(alone, EvalRequest{Seq: sa, Tokens: tok[2:3]})[0]), 1e-3)

	// An image in a later request of a sequence is placed as in one
	// request from the start (which the model's Forward was checked
	// against above), and a fork from before the image continues as a
	// sequence that never had one.
	sx := newSeq(e)
	eval(e, EvalRequest{Seq: sx, Tokens: prompt[:5]})
	mid := eval(e, EvalRequest{Seq: sx, Tokens: prompt[5:], Images: [][]byte{img}})[0]
	assertClose(t, "image in a second request", last(mid), last(ge), 1e-3)
	assertClose(t, "its continuation", last(eval(e, EvalRequest{Seq: sx, Tokens: cont})[0]), last(eval(ref, EvalRequest{Seq: newSeqWith(t, ref, prompt, img), Tokens: cont})[0]), 1e-3)
	before, err := e.Fork(sx, 5)
	if err != nil {
		t.Fatal(err)
	}
	st := newSeq(alone)
	eval(alone, EvalRequest{Seq: st, Tokens: prompt[:5]})
	want := last(eval(alone, EvalRequest{Seq: st, Tokens: cont})[0])
	assertClose(t, "fork before the image", last(eval(e, EvalRequest{Seq: before, Tokens: cont})[0]), want, 1e-3)
	if err := e.Truncate(sx, 5); err != nil {
		t.Fatal(err)
	}
	assertClose(t, "truncated before the image", last(eval(e, EvalRequest{Seq: sx, Tokens: cont})[0]), want, 1e-3)
	// Past where the image's positions ended before the truncation.
	more := testTokens(6, 24, vocab)
	for i := range 2 {
		assertClose(t, fmt.Sprintf("truncated, further on (%d)", i), last(eval(e, EvalRequest{Seq: sx, Tokens: more})[0]), last(eval(alone, EvalRequest{Seq: st, Tokens: more})[0]), 1e-3)
	}

	// A cut inside an image prompt cannot be recomputed (no state
	// checkpoint there, the image's embeddings are gone): Truncate and
	// Fork say so at once, and the sequence holds what its cache kept, from
	// which the prompt can be evaluated again.
	sy := newSeqWith(t, e, prompt, img)
	if _, err := e.Fork(sy, 3); !errors.Is(err, ErrUnsupported) {
		t.Errorf("fork inside an image prompt: %v, want ErrUnsupported", err)
	}
	if err := e.Truncate(sy, 3); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("truncate inside an image prompt: %v, want ErrUnsupported", err)
	}
	if n := e.Len(sy); n != 0 {
		t.Fatalf("after the refused cut the sequence holds %d positions, want 0 (no checkpoint)", n)
	}
	again := eval(e, EvalRequest{Seq: sy, Tokens: prompt, Images: [][]byte{img}})[0]
	assertClose(t, "the image prompt again", last(again), last(ge), 1e-3)

	// Images the model cannot take are ErrBadImage, not engine failures:
	// a strip thinner than the patch grid (Qwen3-VL's processor panics on
	// it) and bytes that are no image; the sequence is left as it was.
	for name, bad := range map[string][]byte{"thin strip": sizedImage(t, 600, 8, 10), "not an image": []byte("GIF89a, or nothing")} {
		n := e.Len(sy)
		_, err := e.Eval(ctx, []EvalRequest{{Seq: sy, Tokens: []int32{ImageToken(0)}, Images: [][]byte{bad}}})
		if !errors.Is(err, ErrBadImage) {
			t.Errorf("%s: %v, want ErrBadImage", name, err)
		}
		if e.Len(sy) != n {
			t.Errorf("%s: the sequence went from %d to %d positions", name, n, e.Len(sy))
		}
	}
	// A job that fails leaves no rotary shift behind on a request of it
	// that was prepared (the good image's, ahead of the bad one).
	sg, sb := newSeq(e), newSeq(e)
	if _, err := e.Eval(ctx, []EvalRequest{{Seq: sg, Tokens: prompt, Images: [][]byte{img}}, {Seq: sb, Tokens: []int32{ImageToken(0)}, Images: [][]byte{[]byte("no image")}}}); !errors.Is(err, ErrBadImage) {
		t.Fatalf("a job with a bad image: %v, want ErrBadImage", err)
	}
	sf := newSeq(alone)
	for i := range 3 {
		assertClose(t, fmt.Sprintf("after the failed job (%d)", i), last(eval(e, EvalRequest{Seq: sg, Tokens: more})[0]), last(eval(alone, EvalRequest{Seq: sf, Tokens: more})[0]), 1e-3)
	}
}

// newSeqWith starts a sequence of e with an image prompt.
func newSeqWith(t *testing.T, e *Engine, prompt []int32, img []byte) SeqID {
	t.Helper()
	s, err := e.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Eval(context.Background(), []EvalRequest{{Seq: s, Tokens: prompt, Images: [][]byte{img}}}); err != nil {
		t.Fatal(err)
	}
	return s
}
