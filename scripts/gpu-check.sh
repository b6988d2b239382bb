#!/usr/bin/env bash
# gpu-check.sh: prove nesy's CUDA path on a GPU node in one call, from a
# bundle made by scripts/gpu-prep.sh. The node needs the CUDA toolkit (nvcc,
# cuBLAS; made for CUDA 13 / driver 580), CMake >= 3.21, ninja and a C
# compiler; it needs no Go, no module cache and no network.
#
# Steps, each streamed through tee into --out (NN-step.log) and timed:
#   env        machine, driver, toolchain, the bundle's MANIFEST
#   unpack     the bundle's gzipped binaries, checked against SHA256SUMS
#   configure  Ollama's CMakeLists on the bundled ggml sources: -G Ninja,
#              CUDA architecture 90, nvcc -t 4, no Vulkan
#   build      target ggml-cuda (libggml-cuda.so, libggml-base.so); the
#              benchmark models are generated meanwhile
#   ldd        the backend's NEEDED libraries: a "not found" fails here
#   dlopen     the backend loaded the way ggml loads it (RTLD_NOW|LOCAL),
#              the loader's error printed, its devices listed
#   nesy       the shipped binary: nesy plan --verbose must log a CUDA device
#              (nesy exports ggml's symbols, the test binaries do not, so the
#              two load the backend differently)
#   gpu-tests  models/gpu (NVML) with NESY_REQUIRE_GPU=1
#   gpu-logits models' GPU tests (offload; CUDA flash attention against the
#              CPU at head sizes 64 and 128; cache types), NESY_REQUIRE_GPU=1
#   bench-*    prefill, decode, 16 forks (models) and MCTS simulations/s at
#              batch 1 and 16 (mcts), on the reference llama and on a qwen35
#              model of Qwen3.5-4B's layer shape
#   *-qwen35-op the qwen35 model's benchmarks with its delta rule as one
#              ggml operator (NESY_BENCH_DELTA_RULE=operator; gpu-logits'
#              TestGPUDeltaRule checks its logits)
#   diag-qwen35 where a decoded token's host time goes: ggml's CUDA-graph
#              debug lines, a CPU profile (decode-qwen35.prof), decode
#              with CUDA graphs off
#   models     the whole models suite, in the time left
# then a summary (summary.txt) with every step's status and the figures.
# A failing step prints its last 80 lines; the run goes on unless a step
# the rest depends on (unpack, configure, build) failed. Exit status: 0
# when every step passed, 1 otherwise.
#
# The whole script runs under `timeout 560` (a device run allows 600 s);
# each step's limit is cut to what is left, and steps with too little
# time left are skipped (and say so).
#
# Usage: bash scripts/gpu-check.sh --src DIR --test-bin DIR --out DIR [options]
#   --src DIR          ggml sources of the bundle (gpu-bundle/src)
#   --test-bin DIR     binaries of the bundle (gpu-bundle/bin: models.test,
#                      mcts.test, gpu.test, nesy; gzipped or not)
#   --out DIR          logs and summary.txt (created; never deleted)
#   --build-dir DIR    CMake build folder, reused by a later run on the same
#                      machine (default: gpu-build in the repository,
#                      git-ignored)
#   --work DIR         unpacked binaries and generated models (default: a
#                      temporary folder, removed at exit)
#   --cpu-only         dry run without a GPU: the same CMake path builds
#                      ggml's CPU backend (target ggml-cpu-haswell) instead
#                      of ggml-cuda, GPU requirements are off, the models are
#                      run on the CPU and the qwen35 model is small
#   --target T         CMake target (default ggml-cuda; ggml-cpu-haswell
#                      with --cpu-only)
#   --arch LIST        CMAKE_CUDA_ARCHITECTURES (default 90 = H100/H200)
#   --jobs N           build jobs (default: all cores)
#   --deadline S       the whole run's limit in seconds (default 560)
#   --build-limit S    the build step's limit in seconds (default 420)
#   --benchtime T      -test.benchtime of the models benchmarks (default
#                      1s; 1x with --cpu-only)
#   --mcts-benchtime T -test.benchtime of the MCTS benchmarks (default 2x;
#                      1x with --cpu-only)
#   --qwen35 ARGS      nesy mkmodel flags of the qwen35 benchmark model
#                      (default: Qwen3.5-4B's layer shape, see below)
#   --no-bench         tests only
#   -h, --help         this text
#
# The qwen35 benchmark model has Qwen3.5-4B's layer shape: 2560 wide, 9216
# FFN, 32 value and 16 key heads of 128 in the gated delta-net layers (the
# full-attention layers, every fourth, get 32 query and 16 key/value heads
# of 128), F16, a 32,000-token vocabulary (not 248k) and 32 layers, about
# 3.9B parameters, 7.8 GB. With --cpu-only: 256 wide, 4 layers, heads of 64.
set -euo pipefail

