package train

import (
	"fmt"
	"hash"
	"hash/fnv"
	"runtime"
	"sync"

	"github.com/chewxy/hm"
	"github.com/chewxy/math32"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The training graph's softmaxes (attention over seq x seq scores, the
// log-softmax over the vocabulary) as one gorgonia op over the rows of a
// float32 matrix. The arithmetic is gorgonia's (v0.9.18 with tensor
// v0.9.23: SoftMax, LogSoftMax and their gradients over the last axis)
// operation for operation, so a model trains to the same bits; what differs
// is the work around it:
//
//   - gorgonia starts one goroutine per row (768 x 16 per attention layer
//     stack of the shipped shape); here rows are split into one chunk per
//     core;
//   - an entry pushed below maskedBelow by the graph's -1e9 masks (the
//     causal mask, the constraint's disallowed tokens) has the exponential
//     +0 without calling math32.Exp, which returns exactly +0 there
//     (TestSoftmaxRowsBitIdentical checks every such entry against it): a
//     causal mask covers about half the attention scores.
//
// One quirk is kept on purpose: tensor's last-axis softmax starts every
// row's maximum at the matrix's first element, x[0], and compares the row's
// entries from the second on. Softmax does not depend on the shift in exact
// arithmetic, but float32 does, so matching bits needs the same shift.

// maskedBelow: a shifted score below it has exponential +0 in float32
// (e^-104 is below the smallest subnormal); the graph's masked entries sit
// near -1e9.
const maskedBelow = -1e6

// expMasked is math32.Exp but for masked entries (see maskedBelow).
func expMasked(z float32) float32 {
	if z < maskedBelow {
		return 0
	}
	return math32.Exp(z)
}

// softmaxRows applies softmax (or log-softmax) to each row of x + mask,
// float32 matrices of one shape: gorgonia's SoftMax(Add(x, mask)) (or
// LogSoftMax) without the sum's own tensor, and with the same bits. The
// mask gets no gradient.
func softmaxRows(x, mask *G.Node, isLog bool) (*G.Node, error) {
	return G.ApplyOp(&rowSoftmaxOp{rowOp{name: "RowSoftmax", isLog: isLog, rows: softmaxChunk(isLog)}}, x, mask)
}

type rowSoftmaxOp struct{ rowOp }

// reused is an op's output tensor, kept for its next run: a training graph
// runs one example at a time (runnerPool lends it to one worker), and the
// tape machine binds a fresh value to the node on every run anyway, so
// writing the same backing again saves allocating (and collecting) a
// seq x seq matrix per head per pass.
type reused struct{ t *tensor.Dense }

// get returns the kept tensor if it has shape s, else a new one it keeps.
func (r *reused) get(s tensor.Shape) *tensor.Dense {
	if r.t == nil || !r.t.Shape().Eq(s) {
		r.t = tensor.New(tensor.WithShape(s.Clone()...), tensor.Of(tensor.Float32))
	}
	return r.t
}

// rowOp is what both row ops share: two float32 matrices of one shape in,
// one of that shape out (a new tensor per op, kept between runs), and a
// name that says which op and whether it is the log form.
type rowOp struct {
	name  string
	isLog bool
	out   reused
	// rows computes rows lo..hi-1 of the output (cols columns) from the
	// two inputs'.
	rows func(a, b, out []float32, lo, hi, cols int)
}

func (op *rowOp) Do(in ...G.Value) (G.Value, error) {
	a, err := matrixOf(in, 0)
	if err != nil {
		return nil, err
	}
	return op.UsePreallocDo(op.out.get(a.Shape()), in...)
}

func (op *rowOp) UsePreallocDo(prealloc G.Value, in ...G.Value) (G.Value, error) {
	a, b, out, err := op.operands(prealloc, in)
	if err != nil {
		return nil, err
	}
	as, bs, os := a.Data().([]float32), b.Data().([]float32), out.Data().([]float32)
	rows, cols := a.Shape()[0], a.Shape()[1]
	eachRow(rows, cols, func(lo, hi int) { op.rows(as, bs, os, lo, hi, cols) })
	return out, nil
}

func (op *rowOp) Arity() int { return 2 }
func (op *rowOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a, a)
}
func (op *rowOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, ok := in[0].(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("%s: input shape %v", op.name, in[0])
	}
	return s.Clone(), nil
}
func (op *rowOp) ReturnsPtr() bool      { return false }
func (op *rowOp) CallsExtern() bool     { return false }
func (op *rowOp) OverwritesInput() int  { return -1 }
func (op *rowOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%s{%v}()", op.name, op.isLog) }
func (op *rowOp) Hashcode() uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}
func (op *rowOp) String() string { return fmt.Sprintf("%s{%v}()", op.name, op.isLog) }

