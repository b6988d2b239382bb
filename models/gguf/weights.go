package gguf

import (
	"encoding/binary"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
)

// logitStd is the standard deviation the output projection aims for: the
// final RMS norm makes hidden states unit-scale, so logits spread over a
// few units, like a real model's, instead of collapsing to a uniform
// distribution.
const logitStd = 3.0

// tensors lists the model's tensors with their generators. Shapes follow
// GGUF order (innermost dimension first).
func (s Spec) tensors() []tensor {
	vocab := len(s.Tokenizer.Tokens)
	q := s.Heads * s.HeadDim
	kvDim := s.KVHeads * s.HeadDim
	wt := s.DType
	var ts []tensor
	add := func(name string, kind DType, std float64, mean float32, shape ...int) {
		kind = storable(kind, shape)
		if v, ok := s.Weights[name]; ok {
			ts = append(ts, tensor{name: name, kind: kind, shape: shape, data: &valueTensor{kind: kind, v: v}})
			return
		}
		ts = append(ts, tensor{name: name, kind: kind, shape: shape,
			data: &randomTensor{seed: s.Seed, name: name, kind: kind, std: std, mean: mean, n: product(shape)}})
	}
	lin := func(fanIn int) float64 { return s.WeightScale / math.Sqrt(float64(fanIn)) }

	add("token_embd.weight", wt, 1, 0, s.Embd, vocab)
	add("output_norm.weight", F32, 0, 1, s.Embd)
	if !s.TiedOutput {
		add("output.weight", wt, logitStd/math.Sqrt(float64(s.Embd)), 0, s.Embd, vocab)
	}
	for i := range s.Layers {
		p := "blk." + strconv.Itoa(i) + "."
		if hybrid(s.Arch) {
			s.qwen35Layer(add, p, i)
			continue
		}
		add(p+"attn_norm.weight", F32, 0, 1, s.Embd)
		add(p+"attn_q.weight", wt, lin(s.Embd), 0, s.Embd, q)
		add(p+"attn_k.weight", wt, lin(s.Embd), 0, s.Embd, kvDim)
		add(p+"attn_v.weight", wt, lin(s.Embd), 0, s.Embd, kvDim)
		add(p+"attn_output.weight", wt, lin(q), 0, q, s.Embd)
		if s.Arch == ArchQwen3 || s.Arch == ArchGemma3 {
			add(p+"attn_q_norm.weight", F32, 0, 1, s.HeadDim)
			add(p+"attn_k_norm.weight", F32, 0, 1, s.HeadDim)
		}
		if s.Arch == ArchGemma3 {
			add(p+"post_attention_norm.weight", F32, 0, 1, s.Embd)
			add(p+"post_ffw_norm.weight", F32, 0, 1, s.Embd)
		}
		add(p+"ffn_norm.weight", F32, 0, 1, s.Embd)
		add(p+"ffn_gate.weight", wt, lin(s.Embd), 0, s.Embd, s.FFN)
		add(p+"ffn_up.weight", wt, lin(s.Embd), 0, s.Embd, s.FFN)
		add(p+"ffn_down.weight", wt, lin(s.FFN), 0, s.FFN, s.Embd)
	}
	if s.Vision && hybrid(s.Arch) {
		s.qwenVisionTensors(add, lin)
	} else if s.Vision {
		// SigLIP: patch convolution, learned positions, pre-norm encoder
		// layers with biases, a final layer norm; the projector pools the
		// patch grid, RMS-normalises and projects to the text width.
		v, patches := s.VisionEmbd, (s.ImageSize/s.PatchSize)*(s.ImageSize/s.PatchSize)
		// The patch convolution's kernel stays F16 under BF16 and the
		// quantized types: ggml's im2col runs F16 or F32 kernels only (a
		// BF16 one aborts), and converters keep it F16 for that reason.
		conv := wt
		if conv != F32 {
			conv = F16
		}
		add("v.patch_embedding.weight", conv, s.WeightScale/math.Sqrt(float64(3*s.PatchSize*s.PatchSize)), 0, s.PatchSize, s.PatchSize, 3, v)
		add("v.patch_embedding.bias", F32, 0.02, 0, v)
		add("v.position_embedding.weight", wt, 0.5, 0, v, patches)
		add("v.post_layernorm.weight", F32, 0, 1, v)
		add("v.post_layernorm.bias", F32, 0, 0, v)
		for i := range s.VisionLayers {
			p := "v.blk." + strconv.Itoa(i) + "."
			add(p+"layer_norm1.weight", F32, 0, 1, v)
			add(p+"layer_norm1.bias", F32, 0, 0, v)
			for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_output"} {
				add(p+n+".weight", wt, lin(v), 0, v, v)
				add(p+n+".bias", F32, 0.02, 0, v)
			}
			add(p+"layer_norm2.weight", F32, 0, 1, v)
			add(p+"layer_norm2.bias", F32, 0, 0, v)
			add(p+"mlp.fc1.weight", wt, lin(v), 0, v, s.VisionFFN)
			add(p+"mlp.fc1.bias", F32, 0.02, 0, s.VisionFFN)
			add(p+"mlp.fc2.weight", wt, lin(s.VisionFFN), 0, s.VisionFFN, v)
			add(p+"mlp.fc2.bias", F32, 0.02, 0, v)
		}
		add("mm.mm_soft_emb_norm.weight", F32, 0, 1, v)
		add("mm.mm_input_projection.weight", wt, lin(v), 0, s.Embd, v)
	}
	return ts
}