script="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
repo="$(cd "$(dirname "$script")/.." && pwd)"
src="" bin_dir="" out="" build_dir="" work="" target=""
cpu_only=0 bench=1
cuda_archs=90
jobs="$(nproc 2>/dev/null || echo 4)"
deadline=560
build_limit=420
benchtime="" mcts_benchtime="" qwen35_args=""

usage() { sed -n '2,/^set -euo/p' "$script" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; }
args=("$@")
while (($#)); do
  case "$1" in
    --src) src="${2:?--src needs a folder}"; shift ;;
    --test-bin) bin_dir="${2:?--test-bin needs a folder}"; shift ;;
    --out) out="${2:?--out needs a folder}"; shift ;;
    --build-dir) build_dir="${2:?--build-dir needs a folder}"; shift ;;
    --work) work="${2:?--work needs a folder}"; shift ;;
    --cpu-only) cpu_only=1 ;;
    --target) target="${2:?--target needs a name}"; shift ;;
    --arch) cuda_archs="${2:?--arch needs a list}"; shift ;;
    --jobs) jobs="${2:?--jobs needs a number}"; shift ;;
    --deadline) deadline="${2:?--deadline needs seconds}"; shift ;;
    --build-limit) build_limit="${2:?--build-limit needs seconds}"; shift ;;
    --benchtime) benchtime="${2:?--benchtime needs a value}"; shift ;;
    --mcts-benchtime) mcts_benchtime="${2:?--mcts-benchtime needs a value}"; shift ;;
    --qwen35) qwen35_args="${2:?--qwen35 needs mkmodel flags}"; shift ;;
    --no-bench) bench=0 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu-check: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
die() { printf 'gpu-check: %s\n' "$*" >&2; exit 2; }
[[ -n "$src" && -n "$bin_dir" && -n "$out" ]] || die "--src, --test-bin and --out are required (see --help)"
[[ -f "$src/CMakeLists.txt" && -d "$src/ml/backend/ggml/ggml/src" ]] ||
  die "--src $src does not hold CMakeLists.txt and ml/backend/ggml/ggml (make it with scripts/gpu-prep.sh)"
[[ -d "$bin_dir" ]] || die "--test-bin $bin_dir is not a folder (make it with scripts/gpu-prep.sh)"
[[ "$deadline" =~ ^[0-9]+$ && "$build_limit" =~ ^[0-9]+$ && "$jobs" =~ ^[0-9]+$ ]] ||
  die "--deadline, --build-limit and --jobs take whole numbers"

# The whole run under timeout (which signals the whole process group).
if [[ "${NESY_GPU_CHECK_TIMED:-}" != 1 ]]; then
  command -v timeout >/dev/null || die "timeout (coreutils) is required"
  NESY_GPU_CHECK_TIMED=1 exec timeout -k 15 "$deadline" bash "$script" "${args[@]}"
