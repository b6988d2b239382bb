//go:build !linux

package decoder

import "time"

// threadCPU is unavailable off Linux.
func threadCPU() (time.Duration, bool) { return 0, false }
