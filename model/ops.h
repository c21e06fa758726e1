/* ops.h: the building blocks of the CPU forward passes.
 *
 * Architectures (model/arch-*.c) are written as straight-line C over these
 * ops. Numerics follow llama.cpp's CPU backend where it decides results:
 * matmuls quantize activations to the weight's vec_dot_type (backend/cpu/
 * matmul.h), F16 KV cache, flash-attention style attention (Q rounded to
 * F16, F16 K dots, online softmax), RMSNorm sums in double, softmax
 * exponent sums in double.
 *
 * Layout conventions: activations are row-major [n_tok][width] float32; a
 * head h of a row occupies [h*head_dim, (h+1)*head_dim). Weight tensors are
 * ggml-shaped: ne[0] = input width, ne[1] = output width, ne[2] = expert. */
#ifndef FL_OPS_H
#define FL_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/arch.h"
#include "base/error.h"
#include "model/model.h"
#include "gguf/tensor-types.h"

struct fl_pool;
struct eng_kv;
struct eng_arena;

/* Everything a forward pass needs besides the batch. Owned by the session. */
struct eng_ctx {
    const struct eng_model *m;
    struct fl_pool *pool;                      /* matmuls and row-parallel ops */
    int n_threads;
    struct eng_kv *kv;
    const struct eng_expert_source *experts;   /* NULL: all experts resident */
    const struct eng_routing_sink *routing;    /* NULL: routing not recorded */
    struct eng_arena *arena;                   /* per-forward scratch */
    struct eng_gpu *gpu;                       /* NULL: CPU only (backend/cuda/gpu-offload.h) */
};

/* Runs one batch through c->m's architecture: resets the scratch arena,
 * checks positions against the KV cache size and calls arch->forward. */
int eng_forward(struct eng_ctx *c, const struct eng_batch *b, struct fl_err *err);

/* c->pool when `work` (multiply-adds, roughly) is worth waking the other
 * threads for, NULL (run on the caller) when a pool round trip would cost
 * more than the work: small models and decode steps are dominated by it. */
struct fl_pool *eng_pool_for(const struct eng_ctx *c, double work);

/* --- scratch --------------------------------------------------------------- */

int eng_arena_create(struct eng_arena **out);
void eng_arena_destroy(struct eng_arena *a);
void eng_arena_reset(struct eng_arena *a); /* done by eng_forward */
/* 64-byte aligned, uninitialised, valid until the next forward call. Never
 * NULL: aborts on out-of-memory (a forward pass cannot continue without it). */
void *eng_scratch(struct eng_ctx *c, size_t bytes);
float *eng_scratch_f32(struct eng_ctx *c, int64_t n);
/* A layer's scratch is dead once the layer is done: mark before the layer,
 * release after, and scratch stays at one layer's worth instead of growing
 * with the layer count (it competes with the paged experts for RAM). */
struct eng_scratch_mark {
    void *chunk;
    size_t used, total;
};
struct eng_scratch_mark eng_scratch_mark(struct eng_ctx *c);
void eng_scratch_release(struct eng_ctx *c, struct eng_scratch_mark m);

/* --- KV cache (F16) -------------------------------------------------------- */

/* n_ctx rows per layer of m->kv_k_dim[l] (K) and m->kv_v_dim[l] (V) halves. */
int eng_kv_create(const struct eng_model *m, int n_ctx, struct eng_kv **out, struct fl_err *err);
void eng_kv_destroy(struct eng_kv *kv);
int eng_kv_n_ctx(const struct eng_kv *kv);
/* K and V of every layer and position: what a copy of the cache takes. */
uint64_t eng_kv_bytes(const struct eng_kv *kv);
fl_f16 *eng_kv_k(struct eng_kv *kv, int layer, int pos); /* one row of kv_k_dim */
fl_f16 *eng_kv_v(struct eng_kv *kv, int layer, int pos); /* one row of kv_v_dim */
/* Converts rows [n_tok][kv_k_dim] / [n_tok][kv_v_dim] to F16 at pos0..; k or
 * v may be NULL to store only the other. */
void eng_kv_store(struct eng_kv *kv, int layer, int pos0, int n_tok, const float *k,
                  const float *v);

/* --- elementwise and row ops ---------------------------------------------- */

/* y = x / sqrt(mean(x^2) + eps) * w over one row of n (w NULL: no weight).
 * y may equal x. */
