package decoder

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time the calling OS thread has used (the caller
// locks its goroutine to the thread): benchmarks report it beside wall time
// because the development machine is shared and wall times vary with load.
func threadCPU() (time.Duration, bool) {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