// qwenVisionTensors adds the Qwen3-VL tower of a qwen35 model under the
// names and shapes Ollama's converter writes: the 3-D patch convolution
// (two frames of PatchSize x PatchSize pixels, channels folded into the
// output dimension), learned positions, pre-norm encoder layers with
// biases, and the patch mergers (2 x 2 patches each) that project to the
// text width: the final one after a layer norm on the patch width, the
// deepstack one after layer 0 on the merged width.
func (s Spec) qwenVisionTensors(add func(string, DType, float64, float32, ...int), lin func(int) float64) {
	wt, v, merged := s.DType, s.VisionEmbd, 4*s.VisionEmbd
	conv := wt // ggml's 3-D convolution runs F16 or F32 kernels only
	if conv != F32 {
		conv = F16
	}
	add("v.patch_embed.weight", conv, s.WeightScale/math.Sqrt(float64(6*s.PatchSize*s.PatchSize)), 0, s.PatchSize, s.PatchSize, 2, 3*v)
	add("v.patch_embed.bias", F32, 0.02, 0, v)
	add("v.pos_embed.weight", F32, 0.5, 0, v, qwenVisionPositions)
	for i := range s.VisionLayers {
		p := "v.blk." + strconv.Itoa(i) + "."
		for _, n := range []string{"norm1", "norm2"} {
			add(p+n+".weight", F32, 0, 1, v)
			add(p+n+".bias", F32, 0, 0, v)
		}
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			add(p+n+".weight", wt, lin(v), 0, v, v)
			add(p+n+".bias", F32, 0.02, 0, v)
		}
		add(p+"mlp.linear_fc1.weight", wt, lin(v), 0, v, s.VisionFFN)
		add(p+"mlp.linear_fc1.bias", F32, 0.02, 0, s.VisionFFN)
		add(p+"mlp.linear_fc2.weight", wt, lin(s.VisionFFN), 0, s.VisionFFN, v)
		add(p+"mlp.linear_fc2.bias", F32, 0.02, 0, v)
	}
	merger := func(p string, norm int) {
		add(p+"norm.weight", F32, 0, 1, norm)
		add(p+"norm.bias", F32, 0, 0, norm)
		add(p+"linear_fc1.weight", wt, lin(merged), 0, merged, merged)
		add(p+"linear_fc1.bias", F32, 0.02, 0, merged)
		add(p+"linear_fc2.weight", wt, lin(merged), 0, merged, s.Embd)
		add(p+"linear_fc2.bias", F32, 0.02, 0, s.Embd)
	}
	merger("v.merger.", v)
	merger("v.deepstack_merger.0.", merged)
}

