// Package ggmlthread runs the forward passes of Ollama's ggml backend on a
// C thread of its own, so that Go's scheduler never sees a long cgo call.
//
// A pass is a single cgo call of 10-20 ms on the CPU. Go's system monitor
// retakes the processor of a goroutine that has been in a cgo call for
// 10 ms, and after each retake it polls every 20 µs for a while: on a
// virtual machine each of those wakes is a timer interrupt that takes a
// core from one of ggml's threads while the others wait at a barrier
// (measured: 37 monitor sleeps and 80 context switches per decoded token,
// against 3 and 11 for llama.cpp's C API in the same kind of process).
// Here the pass runs on a pthread started once per Runner; the goroutine
// hands it the graph with a short cgo call and then waits on a pipe that
// Go's network poller watches, so that no thread of the Go runtime is in a
// cgo call while the graph computes.
//
// Ollama's Context keeps its scheduler and graph unexported: the Runner
// reads them by reflection from the pinned version (checked by the tests),
// and Compute falls back to Context.Compute when they are not where it
// expects them.
//
// Ollama's ggml package creates one ggml backend per device for the whole
// process and every model's scheduler computes on it (Ollama runs each
// model in a process of its own, so it never meets this): two models'
// passes computing at once on the CPU backend share its work buffer and
// read each other's intermediate values (measured: cgreedy rollouts of the
// trained prior on two engines at once decoded nonsense), and the thread
// count of the last model loaded applies to all. Every pass here therefore
// holds a process-wide lock per ggml backend it computes on, and sets the
// CPU backend's thread count to its own engine's under that lock.
package ggmlthread

/*
#cgo linux LDFLAGS: -lpthread
#include "worker.h"
*/
import "C"

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sync"
	"unsafe"

	"github.com/ollama/ollama/ml"
	"github.com/ollama/ollama/ml/backend/ggml"
	"golang.org/x/sys/unix"
)

// ErrUnsupported is what the Runner meets in a context or backend that is
// not Ollama's ggml one of the layout this package knows (Compute then
// falls back to Context.Compute).
var ErrUnsupported = errors.New("ggmlthread: not an Ollama ggml context of the known layout")

// ErrClosed is returned by Compute after Close.
var ErrClosed = errors.New("ggmlthread: runner closed")

// device is one ggml backend of Ollama's process-wide set, with the lock a
// pass holds while it computes on it.
type device struct {
	mu  sync.Mutex
	ptr *C.struct_ggml_backend
	cpu bool
}

// devices maps each ggml backend (ggml_backend_t) to its device. It is
// package-level because the backends it guards are (see the package
// comment).
var devices sync.Map // uintptr -> *device

// backendInfo is what a pass needs from an Ollama ggml Backend; it does not
// change for the Backend's life, so a Runner resolves it once.
type backendInfo struct {
	sched   unsafe.Pointer
	schedMu *sync.Mutex // the Backend's scheduler lock
	devs    []*device   // in address order, so that passes over overlapping sets cannot deadlock
}

// resolveBackend reads b's scheduler and its lock and finds the devices of
// the backends it computes on.
func resolveBackend(b *ggml.Backend) (backendInfo, error) {
	bv := reflect.ValueOf(b).Elem()
	sched, ok1 := field(bv, "sched", reflect.Pointer)
	mu, ok2 := field(bv, "schedMu", reflect.Struct)
	bs, ok3 := field(bv, "schedBackends", reflect.Slice)
	if !ok1 || !ok2 || !ok3 || sched.IsNil() || mu.Type() != reflect.TypeFor[sync.Mutex]() || bs.Type().Elem().Kind() != reflect.Pointer {
		return backendInfo{}, ErrUnsupported
	}
	info := backendInfo{sched: sched.UnsafePointer(), schedMu: (*sync.Mutex)(mu.Addr().UnsafePointer())}
	for i := range bs.Len() {
		ptr := bs.Index(i).UnsafePointer()
		d, ok := devices.Load(uintptr(ptr))
		if !ok {
			cb := (*C.struct_ggml_backend)(ptr)
			d, _ = devices.LoadOrStore(uintptr(ptr), &device{ptr: cb, cpu: bool(C.ggml_backend_is_cpu(cb))})
		}
		if !slices.Contains(info.devs, d.(*device)) {
			info.devs = append(info.devs, d.(*device))
		}
	}
	slices.SortFunc(info.devs, func(x, y *device) int {
		return cmp.Compare(uintptr(unsafe.Pointer(x.ptr)), uintptr(unsafe.Pointer(y.ptr)))
	})
	return info, nil
}

