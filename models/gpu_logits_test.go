package models

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/nesy-dev/nesy/models/gguf"
)

// gpuLogitSpecs are the models of TestGPULogits: head sizes 64 and 128,
// which ggml's CUDA flash-attention kernels cover. The suite's usual test
// models have 16-wide heads, for which the CUDA backend declines the
// flash-attention op and ggml's scheduler runs it on the CPU even when
// every layer is offloaded, so a comparison on them never sees the CUDA
// kernels.
func gpuLogitSpecs() map[string]gguf.Spec {
	llama := gguf.Default(gguf.ArchLlama)
	llama.Embd, llama.Heads, llama.KVHeads, llama.FFN = 256, 4, 2, 512 // head size 64, grouped queries
	qwen3 := gguf.Default(gguf.ArchQwen3)
	qwen3.Embd, qwen3.Heads, qwen3.KVHeads, qwen3.HeadDim, qwen3.FFN = 256, 4, 1, 128, 512 // head size 128
	qwen35 := gguf.Default(gguf.ArchQwen35)
	qwen35.Embd, qwen35.Heads, qwen35.KVHeads, qwen35.HeadDim, qwen35.FFN = 256, 4, 2, 128, 512
	for _, s := range []*gguf.Spec{&llama, &qwen3, &qwen35} {
		s.Seed, s.ContextLength = 3, 1024
	}
	return map[string]gguf.Spec{"llama-hd64": llama, "qwen3-hd128": qwen3, "qwen35-hd128": qwen35}
}

// gpuLogitRun evaluates the same work on an engine and returns every row
// of logits it produced, in order: a 40-token prompt (all rows: the
// kernels for many queries), then three single-token steps of the prompt's
// sequence and two forks of it evaluated together in one call (the kernels
// for one query per sequence, over a shared prefix).
func gpuLogitRun(t *testing.T, e *Engine) [][]float32 {
	t.Helper()
	ctx := context.Background()
	v := e.Info().VocabSize
	a, err := e.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Eval(ctx, []EvalRequest{{Seq: a, Tokens: testTokens(11, 40, v), AllLogits: true}})
	if err != nil {
		t.Fatal(err)
	}
	rows := res[0].Logits
	seqs := []SeqID{a}
	for range 2 {
		f, err := e.Fork(a, 40)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, f)
	}
	for step := range 3 {
		reqs := make([]EvalRequest, len(seqs))
		for i, s := range seqs {
			reqs[i] = EvalRequest{Seq: s, Tokens: testTokens(100+10*step+i, 1, v)}
		}
		res, err := e.Eval(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			rows = append(rows, r.Logits...)
		}
	}
	for _, s := range seqs {
		e.Release(s)
	}
	return rows
}

// TestGPULogits: logits computed on a GPU, with flash attention on (the
// default there), match the CPU's without it within the GPU tolerance, on
// models with 64- and 128-wide heads so that CUDA's flash-attention
// kernels are what is compared (see gpuLogitSpecs), for prompt rows and
// batched single-token steps of forks. Without a GPU backend it compares
// the CPU's flash attention against its plain attention at the same head
// sizes (so the test runs everywhere); NESY_REQUIRE_GPU=1
// (scripts/gpu-check.sh) makes a missing GPU a failure.
func TestGPULogits(t *testing.T) {
	gpus := SystemInfo().GPUs()
	if len(gpus) == 0 && os.Getenv("NESY_REQUIRE_GPU") == "1" {
		t.Fatalf("NESY_REQUIRE_GPU=1 but ggml found no GPU (OLLAMA_LIBRARY_PATH=%q)", os.Getenv("OLLAMA_LIBRARY_PATH"))
	}
	for name, spec := range gpuLogitSpecs() {
		t.Run(name, func(t *testing.T) {
			ref := newTestEngine(t, spec, Options{GPULayers: -1, FlashAttention: "off"})
			opts, tol := Options{FlashAttention: "on"}, 2e-2
			if len(gpus) == 0 {
				opts.GPULayers, tol = -1, 1e-2
			}
			e := newTestEngine(t, spec, opts)
			t.Logf("gpu_logits %s: reference on %s, compared engine on %s with flash attention", name, ref.Info().Device, e.Info().Device)
			if len(gpus) > 0 && e.Info().Device == "CPU" {
				t.Fatalf("ggml found %v but the model runs on the CPU", gpus)
			}
			want, got := gpuLogitRun(t, ref), gpuLogitRun(t, e)
			if len(got) != len(want) || len(got) != 40+3*3 {
				t.Fatalf("%d rows, reference %d, want %d", len(got), len(want), 40+3*3)
			}
			for i := range got {
				assertClose(t, fmt.Sprintf("row %d", i), got[i], want[i], tol)
			}
		})
	}
}

