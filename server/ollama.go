package server

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/ollama/ollama/api"
	ollamamodel "github.com/ollama/ollama/types/model"

	"github.com/nesy-dev/nesy/models"
)

// The Ollama-compatible subset: GET /api/version, GET /api/tags, POST
// /api/generate and POST /api/chat, with the request and response types of
// github.com/ollama/ollama/api, so Ollama's own client and tools work
// against nesy. Generation is plain (unconstrained) sampling through the same
// engines, admission queue and metrics as /v1/plan. Not supported (400):
// format (structured output), tools, suffix, a custom template.

func (s *Server) handleTags(w http.ResponseWriter, r *http.Request) {
	resp := api.ListResponse{Models: []api.ListModelResponse{}}
	for _, m := range s.models.list() {
		lm := api.ListModelResponse{Name: m.Name, Model: m.Name, ModifiedAt: m.Modified, Size: m.Size, Digest: m.Digest,
			Details: api.ModelDetails{Format: "gguf", Family: m.Arch}}
		if m.Arch != "" {
			lm.Details.Families = []string{m.Arch}
		}
		if m.Params > 0 {
			lm.Details.ParameterSize = formatParams(m.Params)
		}
		resp.Models = append(resp.Models, lm)
	}
	writeJSON(w, http.StatusOK, resp)
}

