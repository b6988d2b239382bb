//go:build !linux

package heuristic_test

import "time"

// threadCPU is only available on Linux.
func threadCPU() (time.Duration, bool) { return 0, false }