void eng_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
/* The same over n_rows rows of n with stride `stride` floats; w is an F32
 * tensor of n values (or NULL). For per-head norms pass n = head_dim. */
void eng_rmsnorm_rows(float *y, const float *x, const struct eng_tensor *w, int64_t n,
                      int64_t n_rows, int64_t stride, float eps);
/* In-place softmax of n values (exp sum in double, as ggml). */
void eng_softmax(float *x, int64_t n);
/* g[i] = silu(g[i]) * u[i] (SwiGLU, as ggml_swiglu_split). */
void eng_swiglu(float *g, const float *u, int64_t n);
void eng_add(float *y, const float *x, int64_t n); /* y += x */
/* y[t][:] += b for n_tok rows of b->ne[0] (F32 bias). */
void eng_add_bias(float *y, const struct eng_tensor *b, int64_t n_tok);
/* Row lookup (get_rows): out[i] = dequantized row tokens[i] of a 2-D tensor.
 * Rejects ids outside [0, ne[1]) with -EINVAL. */
int eng_get_rows(const struct eng_tensor *t, const int32_t *ids, int n, float *out,
                 struct fl_err *err);

/* --- RoPE ------------------------------------------------------------------- */

/* A table of (cos, sin) pairs, n_rot/2 of them per position, for positions
 * pos0 .. pos0+n_pos-1 as ggml's rope cache with no YaRN:
 * theta_i = pos * freq_scale * base^(-2i/n_rot) (powers accumulated by
 * repeated float multiplication, as ggml). YaRN users build their own table
 * of the same shape (model/yarn.h) and pass it to eng_rope. */
void eng_rope_table(float *cs, int n_rot, float freq_base, float freq_scale, int pos0, int n_pos);
/* Rotates the first n_rot dims of each of n_head heads of one row; cs is the
 * row's position's n_rot/2 (cos, sin) pairs. */
void eng_rope(float *x, int n_head, int64_t head_dim, int n_rot, enum eng_rope_mode mode,
              const float *cs);
/* eng_rope over n_tok rows of stride `stride`, row t using cs + t*n_rot. */
void eng_rope_rows(float *x, int n_tok, int64_t stride, int n_head, int64_t head_dim, int n_rot,
                   enum eng_rope_mode mode, const float *cs);

/* --- attention -------------------------------------------------------------- */

struct eng_attn {
    int n_head, n_head_kv;     /* GQA: query head h reads KV head h / (n_head/n_head_kv) */
    int64_t dk, dv;            /* head dims of K and V */
    int64_t k_off, v_off;      /* where KV head 0 starts inside a cache row (0 usually) */
    int64_t k_stride, v_stride;/* distance between KV heads inside a cache row (dk, dv usually) */
    bool v_in_k;               /* V rows are read from the K cache (MLA) */
    float scale;               /* applied to q.k */
    float softcap;             /* 0 = none */
    int window;                /* >0: key p0 masked for query p1 iff p1 - p0 >= window */
    const float *sinks;        /* NULL or [n_head] logits in the softmax denominator */
};

/* out[t][h*dv ..] = softmax(q_t.K^T * scale + mask) V over the cached
 * positions 0 .. pos0+t of `layer` (causal). q is [n_tok][q_stride] with
 * head h at q + h*dk. Runs on c->pool (eng_pool_for) over (token, head),
 * or (token, KV head) for batches of 64+ where the query heads sharing a KV
 * head are scored together. */
void eng_attention(struct eng_ctx *c, int layer, const float *q, int64_t q_stride, int n_tok,
                   int pos0, const struct eng_attn *p, float *out, int64_t out_stride);

/* --- matmuls ----------------------------------------------------------------- */

/* y[n_tok][ne[1]] = x[n_tok][ne[0]] . W^T for a 2-D weight (or expert
 * `expert` of a 3-D one, expert < 0 for 2-D), activations quantized as
 * llama.cpp does for w's type. */
void eng_matmul(struct eng_ctx *c, const struct eng_tensor *w, int expert, const float *x,
                int64_t n_tok, float *y);

/* y[i] = w[i] · x for n (at most 8) weights that read the same x, e.g. an
 * attention's q, k and v: x is quantized once per activation type and the
 * products share one pool round (backend/cpu/matmul.h, fl_matmul_batch),
 * so the small ones fill the big one's tail. The bits of n eng_matmul
 * calls; with a GPU context it is exactly those calls. */
