package models

import (
	"fmt"
	"math/big"
	"os"
	"strconv"
	"strings"

	humanize "github.com/dustin/go-humanize"
	fsggml "github.com/ollama/ollama/fs/ggml"
	"github.com/ollama/ollama/ml"

	"github.com/nesy-dev/nesy/internal/sysmem"
)

// stateBytes is the recurrent state one sequence slot of a model takes:
// statePerLayer for every delta-net layer (stateLayers). 0 for models
// without recurrent layers.
func stateBytes(kv fsggml.KV) int64 {
	return statePerLayer(kv) * int64(len(stateLayers(kv)))
}

// statePerLayer is the recurrent state one sequence slot holds in one of
// a model's gated delta-net layers (Qwen3.5's: qwen35, qwen35moe,
// qwen3next): the delta rule's state (the value head size squared per
// value head) and the short convolution's (kernel - 1 columns of the QKV
// channels), F32, as Ollama's recurrent cache allocates them for every
// slot at load (kvcache.Recurrent, sized as qwen3next.New sizes it).
// Checkpoints of a slot's state (taken every few thousand positions of a
// long sequence) come on top. 0 for other architectures.
func statePerLayer(kv fsggml.KV) int64 {
	switch kv.Architecture() {
	case "qwen35", "qwen35moe", "qwen3next":
	default:
		return 0
	}
	inner, dState, groups := int64(kv.SSMInnerSize()), int64(kv.SSMStateSize()), int64(kv.SSMGroupCount())
	vHeads := int64(kv.Uint("ssm.time_step_rank"))
	conv := max(0, int64(kv.SSMConvKernel())-1)
	var headV int64
	if vHeads > 0 {
		headV = inner / vHeads
	}
	return 4 * (headV*headV*vHeads + conv*(inner+2*groups*dState))
}

// stateLayers are the layers that hold recurrent state: for the
// architectures statePerLayer sizes, those whose attention.head_count_kv
// is 0 (the delta-net layers); none for others.
func stateLayers(kv fsggml.KV) []int {
	if statePerLayer(kv) == 0 {
		return nil
	}
	var layers []int
	for l, h := range kv.HeadCountKV() {
		if h == 0 {
			layers = append(layers, l)
		}
	}
	return layers
}

// stateShare is one memory's part in a load's sequence slots: the bytes
// the model may take there (free; 0 or less: unknown, not bounded), the
// bytes the load puts there whatever the number of slots (fixed: on a GPU
// its layers' weights and the attention layers' KV cache), and the
// recurrent state each slot adds there (perSlot).
type stateShare struct {
	device               string // "" for the system's memory
	free, fixed, perSlot int64
}

// stateShares splits a load's recurrent state over the memories that will
// hold it: the system's memory (bounded by cpuFree, see
// stateMemoryAvailable) for the layers the CPU runs, and each device of
// list (with devs[i] list[i]'s device, its free memory read before the
// load) for its layers. A device's share counts nine tenths of its free
// memory, less its layers' weights (blk.N tensors; output and output_norm
// belong to the output layer, numbered BlockCount) and the KV cache of its
// attention layers (cells per layer, each kvType's bytes per value): an
// estimate that leaves a tenth for the compute graph and CUDA's own
// buffers. Recurrent models only: nil when the model has no state.
func stateShares(meta *fsggml.GGML, list ml.GPULayersList, devs []ml.DeviceInfo, cpuFree int64, cells int, kvType ml.DType) []stateShare {
	kv := meta.KV()
	per := statePerLayer(kv)
	if per == 0 {
		return nil
	}
	shares := []stateShare{{free: cpuFree}}
	on := make(map[int]int) // layer -> index in shares
	for i, g := range list {
		name := g.DeviceID.ID
		if i < len(devs) {
			name = strings.TrimSpace(devs[i].Name + " " + devs[i].Description)
			shares = append(shares, stateShare{device: name, free: int64(devs[i].FreeMemory) * 9 / 10})
		} else {
			shares = append(shares, stateShare{device: name})
		}
		for _, l := range g.Layers {
			on[l] = len(shares) - 1
		}
	}
	for _, l := range stateLayers(kv) {
		shares[on[l]].perSlot += per
	}
	if len(list) == 0 {
		return shares
	}
	blocks := int(kv.BlockCount())
	for _, t := range meta.Tensors().Items() {
		if i, ok := on[tensorLayer(t.Name, blocks)]; ok && i > 0 {
			shares[i].fixed += int64(t.Size())
		}
	}
	perValue := kvBytes(kvType)
	heads := kv.HeadCountKV()
	width := float64(kv.EmbeddingHeadCountK() + kv.EmbeddingHeadCountV())
	for l, h := range heads {
		if i, ok := on[l]; ok && i > 0 && h > 0 {
			shares[i].fixed += int64(float64(cells) * float64(h) * width * perValue)
		}
	}
	return shares
}

