package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/pddl"
)

// Options configure a Server. The zero value of every field is a usable
// default.
type Options struct {
	// Model is loaded at startup and serves requests that name no model: a
	// GGUF path or an Ollama model name. "" means none (requests must name
	// a model).
	Model string
	// ModelName is the name requests and GET /v1/models give Model; ""
	// means its file name without ".gguf" (a path) or the Ollama name.
	// nesy serve names the embedded trained prior "prior".
	ModelName string
	// Uniform serves Model as the uniform prior (models.NewUniform: zero
	// logits over its vocabulary, no forward pass), under the name
	// "uniform": the ablation that says how much a model's prior adds.
	Uniform bool
	// ModelsDir is a folder of GGUF files requests may name (by path
	// relative to it, with or without ".gguf"). "" means none.
	ModelsDir string
	// OllamaStore is the Ollama model store requests may name models from;
	// "" means models.DefaultStore() ($OLLAMA_MODELS or ~/.ollama/models).
	OllamaStore string
	// NoOllamaStore disables the Ollama store.
	NoOllamaStore bool
	// Datasets is the folder holding the environments' data (alfworld/,
	// virtualhome/, planbench-blocksworld/) for requests that name an
	// environment and a task; "" means $NESY_SHARED/datasets if set, else
	// environment requests are refused.
	Datasets string
	// Token, when set, is the bearer token every route but /healthz
	// requires.
	Token string

	// MaxConcurrent is the number of requests running on the engines at
	// once (their forward passes are merged); 0 means 4.
	MaxConcurrent int
	// MaxQueue is the number of requests that may wait for a slot; more are
	// refused with 429. 0 means 64; negative means none may wait.
	MaxQueue int
	// QueueTimeout is how long a request may wait for a slot before a 503;
	// 0 means 2 minutes.
	QueueTimeout time.Duration
	// MaxBodyBytes bounds request bodies (413 beyond); 0 means 8 MiB.
	MaxBodyBytes int64
	// MaxPDDLBytes bounds the domain and the problem text each (413
	// beyond); 0 means 1 MiB.
	MaxPDDLBytes int
	// MaxGroundActions bounds the grounded actions of a task (422
	// too_many_actions beyond); 0 means 100000. Grounding also stops when
	// its joins keep more than 4 times this many bindings.
	MaxGroundActions int
	// MaxGroundEstimate refuses, before any join, a task with an action
	// whose ground actions or join bindings are estimated above it (an
	// upper bound from the objects each variable may take; it ignores
	// fluent preconditions, so it can exceed the true count a
	// thousandfold, as on IPC's caldera); 0 means 100 times
	// MaxGroundActions.
	MaxGroundEstimate float64
	// MaxGroundSteps bounds the work of grounding one task (join steps,
	// quantifier and type-hierarchy steps; 422 too_many_actions beyond);
	// 0 means pddl.DefaultMaxGroundSteps (200,000,000: up to tens of
	// seconds of CPU; IPC's airport-adl needs 50-100M steps for 5,000
	// actions).
	MaxGroundSteps int
	// RequestMemory is the memory one plan request may use for its task
	// and its search, in bytes: grounding stops (422 too_many_actions)
	// past RequestMemory / ActionBytes ground actions or RequestMemory /
	// 250 join bindings, and a search stops (stop_reason "memory", the best
	// plan so far kept) when its tree holds what the task left of it at
	// mcts.NodeBytes a node. 0 means DefaultRequestMemory(MaxConcurrent):
	// half the machine's memory shared by the running requests.
	RequestMemory int64
	// MaxSeconds caps a plan request's seconds budget (and is its default
	// when MaxSeconds is below 60); 0 means 600.
	MaxSeconds float64
	// MaxSimulations caps the MCTS simulations budget; 0 means 100000.
	MaxSimulations int
	// MaxTokens caps the generated-token budget of any request; 0 means
	// 8192.
	MaxTokens int
	// MaxActions caps the plan length budget; 0 means 1000.
	MaxActions int
	// MaxLoadedModels is the number of models loaded at once; 0 means 2.
	MaxLoadedModels int
	// KeepAlive unloads a model idle this long (never the default model);
	// 0 means 5 minutes, negative never.
	KeepAlive time.Duration
	// BodyTimeout is how long a client may take to send a request body
	// (408 body_timeout, then the connection is closed); 0 means 1 minute,
	// negative no limit.
	BodyTimeout time.Duration
	// HeaderTimeout is how long a client may take to send a request's
	// headers; 0 means 10 seconds.
	HeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long between
	// requests; 0 means 2 minutes.
	IdleTimeout time.Duration
	// MaxConnsPerClient bounds the connections open at once from one
	// client address (IP); one more is answered 429 too_many_connections
	// and closed. 0 means 64, negative no bound.
	MaxConnsPerClient int
	// DrainNotice is how long Serve keeps listening after its context
	// ends, with /healthz answering 503 draining and new requests 503
	// shutting_down, before it closes the listener and waits for in-flight
	// requests; 0 means none (closing at once).
	DrainNotice time.Duration
	// ShutdownTimeout is how long Serve waits for in-flight requests after
	// its context ends before cancelling them; 0 means 30 seconds.
	ShutdownTimeout time.Duration
	// Engine configures every model load (threads, context length, sequence
	// slots, NoMerge to turn cross-request batching off, ...). Sequences 0
	// means SequencesPerRequest times MaxConcurrent (each running request
	// may hold its share, see requestLM), and MaxLogits 0 means 128.
	Engine models.Options
	// GPUStats reads GPU utilization, memory and temperature for /metrics;
	// nil means none are exported. cmd/nesy passes NVML readings (package
	// models' GPU discovery).
	GPUStats func() []GPUStat
	// Version is reported by /api/version and /healthz; "" means the
	// build's: its module version, else "dev-" and its VCS revision, else
	// "dev".
	Version string
	// Logger receives request and lifecycle logs; nil means slog.Default().
	Logger *slog.Logger
}