// operands checks the op's two inputs and its output: float32 matrices of
// one shape.
func (op *rowOp) operands(prealloc G.Value, in []G.Value) (a, b, out *tensor.Dense, err error) {
	if a, err = matrixOf(in, 0); err != nil {
		return nil, nil, nil, err
	}
	if b, err = matrixOf(in, 1); err != nil {
		return nil, nil, nil, err
	}
	out, ok := prealloc.(*tensor.Dense)
	if !ok {
		return nil, nil, nil, fmt.Errorf("%s: output %T", op.name, prealloc)
	}
	if !b.Shape().Eq(a.Shape()) || !out.Shape().Eq(a.Shape()) {
		return nil, nil, nil, fmt.Errorf("%s: shapes %v, %v, %v", op.name, a.Shape(), b.Shape(), out.Shape())
	}
	return a, b, out, nil
}

// softmaxChunk computes rows lo..hi-1 of softmax(x + mask) (log-softmax
// when isLog).
func softmaxChunk(isLog bool) func(xs, ms, ys []float32, lo, hi, cols int) {
	return func(xs, ms, ys []float32, lo, hi, cols int) {
		first := xs[0] + ms[0] // where tensor starts every row's maximum
		for r := lo; r < hi; r++ {
			row, mk, y := rowOf(xs, ms, ys, r, cols)
			softmaxRow(isLog, row, mk, y, first)
		}
	}
}

// softmaxRow computes one row: row, mk and y of one length; the maximum
// starts at first, the matrices' x[0] + mask[0].
func softmaxRow(isLog bool, row, mk, y []float32, first float32) {
	m := first
	for j := 1; j < len(row); j++ {
		if v := row[j] + mk[j]; v > m {
			m = v
		}
	}
	sum := float32(0.0)
	if isLog {
		for j, v := range row {
			z := (v + mk[j]) - m
			y[j] = z
			sum += expMasked(z)
		}
		for j := range y {
			y[j] -= math32.Log(sum)
		}
		return
	}
	for j, v := range row {
		e := expMasked((v + mk[j]) - m)
		y[j] = e
		sum += e
	}
	sum = 1 / sum
	for j := range y {
		y[j] *= sum
	}
}

// DiffWRT says the op is differentiable in x, not in the mask.
func (op *rowSoftmaxOp) DiffWRT(inputs int) []bool { return []bool{true, false} }

// SymDiff gives the input's gradient from the output and its gradient.
func (op *rowSoftmaxOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if len(inputs) != 2 {
		return nil, fmt.Errorf("row softmax: %d inputs", len(inputs))
	}
	d, err := G.ApplyOp(&rowSoftmaxDiffOp{rowOp{name: "RowSoftmaxDiff", isLog: op.isLog, rows: softmaxGradRows(op.isLog)}}, output, grad)
	return G.Nodes{d, nil}, err
}

// rowSoftmaxDiffOp maps (y, dy) to dx for rowSoftmaxOp.
type rowSoftmaxDiffOp struct{ rowOp }

// softmaxGradRows computes rows lo..hi-1 of the input's gradient from the
// output y and its gradient, as tensor's SoftMaxB (LogSoftMaxB when isLog).
func softmaxGradRows(isLog bool) func(ys, gs, ds []float32, lo, hi, cols int) {
	return func(ys, gs, ds []float32, lo, hi, cols int) {
		for r := lo; r < hi; r++ {
			y, g, d := rowOf(ys, gs, ds, r, cols)
			softmaxGradRow(isLog, y, g, d)
		}
	}
}

// softmaxGradRow computes one row: y, g and d of one length.
func softmaxGradRow(isLog bool, y, g, d []float32) {
	if isLog {
		sum := g[0]
		for j := 1; j < len(g); j++ {
			sum += g[j]
		}
		for j, v := range y {
			d[j] = g[j] - (expMasked(v) * sum)
		}
		return
	}
	var sum float32
	for j, v := range y {
		sum += v * g[j]
	}
	for j, v := range y {
		d[j] = (g[j] - sum) * v
	}
}

// rowOf returns row r (of cols columns) of three matrices, sliced to one
// length so that the loops over them need no bounds checks.
func rowOf(a, b, c []float32, r, cols int) ([]float32, []float32, []float32) {
	i, j := r*cols, (r+1)*cols
	ar := a[i:j:j]
	return ar, b[i:j:j][:len(ar)], c[i:j:j][:len(ar)]
}

// matrixOf returns input i as a float32 matrix.
func matrixOf(in []G.Value, i int) (*tensor.Dense, error) {
	if i >= len(in) {
		return nil, fmt.Errorf("row softmax: %d inputs, want %d", len(in), i+1)
	}
	t, ok := in[i].(*tensor.Dense)
	if !ok || t.Dtype() != tensor.Float32 || t.Dims() != 2 {
		return nil, fmt.Errorf("row softmax: input %d is %T, want a float32 matrix", i, in[i])
	}
	return t, nil
}

// eachRow runs f over rows 0..rows-1 in chunks [lo, hi), one chunk per core
// when the matrix is large enough to pay for it. Rows are independent, so
// the result does not depend on the split.
func eachRow(rows, cols int, f func(lo, hi int)) {
	n := min(runtime.GOMAXPROCS(0), rows*cols/(1<<15))
	if n <= 1 {
		f(0, rows)
		return
	}
	var wg sync.WaitGroup
	for c := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(c*rows/n, (c+1)*rows/n)
		}()
	}
	wg.Wait()
}