// TestGPUDeltaRule: Qwen3.5's delta rule as one operator (DeltaRule
// "operator") on the GPU, where ggml's CUDA kernel runs it (heads of 128),
// gives the CPU's logits with the general operators' graph, for the runs
// of TestGPULogits (a prompt, batched steps of forks). DeltaRule "auto"
// keeps the operator off GPU engines until this has passed on a GPU. Without
// a GPU it compares the operator against the graph on the CPU.
func TestGPUDeltaRule(t *testing.T) {
	gpus := SystemInfo().GPUs()
	if len(gpus) == 0 && os.Getenv("NESY_REQUIRE_GPU") == "1" {
		t.Fatalf("NESY_REQUIRE_GPU=1 but ggml found no GPU (OLLAMA_LIBRARY_PATH=%q)", os.Getenv("OLLAMA_LIBRARY_PATH"))
	}
	spec := gpuLogitSpecs()["qwen35-hd128"]
	ref := newTestEngine(t, spec, Options{GPULayers: -1, FlashAttention: "off", DeltaRule: "graph"})
	opts, tol := Options{DeltaRule: "operator"}, 2e-2
	if len(gpus) == 0 {
		opts.GPULayers, tol = -1, 1e-2
	}
	e := newTestEngine(t, spec, opts)
	if e.hybrid.rule != ruleWKV || ref.hybrid.rule != ruleGraph {
		t.Fatalf("operator: engine %v, reference %v", e.hybrid.rule, ref.hybrid.rule)
	}
	t.Logf("delta rule: reference (graph) on %s, operator on %s", ref.Info().Device, e.Info().Device)
	want, got := gpuLogitRun(t, ref), gpuLogitRun(t, e)
	if len(got) != len(want) {
		t.Fatalf("%d rows, reference %d", len(got), len(want))
	}
	for i := range got {
		assertClose(t, fmt.Sprintf("row %d", i), got[i], want[i], tol)
	}
}

// TestGPUStateMemory: on a GPU, Load checks the sequence slots' recurrent
// state against the device's free memory before allocating it (as a CPU
// load checks the system's): slots beyond it are a *StateMemoryError that
// names the GPU, and a modest count loads as asked. Without a GPU it is
// skipped (TestStateShares checks the placement arithmetic everywhere);
// NESY_REQUIRE_GPU=1 makes a missing GPU a failure.
func TestGPUStateMemory(t *testing.T) {
	gpus := SystemInfo().GPUs()
	if len(gpus) == 0 {
		if os.Getenv("NESY_REQUIRE_GPU") == "1" {
			t.Fatalf("NESY_REQUIRE_GPU=1 but ggml found no GPU (OLLAMA_LIBRARY_PATH=%q)", os.Getenv("OLLAMA_LIBRARY_PATH"))
		}
		t.Skip("no GPU: the device's free memory cannot be read")
	}
	spec := gpuLogitSpecs()["qwen35-hd128"]
	path := t.TempDir() + "/m.gguf"
	if err := gguf.Write(path, spec); err != nil {
		t.Fatal(err)
	}
	_, err := Load(context.Background(), path, Options{Sequences: 1 << 40, Threads: 1})
	var serr *StateMemoryError
	if !errors.As(err, &serr) || serr.Device == "" || serr.Fit() < 1 {
		t.Fatalf("1<<40 slots on %v: %v, want a StateMemoryError naming the GPU", gpus, err)
	}
	t.Logf("state memory on the GPU: %v", err)
	e := newTestEngine(t, spec, Options{Sequences: 64})
	if e.Info().Sequences != 64 || e.Info().Device == "CPU" {
		t.Fatalf("64 slots: loaded %d on %s", e.Info().Sequences, e.Info().Device)
	}
}
