package sysmem

import "golang.org/x/sys/unix"

// Total is the machine's physical memory in bytes (0 if unknown).
func Total() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
