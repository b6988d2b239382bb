#!/usr/bin/env bash
# The prior ablation of issue 11 on ALFWorld valid_unseen (evaluation only),
# from the true initial state, one ggml thread: every prior (uniform: zero
# logits; tiny: random weights; the trained GGUF) with cgreedy on all 134
# tasks, and with cmcts valued by the model alone (--heuristic blind) and by
# h_FF on a shard of the tasks spread over the task types; method "rollout"
# is model-only values with sampled rollouts (--rollout 50 --rollout-temp 1
# --no-revisit, the setting chosen on valid_train). Runs that already
# finished in OUT are kept (nesy bench resumes). Prints one markdown row per
# run and `nesy bench compare` of the trained prior against each baseline.
#
# Usage: scripts/prior-ablation.sh NESY PRIOR.gguf OUT [SHARD=0/7] [SECONDS=60] [PRIORS="uniform tiny trained"] [METHODS="cgreedy blind ff"] (also: rollout)
set -u
NESY=${1:?usage: $0 NESY PRIOR.gguf OUT [SHARD] [SECONDS] [PRIORS] [METHODS]}
PRIOR=${2:?prior GGUF}
OUT=${3:?output folder}
SHARD=${4:-0/7}
SECONDS_=${5:-60}
PRIORS=${6:-uniform tiny trained}
METHODS=${7:-cgreedy blind ff}
mkdir -p "$OUT"
run() { # prior method
	local model=$1 name=$1 method=$2 args=()
	[ "$model" = trained ] && model=$PRIOR
	case $method in
	cgreedy) args=(--method cgreedy) ;;
	blind) args=(--method cmcts --heuristic blind --shard "$SHARD" --seconds "$SECONDS_") ;;
	ff) args=(--method cmcts --heuristic ff --shard "$SHARD" --seconds "$SECONDS_") ;;
	rollout) args=(--method cmcts --heuristic blind --rollout 50 --rollout-temp 1 --no-revisit --shard "$SHARD" --seconds "$SECONDS_") ;;
	*) echo "unknown method $method (want cgreedy, blind, ff or rollout)" >&2; return ;;
	esac
	"$NESY" bench --env alfworld --mode true-state --model "$model" --threads 1 --quiet \
		--out "$OUT/$name-$method" "${args[@]}" >"$OUT/$name-$method.log" 2>&1 ||
		echo "$name $method: nesy bench failed (see $OUT/$name-$method.log)" >&2
}
for m in $METHODS; do
	for p in $PRIORS; do
		run "$p" "$m"
	done
done
echo "| prior | method | tasks | success | median simulations (solved) | median evaluated tokens (solved) | median seconds |"
echo "|---|---|---|---|---|---|---|"
for m in $METHODS; do
	for p in $PRIORS; do
		f="$OUT/$p-$m/tasks.jsonl"
		[ -f "$f" ] || continue
		python3 - "$f" "$p" "$m" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ok = [r for r in rows if r.get("success")]
def med(key, rs):
    v = [r.get(key) for r in rs if r.get(key) is not None]
    return ("%g" % statistics.median(v)) if v else "-"
print("| %s | %s | %d | %d (%.1f%%) | %s | %s | %s |" % (sys.argv[2], sys.argv[3], len(rows), len(ok),
      100.0 * len(ok) / max(1, len(rows)), med("simulations", ok), med("evaluated_tokens", ok), med("seconds", rows)))
PY
	done
done
for m in $METHODS; do
	for p in $PRIORS; do
		[ "$p" = trained ] && continue
		[ -f "$OUT/trained-$m/tasks.jsonl" ] && [ -f "$OUT/$p-$m/tasks.jsonl" ] || continue
		echo
		echo "trained vs $p, $m:"
		"$NESY" bench compare "$OUT/trained-$m" "$OUT/$p-$m"
	done
done
