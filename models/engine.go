package models

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	humanize "github.com/dustin/go-humanize"
	fsggml "github.com/ollama/ollama/fs/ggml"
	"github.com/ollama/ollama/kvcache"
	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/ml/nn"
	"github.com/ollama/ollama/model"
	"github.com/ollama/ollama/model/input"
	_ "github.com/ollama/ollama/model/models" // registers the architectures
	"github.com/ollama/ollama/model/models/qwen3next"

	"github.com/nesy-dev/nesy/models/ggmlthread"
)

// Engine is a model loaded into Ollama's Go engine. It implements LM.
//
// One goroutine (loop) owns the forward passes: Eval calls queue jobs and
// wait; the loop forms batches of at most BatchSize positions from the
// pending jobs, runs them, and hands back the logit rows.
//
// Jobs take turns leading a pass; the others join it only when a cost
// model says the merged pass is cheaper per position than separate ones.
// The reason is the KV cache: every position of a pass attends over the
// whole cell range spanned by the pass's sequences, so merging sequences
// stored far apart (unrelated prompts) makes every position pay for all of
// their cells, while forks of one prompt share its cells and merge almost
// for free. The engine mirrors the cache's cell placement to predict each
// candidate pass's range and prices passes as fixed + per position +
// per position per cell + per cell, with coefficients fitted online to
// the passes it has run (starting from the warm-up pass's time and the
// model's shape). Within a pass every request first gets an equal share
// of the positions, then the rest goes in turn order; a prompt cut at the
// end of a pass continues first in the next one, so its cells stay
// together.
type Engine struct {
	info  Info
	opts  resolved
	tok   *textTokenizer
	chat  chatRenderer
	model model.Model
	cache kvcache.Cache
	mm    model.MultimodalProcessor // nil without a vision encoder
	// checkpoints is set for recurrent caches (Qwen3.5): truncating restores
	// a checkpoint and recomputes the rest.
	checkpoints kvcache.CheckpointCache
	// cells mirrors the cache's cell placement (nil for recurrent caches,
	// whose passes are planned by planRecurrent without a cost model);
	// guarded by mu.
	cells *cellMap

	wake chan struct{} // nudges the loop (capacity 1)
	done chan struct{} // closed when the loop exits

	// mu guards everything below, the cache's bookkeeping (StartForward,
	// CopyPrefix, Remove) and the model's graph building. It is not held
	// while a forward pass computes.
	mu     sync.Mutex
	seqs   []seqState
	queue  []*job
	closed bool
	stats  Stats
	rr     int // round-robin offset for fair batching
	// carry is the request whose input the last pass cut at its end: it
	// leads the next pass (see planLocked).
	carry *reqState
	free  []int       // scratch: the free cells the next pass would take
	own   []*reqState // scratch: a job's requests being priced
	costs *costFit    // pass cost model (nil for recurrent caches)
	// output is the model's output projection where passes may compute
	// only their rows' candidates (see selection); nil where they always
	// compute every token's logit.
	output *nn.Linear
	// hybrid runs every pass of a recurrent Qwen3.5 text model (nil
	// otherwise; see hybridForward and buildForward).
	hybrid *hybridForward
	// runner computes the passes on a C thread of its own (see package
	// ggmlthread).
	runner *ggmlthread.Runner
	// graph bounds the sequences of one pass of a recurrent model (see
	// planRecurrent).
	graph passGraph
	// forks copies the recurrent states of a pass's new forks in one step
	// per buffer (nil: the cache copies them fork by fork; see
	// forkCopier).
	forks *forkCopier
	// inspect, when set (by tests), sees every pass's context once its
	// graph is built.
	inspect func(ml.Context)
	// maxLen is the most positions any sequence has held (guarded by mu).
	maxLen int

	// beforePass, when set (by tests, before the first Eval), runs on the
	// engine goroutine after a pass is built and before it computes, with
	// no lock held: a test holds the engine busy deterministically.
	beforePass func()
}

var _ LM = (*Engine)(nil)