// Runner computes graphs on its own C thread, one at a time.
type Runner struct {
	threads int // the CPU backend's thread count for this Runner's passes (0: leave it)
	mu      sync.Mutex
	w       *C.nesy_worker
	done    *os.File // the pipe's read end, watched by Go's poller
	wfd     int      // the pipe's write end, written by the C thread
	closed  bool

	// The Backend last resolved (an engine has one), guarded by infoMu.
	infoMu  sync.Mutex
	backend *ggml.Backend
	info    backendInfo
}

// New starts a Runner's thread; its passes run the CPU backend with
// threads threads (0: whatever it was set to last).
func New(threads int) (*Runner, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("ggmlthread: pipe: %w", err)
	}
	w := C.nesy_worker_start(C.int(p[1]))
	if w == nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, errors.New("ggmlthread: cannot start the compute thread")
	}
	// A non-blocking descriptor makes os.NewFile's file pollable.
	return &Runner{threads: threads, w: w, done: os.NewFile(uintptr(p[0]), "ggmlthread"), wfd: p[1]}, nil
}

// Close stops the thread; it waits for a pass in progress.
func (r *Runner) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	C.nesy_worker_stop(r.w)
	r.w = nil
	err := r.done.Close()
	if cerr := unix.Close(r.wfd); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

// backendInfo returns b's info, resolving it on first sight.
func (r *Runner) backendInfo(b *ggml.Backend) (backendInfo, error) {
	r.infoMu.Lock()
	defer r.infoMu.Unlock()
	if b != r.backend {
		info, err := resolveBackend(b)
		if err != nil {
			return backendInfo{}, err
		}
		r.backend, r.info = b, info
	}
	return r.info, nil
}

// lock takes the devices' locks and gives the CPU ones the Runner's thread
// count (each model load sets it for the whole process); it returns the
// unlock.
func (r *Runner) lock(devs []*device) func() {
	for _, d := range devs {
		d.mu.Lock()
		if d.cpu && r.threads > 0 {
			C.ggml_backend_cpu_set_n_threads(d.ptr, C.int(r.threads))
		}
	}
	return func() {
		for i := len(devs) - 1; i >= 0; i-- {
			devs[i].mu.Unlock()
		}
	}
}

// LockBackend takes the locks of the devices b's scheduler computes on,
// with the CPU backend set to the Runner's thread count, and returns the
// unlock: for work outside Compute that may compute a graph on b (Ollama's
// caches do on truncation and copy-on-write; a vision encoder's pass). A
// backend of an unknown layout takes no lock.
func (r *Runner) LockBackend(b ml.Backend) (unlock func()) {
	gb, ok := b.(*ggml.Backend)
	if !ok || gb == nil {
		return func() {}
	}
	info, err := r.backendInfo(gb)
	if err != nil {
		return func() {}
	}
	return r.lock(info.devs)
}

// pass is what the C thread needs from one Ollama context.
type pass struct {
	backendInfo
	graph unsafe.Pointer
	batch int
	out   unsafe.Pointer
}

// field returns v's field name, checking its kind.
func field(v reflect.Value, name string, kind reflect.Kind) (reflect.Value, bool) {
	f := v.FieldByName(name)
	return f, f.IsValid() && f.Kind() == kind
}

