package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nesy-dev/nesy/models"
)

// genOptions are the sampling options of plain generation (the Ollama
// routes). Temperature 0 is greedy.
type genOptions struct {
	temperature float64
	topK        int
	topP        float64
	seed        uint64
	numPredict  int
	stop        []string
	// onToken, when set, sees every generated token (not the end token)
	// with the logits it was drawn from (OpenAI's logprobs).
	onToken func(tok int32, logits []float32)
}

// genResult is the outcome of plain generation.
type genResult struct {
	text       string
	tokens     []int32 // generated
	reason     string  // "stop" (end token or stop string) or "length"
	promptDur  time.Duration
	genDur     time.Duration
	modelCalls int64
}

// generate continues prompt (with its images, for vision models) on a fresh
// sequence of lm, calling onText with
// each new piece of text (whole UTF-8 characters only). It stops at an end
// token, a stop string, numPredict tokens or the context length; ctx
// cancellation stops it and frees the sequence. The results are named:
// a deferred function sets res.genDur.
func generate(ctx context.Context, lm models.LM, prompt []int32, images [][]byte, o genOptions, onText func(string)) (res genResult, err error) {
	if len(prompt) == 0 {
		return res, errorf(http.StatusBadRequest, CodeBadRequest, "empty prompt")
	}
	ctxLen := lm.Info().ContextLength
	if len(prompt) >= ctxLen {
		return res, promptTooLong(&models.PromptTooLongError{Tokens: len(prompt), ContextLength: ctxLen})
	}
	limit := min(o.numPredict, ctxLen-len(prompt))
	seq, err := lm.NewSequence()
	if err != nil {
		return res, err
	}
	defer lm.Release(seq)
	vocab := lm.Vocab()
	rng := rand.New(rand.NewPCG(o.seed, 0x6e657379))
	if o.seed == 0 {
		rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	start := time.Now()
	out, err := lm.Eval(ctx, []models.EvalRequest{{Seq: seq, Tokens: prompt, Images: images}})
	if err != nil {
		return res, err
	}
	res.modelCalls++
	res.promptDur = time.Since(start)
	start = time.Now()
	defer func() { res.genDur = time.Since(start) }()

	var pending []byte // bytes not yet a whole character
	var text strings.Builder
	sent := 0 // bytes of text handed to onText
	for len(res.tokens) < limit {
		logits := out[0].Logits[len(out[0].Logits)-1]
		tok := sample(logits, vocab, o, rng)
		if slices.Contains(vocab.EOS, tok) {
			res.reason = "stop"
			break
		}
		res.tokens = append(res.tokens, tok)
		if o.onToken != nil {
			o.onToken(tok, logits)
		}
		if int(tok) < len(vocab.Text) && !vocab.Special[tok] {
			pending = append(pending, vocab.Text[tok]...)
		}
		n := completeUTF8(pending)
		text.Write(pending[:n])
		pending = pending[n:]
		// Hold back text that may be the start of a stop string.
		full := text.String()
		if i, hit := findStop(full, o.stop); hit {
			if i > sent {
				onText(full[sent:i])
			}
			res.text, res.reason = full[:i], "stop"
			return res, nil
		}
		if safe := len(full) - stopPrefixLen(full, o.stop); safe > sent {
			onText(full[sent:safe])
			sent = safe
		}
		if len(res.tokens) == limit {
			break
		}
		out, err = lm.Eval(ctx, []models.EvalRequest{{Seq: seq, Tokens: []int32{tok}}})
		if err != nil {
			return res, err
		}
		res.modelCalls++
	}
	full := text.String()
	if len(full) > sent {
		onText(full[sent:])
	}
	res.text = full
	if res.reason == "" {
		res.reason = "length"
	}
	return res, nil
}

// completeUTF8 returns how many leading bytes of b are whole UTF-8
// characters (invalid bytes count as whole, so nothing is held forever).
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			return len(b)
		}
	}
	return len(b)
}

