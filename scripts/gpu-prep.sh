#!/usr/bin/env bash
# gpu-prep.sh: build here, where Go and the module cache are, everything that
# scripts/gpu-check.sh runs on a GPU node that has no Go, no module cache and
# no network, into one git-ignored folder that travels with the check:
#
#   <bundle>/bin/models.test.gz  go test -c ./models   (correctness, benchmarks)
#   <bundle>/bin/mcts.test.gz    go test -c ./mcts     (MCTS simulations/s)
#   <bundle>/bin/gpu.test.gz     go test -c ./models/gpu (NVML)
#   <bundle>/bin/nesy.gz         the nesy command
#   <bundle>/src/                the ggml sources the CUDA build needs, as
#                                Ollama's Dockerfile copies them: the Ollama
#                                module's CMakeLists.txt, CMakePresets.json
#                                and ml/backend/ggml/ggml
#   <bundle>/MANIFEST            versions, flags, commit, sizes, sha256
#   <bundle>/go.mod              keeps the bundle out of the nesy module's ./...
#
# The binaries are built for x86-64-v3 (AVX2, FMA, F16C), not -march=native:
# a development host with AVX-512 would build code the GPU node's CPU may
# lack. They are stripped (-s -w) and gzipped so that the bundle stays
# under the 64 MiB a device run can carry (gpu-check.sh unpacks them).
# Changing -march recompiles ggml's cgo code once (minutes; later runs hit
# the build cache).
#
# Usage: scripts/gpu-prep.sh [--out DIR] [--march LEVEL] [--no-nice]
#   --out DIR      bundle folder (default: gpu-bundle in the repository,
#                  git-ignored); emptied first
#   --march LEVEL  -march for cgo (default x86-64-v3)
#   --no-nice      build at normal priority (default: nice -n 10)
#   -h, --help     this text
#
# Then, on the GPU node (see docs/gpu.md):
#   bash scripts/gpu-check.sh --src gpu-bundle/src --test-bin gpu-bundle/bin --out OUT
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$repo/gpu-bundle"
march=x86-64-v3
nice=(nice -n 10)
limit_mib=64

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; }
while (($#)); do
  case "$1" in
    --out) out="${2:?--out needs a folder}"; shift ;;
    --march) march="${2:?--march needs a value}"; shift ;;
    --no-nice) nice=() ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu-prep: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

die() { printf 'gpu-prep: %s\n' "$*" >&2; exit 1; }
start=$SECONDS
say() { printf '[gpu-prep %4ds] %s\n' "$((SECONDS - start))" "$*"; }

command -v go >/dev/null || die "go is required"
command -v gzip >/dev/null || die "gzip is required"
cd "$repo"

# The same variables as the Makefile with NESY_MARCH=$march (the build cache
# keys on them: any other spelling recompiles ggml).
export CGO_ENABLED=1
export CGO_CFLAGS="-O3 -march=$march -Wno-deprecated-declarations"
export CGO_CXXFLAGS="-O3 -march=$march"

ollama_src="$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)"
ollama_version="$(go list -m -f '{{.Version}}' github.com/ollama/ollama)"
[[ -f "$ollama_src/CMakeLists.txt" && -d "$ollama_src/ml/backend/ggml/ggml" ]] ||
  die "Ollama module sources not found at '$ollama_src' (run go mod download)"

# Refuse to empty anything but a bundle (or a new folder).
if [[ -e "$out" ]]; then
  [[ -f "$out/MANIFEST" || -z "$(ls -A "$out")" ]] ||
    die "$out exists and is not a bundle (no MANIFEST); pick another --out"
  rm -rf "$out"
fi
mkdir -p "$out/bin" "$out/src/ml/backend/ggml"
echo "incomplete: scripts/gpu-prep.sh has not finished" >"$out/MANIFEST"

say "copying the ggml sources from $ollama_src ($ollama_version)"
cp -p "$ollama_src/CMakeLists.txt" "$ollama_src/CMakePresets.json" "$out/src/"
cp -rp "$ollama_src/ml/backend/ggml/ggml" "$out/src/ml/backend/ggml/"
# The copied sources hold .go files (Ollama's cgo wrappers): without a go.mod
# of its own the bundle would be part of the nesy module, and `go vet ./...`,
# `go test ./...` and `make test` would compile ggml from it (for minutes).
cat >"$out/go.mod" <<'EOF'
// Not Go code to build: this go.mod makes gpu-bundle/ a module of its own,
// so that ./... patterns of the nesy module skip the copied ggml sources.
module nesy.invalid/gpu-bundle

go 1.26
EOF
# The module cache is read-only; the copies need not be (CMake writes nothing
# into the sources, but a user cleaning the bundle should be able to).
chmod -R u+w "$out/src"

build() { # build NAME GO-ARGS... PACKAGE
  local name="$1"; shift
  say "building $name (CGO_CFLAGS=$CGO_CFLAGS)"
  local t0=$SECONDS
  "${nice[@]}" go "${@:1:$#-1}" -ldflags='-s -w' -o "$out/bin/$name" "${@: -1}"
  say "built $name in $((SECONDS - t0))s ($(du -h "$out/bin/$name" | cut -f1))"
}
build models.test test -c ./models
build mcts.test test -c ./mcts
build gpu.test test -c ./models/gpu
build nesy build ./cmd/nesy

say "compressing the binaries"
for f in "$out"/bin/*; do
  sha="$(sha256sum "$f" | cut -d' ' -f1)"
  printf '%s  %s\n' "$sha" "$(basename "$f")" >>"$out/bin/SHA256SUMS"
  gzip -9 "$f"
done

commit="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
dirty="$(git status --porcelain --untracked-files=no 2>/dev/null | head -c1)"
{
  echo "nesy gpu bundle, made by scripts/gpu-prep.sh"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit${dirty:+ (with uncommitted changes)}"
  echo "go: $(go version)"
  echo "ollama: github.com/ollama/ollama $ollama_version"
  echo "CGO_CFLAGS: $CGO_CFLAGS"
  echo "CGO_CXXFLAGS: $CGO_CXXFLAGS"
  echo "bin:"
  (cd "$out/bin" && stat -c '  %n %s bytes' *)
  echo "src: $(find "$out/src" -type f | wc -l) files: CMakeLists.txt, CMakePresets.json, ml/backend/ggml/ggml ($(du -sh "$out/src" | cut -f1))"
} >"$out/MANIFEST"

bytes="$(du -sb "$out" | cut -f1)"
mib="$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')"
echo "size: $bytes bytes ($mib MiB)" >>"$out/MANIFEST"
say "bundle $out: $mib MiB (bin $(du -sh "$out/bin" | cut -f1), src $(du -sh "$out/src" | cut -f1))"
if ((bytes > limit_mib * 1048576)); then
  die "the bundle is $mib MiB, over the $limit_mib MiB a device run can carry"
fi
say "done; on the GPU node: bash scripts/gpu-check.sh --src ${out#"$repo"/}/src --test-bin ${out#"$repo"/}/bin --out OUT"