// seqState is one sequence slot.
type seqState struct {
	inUse   bool
	busy    bool // an Eval job holds it
	release bool // free it when the job ends
	// hist is the token of every logical position (-1 where the position
	// came from an image); len(hist) is Len(seq).
	hist []int32
	// rope are the sequence's rotary position shifts (images under
	// multi-axis RoPE; nil: every position is its logical one).
	rope []ropeMark
	// valid is how many leading positions the cache holds; hist[valid:]
	// are recomputed before the next request (after truncating a
	// recurrent model to a point without a checkpoint).
	valid int
}

// Load resolves name (a .gguf path or an Ollama model name), loads the
// weights, reserves the worst-case compute graph, runs a warm-up pass and
// starts the engine goroutine. ctx bounds the loading only.
func Load(ctx context.Context, name string, opts Options) (e *Engine, err error) {
	sm, err := DefaultStore().ResolveModel(name)
	if err != nil {
		return nil, err
	}
	path := sm.Path
	if opts.ChatTemplate == "" {
		opts.ChatTemplate = sm.Template
	}
	meta, err := readMeta(path)
	if err != nil {
		return nil, err
	}
	arch := meta.KV().Architecture()
	o, err := opts.withDefaults(int(meta.KV().ContextLength()))
	if err != nil {
		return nil, err
	}
	log := o.Logger

	params := ml.BackendParams{AllocMemory: true, NumThreads: o.Threads}
	device := "CPU"
	var devs []ml.DeviceInfo
	if o.GPULayers != -1 {
		params.GPULayers, devs, device, err = gpuLayers(path, o, int(meta.KV().BlockCount()))
		if err != nil {
			return nil, err
		}
	}
	perSlot := stateBytes(meta.KV())
	if perSlot > 0 {
		cpuFree := o.StateMemory
		if cpuFree == 0 {
			cpuFree = stateMemoryAvailable(path)
		}
		// The KV cells as Load will size them, less the round-up to whole
		// cells per slot (at most one per slot), so that a count of slots
		// far beyond the cache is judged by its state.
		cells := (o.CacheSize + 255) / 256 * 256
		fit, err := fitSlots(o, name, stateShares(meta, params.GPULayers, devs, cpuFree, cells, o.kvType))
		if err != nil {
			return nil, err
		}
		if fit < o.Sequences {
			opts.Sequences = fit
			if o, err = opts.withDefaults(int(meta.KV().ContextLength())); err != nil {
				return nil, err
			}
			log = o.Logger
		}
	}
	hasVisionWeights := len(meta.Tensors().Items("v.")) > 0
	var noVision string // why the file's vision encoder is not used
	if why := unsupportedConv(meta); hasVisionWeights && why != "" {
		noVision, hasVisionWeights = why, false
		log.Warn("models: loading "+name+" without its vision encoder", "reason", why)
	}
	supportsFA := meta.KV().EmbeddingHeadCountK() != 0 && meta.KV().EmbeddingHeadCountK() == meta.KV().EmbeddingHeadCountV()
	quantized := o.kvType != ml.DTypeF16 && o.kvType != ml.DTypeF32
	switch o.flash {
	case ml.FlashAttentionAuto:
		// Off on the CPU: ggml's CPU flash attention skips the masked cells
		// of a KV cache that many sequences share (a search over a short
		// prompt runs 7-30% faster with it), but it takes one query row and
		// one key at a time where the plain path multiplies matrices, so a
		// long prompt's prefill is much slower: with the datasets'
		// 2,500-token planning prompts whole cmcts runs took 1.1-1.6x as
		// long (BENCHMARKS.md, "Flash attention on the CPU, end to end").
		o.flash = ml.FlashAttentionDisabled
		if supportsFA && (quantized || params.GPULayers.Sum() > int(meta.KV().BlockCount())) {
			o.flash = ml.FlashAttentionEnabled
		}
	case ml.FlashAttentionEnabled:
		if !supportsFA {
			return nil, fmt.Errorf("models: %s: flash attention needs equal key and value head sizes", name)
		}
	}
	if quantized && o.flash != ml.FlashAttentionEnabled {
		return nil, fmt.Errorf("models: KV cache type %s needs flash attention", o.KVCacheType)
	}
	if k, v := meta.KV().EmbeddingHeadCountK(), meta.KV().EmbeddingHeadCountV(); quantized && (k%32 != 0 || v%32 != 0) {
		// ggml stores q8_0/q4_0 in blocks of 32 values per row; smaller
		// head rows abort inside ggml.
		return nil, fmt.Errorf("models: KV cache type %s needs head sizes that are multiples of 32 (%s has %d and %d)", o.KVCacheType, name, k, v)
	}
	params.FlashAttention = o.flash

	m, err := newModel(path, params)
	if err != nil {
		if errors.Is(err, model.ErrUnsupportedModel) {
			return nil, fmt.Errorf("models: %s: unsupported architecture %q (Ollama's engine v0.17.4 runs llama, qwen2, qwen3, qwen3moe, qwen35, qwen3vl, qwen25vl, gemma3, mistral3, ...): %w", name, arch, err)
		}
		return nil, fmt.Errorf("models: %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			m.Backend().Close()
		}
	}()
	// Before the weights load: Ollama's Load resets the devices the model
	// does not use, which other engines of this process may be using.
	if err := disableDeviceResets(); err != nil {
		return nil, err
	}
	if err := m.Backend().Load(ctx, nil); err != nil {
		return nil, fmt.Errorf("models: loading %s: %w", name, err)
	}
	cache := m.Config().Cache
	if cache == nil {
		return nil, fmt.Errorf("models: %s: architecture %q has no KV cache (embedding models are not supported)", name, arch)
	}
	mm, isMM := m.(model.MultimodalProcessor)
	vision := isMM && hasVisionWeights
	if !vision {
		mm = nil
	}
	tok, err := newTextTokenizer(m.Backend().Config(), vision)
	if err != nil {
		return nil, fmt.Errorf("models: %s: %w", name, err)
	}
	template := m.Backend().Config().String("tokenizer.chat_template")
	e = &Engine{
		opts:  o,
		tok:   tok,
		model: m,
		cache: cache,
		mm:    mm,
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
		seqs:  make([]seqState, o.Sequences),
	}
	if e.chat, err = newChatRenderer(template, opts.ChatTemplate, tok, vision); err != nil {
		return nil, fmt.Errorf("models: %s: %w", name, err)
	}
	if tok.vocab.BOS >= 0 {
		e.chat.bos = string(tok.vocab.Text[tok.vocab.BOS])
	}
	if len(tok.vocab.EOS) > 0 {
		e.chat.eos = string(tok.vocab.Text[tok.vocab.EOS[0]])
	}
	if e.chat.bos == "" {
		// Families whose templates write BOS into the text.
		for _, s := range []string{"<|begin_of_text|>", "<bos>", "<s>"} {
			if a, ok := tok.added[s]; ok && a.control {
				e.chat.bos = s
				break
			}
		}
	}
	e.stats.SequenceSlots = o.Sequences
	e.stats.CacheCells = (o.cacheCaps*o.Sequences + 255) / 256 * 256 // the cache pads to 256 cells
	if cc, ok := cache.(kvcache.CheckpointCache); ok {
		e.checkpoints = cc
		e.forks = newForkCopier(recurrentOf(cache))
		e.graph = newPassGraph(m.Backend())
		e.graph.ownCopies = e.forks != nil
		if !o.noHybrid {
			e.hybrid = newHybridForward(m, o.DeltaRule, params.GPULayers.Sum() > 0)
		}
		e.graph.wkv = e.hybrid != nil && e.hybrid.rule.oneOp()
	} else {
		e.cells = newCellMap(e.stats.CacheCells, o.Sequences, cachePadding)
	}
	if !o.FullLogits && params.GPULayers.Sum() == 0 {
		// On the CPU only: ggml's CUDA get_rows lacks the k-quants that
		// output weights often use, and a GPU's full product is cheap.
		e.output = outputLinear(m)
	}
	var params64 int64
	for _, t := range meta.Tensors().Items() {
		params64 += int64(t.Elements())
	}
	e.info = Info{
		Name: name, Path: path, Arch: arch, Family: e.chat.family,
		ContextLength: o.ContextLength, VocabSize: tok.vocabSize, Vision: vision, VisionOff: noVision,
		Thinking: e.chat.thinking, Recurrent: e.checkpoints != nil, Params: params64, Device: device,
		StateBytes: perSlot, Sequences: o.Sequences,
		FlashAttention: o.flash == ml.FlashAttentionEnabled,
		Prompt:         meta.KV().String(PromptKey),
	}

	if err := initCache(cache, m.Backend(), o); err != nil {
		return nil, fmt.Errorf("models: %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			cache.Close()
		}
	}()
	kv := meta.KV()
	prior := func(warmup float64) *costFit {
		if e.cells == nil {
			return nil
		}
		p := costPrior(warmup, params64, int(kv.BlockCount()), int(kv.HeadCountMax()), int(kv.EmbeddingHeadCountK()))
		return newCostFit(p, o.BatchSize, min(e.stats.CacheCells, 4096))
	}
	e.costs = prior(defaultPassSeconds)
	if e.runner, err = ggmlthread.New(o.Threads); err != nil {
		return nil, fmt.Errorf("models: %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			e.runner.Close()
		}
	}()
	if !o.noWarmup {
		if err := e.reserve(); err != nil {
			return nil, fmt.Errorf("models: %s: reserving the compute graph: %w", name, err)
		}
		t0 := time.Now()
		if err := e.warmup(); err != nil {
			return nil, fmt.Errorf("models: %s: warm-up: %w", name, err)
		}
		e.costs = prior(time.Since(t0).Seconds())
	}
	attrs := []any{"model", name, "arch", arch, "family", e.info.Family, "device", device,
		"threads", o.Threads, "batch", o.BatchSize, "ctx", o.ContextLength, "cache_cells", e.stats.CacheCells,
		"sequences", o.Sequences, "kv_cache", o.KVCacheType, "flash_attention", o.flash == ml.FlashAttentionEnabled,
		"vision", vision, "candidate_logits", e.output != nil}
	if e.hybrid != nil {
		attrs = append(attrs, "delta_rule", e.hybrid.rule.String())
	}
	if perSlot > 0 {
		attrs = append(attrs, "recurrent_state", humanize.IBytes(uint64(perSlot)*uint64(o.Sequences)))
	}
	log.Info("model loaded", attrs...)
	go e.loop()
	return e, nil
}

