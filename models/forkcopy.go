package models

import (
	"reflect"
	"unsafe"

	"github.com/ollama/ollama/kvcache"
	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/model/models/qwen3next"
)

// Fork copies of recurrent state in one step per buffer.
//
// A fork shares its source's recurrent state slot until its first pass,
// which gives it a slot of its own (copy-on-write). Ollama's recurrent
// cache (kvcache.Recurrent, v0.17.4) makes that copy sequence by sequence
// inside the pass's graph: per fork, a row read and a row write for every
// layer's convolution and delta-rule buffer, and a copy of every
// checkpoint the source's slot holds (one node per checkpoint, layer and
// buffer). A search's batch is all fresh forks, so these copies were most
// of a 16-leaf pass's graph (485 nodes against 209 with one copy per
// buffer on a 4-layer qwen35; counted by TestForkCopies): host work per
// node on every device, a kernel launch each on a GPU, a barrier each
// between CPU threads, and a share of the backend's per-graph node limit,
// which bounds the sequences a pass may hold.
//
// forkCopier does the same detaching before the model's layers run, for
// all of a pass's forks at once: it gives each a free slot as Ollama does,
// then copies every buffer's rows with one read and one write (all
// sources to all destinations). A fork takes none of its source's
// checkpoints: it continues from the same state and takes its own next
// checkpoint where its source would have (their spacing is kept), but a
// truncation of the fork below its first own checkpoint recomputes from
// the start instead of restoring one (Engine.truncateCacheLocked handles
// both). Forks are made at their source's full length by the search, the
// decoder and the server, and are released rather than truncated, so the
// copies were unused; a Fork below the source's length restores a
// checkpoint through Ollama's own path before any pass, which leaves
// nothing for the copier to do.
//
// Ollama keeps this bookkeeping unexported; forkCopier reaches it by
// reflection, checking each field's name and type in the pinned version
// (newForkCopier returns nil when any differs, and the engine then leaves
// the copies to Ollama).
type forkCopier struct {
	curSeqs, curSlots           *[]int
	curSlotsInput               *ml.Tensor
	slotForSeq                  *map[int]int
	refCount, freeSlots         *[]int
	convStates, recurrentStates *map[int]ml.Tensor
	checkpoints                 reflect.Value // map[int]*slotCheckpointStore
	checkpointCount             int
	reserving                   *bool
	// storeType is *slotCheckpointStore; the indices are of its fields
	// entries, size, next and lastPos, and of pos in an entry.
	storeType                    reflect.Type
	entries, size, next, lastPos int
	entryPos                     int
}

// fieldAddr returns a pointer to v's field name if it has type t.
func fieldAddr(v reflect.Value, name string, t reflect.Type) (unsafe.Pointer, bool) {
	f := v.FieldByName(name)
	if !f.IsValid() || f.Type() != t {
		return nil, false
	}
	return unsafe.Pointer(f.UnsafeAddr()), true
}

// newForkCopier reads the recurrent cache's bookkeeping; nil when it is
// not laid out as the pinned Ollama version lays it out.
func newForkCopier(c *kvcache.Recurrent) *forkCopier {
	if c == nil {
		return nil
	}
	v := reflect.ValueOf(c).Elem()
	var f forkCopier
	ints := reflect.TypeFor[[]int]()
	tensors := reflect.TypeFor[map[int]ml.Tensor]()
	ok := true
	ptr := func(name string, t reflect.Type) unsafe.Pointer {
		p, good := fieldAddr(v, name, t)
		ok = ok && good
		return p
	}
	f.curSeqs = (*[]int)(ptr("curSeqs", ints))
	f.curSlots = (*[]int)(ptr("curSlots", ints))
	f.curSlotsInput = (*ml.Tensor)(ptr("curSlotsInput", reflect.TypeFor[ml.Tensor]()))
	f.slotForSeq = (*map[int]int)(ptr("slotForSeq", reflect.TypeFor[map[int]int]()))
	f.refCount = (*[]int)(ptr("refCount", ints))
	f.freeSlots = (*[]int)(ptr("freeSlots", ints))
	f.convStates = (*map[int]ml.Tensor)(ptr("convStates", tensors))
	f.recurrentStates = (*map[int]ml.Tensor)(ptr("recurrentStates", tensors))
	f.reserving = (*bool)(ptr("reserveCheckpoints", reflect.TypeFor[bool]()))
	count := (*int)(ptr("checkpointCount", reflect.TypeFor[int]()))
	cp := v.FieldByName("checkpoints")
	if !ok || !cp.IsValid() || cp.Kind() != reflect.Map || cp.Type().Key().Kind() != reflect.Int ||
		cp.Type().Elem().Kind() != reflect.Pointer || cp.Type().Elem().Elem().Kind() != reflect.Struct {
		return nil
	}
	f.checkpointCount = *count
	f.checkpoints = reflect.NewAt(cp.Type(), unsafe.Pointer(cp.UnsafeAddr())).Elem()
	f.storeType = cp.Type().Elem()
	st := f.storeType.Elem()
	index := func(t reflect.Type, name string, kind reflect.Kind) int {
		sf, found := t.FieldByName(name)
		if !found || sf.Type.Kind() != kind || len(sf.Index) != 1 {
			ok = false
			return 0
		}
		return sf.Index[0]
	}
	f.entries = index(st, "entries", reflect.Slice)
	f.size = index(st, "size", reflect.Int)
	f.next = index(st, "next", reflect.Int)
	f.lastPos = index(st, "lastPos", reflect.Int32)
	if !ok {
		return nil
	}
	entry := st.Field(f.entries).Type.Elem()
	if entry.Kind() != reflect.Struct {
		return nil
	}
	f.entryPos = index(entry, "pos", reflect.Int32)
	if !ok {
		return nil
	}
	return &f
}

