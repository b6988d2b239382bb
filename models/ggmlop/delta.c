#include <math.h>
#include <string.h>
#include "delta.h"

// ggml's declarations used here (ggml.h of the pinned Ollama version; see
// ggmlop.go for why they are declared, not included).
struct ggml_tensor *ggml_custom_4d(struct ggml_context *ctx, int type, int64_t ne0, int64_t ne1, int64_t ne2,
	int64_t ne3, struct ggml_tensor **args, int n_args,
	void (*fun)(struct ggml_tensor *dst, int ith, int nth, void *userdata), int n_tasks, void *userdata);
void *ggml_get_data(const struct ggml_tensor *tensor);
const char *ggml_get_name(const struct ggml_tensor *tensor);
size_t ggml_tensor_overhead(void);

enum { type_f32 = 0, type_i32 = 26, all_threads = -1 };

// tensor mirrors struct ggml_tensor of the pinned ggml (ggml.h): the
// kernels read their operands' shapes, strides and data through it.
// layout_ok checks it against ggml's own accessors before a node is made.
typedef struct tensor {
	int type;
	void *buffer;
	int64_t ne[4];
	size_t nb[4];
	int op;
	int32_t op_params[16];
	int32_t flags;
	struct ggml_tensor *src[10];
	struct ggml_tensor *view_src;
	size_t view_offs;
	void *data;
	char name[64];
	void *extra;
	char padding[8];
} tensor;

// object_size is sizeof(struct ggml_object) (ggml.c), which
// ggml_tensor_overhead adds to sizeof(struct ggml_tensor).
enum { object_size = 32 };

static const tensor *T(const struct ggml_tensor *t) { return (const tensor *)t; }

// layout_ok says whether node, just made by ggml_custom_4d from args, reads
// as the mirror expects: its size, shape, sources, name and data fields
// where ggml's accessors find them.
static int layout_ok(struct ggml_tensor *node, struct ggml_tensor **args, int n, int64_t ne0, int64_t ne1) {
	if (ggml_tensor_overhead() != object_size + sizeof(tensor)) {
		return 0;
	}
	const tensor *m = T(node);
	if (m->type != type_f32 || m->ne[0] != ne0 || m->ne[1] != ne1 || m->ne[2] != 1 || m->ne[3] != 1 ||
		m->nb[0] != sizeof(float) || m->nb[1] != (size_t)ne0 * sizeof(float)) {
		return 0;
	}
	if (ggml_get_name(node) != m->name || ggml_get_data(node) != m->data) {
		return 0;
	}
	for (int i = 0; i < n; i++) {
		if (m->src[i] != args[i] || ggml_get_data(args[i]) != T(args[i])->data) {
			return 0;
		}
	}
	return 1;
}

// at returns the float at byte offset off of t's data.
static inline const float *at(const tensor *t, size_t off) { return (const float *)((const char *)t->data + off); }

// first returns the first position of sequence s: positions come sequence
// after sequence, lens[i] of sequence i.
static inline int64_t first(const int32_t *lens, int64_t s) {
	int64_t t = 0;
	for (int64_t i = 0; i < s; i++) {
		t += lens[i];
	}
	return t;
}

