package models

// The ggml functions below are linked into the binary by Ollama's ggml
// package; they are declared here (from ggml-backend.h) because its headers
// are not on this package's include path.

/*
#include <stddef.h>
typedef struct ggml_backend_reg * ggml_backend_reg_t;
typedef struct ggml_backend_device * ggml_backend_dev_t;
struct ggml_backend_feature { const char * name; const char * value; };
typedef struct ggml_backend_feature * (*ggml_backend_get_features_t)(ggml_backend_reg_t reg);
size_t ggml_backend_dev_count(void);
ggml_backend_dev_t ggml_backend_dev_get(size_t index);
ggml_backend_reg_t ggml_backend_dev_backend_reg(ggml_backend_dev_t device);
const char * ggml_backend_dev_name(ggml_backend_dev_t device);
const char * ggml_backend_dev_description(ggml_backend_dev_t device);
void ggml_backend_dev_memory(ggml_backend_dev_t device, size_t * free, size_t * total);
int ggml_backend_dev_type(ggml_backend_dev_t device);
void * ggml_backend_reg_get_proc_address(ggml_backend_reg_t reg, const char * name);
const char * ggml_backend_reg_name(ggml_backend_reg_t reg);

static struct ggml_backend_feature * nesy_features(ggml_backend_reg_t reg) {
	ggml_backend_get_features_t fn = (ggml_backend_get_features_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features");
	return fn ? fn(reg) : NULL;
}
static struct ggml_backend_feature * nesy_feature_at(struct ggml_backend_feature * f, int i) { return &f[i]; }
*/
import "C"

import (
	"fmt"
	"slices"
	"strings"

	ggmlsrc "github.com/ollama/ollama/ml/backend/ggml/ggml/src"
	"golang.org/x/sys/cpu"
)

// Feature is one capability a ggml backend reports (for the CPU backend:
// the instruction sets it was compiled for, such as "AVX2" = "1").
type Feature struct {
	Name, Value string
}

// Backend is a ggml backend (CPU, CUDA, ...) and its reported features.
type Backend struct {
	Name     string
	Features []Feature
}

// Device is a ggml device.
type Device struct {
	Name        string // e.g. "CPU", "CUDA0"
	Description string
	Kind        string // "cpu", "gpu", "igpu" or "accel"
	Backend     string // the backend that drives it
	FreeMemory  uint64
	TotalMemory uint64
}

// System describes the ggml build nesy runs on.
type System struct {
	Backends []Backend
	Devices  []Device
	// LibraryPaths are the folders searched for dynamically loaded backends
	// (OLLAMA_LIBRARY_PATH, see docs/gpu.md).
	LibraryPaths []string
}

// SystemInfo loads ggml's dynamic backends (once per process, from
// OLLAMA_LIBRARY_PATH) and reports the backends with their features and
// the devices. For the compiled-in CPU backend the features are the SIMD
// instruction sets ggml's CPU code was built with (CGO_CFLAGS), which
// decide its speed.
func SystemInfo() System {
	ggmlsrc.OnceLoad()
	var s System
	s.LibraryPaths = ggmlsrc.LibPaths()
	var seen []C.ggml_backend_reg_t
	for i := C.size_t(0); i < C.ggml_backend_dev_count(); i++ {
		dev := C.ggml_backend_dev_get(i)
		reg := C.ggml_backend_dev_backend_reg(dev)
		regName := C.GoString(C.ggml_backend_reg_name(reg))
		var free, total C.size_t
		C.ggml_backend_dev_memory(dev, &free, &total)
		s.Devices = append(s.Devices, Device{
			Name:        C.GoString(C.ggml_backend_dev_name(dev)),
			Description: C.GoString(C.ggml_backend_dev_description(dev)),
			Kind:        deviceKind(int(C.ggml_backend_dev_type(dev))),
			Backend:     regName,
			FreeMemory:  uint64(free),
			TotalMemory: uint64(total),
		})
		if slices.Contains(seen, reg) {
			continue
		}
		seen = append(seen, reg)
		b := Backend{Name: regName}
		if f := C.nesy_features(reg); f != nil {
			for j := C.int(0); ; j++ {
				e := C.nesy_feature_at(f, j)
				if e.name == nil {
					break
				}
				b.Features = append(b.Features, Feature{C.GoString(e.name), C.GoString(e.value)})
			}
		}
		s.Backends = append(s.Backends, b)
	}
	return s
}

func deviceKind(t int) string {
	switch t {
	case 0:
		return "cpu"
	case 1:
		return "gpu"
	case 2:
		return "igpu"
	case 3:
		return "accel"
	}
	return "unknown"
}

// GPUs returns the GPU devices ggml found.
func (s System) GPUs() []Device {
	var out []Device
	for _, d := range s.Devices {
		if d.Kind == "gpu" || d.Kind == "igpu" {
			out = append(out, d)
		}
	}
	return out
}

// CPUFeatures returns the names of the CPU backend's enabled features,
// e.g. [SSE3 SSSE3 AVX AVX2 F16C FMA BMI2 LLAMAFILE].
func (s System) CPUFeatures() []string {
	for _, b := range s.Backends {
		if b.Name != "CPU" {
			continue
		}
		var out []string
		for _, f := range b.Features {
			if f.Value != "0" {
				out = append(out, f.Name)
			}
		}
		return out
	}
	return nil
}

// Warning returns a message when ggml's CPU code was compiled without SIMD
// instructions this CPU has (a build without CGO_CFLAGS="-O3 -march=...",
// 3-15x slower), or "".
func (s System) Warning() string {
	have := map[string]bool{}
	for _, f := range s.CPUFeatures() {
		have[f] = true
	}
	var missing []string
	for _, c := range []struct {
		name string
		cpu  bool
	}{{"AVX", cpu.X86.HasAVX}, {"AVX2", cpu.X86.HasAVX2}, {"FMA", cpu.X86.HasFMA}, {"AVX512", cpu.X86.HasAVX512F},
		{"NEON", cpu.ARM64.HasASIMD}} {
		if c.cpu && !have[c.name] {
			missing = append(missing, c.name)
		}
	}
	if len(missing) == 0 || !slices.Contains([]string{"AVX", "AVX2", "NEON"}, missing[0]) {
		// AVX512 alone is a choice (x86-64-v3 binaries), not a mistake.
		return ""
	}
	return fmt.Sprintf("ggml's CPU code was built without %s, which this CPU has: inference is several times slower; "+
		"rebuild with `make build` (CGO_CFLAGS=\"-O3 -march=native\")", strings.Join(missing, ", "))
}

// String is a one-line summary for startup logs and `nesy version`, e.g.
// "ggml CPU: SSE3 SSSE3 AVX AVX2 F16C FMA BMI2 LLAMAFILE; GPUs: none".
func (s System) String() string {
	var parts []string
	for _, b := range s.Backends {
		var fs []string
		for _, f := range b.Features {
			switch f.Value {
			case "1":
				fs = append(fs, f.Name)
			case "0":
			default:
				fs = append(fs, f.Name+"="+f.Value)
			}
		}
		parts = append(parts, b.Name+": "+strings.Join(fs, " "))
	}
	gpus := s.GPUs()
	if len(gpus) == 0 {
		parts = append(parts, "GPUs: none")
	} else {
		var gs []string
		for _, g := range gpus {
			gs = append(gs, fmt.Sprintf("%s (%s, %.1f GiB)", g.Name, g.Description, float64(g.TotalMemory)/(1<<30)))
		}
		parts = append(parts, "GPUs: "+strings.Join(gs, ", "))
	}
	return "ggml " + strings.Join(parts, "; ")
}
