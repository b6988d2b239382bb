# syntax=docker/dockerfile:1
#
# nesy with ggml's CUDA backend, for NVIDIA GPUs (CUDA 12 driver or newer).
#
#   docker build -t nesy .
#   docker build -t nesy --build-arg CUDA_ARCHITECTURES=90 .   # H100/H200 only: builds faster
#   docker run --gpus all -p 127.0.0.1:11435:11435 \
#     -v ~/.ollama/models:/models/ollama:ro -v ~/gguf:/models/gguf:ro \
#     -e NESY_TOKEN=change-me nesy serve --addr 0.0.0.0:11435 --model qwen3:4b
#
# Stage 1 builds the CUDA backend (libggml-cuda.so, libggml-base.so) with
# CMake and nvcc from the ggml sources inside the Ollama module nesy depends
# on (github.com/ollama/ollama v0.17.4, ml/backend/ggml/ggml, configured by
# Ollama's own CMakeLists.txt: see docs/gpu.md), and the nesy binary with
# ggml's CPU code compiled for x86-64-v3 (AVX2, FMA, F16C), not -march=native,
# so the image runs on any such machine. Stage 2 is the CUDA runtime (which
# carries cudart and cuBLAS) with the binary and the backend libraries.

ARG CUDA_VERSION=12.8.1
ARG UBUNTU=ubuntu24.04
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS go

FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS build
# Ollama's CMakeLists needs CMake >= 3.21 (Ubuntu 24.04 ships 3.28).
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake git ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=go /usr/local/go /usr/local/go
ENV PATH=/usr/local/go/bin:/usr/local/cuda/bin:$PATH \
    GOPATH=/go \
    GOTOOLCHAIN=auto \
    CGO_ENABLED=1
WORKDIR /src

# Modules first (cached while only the sources change).
COPY go.mod go.sum ./
RUN go mod download

# The CUDA backend, from the module's ggml sources. Only the ggml-cuda
# target (and ggml-base, which it links): nesy's CPU backend is compiled in.
# 80 = A100, 86 = RTX 30xx/A40, 89 = L4/L40/RTX 40xx, 90 = H100/H200.
ARG CUDA_ARCHITECTURES="80;86;89;90"
RUN SRC="$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)" \
 && cmake -S "$SRC" -B /ggml -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES}" \
      -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
 && cmake --build /ggml --target ggml-cuda --parallel "$(nproc)" \
 && ls -l /ggml/lib/ollama/libggml-cuda.so /ggml/lib/ollama/libggml-base.so

# The binary. The Makefile exports CGO_CFLAGS/CGO_CXXFLAGS="-O3 -march=$(NESY_MARCH)"
# for ggml's CPU code.
COPY . .
ARG NESY_MARCH=x86-64-v3
RUN make build NESY_MARCH="${NESY_MARCH}" \
 && ./bin/nesy --help >/dev/null

FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU}
# ggml loads GPU backends from OLLAMA_LIBRARY_PATH, and only from folders
# whose path contains lib/ollama. libggml-cuda.so finds libggml-base.so
# beside it through LD_LIBRARY_PATH.
COPY --from=build /ggml/lib/ollama/ /usr/local/lib/ollama/
COPY --from=build /src/bin/nesy /usr/local/bin/nesy
ENV OLLAMA_LIBRARY_PATH=/usr/local/lib/ollama \
    LD_LIBRARY_PATH=/usr/local/lib/ollama:/usr/local/cuda/lib64:/usr/local/nvidia/lib:/usr/local/nvidia/lib64 \
    OLLAMA_MODELS=/models/ollama \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
# Mount points: an Ollama model store (manifests/, blobs/) at /models/ollama
# and a folder of GGUF files at /models/gguf, both read-only is fine.
RUN useradd --system --uid 10001 --home-dir /home/nesy --create-home nesy \
 && mkdir -p /models/ollama /models/gguf
USER 10001
EXPOSE 11435
ENTRYPOINT ["/usr/local/bin/nesy"]
# Inside a container the server must listen beyond loopback; set NESY_TOKEN
# (or --token) and publish the port on the host's loopback unless a
# proxy in front authenticates.
CMD ["serve", "--addr", "0.0.0.0:11435", "--models-dir", "/models/gguf"]
