package sysmem

import "testing"

// TestSoftLimit checks the limit on hand-checked inputs: a fraction of the
// machine, nothing where GOMEMLIMIT is set or the machine is unknown.
func TestSoftLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		total int64
		env   string
		frac  float64
		want  int64
	}{
		{"fraction of the machine", 10 << 30, "", 0.8, 8 << 30},
		{"whole machine", 1000, "", 1, 1000},
		{"GOMEMLIMIT set", 24 << 30, "19GiB", 0.8, 0},
		{"machine unknown", 0, "", 0.8, 0},
		{"no fraction", 24 << 30, "", 0, 0},
		{"fraction past the machine", 24 << 30, "", 1.5, 0},
	} {
		if got := SoftLimit(tc.total, tc.env, tc.frac); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	if Total() < 0 {
		t.Errorf("Total() = %d", Total())
	}
}

// TestHalf: half of the machine's memory where it can be read, half of
// Fallback where not.
func TestHalf(t *testing.T) {
	want := Total() / 2
	if Total() <= 0 {
		want = Fallback / 2
	}
	if got := Half(); got != want || got <= 0 {
		t.Fatalf("Half() = %d, want %d (Total %d)", got, want, Total())
	}
}

// TestParseMemAvailable reads MemAvailable from /proc/meminfo's format and
// rejects what is not it.
func TestParseMemAvailable(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       int64
	}{
		{"meminfo", "MemTotal:       24576000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\nBuffers:  1 kB\n", 20000000 << 10},
		{"last line, no newline", "MemTotal: 5 kB\nMemAvailable: 7 kB", 7 << 10},
		{"absent (old kernels)", "MemTotal: 5 kB\nMemFree: 3 kB\n", 0},
		{"not kB", "MemAvailable: 7 MB\n", 0},
		{"not a number", "MemAvailable: lots kB\n", 0},
		{"negative", "MemAvailable: -7 kB\n", 0},
	} {
		if got := parseMemAvailable(tc.text); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestAvailable: on Linux the machine reports some memory available, and
// no more than it has.
func TestAvailable(t *testing.T) {
	total, avail := Total(), Available()
	if total == 0 {
		t.Skip("no total memory on this system")
	}
	if avail <= 0 || avail > total {
		t.Errorf("Available() = %d with Total() = %d", avail, total)
	}
}
