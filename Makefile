# Every build path compiles ggml's CPU code with SIMD flags: without them the
# CPU engine is 3-15x slower. Override NESY_MARCH for binaries meant for other
# machines (e.g. NESY_MARCH=x86-64-v3).
NESY_MARCH ?= native
export CGO_ENABLED := 1
# -Wno-deprecated-declarations: go-nvml's cgo files call NVML functions the
# header marks deprecated; the warnings flooded every fresh build.
export CGO_CFLAGS := -O3 -march=$(NESY_MARCH) -Wno-deprecated-declarations
export CGO_CXXFLAGS := -O3 -march=$(NESY_MARCH)

GO ?= go

.PHONY: build test demo demo-tiny ui ui-test

build:
	$(GO) build -o bin/nesy ./cmd/nesy

# The test binaries are built with SIMD flags, so a build without them is a
# failure here (a plain `go test ./...` only warns). go.mod must be tidy;
# the packages with concurrency of their own also run under the race
# detector; the browser test of /ui runs where chromium and node are
# installed (NESY_REQUIRE_UI=1, set by .ci/run, makes their absence a
# failure).
RACE_PKGS ?= ./models ./server ./mcts ./pddl ./planner
test:
	$(GO) mod tidy -diff
	$(GO) vet ./...
	test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	NESY_REQUIRE_SIMD=1 $(GO) test -timeout 40m ./...
	NESY_REQUIRE_SIMD=1 $(GO) test -race -short -timeout 30m $(RACE_PKGS)
	@if command -v chromium >/dev/null 2>&1 && command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then \
		scripts/ui-test.sh; \
	elif [ "$$NESY_REQUIRE_UI" = 1 ]; then \
		echo "make test: the browser test of /ui needs chromium, node and npm (NESY_REQUIRE_UI=1)"; exit 1; \
	else \
		echo "make test: SKIP the browser test of /ui: install chromium, nodejs and npm (as .ci/run does) to run it"; \
	fi

# The main job on a fresh machine: build, and let constrained MCTS write a
# plan for the example task with nesy's trained prior (embedded in the
# binary: no model file, no download); the plan is re-validated before it
# is printed. `make demo-tiny` does the same with a generated random-weight
# qwen3 (with the real Qwen3 vocabulary when ../shared/tokenizers is there).
demo: build
	./bin/nesy plan --domain examples/blocks/domain.pddl --problem examples/blocks/problem.pddl \
		--method cmcts --seconds 60 --json

DEMO_TOKENIZER ?= $(wildcard ../shared/tokenizers/qwen3/tokenizer.json)
demo-tiny: build
	./bin/nesy mkmodel --arch qwen3 --seed 1 --out bin/demo-qwen3.gguf $(if $(DEMO_TOKENIZER),--tokenizer $(DEMO_TOKENIZER))
	./bin/nesy plan --domain examples/blocks/domain.pddl --problem examples/blocks/problem.pddl \
		--model bin/demo-qwen3.gguf --method cmcts --seconds 60 --json

# The live search view's script (server/web/dist/app.js, committed and
# embedded in the binary with go:embed): rebuild it after editing
# server/web/src (esbuild bundles d3-hierarchy; versions pinned in
# server/web/package-lock.json).
ui:
	cd server/web && npm ci --no-audit --no-fund && npm run build

# The browser test of /ui: headless Chromium (Debian's chromium package)
# driven by playwright-core; see scripts/ui-test.sh.
ui-test:
	scripts/ui-test.sh
