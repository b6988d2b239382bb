package train

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

typedef void (*nesy_sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
	const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
typedef void (*nesy_threads_fn)(int);

static void *nesy_dlopen(const char *name) { return dlopen(name, RTLD_NOW | RTLD_LOCAL); }
static const char *nesy_dlerror(void) {
	const char *e = dlerror();
	return e ? e : "unknown dlopen error";
}
static void *nesy_dlsym(void *h, const char *s) { return dlsym(h, s); }
static void nesy_sgemm(void *f, int ta, int tb, int m, int n, int k, float alpha,
	const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
	((nesy_sgemm_fn)f)(101, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); // CblasRowMajor
}
static void nesy_threads(void *f, int n) { ((nesy_threads_fn)f)(n); }
static const char *nesy_string(void *f) { return ((const char *(*)(void))f)(); }
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	G "gorgonia.org/gorgonia"
)

// BLAS names the matrix-product implementation the training graph runs on.
type BLAS string

const (
	// BLASGonum is gonum's pure-Go BLAS, gorgonia's default: the same bits
	// on every amd64 machine, so a recipe reproduces a model bit for bit.
	BLASGonum BLAS = "gonum"
	// BLASOpenBLAS is OpenBLAS's sgemm (libopenblas.so.0, loaded when
	// training starts; Debian's libopenblas0), one thread per worker: the
	// same bits for any worker count on one machine, but OpenBLAS picks
	// its kernels by CPU, so another CPU may train different bits.
	BLASOpenBLAS BLAS = "openblas"
)

// openBLASNames are the shared objects tried, in order.
var openBLASNames = []string{"libopenblas.so.0", "libopenblas.so"}

// openBLAS is gonum's BLAS with Sgemm, the only routine the training graph
// spends its time in, done by OpenBLAS's cblas_sgemm.
type openBLAS struct {
	gonum.Implementation
	sgemm unsafe.Pointer
	// config is OpenBLAS's own account of its build and of the kernels it
	// picked for this CPU (openblas_get_config and openblas_get_corename),
	// what decides whether another machine trains the same bits.
	config string
}

// loadOpenBLAS opens OpenBLAS once per process (a shared object stays
// loaded); its error names every file tried.
var loadOpenBLAS = sync.OnceValues(func() (*openBLAS, error) {
	var errs []string
	for _, name := range openBLASNames {
		cname := C.CString(name)
		h := C.nesy_dlopen(cname)
		C.free(unsafe.Pointer(cname))
		if h == nil {
			errs = append(errs, C.GoString(C.nesy_dlerror()))
			continue
		}
		sym := func(s string) unsafe.Pointer {
			cs := C.CString(s)
			defer C.free(unsafe.Pointer(cs))
			return C.nesy_dlsym(h, cs)
		}
		f, threads := sym("cblas_sgemm"), sym("openblas_set_num_threads")
		if f == nil || threads == nil {
			errs = append(errs, name+": no cblas_sgemm or openblas_set_num_threads")
			continue
		}
		// The workers run the examples of a step in parallel, one core
		// each; OpenBLAS's own threads would compete with them and make
		// the sums depend on how it splits the work.
		C.nesy_threads(threads, 1)
		b := &openBLAS{sgemm: f, config: name}
		if cfg := sym("openblas_get_config"); cfg != nil {
			b.config = C.GoString(C.nesy_string(cfg))
		}
		if core := sym("openblas_get_corename"); core != nil {
			b.config += ", kernels for " + C.GoString(C.nesy_string(core))
		}
		return b, nil
	}
	return nil, fmt.Errorf("train: --blas openblas: cannot load OpenBLAS (apt-get install libopenblas0): %v", errs)
})

func cblasTrans(t blas.Transpose) C.int {
	if t == blas.NoTrans {
		return 111 // CblasNoTrans
	}
	return 112 // CblasTrans (single precision: ConjTrans is the same)
}

// Sgemm computes C = alpha op(A) op(B) + beta C (row-major) with OpenBLAS.
func (b *openBLAS) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, bb []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 || k == 0 || len(a) == 0 || len(bb) == 0 || len(c) == 0 {
		b.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, bb, ldb, beta, c, ldc)
		return
	}
	C.nesy_sgemm(b.sgemm, cblasTrans(tA), cblasTrans(tB), C.int(m), C.int(n), C.int(k), C.float(alpha),
		(*C.float)(unsafe.Pointer(&a[0])), C.int(lda), (*C.float)(unsafe.Pointer(&bb[0])), C.int(ldb),
		C.float(beta), (*C.float)(unsafe.Pointer(&c[0])), C.int(ldc))
}

// pinBLASCore makes OpenBLAS run the named kernels (RunOptions.BLASCore):
// it sets OPENBLAS_CORETYPE, which OpenBLAS reads when it loads, loads it
// and checks the kernels it reports. Without name or OpenBLAS it does
// nothing.
func pinBLASCore(b BLAS, core string) error {
	if core == "" || b != BLASOpenBLAS {
		return nil
	}
	if err := os.Setenv("OPENBLAS_CORETYPE", core); err != nil {
		return fmt.Errorf("train: OpenBLAS kernels %q: %w", core, err)
	}
	ob, err := loadOpenBLAS()
	if err != nil {
		return err
	}
	if !strings.HasSuffix(strings.ToLower(ob.config), "kernels for "+strings.ToLower(core)) {
		return fmt.Errorf("train: OpenBLAS kernels %q requested, but it runs %q (a CPU without their instructions, or OpenBLAS loaded before with others)", core, ob.config)
	}
	return nil
}

// checkBLAS reports whether name is a BLAS that loads, without making
// gorgonia use it.
func checkBLAS(name BLAS) error {
	switch name {
	case "", BLASGonum:
		return nil
	case BLASOpenBLAS:
		_, err := loadOpenBLAS()
		return err
	}
	return fmt.Errorf("train: unknown BLAS %q (want %q or %q)", name, BLASGonum, BLASOpenBLAS)
}

// DescribeBLAS names the BLAS a run of name uses: for OpenBLAS its
// version, build and the kernels it picked for this CPU (two machines
// train the same bits when these agree), an error when it does not load.
func DescribeBLAS(name BLAS) (string, error) {
	if err := checkBLAS(name); err != nil {
		return "", err
	}
	if name != BLASOpenBLAS {
		return "gonum (pure Go)", nil
	}
	b, _ := loadOpenBLAS()
	return b.config, nil
}

// useBLAS makes gorgonia (a process-wide setting of its own) run on the
// named BLAS and returns the function that puts gonum's back.
func useBLAS(name BLAS) (restore func(), err error) {
	if err := checkBLAS(name); err != nil {
		return nil, err
	}
	if name != BLASOpenBLAS {
		return func() {}, nil
	}
	b, _ := loadOpenBLAS()
	G.Use(b)
	return func() { G.Use(gonum.Implementation{}) }, nil
}
