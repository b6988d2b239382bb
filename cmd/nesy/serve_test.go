package main

import (
	"testing"

	"github.com/nesy-dev/nesy/models/gpu"
)

// TestGPUStats checks the NVML reading to metrics conversion: percentages
// become ratios, fields NVML could not read stay unknown (negative or zero
// memory), and no driver means no GPUs.
func TestGPUStats(t *testing.T) {
	tests := []struct {
		name string
		in   gpu.Status
		want int
		util []float64
		temp []float64
		mem  []uint64
	}{
		{"no driver", gpu.Status{Available: false, Reason: "no NVIDIA driver"}, 0, nil, nil, nil},
		{"two GPUs", gpu.Status{Available: true, Devices: []gpu.Device{
			{Index: 0, Utilization: 37, TemperatureC: 55, MemoryTotal: 80 << 30, MemoryUsed: 10 << 30},
			{Index: 1, Utilization: -1, TemperatureC: -1, MemoryTotal: -1, MemoryUsed: -1},
		}}, 2, []float64{0.37, -1}, []float64{55, -1}, []uint64{10 << 30, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := gpuStats(tt.in)
			if len(got) != tt.want {
				t.Fatalf("%d GPUs, want %d", len(got), tt.want)
			}
			for i, g := range got {
				if g.Index != tt.in.Devices[i].Index || g.Utilization != tt.util[i] || g.TemperatureC != tt.temp[i] || g.MemoryUsed != tt.mem[i] {
					t.Errorf("GPU %d: %+v", i, g)
				}
			}
		})
	}
}
