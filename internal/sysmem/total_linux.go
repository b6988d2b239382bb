package sysmem

import (
	"os"

	"golang.org/x/sys/unix"
)

// Total is the machine's physical memory in bytes (0 if unknown).
func Total() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// Available is the memory the kernel reports available for new
// allocations without swapping (MemAvailable in /proc/meminfo: free memory
// plus reclaimable caches), in bytes; 0 if unknown.
func Available() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return parseMemAvailable(string(data))
}
