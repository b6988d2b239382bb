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

// ErrUnsupported is returned by Handles when a context is not Ollama's
// ggml context of the layout this package knows.
var ErrUnsupported = errors.New("ggmlthread: not an Ollama ggml context of the known layout")

// ErrClosed is returned by Compute after Close.
var ErrClosed = errors.New("ggmlthread: runner closed")

// devices holds one lock per ggml backend (device) of Ollama's
// process-wide set (see the package comment); a pass holds the locks of
// every backend its scheduler computes on. It is package-level because
// the backends it guards are.
var devices sync.Map // uintptr (ggml_backend_t) -> *sync.Mutex

// lockBackends locks the backends' locks in address order (so that two
// passes over overlapping sets cannot deadlock) and returns the unlock.
func lockBackends(bs []unsafe.Pointer) func() {
	keys := make([]uintptr, len(bs))
	for i, b := range bs {
		keys[i] = uintptr(b)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	locks := make([]*sync.Mutex, len(keys))
	for i, k := range keys {
		m, _ := devices.LoadOrStore(k, new(sync.Mutex))
		locks[i] = m.(*sync.Mutex)
		locks[i].Lock()
	}
	return func() {
		for i := len(locks) - 1; i >= 0; i-- {
			locks[i].Unlock()
		}
	}
}

// Runner computes graphs on its own C thread, one at a time.
type Runner struct {
	threads int // the CPU backend's thread count for this Runner's passes (0: leave it)
	mu      sync.Mutex
	w       *C.nesy_worker
	done    *os.File // the pipe's read end, watched by Go's poller
	wfd     int      // the pipe's write end, written by the C thread
	closed  bool
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

// pass is what the C thread needs from one Ollama context.
type pass struct {
	sched, graph unsafe.Pointer
	batch        int
	mu           *sync.Mutex      // the backend's scheduler lock
	backends     []unsafe.Pointer // the scheduler's ggml backends (ggml_backend_t)
	out          unsafe.Pointer
}

// field returns v's field name, checking its kind.
func field(v reflect.Value, name string, kind reflect.Kind) (reflect.Value, bool) {
	f := v.FieldByName(name)
	return f, f.IsValid() && f.Kind() == kind
}

// handles reads the scheduler, graph and output tensor of ctx and out.
func handles(ctx ml.Context, out ml.Tensor) (pass, error) {
	c, ok := ctx.(*ggml.Context)
	t, ok2 := out.(*ggml.Tensor)
	if !ok || !ok2 || c == nil || t == nil {
		return pass{}, ErrUnsupported
	}
	p, err := contextHandles(c)
	if err != nil {
		return pass{}, err
	}
	tt, ok := field(reflect.ValueOf(t).Elem(), "t", reflect.Pointer)
	if !ok || tt.IsNil() {
		return pass{}, ErrUnsupported
	}
	p.out = tt.UnsafePointer()
	return p, nil
}

// LockBackend takes the locks of the ggml backends b's scheduler computes
// on, with the CPU backend set to the Runner's thread count, and returns
// the unlock: for operations outside Compute that may compute a graph on
// b (Ollama's caches do on truncation and copy-on-write). A backend of an
// unknown layout takes no lock.
func (r *Runner) LockBackend(b ml.Backend) (unlock func()) {
	gb, ok := b.(*ggml.Backend)
	if !ok || gb == nil {
		return func() {}
	}
	bs, ok := backendList(reflect.ValueOf(gb).Elem())
	if !ok {
		return func() {}
	}
	unlock = lockBackends(bs)
	r.setThreads(bs)
	return unlock
}

// backendList reads a ggml Backend's schedBackends.
func backendList(bv reflect.Value) ([]unsafe.Pointer, bool) {
	bs, ok := field(bv, "schedBackends", reflect.Slice)
	if !ok || bs.Type().Elem().Kind() != reflect.Pointer {
		return nil, false
	}
	out := make([]unsafe.Pointer, bs.Len())
	for i := range out {
		out[i] = bs.Index(i).UnsafePointer()
	}
	return out, true
}

// contextHandles reads the scheduler, graph and backends of c.
func contextHandles(c *ggml.Context) (pass, error) {
	cv := reflect.ValueOf(c).Elem()
	bp, ok1 := field(cv, "b", reflect.Pointer)
	graph, ok2 := field(cv, "graph", reflect.Pointer)
	batch, ok3 := field(cv, "batchSize", reflect.Int)
	if !ok1 || !ok2 || !ok3 || bp.IsNil() || graph.IsNil() {
		return pass{}, ErrUnsupported
	}
	bv := bp.Elem()
	if bv.Kind() != reflect.Struct {
		return pass{}, ErrUnsupported
	}
	sched, ok1 := field(bv, "sched", reflect.Pointer)
	mu, ok2 := field(bv, "schedMu", reflect.Struct)
	bs, ok3 := backendList(bv)
	if !ok1 || !ok2 || !ok3 || sched.IsNil() || mu.Type() != reflect.TypeFor[sync.Mutex]() {
		return pass{}, ErrUnsupported
	}
	return pass{
		sched:    sched.UnsafePointer(),
		graph:    graph.UnsafePointer(),
		batch:    int(batch.Int()),
		mu:       (*sync.Mutex)(mu.Addr().UnsafePointer()),
		backends: bs,
	}, nil
}

// Exclusive runs fn (which computes ctx's graph by Ollama's own
// Context.Compute and reads its outputs) holding the locks of the ggml
// backends ctx's scheduler computes on, with the CPU backend set to the
// Runner's thread count: for passes Compute does not take, such as a
// vision encoder's with several outputs. A context of an unknown layout
// runs fn without the locks.
func (r *Runner) Exclusive(ctx ml.Context, fn func()) {
	c, ok := ctx.(*ggml.Context)
	if !ok || c == nil {
		fn()
		return
	}
	p, err := contextHandles(c)
	if err != nil {
		fn()
		return
	}
	defer lockBackends(p.backends)()
	r.setThreads(p.backends)
	fn()
}

// setThreads gives the CPU backends among bs the Runner's thread count
// (the caller holds their locks).
func (r *Runner) setThreads(bs []unsafe.Pointer) {
	if r.threads <= 0 {
		return
	}
	for _, b := range bs {
		if cb := (*C.struct_ggml_backend)(b); C.ggml_backend_is_cpu(cb) {
			C.ggml_backend_cpu_set_n_threads(cb, C.int(r.threads))
		}
	}
}

// Supported reports whether Compute runs ctx's graph on the Runner's
// thread (true) or falls back to ctx.Compute.
func Supported(ctx ml.Context, out ml.Tensor) bool {
	_, err := handles(ctx, out)
	return err == nil
}

// Compute runs ctx's graph (built with ctx.Forward(out)) and returns out's
// values, as ctx.Compute(out) followed by out.Floats() would.
func (r *Runner) Compute(ctx ml.Context, out ml.Tensor) ([]float32, error) {
	p, err := handles(ctx, out)
	if errors.Is(err, ErrUnsupported) {
		ctx.Compute(out)
		return out.Floats(), nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	// The device locks first, then the model's scheduler lock: the order
	// Exclusive's fn takes them in (Context.Compute locks the scheduler).
	defer lockBackends(p.backends)()
	p.mu.Lock()
	defer p.mu.Unlock()
	r.setThreads(p.backends)
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
