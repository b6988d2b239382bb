package hugepages

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestPlan(t *testing.T) {
	base := []string{"HOME=/root", "PATH=/usr/bin"}
	for _, tc := range []struct {
		name, goos, thp string
		env             []string
		want            []string // nil: no re-execution
	}{
		{"madvise", "linux", "always [madvise] never\n", base, append(slices.Clone(base), "GLIBC_TUNABLES="+tunable)},
		{"other tunables kept", "linux", "always [madvise] never", append(slices.Clone(base), "GLIBC_TUNABLES=glibc.malloc.arena_max=2"),
			append(slices.Clone(base), "GLIBC_TUNABLES=glibc.malloc.arena_max=2:"+tunable)},
		{"empty tunables", "linux", "always [madvise] never", []string{"GLIBC_TUNABLES="}, []string{"GLIBC_TUNABLES=" + tunable}},
		{"already set (re-executed)", "linux", "always [madvise] never", append(slices.Clone(base), "GLIBC_TUNABLES="+tunable), nil},
		{"the user turned it off", "linux", "always [madvise] never", []string{"GLIBC_TUNABLES=glibc.malloc.hugetlb=0"}, nil},
		{"opted out", "linux", "always [madvise] never", append(slices.Clone(base), OptOut+"=0"), nil},
		{"opt-out variable not 0", "linux", "always [madvise] never", []string{OptOut + "=1"}, []string{OptOut + "=1", "GLIBC_TUNABLES=" + tunable}},
		{"always: every large block already", "linux", "[always] madvise never", base, nil},
		{"never", "linux", "always madvise [never]", base, nil},
		{"not Linux", "darwin", "always [madvise] never", base, nil},
	} {
		got, ok := Plan(tc.goos, tc.thp, tc.env)
		if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("%s: Plan = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}

// TestReexec runs this test binary as a child that calls Reexec: where the
// kernel gives huge pages on request, the child's process comes back with
// the tunable in its environment (and does not loop: the second Reexec
// sees it); elsewhere it goes on unchanged.
func TestReexec(t *testing.T) {
	if os.Getenv("NESY_HUGEPAGES_CHILD") == "1" {
		if err := Reexec(); err != nil {
			os.Stdout.WriteString("exec failed: " + err.Error() + "\n")
		}
		os.Stdout.WriteString("tunables=" + os.Getenv("GLIBC_TUNABLES") + "\n")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReexec$")
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GLIBC_TUNABLES=") || strings.HasPrefix(kv, OptOut+"=")
	})
	cmd.Env = append(cmd.Env, "NESY_HUGEPAGES_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	thp, _ := os.ReadFile(thpMode)
	want := "tunables=\n"
	if strings.Contains(string(thp), "[madvise]") {
		want = "tunables=" + tunable + "\n"
	}
	if !strings.Contains(string(out), want) {
		t.Errorf("child printed %q, want %q (THP mode %q)", out, want, thp)
	}
}
