package models

import (
	"math"
)

// passCost prices a forward pass in seconds:
//
//	fixed + perToken*tokens + perCell*(tokens*cells + frag) + perRange*cells
//
// fixed is what every pass pays whatever its size (graph building, thread
// wake-up, on a GPU reading the weights once); perToken the weight
// matrices' work per position; perCell the attention work (and the
// engine's mask building) per position per cell of the pass's cell range
// (see cellMap); perRange reading the range's keys and values once per
// pass, whatever the number of positions. frag is the attention work a
// pass adds to later passes when it scatters a sequence's cells (see
// Engine.price).
type passCost struct {
	fixed, perToken, perCell, perRange float64
}

func (c passCost) of(tokens, cells int, frag float64) float64 {
	t, r := float64(tokens), float64(cells)
	return c.fixed + c.perToken*t + c.perCell*(t*r+frag) + c.perRange*r
}

func (c passCost) terms() [costTerms]float64 {
	return [costTerms]float64{c.fixed, c.perToken, c.perCell, c.perRange}
}

func (c passCost) scaled(m [costTerms]float64) passCost {
	return passCost{fixed: c.fixed * m[0], perToken: c.perToken * m[1], perCell: c.perCell * m[2], perRange: c.perRange * m[3]}
}

// costTerms is the number of terms of a passCost.
const costTerms = 4

// costFit estimates a passCost from the engine's own passes: a
// least-squares fit of the observed pass times (graph building included)
// on the prior's terms, in relative error (a 1 ms decode step counts as
// much as a 100 ms prompt chunk), with exponential forgetting (recent
// passes count most, so the fit follows a machine whose load changes) and
// a ridge pull towards the prior (so terms the recent passes do not tell
// apart stay sensible). The fit works with multipliers of the prior's
// terms, which keeps the small linear system well scaled whatever the
// magnitudes.
type costFit struct {
	prior passCost
	cur   passCost
	// frozen stops learning (tests pin a model).
	frozen bool
	ata    [costTerms][costTerms]float64 // forgetting-weighted sums over passes of z z^T
	aty    [costTerms]float64            // and of z*seconds
	ridge  [costTerms]float64            // pull of each multiplier towards 1
}

const (
	// costForget is the weight a pass keeps per later pass (half-life
	// about 70 passes).
	costForget = 0.99
	// costRidge is the prior's weight, in passes of the prior's own
	// typical size.
	costRidge = 2.0
	// costClip bounds how far one pass's time may pull the fit: observed
	// times are clipped to [pred/costClip, pred*costClip] (a pass that
	// was descheduled on a busy machine says little; a real change of
	// speed still moves the fit by up to this factor every few passes).
	costClip = 1.5
)

// newCostFit starts from a prior. Its ridge weights are the squared terms
// of a typical pass mix (one and 16 positions over cacheRef cells, one
// full batch over itself), so the prior counts as costRidge such passes.
func newCostFit(prior passCost, batch, cacheRef int) *costFit {
	f := &costFit{prior: prior, cur: prior}
	shapes := [][2]int{{1, cacheRef}, {min(16, batch), cacheRef}, {batch, batch}}
	for _, s := range shapes {
		z := f.terms(s[0], s[1])
		y := prior.of(s[0], s[1], 0)
		for i := range z {
			f.ridge[i] += costRidge * (z[i] / y) * (z[i] / y)
		}
	}
	return f
}

// terms are the prior's terms for a pass (the fit's features).
func (f *costFit) terms(tokens, cells int) [costTerms]float64 {
	t, r := float64(tokens), float64(cells)
	return [costTerms]float64{f.prior.fixed, f.prior.perToken * t, f.prior.perCell * t * r, f.prior.perRange * r}
}

// observe records a computed pass of tokens positions over cells cells
// that took seconds, and refits.
func (f *costFit) observe(tokens, cells int, seconds float64) {
	if f.frozen || tokens <= 0 || cells <= 0 || !(seconds > 0) || math.IsInf(seconds, 0) {
		return
	}
	pred := f.cur.of(tokens, cells, 0)
	seconds = min(max(seconds, pred/costClip), pred*costClip)
	z := f.terms(tokens, cells)
	w := 1 / (pred * pred) // relative error
	for i := range costTerms {
		f.aty[i] = costForget*f.aty[i] + w*z[i]*seconds
		for k := range costTerms {
			f.ata[i][k] = costForget*f.ata[i][k] + w*z[i]*z[k]
		}
	}
	if m, ok := f.solve(); ok {
		f.cur = f.prior.scaled(m)
	}
}

// solve returns the multipliers minimizing
// sum_passes w (seconds - m.z)^2 + sum_i ridge_i (m_i - 1)^2, kept within
// [1e-3, 1e3] of the prior.
func (f *costFit) solve() ([costTerms]float64, bool) {
	const n = costTerms
	var a [n][n + 1]float64
	for i := range n {
		for k := range n {
			a[i][k] = f.ata[i][k]
		}
		a[i][i] += f.ridge[i]
		a[i][n] = f.aty[i] + f.ridge[i]
	}
	// Gauss-Jordan elimination with partial pivoting.
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		a[c], a[p] = a[p], a[c]
		if a[c][c] == 0 {
			return [n]float64{}, false
		}
		for r := range n {
			if r == c {
				continue
			}
			q := a[r][c] / a[c][c]
			for k := c; k <= n; k++ {
				a[r][k] -= q * a[c][k]
			}
		}
	}
	var m [n]float64
	for i := range n {
		m[i] = a[i][n] / a[i][i]
		if math.IsNaN(m[i]) {
			return m, false
		}
		m[i] = min(max(m[i], 1e-3), 1e3)
	}
	return m, true
}

// defaultPassSeconds is the per-pass cost assumed before the warm-up pass
// has been timed (or when Load skips it).
const defaultPassSeconds = 1e-3

// costPrior is the starting model before any pass is observed: fixed is
// the warm-up pass's time (a few tokens, so mostly per-pass overhead);
// one position's weight work costs fixed/16; one position attending over
// attnCells cells costs as much as the per-pass overhead, and reading a
// cell range once as much as four positions attending over it, where
// attnCells is the ratio of a position's weight FLOPs (2 per parameter) to
// its attention FLOPs per cell (4 per head dimension per head per layer),
// and at least 4096 (on CPUs the per-pass overhead is mostly fixed
// software cost, not FLOPs). The fit replaces these guesses within tens of
// passes.
func costPrior(warmup float64, params int64, layers, heads, headDim int) passCost {
	fixed := min(max(warmup, 1e-5), 10)
	attnCells := 4096.0
	if per := float64(4 * layers * heads * headDim); per > 0 {
		attnCells = max(attnCells, 2*float64(params)/per)
	}
	perCell := fixed / attnCells
	return passCost{fixed: fixed, perToken: fixed / 16, perCell: perCell, perRange: 4 * perCell}
}