fi

abs() { mkdir -p "$1" && (cd "$1" && pwd); }
src="$(cd "$src" && pwd)" bin_dir="$(cd "$bin_dir" && pwd)" out="$(abs "$out")"
build_dir="$(abs "${build_dir:-$repo/gpu-build}")"
if [[ -z "$work" ]]; then
  work="$(mktemp -d "${TMPDIR:-/tmp}/nesy-gpu-check.XXXXXX")"
  # Only the scratch folder (binaries, models) is removed; logs stay in $out.
  trap 'rm -rf "$work"' EXIT
else
  work="$(abs "$work")"
fi
if ((cpu_only)); then
  target="${target:-ggml-cpu-haswell}"
  benchtime="${benchtime:-1x}" mcts_benchtime="${mcts_benchtime:-1x}"
  qwen35_args="${qwen35_args:---embd 256 --layers 4 --ffn 512 --heads 4 --kv-heads 2 --head-dim 64 --vocab 32000 --dtype f16}"
else
  target="${target:-ggml-cuda}"
  benchtime="${benchtime:-1s}" mcts_benchtime="${mcts_benchtime:-2x}"
  qwen35_args="${qwen35_args:---embd 2560 --layers 32 --ffn 9216 --heads 32 --kv-heads 16 --head-dim 128 --vocab 32000 --dtype f16}"
fi
lib_dir="$build_dir/lib/ollama"
export repo src bin_dir out build_dir work target cpu_only cuda_archs lib_dir

# Everything printed is also kept in $out/gpu-check.log.
# The tee ignores TERM so that the summary still gets through when the
# overall timeout signals the whole process group.
exec > >(trap '' TERM INT; exec tee -a "$out/gpu-check.log") 2>&1
tee_pid=$!
start=$SECONDS
# On the overall timeout: the summary, then the EXIT trap.
on_term() {
  if [[ -f "$work/step.pid" ]]; then kill -TERM "$(cat "$work/step.pid")" 2>/dev/null || true; fi
  say "deadline of ${deadline}s reached (or TERM): the running step was stopped"
  printf '%-16s %-5s %4ss  %s\n' "(stopped)" FAIL 0 "TERM during step $n" >>"$summary"
  failed=1
  finish
}
trap on_term TERM
say() { printf '[gpu-check %3ds] %s\n' "$((SECONDS - start))" "$*"; }
left() { echo $((deadline - 15 - (SECONDS - start))); }

