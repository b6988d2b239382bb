package bench

import "testing"

// BenchmarkBootstrap is the interval every summary computes: 134 tasks in
// 45 clusters (ALFWorld's shape), 10,000 two-stage resamples.
func BenchmarkBootstrap(b *testing.B) {
	var cs []Cluster
	for i := 0; i < 45; i++ {
		c := Cluster{}
		for j := 0; j < 3 && len(cs)*3+j < 134; j++ {
			c = append(c, float64((i+j)%2))
		}
		cs = append(cs, c)
	}
	for i := 0; i < b.N; i++ {
		Bootstrap(cs, DefaultResamples, 0.95, uint64(i))
	}
}