// GPUStat is one GPU's state for the metrics. Negative Utilization or
// TemperatureC mean unknown.
type GPUStat struct {
	Index        int
	Utilization  float64 // busy fraction, 0..1
	MemoryUsed   uint64  // bytes
	MemoryTotal  uint64  // bytes
	TemperatureC float64
}

// SequencesPerRequest is the default share of KV-cache sequence slots per
// running request. A tree search keeps the sequences of recently evaluated
// nodes for their children's forks and recomputes the prefixes of evicted
// ones: in the load test (16 cmcts requests, 4 running) a share of 32 made
// the requests evaluate 1.7 times the tokens of a share of 64 and take 10%
// longer, and 128 saved nothing more (BENCHMARKS.md, server section). A slot
// costs bookkeeping only: the KV cells are shared (Engine.CacheSize).
const SequencesPerRequest = 64

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.MaxConcurrent, 4)
	def(&o.Engine.Sequences, SequencesPerRequest*o.MaxConcurrent)
	def(&o.Engine.MaxLogits, 128)
	def(&o.MaxQueue, 64)
	o.MaxQueue = max(o.MaxQueue, 0)
	def(&o.MaxPDDLBytes, 1<<20)
	def(&o.MaxGroundActions, 100000)
	if o.MaxGroundEstimate == 0 {
		o.MaxGroundEstimate = 100 * float64(o.MaxGroundActions)
	}
	def(&o.MaxGroundSteps, pddl.DefaultMaxGroundSteps)
	if o.RequestMemory == 0 {
		o.RequestMemory = DefaultRequestMemory(o.MaxConcurrent)
	}
	def(&o.MaxSimulations, 100000)
	def(&o.MaxTokens, 8192)
	def(&o.MaxActions, 1000)
	def(&o.MaxLoadedModels, 2)
	if o.QueueTimeout == 0 {
		o.QueueTimeout = 2 * time.Minute
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 8 << 20
	}
	if o.MaxSeconds == 0 {
		o.MaxSeconds = 600
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 5 * time.Minute
	}
	if o.BodyTimeout == 0 {
		o.BodyTimeout = time.Minute
	}
	if o.HeaderTimeout == 0 {
		o.HeaderTimeout = 10 * time.Second
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 2 * time.Minute
	}
	def(&o.MaxConnsPerClient, 64)
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.Datasets == "" {
		if d := os.Getenv("NESY_SHARED"); d != "" {
			o.Datasets = d + "/datasets"
		}
	}
	if o.Version == "" {
		bi, _ := debug.ReadBuildInfo()
		o.Version = buildVersion(bi)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// buildVersion names a build: its main module's version (a tagged
// install), else "dev-" and the first 12 characters of its VCS revision
// ("-dirty" with uncommitted changes), else "dev".
func buildVersion(bi *debug.BuildInfo) string {
	if bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return "dev"
	}
	return "dev-" + rev[:min(12, len(rev))] + dirty
}

func (o Options) store() models.Store {
	switch {
	case o.NoOllamaStore:
		return models.Store{}
	case o.OllamaStore != "":
		return models.Store{Root: o.OllamaStore}
	}
	return models.DefaultStore()
}

// Server is the nesy HTTP server: the plan API, model listing, health,
// metrics and an Ollama-compatible subset. It owns the loaded engines
// (registry), request admission (admission) and the metrics registry.
// The HTTP layer never touches tensors: planning runs in packages decoder
// and mcts on a models.Engine, which merges the forward passes of all
// running requests.
type Server struct {
	opts    Options
	log     *slog.Logger
	promReg *prometheus.Registry
	m       *metrics
	models  *registry
	adm     *admission
	envs    *envCache
	handler http.Handler
	started time.Time
	system  string // models.SystemInfo summary (ggml CPU features, GPUs)

	// workCtx is the parent of every request's work; cancelled when a
	// graceful shutdown runs out of time.
	workCtx    context.Context
	cancelWork context.CancelFunc

	closeOnce sync.Once
}