summary="$out/summary.txt"
: >"$summary"
failed=0 n=0
# step NAME LIMIT CMD...: run CMD (a command or an exported function) with its output streamed through tee into
# $out/NN-NAME.log, under min(LIMIT, time left); on failure print the last
# 80 lines. Returns CMD's status (124: timed out; 125: skipped).
# With --quiet first, engine INFO lines stay in the log, off the console.
step() {
  local quiet=0
  if [[ "$1" == --quiet ]]; then quiet=1; shift; fi
  local name="$1" limit="$2" rc=0 t0=$SECONDS lim
  shift 2
  n=$((n + 1))
  local log
  log="$out/$(printf '%02d' "$n")-$name.log"
  lim="$(left)"
  ((lim > limit)) && lim=$limit
  if ((lim < 5)); then
    say "SKIP $name: no time left"
    printf '%-16s %-5s %4ss  %s\n' "$name" SKIP 0 "no time left" >>"$summary"
    failed=1
    return 125
  fi
  say "$name (limit ${lim}s, log $(basename "$log"))"
  printf '+ %s\n' "$*" >"$log"
  set +e
  # Functions run in a child bash (exported with export -f, as are the
  # variables they read). timeout puts the step in a process group of its
  # own; its pid is kept so that the TERM trap can stop it. The pipeline
  # runs in the background so that the trap runs at once, not when the
  # step ends.
  rm -f "$work/step.rc"
  {
    timeout -k 5 "$lim" bash -c 'set -euo pipefail; "$@"' _ "$@" 2>&1 &
    echo $! >"$work/step.pid"
    wait $!
    echo $? >"$work/step.rc"
  } | tee -a "$log" |
    if ((quiet)); then grep --line-buffered -v -E '^[0-9/]+ [0-9:]+ INFO |level=INFO '; else cat; fi &
  wait $!
  rc="$(cat "$work/step.rc" 2>/dev/null || echo 143)"
  rm -f "$work/step.pid"
  set -e
  local took=$((SECONDS - t0)) status=ok note=""
  if ((rc != 0)); then
    status=FAIL failed=1 note="exit $rc"
    ((rc == 124 || rc == 137)) && note="timed out after ${lim}s"
    say "FAIL $name ($note, ${took}s); last 80 lines of $(basename "$log")$( ((quiet)) && echo ", INFO lines left out"):"
    if ((quiet)); then grep -v -E '^[0-9/]+ [0-9:]+ INFO |level=INFO ' "$log"; else cat "$log"; fi | tail -n 80 | sed 's/^/  | /'
  else
    say "ok $name (${took}s)"
  fi
  printf '%-16s %-5s %4ss  %s\n' "$name" "$status" "$took" "$note" >>"$summary"
  return "$rc"
}
finish() {
  echo
  say "summary ($out/summary.txt):"
  cat "$summary"
  # Let tee write the last lines before the run ends.
  exec 1>&- 2>&-
  wait "$tee_pid" 2>/dev/null || true
  exit "$failed"
}

mode="CUDA (target $target, architectures $cuda_archs)"
((cpu_only)) && mode="CPU dry run (target $target)"
say "$mode; repository $repo; bundle src $src, bin $bin_dir; out $out; build $build_dir; deadline ${deadline}s"

# --- env
env_info() {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  uname -a
  echo "cpus: $(nproc); $(grep -m1 'model name' /proc/cpuinfo || true)"
  grep -qw avx2 /proc/cpuinfo && echo "avx2: yes" || echo "avx2: NO (the bundle is built for x86-64-v3)"
  free -g | head -n 2 || true
  df -h "$work" "$build_dir" | tail -n +1 || true
  echo "PATH=$PATH"
  echo "go: $(command -v go || echo none)"
  echo "cmake: $(cmake --version 2>/dev/null | head -n1 || echo none)"
  echo "ninja: $(ninja --version 2>/dev/null || echo none)"
  echo "cc: $(cc --version 2>/dev/null | head -n1 || echo none)"
  echo "nvcc: ${CUDACXX:-none} $("${CUDACXX:-false}" --version 2>/dev/null | tail -n1 || true)"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv || nvidia-smi -L || true
  else
    echo "nvidia-smi: none"
  fi
  echo "--- bundle MANIFEST"
  cat "$bin_dir/../MANIFEST" 2>/dev/null || echo "(no MANIFEST beside $bin_dir)"
}
# nvcc: $CUDACXX, PATH, /usr/local/cuda.
if ((!cpu_only)); then
  if [[ -z "${CUDACXX:-}" ]]; then
    CUDACXX="$(command -v nvcc || true)"
    [[ -z "$CUDACXX" && -x /usr/local/cuda/bin/nvcc ]] && CUDACXX=/usr/local/cuda/bin/nvcc
  fi
  export CUDACXX
fi
export -f env_info
step env 30 env_info || true
missing=""
for tool in cmake ninja cc timeout gzip sha256sum; do command -v "$tool" >/dev/null || missing="$missing $tool"; done
((cpu_only)) || [[ -n "${CUDACXX:-}" ]] || missing="$missing nvcc"
if [[ -n "$missing" ]]; then
  say "missing:$missing"
  printf '%-16s %-5s %4ss  %s\n' tools FAIL 0 "missing:$missing" >>"$summary"
  failed=1
  finish
