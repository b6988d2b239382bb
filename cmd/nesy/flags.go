package main

import (
	"fmt"
	"math"

	"github.com/dustin/go-humanize"

	"github.com/nesy-dev/nesy/mcts"
)

// searchMemoryUsage is the help of --search-memory, shared by plan and bench.
const searchMemoryUsage = `bound each search's tree (mcts, cmcts) to this much memory, e.g. 2GiB or 500MB: a search that reaches it stops with stop "memory", keeping its best plan (default: half the machine's memory)`

// deltaRuleUsage is the help of --delta-rule (plan, bench, serve).
const deltaRuleUsage = "Qwen3.5 models' gated delta-net: auto (nesy's CPU kernels where every layer runs on the CPU, else graph), kernel (nesy's CPU kernels), operator (ggml's RWKV-7 operator, also on a GPU) or graph (ggml's general operators)"

// sequencesUsage is the help of --sequences (plan, bench).
const sequencesUsage = "engine sequence slots (0: the method's default, 128 for mcts and cmcts, fewer where a Qwen3.5 model's recurrent state (about 50 MiB per slot at the 4B shape) would not fit in memory; a value that does not fit is an error naming the most that do)"

// fullLogitsUsage is the help of --full-logits (plan, bench, serve).
const fullLogitsUsage = "compute every token's logit at every step; by default a CPU engine computes only the tokens the constraint allows (the same plans, less work: the output projection is most of a small model with a large vocabulary). For comparisons"

// parseSearchMemory reads a --search-memory value in bytes; "" is the
// default, mcts.DefaultSearchMemory.
func parseSearchMemory(s string) (int64, error) {
	if s == "" {
		return mcts.DefaultSearchMemory(), nil
	}
	n, err := humanize.ParseBytes(s)
	if err != nil || n < mcts.NodeBytes || n > math.MaxInt64 {
		return 0, fmt.Errorf("--search-memory %q: want a size of at least %s, such as 512MiB or 2GB", s, humanize.IBytes(mcts.NodeBytes))
	}
	return int64(n), nil
}
