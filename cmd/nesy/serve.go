package main

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/nesy-dev/nesy/models"
	"github.com/nesy-dev/nesy/models/gpu"
	"github.com/nesy-dev/nesy/pddl"
	"github.com/nesy-dev/nesy/server"
)

func newServeCmd() *cobra.Command {
	var (
		o        server.Options
		addr     string
		logLevel string
		maxBody  int64
		// requestMemory is --request-memory as given ("" for the default).
		requestMemory string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP server (plan API, OpenAI- and Ollama-compatible routes, live search view, metrics)",
		Long: `Run the nesy HTTP server.

Routes: POST /v1/plan, GET /v1/models, GET /healthz, GET /metrics,
GET /openapi.json, the live search view GET /ui, the OpenAI-compatible
POST /v1/chat/completions and POST /v1/completions (with the "pddl"
extension for plans), and the Ollama-compatible GET /api/version,
GET /api/tags, GET /api/ps, POST /api/show, POST /api/generate, POST /api/chat.

The server listens on 127.0.0.1 unless --addr says otherwise. With --token
(or NESY_TOKEN) every route but /healthz needs "Authorization: Bearer <token>".
Requests may name models by file in --models-dir or by name in the Ollama
store ($OLLAMA_MODELS or ~/.ollama/models); nothing else is reachable.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			if o.Token == "" {
				o.Token = os.Getenv("NESY_TOKEN")
			}
			if err := models.CheckDeltaRule(o.Engine.DeltaRule); err != nil {
				return fmt.Errorf("--delta-rule: %w", err)
			}
			o.MaxBodyBytes = maxBody
			if requestMemory != "" {
				n, err := humanize.ParseBytes(requestMemory)
				if err != nil || n == 0 || n > math.MaxInt64 {
					return fmt.Errorf("--request-memory %q: want a size such as 512MiB or 2GB", requestMemory)
				}
				o.RequestMemory = int64(n)
			}
			o.Logger = log
			o.Engine.Logger = log
			// Without --sequences, a recurrent model loads the slots its state
			// has memory for (the requests share what was loaded).
			o.Engine.FitSequences = !cmd.Flags().Changed("sequences")
			mon := gpu.Open(gpu.Options{})
			defer mon.Close()
			o.GPUStats = func() []server.GPUStat { return gpuStats(mon.Read()) }
			log.Info("nesy starting", "system", models.SystemInfo().String(), "gpus", mon.Read().String())
			if host, _, err := net.SplitHostPort(addr); err == nil {
				if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && o.Token == "" {
					log.Warn("listening beyond loopback without a bearer token: anyone who can reach " + addr + " can use the server (set --token or NESY_TOKEN)")
				}
			}
			if o.Model == "" || o.Model == defaultModel {
				// The trained prior embedded in the binary.
				path, err := ensurePrior()
				if err != nil {
					return err
				}
				o.Model, o.ModelName = path, defaultModel
			}
			if o.Model == uniformModel || o.Model == tinyModel {
				// The generated tiny model, served as it is or as the
				// uniform prior over its vocabulary.
				path, err := ensureTinyModel(cmd.ErrOrStderr(), "", 0)
				if err != nil {
					return err
				}
				o.Uniform, o.Model = o.Model == uniformModel, path
			}
			ctx := cmd.Context()
			s, err := server.New(ctx, o)
			if err != nil {
				return err
			}
			defer s.Close()
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			log.Info("listening", "addr", ln.Addr().String(), "model", o.Model, "models_dir", o.ModelsDir,
				"max_concurrent", o.MaxConcurrent, "cross_request_batching", !o.Engine.NoMerge)
			err = s.Serve(ctx, ln)
			log.Info("stopped")
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:11435", "listen address (host:port); loopback by default")
	f.StringVar(&o.Model, "model", "", `model loaded at start and used when a request names none: a GGUF path, an Ollama model name, "prior" (the trained prior embedded in the binary; the default), "tiny" (the generated random-weight qwen3) or "uniform" (zero logits over tiny's vocabulary: every allowed token alike, no forward pass)`)
	f.StringVar(&o.ModelsDir, "models-dir", "", "folder of GGUF files requests may name (relative names only)")
	f.StringVar(&o.OllamaStore, "ollama-models", "", "Ollama model store requests may name models from (default $OLLAMA_MODELS or ~/.ollama/models)")
	f.BoolVar(&o.NoOllamaStore, "no-ollama", false, "do not serve models from the Ollama store")
	f.StringVar(&o.Datasets, "datasets", "", "datasets folder for env+task requests (default $NESY_SHARED/datasets)")
	f.StringVar(&o.Token, "token", "", "bearer token required on every route but /healthz (default $NESY_TOKEN)")
	f.IntVar(&o.MaxConcurrent, "max-concurrent", 4, "requests running at once (their forward passes are merged)")
	f.IntVar(&o.MaxQueue, "max-queue", 64, "requests waiting for a slot; more get 429")
	f.DurationVar(&o.QueueTimeout, "queue-timeout", 2*time.Minute, "longest wait for a slot before a 503")
	f.Int64Var(&maxBody, "max-body", 8<<20, "largest request body in bytes (413 beyond)")
	f.IntVar(&o.MaxPDDLBytes, "max-pddl", 1<<20, "largest domain or problem text in bytes (413 beyond)")
	f.IntVar(&o.MaxGroundActions, "max-ground-actions", 100000, "most grounded actions a task may have (422 beyond; grounding also stops at 4 times this many join bindings)")
	f.Float64Var(&o.MaxGroundEstimate, "max-ground-estimate", 0, "refuse before grounding an action estimated (from its objects and static facts, an upper bound) above this many ground actions (0: 100 times --max-ground-actions)")
	f.IntVar(&o.MaxGroundSteps, "max-ground-steps", pddl.DefaultMaxGroundSteps, "most steps of work grounding one task may take (422 beyond)")
	f.StringVar(&requestMemory, "request-memory", "", "memory one plan request may use for its task and search, e.g. 512MiB or 2GB (422 too_many_actions past it while grounding; a search stops with stop_reason \"memory\"); default half the machine's memory shared by --max-concurrent requests")
	f.Float64Var(&o.MaxSeconds, "max-seconds", 600, "cap on a plan request's seconds budget")
	f.IntVar(&o.MaxSimulations, "max-simulations", 100000, "cap on a plan request's MCTS simulations")
	f.IntVar(&o.MaxTokens, "max-tokens", 8192, "cap on a request's token budget")
	f.IntVar(&o.MaxActions, "max-actions", 1000, "cap on a plan's length")
	f.IntVar(&o.MaxLoadedModels, "max-models", 2, "models loaded at once")
	f.DurationVar(&o.KeepAlive, "keep-alive", 5*time.Minute, "unload a model idle this long (not the --model one); negative: never")
	f.DurationVar(&o.BodyTimeout, "body-timeout", time.Minute, "longest time a client may take to send a request body (408 and the connection closed beyond); negative: no limit")
	f.DurationVar(&o.HeaderTimeout, "header-timeout", 10*time.Second, "longest time a client may take to send a request's headers")
	f.DurationVar(&o.IdleTimeout, "idle-timeout", 2*time.Minute, "close keep-alive connections idle this long")
	f.IntVar(&o.MaxConnsPerClient, "max-conns-per-client", 64, "connections open at once from one client address (one more gets 429 and is closed); negative: no bound")
	f.DurationVar(&o.DrainNotice, "drain-notice", 0, "on SIGINT/SIGTERM, keep listening this long with /healthz saying draining (503) before closing the listener")
	f.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long in-flight requests may finish before they are cancelled")
	f.IntVar(&o.Engine.Threads, "threads", 0, "CPU threads per engine (0: all cores)")
	f.IntVar(&o.Engine.ContextLength, "ctx", 0, "context length per sequence (0: the model's, at most 8192)")
	f.IntVar(&o.Engine.Sequences, "sequences", 0, "KV-cache sequence slots per engine, shared by all requests, each holding at most sequences/max-concurrent (0: 64 per --max-concurrent request, fewer where a Qwen3.5 model's recurrent state would not fit in memory; MCTS forks use many)")
	f.IntVar(&o.Engine.CacheSize, "cache", 0, "KV-cache cells per engine (0: 2*ctx)")
	f.IntVar(&o.Engine.BatchSize, "batch", 0, "most positions per forward pass (0: 512)")
	f.IntVar(&o.Engine.GPULayers, "gpu-layers", 0, "layers on the GPU (0: all when a GPU backend is found, -1: none)")
	f.StringVar(&o.Engine.DeltaRule, "delta-rule", "auto", deltaRuleUsage)
	f.BoolVar(&o.Engine.FullLogits, "full-logits", false, fullLogitsUsage)
	f.StringVar(&o.Engine.FlashAttention, "flash-attention", "auto", "flash attention: auto (on where every layer runs on a GPU, or the KV cache is quantized; off on the CPU, where it slows long prompts), on or off")
	f.BoolVar(&o.Engine.NoMerge, "no-batch", false, "disable cross-request batching (each request's forward passes run alone)")
	f.DurationVar(&o.Engine.MergeWindow, "merge-window", 0, "how long an idle engine waits for more requests to join a forward pass")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}

// gpuStats turns an NVML reading into the server's GPU metrics (none
// without an NVIDIA driver; fields NVML cannot read stay unknown).
func gpuStats(st gpu.Status) []server.GPUStat {
	var out []server.GPUStat
	for _, d := range st.Devices {
		g := server.GPUStat{Index: d.Index, Utilization: -1, TemperatureC: -1}
		if d.Utilization >= 0 {
			g.Utilization = float64(d.Utilization) / 100
		}
		if d.TemperatureC >= 0 {
			g.TemperatureC = float64(d.TemperatureC)
		}
		if d.MemoryTotal > 0 && d.MemoryUsed >= 0 {
			g.MemoryTotal, g.MemoryUsed = uint64(d.MemoryTotal), uint64(d.MemoryUsed)
		}
		out = append(out, g)
	}
	return out
}
