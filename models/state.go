package models

import (
	"fmt"
	"math/big"
	"os"

	humanize "github.com/dustin/go-humanize"
	fsggml "github.com/ollama/ollama/fs/ggml"

	"github.com/nesy-dev/nesy/internal/sysmem"
)

// stateBytes is the recurrent state one sequence slot of a model takes:
// for Qwen3.5's gated delta-net layers (qwen35, qwen35moe, qwen3next) the
// delta rule's state (the value head size squared per value head) and the
// short convolution's (kernel - 1 columns of the QKV channels), F32, for
// every delta-net layer (a layer whose attention.head_count_kv is 0), as
// Ollama's recurrent cache allocates them for every slot at load
// (kvcache.Recurrent, sized as qwen3next.New sizes it). Checkpoints of a
// slot's state (taken every few thousand positions of a long sequence)
// come on top. 0 for models without recurrent layers.
func stateBytes(kv fsggml.KV) int64 {
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
	perLayer := 4 * (headV*headV*vHeads + conv*(inner+2*groups*dState))
	var layers int64
	for _, h := range kv.HeadCountKV() {
		if h == 0 {
			layers++
		}
	}
	return perLayer * layers
}

// fitSlots checks the recurrent state of o.Sequences slots of perSlot
// bytes each (the model name at path, every layer on the CPU) against
// o.StateMemory and returns the slots to load: o.Sequences where they fit
// or there is no bound, as many as fit with FitSequences (logged), else a
// *StateMemoryError.
func fitSlots(o resolved, name, path string, perSlot int64) (int, error) {
	limit := o.StateMemory
	if limit < 0 {
		return o.Sequences, nil
	}
	if limit == 0 {
		limit = stateMemoryAvailable(path)
	}
	if limit == 0 || int64(o.Sequences) <= limit/perSlot { // Sequences*perSlot <= limit, without overflow
		return o.Sequences, nil
	}
	serr := &StateMemoryError{Model: name, Sequences: o.Sequences, PerSlot: perSlot, Available: limit}
	if !o.FitSequences || serr.Fit() < 1 {
		return 0, serr
	}
	o.Logger.Warn("models: loading fewer sequence slots: their recurrent state would not fit in memory", "model", name,
		"asked", o.Sequences, "loaded", serr.Fit(), "state_per_slot", humanize.IBytes(uint64(perSlot)), "available", humanize.IBytes(uint64(limit)))
	return serr.Fit(), nil
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
	Model     string
	Sequences int   // slots asked for
	PerSlot   int64 // bytes of recurrent state per slot
	Available int64 // bytes the state may take
}

// Fit is the most sequence slots whose state fits (0 when not even one).
func (e *StateMemoryError) Fit() int { return int(e.Available / max(1, e.PerSlot)) }

func (e *StateMemoryError) Error() string {
	return fmt.Sprintf("models: %s: %d sequence slots need %s of recurrent state (%s each), more than the %s of memory available for it; load at most %d (--sequences)",
		e.Model, e.Sequences, humanize.BigIBytes(new(big.Int).Mul(big.NewInt(int64(e.Sequences)), big.NewInt(e.PerSlot))), humanize.IBytes(uint64(e.PerSlot)),
		humanize.IBytes(uint64(max(0, e.Available))), e.Fit())
}