// FileInfo is what a GGUF's metadata says about a model, read without
// loading it.
type FileInfo struct {
	Arch          string // general.architecture
	ContextLength int    // the trained context length
	Params        int64  // general.parameter_count (0 when the file does not say)
	FileType      string // the weights' type, e.g. "Q4_K_M" or "F32"
	Vision        bool   // the file has vision-encoder tensors
}

// ReadFileInfo reads a GGUF's metadata (errors as CheckModel's).
func ReadFileInfo(path string) (FileInfo, error) {
	meta, err := readMeta(path)
	if err != nil {
		return FileInfo{}, err
	}
	kv := meta.KV()
	return FileInfo{Arch: kv.Architecture(), ContextLength: int(kv.ContextLength()), Params: int64(kv.ParameterCount()),
		FileType: kv.FileType().String(), Vision: len(meta.Tensors().Items("v.")) > 0}, nil
}

// CheckModel reads a GGUF's metadata and tensor list, as Load does first,
// without loading anything: an error wrapping ErrBadModel says the file is
// malformed or truncated (the caller's fault, not the engine's).
func CheckModel(path string) error {
	_, err := readMeta(path)
	return err
}

// errNoVision is ErrNoVision naming the model, and why its file's vision
// encoder is not used where it has one.
func (e *Engine) errNoVision() error {
	if e.info.VisionOff != "" {
		return fmt.Errorf("%w (%s: %s)", ErrNoVision, e.info.Name, e.info.VisionOff)
	}
	return fmt.Errorf("%w (%s)", ErrNoVision, e.info.Name)
}

