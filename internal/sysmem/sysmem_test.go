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
