// The C half of package ggmlop's own CPU kernels: a gated delta rule and a
// short causal convolution over sequences of different lengths (ragged),
// built as ggml custom operators (ggml_custom_4d).
#include <stdint.h>
#include <stddef.h>

struct ggml_context;
struct ggml_tensor;

// nesy_delta_rule returns the gated delta rule's node (see DeltaRule in
// ggmlop.go), or NULL when ggml's tensor layout is not the one this file
// was written against.
struct ggml_tensor *nesy_delta_rule(struct ggml_context *ctx, struct ggml_tensor *q, struct ggml_tensor *k,
	struct ggml_tensor *v, struct ggml_tensor *g, struct ggml_tensor *beta, struct ggml_tensor *state,
	struct ggml_tensor *lens, int reordered);

// nesy_conv returns the ragged convolution's node (see Conv in ggmlop.go),
// or NULL as nesy_delta_rule.
struct ggml_tensor *nesy_conv(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *state,
	struct ggml_tensor *weight, struct ggml_tensor *lens);