// handleShow answers POST /api/show: a model's details from its GGUF
// metadata, without loading it.
func (s *Server) handleShow(w http.ResponseWriter, r *http.Request) {
	var req api.ShowRequest
	if err := decodeJSON(r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	name := req.Model
	if name == "" {
		name = req.Name
	}
	if name == "" {
		writeError(w, errorf(http.StatusBadRequest, CodeBadRequest, "no model given"))
		return
	}
	canon, path, err := s.models.resolve(name)
	if err != nil {
		writeError(w, err)
		return
	}
	info, err := models.ReadFileInfo(path)
	if err != nil {
		writeError(w, s.models.hidePaths(loadError(canon, path, err)))
		return
	}
	resp := api.ShowResponse{
		Details: api.ModelDetails{Format: "gguf", Family: info.Arch, Families: []string{info.Arch}, QuantizationLevel: info.FileType},
		ModelInfo: map[string]any{"general.architecture": info.Arch, info.Arch + ".context_length": info.ContextLength,
			"general.parameter_count": info.Params},
		Capabilities: []ollamamodel.Capability{ollamamodel.CapabilityCompletion},
	}
	if info.Params > 0 {
		resp.Details.ParameterSize = formatParams(info.Params)
	}
	if info.Vision {
		resp.Capabilities = append(resp.Capabilities, ollamamodel.CapabilityVision)
	}
	if fi, err := os.Stat(path); err == nil {
		resp.ModifiedAt = fi.ModTime()
	}
	writeJSON(w, http.StatusOK, resp)
}

// handlePs answers GET /api/ps: the loaded models, as Ollama's ps.
func (s *Server) handlePs(w http.ResponseWriter, r *http.Request) {
	resp := api.ProcessResponse{Models: []api.ProcessModelResponse{}}
	for _, m := range s.models.list() {
		if !m.Loaded {
			continue
		}
		pm := api.ProcessModelResponse{Name: m.Name, Model: m.Name, Size: m.Size, Digest: m.Digest, ExpiresAt: m.ExpiresAt,
			ContextLength: m.ContextLength, Details: api.ModelDetails{Format: "gguf", Family: m.Arch, Families: []string{m.Arch}}}
		if m.Params > 0 {
			pm.Details.ParameterSize = formatParams(m.Params)
		}
		if m.Device != "" && m.Device != "CPU" {
			pm.SizeVRAM = m.Size
		}
		resp.Models = append(resp.Models, pm)
	}
	writeJSON(w, http.StatusOK, resp)
}

// formatParams writes a parameter count as Ollama does ("4.0B", "134M").
func formatParams(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.0fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// genCall is one plain-generation request, after its route's own parsing.
type genCall struct {
	model  string
	stream bool
	opts   genOptions
	render func(lm models.LM) ([]int32, [][]byte, error) // prompt tokens and images
	send   func(st *ndjson, created time.Time, model, piece string)
	finish func(created time.Time, model string, res genResult, prompt []int32, m api.Metrics) any
	// loadOnly: nothing to generate (an empty prompt or no messages), as
	// Ollama's clients send to load a model; the answer is done at once
	// with done_reason "load".
	loadOnly bool
	// unload: loadOnly with keep_alive 0, as `ollama stop` sends: the
	// model is unloaded if idle (never the server's default model) and the
	// answer's done_reason is "unload".
	unload bool
}

// unloads reports whether a load-only request asks to unload (keep_alive 0).
func unloads(loadOnly bool, keepAlive *api.Duration) bool {
	return loadOnly && keepAlive != nil && keepAlive.Duration == 0
}

func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request) {
	var req api.GenerateRequest
	if err := decodeJSON(r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	if err := unsupported(req.Format, nil, req.Suffix, req.Template); err != nil {
		writeError(w, err)
		return
	}
	opts, err := parseGenOptions(req.Options, s.opts.MaxTokens)
	if err != nil {
		writeError(w, err)
		return
	}
	think := req.Think != nil && req.Think.Bool()
	call := genCall{model: req.Model, stream: req.Stream == nil || *req.Stream, opts: opts,
		loadOnly: req.Prompt == "" && len(req.Images) == 0 && len(req.Context) == 0}
	call.unload = unloads(call.loadOnly, req.KeepAlive)
	call.render = func(lm models.LM) ([]int32, [][]byte, error) {
		var ctxToks []int32
		for _, t := range req.Context {
			if t < 0 || t >= lm.Info().VocabSize {
				return nil, nil, errorf(http.StatusBadRequest, CodeBadRequest, "context: token %d is not in the vocabulary", t)
			}
			ctxToks = append(ctxToks, int32(t))
		}
		var images [][]byte
		for _, im := range req.Images {
			images = append(images, im)
		}
		text := req.Prompt
		if !req.Raw {
			var msgs []models.Message
			if req.System != "" {
				msgs = append(msgs, models.Message{Role: "system", Content: req.System})
			}
			msgs = append(msgs, models.Message{Role: "user", Content: req.Prompt, Images: images})
			var err error
			if text, err = lm.RenderChat(msgs, models.ChatOptions{Think: think}); err != nil {
				return nil, nil, errorf(http.StatusBadRequest, CodeBadRequest, "rendering the prompt: %v", err)
			}
			images = models.ChatImages(msgs)
		}
		toks, err := lm.Tokenize(text, true)
		if err != nil {
			return nil, nil, errorf(http.StatusBadRequest, CodeBadRequest, "tokenizing the prompt: %v", err)
		}
		if req.Raw && len(ctxToks) == 0 {
			if bos := lm.Vocab().BOS; bos >= 0 && (len(toks) == 0 || toks[0] != bos) {
				toks = append([]int32{bos}, toks...)
			}
		}
		return append(ctxToks, toks...), images, nil
	}
	call.send = func(st *ndjson, created time.Time, model, piece string) {
		st.send(api.GenerateResponse{Model: model, CreatedAt: created, Response: piece})
	}
	call.finish = func(created time.Time, model string, res genResult, prompt []int32, m api.Metrics) any {
		resp := api.GenerateResponse{Model: model, CreatedAt: created, Done: true, DoneReason: res.reason, Metrics: m}
		if !call.stream {
			resp.Response = res.text
		}
		for _, t := range prompt {
			resp.Context = append(resp.Context, int(t))
		}
		for _, t := range res.tokens {
			resp.Context = append(resp.Context, int(t))
		}
		return resp
	}
	s.serveGeneration(w, r, &call)
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var req api.ChatRequest
	if err := decodeJSON(r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	if err := unsupported(req.Format, req.Tools, "", ""); err != nil {
		writeError(w, err)
		return
	}
	opts, err := parseGenOptions(req.Options, s.opts.MaxTokens)
	if err != nil {
		writeError(w, err)
		return
	}
	think := req.Think != nil && req.Think.Bool()
	call := genCall{model: req.Model, stream: req.Stream == nil || *req.Stream, opts: opts, loadOnly: len(req.Messages) == 0}
	call.unload = unloads(call.loadOnly, req.KeepAlive)
	call.render = func(lm models.LM) ([]int32, [][]byte, error) {
		var msgs []models.Message
		for i, m := range req.Messages {
			switch m.Role {
			case "system", "user", "assistant", "tool":
			default:
				return nil, nil, errorf(http.StatusBadRequest, CodeBadRequest, "messages[%d]: role %q is not supported (want system, user, assistant or tool)", i, m.Role)
			}
			mm := models.Message{Role: m.Role, Content: m.Content}
			for _, im := range m.Images {
				mm.Images = append(mm.Images, im)
			}
			msgs = append(msgs, mm)
		}
		text, err := lm.RenderChat(msgs, models.ChatOptions{Think: think})
		if err != nil {
			return nil, nil, errorf(http.StatusBadRequest, CodeBadRequest, "rendering the chat: %v", err)
		}
		toks, err := lm.Tokenize(text, true)
		if err != nil {
			return nil, nil, errorf(http.StatusBadRequest, CodeBadRequest, "tokenizing the chat: %v", err)
		}
		return toks, models.ChatImages(msgs), nil
	}
	call.send = func(st *ndjson, created time.Time, model, piece string) {
		st.send(api.ChatResponse{Model: model, CreatedAt: created, Message: api.Message{Role: "assistant", Content: piece}})
	}
	call.finish = func(created time.Time, model string, res genResult, prompt []int32, m api.Metrics) any {
		resp := api.ChatResponse{Model: model, CreatedAt: created, Done: true, DoneReason: res.reason, Metrics: m,
			Message: api.Message{Role: "assistant"}}
		if !call.stream {
			resp.Message.Content = res.text
		}
		return resp
	}
	s.serveGeneration(w, r, &call)
}

func unsupported(format []byte, tools api.Tools, suffix, template string) error {
	switch {
	case len(format) > 0 && string(format) != "null" && string(format) != `""`:
		return errorf(http.StatusBadRequest, CodeBadRequest, "format (structured output) is not supported by nesy's Ollama-compatible routes; use /v1/plan for constrained plans")
	case len(tools) > 0:
		return errorf(http.StatusBadRequest, CodeBadRequest, "tools are not supported by nesy's Ollama-compatible routes")
	case suffix != "":
		return errorf(http.StatusBadRequest, CodeBadRequest, "suffix (fill in the middle) is not supported")
	case template != "":
		return errorf(http.StatusBadRequest, CodeBadRequest, "a custom template is not supported; send raw: true with a rendered prompt")
	}
	return nil
}

// serveGeneration runs one plain generation: admission, model, prompt,
// sampling, streaming or one JSON answer.
func (s *Server) serveGeneration(w http.ResponseWriter, r *http.Request, call *genCall) {
	start := time.Now()
	name, _, err := s.models.resolve(call.model)
	if err != nil {
		writeError(w, err) // unknown model: no need to queue
		return
	}
	if call.unload {
		s.models.unload(call.model)
		writeJSON(w, http.StatusOK, call.finish(time.Now().UTC(), name, genResult{reason: "unload"}, nil,
			api.Metrics{TotalDuration: time.Since(start)}))
		return
	}
	ctx, cancel := s.workContext(r)
	defer cancel()
	release, _, err := s.admit(ctx)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	lstart := time.Now()
	entry, done, err := s.models.acquire(ctx, call.model)
	if err != nil {
		if ae := asAPIError(err); ae.Code == CodeModelBusy {
			s.m.rejected.WithLabelValues(CodeModelBusy).Inc()
		}
		writeError(w, err)
		return
	}
	defer done()
	loadDur := time.Since(lstart)
	if call.loadOnly {
		final := call.finish(time.Now().UTC(), entry.name, genResult{reason: "load"}, nil,
			api.Metrics{TotalDuration: time.Since(start), LoadDuration: loadDur})
		writeJSON(w, http.StatusOK, final)
		return
	}
	lm := entry.engine
	prompt, images, err := call.render(lm)
	if err != nil {
		writeError(w, err)
		return
	}
	if len(images) > 0 {
		// Plain generation evaluates the prompt in one request; images
		// go with it.
		if info := lm.Info(); !info.Vision {
			msg := fmt.Sprintf("model %s has no vision encoder: images are not supported", entry.name)
			if info.VisionOff != "" {
				msg = fmt.Sprintf("model %s: its vision encoder is off (%s): images are not supported", entry.name, info.VisionOff)
			}
			writeError(w, errorf(http.StatusBadRequest, CodeBadRequest, "%s", msg))
			return
		}
	}
	if n := lm.Info().ContextLength; len(prompt) >= n {
		// Before the stream starts, so that it is a plain 422.
		writeError(w, promptTooLong(&models.PromptTooLongError{Tokens: len(prompt), ContextLength: n}))
		return
	}
	created := time.Now().UTC()
	var st *ndjson
	onText := func(string) {}
	if call.stream {
		st = newNDJSON(w)
		onText = func(piece string) {
			if piece != "" {
				call.send(st, created, entry.name, piece)
			}
		}
	}
	res, err := generate(ctx, lm, prompt, images, call.opts, onText)
	s.countTokens(int64(len(prompt)), int64(len(res.tokens)), int64(len(prompt)+len(res.tokens)), res.modelCalls)
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		if s.workCtx.Err() != nil {
			err = errShuttingDown
		}
		if st != nil {
			st.send(map[string]string{"error": asAPIError(err).Message})
			return
		}
		writeError(w, err)
		return
	}
	m := api.Metrics{TotalDuration: time.Since(start), LoadDuration: loadDur, PromptEvalCount: len(prompt),
		PromptEvalDuration: res.promptDur, EvalCount: len(res.tokens), EvalDuration: res.genDur}
	final := call.finish(created, entry.name, res, prompt, m)
	if st != nil {
		st.send(final)
		return
	}
	writeJSON(w, http.StatusOK, final)
}