void eng_matmul_shared(struct eng_ctx *c, int n, const struct eng_tensor *const *w,
                       const float *x, int64_t n_tok, float *const *y);

/* --- MoE ---------------------------------------------------------------------- */

struct eng_route {
    int64_t n_expert, k;
    enum eng_gating gating;
    bool norm;                 /* renormalise the k weights to sum 1 */
    float scale;               /* 0 or 1: none */
    const float *sel_bias;     /* NULL or [n_expert], added for the choice only */
};

/* From router logits [n_tok][n_expert] (overwritten) to ids/weights
 * [n_tok][k], descending selection score, ties to the lower id. */
void eng_moe_route(float *logits, int64_t n_tok, const struct eng_route *r, int32_t *ids,
                   float *weights);

/* Gated activation applied to an expert's (gate, up) rows: gate[i] becomes
 * the input of the down projection. */
typedef void (*eng_act_fn)(float *gate, const float *up, int64_t n, const void *arg);
void eng_act_swiglu(float *gate, const float *up, int64_t n, const void *arg);

struct eng_moe {
    const struct eng_tensor *gate, *up, *down;       /* 3-D [n_in, n_out, n_expert] */
    const struct eng_tensor *gate_b, *up_b, *down_b; /* NULL or 2-D [n_out, n_expert] F32 */
    eng_act_fn act;                                  /* NULL: eng_act_swiglu */
    const void *act_arg;
};

/* The (token, slot) pairs of one MoE call grouped by expert: what
 * eng_moe_ffn builds once for its CPU path and the GPU half (gpu-offload.h). */
struct eng_expert_lists {
    int64_t n_expert;
    int32_t *count;  /* [n_expert] */
    int32_t *start;  /* [n_expert + 1] offsets into tok/slot */
    int32_t *tok;    /* token index of each pair, for gathering its row */
    int32_t *slot;   /* t*k + j: where the expert's output row lands */
    int32_t *order;  /* experts with pairs, in compute order */
    int n_order;
};

/* out[t] = sum_j weights[t][j] * expert_{ids[t][j]}(x[t]) for the MoE of
 * block `layer`: prefetches the union of the selected experts, computes the
 * resident ones first, then acquire/compute/release each, all tokens routed
 * to an expert in one matmul. Sums in the slot order j = 0..k-1 as
 * llama.cpp. Records the routing to c->routing (pos0 = first position).
 * Returns 0, or the expert source's -errno with err set. */
int eng_moe_ffn(struct eng_ctx *c, int layer, int pos0, const float *x, int64_t n_tok,
                const int32_t *ids, const float *weights, int64_t k, const struct eng_moe *e,
                float *out, struct fl_err *err);

/* eng_moe_ffn in its two halves, for a caller that computes the experts
 * elsewhere (the device forward pass, backend/cuda/gpu-offload.h): begin records
 * the routing, groups the pairs by expert into L (scratch memory) and
 * tells the expert source what is coming; cpu computes the experts on the
 * CPU and sums the slots into out. */
int eng_moe_begin(struct eng_ctx *c, int layer, int pos0, const float *x, int64_t n_tok,
                  const int32_t *ids, const float *weights, int64_t k, const struct eng_moe *e,
                  struct eng_expert_lists *L, struct fl_err *err);
int eng_moe_cpu(struct eng_ctx *c, int layer, const float *x, int64_t n_tok,
                struct eng_expert_lists *L, const float *weights, int64_t k,
                const struct eng_moe *e, float *out, struct fl_err *err);

/* Dense gated FFN (gate, up, down 2-D): out = down(act(gate x, up x)). */
void eng_ffn(struct eng_ctx *c, const float *x, int64_t n_tok, const struct eng_tensor *gate,
             const struct eng_tensor *up, const struct eng_tensor *down, float *out);

/* --- head ---------------------------------------------------------------------- */

/* Final RMSNorm (norm weight) and output projection of the rows the batch
 * wants (every row or the last) into b->logits. x is [n_tok][n_embd]. */
void eng_output(struct eng_ctx *c, const float *x, const struct eng_batch *b,
                const struct eng_tensor *norm, const struct eng_tensor *output, float eps);

#endif
