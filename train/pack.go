package train

// An item is one training sequence: one example, or several examples of a
// scene packed on one copy of the prompt tokens they share (Options.Pack).
type item struct {
	id     string
	tokens []int32
	// pos are the tokens' rotary positions and branch their branches (0:
	// the shared prefix; k: the k-th example's own tokens, which see the
	// prefix and the branch's earlier tokens only); nil for one example,
	// whose positions are 0, 1, ... in one causal sequence.
	pos, branch []int32
	rows        []lossRow
}

// A lossRow is one token the loss covers: the position whose logits
// predict it, the token, and the tokens the constraint allows there (nil:
// the whole vocabulary).
type lossRow struct {
	at      int
	target  int32
	allowed []int32
}

// exampleRows returns x's loss rows, at the positions of x's own tokens
// mapped through at.
func exampleRows(x Example, at func(int) int) []lossRow {
	rows := make([]lossRow, 0, len(x.Tokens)-x.PlanStart)
	// Position i predicts token i+1: rows for the plan's tokens.
	for i := x.PlanStart - 1; i+1 < len(x.Tokens); i++ {
		r := lossRow{at: at(i), target: x.Tokens[i+1]}
		if n := i + 1 - x.PlanStart; n < len(x.Allowed) {
			r.allowed = x.Allowed[n]
		}
		rows = append(rows, r)
	}
	return rows
}

// itemOf is the item of x alone.
func itemOf(x Example) item {
	return item{id: x.ID, tokens: x.Tokens, rows: exampleRows(x, func(i int) int { return i })}
}

// promptEnd is where x's prompt ends: the tokens before it are the most a
// packed example may share (a DAgger prefix and the plan are its own).
func promptEnd(x Example) int {
	if x.PromptEnd > 0 {
		return x.PromptEnd
	}
	return x.PlanStart
}

// commonPrefix is the number of leading tokens a and b share.
func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// pack groups xs into items of at most most examples and seq positions:
// examples of one scene (in the order of the scene's first example, each
// scene's in their order) are packed greedily while they share a prefix of
// their prompts' tokens and fit. most <= 1 gives one item per example. The
// result depends only on xs, seq and most.
func pack(xs []Example, seq, most int) []item {
	if most <= 1 {
		out := make([]item, len(xs))
		for i, x := range xs {
			out[i] = itemOf(x)
		}
		return out
	}
	var scenes []string
	byScene := map[string][]Example{}
	for _, x := range xs {
		if _, ok := byScene[x.Scene]; !ok {
			scenes = append(scenes, x.Scene)
		}
		byScene[x.Scene] = append(byScene[x.Scene], x)
	}
	var out []item
	for _, sc := range scenes {
		var bin []Example
		shared := 0
		flush := func() {
			if len(bin) > 0 {
				out = append(out, packed(bin, shared))
			}
			bin = bin[:0]
		}
		for _, x := range byScene[sc] {
			if len(bin) > 0 && len(bin) < most {
				p := min(shared, commonPrefix(bin[0].Tokens, x.Tokens), promptEnd(x))
				n := p
				for _, y := range append(bin, x) {
					n += len(y.Tokens) - p
				}
				if p > 0 && n <= seq {
					bin, shared = append(bin, x), p
					continue
				}
			}
			flush()
			bin, shared = append(bin, x), promptEnd(x)
		}
		flush()
	}
	return out
}

// packed is the item of bin (examples sharing their first shared tokens):
// the shared tokens once, then each example's own tokens as a branch at
// the rotary positions it has alone.
func packed(bin []Example, shared int) item {
	if len(bin) == 1 {
		return itemOf(bin[0])
	}
	it := item{id: bin[0].ID, tokens: append([]int32(nil), bin[0].Tokens[:shared]...)}
	for i := range shared {
		it.pos = append(it.pos, int32(i))
		it.branch = append(it.branch, 0)
	}
	for k, x := range bin {
		base := len(it.tokens)
		for i, t := range x.Tokens[shared:] {
			it.tokens = append(it.tokens, t)
			it.pos = append(it.pos, int32(shared+i))
			it.branch = append(it.branch, int32(k+1))
		}
		it.rows = append(it.rows, exampleRows(x, func(i int) int {
			if i < shared {
				return i
			}
			return base + i - shared
		})...)
	}
	return it
}
