#!/usr/bin/env bash
# Side by side with llama.cpp (issue 16): nesy's models API against
# llama.cpp's C API (as vendored in Ollama's module: the same ggml sources,
# built with the same flags) on the same reference GGUF, with the same
# threads, KV cache (one, shared by every sequence) and attention path.
#
#   scripts/llamacpp-bench.sh [OUT]      (default OUT: runs/llamacpp-bench)
#
# Environment: ROUNDS (default 6), NESY_BENCH_THREADS (default 2), FLASH
# (default "off on": both attention paths), NESY_BENCH_MODEL (a GGUF;
# default the reference model, generated once into OUT).
#
# It builds one test binary with the llamacpp tag (libllama compiles once,
# a few minutes), checks that both engines give the same logits, then runs
# each pair (nesy's BenchmarkPrefill / Decode / Forked16Batched and
# llama.cpp's) ROUNDS times, interleaved and alternating which goes first,
# and prints the ratios nesy / llama.cpp of tok/s per round. Raw lines go
# to OUT/bench.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/llamacpp-bench}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
ROUNDS=${ROUNDS:-6}
export NESY_BENCH_THREADS=${NESY_BENCH_THREADS:-2}
FLASH=${FLASH:-off on}
OL=$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)
export CGO_ENABLED=1
export CGO_CFLAGS="-O3 -march=${NESY_MARCH:-native} -Wno-deprecated-declarations"
export CGO_CXXFLAGS="-O3 -march=${NESY_MARCH:-native}"
export CGO_CPPFLAGS="-I$OL/llama/llama.cpp/include -I$OL/ml/backend/ggml/ggml/include"
go test -c -tags llamacpp -o "$OUT/models-llamacpp.test" ./models
if [ -z "${NESY_BENCH_MODEL:-}" ]; then
	if [ ! -s "$OUT/reference.gguf" ]; then
		go run ./cmd/nesy mkmodel --reference --out "$OUT/reference.gguf"
	fi
	export NESY_BENCH_MODEL=$OUT/reference.gguf
fi
cd models
for f in $FLASH; do
	NESY_BENCH_FLASH=$f "$OUT/models-llamacpp.test" -test.run '^TestLlamaCppSameLogits$' -test.v 2>&1 | grep -E '^(---|ok|FAIL|PASS)' || true
done
: > "$OUT/bench.txt"
pairs="Prefill:LlamaCppPrefill:3x Decode:LlamaCppDecode:64x Forked16Batched:LlamaCppForked16:8x"
for r in $(seq 1 "$ROUNDS"); do
	for f in $FLASH; do
		for p in $pairs; do
			IFS=: read -r ours theirs n <<<"$p"
			order="$ours $theirs"
			[ $((r % 2)) -eq 0 ] && order="$theirs $ours"
			for b in $order; do
				NESY_BENCH_FLASH=$f "$OUT/models-llamacpp.test" -test.run '^$' -test.bench "^Benchmark$b\$" -test.benchtime "$n" 2>/dev/null |
					awk -v r="$r" -v f="$f" '/^Benchmark/ { for (i = 1; i <= NF; i++) if ($(i+1) == "tok/s") print r, f, $1, $i }' | tee -a "$OUT/bench.txt"
			done
		done
	done
done
echo "nesy / llama.cpp, tok/s, per round:"
awk '
	{ sub(/-[0-9]+$/, "", $3); v[$1" "$2" "$3] = $4; rounds[$1] = 1; flash[$2] = 1 }
	END {
		split("Prefill:LlamaCppPrefill Decode:LlamaCppDecode Forked16Batched:LlamaCppForked16", ps, " ")
		for (f in flash) for (k in ps) {
			split(ps[k], q, ":"); line = ""
			for (r in rounds) { a = v[r" "f" Benchmark"q[1]]; b = v[r" "f" Benchmark"q[2]]; if (a && b) line = line sprintf(" %.2f", a / b) }
			printf "flash %s %-16s%s\n", f, q[1], line
		}
	}' "$OUT/bench.txt"
