#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include "worker.h"

static void *nesy_worker_loop(void *arg) {
	nesy_worker *w = arg;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->pending && !w->quit) {
			pthread_cond_wait(&w->cv, &w->mu);
		}
		if (w->quit) {
			break;
		}
		struct ggml_backend_sched *sched = w->sched;
		struct ggml_cgraph *graph = w->graph;
		int batch = w->batch;
		pthread_mutex_unlock(&w->mu);
		// As Ollama's Context.ComputeWithNotify, then synchronized here so
		// that the outputs can be read as soon as the byte arrives.
		if (batch > 0) {
			ggml_backend_sched_set_batch_size(sched, batch);
		}
		int status = ggml_backend_sched_graph_compute_async(sched, graph);
		ggml_backend_sched_reset(sched);
		ggml_backend_sched_synchronize(sched);
		pthread_mutex_lock(&w->mu);
		w->status = status;
		w->pending = 0;
		char b = 1;
		while (write(w->fd, &b, 1) < 0 && errno == EINTR) {
		}
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

nesy_worker *nesy_worker_start(int fd) {
	nesy_worker *w = calloc(1, sizeof *w);
	if (w == NULL) {
		return NULL;
	}
	w->fd = fd;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (pthread_create(&w->thread, NULL, nesy_worker_loop, w) != 0) {
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		free(w);
		return NULL;
	}
	return w;
}

void nesy_worker_submit(nesy_worker *w, struct ggml_backend_sched *sched, struct ggml_cgraph *graph, int batch) {
	pthread_mutex_lock(&w->mu);
	w->sched = sched;
	w->graph = graph;
	w->batch = batch;
	w->pending = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

void nesy_worker_stop(nesy_worker *w) {
	pthread_mutex_lock(&w->mu);
	w->quit = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