// tensorLayer is the layer a tensor of a model with blocks layers belongs
// to as Ollama's backend places them: N for blk.N.*, blocks for output.*
// and output_norm.*, -1 for the rest (the input layer, on the CPU).
func tensorLayer(name string, blocks int) int {
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		if n, _, ok := strings.Cut(rest, "."); ok {
			if l, err := strconv.Atoi(n); err == nil {
				return l
			}
		}
		return -1
	}
	if strings.HasPrefix(name, "output.") || strings.HasPrefix(name, "output_norm.") {
		return blocks
	}
	return -1
}

// kvBytes is the bytes one value of a KV cache of type t takes (ggml's
// block sizes for the quantized types).
func kvBytes(t ml.DType) float64 {
	switch t {
	case ml.DTypeF32:
		return 4
	case ml.DTypeQ80:
		return 34.0 / 32
	case ml.DTypeQ40:
		return 18.0 / 32
	default:
		return 2
	}
}

// fitSlots checks the recurrent state of o.Sequences slots against each
// share's room (the model name, for errors) and returns the slots to
// load: o.Sequences where they fit everywhere (or nothing is bounded), as
// many as fit in the tightest share with FitSequences (logged), else a
// *StateMemoryError for the tightest share.
func fitSlots(o resolved, name string, shares []stateShare) (int, error) {
	var worst *StateMemoryError
	for _, sh := range shares {
		if sh.free <= 0 || sh.perSlot <= 0 {
			continue
		}
		room := sh.free - sh.fixed
		if room > 0 && int64(o.Sequences) <= room/sh.perSlot { // Sequences*perSlot <= room, without overflow
			continue
		}
		e := &StateMemoryError{Model: name, Device: sh.device, Sequences: o.Sequences, PerSlot: sh.perSlot, Available: max(0, room)}
		if worst == nil || e.Fit() < worst.Fit() {
			worst = e
		}
	}
	if worst == nil {
		return o.Sequences, nil
	}
	if !o.FitSequences || worst.Fit() < 1 {
		return 0, worst
	}
	where := worst.Device
	if where == "" {
		where = "memory"
	}
	o.Logger.Warn("models: loading fewer sequence slots: their recurrent state would not fit", "model", name, "in", where,
		"asked", o.Sequences, "loaded", worst.Fit(), "state_per_slot", humanize.IBytes(uint64(worst.PerSlot)), "available", humanize.IBytes(uint64(worst.Available)))
	return worst.Fit(), nil
}

// stateMemoryAvailable is what the sequence slots' recurrent state of the
// model at path may take by default (Options.StateMemory 0): nine tenths
// of the memory the system reports available less the file's size (the
// weights load into memory too); 0 when the system does not say.
func stateMemoryAvailable(path string) int64 {
	avail := sysmem.Available()
	if avail <= 0 {
		return 0
	}
	if st, err := os.Stat(path); err == nil {
		avail -= st.Size()
	}
	return max(1, avail*9/10)
}

// StateMemoryError is Load's error when the sequence slots' recurrent
// state would not fit in the memory available to it (see
// Options.StateMemory): it names the sizes and the most slots that fit.
type StateMemoryError struct {
	Model string
	// Device is the GPU whose memory is short ("" for the system's).
	Device    string
	Sequences int   // slots asked for
	PerSlot   int64 // bytes of recurrent state per slot
	Available int64 // bytes the state may take
}

// Fit is the most sequence slots whose state fits (0 when not even one).
func (e *StateMemoryError) Fit() int { return int(e.Available / max(1, e.PerSlot)) }

func (e *StateMemoryError) Error() string {
	where := "of memory available for it"
	if e.Device != "" {
		where = "free for it on " + e.Device
	}
	return fmt.Sprintf("models: %s: %d sequence slots need %s of recurrent state (%s each), more than the %s %s; load at most %d (--sequences)",
		e.Model, e.Sequences, humanize.BigIBytes(new(big.Int).Mul(big.NewInt(int64(e.Sequences)), big.NewInt(e.PerSlot))), humanize.IBytes(uint64(e.PerSlot)),
		humanize.IBytes(uint64(max(0, e.Available))), where, e.Fit())
}