// unsupportedConv names a vision-encoder convolution kernel (a tensor of
// four or more dimensions under "v.") stored in a type ggml's convolution
// cannot run: its im2col takes F32 or F16 kernels and aborts the process
// on any other (a BF16 patch embedding did, on the first image). Empty
// when every kernel is F32 or F16.
func unsupportedConv(meta *fsggml.GGML) string {
	for _, t := range meta.Tensors().Items("v.") {
		if len(t.Shape) >= 4 && t.Kind != uint32(fsggml.TensorTypeF32) && t.Kind != uint32(fsggml.TensorTypeF16) {
			return fmt.Sprintf("its convolution kernel %s is %s, and ggml's convolution runs F32 or F16 kernels only", t.Name, fsggml.TensorType(t.Kind))
		}
	}
	return ""
}

// readMeta reads a GGUF's metadata and tensor list (arrays over 1,024 values skipped)
// and checks that the file holds all the tensor data the list promises.
func readMeta(path string) (*fsggml.GGML, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	defer f.Close()
	// Arrays of up to 1,024 values are read (per-layer head counts, which
	// say which layers are recurrent); the vocabulary's are skipped.
	meta, err := fsggml.Decode(f, 1024)
	if err != nil {
		return nil, fmt.Errorf("models: %s: %w: reading GGUF metadata: %w", path, ErrBadModel, err)
	}
	if st, err := f.Stat(); err == nil && st.Size() < meta.Length {
		return nil, fmt.Errorf("models: %s: %w: truncated: %d bytes, the tensors need %d", path, ErrBadModel, st.Size(), meta.Length)
	}
	return meta, nil
}

