#!/usr/bin/env bash
# gpu-check.sh: build ggml's CUDA backend from the Ollama module sources nesy
# uses (github.com/ollama/ollama v0.17.4, ml/backend/ggml/ggml, with Ollama's
# own CMakeLists), then run package models' correctness tests and benchmarks
# on the GPU with a generated model, and print the figures.
#
# Meant to finish within 10 minutes on a fresh CUDA machine (16 cores): the
# CUDA build (one architecture, all cores) runs while the Go test binary
# compiles. See docs/gpu.md.
#
# Usage: scripts/gpu-check.sh [options]
#   --cpu-only        no CUDA: skip the build and run the same tests and
#                     benchmarks on the CPU (a dry run of everything else)
#   --dry-run         print the commands without running them
#   --lib DIR         use existing ggml libraries (an Ollama v0.17.4 install's
#                     lib/ollama/cuda_v12, or an earlier build) instead of building
#   --build-dir DIR   CMake build folder, reused by later runs (default:
#                     ~/.cache/nesy/ggml-cuda-v0.17.4; env BUILD_DIR)
#   --arch LIST       CMAKE_CUDA_ARCHITECTURES (default 90 = H100/H200;
#                     env CUDA_ARCHITECTURES)
#   --jobs N          parallel build jobs (default: all cores; env JOBS)
#   --benchtime T     go test -benchtime (default 2s, 3x with --cpu-only;
#                     env BENCHTIME)
#   --no-bench        tests only
#   -h, --help        this text
#
# Needs: go (1.26+), gcc/g++, and for CUDA: cmake >= 3.21 and nvcc (CUDA
# toolkit 12.x or 13.x; found on PATH, in $CUDACXX, or /usr/local/cuda). The
# Go modules must be downloadable or already in the module cache.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cpu_only=0
dry_run=0
bench=1
lib_dir=""
build_dir="${BUILD_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nesy/ggml-cuda-v0.17.4}"
cuda_archs="${CUDA_ARCHITECTURES:-90}"
jobs="${JOBS:-$(nproc 2>/dev/null || echo 4)}"
benchtime="${BENCHTIME:-}"

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; }

while (($#)); do
  case "$1" in
    --cpu-only) cpu_only=1 ;;
    --dry-run) dry_run=1 ;;
    --no-bench) bench=0 ;;
    --lib) lib_dir="${2:?--lib needs a folder}"; shift ;;
    --build-dir) build_dir="${2:?--build-dir needs a folder}"; shift ;;
    --arch) cuda_archs="${2:?--arch needs a list}"; shift ;;
    --jobs) jobs="${2:?--jobs needs a number}"; shift ;;
    --benchtime) benchtime="${2:?--benchtime needs a value}"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu-check: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [[ -z "$benchtime" ]]; then
  if ((cpu_only)); then benchtime=3x; else benchtime=2s; fi
fi

start=$SECONDS
say() { printf '[gpu-check %3ds] %s\n' "$((SECONDS - start))" "$*"; }
die() { printf 'gpu-check: %s\n' "$*" >&2; exit 1; }
run() {
  printf '+ %s\n' "$*"
  if ((!dry_run)); then "$@"; fi
}

# Toolchain.
command -v go >/dev/null || die "go is required (1.26 or newer)"
if ! command -v gcc >/dev/null || ! command -v g++ >/dev/null; then
  die "gcc and g++ are required (cgo builds ggml's CPU code)"
fi
export CGO_ENABLED=1
# ggml's CPU code is compiled by cgo: without SIMD flags it is 3-15x slower.
export CGO_CFLAGS="${CGO_CFLAGS:--O3 -march=native}"
export CGO_CXXFLAGS="${CGO_CXXFLAGS:--O3 -march=native}"

cd "$repo"
say "repository $repo; CGO_CFLAGS=$CGO_CFLAGS"
run go mod download github.com/ollama/ollama
ollama_src="$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)"
[[ -n "$ollama_src" && -f "$ollama_src/CMakeLists.txt" ]] || ((dry_run)) ||
  die "Ollama module sources not found (go list -m github.com/ollama/ollama gave '$ollama_src')"
say "Ollama sources: $ollama_src"

build_pid=""
build_log="$build_dir/build.log"
if ((!cpu_only)) && [[ -z "$lib_dir" ]]; then
  command -v cmake >/dev/null || die "cmake (3.21 or newer) is required to build the CUDA backend (or pass --lib, or --cpu-only)"
  cmake_version="$(cmake --version | sed -n 's/^cmake version \([0-9.]*\).*/\1/p')"
  if [[ "$(printf '%s\n3.21\n' "$cmake_version" | sort -V | head -n1)" != "3.21" ]]; then
    die "cmake $cmake_version is too old: Ollama's CMakeLists needs 3.21"
  fi
  if [[ -z "${CUDACXX:-}" ]]; then
    if command -v nvcc >/dev/null; then
      CUDACXX="$(command -v nvcc)"
    elif [[ -x /usr/local/cuda/bin/nvcc ]]; then
      CUDACXX=/usr/local/cuda/bin/nvcc
    elif ((dry_run)); then
      CUDACXX=/usr/local/cuda/bin/nvcc
      say "nvcc not found; the dry run assumes $CUDACXX"
    else
      die "nvcc not found: install the CUDA toolkit, set CUDACXX, or pass --cpu-only"
    fi
  fi
  export CUDACXX
  cuda_home="$(dirname "$(dirname "$CUDACXX")")"
  say "nvcc: $CUDACXX ($("$CUDACXX" --version 2>/dev/null | tail -n1)); architectures $cuda_archs; $jobs jobs"
  run mkdir -p "$build_dir"
  # Configure with Ollama's top-level CMakeLists (the options Ollama ships
  # with: CUDA graphs, flash attention kernels, dynamic backends) and build
  # only the CUDA backend and the ggml-base library it links to.
  run cmake -S "$ollama_src" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="$cuda_archs" -DCMAKE_CUDA_COMPILER="$CUDACXX"
  say "building ggml-cuda in the background (log: $build_log)"
  if ((!dry_run)); then
    cmake --build "$build_dir" --target ggml-cuda --parallel "$jobs" >"$build_log" 2>&1 &
    build_pid=$!
  else
    printf '+ %s\n' "cmake --build $build_dir --target ggml-cuda --parallel $jobs >$build_log 2>&1 &"
  fi
  lib_dir="$build_dir/lib/ollama"
