//go:build !linux

package server

// totalMemory is the machine's physical memory in bytes: unknown here, so
// the budget falls back to a fixed size.
func totalMemory() int64 { return 0 }