// newModel wraps model.New, turning the engine's panics (malformed
// tensors, out of memory) into errors.
func newModel(path string, params ml.BackendParams) (m model.Model, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(r)
		}
	}()
	return model.New(path, params)
}

func initCache(c kvcache.Cache, b ml.Backend, o resolved) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(r)
		}
	}()
	// The cache gets a backend whose large contexts span several (see
	// cacheBackend): the recurrent cache's checkpoint contexts outgrow the
	// graph-node limit with many sequence slots.
	c.Init(newCacheBackend(b), o.kvType, o.Sequences, o.cacheCaps, o.BatchSize)
	return nil
}

func panicError(r any) error {
	if err, ok := r.(error); ok {
		return fmt.Errorf("engine failure: %w", err)
	}
	return fmt.Errorf("engine failure: %v", r)
}

// gpuLayers assigns the last o.GPULayers layers (all when 0) to the GPUs
// ggml found, split evenly in device order, and returns each list entry's
// device as ggml describes it (its free memory included) and a line that
// names them. Without GPUs it returns an empty list (everything on the
// CPU).
func gpuLayers(path string, o resolved, blocks int) (ml.GPULayersList, []ml.DeviceInfo, string, error) {
	if len(SystemInfo().GPUs()) == 0 {
		return nil, nil, "CPU", nil
	}
	b, err := probeBackend(path, o.Threads)
	if err != nil {
		return nil, nil, "", err
	}
	devs := b.BackendDevices()
	b.Close()
	if len(devs) == 0 {
		return nil, nil, "CPU", nil
	}
	n := blocks + 1
	if o.GPULayers > 0 {
		n = min(o.GPULayers, blocks+1)
	}
	layers := make([]int, 0, n)
	for l := blocks + 1 - n; l <= blocks; l++ {
		layers = append(layers, l)
	}
	var list ml.GPULayersList
	var used []ml.DeviceInfo
	var names []string
	per := (len(layers) + len(devs) - 1) / len(devs)
	for i, d := range devs {
		lo, hi := min(i*per, len(layers)), min((i+1)*per, len(layers))
		if lo == hi {
			break
		}
		list = append(list, ml.GPULayers{DeviceID: d.DeviceID, Layers: slices.Clone(layers[lo:hi])})
		used = append(used, d)
		names = append(names, fmt.Sprintf("%s %s (%d/%d layers)", d.Library, d.Name, hi-lo, blocks+1))
	}
	return list, used, strings.Join(names, ", "), nil
}

func probeBackend(path string, threads int) (b ml.Backend, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(r)
		}
	}()
	return ml.NewBackend(path, ml.BackendParams{AllocMemory: false, NumThreads: threads})
}

// PromptKey is the GGUF metadata key naming the planning-prompt variant a
// model was trained on (Info.Prompt).
const PromptKey = "general.nesy.prompt"

// Info implements LM.
func (e *Engine) Info() Info { return e.info }

// Vocab implements LM. The returned vocabulary is shared: do not modify it.
func (e *Engine) Vocab() *Vocab { return e.tok.vocab }

// Tokenize implements LM.
func (e *Engine) Tokenize(text string, parseSpecial bool) ([]int32, error) {
	return e.tok.Tokenize(text, parseSpecial)
}

