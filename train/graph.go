package train

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// graph is the model's computation for one sequence of seq positions
// (starting at position 0), with logits for rows selected positions.
//
// Inputs: x (seq x dim) the token embeddings, gathered outside the graph
// (its gradient is scattered back into the embedding); the layout (mask,
// seq x seq: 0 where a position may attend to another, -1e9 where not;
// and the rotary tables of each position's rotary position, see
// graph.setLayout), so that one sequence can hold several that share a
// prefix (a packed item); sel (rows x seq)
// one-hot rows picking the positions whose logits are computed. With
// targets (rows x vocab) it also computes the loss: the sum over rows of
// -log p(target) weighted by the target rows (one-hot times the row's
// weight; zero rows are padding), over the softmax of the logits plus
// allow (rows x vocab: 0 for a token the constraint allows at the row,
// -1e9 for one it does not; all 0 trains the unconstrained distribution).
type graph struct {
	g       *G.ExprGraph
	x, sel  *G.Node
	target  *G.Node // nil without a loss
	allow   *G.Node // nil without a loss
	logits  *G.Node // rows x vocab
	loss    *G.Node // nil without a loss
	params  []*G.Node
	byParam map[*Param]*G.Node
	seq     int
	rows    int
	// The layout's inputs and their backing (setLayout fills them).
	mask, cosK, sinK, cosQ, sinQ *G.Node
	maskData                     []float32
	cosKData, sinKData           []float32
	cosQData, sinQData           []float32
	// ropeCos and ropeSin are the rotary tables of positions 0..seq-1
	// (seq x headDim), the rows setLayout copies for the keys; ropeCosQ and
	// ropeSinQ the queries', with 1/sqrt(headDim) folded in.
	ropeCos, ropeSin   []float32
	ropeCosQ, ropeSinQ []float32
	// plain says the layout inputs hold one plain causal sequence, so
	// that setLayout(nil, nil) has nothing to do (unpacked examples, the
	// common case, skip refilling the seq x seq mask on every run).
	plain bool
}