// qwen35Layer adds one layer of the hybrid network: a gated delta net
// (fused QKV projection, output gate, beta/alpha projections, decay
// parameters, short causal convolution, gated RMS norm) or, every fourth
// layer, gated full attention (the query projection also yields a sigmoid
// gate); both with a post-attention norm and a SwiGLU feed-forward (for
// qwen35moe a mixture of experts).
func (s Spec) qwen35Layer(add func(string, DType, float64, float32, ...int), p string, i int) {
	wt, h, d := s.DType, s.Embd, s.HeadDim
	lin := func(fanIn int) float64 { return s.WeightScale / math.Sqrt(float64(fanIn)) }
	add(p+"attn_norm.weight", F32, 0, 1, h)
	add(p+"post_attention_norm.weight", F32, 0, 1, h)
	if qwen35Full(i) {
		add(p+"attn_q.weight", wt, lin(h), 0, h, 2*d*s.Heads)
		add(p+"attn_k.weight", wt, lin(h), 0, h, d*s.KVHeads)
		add(p+"attn_v.weight", wt, lin(h), 0, h, d*s.KVHeads)
		add(p+"attn_q_norm.weight", F32, 0, 1, d)
		add(p+"attn_k_norm.weight", F32, 0, 1, d)
		add(p+"attn_output.weight", wt, lin(d*s.Heads), 0, d*s.Heads, h)
	} else {
		keys, values := s.KVHeads, s.Heads
		qkv := 2*d*keys + d*values
		add(p+"attn_qkv.weight", wt, lin(h), 0, h, qkv)
		add(p+"attn_gate.weight", wt, lin(h), 0, h, d*values)
		add(p+"ssm_beta.weight", wt, lin(h), 0, h, values)
		add(p+"ssm_alpha.weight", wt, lin(h), 0, h, values)
		add(p+"ssm_dt", F32, 0.1, 0, values)
		add(p+"ssm_a", F32, 0.1, -1, values) // -exp(A_log): decay
		add(p+"ssm_conv1d.weight", DType(cmpOr(string(s.ConvDType), string(F32))), 0.5, 0, 4, qkv)
		add(p+"ssm_norm.weight", F32, 0, 1, d)
		add(p+"ssm_out.weight", wt, lin(d*values), 0, d*values, h)
	}
	if s.Arch == ArchQwen35MoE {
		// Router, routed experts (one 3-d tensor per projection) and a
		// shared expert with a sigmoid gate.
		add(p+"ffn_gate_inp.weight", F32, lin(h), 0, h, s.Experts)
		add(p+"ffn_gate_exps.weight", wt, lin(h), 0, h, s.FFN, s.Experts)
		add(p+"ffn_up_exps.weight", wt, lin(h), 0, h, s.FFN, s.Experts)
		add(p+"ffn_down_exps.weight", wt, lin(s.FFN), 0, s.FFN, h, s.Experts)
		add(p+"ffn_gate_inp_shexp.weight", F32, lin(h), 0, h)
		add(p+"ffn_gate_shexp.weight", wt, lin(h), 0, h, s.FFN)
		add(p+"ffn_up_shexp.weight", wt, lin(h), 0, h, s.FFN)
		add(p+"ffn_down_shexp.weight", wt, lin(s.FFN), 0, s.FFN, h)
		return
	}
	add(p+"ffn_gate.weight", wt, lin(h), 0, h, s.FFN)
	add(p+"ffn_up.weight", wt, lin(h), 0, h, s.FFN)
	add(p+"ffn_down.weight", wt, lin(s.FFN), 0, s.FFN, h)
}

// storable is the type a tensor of shape is stored as when kind is asked
// for: Q8_0 and Q4_0 need rows of whole blocks, and a row that is not
// takes F16 instead (as llama.cpp's quantizer falls back for such
// tensors).
func storable(kind DType, shape []int) DType {
	if (kind == Q8_0 || kind == Q4_0) && (len(shape) == 0 || shape[0]%qBlock != 0) {
		return F16
	}
	return kind
}

