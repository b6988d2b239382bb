// Package gpu reads NVIDIA GPU state (devices, memory, utilization,
// temperature, power) through NVML, github.com/NVIDIA/go-nvml, for the
// server's metrics and for startup logs. NVML is loaded at run time
// (libnvidia-ml.so.1, installed with the NVIDIA driver); where it is
// missing, as on machines without an NVIDIA GPU, a Monitor reports a clear
// "no NVIDIA driver" state instead of failing.
//
// This package observes GPUs; the engine's own use of them (ggml's CUDA
// backend) is set up through OLLAMA_LIBRARY_PATH, see docs/gpu.md.
package gpu

import (
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Device is one GPU's state at the time of a Read. Fields NVML cannot read
// on this device (not every GPU reports power, for example) are -1.
type Device struct {
	Index int
	UUID  string
	Name  string
	// Memory in bytes.
	MemoryTotal, MemoryUsed, MemoryFree int64
	// Utilization is the percent of the last sample period in which a
	// kernel ran; MemoryUtilization the percent in which memory was read
	// or written.
	Utilization, MemoryUtilization int
	TemperatureC                   int
	PowerWatts                     float64
}

// Status is the result of a Read.
type Status struct {
	// Available says NVML was loaded and initialised.
	Available bool
	// Reason says why not, e.g. "no NVIDIA driver (libnvidia-ml.so.1 not
	// found)".
	Reason string
	// Driver is the driver version ("550.54.15"); CUDA the highest CUDA
	// version it supports ("12.4").
	Driver, CUDA string
	Devices      []Device
}

// Options configure Open.
type Options struct {
	// Library is the NVML shared library to load; "" means
	// libnvidia-ml.so.1 from the loader's search path.
	Library string
}

// Monitor holds an initialised NVML. It is safe for concurrent use.
type Monitor struct {
	mu     sync.Mutex // serialises NVML calls and guards the fields below
	lib    nvml.Interface
	reason string // set when NVML is unusable
	closed bool
}

// Open loads and initialises NVML. It never fails: without a driver the
// Monitor's Read reports Available false with the reason.
func Open(opts Options) *Monitor {
	var libOpts []nvml.LibraryOption
	if opts.Library != "" {
		libOpts = append(libOpts, nvml.WithLibraryPath(opts.Library))
	}
	m := &Monitor{lib: nvml.New(libOpts...)}
	switch ret := safeInit(m.lib); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		name := opts.Library
		if name == "" {
			name = "libnvidia-ml.so.1"
		}
		m.reason = fmt.Sprintf("no NVIDIA driver (%s not found)", name)
	case nvml.ERROR_DRIVER_NOT_LOADED:
		m.reason = "no NVIDIA driver (the kernel driver is not loaded)"
	case nvml.ERROR_NO_PERMISSION:
		m.reason = "NVML: no permission to access the GPUs"
	default:
		m.reason = "NVML initialisation failed: " + errorString(m.lib, ret)
	}
	return m
}

// safeInit calls Init, turning a panic in the binding into an error code.
func safeInit(lib nvml.Interface) (ret nvml.Return) {
	defer func() {
		if r := recover(); r != nil {
			ret = nvml.ERROR_UNKNOWN
		}
	}()
	return lib.Init()
}

func errorString(lib nvml.Interface, r nvml.Return) (s string) {
	defer func() {
		if recover() != nil {
			s = fmt.Sprintf("NVML error %d", int32(r))
		}
	}()
	return lib.ErrorString(r)
}

// Read returns the current state of every GPU.
func (m *Monitor) Read() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reason != "" {
		return Status{Reason: m.reason}
	}
	if m.closed {
		return Status{Reason: "monitor closed"}
	}
	st := Status{Available: true}
	if v, ret := m.lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		st.Driver = v
	}
	if v, ret := m.lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		st.CUDA = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	n, ret := m.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		st.Available = false
		st.Reason = "NVML: counting devices: " + errorString(m.lib, ret)
		return st
	}
	for i := range n {
		d := Device{Index: i, MemoryTotal: -1, MemoryUsed: -1, MemoryFree: -1,
			Utilization: -1, MemoryUtilization: -1, TemperatureC: -1, PowerWatts: -1}
		h, ret := m.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			st.Devices = append(st.Devices, d)
			continue
		}
		if v, ret := h.GetName(); ret == nvml.SUCCESS {
			d.Name = v
		}
		if v, ret := h.GetUUID(); ret == nvml.SUCCESS {
			d.UUID = v
		}
		if mem, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
			d.MemoryTotal, d.MemoryUsed, d.MemoryFree = int64(mem.Total), int64(mem.Used), int64(mem.Free)
		}
		if u, ret := h.GetUtilizationRates(); ret == nvml.SUCCESS {
			d.Utilization, d.MemoryUtilization = int(u.Gpu), int(u.Memory)
		}
		if t, ret := h.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
			d.TemperatureC = int(t)
		}
		if p, ret := h.GetPowerUsage(); ret == nvml.SUCCESS {
			d.PowerWatts = float64(p) / 1000
		}
		st.Devices = append(st.Devices, d)
	}
	return st
}

// Close shuts NVML down. Read after Close reports the monitor closed.
func (m *Monitor) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.reason != "" {
		m.closed = true
		return nil
	}
	m.closed = true
	if ret := m.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("gpu: NVML shutdown: %s", errorString(m.lib, ret))
	}
	return nil
}

// String summarises a status for logs: "no NVIDIA driver (...)" or
// "NVIDIA driver 550.54.15 (CUDA 12.4): 0 NVIDIA H200 (139.8 GiB, 3% busy, 41°C)".
func (s Status) String() string {
	if !s.Available {
		return s.Reason
	}
	out := fmt.Sprintf("NVIDIA driver %s (CUDA %s):", s.Driver, s.CUDA)
	if len(s.Devices) == 0 {
		return out + " no devices"
	}
	for i, d := range s.Devices {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprintf(" %d %s (%.1f GiB, %d%% busy, %d°C)", d.Index, d.Name, float64(d.MemoryTotal)/(1<<30), d.Utilization, d.TemperatureC)
	}
	return out
}
