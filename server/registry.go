package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nesy-dev/nesy/models"
)

// CodeBadModel is the code of a model file that exists but cannot be loaded
// (not GGUF, truncated or malformed, unsupported architecture): 422.
const CodeBadModel = "bad_model"

// registry owns the loaded engines: one models.Engine per loaded model,
// loaded on first use, shared by every request naming that model, and
// unloaded when idle for KeepAlive or when another model needs the room
// (at most maxLoaded at once; the default model is never unloaded).
//
// Model names reach files only through two doors: a name relative to the
// models folder (opened through os.Root, so neither ".." nor a symbolic link
// leads outside it) and an Ollama model name looked up in the store
// (models.ParseModelName rejects anything that is not a plain name). The
// default model given at startup is the only path taken as is.
type registry struct {
	dir       string       // models folder; "" for none
	store     models.Store // Ollama store; Root "" for none
	opts      models.Options
	maxLoaded int
	keepAlive time.Duration // <= 0: never unload idle models
	log       *slog.Logger
	defName   string // the default model's name ("" for none)
	defPath   string // its file
	// uniform serves the default model as the uniform prior
	// (models.NewUniform over its vocabulary), named "uniform".
	uniform bool

	mu     sync.Mutex // protects loaded and closed
	loaded map[string]*modelEntry
	closed bool

	stop chan struct{} // closed by close: ends the idle reaper and hashing
	wg   sync.WaitGroup

	digests digestCache // sha256 digests of files in the models folder
}

// modelEntry is one loaded (or loading) model.
type modelEntry struct {
	name  string        // canonical name
	path  string        // GGUF file
	ready chan struct{} // closed when loading ended (engine or err set)

	engine  models.LM
	err     error
	loadDur time.Duration

	// Guarded by registry.mu.
	refs     int
	lastUsed time.Time

	// Per-model data built once on first use by the planners (e.g. the
	// decoder's vocabulary index).
	once  sync.Once
	extra any
	exErr error
}

