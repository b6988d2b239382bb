//go:build !linux

package trie

import "time"

// threadCPU is unavailable off Linux.
func threadCPU() (time.Duration, bool) { return 0, false }
