package sysmem

import (
	"strconv"
	"strings"
)

// parseMemAvailable reads the MemAvailable line of /proc/meminfo's text
// ("MemAvailable:   12345678 kB") in bytes; 0 when absent or malformed.
func parseMemAvailable(meminfo string) int64 {
	for line := range strings.Lines(meminfo) {
		rest, ok := strings.CutPrefix(line, "MemAvailable:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0
		}
		return kb << 10
	}
	return 0
}