// modelInfo describes a model for /v1/models and /api/tags.
type modelInfo struct {
	Name     string    `json:"name"`
	Source   string    `json:"source"` // "default", "models_dir" or "ollama"
	Size     int64     `json:"size"`
	Digest   string    `json:"digest,omitempty"`
	Modified time.Time `json:"modified_at"`
	Loaded   bool      `json:"loaded"`
	// Details of a loaded model.
	Arch          string `json:"arch,omitempty"`
	Family        string `json:"family,omitempty"`
	Params        int64  `json:"params,omitempty"`
	ContextLength int    `json:"context_length,omitempty"`
	Device        string `json:"device,omitempty"`
	Sequences     int    `json:"sequences_in_use,omitempty"`
	Slots         int    `json:"sequence_slots,omitempty"`
	// StateBytes is the recurrent state the sequence slots hold (Qwen3.5's
	// models: a whole state per slot; 0 for attention-only models).
	StateBytes int64 `json:"recurrent_state_bytes,omitempty"`
	// ExpiresAt is when an idle loaded model will be unloaded (zero: never).
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

func newRegistry(o Options, log *slog.Logger) *registry {
	r := &registry{
		dir:       o.ModelsDir,
		store:     o.store(),
		opts:      o.Engine,
		maxLoaded: o.MaxLoadedModels,
		keepAlive: o.KeepAlive,
		log:       log,
		loaded:    map[string]*modelEntry{},
		stop:      make(chan struct{}),
	}
	if o.Model != "" {
		r.defName = defaultModelName(o.Model)
		if o.ModelName != "" {
			r.defName = o.ModelName
		}
		if o.Uniform {
			r.defName, r.uniform = models.UniformName, true
		}
	}
	if r.opts.Logger == nil {
		r.opts.Logger = log
	}
	if r.keepAlive > 0 {
		r.wg.Add(1)
		go r.reaper()
	}
	return r
}

// defaultModelName is how requests name the model given at startup: the
// file name without ".gguf" for a path, the name itself for an Ollama name.
func defaultModelName(m string) string {
	if strings.HasSuffix(m, ".gguf") || strings.ContainsRune(m, filepath.Separator) {
		return strings.TrimSuffix(filepath.Base(m), ".gguf")
	}
	return m
}

// resolve maps a requested model name to its canonical name and file.
func (r *registry) resolve(name string) (string, string, error) {
	if name == "" {
		if r.defName == "" {
			return "", "", errorf(http.StatusBadRequest, CodeBadRequest, "no model given and the server has no default model (start it with --model)")
		}
		name = r.defName
	}
	if r.defName != "" && (name == r.defName || name == r.defPath) {
		return r.defName, r.defPath, nil
	}
	if r.dir != "" && filepath.IsLocal(name) {
		root, err := os.OpenRoot(r.dir)
		if err == nil {
			defer root.Close()
			for _, cand := range []string{name, name + ".gguf"} {
				fi, err := root.Stat(cand)
				if err == nil && fi.Mode().IsRegular() {
					return strings.TrimSuffix(filepath.ToSlash(cand), ".gguf"), filepath.Join(r.dir, cand), nil
				}
			}
		}
	}
	if r.store.Root != "" {
		if _, err := models.ParseModelName(name); err == nil {
			sm, err := r.store.Lookup(name)
			if err == nil {
				return sm.Name, sm.Path, nil
			}
			if !errors.Is(err, models.ErrModelNotFound) && !errors.Is(err, fs.ErrNotExist) {
				return "", "", errorf(http.StatusUnprocessableEntity, CodeBadModel, "model %q: %s", name, hidePath(err.Error(), r.store.Root, "<ollama-models>"))
			}
		}
	}
	return "", "", errorf(http.StatusNotFound, CodeModelNotFound, "model %q not found (GET /v1/models lists the models this server can load)", name)
}

// preload loads the default model (at startup): a GGUF path, or a name in
// the server's Ollama store (Options.OllamaStore, not the default store).
func (r *registry) preload(ctx context.Context, model string) error {
	var path string
	var err error
	if r.store.Root != "" {
		path, err = r.store.ResolvePath(model)
	} else if st, serr := os.Stat(model); serr == nil && st.Mode().IsRegular() {
		path, err = model, models.CheckGGUF(model)
	} else {
		err = fmt.Errorf("not a GGUF file, and the Ollama store is disabled: %w", models.ErrModelNotFound)
	}
	if err != nil {
		return fmt.Errorf("default model %s: %w", model, err)
	}
	r.defPath = path
	e, release, err := r.acquire(ctx, "")
	if err != nil {
		return err
	}
	release()
	r.log.Info("model loaded", "model", e.name, "path", e.path, "seconds", e.loadDur.Seconds(), "device", e.engine.Info().Device)
	return nil
}

// acquire returns the loaded engine of a model (loading it if needed) and a
// function releasing the caller's hold on it.
func (r *registry) acquire(ctx context.Context, name string) (*modelEntry, func(), error) {
	name, path, err := r.resolve(name)
	if err != nil {
		return nil, nil, err
	}
	r.mu.Lock()
	_, loaded := r.loaded[path]
	r.mu.Unlock()
	if !loaded {
		// A malformed file is refused before room is made for it, so
		// that no idle model is unloaded for nothing.
		if err := models.CheckModel(path); err != nil {
			return nil, nil, r.hidePaths(loadError(name, path, err))
		}
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, nil, errShuttingDown
	}
	e, ok := r.loaded[path]
	if !ok {
		if err := r.makeRoomLocked(); err != nil {
			r.mu.Unlock()
			return nil, nil, err
		}
		e = &modelEntry{name: name, path: path, ready: make(chan struct{})}
		r.loaded[path] = e
		r.wg.Add(1)
		go r.load(e)
	}
	e.refs++
	r.mu.Unlock()

	release := func() {
		r.mu.Lock()
		e.refs--
		e.lastUsed = time.Now()
		r.mu.Unlock()
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		release()
		return nil, nil, ctx.Err()
	}
	if e.err != nil {
		release()
		return nil, nil, e.err
	}
	return e, release, nil
}

// load loads e's engine (with a context of its own: a request that gives up
// does not abort a load others may wait on).
func (r *registry) load(e *modelEntry) {
	defer r.wg.Done()
	start := time.Now()
	opts := r.opts
	if r.store.Root != "" {
		// A store model renders chats with its template layer, as Ollama
		// does (the engine is loaded by blob path, which carries none).
		if sm, err := r.store.Lookup(e.name); err == nil && sm.Path == e.path {
			opts.ChatTemplate = sm.Template
		}
	}
	var (
		eng models.LM
		err error
	)
	if r.uniform && e.path == r.defPath {
		// The model only tokenizes and renders chats.
		opts.Sequences, opts.ContextLength = 1, 512
		var base *models.Engine
		if base, err = models.Load(context.Background(), e.path, opts); err == nil {
			eng = models.NewUniform(base, 0)
		}
	} else {
		eng, err = models.Load(context.Background(), e.path, opts)
	}
	r.mu.Lock()
	e.loadDur = time.Since(start)
	if err != nil {
		e.err = r.hidePaths(loadError(e.name, e.path, err))
		delete(r.loaded, e.path) // the next request tries again
		r.log.Error("model load failed", "model", e.name, "err", err)
	} else if r.closed {
		eng.Close()
		e.err = errShuttingDown
	} else {
		e.engine = eng
		e.lastUsed = time.Now()
	}
	close(e.ready)
	r.mu.Unlock()
}

// unload unloads a model now if it is loaded and idle (keep_alive 0); the
// default model stays, and a model in use is left to its keep-alive.
func (r *registry) unload(name string) {
	_, path, err := r.resolve(name)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.loaded[path]; ok && e.refs == 0 && path != r.defPath && e.engine != nil {
		r.unloadLocked(e, "keep_alive 0")
	}
}

// hidePaths removes the models folder and the Ollama store's paths from
// an answer's message.
func (r *registry) hidePaths(err error) error {
	if ae, ok := err.(*apiError); ok {
		ae.Message = hidePath(hidePath(ae.Message, r.dir, "<models-dir>"), r.store.Root, "<ollama-models>")
	}
	return err
}

// loadError maps a model load error to its answer; the file's path, which
// may be an absolute server path, is replaced by the model's name.
func loadError(name, path string, err error) error {
	msg := err.Error()
	if path != "" {
		msg = strings.ReplaceAll(msg, path, name)
	}
	switch {
	case errors.Is(err, models.ErrModelNotFound):
		return errorf(http.StatusNotFound, CodeModelNotFound, "model %q: %s", name, msg)
	case errors.Is(err, models.ErrNotGGUF), errors.Is(err, models.ErrBadModel), strings.Contains(msg, "unsupported architecture"):
		return errorf(http.StatusUnprocessableEntity, CodeBadModel, "model %q cannot be loaded: %s", name, msg)
	}
	return errorf(http.StatusInternalServerError, CodeInternal, "loading model %q: %s", name, msg)
}

// makeRoomLocked unloads the least recently used idle model when the
// registry is full, or says that every loaded model is busy.
func (r *registry) makeRoomLocked() error {
	if len(r.loaded) < r.maxLoaded {
		return nil
	}
	var victim *modelEntry
	for _, e := range r.loaded {
		if e.refs > 0 || e.path == r.defPath || !isDone(e.ready) {
			continue
		}
		if victim == nil || e.lastUsed.Before(victim.lastUsed) {
			victim = e
		}
	}
	if victim == nil {
		return &apiError{Status: http.StatusServiceUnavailable, Code: CodeModelBusy, RetryAfter: 5,
			Message: fmt.Sprintf("%d models are loaded and all are in use; retry later", len(r.loaded))}
	}
	r.unloadLocked(victim, "room for another model")
	return nil
}

func (r *registry) unloadLocked(e *modelEntry, why string) {
	delete(r.loaded, e.path)
	if e.engine != nil {
		r.log.Info("model unloaded", "model", e.name, "reason", why)
		e.engine.Close()
	}
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// reaper unloads models idle for longer than keepAlive.
func (r *registry) reaper() {
	defer r.wg.Done()
	t := time.NewTicker(max(r.keepAlive/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		for _, e := range r.loaded {
			if e.refs == 0 && e.path != r.defPath && isDone(e.ready) && time.Since(e.lastUsed) > r.keepAlive {
				r.unloadLocked(e, "idle")
			}
		}
		r.mu.Unlock()
	}
}

// engines returns the loaded engines (for metrics).
func (r *registry) engines() []models.LM {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []models.LM
	for _, e := range r.loaded {
		if e.engine != nil {
			out = append(out, e.engine)
		}
	}
	return out
}

// list returns every model a request may name, loaded or not, sorted by
// name: the default model, the GGUF files of the models folder and the
// models of the Ollama store.
func (r *registry) list() []modelInfo {
	var out []modelInfo
	seen := map[string]bool{}
	add := func(mi modelInfo, path string) {
		if seen[path] {
			return
		}
		seen[path] = true
		r.mu.Lock()
		if e, ok := r.loaded[path]; ok && e.engine != nil {
			info, st := e.engine.Info(), e.engine.Stats()
			mi.Loaded = true
			mi.Arch, mi.Family, mi.Params = info.Arch, info.Family, info.Params
			mi.ContextLength, mi.Device = info.ContextLength, info.Device
			mi.Sequences, mi.Slots = st.SequencesInUse, st.SequenceSlots
			mi.StateBytes = info.StateBytes * int64(info.Sequences)
			if r.keepAlive > 0 && path != r.defPath {
				mi.ExpiresAt = e.lastUsed.Add(r.keepAlive)
			}
		}
		r.mu.Unlock()
		if !mi.Loaded {
			// From the file's metadata (arrays skipped: a few reads).
			if info, err := models.ReadFileInfo(path); err == nil {
				mi.Arch, mi.Family, mi.Params, mi.ContextLength = info.Arch, info.Arch, info.Params, info.ContextLength
			}
		}
		out = append(out, mi)
	}
	if r.defName != "" && r.defPath != "" {
		mi := modelInfo{Name: r.defName, Source: "default"}
		if fi, err := os.Stat(r.defPath); err == nil {
			mi.Size, mi.Modified = fi.Size(), fi.ModTime()
		}
		add(mi, r.defPath)
	}
	root, err := os.OpenRoot(r.dir)
	if r.dir != "" && err == nil {
		defer root.Close()
		_ = filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), ".gguf") {
				return nil
			}
			rel, err := filepath.Rel(r.dir, p)
			if err != nil || !loadableIn(root, rel) {
				return nil // what resolve would refuse is not listed
			}
			mi := modelInfo{Name: strings.TrimSuffix(filepath.ToSlash(rel), ".gguf"), Source: "models_dir"}
			if fi, err := d.Info(); err == nil {
				mi.Size, mi.Modified = fi.Size(), fi.ModTime()
				mi.Digest = r.digest(p, fi)
			}
			add(mi, p)
			return nil
		})
	}
	if r.store.Root != "" {
		sms, err := r.store.List()
		if err != nil {
			r.log.Warn("listing the Ollama store", "root", r.store.Root, "err", err)
		}
		for _, sm := range sms {
			add(modelInfo{Name: sm.Name, Source: "ollama", Size: sm.Size, Digest: sm.Digest, Modified: sm.Modified}, sm.Path)
		}
	}
	slices.SortStableFunc(out, func(a, b modelInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// loadableIn reports whether rel is a regular file inside root (a symbolic
// link out of it is not) that starts with the GGUF magic.
func loadableIn(root *os.Root, rel string) bool {
	f, err := root.Open(rel)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	return err == nil && string(magic[:]) == "GGUF"
}

// close unloads every model, waiting for loads in progress.
func (r *registry) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	close(r.stop)
	r.mu.Unlock()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.loaded {
		r.unloadLocked(e, "shutdown")
	}
}