func findStop(s string, stops []string) (int, bool) {
	best := -1
	for _, st := range stops {
		if st == "" {
			continue
		}
		if i := strings.Index(s, st); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best, best >= 0
}

// stopPrefixLen is the length of the longest suffix of s that is a proper
// prefix of a stop string.
func stopPrefixLen(s string, stops []string) int {
	n := 0
	for _, st := range stops {
		for k := min(len(st)-1, len(s)); k > n; k-- {
			if strings.HasSuffix(s, st[:k]) {
				n = k
				break
			}
		}
	}
	return n
}

// sample picks the next token: argmax at temperature 0, else a draw from
// the softmax at that temperature restricted to the top-k tokens and the
// top-p nucleus. Control tokens other than the end tokens are never picked.
func sample(logits []float32, v *models.Vocab, o genOptions, rng *rand.Rand) int32 {
	allowed := func(i int) bool {
		return i >= len(v.Special) || !v.Special[i] || slices.Contains(v.EOS, int32(i))
	}
	if o.temperature <= 0 {
		best, bv := -1, float32(math.Inf(-1))
		for i, x := range logits {
			if x > bv && allowed(i) {
				best, bv = i, x
			}
		}
		return int32(max(best, 0))
	}
	type cand struct {
		id int
		l  float64
	}
	cands := make([]cand, 0, len(logits))
	for i, x := range logits {
		if allowed(i) && !math.IsInf(float64(x), -1) {
			cands = append(cands, cand{i, float64(x)})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		switch {
		case a.l > b.l:
			return -1
		case a.l < b.l:
			return 1
		}
		return a.id - b.id
	})
	if o.topK > 0 && len(cands) > o.topK {
		cands = cands[:o.topK]
	}
	probs := make([]float64, len(cands))
	var sum float64
	for i, c := range cands {
		probs[i] = math.Exp((c.l - cands[0].l) / o.temperature)
		sum += probs[i]
	}
	if o.topP > 0 && o.topP < 1 {
		acc := 0.0
		for i := range probs {
			acc += probs[i] / sum
			if acc >= o.topP {
				probs, cands = probs[:i+1], cands[:i+1]
				break
			}
		}
		sum = 0
		for _, p := range probs {
			sum += p
		}
	}
	r := rng.Float64() * sum
	for i, p := range probs {
		r -= p
		if r <= 0 {
			return int32(cands[i].id)
		}
	}
	return int32(cands[len(cands)-1].id)
}

// parseGenOptions reads Ollama's options map (temperature, top_k, top_p,
// seed, num_predict, stop); other options are accepted and ignored, as
// Ollama ignores options a runner does not use.
func parseGenOptions(m map[string]any, maxTokens int) (genOptions, error) {
	o := genOptions{temperature: 0.8, topK: 40, topP: 0.9, numPredict: maxTokens}
	num := func(k string) (float64, bool, error) {
		v, ok := m[k]
		if !ok || v == nil {
			return 0, false, nil
		}
		f, ok := v.(float64)
		if !ok {
			return 0, false, fmt.Errorf("option %s: want a number, got %T", k, v)
		}
		return f, true, nil
	}
	var errs []error
	if f, ok, err := num("temperature"); err != nil {
		errs = append(errs, err)
	} else if ok {
		o.temperature = f
	}
	if f, ok, err := num("top_k"); err != nil {
		errs = append(errs, err)
	} else if ok {
		o.topK = int(f)
	}
	if f, ok, err := num("top_p"); err != nil {
		errs = append(errs, err)
	} else if ok {
		o.topP = f
	}
	if f, ok, err := num("seed"); err != nil {
		errs = append(errs, err)
	} else if ok && f >= 0 {
		o.seed = uint64(f)
	}
	if f, ok, err := num("num_predict"); err != nil {
		errs = append(errs, err)
	} else if ok && f > 0 {
		if int(f) > maxTokens {
			errs = append(errs, fmt.Errorf("option num_predict %d is above this server's cap of %d", int(f), maxTokens))
		}
		o.numPredict = min(int(f), maxTokens)
	}
	if v, ok := m["stop"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			errs = append(errs, fmt.Errorf("option stop: want a list of strings, got %T", v))
		}
		for _, x := range list {
			s, ok := x.(string)
			if !ok {
				errs = append(errs, fmt.Errorf("option stop: want strings, got %T", x))
				break
			}
			o.stop = append(o.stop, s)
		}
	}
	if o.temperature < 0 || o.topK < 0 || o.topP < 0 || o.topP > 1 {
		errs = append(errs, errors.New("options: temperature and top_k must not be negative, top_p must be in [0, 1]"))
	}
	if err := errors.Join(errs...); err != nil {
		return o, errorf(http.StatusBadRequest, CodeBadRequest, "%v", err)
	}
	return o, nil
}
