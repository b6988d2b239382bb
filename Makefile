# Every build path compiles ggml's CPU code with SIMD flags: without them the
# CPU engine is 3-15x slower. Override NESY_MARCH for binaries meant for other
# machines (e.g. NESY_MARCH=x86-64-v3).
NESY_MARCH ?= native
export CGO_ENABLED := 1
export CGO_CFLAGS := -O3 -march=$(NESY_MARCH)
export CGO_CXXFLAGS := -O3 -march=$(NESY_MARCH)

GO ?= go

.PHONY: build test vet fmt demo

build:
	$(GO) build -o bin/nesy ./cmd/nesy

test:
	$(GO) vet ./...
	test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	$(GO) test -timeout 40m ./...
