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
	blocks := [][]float32{make([]float32, q8Block), make([]float32, q8Block), make([]float32, q8Block)}
	for i := range q8Block {
		blocks[0][i] = float32(math.Sin(float64(i))) * 3
		blocks[1][i] = -float32(i) / 7 // the largest magnitude negative
	}
	// blocks[2] is all zeros: scale 0, values 0 (not NaN).
	for bi, vals := range blocks {
		buf := appendQ8Block(nil, vals)
		if len(buf) != 2+q8Block {
			t.Fatalf("block %d: %d bytes, want %d", bi, len(buf), 2+q8Block)
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
	for _, dt := range []DType{F16, BF16, Q8_0} {
		for _, s := range []Spec{llama, Default(ArchQwen35), Default(ArchQwen35MoE)} {
			s.DType = dt
			cases = append(cases, struct {
				spec     Spec
				fileType uint32
			}{s, map[DType]uint32{F16: 1, BF16: 32, Q8_0: 7}[dt]})
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
				} else if want == Q8_0 && ts.Shape[0]%q8Block != 0 {
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
						blk := refVals[i/q8Block*q8Block : (i/q8Block+1)*q8Block]
						var amax float64
						for _, x := range blk {
							amax = math.Max(amax, math.Abs(float64(x)))
						}
						tol = amax/127/2 + amax/1024
					}
					if math.Abs(float64(v-r)) > tol {
						t.Fatalf("%s value %d: %g, its F32 twin %g (tolerance %g)", ts.Name, i, v, r, tol)
					}
				}
			}
			if c.spec.DType == Q8_0 && c.spec.Arch == ArchLlama && fallbacks == 0 {
				t.Error("no Q8_0 row fell back to F16: the case does not test the fallback")
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
			blk := b[i/q8Block*(2+q8Block):]
			out[i] = f16ToF32(binary.LittleEndian.Uint16(blk)) * float32(int8(blk[2+i%q8Block]))
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