// delta_kernel: see nesy_delta_rule. Each (sequence, value head) pair is
// one task: its d x d state is copied to the output's state part and
// advanced there, position after position.
static void delta_kernel(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	const tensor *o = T(dst);
	const tensor *q = T(o->src[0]), *k = T(o->src[1]), *v = T(o->src[2]);
	const tensor *g = T(o->src[3]), *b = T(o->src[4]), *st = T(o->src[5]), *ln = T(o->src[6]);
	const int reordered = (int)(intptr_t)userdata;
	const int64_t d = v->ne[0], hV = v->ne[1], T_ = v->ne[2], hK = q->ne[1], n = st->ne[1];
	const int64_t r = hV / hK;
	const int32_t *lens = (const int32_t *)ln->data;
	float *out = (float *)o->data;           // [d*hV, T]
	float *states = out + d * hV * T_;       // [d*d*hV, n]
	for (int64_t task = ith; task < n * hV; task += nth) {
		const int64_t s = task / hV, h = task % hV;
		const int64_t kh = reordered ? h % hK : h / r;
		float *S = states + (s * hV + h) * d * d; // row i: value index i, key indices contiguous
		memcpy(S, at(st, s * st->nb[1]) + h * d * d, d * d * sizeof(float));
		const int64_t t0 = first(lens, s), t1 = t0 + lens[s] < T_ ? t0 + lens[s] : T_; // lens sum to T
		for (int64_t t = t0; t < t1; t++) {
			const float *qt = at(q, t * q->nb[2] + kh * q->nb[1]);
			const float *kt = at(k, t * k->nb[2] + kh * k->nb[1]);
			const float *vt = at(v, t * v->nb[2] + h * v->nb[1]);
			const float gt = expf(*at(g, t * g->nb[1] + h * g->nb[0]));
			const float bt = *at(b, t * b->nb[1] + h * b->nb[0]);
			float *y = out + t * d * hV + h * d;
			for (int64_t i = 0; i < d; i++) {
				float *row = S + i * d;
				float mk = 0;
#pragma omp simd reduction(+ : mk)
				for (int64_t j = 0; j < d; j++) {
					mk += row[j] * kt[j];
				}
				const float delta = bt * (vt[i] - gt * mk);
				float acc = 0;
#pragma omp simd reduction(+ : acc)
				for (int64_t j = 0; j < d; j++) {
					const float x = gt * row[j] + delta * kt[j];
					row[j] = x;
					acc += x * qt[j];
				}
				y[i] = acc;
			}
		}
	}
}

struct ggml_tensor *nesy_delta_rule(struct ggml_context *ctx, struct ggml_tensor *q, struct ggml_tensor *k,
	struct ggml_tensor *v, struct ggml_tensor *g, struct ggml_tensor *beta, struct ggml_tensor *state,
	struct ggml_tensor *lens, int reordered) {
	struct ggml_tensor *args[7] = {q, k, v, g, beta, state, lens};
	for (int i = 0; i < 7; i++) {
		const tensor *a = T(args[i]);
		if (a->type != (i == 6 ? type_i32 : type_f32) || a->nb[0] != (i == 6 ? sizeof(int32_t) : sizeof(float))) {
			return NULL;
		}
	}
	const tensor *tq = T(q), *tk = T(k), *tv = T(v), *tg = T(g), *tb = T(beta), *ts = T(state), *tl = T(lens);
	const int64_t d = tv->ne[0], hV = tv->ne[1], nT = tv->ne[2], hK = tq->ne[1], n = ts->ne[1];
	if (hK <= 0 || hV % hK != 0 || tq->ne[0] != d || tq->ne[2] != nT || tk->ne[0] != d || tk->ne[1] != hK ||
		tk->ne[2] != nT || tg->ne[0] != hV || tg->ne[1] != nT || tb->ne[0] != hV || tb->ne[1] != nT ||
		ts->ne[0] != d * d * hV || tl->ne[0] != n || tl->ne[1] != 1 || ts->ne[2] != 1 || tv->ne[3] != 1 ||
		tq->ne[3] != 1 || tk->ne[3] != 1) {
		return NULL;
	}
	struct ggml_tensor *node = ggml_custom_4d(ctx, type_f32, d * hV, nT + d * n, 1, 1, args, 7, delta_kernel,
		all_threads, (void *)(intptr_t)(reordered != 0));
	return layout_ok(node, args, 7, d * hV, nT + d * n) ? node : NULL;
}

// conv_block is the channels conv_kernel handles at a time, and
// max_conv_k the longest kernel it takes.
enum { conv_block = 64, max_conv_k = 8 };

