// The C half of package ggmlthread: one pthread per Runner computes ggml
// graphs and reports each end with a byte written to a pipe.
#include <pthread.h>
#include <stdint.h>
#include <stddef.h>

// ggml's own declarations (ggml.h, ggml-backend.h). They are declared
// here because the headers live in Ollama's module, outside this package's
// reach; the symbols are linked from Ollama's ggml package.
struct ggml_backend_sched;
struct ggml_cgraph;
struct ggml_tensor;
struct ggml_backend;
int ggml_backend_sched_graph_compute_async(struct ggml_backend_sched *sched, struct ggml_cgraph *graph);
void ggml_backend_sched_reset(struct ggml_backend_sched *sched);
void ggml_backend_sched_synchronize(struct ggml_backend_sched *sched);
void ggml_backend_sched_set_batch_size(struct ggml_backend_sched *sched, int batch_size);
void ggml_backend_tensor_get(const struct ggml_tensor *tensor, void *data, size_t offset, size_t size);
int64_t ggml_nelements(const struct ggml_tensor *tensor);
_Bool ggml_backend_is_cpu(struct ggml_backend *backend);
void ggml_backend_cpu_set_n_threads(struct ggml_backend *backend_cpu, int n_threads);
struct ggml_context;
struct ggml_tensor *ggml_get_first_tensor(const struct ggml_context *ctx);
struct ggml_tensor *ggml_get_next_tensor(const struct ggml_context *ctx, struct ggml_tensor *tensor);
int ggml_graph_n_nodes(struct ggml_cgraph *cgraph);

typedef struct nesy_worker {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int fd;    // the pipe's write end: one byte per finished pass
	int pending, quit;
	struct ggml_backend_sched *sched;
	struct ggml_cgraph *graph;
	int batch;
	int status;
} nesy_worker;

nesy_worker *nesy_worker_start(int fd);
void nesy_worker_submit(nesy_worker *w, struct ggml_backend_sched *sched, struct ggml_cgraph *graph, int batch);
void nesy_worker_stop(nesy_worker *w);