fi

# --- unpack
unpack() {
  mkdir -p "$work/bin"
  local f name
  for name in models.test mcts.test gpu.test nesy; do
    if [[ -f "$bin_dir/$name.gz" ]]; then
      gzip -dc "$bin_dir/$name.gz" >"$work/bin/$name"
    elif [[ -f "$bin_dir/$name" ]]; then
      cp "$bin_dir/$name" "$work/bin/$name"
    else
      echo "no $name or $name.gz in $bin_dir"
      return 1
    fi
    chmod +x "$work/bin/$name"
  done
  if [[ -f "$bin_dir/SHA256SUMS" ]]; then
    (cd "$work/bin" && sha256sum -c "$bin_dir/SHA256SUMS")
  else
    echo "no SHA256SUMS in $bin_dir: not checked"
  fi
  ls -la "$work/bin"
}
export -f unpack
step unpack 60 unpack || finish
export bin="$work/bin"

# --- configure and build (the benchmark models are generated meanwhile)
configure() {
  local args=(-S "$src" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_DISABLE_FIND_PACKAGE_Vulkan=ON
    -DCMAKE_CUDA_ARCHITECTURES="$cuda_archs" -DCMAKE_CUDA_FLAGS="-t 4")
  ((cpu_only)) || args+=(-DCMAKE_CUDA_COMPILER="$CUDACXX")
  cmake "${args[@]}"
}
export -f configure
step configure 90 configure || finish

models_dir="$work/models"
mkdir -p "$models_dir"
gen_pid=""
if ((bench)); then
  # shellcheck disable=SC2086 # qwen35_args is a list of flags
  (
    set -e
    # A model left by an earlier run with the same --work is kept (the
    # 4B-shaped one is 7.8 GB); a partial one never has the final name.
    gen() { # gen NAME MKMODEL-FLAGS...
      local name="$1" t0=$SECONDS
      shift
      if [[ -f "$models_dir/$name.gguf" ]]; then
        echo "$name model: kept from an earlier run"
        return
      fi
      "$bin/nesy" mkmodel "$@" --out "$models_dir/$name.part.gguf"
      mv "$models_dir/$name.part.gguf" "$models_dir/$name.gguf"
      echo "$name model: $((SECONDS - t0))s"
    }
    gen reference --reference --seed 1
    gen qwen35 --arch qwen35 --seed 1 $qwen35_args
  ) >"$out/models-gen.log" 2>&1 &
  gen_pid=$!
  say "generating the benchmark models in the background (log models-gen.log): qwen35 $qwen35_args"
fi

step build "$build_limit" cmake --build "$build_dir" --target "$target" --parallel "$jobs" || finish
export lib="$lib_dir/lib$target.so"

# --- the library as the loader sees it
cuda_home=""
if [[ -n "${CUDACXX:-}" ]]; then cuda_home="$(dirname "$(dirname "$(readlink -f "$CUDACXX")")")"; fi
ld="$lib_dir"
for d in "$cuda_home/lib64" "$cuda_home/lib" "$cuda_home/targets/x86_64-linux/lib"; do
  [[ -n "$cuda_home" && -d "$d" ]] && ld="$ld:$d"
done
export LD_LIBRARY_PATH="$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
lddcheck() {
  ls -la "$lib_dir"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  readelf -d "$lib" | grep -E 'NEEDED|RPATH|RUNPATH' || true
  ldd "$lib"
  if ldd "$lib" | grep "not found"; then
    echo "libraries above not found: $(basename "$lib") cannot load"
    return 1
  fi
}
export -f lddcheck
step ldd 30 lddcheck || true