// newGraph builds the graph of p for seq positions and rows logit rows;
// withLoss adds the target input and the loss.
func newGraph(p *Params, seq, rows int, withLoss bool) (*graph, error) {
	c := p.Config
	if seq <= 0 || rows <= 0 {
		return nil, fmt.Errorf("train: a graph of %d positions and %d rows", seq, rows)
	}
	g := G.NewGraph()
	gr := &graph{g: g, seq: seq, rows: rows, byParam: map[*Param]*G.Node{}}
	dt := tensor.Float32
	constant := func(name string, rows, cols int, data []float32) *G.Node {
		return G.NewMatrix(g, dt, G.WithShape(rows, cols), G.WithName(name),
			G.WithValue(tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(data))))
	}
	param := func(name string) *G.Node {
		q := p.Get(name)
		n := G.NewMatrix(g, dt, G.WithShape(q.Shape[0], q.Shape[1]), G.WithName(name),
			G.WithValue(tensor.New(tensor.WithShape(q.Shape[0], q.Shape[1]), tensor.WithBacking(append([]float32(nil), q.Data...)))))
		gr.params = append(gr.params, n)
		gr.byParam[q] = n
		return n
	}
	fill := func(n int, v float32) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	hd := c.headDim()
	var err error
	must := func(n *G.Node, e error) *G.Node {
		if e != nil && err == nil {
			err = e
		}
		return n
	}

	// Constants: row means and broadcasts by matrix products, the rotary
	// tables; the layout's inputs (causal until setLayout says otherwise).
	meanD := constant("meanD", c.Dim, 1, fill(c.Dim, 1/float32(c.Dim)))
	onesD := constant("onesD", 1, c.Dim, fill(c.Dim, 1))
	onesT := constant("onesT", seq, 1, fill(seq, 1))
	epsN := G.NewScalar(g, dt, G.WithName("eps"), G.WithValue(float32(eps)))
	scale := 1 / math.Sqrt(float64(hd))
	gr.ropeCos, gr.ropeSin = make([]float32, seq*hd), make([]float32, seq*hd)
	gr.ropeCosQ, gr.ropeSinQ = make([]float32, seq*hd), make([]float32, seq*hd)
	for t := range seq {
		for i := 0; i < hd; i += 2 {
			theta := float64(t) * math.Pow(float64(c.ropeBase()), -float64(i)/float64(hd))
			cs, sn := math.Cos(theta), math.Sin(theta)
			for _, k := range []int{i, i + 1} {
				gr.ropeCos[t*hd+k], gr.ropeSin[t*hd+k] = float32(cs), float32(sn)
				gr.ropeCosQ[t*hd+k], gr.ropeSinQ[t*hd+k] = float32(cs*scale), float32(sn*scale)
			}
		}
	}
	input := func(name string, rows, cols int) (*G.Node, []float32) {
		data := make([]float32, rows*cols)
		n := G.NewMatrix(g, dt, G.WithShape(rows, cols), G.WithName(name),
			G.WithValue(tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(data))))
		return n, data
	}
	gr.mask, gr.maskData = input("mask", seq, seq)
	gr.cosK, gr.cosKData = input("cosK", seq, hd)
	gr.sinK, gr.sinKData = input("sinK", seq, hd)
	gr.cosQ, gr.cosQData = input("cosQ", seq, hd)
	gr.sinQ, gr.sinQData = input("sinQ", seq, hd)
	gr.setLayout(nil, nil)
	maskN, cosKN, sinKN, cosQN, sinQN := gr.mask, gr.cosK, gr.sinK, gr.cosQ, gr.sinQ
	rot := make([]float32, hd*hd) // (x R)[2i] = -x[2i+1], (x R)[2i+1] = x[2i]
	for i := 0; i < hd; i += 2 {
		rot[(i+1)*hd+i] = -1
		rot[i*hd+i+1] = 1
	}
	rotN := constant("rot", hd, hd, rot)
	rope := func(x, cs, sn *G.Node) *G.Node {
		return must(G.Add(must(G.HadamardProd(x, cs)), must(G.HadamardProd(must(G.Mul(x, rotN)), sn))))
	}
	rmsNorm := func(x *G.Node, w *G.Node, n int) *G.Node {
		ms := must(G.Mul(must(G.Square(x)), meanD)) // n x 1
		// 1/sqrt as Inverse(Sqrt): gorgonia v0.9.18's InverseSqrt has a
		// wrong derivative (-g/(2y^3) for -g*y^3/2), TestGradients.
		r := must(G.Inverse(must(G.Sqrt(must(G.Add(ms, epsN)))))) // n x 1
		y := must(G.HadamardProd(x, must(G.Mul(r, onesD))))       // n x dim
		ones := onesT
		if n != seq {
			ones = constant("ones_rows", n, 1, fill(n, 1))
		}
		return must(G.HadamardProd(y, must(G.Mul(ones, w))))
	}

	gr.x = G.NewMatrix(g, dt, G.WithShape(seq, c.Dim), G.WithName("x"))
	h := gr.x
	for l := range c.Layers {
		a := rmsNorm(h, param(layerName(l, "attn_norm")), seq)
		var att *G.Node
		for hh := range c.Heads {
			q := rope(must(G.Mul(a, param(headName(l, "q", hh)))), cosQN, sinQN)
			k := rope(must(G.Mul(a, param(headName(l, "k", hh)))), cosKN, sinKN)
			v := must(G.Mul(a, param(headName(l, "v", hh))))
			s := must(G.Mul(q, must(G.Transpose(k))))
			o := must(G.Mul(must(softmaxRows(s, maskN, false)), v))
			o = must(G.Mul(o, param(headName(l, "o", hh))))
			if att == nil {
				att = o
			} else {
				att = must(G.Add(att, o))
			}
		}
		h = must(G.Add(h, att))
		f := rmsNorm(h, param(layerName(l, "ffn_norm")), seq)
		gate := must(G.Mul(f, param(layerName(l, "gate"))))
		up := must(G.Mul(f, param(layerName(l, "up"))))
		act := must(G.HadamardProd(must(G.HadamardProd(gate, must(G.Sigmoid(gate)))), up))
		h = must(G.Add(h, must(G.Mul(act, param(layerName(l, "down"))))))
	}
	gr.sel = G.NewMatrix(g, dt, G.WithShape(rows, seq), G.WithName("sel"))
	hs := must(G.Mul(gr.sel, h))
	hs = rmsNorm(hs, param(outNormName()), rows)
	if c.Tied {
		gr.logits = must(G.Mul(hs, must(G.Transpose(param(embedName())))))
	} else {
		gr.logits = must(G.Mul(hs, param(outName())))
	}
	if withLoss {
		gr.target = G.NewMatrix(g, dt, G.WithShape(rows, c.Vocab), G.WithName("target"))
		gr.allow = G.NewMatrix(g, dt, G.WithShape(rows, c.Vocab), G.WithName("allow"))
		lsm := must(softmaxRows(gr.logits, gr.allow, true))
		gr.loss = must(G.Neg(must(G.Sum(must(G.HadamardProd(lsm, gr.target))))))
	}
	if err != nil {
		return nil, fmt.Errorf("train: building the graph: %w", err)
	}
	return gr, nil
}

