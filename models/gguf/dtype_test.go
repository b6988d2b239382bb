package gguf

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	fsggml "github.com/ollama/ollama/fs/ggml"
)

func TestBF16Conversion(t *testing.T) {
	cases := []struct {
		bits uint32 // the F32's bits
		want uint16
	}{
		{0x00000000, 0x0000}, {0x3f800000, 0x3f80}, {0xc0000000, 0xc000},
		{0x3f808000, 0x3f80}, // halfway, even below: down
		{0x3f818000, 0x3f82}, // halfway, odd below: up to even
		{0x3f808001, 0x3f81}, // above halfway: up
		{0x3f807fff, 0x3f80}, // below halfway: down
		{0x7f7fffff, 0x7f80}, // the largest F32 rounds to infinity
		{0xff800000, 0xff80}, // -Inf stays
		{0x00000001, 0x0000}, // the smallest subnormal rounds to zero
	}
	for _, c := range cases {
		if got := f32ToBF16(math.Float32frombits(c.bits)); got != c.want {
			t.Errorf("f32ToBF16(%#08x) = %#04x, want %#04x", c.bits, got, c.want)
		}
	}
	if got := f32ToBF16(float32(math.NaN())); got&0x7f80 != 0x7f80 || got&0x7f == 0 {
		t.Errorf("NaN -> %#04x, want a NaN", got)
	}
}

func TestQ8Block(t *testing.T) {
	blocks := [][]float32{make([]float32, qBlock), make([]float32, qBlock), make([]float32, qBlock)}
	for i := range qBlock {
		blocks[0][i] = float32(math.Sin(float64(i))) * 3
		blocks[1][i] = -float32(i) / 7 // the largest magnitude negative
	}
	// blocks[2] is all zeros: scale 0, values 0 (not NaN).
	for bi, vals := range blocks {
		buf := appendQ8Block(nil, vals)
		if len(buf) != 2+qBlock {
			t.Fatalf("block %d: %d bytes, want %d", bi, len(buf), 2+qBlock)
		}
		d := f16ToF32(binary.LittleEndian.Uint16(buf))
		var amax float32
		extreme := false
		for i, v := range vals {
			amax = max(amax, float32(math.Abs(float64(v))))
			q := int8(buf[2+i])
			if q == 127 || q == -127 {
				extreme = true
			}
			if q == -128 {
				t.Errorf("block %d value %d quantized to -128 (ggml's range is -127..127)", bi, i)
			}
			// Each value is within half a step of its stored value, plus
			// the F16 rounding of the scale over up to 127 steps.
			if got, err := float32(q)*d, float32(math.Abs(float64(float32(q)*d-v))); err > d/2+127*d/1024 {
				t.Errorf("block %d value %d: %g stored as %d x %g = %g", bi, i, v, q, d, got)
			}
		}
		if amax > 0 && !extreme {
			t.Errorf("block %d: no value takes the full range ±127 (scale %g for max |x| %g)", bi, d, amax)
		}
		if amax == 0 && d != 0 {
			t.Errorf("block %d: zero block with scale %g", bi, d)
		}
	}
}

func TestQ4Block(t *testing.T) {
	vals := make([]float32, qBlock)
	for i := range vals {
		vals[i] = float32(math.Cos(float64(i)*0.7)) * 2
	}
	vals[5] = -2.5 // the value of largest magnitude: scale 2.5 / 8, stored as nibble 0
	buf := appendQ4Block(nil, vals)
	if len(buf) != 2+qBlock/2 {
		t.Fatalf("%d bytes, want %d", len(buf), 2+qBlock/2)
	}
	d := f16ToF32(binary.LittleEndian.Uint16(buf))
	if want := float32(2.5 / 8); d != want {
		t.Errorf("scale %g, want %g (the largest-magnitude value / -8)", d, want)
	}
	got := decodeValues(t, Q4_0, buf, qBlock)
	if got[5] != -2.5 {
		t.Errorf("the largest-magnitude value decodes to %g, want it exactly (-2.5)", got[5])
	}
	for i, v := range vals {
		// Half a step, or one step for values the clamp at 15 cuts
		// (the side opposite the largest magnitude reaches only 7 steps).
		if err := math.Abs(float64(got[i] - v)); err > float64(d)*1.001 {
			t.Errorf("value %d: %g decodes to %g (step %g)", i, v, got[i], d)
		}
	}
}

