package models

// ggml's device interface (struct ggml_backend_device_i in
// ggml-backend-impl.h of the pinned Ollama v0.17.4) is a table of 16
// function pointers at the start of struct ggml_backend_device; the last
// one, reset, is what ggml_backend_dev_reset calls when it is not NULL.
// The table is declared here by position because the header is not on
// this package's include path; nesy_slots_ok checks the positions it can
// (get_name and get_type answer as ggml_backend_dev_name and
// ggml_backend_dev_type do) before anything is written.

/*
#include <stddef.h>
typedef struct ggml_backend_device * ggml_backend_dev_t;
size_t ggml_backend_dev_count(void);
ggml_backend_dev_t ggml_backend_dev_get(size_t index);
const char * ggml_backend_dev_name(ggml_backend_dev_t device);
int ggml_backend_dev_type(ggml_backend_dev_t device);

enum { NESY_DEV_SLOTS = 16, NESY_DEV_RESET = 15 };

static int nesy_slots_ok(ggml_backend_dev_t dev) {
	void **slots = (void **)dev;
	const char *(*get_name)(ggml_backend_dev_t) = (const char *(*)(ggml_backend_dev_t))slots[0];
	int (*get_type)(ggml_backend_dev_t) = (int (*)(ggml_backend_dev_t))slots[3];
	return get_name && get_type && get_name(dev) == ggml_backend_dev_name(dev) &&
		get_type(dev) == ggml_backend_dev_type(dev);
}
static int nesy_slot_set(ggml_backend_dev_t dev, int i) { return ((void **)dev)[i] != NULL; }
static void nesy_clear_reset(ggml_backend_dev_t dev) { ((void **)dev)[NESY_DEV_RESET] = NULL; }
*/
import "C"

import (
	"fmt"
	"sync"

	ggmlsrc "github.com/ollama/ollama/ml/backend/ggml/ggml/src"
)

// ggml device types (enum ggml_backend_dev_type).
const ggmlDeviceCPU = 0

// disableDeviceResets is run once per process, before the first model is
// loaded: it takes ggml's device reset away from every GPU and accelerator
// device. Ollama's Backend.Load resets each device the new model places no
// tensor on (cudaDeviceReset for CUDA), which in Ollama, one model per
// runner process, only frees an unused GPU's context; in nesy, where
// several engines share a process (a CPU-side model beside a GPU one, the
// server's models, the tests), it destroyed the other engines' GPU memory
// and ggml's cached streams, and the next free aborted ("CUDA error:
// invalid argument" in cudaFree, seen on an H200 by scripts/gpu-check.sh).
// The once is package-level because the devices it edits are
// process-wide, as are ggml's backends (see package ggmlthread).
var disableDeviceResets = sync.OnceValue(func() error {
	ggmlsrc.OnceLoad()
	for i := C.size_t(0); i < C.ggml_backend_dev_count(); i++ {
		dev := C.ggml_backend_dev_get(i)
		if C.ggml_backend_dev_type(dev) == ggmlDeviceCPU {
			continue
		}
		if C.nesy_slots_ok(dev) == 0 {
			return fmt.Errorf("models: ggml device %s does not have the interface layout of the pinned ggml; "+
				"not loading on it (its reset would free the memory of other engines in this process)",
				C.GoString(C.ggml_backend_dev_name(dev)))
		}
		C.nesy_clear_reset(dev)
	}
	return nil
})

// deviceSlots reports which of the first 16 pointers of each ggml device
// are set and whether the positions nesy_slots_ok checks hold (for the
// layout test).
func deviceSlots() (names []string, set [][16]bool, ok []bool) {
	ggmlsrc.OnceLoad()
	for i := C.size_t(0); i < C.ggml_backend_dev_count(); i++ {
		dev := C.ggml_backend_dev_get(i)
		var s [16]bool
		for j := range s {
			s[j] = C.nesy_slot_set(dev, C.int(j)) != 0
		}
		names = append(names, C.GoString(C.ggml_backend_dev_name(dev)))
		set = append(set, s)
		ok = append(ok, C.nesy_slots_ok(dev) != 0)
	}
	return names, set, ok
}
