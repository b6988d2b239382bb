// Package sysmem tells the machine's physical memory and derives the soft
// memory limit a long-running command sets for the Go runtime.
package sysmem

// SoftLimit returns the Go runtime's soft memory limit
// (runtime/debug.SetMemoryLimit) a command should set on a machine with
// total bytes of physical memory when the GOMEMLIMIT environment variable
// is env: frac of total, or 0 (leave the runtime's default) when env is
// set (the user's choice stands), total is unknown or frac is not in (0, 1].
// Without a limit the heap may grow to twice its live size before a
// collection (GOGC=100), which on a full machine is the difference between
// a slow collection and the kernel's out-of-memory kill.
func SoftLimit(total int64, env string, frac float64) int64 {
	if env != "" || total <= 0 || frac <= 0 || frac > 1 {
		return 0
	}
	return int64(float64(total) * frac)
}

// Fallback is the machine's memory assumed where Total cannot read it.
const Fallback = 8 << 30

// Half is half the machine's physical memory (half of Fallback where it
// cannot be read): the default share of memory a command's budgets split,
// leaving the rest to the OS and to anything beside it.
func Half() int64 {
	total := Total()
	if total <= 0 {
		total = Fallback
	}
	return total / 2
}
