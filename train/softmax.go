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
	return G.ApplyOp(&rowSoftmaxOp{isLog: isLog}, x, mask)
}

type rowSoftmaxOp struct {
	isLog bool
	out   reused
}

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

func (op *rowSoftmaxOp) Arity() int { return 2 }
func (op *rowSoftmaxOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a, a)
}
func (op *rowSoftmaxOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, ok := in[0].(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("row softmax: input shape %v", in[0])
	}
	return s.Clone(), nil
}
func (op *rowSoftmaxOp) ReturnsPtr() bool     { return false }
func (op *rowSoftmaxOp) CallsExtern() bool    { return false }
func (op *rowSoftmaxOp) OverwritesInput() int { return -1 }
func (op *rowSoftmaxOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "RowSoftmax{%v}()", op.isLog)
}
func (op *rowSoftmaxOp) Hashcode() uint32 { return opHash(op) }
func (op *rowSoftmaxOp) String() string   { return fmt.Sprintf("RowSoftmax{%v}()", op.isLog) }

func (op *rowSoftmaxOp) Do(in ...G.Value) (G.Value, error) {
	x, err := matrixOf(in, 0)
	if err != nil {
		return nil, err
	}
	return op.UsePreallocDo(op.out.get(x.Shape()), in...)
}

func (op *rowSoftmaxOp) UsePreallocDo(prealloc G.Value, in ...G.Value) (G.Value, error) {
	x, err := matrixOf(in, 0)
	if err != nil {
		return nil, err
	}
	mask, err := matrixOf(in, 1)
	if err != nil {
		return nil, err
	}
	out, ok := prealloc.(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("row softmax: output %T", prealloc)
	}
	if !mask.Shape().Eq(x.Shape()) || !out.Shape().Eq(x.Shape()) {
		return nil, fmt.Errorf("row softmax: shapes %v, %v, %v", x.Shape(), mask.Shape(), out.Shape())
	}
	xs, ms, ys := x.Data().([]float32), mask.Data().([]float32), out.Data().([]float32)
	rows, cols := x.Shape()[0], x.Shape()[1]
	first := xs[0] + ms[0]
	eachRow(rows, cols, func(r int) {
		lo, hi := r*cols, (r+1)*cols
		row, mk, y := xs[lo:hi:hi], ms[lo:hi:hi], ys[lo:hi:hi]
		mk, y = mk[:len(row)], y[:len(row)]
		m := first
		for j := 1; j < len(row); j++ {
			if v := row[j] + mk[j]; v > m {
				m = v
			}
		}
		sum := float32(0.0)
		if op.isLog {
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
	})
	return out, nil
}

// DiffWRT says the op is differentiable in x, not in the mask.
func (op *rowSoftmaxOp) DiffWRT(inputs int) []bool { return []bool{true, false} }

// SymDiff gives the input's gradient from the output and its gradient.
func (op *rowSoftmaxOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if len(inputs) != 2 {
		return nil, fmt.Errorf("row softmax: %d inputs", len(inputs))
	}
	d, err := G.ApplyOp(&rowSoftmaxDiffOp{isLog: op.isLog}, output, grad)
	return G.Nodes{d, nil}, err
}

// rowSoftmaxDiffOp maps (y, dy) to dx for rowSoftmaxOp.
type rowSoftmaxDiffOp struct {
	isLog bool
	out   reused
}

func (op *rowSoftmaxDiffOp) Arity() int { return 2 }
func (op *rowSoftmaxDiffOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a, a)
}
func (op *rowSoftmaxDiffOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, ok := in[0].(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("row softmax gradient: input shape %v", in[0])
	}
	return s.Clone(), nil
}
func (op *rowSoftmaxDiffOp) ReturnsPtr() bool     { return false }
func (op *rowSoftmaxDiffOp) CallsExtern() bool    { return false }
func (op *rowSoftmaxDiffOp) OverwritesInput() int { return -1 }
func (op *rowSoftmaxDiffOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "RowSoftmaxDiff{%v}()", op.isLog)
}
func (op *rowSoftmaxDiffOp) Hashcode() uint32 { return opHash(op) }
func (op *rowSoftmaxDiffOp) String() string   { return fmt.Sprintf("RowSoftmaxDiff{%v}()", op.isLog) }

func (op *rowSoftmaxDiffOp) Do(in ...G.Value) (G.Value, error) {
	y, err := matrixOf(in, 0)
	if err != nil {
		return nil, err
	}
	return op.UsePreallocDo(op.out.get(y.Shape()), in...)
}

func (op *rowSoftmaxDiffOp) UsePreallocDo(prealloc G.Value, in ...G.Value) (G.Value, error) {
	y, err := matrixOf(in, 0)
	if err != nil {
		return nil, err
	}
	dy, err := matrixOf(in, 1)
	if err != nil {
		return nil, err
	}
	out, ok := prealloc.(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("row softmax gradient: output %T", prealloc)
	}
	if !dy.Shape().Eq(y.Shape()) || !out.Shape().Eq(y.Shape()) {
		return nil, fmt.Errorf("row softmax gradient: shapes %v, %v, %v", y.Shape(), dy.Shape(), out.Shape())
	}
	ys, gs, dx := y.Data().([]float32), dy.Data().([]float32), out.Data().([]float32)
	rows, cols := y.Shape()[0], y.Shape()[1]
	eachRow(rows, cols, func(r int) {
		lo, hi := r*cols, (r+1)*cols
		yr, g, d := ys[lo:hi:hi], gs[lo:hi:hi], dx[lo:hi:hi]
		g, d = g[:len(yr)], d[:len(yr)]
		if op.isLog {
			sum := g[0]
			for j := 1; j < len(g); j++ {
				sum += g[j]
			}
			for j, v := range yr {
				d[j] = g[j] - (expMasked(v) * sum)
			}
			return
		}
		var sum float32
		for j, v := range yr {
			sum += v * g[j]
		}
		for j, v := range yr {
			d[j] = (g[j] - sum) * v
		}
	})
	return out, nil
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

// eachRow runs f over rows 0..rows-1, split into one chunk per core when
// the matrix is large enough to pay for it. Rows are independent, so the
// result does not depend on the split.
func eachRow(rows, cols int, f func(r int)) {
	n := min(runtime.GOMAXPROCS(0), rows*cols/(1<<15))
	if n <= 1 {
		for r := range rows {
			f(r)
		}
		return
	}
	var wg sync.WaitGroup
	for c := range n {
		lo, hi := c*rows/n, (c+1)*rows/n
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := lo; r < hi; r++ {
				f(r)
			}
		}()
	}
	wg.Wait()
}

// opHash hashes an op's WriteHash text.
func opHash(op interface{ WriteHash(hash.Hash) }) uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}