func product(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// randomTensor writes n values drawn from N(mean, std²) by a generator
// seeded with the model seed and the tensor name, so every tensor is
// reproducible on its own and tensors can be written in parallel. The
// values are drawn in the same order whatever the storage type, so models
// of two types differ only by their rounding.
type randomTensor struct {
	seed uint64
	name string
	kind DType
	std  float64
	mean float32
	n    int
}

func (r *randomTensor) WriteTo(w io.Writer) (int64, error) {
	h := fnv.New64a()
	h.Write([]byte(r.name))
	rng := rand.New(rand.NewPCG(r.seed, h.Sum64()))
	const chunk = 16 << 10 // values per write: a multiple of every block size
	vals := make([]float32, 0, chunk)
	buf := make([]byte, 0, 4*chunk)
	var total int64
	for left := r.n; left > 0; {
		vals = vals[:min(chunk, left)]
		for i := range vals {
			v := r.mean
			if r.std != 0 {
				v += float32(rng.NormFloat64() * r.std)
			}
			vals[i] = v
		}
		left -= len(vals)
		buf = encode(buf[:0], r.kind, vals)
		n, err := w.Write(buf)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// valueTensor writes given values.
type valueTensor struct {
	kind DType
	v    []float32
}

func (t *valueTensor) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(encode(nil, t.kind, t.v))
	return int64(n), err
}

// encode appends vals stored as kind to buf. For Q8_0 and Q4_0, len(vals)
// is a multiple of their block of 32 (storable keeps rows that are not
// whole blocks in F16).
func encode(buf []byte, kind DType, vals []float32) []byte {
	switch kind {
	case F16:
		for _, v := range vals {
			buf = binary.LittleEndian.AppendUint16(buf, f32ToF16(v))
		}
	case BF16:
		for _, v := range vals {
			buf = binary.LittleEndian.AppendUint16(buf, f32ToBF16(v))
		}
	case Q8_0:
		for b := 0; b+qBlock <= len(vals); b += qBlock {
			buf = appendQ8Block(buf, vals[b:b+qBlock])
		}
	case Q4_0:
		for b := 0; b+qBlock <= len(vals); b += qBlock {
			buf = appendQ4Block(buf, vals[b:b+qBlock])
		}
	default:
		for _, v := range vals {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
	}
	return buf
}

// qBlock is the number of values in one Q8_0 or Q4_0 block.
const qBlock = 32

// appendQ8Block appends one Q8_0 block of 32 values: their scale
// d = max|x| / 127 as F16, then each x / d rounded to an int8 (ggml's
// reference quantizer, quantize_row_q8_0_ref, does the same).
func appendQ8Block(buf []byte, vals []float32) []byte {
	var amax float32
	for _, v := range vals {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	d := amax / 127
	id := float32(0)
	if d != 0 {
		id = 1 / d
	}
	buf = binary.LittleEndian.AppendUint16(buf, f32ToF16(d))
	for _, v := range vals {
		buf = append(buf, byte(int8(math.Round(float64(v*id)))))
	}
	return buf
}

// appendQ4Block appends one Q4_0 block of 32 values: the scale d = m / -8,
// m the value of largest magnitude, as F16, then 16 bytes whose low nibbles
// are the first 16 values and high nibbles the last 16, each x / d + 8
// rounded and clamped to 0..15 (ggml's quantize_row_q4_0_ref).
func appendQ4Block(buf []byte, vals []float32) []byte {
	var amax, m float32
	for _, v := range vals {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, m = a, v
		}
	}
	d := m / -8
	id := float32(0)
	if d != 0 {
		id = 1 / d
	}
	buf = binary.LittleEndian.AppendUint16(buf, f32ToF16(d))
	nib := func(v float32) byte { return byte(min(15, int(int8(v*id+8.5)))) }
	for j := range qBlock / 2 {
		buf = append(buf, nib(vals[j])|nib(vals[j+qBlock/2])<<4)
	}
	return buf
}

// f32ToBF16 converts to bfloat16 (the top half of an F32), rounding to
// nearest even; NaN stays a quiet NaN.
func f32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// f32ToF16 converts to IEEE half precision, rounding to nearest even.
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff == 0:
		return sign
	case int32(b>>23&0xff) == 0xff: // Inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp >= 0x1f:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		half := uint32(1) << (shift - 1)
		r := mant >> shift
		rem := mant & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent, which is the correct rounding
	}
	return sign | uint16(r)
}
