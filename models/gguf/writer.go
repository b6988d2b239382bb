package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"

	"golang.org/x/sync/errgroup"
)

// GGUF version 3 layout: header, metadata key-values, tensor infos, then
// the tensor data, each tensor aligned to `alignment` bytes. The writer
// buffers the header (a real vocabulary is hundreds of thousands of
// strings) and writes tensors in parallel at their offsets.
const alignment = 32

// GGUF value types.
const (
	typeUint32  = 4
	typeInt32   = 5
	typeFloat32 = 6
	typeBool    = 7
	typeString  = 8
	typeArray   = 9
)

// kvPair is one metadata entry.
type kvPair struct {
	key   string
	value any
}

// tensor is one tensor to write.
type tensor struct {
	name  string
	kind  DType
	shape []int
	data  io.WriterTo
}

func (t tensor) size() int64 {
	in := t.kind.layout()
	return int64(product(t.shape)) / in.vals * in.bytes
}

// layout is how a storage type is stored: its GGML type number, the
// general.file_type of a model whose weight matrices are of it (llama.cpp's
// LLAMA_FTYPE), and its blocks (values, bytes).
type layout struct {
	ggml, file  uint32
	vals, bytes int64
}

func (d DType) layout() layout {
	switch d {
	case F16:
		return layout{ggml: 1, file: 1, vals: 1, bytes: 2}
	case BF16:
		return layout{ggml: 30, file: 32, vals: 1, bytes: 2}
	case Q8_0:
		return layout{ggml: 8, file: 7, vals: qBlock, bytes: 2 + qBlock}
	case Q4_0:
		return layout{ggml: 2, file: 2, vals: qBlock, bytes: 2 + qBlock/2}
	}
	return layout{ggml: 0, file: 0, vals: 1, bytes: 4}
}

// ggmlType is the GGML type number of a storage type.
func ggmlType(d DType) uint32 { return d.layout().ggml }

// fileType is general.file_type for weights of type d.
func fileType(d DType) uint32 { return d.layout().file }

// writeGGUF writes kvs (in order) and tensors to f.
func writeGGUF(f *os.File, kvs []kvPair, ts []tensor) error {
	w := bufio.NewWriterSize(f, 1<<20)
	var werr error
	put := func(v any) {
		if werr == nil {
			werr = binary.Write(w, binary.LittleEndian, v)
		}
	}
	str := func(s string) {
		put(uint64(len(s)))
		if werr == nil {
			_, werr = w.WriteString(s)
		}
	}
	put([]byte("GGUF"))
	put(uint32(3))
	put(uint64(len(ts)))
	put(uint64(len(kvs)))
	for _, kv := range kvs {
		str(kv.key)
		switch v := kv.value.(type) {
		case uint32:
			put(uint32(typeUint32))
			put(v)
		case float32:
			put(uint32(typeFloat32))
			put(v)
		case bool:
			put(uint32(typeBool))
			put(v)
		case string:
			put(uint32(typeString))
			str(v)
		case []string:
			put(uint32(typeArray))
			put(uint32(typeString))
			put(uint64(len(v)))
			for _, s := range v {
				str(s)
			}
		case []int32:
			put(uint32(typeArray))
			put(uint32(typeInt32))
			put(uint64(len(v)))
			put(v)
		case []float32:
			put(uint32(typeArray))
			put(uint32(typeFloat32))
			put(uint64(len(v)))
			put(v)
		default:
			return fmt.Errorf("gguf: metadata %s has unsupported type %T", kv.key, kv.value)
		}
	}
	var offset int64
	offsets := make([]int64, len(ts))
	for i, t := range ts {
		str(t.name)
		put(uint32(len(t.shape)))
		for _, d := range t.shape {
			put(uint64(d))
		}
		put(ggmlType(t.kind))
		put(uint64(offset))
		offsets[i] = offset
		offset += t.size()
		offset += padding(offset)
	}
	if werr != nil {
		return werr
	}
	if err := w.Flush(); err != nil {
		return err
	}
	pos, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	start := pos + padding(pos)
	// Pre-size the file so the padding between tensors reads as zeros.
	if err := f.Truncate(start + offset); err != nil {
		return err
	}
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, t := range ts {
		g.Go(func() error {
			bw := bufio.NewWriterSize(io.NewOffsetWriter(f, start+offsets[i]), 1<<20)
			if _, err := t.data.WriteTo(bw); err != nil {
				return err
			}
			return bw.Flush()
		})
	}
	return g.Wait()
}

func padding(n int64) int64 { return (alignment - n%alignment) % alignment }

// kvList turns metadata into pairs sorted by key, for a deterministic file.
func kvList(m map[string]any) []kvPair {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]kvPair, len(keys))
	for i, k := range keys {
		out[i] = kvPair{k, m[k]}
	}
	return out
}