dlcheck() {
  cat >"$work/dlcheck.c" <<'EOF'
/* dlcheck: load a ggml backend library the way ggml does (RTLD_NOW |
   RTLD_LOCAL), print the loader's error when it fails, else call its
   ggml_backend_init and list the devices it registers. */
#include <dlfcn.h>
#include <stdio.h>
#include <stddef.h>

typedef void *(*init_fn)(void);
typedef const char *(*name_fn)(void *);
typedef size_t (*count_fn)(void *);
typedef void *(*get_fn)(void *, size_t);
typedef void (*mem_fn)(void *, size_t *, size_t *);

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: dlcheck libggml-base.so BACKEND.so\n"); return 2; }
  void *base = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (!base) { printf("dlopen %s failed: %s\n", argv[1], dlerror()); return 1; }
  void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (!h) { printf("dlopen %s failed: %s\n", argv[2], dlerror()); return 1; }
  printf("dlopen %s: ok\n", argv[2]);
  init_fn init = (init_fn)dlsym(h, "ggml_backend_init");
  name_fn reg_name = (name_fn)dlsym(base, "ggml_backend_reg_name");
  count_fn dev_count = (count_fn)dlsym(base, "ggml_backend_reg_dev_count");
  get_fn dev_get = (get_fn)dlsym(base, "ggml_backend_reg_dev_get");
  name_fn dev_name = (name_fn)dlsym(base, "ggml_backend_dev_name");
  name_fn dev_desc = (name_fn)dlsym(base, "ggml_backend_dev_description");
  mem_fn dev_mem = (mem_fn)dlsym(base, "ggml_backend_dev_memory");
  if (!init || !reg_name || !dev_count || !dev_get || !dev_name || !dev_desc || !dev_mem) {
    printf("missing ggml entry points (ggml_backend_init %p)\n", (void *)init);
    return 1;
  }
  void *reg = init();
  if (!reg) { printf("ggml_backend_init returned NULL (no usable device)\n"); return 1; }
  size_t n = dev_count(reg);
  printf("backend %s: %zu device(s)\n", reg_name(reg), n);
  for (size_t i = 0; i < n; i++) {
    void *d = dev_get(reg, i);
    size_t free = 0, total = 0;
    dev_mem(d, &free, &total);
    printf("  %s: %s, %.1f GiB free of %.1f GiB\n", dev_name(d), dev_desc(d), free / 1073741824.0, total / 1073741824.0);
  }
  return n > 0 ? 0 : 1;
}
EOF
  cc -O1 -o "$work/dlcheck" "$work/dlcheck.c" -ldl
  "$work/dlcheck" "$lib_dir/libggml-base.so" "$lib"
}
export -f dlcheck
step dlopen 60 dlcheck || true

# --- the engine's environment from here on
if ((cpu_only)); then
  # The CPU variant just built is not loaded into nesy (its CPU backend is
  # compiled in); the models run on the CPU.
  unset OLLAMA_LIBRARY_PATH
  export NESY_BENCH_GPU_LAYERS=-1
  gpu_layers=-1 want_device=CPU
else
  # ggml only searches folders whose path contains lib/ollama.
  export OLLAMA_LIBRARY_PATH="$lib_dir" NESY_REQUIRE_GPU=1
  gpu_layers=0 want_device=CUDA
fi

nesycheck() {
  "$bin/nesy" mkmodel --seed 1 --out "$work/tiny.gguf"
  # Exit status 1 is a valid plan that misses the goal (random weights);
  # 2 and above are errors. --seconds bounds the plan on a slow machine
  # (the dry run on a loaded 2-core host took 53 s without it).
  local rc=0
  "$bin/nesy" plan --domain "$repo/examples/blocks/domain.pddl" --problem "$repo/examples/blocks/problem.pddl" \
    --model "$work/tiny.gguf" --method cgreedy --gpu-layers "$gpu_layers" --seconds 15 --verbose || rc=$?
  echo "nesy plan: exit $rc"
  ((rc <= 1)) || return 1
}
nesydevice() { # the model-loaded line of nesy's log must name the device
  if ! grep -E "model loaded.* device=\"?$want_device" "$1"; then
    echo "nesy plan --verbose did not log a $want_device device"
    return 1
  fi
}
export gpu_layers want_device
export -f nesycheck nesydevice
if step nesy 60 nesycheck; then
  step nesy-device 5 nesydevice "$out/$(printf '%02d' "$n")-nesy.log" || true