// New builds a server and, when Options.Model is set, loads that model
// (ctx bounds the load).
func New(ctx context.Context, opts Options) (*Server, error) {
	o := opts.withDefaults()
	if o.MaxConcurrent < 1 || o.MaxLoadedModels < 1 {
		return nil, fmt.Errorf("server: MaxConcurrent and MaxLoadedModels must be positive")
	}
	if o.ModelsDir != "" {
		fi, err := os.Stat(o.ModelsDir)
		if err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("server: models folder %q is not a readable folder", o.ModelsDir)
		}
	}
	s := &Server{opts: o, log: o.Logger, promReg: prometheus.NewRegistry(), started: time.Now(),
		system: models.SystemInfo().String()}
	s.workCtx, s.cancelWork = context.WithCancel(context.Background())
	s.models = newRegistry(o, o.Logger)
	var gpus func() []gpuStat
	if o.GPUStats != nil {
		gpus = func() []gpuStat {
			var out []gpuStat
			for _, g := range o.GPUStats() {
				out = append(out, gpuStat{g.Index, g.Utilization, g.MemoryUsed, g.MemoryTotal, g.TemperatureC})
			}
			return out
		}
	}
	s.m = newMetrics(s.promReg, s.engineStats, gpus)
	s.adm = newAdmission(o.MaxConcurrent, o.MaxQueue, o.QueueTimeout, func(running, queued int) {
		s.m.running.Set(float64(running))
		s.m.queued.Set(float64(queued))
	})
	s.envs = newEnvCache(o.Datasets)
	s.handler = s.routes()
	if o.Model != "" {
		if err := s.models.preload(ctx, o.Model); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

func (s *Server) engineStats() []engineStats {
	var out []engineStats
	for _, e := range s.models.engines() {
		st := e.Stats()
		out = append(out, engineStats{st.EvaluatedTokens, st.ModelCalls, st.SequencesInUse, st.SequenceSlots, st.CacheCells})
	}
	return out
}

// Handler returns the server's HTTP handler (all routes and middleware).
func (s *Server) Handler() http.Handler { return s.handler }

// Metrics returns the registry the server's metrics are registered on.
func (s *Server) Metrics() *prometheus.Registry { return s.promReg }

// Serve answers requests on ln until ctx ends, then shuts down gracefully:
// it stops accepting, lets in-flight requests finish for up to
// Options.ShutdownTimeout, cancels those still running (their searches stop
// and free their sequences) and returns. It does not unload the models; call
// Close for that.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.opts.HeaderTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	if s.opts.MaxConnsPerClient > 0 {
		ln = newClientLimitListener(ln, s.opts.MaxConnsPerClient, func() { s.m.rejected.WithLabelValues(CodeTooManyConns).Inc() })
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down", "deadline", s.opts.ShutdownTimeout, "drain_notice", s.opts.DrainNotice)
	s.adm.drain()
	if s.opts.DrainNotice > 0 {
		// Still listening: /healthz says draining (503) and new work gets
		// 503 shutting_down, so load balancers take the server out first.
		time.Sleep(s.opts.DrainNotice)
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	if err != nil {
		// Out of time: cancel the work still running and give the
		// handlers a moment to answer and return.
		s.log.Warn("shutdown deadline reached; cancelling in-flight requests")
		s.cancelWork()
		gctx, gcancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = hs.Shutdown(gctx)
		gcancel()
		if err != nil {
			hs.Close()
		}
	}
	s.cancelWork()
	if e := <-errc; e != nil && !errors.Is(e, http.ErrServerClosed) {
		return e
	}
	return nil
}

// Close cancels any remaining work and unloads every model.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.adm.drain()
		s.cancelWork()
		s.models.close()
	})
	return nil
}

// workContext returns a context for a request's work: done when the client
// goes away or the shutdown deadline passes.
func (s *Server) workContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.workCtx, cancel)
	return ctx, func() { stop(); cancel() }
}

// admit waits for an admission slot, counting the wait and refusals.
func (s *Server) admit(ctx context.Context) (func(), time.Duration, error) {
	start := time.Now()
	release, err := s.adm.acquire(ctx)
	wait := time.Since(start)
	if err != nil {
		s.m.rejected.WithLabelValues(asAPIError(err).Code).Inc()
		return nil, wait, err
	}
	s.m.queueWait.Observe(wait.Seconds())
	return release, wait, nil
}

// promHandler serves /metrics from the server's own registry.
func (s *Server) promHandler() http.Handler {
	return promhttp.HandlerFor(s.promReg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)})
}