fi

# The Go test binary compiles meanwhile.
out="$(mktemp -d "${TMPDIR:-/tmp}/nesy-gpu-check.XXXXXX")"
trap 'rm -rf "$out"' EXIT
say "compiling the models test binary"
run go test -c -o "$out/models.test" ./models

if [[ -n "$build_pid" ]]; then
  say "waiting for the CUDA build"
  if ! wait "$build_pid"; then
    tail -n 40 "$build_log" >&2
    die "CUDA backend build failed (full log: $build_log)"
  fi
  say "CUDA backend built"
fi

if ((!cpu_only)); then
  [[ -f "$lib_dir/libggml-cuda.so" ]] || ((dry_run)) || die "no libggml-cuda.so in $lib_dir"
  # ggml only loads backends from folders whose path contains lib/ollama
  # (or the executable's own folder).
  case "$(cd "$lib_dir" 2>/dev/null && pwd || echo "$lib_dir")" in
    */lib/ollama*) ;;
    *) die "OLLAMA_LIBRARY_PATH must be a folder whose path contains lib/ollama, not $lib_dir" ;;
  esac
  export OLLAMA_LIBRARY_PATH="$lib_dir"
  # libggml-cuda.so needs libggml-base.so (built beside it, or one level up
  # in an Ollama install) and the CUDA runtime and cuBLAS.
  ld="$lib_dir:$(dirname "$lib_dir")"
  if [[ -n "${cuda_home:-}" && -d "$cuda_home/lib64" ]]; then ld="$ld:$cuda_home/lib64"; fi
  export LD_LIBRARY_PATH="$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export NESY_REQUIRE_GPU=1
  say "OLLAMA_LIBRARY_PATH=$OLLAMA_LIBRARY_PATH"
  if command -v nvidia-smi >/dev/null; then run nvidia-smi -L; fi
else
  export NESY_BENCH_GPU_LAYERS=-1
  say "CPU only: NESY_BENCH_GPU_LAYERS=-1"
fi

# Correctness: the whole models suite (batched = alone, fork, truncate,
# slots, cancellation, tokenizers, GPU offload when NESY_REQUIRE_GPU=1).
say "correctness tests"
printf '+ (cd models && %s)\n' "$out/models.test -test.v -test.timeout 10m"
if ((!dry_run)); then
  (cd models && "$out/models.test" -test.v -test.timeout 10m) >"$out/tests.log" 2>&1 || {
    grep -E '^(---|===|\s+\S+_test\.go|FAIL|panic)' "$out/tests.log" | grep -v -- '--- PASS' | tail -n 60 >&2
    die "tests failed (log above)"
  }
fi
touch "$out/tests.log"
grep -E '^(--- (PASS|SKIP|FAIL): Test[^/]*$|PASS$|ok)' "$out/tests.log" | sed 's/^/  /' || true
grep -E 'gpu_offload|Device' "$out/tests.log" | sed 's/^/  /' || true

if ((bench)); then
  say "benchmarks (-benchtime $benchtime; reference model: llama 768x12, 2048 FFN, 32000 vocabulary, F32)"
  bench_args=(-test.run '^$' -test.bench 'Prefill|Decode|Forked16' -test.benchtime "$benchtime" -test.timeout 15m)
  printf '+ (cd models && %s %s)\n' "$out/models.test" "${bench_args[*]}"
  if ((!dry_run)); then
    (cd models && "$out/models.test" "${bench_args[@]}") >"$out/bench.log" 2>&1 || {
      tail -n 40 "$out/bench.log" >&2
      die "benchmarks failed"
    }
  fi
  touch "$out/bench.log"
  grep -E 'reference.gguf on|ggml ' "$out/bench.log" | head -n 1 | sed 's/^ */  /' || true
  echo
  printf '  %-34s %12s\n' benchmark tok/s
  awk '/^Benchmark/ { for (i = 1; i <= NF; i++) if ($i == "tok/s") { name = $1; sub(/-[0-9]+$/, "", name); printf "  %-34s %12.1f\n", name, $(i-1); v[name] = $(i-1) } }
    END {
      if (v["BenchmarkRawPrefill"] > 0) printf "  prefill: models API at %.0f%% of the raw engine\n", 100 * v["BenchmarkPrefill"] / v["BenchmarkRawPrefill"]
      if (v["BenchmarkRawDecode"] > 0) printf "  decode: models API at %.0f%% of the raw engine\n", 100 * v["BenchmarkDecode"] / v["BenchmarkRawDecode"]
      if (v["BenchmarkRawForked16Batched"] > 0) printf "  16 forks batched: models API at %.0f%% of the raw engine\n", 100 * v["BenchmarkForked16Batched"] / v["BenchmarkRawForked16Batched"]
      if (v["BenchmarkForked16Single"] > 0) printf "  16 forks: one batched step is %.1fx 16 single steps\n", v["BenchmarkForked16Batched"] / v["BenchmarkForked16Single"]
    }' "$out/bench.log"
fi
say "done"