fi

step gpu-tests 60 bash -c 'cd "$1/models/gpu" && "$2" -test.v -test.count 1' _ "$repo" "$bin/gpu.test" || true
step --quiet gpu-logits 150 bash -c 'cd "$1/models" && "$2" -test.v -test.count 1 -test.timeout 10m -test.run "^(TestGPUOffload|TestGPULogits|TestGPUDeltaRule|TestGPUStateMemory|TestQwen35Vision|TestCacheTypes)$"' \
  _ "$repo" "$bin/models.test" || true

fig_files=()
if ((bench)); then
  if [[ -n "$gen_pid" ]]; then
    say "waiting for the benchmark models"
    if ! wait "$gen_pid"; then
      say "FAIL generating the benchmark models; models-gen.log:"
      tail -n 80 "$out/models-gen.log" | sed 's/^/  | /'
      printf '%-16s %-5s %4ss  %s\n' models-gen FAIL 0 "see models-gen.log" >>"$summary"
      failed=1
    else
      cat "$out/models-gen.log"
      printf '%-16s %-5s %4ss  %s\n' models-gen ok 0 "$(tr '\n' ' ' <"$out/models-gen.log" | grep -o -E '[a-z0-9]+ model: ([0-9]+s|kept)' | tr '\n' ' ')" >>"$summary"
    fi
  fi
  mbench='^Benchmark(Prefill|Decode|Forked16Batched|Forked16Single)$'
  for m in reference qwen35; do
    [[ -f "$models_dir/$m.gguf" ]] || continue
    step --quiet "bench-$m" 120 env NESY_BENCH_MODEL="$models_dir/$m.gguf" bash -c \
      'cd "$1/models" && "$2" -test.run "^$" -test.bench "$3" -test.benchtime "$4" -test.timeout 10m' \
      _ "$repo" "$bin/models.test" "$mbench" "$benchtime" || true
    fig_files+=("$m:$out/$(printf '%02d' "$n")-bench-$m.log")
  done
  # MCTS: the reference llama with BenchmarkSimulations' options, the
  # qwen35 model with BenchmarkHybridSimulations' (the ALFWorld task comes
  # from the repository's slice, testdata/shared, found from the cwd).
  for m in reference qwen35; do
    [[ -f "$models_dir/$m.gguf" ]] || continue
    b='^BenchmarkSimulations$'
    [[ $m == qwen35 ]] && b='^BenchmarkHybridSimulations$'
    step --quiet "mcts-$m" 120 env NESY_BENCH_MODEL="$models_dir/$m.gguf" bash -c \
      'cd "$1/mcts" && "$2" -test.run "^$" -test.bench "$3" -test.benchtime "$4" -test.timeout 10m' \
      _ "$repo" "$bin/mcts.test" "$b" "$mcts_benchtime" || true
    fig_files+=("$m:$out/$(printf '%02d' "$n")-mcts-$m.log")
  done
  # The qwen35 model's delta rule as one operator on the GPU (DeltaRule
  # "operator"; "auto" keeps it off GPU engines until TestGPUDeltaRule has
  # passed on one): decode, 16 forks and the search, beside the graph's
  # figures above.
  if [[ -f "$models_dir/qwen35.gguf" ]]; then
    step --quiet bench-qwen35-op 120 env NESY_BENCH_MODEL="$models_dir/qwen35.gguf" NESY_BENCH_DELTA_RULE=operator bash -c \
      'cd "$1/models" && "$2" -test.run "^$" -test.bench "$3" -test.benchtime "$4" -test.timeout 10m' \
      _ "$repo" "$bin/models.test" '^Benchmark(Decode|Forked16Batched|Forked16Single)$' "$benchtime" || true
    fig_files+=("qwen35-operator:$out/$(printf '%02d' "$n")-bench-qwen35-op.log")
    step --quiet mcts-qwen35-op 120 env NESY_BENCH_MODEL="$models_dir/qwen35.gguf" NESY_BENCH_DELTA_RULE=operator bash -c \
      'cd "$1/mcts" && "$2" -test.run "^$" -test.bench "$3" -test.benchtime "$4" -test.timeout 10m' \
      _ "$repo" "$bin/mcts.test" '^BenchmarkHybridSimulations$' "$mcts_benchtime" || true
    fig_files+=("qwen35-operator:$out/$(printf '%02d' "$n")-mcts-qwen35-op.log")
  fi