// Detokenize implements LM.
func (e *Engine) Detokenize(ids []int32) (string, error) { return e.tok.Detokenize(ids) }

// RenderChat implements LM.
func (e *Engine) RenderChat(msgs []Message, opts ChatOptions) (string, error) {
	return e.chat.render(msgs, opts)
}

// SystemInfo returns the ggml backends and devices (see SystemInfo).
func (e *Engine) SystemInfo() System { return SystemInfo() }

// NewSequence implements LM.
func (e *Engine) NewSequence() (SeqID, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, ErrClosed
	}
	return e.allocLocked()
}

func (e *Engine) allocLocked() (SeqID, error) {
	for i := range e.seqs {
		if !e.seqs[i].inUse {
			e.seqs[i] = seqState{inUse: true}
			e.stats.SequencesInUse++
			return SeqID(i), nil
		}
	}
	return 0, ErrNoSequences
}

func (e *Engine) seqLocked(id SeqID) (*seqState, error) {
	if id < 0 || int(id) >= len(e.seqs) || !e.seqs[id].inUse || e.seqs[id].release {
		return nil, fmt.Errorf("%w %d", ErrUnknownSequence, id)
	}
	return &e.seqs[id], nil
}

// Fork implements LM: the new sequence shares the first n positions of src
// in the cache. For recurrent models n below Len(src) restores the nearest
// checkpoint and recomputes the rest on the next Eval.
func (e *Engine) Fork(src SeqID, n int) (SeqID, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, ErrClosed
	}
	s, err := e.seqLocked(src)
	if err != nil {
		return 0, err
	}
	if n < 0 || n > len(s.hist) {
		return 0, fmt.Errorf("models: fork of sequence %d at %d: it holds %d positions", src, n, len(s.hist))
	}
	if s.busy && e.checkpoints != nil {
		return 0, fmt.Errorf("%w (fork of %d)", ErrSequenceBusy, src)
	}
	id, err := e.allocLocked()
	if err != nil {
		return 0, err
	}
	d := &e.seqs[id]
	d.hist = slices.Clone(s.hist[:n])
	d.rope = marksUpTo(s.rope, n)
	if e.checkpoints == nil {
		keep := min(n, s.valid)
		unlock := e.lockDevices()
		e.cache.CopyPrefix(int(src), int(id), int32(keep))
		unlock()
		e.cells.copyPrefix(int(src), int(id), int32(keep))
		d.valid = keep
		return id, nil
	}
	unlock := e.lockDevices()
	e.cache.CopyPrefix(int(src), int(id), int32(s.valid))
	unlock()
	d.valid = s.valid
	if err := e.truncateCacheLocked(id, n); err != nil {
		e.freeLocked(id)
		return 0, err
	}
	if err := e.imageRecompute(id, n); err != nil {
		e.freeLocked(id)
		return 0, fmt.Errorf("models: fork of sequence %d at %d: %w", src, n, err)
	}
	return id, nil
}

// Truncate implements LM.
func (e *Engine) Truncate(seq SeqID, n int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	s, err := e.seqLocked(seq)
	if err != nil {
		return err
	}
	if s.busy {
		return fmt.Errorf("%w (truncate of %d)", ErrSequenceBusy, seq)
	}
	if n < 0 {
		return fmt.Errorf("models: truncate of sequence %d to %d", seq, n)
	}
	if n >= len(s.hist) {
		return nil
	}
	return e.truncateLocked(seq, n)
}

// truncateLocked cuts the sequence's history and cache to n positions.
func (e *Engine) truncateLocked(seq SeqID, n int) error {
	s := &e.seqs[seq]
	s.hist = s.hist[:n]
	s.rope = marksUpTo(s.rope, n)
	if err := e.truncateCacheLocked(seq, n); err != nil {
		return err
	}
	if err := e.imageRecompute(seq, n); err != nil {
		return fmt.Errorf("models: truncate of sequence %d to %d: %w", seq, n, err)
	}
	return nil
}