// TestWriteWeightTypes: each weight type writes a file Ollama's reader
// decodes with the type in the header (general.file_type and every
// tensor's), norms, the convolution and the router left F32, Q8_0 rows
// that are not whole blocks stored as F16, and every tensor's bytes at its
// offset decoding to its F32 twin's values within the type's rounding.
func TestWriteWeightTypes(t *testing.T) {
	// 48 wide with heads of 12: rows of 48 and 96 values are not whole
	// Q8_0 blocks, the 64-wide feed-forward's are.
	llama := Spec{Arch: ArchLlama, Embd: 48, Layers: 2, FFN: 64, Heads: 4, KVHeads: 2, DType: F32}
	cases := []struct {
		spec     Spec
		fileType uint32
	}{
		{llama, 0},
	}
	for _, dt := range []DType{F16, BF16, Q8_0, Q4_0} {
		for _, s := range []Spec{llama, Default(ArchQwen35), Default(ArchQwen35MoE)} {
			s.DType = dt
			cases = append(cases, struct {
				spec     Spec
				fileType uint32
			}{s, map[DType]uint32{F16: 1, BF16: 32, Q8_0: 7, Q4_0: 2}[dt]})
		}
	}
	for _, c := range cases {
		t.Run(c.spec.Arch+"/"+string(c.spec.DType), func(t *testing.T) {
			ref := c.spec
			ref.DType = F32
			refData, refMeta := writeRead(t, ref)
			data, meta := writeRead(t, c.spec)
			if got := meta.KV().Uint("general.file_type"); got != c.fileType {
				t.Errorf("general.file_type %d, want %d", got, c.fileType)
			}
			refTensors := map[string]*fsggml.Tensor{}
			for _, rt := range refMeta.Tensors().Items() {
				refTensors[rt.Name] = rt
			}
			fallbacks := 0
			for _, ts := range meta.Tensors().Items() {
				want := c.spec.DType
				if len(ts.Shape) == 1 || strings.Contains(ts.Name, "conv1d") || strings.Contains(ts.Name, "gate_inp") {
					want = F32
				} else if (want == Q8_0 || want == Q4_0) && ts.Shape[0]%qBlock != 0 {
					want, fallbacks = F16, fallbacks+1
				}
				if ts.Kind != ggmlType(want) {
					t.Errorf("%s %v: type %d, want %s (%d)", ts.Name, ts.Shape, ts.Kind, want, ggmlType(want))
					continue
				}
				start := meta.Tensors().Offset + ts.Offset
				if end := start + ts.Size(); end > uint64(len(data)) {
					t.Fatalf("%s: bytes %d..%d past the file's %d", ts.Name, start, end, len(data))
				}
				rt := refTensors[ts.Name]
				refVals := decodeValues(t, F32, refData[refMeta.Tensors().Offset+rt.Offset:], int(rt.Elements()))
				vals := decodeValues(t, want, data[start:], int(ts.Elements()))
				for i, v := range vals {
					r := refVals[i]
					var tol float64
					switch want {
					case F16:
						tol = math.Abs(float64(r))/1024 + 6e-8
					case BF16:
						tol = math.Abs(float64(r)) / 128
					case Q8_0:
						blk := refVals[i/qBlock*qBlock : (i/qBlock+1)*qBlock]
						var amax float64
						for _, x := range blk {
							amax = math.Max(amax, math.Abs(float64(x)))
						}
						tol = amax/127/2 + amax/1024
					case Q4_0:
						blk := refVals[i/qBlock*qBlock : (i/qBlock+1)*qBlock]
						var amax float64
						for _, x := range blk {
							amax = math.Max(amax, math.Abs(float64(x)))
						}
						tol = amax/8 + amax/1024 // a step where the clamp cuts
					}
					if math.Abs(float64(v-r)) > tol {
						t.Fatalf("%s value %d: %g, its F32 twin %g (tolerance %g)", ts.Name, i, v, r, tol)
					}
				}
			}
			if (c.spec.DType == Q8_0 || c.spec.DType == Q4_0) && c.spec.Arch == ArchLlama && fallbacks == 0 {
				t.Errorf("no %s row fell back to F16: the case does not test the fallback", c.spec.DType)
			}
		})
	}
}

// decodeValues reads n values of type dt from the start of b.
func decodeValues(t *testing.T, dt DType, b []byte, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	switch dt {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case F16:
		for i := range out {
			out[i] = f16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case BF16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		}
	case Q8_0:
		for i := range out {
			blk := b[i/qBlock*(2+qBlock):]
			out[i] = f16ToF32(binary.LittleEndian.Uint16(blk)) * float32(int8(blk[2+i%qBlock]))
		}
	case Q4_0:
		for i := range out {
			blk := b[i/qBlock*(2+qBlock/2):]
			j := i % qBlock
			q := blk[2+j%(qBlock/2)]
			if j >= qBlock/2 {
				q >>= 4
			}
			out[i] = f16ToF32(binary.LittleEndian.Uint16(blk)) * float32(int(q&15)-8)
		}
	default:
		t.Fatalf("no decoder for %s", dt)
	}
	return out
}

// f16ToF32 decodes an IEEE half (finite values only, as the writer's
// scales and weights are).
func f16ToF32(h uint16) float32 {
	sign := float32(1)
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, mant := int(h>>10&0x1f), float64(h&0x3ff)
	if exp == 0 {
		return sign * float32(math.Ldexp(mant, -24))
	}
	return sign * float32(math.Ldexp(1+mant/1024, exp-15))
}
