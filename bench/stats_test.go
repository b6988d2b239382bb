package bench

import (
	"math"
	"math/big"
	"testing"
)

// exactMcNemar computes the two-sided exact p-value with rational
// arithmetic: 2 * sum_{k<=min(b,c)} C(n,k) / 2^n, capped at 1.
func exactMcNemar(b, c int) float64 {
	n := b + c
	if n == 0 {
		return 1
	}
	sum := new(big.Int)
	for k := 0; k <= min(b, c); k++ {
		sum.Add(sum, new(big.Int).Binomial(int64(n), int64(k)))
	}
	p := new(big.Rat).SetFrac(new(big.Int).Mul(sum, big.NewInt(2)), new(big.Int).Lsh(big.NewInt(1), uint(n)))
	f, _ := p.Float64()
	return math.Min(1, f)
}

func TestMcNemar(t *testing.T) {
	// Hand-computed values.
	hand := []struct {
		b, c int
		p    float64
	}{
		{0, 0, 1},
		{5, 0, 2.0 / 32},                // 2 * (1/2)^5
		{0, 5, 2.0 / 32},                // symmetric
		{10, 2, 2 * 79.0 / 4096},        // 2 * (1 + 12 + 66) / 2^12
		{3, 3, 1},                       // 2 * 42/64 > 1
		{1, 0, 1},                       // 2 * 1/2
		{6, 1, 2 * 8.0 / 128},           // 2 * (1 + 7) / 2^7
		{20, 5, 2 * 68406.0 / 33554432}, // 2 * (1+25+300+2300+12650+53130) / 2^25
	}
	for _, h := range hand {
		if got := McNemar(h.b, h.c); math.Abs(got-h.p) > 1e-12*math.Max(1, h.p) {
			t.Errorf("McNemar(%d, %d) = %.15g, want %.15g", h.b, h.c, got, h.p)
		}
	}
	// Against the exact rational sum over a grid, large counts included.
	for b := 0; b <= 60; b += 3 {
		for c := 0; c <= 60; c += 4 {
			want := exactMcNemar(b, c)
			if got := McNemar(b, c); math.Abs(got-want) > 1e-9*math.Max(want, 1e-300) && math.Abs(got-want) > 1e-15 {
				t.Errorf("McNemar(%d, %d) = %.15g, exact %.15g", b, c, got, want)
			}
		}
	}
	for _, n := range []int{200, 500} {
		want := exactMcNemar(n/2-20, n/2+20)
		if got := McNemar(n/2-20, n/2+20); math.Abs(got-want) > 1e-9*want {
			t.Errorf("n=%d: %.15g, exact %.15g", n, got, want)
		}
	}
}

func repeat(v float64, n int) Cluster {
	c := make(Cluster, n)
	for i := range c {
		c[i] = v
	}
	return c
}

func TestBootstrap(t *testing.T) {
	// Degenerate data give degenerate intervals.
	for _, v := range []float64{0, 1, -1} {
		lo, hi := Bootstrap([]Cluster{repeat(v, 3), repeat(v, 5)}, 500, 0.95, 1)
		if lo != v || hi != v {
			t.Errorf("constant %v: [%v, %v]", v, lo, hi)
		}
	}
	if lo, hi := Bootstrap(nil, 100, 0.95, 1); lo != 0 || hi != 0 {
		t.Errorf("no data: [%v, %v]", lo, hi)
	}
	// 400 independent tasks at p = 1/2: the interval is close to the normal
	// one, 1.96 * sqrt(p(1-p)/n) on each side, and the same seed repeats it.
	var single []Cluster
	for i := 0; i < 400; i++ {
		single = append(single, Cluster{float64(i % 2)})
	}
	lo, hi := Bootstrap(single, 4000, 0.95, 3)
	half := 1.96 * math.Sqrt(0.25/400)
	if math.Abs((hi-lo)/2-half) > 0.15*half || lo > 0.5 || hi < 0.5 {
		t.Errorf("independent tasks: [%.4f, %.4f], want about 0.5 +- %.4f", lo, hi, half)
	}
	if lo2, hi2 := Bootstrap(single, 4000, 0.95, 3); lo2 != lo || hi2 != hi {
		t.Error("the same seed gave another interval")
	}
	// The same 400 outcomes in 40 clusters of 10 identical trials: the
	// trials carry no more information than the clusters, so the interval
	// is about sqrt(10) times wider than when treated as independent.
	var clustered []Cluster
	for i := 0; i < 40; i++ {
		clustered = append(clustered, repeat(float64(i%2), 10))
	}
	clo, chi := Bootstrap(clustered, 4000, 0.95, 3)
	ratio := (chi - clo) / (hi - lo)
	if ratio < 2.5 || ratio > 4 {
		t.Errorf("clustered interval [%.3f, %.3f] is %.2f times the independent one, want about 3.2", clo, chi, ratio)
	}
}

func TestCompare(t *testing.T) {
	rec := func(task, cluster string, ok bool) Record { return Record{Task: task, Cluster: cluster, Success: ok} }
	a := []Record{
		rec("f1/t1", "f1", true), rec("f1/t2", "f1", true), rec("f2/t1", "f2", false),
		rec("f2/t2", "f2", false), rec("f3/t1", "f3", true), rec("onlyA", "", true),
	}
	b := []Record{
		rec("f1/t1", "f1", true), rec("f1/t2", "f1", false), rec("f2/t1", "f2", true),
		rec("f2/t2", "f2", false), rec("f3/t1", "f3", false), rec("onlyB", "", false),
	}
	c := Compare(a, b, 2000, 1)
	want := Comparison{Paired: 5, OnlyA: 1, OnlyB: 1, Clusters: 3, SuccessA: 3, SuccessB: 2,
		Both: 1, Neither: 1, AOnly: 2, BOnly: 1}
	got := c
	got.RateA, got.RateB, got.Diff, got.PValue, got.CI95, got.Resamples = 0, 0, 0, 0, [2]float64{}, 0
	if got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	if c.RateA != 0.6 || c.RateB != 0.4 || math.Abs(c.Diff-0.2) > 1e-12 {
		t.Fatalf("rates %v %v diff %v", c.RateA, c.RateB, c.Diff)
	}
	if c.PValue != 1 { // 2 * P[X <= 1], X ~ Bin(3, 1/2) = 2 * 4/8
		t.Fatalf("p = %v, want 1", c.PValue)
	}
	if c.CI95[0] > c.Diff || c.CI95[1] < c.Diff || c.CI95[0] < -1 || c.CI95[1] > 1 {
		t.Fatalf("interval %v does not hold the difference %v", c.CI95, c.Diff)
	}
	// A run against itself: no discordant pair, a zero interval.
	s := Compare(a, a, 500, 1)
	if s.PValue != 1 || s.Diff != 0 || s.CI95 != [2]float64{0, 0} || s.Paired != len(a) {
		t.Fatalf("self comparison %+v", s)
	}
}