// imageRecompute checks a recurrent model's sequence cut to n positions
// whose cache kept fewer (no state checkpoint at n): the positions between
// are recomputed by the next Eval, which an image's cannot be (its
// embeddings are not kept). Then the sequence is cut to what the cache
// holds and the error (ErrUnsupported) says so; the caller may start over
// (explore's dialog does).
func (e *Engine) imageRecompute(seq SeqID, n int) error {
	s := &e.seqs[seq]
	if e.checkpoints == nil || s.valid >= n || !slices.Contains(s.hist[s.valid:n], -1) {
		return nil
	}
	s.hist = s.hist[:s.valid]
	s.rope = marksUpTo(s.rope, s.valid)
	return fmt.Errorf("%w: positions %d-%d would be recomputed and hold an image (the recurrent state has no checkpoint after it); the sequence now holds %d", ErrUnsupported, s.valid, n, s.valid)
}

// truncateCacheLocked makes the cache hold at most n positions of seq,
// leaving hist[valid:] to recompute when a recurrent model has no
// checkpoint at n.
func (e *Engine) truncateCacheLocked(seq SeqID, n int) error {
	s := &e.seqs[seq]
	if s.valid <= n {
		return nil
	}
	defer e.lockDevices()()
	if e.checkpoints == nil {
		if err := e.cache.Remove(int(seq), int32(n), math.MaxInt32); err != nil {
			return fmt.Errorf("models: truncate of sequence %d: %w", seq, err)
		}
		e.cells.removeTail(int(seq), int32(n))
		s.valid = n
		return nil
	}
	keep := int32(0)
	if n > 0 {
		if r, ok := e.checkpoints.PrepareRestore(int(seq), int32(n)); ok {
			keep = r
		}
	}
	if err := e.cache.Remove(int(seq), keep, math.MaxInt32); err != nil {
		keep = 0
		if err := e.cache.Remove(int(seq), 0, math.MaxInt32); err != nil {
			return fmt.Errorf("models: truncate of sequence %d: %w", seq, err)
		}
	}
	s.valid = int(keep)
	return nil
}

// removePadsLocked removes the last pads positions of seq from the cache:
// the pads of a padded pass (see buildPadded), which follow its valid
// positions. The hybrid cache refuses cuts that are not a checkpoint
// restore; its recurrent base removes a tail range as it removes a middle
// one (the cells, and any checkpoint captured at them), with nothing after
// it to shift. Should that fail the sequence's cache is dropped and its
// history recomputed on the next Eval.
func (e *Engine) removePadsLocked(seq SeqID, pads int) {
	s := &e.seqs[seq]
	from := int32(s.valid)
	defer e.lockDevices()()
	if hc, ok := e.hybrid.m.Cache.(*qwen3next.HybridCache); ok {
		err := hc.Recurrent.Remove(int(seq), from, from+int32(pads))
		if err == nil {
			return
		}
		e.opts.Logger.Warn("models: removing a padded pass's pads failed; the sequence will be recomputed", "seq", seq, "error", err)
	}
	_ = e.cache.Remove(int(seq), 0, math.MaxInt32)
	s.valid = 0
}

// Release implements LM.
func (e *Engine) Release(seq SeqID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if seq < 0 || int(seq) >= len(e.seqs) || !e.seqs[seq].inUse {
		return
	}
	if e.seqs[seq].busy {
		e.seqs[seq].release = true
		return
	}
	e.freeLocked(seq)
}

func (e *Engine) freeLocked(seq SeqID) {
	if !e.closed {
		// Removing a whole sequence never fails for the engine's caches;
		// if it did, the slot's cells would stay allocated until reuse.
		unlock := e.lockDevices()
		_ = e.cache.Remove(int(seq), 0, math.MaxInt32)
		unlock()
		e.cells.removeTail(int(seq), 0)
	}
	e.seqs[seq] = seqState{}
	e.stats.SequencesInUse--
}

// Len implements LM; unknown sequences have length 0.
func (e *Engine) Len(seq SeqID) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, err := e.seqLocked(seq)
	if err != nil {
		return 0
	}
	return len(s.hist)
}

// Stats implements LM.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// Close stops the engine (pending Eval calls fail with ErrClosed) and
// frees the model. It is safe to call more than once.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		<-e.done
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.nudge()
	<-e.done
	err := e.runner.Close()
	e.cache.Close()
	e.model.Backend().Close()
	return err
}