// handles reads the backend, graph and output tensor of ctx and out.
func (r *Runner) handles(ctx ml.Context, out ml.Tensor) (pass, error) {
	c, ok := ctx.(*ggml.Context)
	t, ok2 := out.(*ggml.Tensor)
	if !ok || !ok2 || c == nil || t == nil {
		return pass{}, ErrUnsupported
	}
	cv := reflect.ValueOf(c).Elem()
	bp, ok1 := field(cv, "b", reflect.Pointer)
	graph, ok2 := field(cv, "graph", reflect.Pointer)
	batch, ok3 := field(cv, "batchSize", reflect.Int)
	tt, ok4 := field(reflect.ValueOf(t).Elem(), "t", reflect.Pointer)
	if !ok1 || !ok2 || !ok3 || !ok4 || bp.IsNil() || graph.IsNil() || tt.IsNil() {
		return pass{}, ErrUnsupported
	}
	if bp.Type() != reflect.TypeFor[*ggml.Backend]() {
		return pass{}, ErrUnsupported
	}
	info, err := r.backendInfo((*ggml.Backend)(bp.UnsafePointer()))
	if err != nil {
		return pass{}, err
	}
	return pass{backendInfo: info, graph: graph.UnsafePointer(), batch: int(batch.Int()), out: tt.UnsafePointer()}, nil
}

// Objects returns the tensor objects (views included) an Ollama context
// holds and the nodes of its graph (0 before its first Forward): what its
// per-context limit (ml.Context.MaxGraphNodes) bounds. ok is false when the
// context's internals are not where the pinned version keeps them.
func Objects(ctx ml.Context) (tensors, nodes int, ok bool) {
	c, isGGML := ctx.(*ggml.Context)
	if !isGGML || c == nil {
		return 0, 0, false
	}
	cv := reflect.ValueOf(c).Elem()
	gc, ok1 := field(cv, "ctx", reflect.Pointer)
	graph, ok2 := field(cv, "graph", reflect.Pointer)
	if !ok1 || !ok2 || gc.IsNil() {
		return 0, 0, false
	}
	g := (*C.struct_ggml_context)(gc.UnsafePointer())
	for t := C.ggml_get_first_tensor(g); t != nil; t = C.ggml_get_next_tensor(g, t) {
		tensors++
	}
	if !graph.IsNil() {
		nodes = int(C.ggml_graph_n_nodes((*C.struct_ggml_cgraph)(graph.UnsafePointer())))
	}
	return tensors, nodes, true
}

// Supported reports whether Compute runs ctx's graph on the Runner's
// thread (true) or falls back to ctx.Compute.
func (r *Runner) Supported(ctx ml.Context, out ml.Tensor) bool {
	_, err := r.handles(ctx, out)
	return err == nil
}

// Compute runs ctx's graph (built with ctx.Forward(out)) and returns out's
// values, as ctx.Compute(out) followed by out.Floats() would.
func (r *Runner) Compute(ctx ml.Context, out ml.Tensor) ([]float32, error) {
	p, err := r.handles(ctx, out)
	if err != nil {
		ctx.Compute(out)
		return out.Floats(), nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	// The device locks first, then the model's scheduler lock: the order
	// of a LockBackend holder that calls Context.Compute (which locks the
	// scheduler).
	defer r.lock(p.devs)()
	p.schedMu.Lock()
	defer p.schedMu.Unlock()
	C.nesy_worker_submit(r.w, (*C.struct_ggml_backend_sched)(p.sched), (*C.struct_ggml_cgraph)(p.graph), C.int(p.batch))
	var b [1]byte
	for {
		n, err := r.done.Read(b[:])
		if n == 1 {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("ggmlthread: waiting for the pass: %w", err)
		}
	}
	if st := int(r.w.status); st != 0 {
		return nil, fmt.Errorf("ggmlthread: error computing ggml graph: status %d", st)
	}
	t := (*C.struct_ggml_tensor)(p.out)
	n := int(C.ggml_nelements(t))
	if n == 0 {
		return nil, nil
	}
	data := make([]float32, n)
	C.ggml_backend_tensor_get(t, unsafe.Pointer(&data[0]), 0, C.size_t(4*n))
	return data, nil
}