fi

# Where the host time of a decoded token goes (the first H200 run found
# decode host-bound: 8.5 ms of CPU per 8.1 ms token on the 4B-shaped model):
# BenchmarkDecode on the qwen35 model with ggml's debug lines (whether and
# why the CUDA backend declines CUDA graphs), a CPU profile of the process
# (decode-qwen35.prof, read here with go tool pprof), and the same benchmark
# with CUDA graphs off for comparison.
diag() {
  cd "$repo/models"
  # Debug logging slows the passes: it runs apart, for its lines only.
  NESY_BENCH_LOG=debug "$bin/models.test" -test.run '^$' -test.bench '^BenchmarkDecode$' -test.benchtime 20x \
    -test.timeout 5m >"$work/diag.log" 2>&1 || { tail -n 40 "$work/diag.log"; return 1; }
  echo "ggml debug lines about CUDA graphs in 20 decoded tokens (count, then the kinds):"
  grep -c 'CUDA graph' "$work/diag.log" || true
  grep -o 'disabling CUDA graphs due to [a-z >0-9]*' "$work/diag.log" | sort | uniq -c | head || true
  echo "decode with a CPU profile (decode-qwen35.prof):"
  "$bin/models.test" -test.run '^$' -test.bench '^BenchmarkDecode$' -test.benchtime 200x \
    -test.timeout 5m -test.cpuprofile "$out/decode-qwen35.prof" 2>&1 | grep -E '^BenchmarkDecode'
  echo "with GGML_CUDA_DISABLE_GRAPHS=1:"
  GGML_CUDA_DISABLE_GRAPHS=1 "$bin/models.test" -test.run '^$' -test.bench '^BenchmarkDecode$' -test.benchtime 200x \
    -test.timeout 5m 2>&1 | grep -E '^BenchmarkDecode'
}
export -f diag
if ((bench)) && [[ -f "$models_dir/qwen35.gguf" ]]; then
  step --quiet diag-qwen35 90 env NESY_BENCH_MODEL="$models_dir/qwen35.gguf" bash -c diag || true
fi

# The whole models suite in the time left (the GPU tests above come first).
step --quiet models 300 bash -c 'cd "$1/models" && "$2" -test.count 1 -test.timeout 10m' _ "$repo" "$bin/models.test" || true

if ((${#fig_files[@]})); then
  {
    echo
    echo "figures ($mode):"
    printf '  %-10s %-34s %14s %s\n' model benchmark value unit
    for f in "${fig_files[@]}"; do
      m="${f%%:*}" path="${f#*:}"
      [[ -f "$path" ]] || continue
      awk -v m="$m" '/^Benchmark/ {
        name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
        for (i = 1; i <= NF; i++) if ($i == "tok/s" || $i == "sims/s") printf "  %-10s %-34s %14.1f %s\n", m, name, $(i-1), $i
      }' "$path"
      grep -m1 -E ' on (CPU|CUDA)' "$path" | sed 's/^ */  /' || true
    done
  } | tee -a "$summary"
fi
finish