// lockDevices takes the process-wide locks of the engine's ggml devices
// (see package ggmlthread) for cache operations that may compute a graph
// of their own (a RoPE shift on truncation, a recurrent state's copy on
// write or checkpoint restore), and returns the unlock. Callers hold e.mu;
// no holder of a device lock waits for an engine's mu.
func (e *Engine) lockDevices() func() {
	return e.runner.LockBackend(e.model.Backend())
}

func (e *Engine) nudge() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Eval implements LM.
func (e *Engine) Eval(ctx context.Context, reqs []EvalRequest) ([]EvalResult, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	j := &job{ctx: ctx, done: make(chan struct{})}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	for i, r := range reqs {
		if err := e.checkLocked(reqs, i); err != nil {
			e.mu.Unlock()
			return nil, err
		}
		j.reqs = append(j.reqs, &reqState{job: j, req: r})
	}
	for _, r := range reqs {
		e.seqs[r.Seq].busy = true
	}
	j.pending = len(j.reqs)
	e.queue = append(e.queue, j)
	e.mu.Unlock()
	e.nudge()

	select {
	case <-j.done:
	case <-ctx.Done():
		e.nudge()
		<-j.done
	}
	if j.err != nil {
		return nil, j.err
	}
	out := make([]EvalResult, len(j.reqs))
	for i, r := range j.reqs {
		out[i] = EvalResult{Logits: r.logits, Images: r.images, Positions: len(r.inputs) - r.pre}
	}
	return out, nil
}

// checkLocked validates request i of an Eval call.
func (e *Engine) checkLocked(reqs []EvalRequest, i int) error {
	r := reqs[i]
	s, err := e.seqLocked(r.Seq)
	if err != nil {
		return err
	}
	if s.busy {
		return fmt.Errorf("%w (eval on %d)", ErrSequenceBusy, r.Seq)
	}
	for _, o := range reqs[:i] {
		if o.Seq == r.Seq {
			return fmt.Errorf("models: eval: sequence %d appears in two requests", r.Seq)
		}
	}
	if len(r.Images) > 0 && e.mm == nil {
		return e.errNoVision()
	}
	for _, t := range r.Tokens {
		if n, ok := imageIndex(t); ok {
			if e.mm == nil {
				return e.errNoVision()
			}
			if n >= len(r.Images) {
				return fmt.Errorf("models: eval: image placeholder %d but only %d images", n, len(r.Images))
			}
		} else if int(t) >= e.tok.vocabSize {
			return fmt.Errorf("models: eval: token id %d outside the vocabulary (%d tokens)", t, e.tok.vocabSize)
		}
	}
	if len(r.Tokens) == 0 && len(r.Images) == 0 {
		return fmt.Errorf("models: eval: request on sequence %d has no tokens", r.Seq)
	}
	if err := checkCandidates(r, e.tok.vocabSize); err != nil {
		return err
	}
	if len(s.hist)+len(r.Tokens) > e.opts.ContextLength {
		return fmt.Errorf("%w: sequence %d holds %d positions, %d more requested, limit %d",
			ErrContextLength, r.Seq, len(s.hist), len(r.Tokens), e.opts.ContextLength)
	}
	return nil
}

// job is one Eval call.
type job struct {
	ctx     context.Context
	reqs    []*reqState
	pending int   // requests not finished
	err     error // set before done is closed
	done    chan struct{}
	started bool // inputs prepared
}

// reqState is one request's progress.
type reqState struct {
	job *job
	req EvalRequest
	// inputs are the positions to compute: the sequence's pending
	// recomputation (pre of them) and the request's own.
	inputs []*input.Input
	pre    int
	// text marks inputs that are the request's own text tokens (rows for
	// AllLogits).
	text   []bool
	next   int // inputs computed
	start  int // Len(seq) before the request
	images int
	// rope are the inputs' rotary time positions where they are not
	// their logical ones (see ropePositions; nil: they are).
	rope   []int32
	logits [][]float32
	mm     *mmStore
}

func (r *reqState) finished() bool { return r.inputs != nil && r.next == len(r.inputs) }

// wantsRow says whether input i yields a logit row.
func (r *reqState) wantsRow(i int) bool {
	if i == len(r.inputs)-1 {
		return true
	}
	return r.req.AllLogits && i >= r.pre && r.text[i]
}
