// Package hugepages lets a process's large allocations take transparent
// huge pages where the kernel offers them on request only: it re-executes
// the running binary with glibc's malloc told to ask for them
// (GLIBC_TUNABLES=glibc.malloc.hugetlb=1, glibc 2.35+).
//
// ggml's CPU buffers (the weights, the KV cache, a recurrent model's state
// slots) are large malloc'd blocks that a load touches page by page. With
// 4 KiB pages that is one page fault per 4 KiB; on a virtual machine a
// model with Qwen3.5-4B's state shape took 35 s to load its 128 slots, and
// 5.8 s with huge pages (BENCHMARKS.md, "Huge pages for the engine's
// buffers"). The environment variable must be set before the process
// starts, hence the re-execution.
package hugepages

import (
	"os"
	"runtime"
	"strings"
	"syscall"
)

// tunable is the glibc tunable that makes malloc madvise its mmap'd
// blocks for transparent huge pages.
const tunable = "glibc.malloc.hugetlb=1"

// OptOut is the environment variable that, set to 0, keeps the process as
// it started.
const OptOut = "NESY_HUGEPAGES"

// thpMode is where Linux says how transparent huge pages are used: one of
// "always", "madvise" and "never", the current one in brackets.
const thpMode = "/sys/kernel/mm/transparent_hugepage/enabled"

// Plan returns the environment to re-execute with, and whether to: on
// Linux where the kernel gives huge pages only to memory that asks for
// them (thp, the content of thpMode, selects "madvise"), unless env
// already sets the tunable or opts out (NESY_HUGEPAGES=0). An existing
// GLIBC_TUNABLES keeps its other tunables.
func Plan(goos, thp string, env []string) ([]string, bool) {
	if goos != "linux" || !strings.Contains(thp, "[madvise]") {
		return nil, false
	}
	out := make([]string, 0, len(env)+1)
	set := false
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case OptOut:
			if v == "0" {
				return nil, false
			}
		case "GLIBC_TUNABLES":
			if strings.Contains(v, "glibc.malloc.hugetlb=") {
				return nil, false // the user's choice, or already re-executed
			}
			if v != "" {
				kv += ":" + tunable
			} else {
				kv += tunable
			}
			set = true
		}
		out = append(out, kv)
	}
	if !set {
		out = append(out, "GLIBC_TUNABLES="+tunable)
	}
	return out, true
}

// Reexec re-executes the running binary with the same arguments where Plan
// says so. It returns only when it does not, or when the re-execution
// fails (the process then goes on as it started).
func Reexec() error {
	thp, err := os.ReadFile(thpMode)
	if err != nil {
		return nil // no transparent huge pages here
	}
	env, ok := Plan(runtime.GOOS, string(thp), os.Environ())
	if !ok {
		return nil
	}
	return syscall.Exec("/proc/self/exe", os.Args, env)
}
