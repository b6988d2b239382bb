package train

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// needOpenBLAS returns OpenBLAS, or skips the test where it is not
// installed (and fails it where NESY_REQUIRE_OPENBLAS=1 says it must be,
// as in CI).
func needOpenBLAS(t *testing.T) *openBLAS {
	t.Helper()
	b, err := loadOpenBLAS()
	if err != nil {
		if os.Getenv("NESY_REQUIRE_OPENBLAS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return b
}

// TestOpenBLASSgemm: every transposition, with leading dimensions wider
// than the matrices, against gonum's Sgemm.
func TestOpenBLASSgemm(t *testing.T) {
	ob := needOpenBLAS(t)
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	const m, n, k, pad = 7, 5, 9, 3
	for _, tc := range []struct{ tA, tB blas.Transpose }{
		{blas.NoTrans, blas.NoTrans}, {blas.Trans, blas.NoTrans}, {blas.NoTrans, blas.Trans}, {blas.Trans, blas.Trans},
	} {
		ar, ac := m, k
		if tc.tA == blas.Trans {
			ar, ac = k, m
		}
		br, bc := k, n
		if tc.tB == blas.Trans {
			br, bc = n, k
		}
		a, b, c := fill(ar*(ac+pad)), fill(br*(bc+pad)), fill(m*(n+pad))
		want := slices.Clone(c)
		gonum.Implementation{}.Sgemm(tc.tA, tc.tB, m, n, k, 0.5, a, ac+pad, b, bc+pad, 0.25, want, n+pad)
		ob.Sgemm(tc.tA, tc.tB, m, n, k, 0.5, a, ac+pad, b, bc+pad, 0.25, c, n+pad)
		for i := range c {
			if math.Abs(float64(c[i]-want[i])) > 1e-4*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("%c%c: element %d is %g, gonum %g", tc.tA, tc.tB, i, c[i], want[i])
			}
		}
	}
}

// TestTrainOpenBLAS: a run on OpenBLAS trains the weights gonum's does
// (float tolerance: the sums are ordered differently), and bit for bit the
// same weights for any worker count.
func TestTrainOpenBLAS(t *testing.T) {
	needOpenBLAS(t)
	cfg := Config{Vocab: 12, Dim: 16, Layers: 2, Heads: 2, FFN: 32, Tied: true}
	data := toyExamples(cfg.Vocab, 10)
	run := func(b BLAS, workers int) (*Params, *Result) {
		p, err := NewParams(cfg, 3)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Train(context.Background(), p, data[:7], data[7:],
			Options{Steps: 12, Batch: 4, Seq: 16, Seed: 5, EvalEvery: 4, LR: 1e-2, Workers: workers, BLAS: b})
		if err != nil {
			t.Fatal(err)
		}
		return p, res
	}
	ref, refRes := run(BLASGonum, 1)
	one, oneRes := run(BLASOpenBLAS, 1)
	moved := false
	for i := range ref.List {
		for j, v := range ref.List[i].Data {
			if d := math.Abs(float64(one.List[i].Data[j] - v)); d > 1e-3 {
				t.Fatalf("%s[%d]: OpenBLAS %g, gonum %g", ref.List[i].Name, j, one.List[i].Data[j], v)
			}
			moved = moved || one.List[i].Data[j] != v
		}
	}
	if !moved {
		t.Fatal("OpenBLAS trained gonum's bits exactly: the setting did not reach gorgonia")
	}
	for i, pt := range refRes.HeldOut {
		if math.Abs(pt.Loss-oneRes.HeldOut[i].Loss) > 1e-3 {
			t.Fatalf("held-out loss at step %d: OpenBLAS %g, gonum %g", pt.Step, oneRes.HeldOut[i].Loss, pt.Loss)
		}
	}
	two, twoRes := run(BLASOpenBLAS, 2)
	for i := range one.List {
		if !slices.Equal(two.List[i].Data, one.List[i].Data) {
			t.Fatalf("OpenBLAS, 2 workers: %s differs from one worker's", one.List[i].Name)
		}
	}
	if !slices.Equal(twoRes.Train, oneRes.Train) {
		t.Fatal("OpenBLAS, 2 workers: the loss curve differs from one worker's")
	}
	// After the run gorgonia is back on gonum: a gonum run is gonum's bits.
	again, _ := run(BLASGonum, 1)
	for i := range ref.List {
		if !slices.Equal(again.List[i].Data, ref.List[i].Data) {
			t.Fatalf("a gonum run after an OpenBLAS one: %s differs", ref.List[i].Name)
		}
	}
}

func TestUnknownBLAS(t *testing.T) {
	cfg := Config{Vocab: 12, Dim: 16, Layers: 1, Heads: 2, FFN: 32}
	p, err := NewParams(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	data := toyExamples(cfg.Vocab, 4)
	_, err = Train(context.Background(), p, data[:3], data[3:], Options{Steps: 1, Batch: 1, Seq: 16, BLAS: "mkl"})
	if err == nil {
		t.Fatal("an unknown BLAS trained")
	}
	t.Log(err)
}

// TestDescribeBLAS: the description names the library and, for OpenBLAS,
// its version and the kernels it picked (what reproducing a run depends
// on); an unknown name is an error.
func TestDescribeBLAS(t *testing.T) {
	if d, err := DescribeBLAS(BLASGonum); err != nil || !strings.Contains(d, "gonum") {
		t.Errorf("gonum: %q, %v", d, err)
	}
	if _, err := DescribeBLAS("mkl"); err == nil {
		t.Error("an unknown BLAS was described")
	}
	needOpenBLAS(t)
	d, err := DescribeBLAS(BLASOpenBLAS)
	if err != nil || !strings.Contains(d, "OpenBLAS") || !strings.Contains(d, "kernels for ") {
		t.Fatalf("openblas: %q, %v", d, err)
	}
	t.Log(d)
}

// TestPinBLASCore: --blas-core makes OpenBLAS run the named kernels (in a
// process of its own: OpenBLAS reads OPENBLAS_CORETYPE when it loads), and
// a second, different name is refused once it has loaded.
func TestPinBLASCore(t *testing.T) {
	needOpenBLAS(t)
	if b, err := os.ReadFile("/proc/cpuinfo"); err != nil || !strings.Contains(string(b), " avx2") {
		t.Skip("no AVX2 (Haswell's kernels) on this CPU")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPinBLASCoreChild$", "-test.v")
	cmd.Env = append(os.Environ(), "NESY_PIN_CORE=Haswell")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestPinBLASCoreChild") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if err := pinBLASCore(BLASGonum, "Haswell"); err != nil {
		t.Errorf("gonum with a core name: %v, want it ignored", err)
	}
}

// TestPinBLASCoreChild is TestPinBLASCore's child process.
func TestPinBLASCoreChild(t *testing.T) {
	core := os.Getenv("NESY_PIN_CORE")
	if core == "" {
		t.Skip("run by TestPinBLASCore in a process of its own")
	}
	if err := pinBLASCore(BLASOpenBLAS, core); err != nil {
		t.Fatal(err)
	}
	ob, err := loadOpenBLAS()
	if err != nil || !strings.HasSuffix(ob.config, "kernels for "+core) {
		t.Fatalf("OpenBLAS %q, %v: want %s's kernels", ob.config, err, core)
	}
	t.Log(ob.config)
	if err := pinBLASCore(BLASOpenBLAS, "Prescott"); err == nil || !strings.Contains(err.Error(), "Prescott") {
		t.Fatalf("another core after loading: %v, want an error naming it", err)
	}
}