// recurrentOf returns the recurrent cache under a model's cache (nil for
// other caches).
func recurrentOf(c kvcache.Cache) *kvcache.Recurrent {
	switch c := c.(type) {
	case *qwen3next.HybridCache:
		return c.Recurrent
	case *kvcache.Recurrent:
		return c
	}
	return nil
}

// writable returns v (a field reached through unexported names) as a
// settable value.
func writable(v reflect.Value) reflect.Value {
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

// copy gives every sequence of the pass started in the cache that still
// shares its slot a slot of its own, and adds to ctx the copies of their
// states (one row read and one row write per buffer). It runs after the
// cache's StartForward and before the model's layers. Forks left over when
// the free slots run out stay shared: the cache's own copy-on-write then
// handles them (and fails as it would have).
func (f *forkCopier) copy(ctx ml.Context) {
	if *f.reserving {
		return
	}
	var src, dst []int32
	for i, seq := range *f.curSeqs {
		slot, ok := (*f.slotForSeq)[seq]
		if !ok || slot < 0 || slot >= len(*f.refCount) || (*f.refCount)[slot] <= 1 || len(*f.freeSlots) == 0 {
			continue
		}
		free := *f.freeSlots
		to := free[len(free)-1]
		*f.freeSlots = free[:len(free)-1]
		(*f.refCount)[slot]--
		(*f.refCount)[to] = 1
		(*f.slotForSeq)[seq] = to
		(*f.curSlots)[i] = to
		f.startCheckpoints(slot, to)
		src, dst = append(src, int32(slot)), append(dst, int32(to))
	}
	if len(src) == 0 {
		return
	}
	from := ctx.Input().FromInts(src, len(src))
	to := ctx.Input().FromInts(dst, len(dst))
	for _, bufs := range []map[int]ml.Tensor{*f.convStates, *f.recurrentStates} {
		for _, buf := range bufs {
			ctx.Forward(buf.SetRows(ctx, buf.Rows(ctx, from), to))
		}
	}
	slots := make([]int32, len(*f.curSlots))
	for i, s := range *f.curSlots {
		slots[i] = int32(s)
	}
	*f.curSlotsInput = ctx.Input().FromInts(slots, len(slots))
}

// startCheckpoints empties the checkpoint store of slot to (a slot just
// taken from the free list keeps the store, and its tensors, of its last
// holder) and gives it the last checkpoint position of slot from, so the
// fork's next checkpoint falls where its source's would.
func (f *forkCopier) startCheckpoints(from, to int) {
	if f.checkpointCount == 0 {
		return
	}
	last := int64(-1)
	if s := f.checkpoints.MapIndex(reflect.ValueOf(from)); s.IsValid() && !s.IsNil() {
		last = s.Elem().Field(f.lastPos).Int()
	}
	s := f.checkpoints.MapIndex(reflect.ValueOf(to))
	if !s.IsValid() || s.IsNil() {
		s = reflect.New(f.storeType.Elem())
		es := s.Elem().Field(f.entries)
		writable(es).Set(reflect.MakeSlice(es.Type(), f.checkpointCount, f.checkpointCount))
		f.checkpoints.SetMapIndex(reflect.ValueOf(to), s)
	}
	st := s.Elem()
	es := st.Field(f.entries)
	for i := range es.Len() {
		writable(es.Index(i).Field(f.entryPos)).SetInt(-1)
	}
	writable(st.Field(f.size)).SetInt(0)
	writable(st.Field(f.next)).SetInt(0)
	writable(st.Field(f.lastPos)).SetInt(last)
}
