/* cpu-ops.h: the CPU's row ops, with llama.cpp's CPU arithmetic where it
 * decides results: sums of squares in double, RoPE angles built by repeated
 * float multiplication (model/yarn.h), F16 rounding of the KV cache. */
#ifndef FL_CPU_OPS_H
#define FL_CPU_OPS_H

#include <stdint.h>

#include "base/error.h"
#include "model/model.h"

/* y = x / sqrt(mean(x^2) + eps) * w over one row of n (w NULL: no weight).
 * y may equal x. */
void cpu_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
/* The same over n_rows rows of n with stride `stride` floats; w is an F32
 * tensor of n values (or NULL). For per-head norms pass n = head_dim. */
void cpu_rmsnorm_rows(float *y, const float *x, const struct eng_tensor *w, int64_t n,
                      int64_t n_rows, int64_t stride, float eps);
/* y = (x - mean) / sqrt(var + eps) * w + b over one row of n (w, b NULL:
 * none), as ggml_norm then ggml_mul and ggml_add. y may equal x. */
void cpu_layernorm(float *y, const float *x, const float *w, const float *b, int64_t n, float eps);
/* g[i] = silu(g[i]) * u[i] (SwiGLU, as ggml_swiglu_split). */
void cpu_swiglu(float *g, const float *u, int64_t n);
void cpu_add(float *y, const float *x, int64_t n); /* y += x */
/* Kimi K3's residual mix of one token (model/backend.h, res_mix): rows[k]
 * the n_rows rows of n (the checkpoints, the stream last), w the score
 * weight; p gets the n_rows probabilities; out = sum_k p_k rows[k]. */
void cpu_res_mix(const float *const *rows, int n_rows, const float *w, int64_t n, float eps,
                 float *p, float *out);
/* y[t][:] += b for n_tok rows of b->ne[0] (F32 bias). */
void cpu_add_bias(float *y, const struct eng_tensor *b, int64_t n_tok);
/* Row lookup (get_rows): out[i] = dequantized row ids[i] of a 2-D tensor.
 * Rejects ids outside [0, ne[1]) with -EINVAL. */
int cpu_get_rows(const struct eng_tensor *t, const int32_t *ids, int n, float *out,
                 struct fl_err *err);
/* Rotates the first n_rot dims of each of n_head heads of one row; cs is the
 * row's position's n_rot/2 (cos, sin) pairs. */
void cpu_rope(float *x, int n_head, int64_t head_dim, int n_rot, enum eng_rope_mode mode,
              const float *cs);
/* cpu_rope over n_tok rows of stride `stride`, row t using cs + t*n_rot. */
void cpu_rope_rows(float *x, int n_tok, int64_t stride, int n_head, int64_t head_dim, int n_rot,
                   enum eng_rope_mode mode, const float *cs);

#endif