// conv_kernel: see nesy_conv. Each thread takes a range of channels, in
// blocks whose weights and last inputs it holds transposed (channel
// innermost), so that a position's outputs are one vector loop.
static void conv_kernel(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	(void)userdata;
	const tensor *o = T(dst);
	const tensor *x = T(o->src[0]), *st = T(o->src[1]), *w = T(o->src[2]), *ln = T(o->src[3]);
	const int64_t C = x->ne[0], K = w->ne[0], n = st->ne[2];
	const int64_t nT = x->ne[1];
	const int32_t *lens = (const int32_t *)ln->data;
	float *out = (float *)o->data;  // [C, T]
	float *states = out + C * nT;   // [K-1, C, n]
	const int64_t per = (C + nth - 1) / nth, c0 = per * ith, c1 = c0 + per < C ? c0 + per : C;
	float wt[max_conv_k][conv_block], hist[max_conv_k][conv_block];
	for (int64_t cb = c0; cb < c1; cb += conv_block) {
		const int64_t nb = c1 - cb < conv_block ? c1 - cb : conv_block;
		for (int64_t j = 0; j < nb; j++) {
			for (int64_t i = 0; i < K; i++) {
				wt[i][j] = *at(w, (cb + j) * w->nb[1] + i * w->nb[0]);
			}
		}
		int64_t t0 = 0;
		for (int64_t s = 0; s < n; s++) {
			for (int64_t j = 0; j < nb; j++) {
				for (int64_t i = 0; i < K - 1; i++) {
					hist[i][j] = *at(st, s * st->nb[2] + (cb + j) * st->nb[1] + i * st->nb[0]);
				}
			}
			const int64_t t1 = t0 + lens[s] < nT ? t0 + lens[s] : nT; // lens sum to T
			for (int64_t t = t0; t < t1; t++) {
				const float *xt = at(x, t * x->nb[1] + cb * x->nb[0]);
				float *y = out + t * C + cb;
				for (int64_t j = 0; j < nb; j++) {
					float sum = wt[K - 1][j] * xt[j];
					for (int64_t i = 0; i < K - 1; i++) {
						sum += wt[i][j] * hist[i][j];
					}
					y[j] = sum;
				}
				for (int64_t i = 0; i + 1 < K - 1; i++) {
					memcpy(hist[i], hist[i + 1], nb * sizeof(float));
				}
				memcpy(hist[K - 2], xt, nb * sizeof(float));
			}
			for (int64_t j = 0; j < nb; j++) {
				for (int64_t i = 0; i < K - 1; i++) {
					states[(s * C + cb + j) * (K - 1) + i] = hist[i][j];
				}
			}
			t0 += lens[s];
		}
	}
}

struct ggml_tensor *nesy_conv(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *state,
	struct ggml_tensor *weight, struct ggml_tensor *lens) {
	struct ggml_tensor *args[4] = {x, state, weight, lens};
	for (int i = 0; i < 4; i++) {
		const tensor *a = T(args[i]);
		if (a->type != (i == 3 ? type_i32 : type_f32) || a->nb[0] != (i == 3 ? sizeof(int32_t) : sizeof(float))) {
			return NULL;
		}
	}
	const tensor *tx = T(x), *ts = T(state), *tw = T(weight), *tl = T(lens);
	const int64_t C = tx->ne[0], nT = tx->ne[1], K = tw->ne[0], n = ts->ne[2];
	if (K < 2 || K > max_conv_k || tw->ne[1] != C || ts->ne[0] != K - 1 || ts->ne[1] != C || tl->ne[0] != n ||
		tx->ne[2] != 1 || ts->ne[3] != 1 || tw->ne[2] != 1) {
		return NULL;
	}
	struct ggml_tensor *node = ggml_custom_4d(ctx, type_f32, C, nT + (K - 1) * n, 1, 1, args, 4, conv_kernel,
		all_threads, NULL);
	return layout_ok(node, args, 4, C, nT + (K - 1) * n) ? node : NULL;
}
