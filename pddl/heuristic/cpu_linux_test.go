package heuristic_test

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time (user + system) of the calling OS thread;
// benchmarks lock their goroutine to its thread and report it next to wall
// time, which is what a loaded machine inflates.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
