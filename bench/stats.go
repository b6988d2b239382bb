package bench

import (
	"math"
	"math/rand/v2"
	"sort"
)

// McNemar returns the exact two-sided p-value of McNemar's test on paired
// binary outcomes with b pairs where only the first method succeeded and c
// where only the second did: under the null hypothesis each discordant pair
// goes either way with probability 1/2, so
//
//	p = min(1, 2 * P[X <= min(b, c)]),  X ~ Binomial(b+c, 1/2).
//
// With no discordant pair p is 1.
func McNemar(b, c int) float64 {
	n := b + c
	if n == 0 {
		return 1
	}
	m := min(b, c)
	// Sum the binomial terms in log space (exact enough for any n here).
	lgn, _ := math.Lgamma(float64(n + 1))
	ln2 := float64(n) * math.Ln2
	sum := 0.0
	for k := 0; k <= m; k++ {
		a, _ := math.Lgamma(float64(k + 1))
		bb, _ := math.Lgamma(float64(n - k + 1))
		sum += math.Exp(lgn - a - bb - ln2)
	}
	return math.Min(1, 2*sum)
}

// Cluster is a group of tasks resampled together: ALFWorld trials of one
// task folder, VirtualHome problems of one task. Values are one number per
// task (a success 0/1, or a paired difference -1/0/1).
type Cluster []float64

// Bootstrap returns the percentile interval [lo, hi] holding the central
// level (e.g. 0.95) of the mean over resamples drawn in two stages, as for
// nested data: clusters with replacement, then within each drawn cluster its
// tasks with replacement. The same seed gives the same interval. With no
// task it returns [0, 0].
func Bootstrap(clusters []Cluster, resamples int, level float64, seed uint64) (lo, hi float64) {
	var cs []Cluster
	for _, c := range clusters {
		if len(c) > 0 {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 || resamples <= 0 {
		return 0, 0
	}
	rng := rand.New(rand.NewPCG(seed, 0x626f6f74))
	means := make([]float64, resamples)
	for r := range means {
		sum, n := 0.0, 0
		for range cs {
			c := cs[rng.IntN(len(cs))]
			for range c {
				sum += c[rng.IntN(len(c))]
			}
			n += len(c)
		}
		means[r] = sum / float64(n)
	}
	sort.Float64s(means)
	alpha := (1 - level) / 2
	return quantile(means, alpha), quantile(means, 1-alpha)
}

// quantile returns the q-quantile of sorted xs (linear interpolation
// between closest ranks).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	pos := q * float64(len(xs)-1)
	i := int(math.Floor(pos))
	if i >= len(xs)-1 {
		return xs[len(xs)-1]
	}
	f := pos - float64(i)
	return xs[i]*(1-f) + xs[i+1]*f
}

// DefaultResamples is the number of bootstrap resamples Compare and the
// summaries use.
const DefaultResamples = 10000

// Comparison is the paired comparison of two runs on the tasks both hold.
type Comparison struct {
	// A and B name the runs (set by the caller).
	A string `json:"a,omitempty"`
	B string `json:"b,omitempty"`
	// Paired is the number of tasks in both runs; OnlyA and OnlyB those in
	// one run only (left out).
	Paired int `json:"paired"`
	OnlyA  int `json:"only_a"`
	OnlyB  int `json:"only_b"`
	// Clusters is the number of task clusters among the paired tasks.
	Clusters int `json:"clusters"`
	// SuccessA and SuccessB count successes on the paired tasks; RateA,
	// RateB the rates and Diff = RateA - RateB.
	SuccessA int     `json:"success_a"`
	SuccessB int     `json:"success_b"`
	RateA    float64 `json:"rate_a"`
	RateB    float64 `json:"rate_b"`
	Diff     float64 `json:"diff"`
	// Both, Neither, AOnly and BOnly split the paired tasks by outcome;
	// AOnly and BOnly are McNemar's discordant pairs.
	Both    int `json:"both"`
	Neither int `json:"neither"`
	AOnly   int `json:"a_only"`
	BOnly   int `json:"b_only"`
	// PValue is McNemar's exact two-sided p-value; CI95 the cluster
	// bootstrap 95% interval of Diff.
	PValue    float64    `json:"p_value"`
	CI95      [2]float64 `json:"ci95"`
	Resamples int        `json:"resamples"`
}

// Compare pairs two runs' records by task and compares their success:
// McNemar's exact test on the discordant pairs and a task-cluster bootstrap
// interval of the difference in success rate (clusters from the records'
// Cluster field, the task itself when empty).
func Compare(a, b []Record, resamples int, seed uint64) Comparison {
	if resamples <= 0 {
		resamples = DefaultResamples
	}
	byTask := map[string]Record{}
	for _, r := range b {
		byTask[r.Task] = r
	}
	var c Comparison
	c.Resamples = resamples
	groups := map[string]Cluster{}
	var order []string
	inA := map[string]bool{}
	for _, ra := range a {
		inA[ra.Task] = true
		rb, ok := byTask[ra.Task]
		if !ok {
			c.OnlyA++
			continue
		}
		c.Paired++
		switch {
		case ra.Success && rb.Success:
			c.Both++
		case ra.Success:
			c.AOnly++
		case rb.Success:
			c.BOnly++
		default:
			c.Neither++
		}
		d := 0.0
		if ra.Success {
			c.SuccessA++
			d++
		}
		if rb.Success {
			c.SuccessB++
			d--
		}
		key := ra.Cluster
		if key == "" {
			key = ra.Task
		}
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], d)
	}
	for _, rb := range b {
		if !inA[rb.Task] {
			c.OnlyB++
		}
	}
	c.Clusters = len(groups)
	if c.Paired > 0 {
		c.RateA = float64(c.SuccessA) / float64(c.Paired)
		c.RateB = float64(c.SuccessB) / float64(c.Paired)
		c.Diff = c.RateA - c.RateB
	}
	c.PValue = McNemar(c.AOnly, c.BOnly)
	cs := make([]Cluster, len(order))
	for i, k := range order {
		cs[i] = groups[k]
	}
	c.CI95[0], c.CI95[1] = Bootstrap(cs, resamples, 0.95, seed)
	return c
}
