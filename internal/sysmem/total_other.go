//go:build !linux

package sysmem

// Total is the machine's physical memory in bytes: unknown here (0), so
// callers fall back to fixed sizes.
func Total() int64 { return 0 }

// Available is the memory available for new allocations: unknown here (0).
func Available() int64 { return 0 }
