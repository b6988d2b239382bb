#!/usr/bin/env bash
# End-to-end test of the live search view (/ui) in headless Chromium.
#
# Builds bin/nesy (SIMD flags, as the Makefile), writes a random-weight qwen3
# model (with the real Qwen3 vocabulary when ../shared has it), starts
# `nesy serve` on a free loopback port, runs server/web/test/ui.test.mjs
# (playwright-core driving Debian's chromium), re-validates the plan the page
# showed with `nesy validate`, and stops the server.
#
# Needs: chromium (apt-get install chromium), node and npm (npm ci in
# server/web is run here when node_modules is missing).
# Output: $OUT (default out/ui-test): mid-search.png, final.png,
# tree-5000.png, ui-metrics.json, plan.txt, serve.log.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/ui-test}
mkdir -p "$OUT" bin
export OUT
# The Makefile's flags when run from make (the same build cache), else the same values.
export CGO_ENABLED=1
export CGO_CFLAGS="${CGO_CFLAGS:--O3 -march=${NESY_MARCH:-native} -Wno-deprecated-declarations}"
export CGO_CXXFLAGS="${CGO_CXXFLAGS:--O3 -march=${NESY_MARCH:-native}}"

go build -o bin/nesy ./cmd/nesy
if [ ! -d server/web/node_modules ]; then
  (cd server/web && npm ci --no-audit --no-fund)
fi

model=bin/ui-test-qwen3.gguf
tok=../shared/tokenizers/qwen3/tokenizer.json
[ -n "${NESY_SHARED:-}" ] && tok=$NESY_SHARED/tokenizers/qwen3/tokenizer.json
if [ ! -f "$model" ]; then
  if [ -f "$tok" ]; then
    ./bin/nesy mkmodel --arch qwen3 --seed 1 --tokenizer "$tok" --out "$model"
  else
    ./bin/nesy mkmodel --arch qwen3 --seed 1 --out "$model"
  fi
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export NESY_URL=http://127.0.0.1:$port
./bin/nesy serve --addr "127.0.0.1:$port" --model "$model" --no-ollama >"$OUT/serve.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  curl -fs "$NESY_URL/healthz" >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || { cat "$OUT/serve.log"; echo "nesy serve exited"; exit 1; }
  sleep 0.2
done

node server/web/test/ui.test.mjs
./bin/nesy validate --domain examples/blocks/domain.pddl --problem examples/blocks/problem.pddl --plan "$OUT/plan.txt"
echo "ui-test: passed; screenshots and metrics in $OUT"
