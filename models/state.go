package models

import (
	"fmt"
	"math/big"

	humanize "github.com/dustin/go-humanize"
	fsggml "github.com/ollama/ollama/fs/ggml"
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
