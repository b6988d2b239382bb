package gpu

import (
	"os"
	"strings"
	"sync"
	"testing"
)

// TestMissingLibrary: without NVML the monitor reports why, never fails.
func TestMissingLibrary(t *testing.T) {
	m := Open(Options{Library: "/nonexistent/libnvidia-ml.so.1"})
	st := m.Read()
	if st.Available {
		t.Fatalf("Available with a missing library: %+v", st)
	}
	if !strings.Contains(st.Reason, "no NVIDIA driver") || !strings.Contains(st.String(), "not found") {
		t.Errorf("Reason = %q", st.Reason)
	}
	if len(st.Devices) != 0 {
		t.Errorf("devices without a driver: %v", st.Devices)
	}
	if err := m.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if st := m.Read(); st.Available {
		t.Errorf("Available after Close")
	}
}

// TestSystemLibrary reads the real NVML where there is one (GPU machines)
// and otherwise checks the no-driver state; concurrent reads are safe.
func TestSystemLibrary(t *testing.T) {
	m := Open(Options{})
	defer m.Close()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { m.Read() })
	}
	wg.Wait()
	st := m.Read()
	t.Logf("%s", st)
	if !st.Available {
		if st.Reason == "" {
			t.Fatal("unavailable without a reason")
		}
		if os.Getenv("NESY_REQUIRE_GPU") == "1" {
			t.Fatalf("NESY_REQUIRE_GPU=1 but %s", st.Reason)
		}
		return
	}
	if st.Driver == "" || len(st.Devices) == 0 {
		t.Fatalf("NVML available but driver %q, %d devices", st.Driver, len(st.Devices))
	}
	for _, d := range st.Devices {
		if d.Name == "" || d.MemoryTotal <= 0 || d.MemoryUsed < 0 || d.MemoryUsed > d.MemoryTotal {
			t.Errorf("device %+v", d)
		}
		if d.TemperatureC != -1 && (d.TemperatureC < 0 || d.TemperatureC > 120) {
			t.Errorf("device %d temperature %d", d.Index, d.TemperatureC)
		}
		if d.Utilization < -1 || d.Utilization > 100 {
			t.Errorf("device %d utilization %d", d.Index, d.Utilization)
		}
	}
}
