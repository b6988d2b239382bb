package decoder

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Sampling says how the next token is chosen among the allowed ones. The
// zero value is greedy decoding (argmax, ties to the first candidate).
type Sampling struct {
	// Temperature divides the logits before the softmax; 0 means greedy.
	Temperature float64
	// TopK keeps only the K most likely candidates; 0 keeps all.
	TopK int
	// TopP keeps the smallest set of most likely candidates whose
	// probability reaches TopP; 0 or 1 keeps all.
	TopP float64
	// Seed seeds the generator: the same seed, model and prompt give the
	// same tokens.
	Seed uint64
}

// Greedy reports whether s picks the argmax.
func (s Sampling) Greedy() bool { return s.Temperature <= 0 }

// Check reports a setting out of range (negative temperature or top-k,
// top-p outside [0, 1]).
func (s Sampling) Check() error {
	switch {
	case s.Temperature < 0 || math.IsNaN(s.Temperature) || math.IsInf(s.Temperature, 0):
		return fmt.Errorf("decoder: temperature %v is not a non-negative number", s.Temperature)
	case s.TopK < 0:
		return fmt.Errorf("decoder: top-k %d is negative", s.TopK)
	case s.TopP < 0 || s.TopP > 1 || math.IsNaN(s.TopP):
		return fmt.Errorf("decoder: top-p %v is outside [0, 1]", s.TopP)
	}
	return nil
}

// Sampler chooses tokens by their logits (greedy, or sampled with
// temperature, top-k and top-p); it keeps its buffers between steps. Every
// user of a model's logits (decoding, Phase I's dialogs) picks through it.
// It is not safe for concurrent use.
type Sampler struct {
	s    Sampling
	rng  *rand.Rand
	cand []cand
	all  []int32 // 0..V-1, for unconstrained steps
}

type cand struct {
	id int32
	l  float64 // scaled logit, then probability
}

// NewSampler returns a sampler seeded by s.Seed.
func NewSampler(s Sampling) *Sampler {
	return &Sampler{s: s, rng: rand.New(rand.NewPCG(s.Seed, 0x6e657379))}
}

// Pick chooses among ids (all tokens when ids is nil) by their logits and
// returns the position in ids (the token id when ids is nil). It returns -1
// only when there is no candidate.
func (sm *Sampler) Pick(logits []float32, ids []int32) int {
	n := len(ids)
	if ids == nil {
		n = len(logits)
	}
	if n == 0 {
		return -1
	}
	if sm.s.Greedy() {
		if ids == nil {
			return argmax(logits)
		}
		best, bv := 0, float32(math.Inf(-1))
		for i, id := range ids {
			if v := logits[id]; v > bv {
				best, bv = i, v
			}
		}
		return best
	}
	// Candidates as positions into ids (or token ids), scaled logits.
	if ids == nil {
		if len(sm.all) < n {
			sm.all = make([]int32, n)
			for i := range sm.all {
				sm.all[i] = int32(i)
			}
		}
		ids = sm.all[:n]
	}
	c := sm.cand[:0]
	inv := 1 / sm.s.Temperature
	for i, id := range ids {
		v := float64(logits[id])
		if math.IsNaN(v) || math.IsInf(v, -1) {
			continue
		}
		c = append(c, cand{int32(i), v * inv})
	}
	sm.cand = c
	if len(c) == 0 {
		return 0
	}
	if k := sm.s.TopK; k > 0 && k < len(c) {
		c = topK(c, k)
	}
	// Softmax (stable).
	mx := math.Inf(-1)
	for _, x := range c {
		mx = math.Max(mx, x.l)
	}
	sum := 0.0
	for i := range c {
		c[i].l = math.Exp(c[i].l - mx)
		sum += c[i].l
	}
	if p := sm.s.TopP; p > 0 && p < 1 {
		c = topP(c, p*sum)
		sum = 0
		for _, x := range c {
			sum += x.l
		}
	}
	u := sm.rng.Float64() * sum
	for _, x := range c {
		if u < x.l {
			return int(x.id)
		}
		u -= x.l
	}
	return int(c[len(c)-1].id)
}

// Skip consumes the draw Pick makes among one candidate (a forced token),
// so that the draws after it do not depend on whether it was picked.
func (sm *Sampler) Skip() {
	if !sm.s.Greedy() {
		sm.rng.Float64()
	}
}

// argmax returns the index of the largest logit (the first of equal ones;
// NaN never wins; 0 when every logit is NaN or -Inf).
func argmax(logits []float32) int {
	best, bv := 0, float32(math.Inf(-1))
	for i, v := range logits {
		if v > bv {
			best, bv = i, v
		}
	}
	return best
}

// topK moves the k candidates with the largest l to the front (in their
// original order) and returns them.
func topK(c []cand, k int) []cand {
	h := candHeap(make([]cand, 0, k))
	for _, x := range c {
		if len(h) < k {
			heap.Push(&h, x)
		} else if x.l > h[0].l {
			h[0] = x
			heap.Fix(&h, 0)
		}
	}
	out := c[:0]
	out = append(out, h...)
	slices.SortFunc(out, func(a, b cand) int { return int(a.id - b.id) })
	return out
}

// topP returns the most probable candidates (l holds unnormalized
// probabilities) whose mass first reaches mass, most probable first (ties by
// position).
func topP(c []cand, mass float64) []cand {
	byProb := func(a, b cand) int {
		switch {
		case a.l > b.l:
			return -1
		case a.l < b.l:
			return 1
		}
		return int(a.id - b.id)
	}
	// Sorting a large vocabulary is slow: try the top few hundred first.
	if len(c) > 1024 {
		head := topK(slices.Clone(c), 256)
		slices.SortFunc(head, byProb)
		acc := 0.0
		for i, x := range head {
			acc += x.l
			if acc >= mass {
				n := copy(c, head[:i+1])
				return c[:n]
			}
		}
	}
	slices.SortFunc(c, byProb)
	acc := 0.0
	for i, x := range c {
		acc += x.l
		if acc >= mass {
			return c[:i+1]
		}
	}
	return c
}

// candHeap is a min-heap by l.
type candHeap []cand

func (h candHeap) Len() int           { return len(h) }
func (h candHeap) Less(i, j int) bool { return h[i].l < h[j].l }
func (h candHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *candHeap) Push(x any)        { *h = append(*h, x.(cand)) }
func (h *candHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