// forwardLogits returns the logits of p at every position of tokens (one
// row of Vocab per token): the reference the engine's logits are checked
// against.
func forwardLogits(p *Params, tokens []int32) ([][]float32, error) {
	c := p.Config
	n := len(tokens)
	gr, err := newGraph(p, n, n, false)
	if err != nil {
		return nil, err
	}
	if err := G.Let(gr.x, tensor.New(tensor.WithShape(n, c.Dim), tensor.WithBacking(gather(p, tokens, n)))); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	sel := make([]float32, n*n)
	for i := range n {
		sel[i*n+i] = 1
	}
	if err := G.Let(gr.sel, tensor.New(tensor.WithShape(n, n), tensor.WithBacking(sel))); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	vm := G.NewTapeMachine(gr.g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return nil, fmt.Errorf("train: forward pass: %w", err)
	}
	data := gr.logits.Value().Data().([]float32)
	out := make([][]float32, n)
	for i := range out {
		out[i] = append([]float32(nil), data[i*c.Vocab:(i+1)*c.Vocab]...)
	}
	return out, nil
}

// gather returns the embeddings of tokens as a seq x dim matrix (zero rows
// past the tokens).
func gather(p *Params, tokens []int32, seq int) []float32 {
	d := p.Config.Dim
	e := p.Get(embedName()).Data
	x := make([]float32, seq*d)
	for i, t := range tokens {
		if i == seq {
			break
		}
		copy(x[i*d:(i+1)*d], e[int(t)*d:(int(t)+1)*d])
	}
	return x
}

// setLayout fills the graph's mask and rotary inputs for one sequence: pos
// are its positions' rotary positions and branch their branches (0: the
// shared prefix, seen by every later position; k > 0: seen only by later
// positions of branch k), as an item packs several examples on one copy of
// their shared prompt. Positions past len(pos) (padding) are causal, of
// branch 0 and at their own index: no position of the sequence sees them.
// nil, nil is one plain causal sequence.
func (gr *graph) setLayout(pos, branch []int32) {
	if pos == nil && branch == nil && gr.plain {
		return
	}
	gr.plain = pos == nil && branch == nil
	seq, hd := gr.seq, len(gr.ropeCos)/gr.seq
	br := func(i int) int32 {
		if i < len(branch) {
			return branch[i]
		}
		return 0
	}
	for i := range seq {
		row := gr.maskData[i*seq : (i+1)*seq]
		bi := br(i)
		for j := range row {
			if j <= i && (br(j) == 0 || br(j) == bi) {
				row[j] = 0
			} else {
				row[j] = -1e9
			}
		}
		p := i
		if i < len(pos) {
			p = int(pos[i])
		}
		copy(gr.cosKData[i*hd:(i+1)*hd], gr.ropeCos[p*hd:(p+1)*hd])
		copy(gr.sinKData[i*hd:(i+1)*hd], gr.ropeSin[p*hd:(p+1)*hd])
		copy(gr.cosQData[i*hd:(i+1)*hd], gr.ropeCosQ[p*hd:(p+1)*hd])
		copy(gr.sinQData[i*hd:(i+1)*hd], gr.ropeSinQ[p*hd:(p+1)*hd])
	}
}
