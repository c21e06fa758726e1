/* backend.h: where the ops of a forward pass run.
 *
 * Each architecture's pass (model/arch-*.c) is written once, as
 * straight-line C over the ops below; a backend is a table of those ops
 * over its own memory. The CPU's (backend/cpu/cpu-backend.c) runs them on
 * host rows; the GPU's (backend/cuda/) keeps a pass's activations in VRAM
 * from the embedding to the logits, or, when some tensor the pass reads is
 * not there, is the CPU's table with the products of weights it holds sent
 * to the device. eng_forward asks the context's pick() which one runs a
 * pass: the one place the choice is made (as redis's ae.c picks its
 * multiplexer, and ggml's backends decide what they offload).
 *
 * Activations are row-major [n_tok][width] float32 in the backend's memory
 * (eng_tmp); a head h of a row occupies [h*head_dim, (h+1)*head_dim).
 * Weight tensors are ggml-shaped: ne[0] = input width, ne[1] = output width,
 * ne[2] = expert (or head). Ops that cannot fail return nothing; a device
 * that fails keeps the first error, does nothing more, and the pass
 * reports it at eng_output, so a pass reads the same on every backend.
 *
 * Numerics follow llama.cpp's CPU backend where it decides results:
 * matmuls quantize activations to the weight's vec_dot_type, F16 KV cache,
 * flash-attention style attention, RMSNorm sums in double, softmax
 * exponent sums in double. */
#ifndef FL_BACKEND_H
#define FL_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "model/activation.h"
#include "model/arch.h"
#include "model/expert-source.h"
#include "model/model.h"
#include "model/scratch.h"

struct eng_kv;
struct fl_pool;
struct eng_gpu;
struct eng_backend;
struct eng_attn_sel;

/* Everything a forward pass needs besides the batch. Owned by the session. */
struct eng_ctx {
    const struct eng_model *m;
    struct fl_pool *pool;                      /* the CPU's threads */
    int n_threads;
    struct eng_kv *kv;                         /* the host KV cache */
    const struct eng_expert_source *experts;   /* NULL: all experts resident */
    const struct eng_routing_sink *routing;    /* NULL: routing not recorded */
    struct eng_arena *arena;                   /* host scratch of the pass */
    /* The backend of every pass (backend/cpu: eng_cpu_backend), unless pick
     * is set: then pick(c) says which backend runs the next pass. */
    const struct eng_backend *cpu;
    const struct eng_backend *(*pick)(struct eng_ctx *c);
    struct eng_gpu *gpu;                       /* the device pick() chooses among (backend/cuda) */
    const struct eng_backend *be;              /* the backend of the pass running now */
    /* The batch of the pass running now (eng_forward's prepared view, its
     * per-token span, seq, cell...): a backend whose arithmetic could depend
     * on the batch's size chooses by each row's own span instead. */
    const struct eng_batch *batch;
};

/* Runs one batch through c->m's architecture: checks positions against the
 * KV cache and token ids against the vocabulary, resets the scratch, picks
 * the backend and calls arch->forward. */
int eng_forward(struct eng_ctx *c, const struct eng_batch *b, struct fl_err *err);

/* What eng_forward does to a caller's batch before the pass: checks the
 * spans (against the batch, the context, each other), reserves their KV
 * cells and fills *out's per-token view (arch.h) in the pass's scratch (so
 * after eng_arena_reset). For tests that call ops directly. */
int eng_batch_prepare(struct eng_ctx *c, const struct eng_batch *in, struct eng_batch *out,
                      struct fl_err *err);

/* --- the ops' parameters ---------------------------------------------------- */

struct eng_attn {
    int n_head, n_head_kv;     /* GQA: query head h reads KV head h / (n_head/n_head_kv) */
    int64_t dk, dv;            /* head dims of K and V */
    int64_t k_off, v_off;      /* where KV head 0 starts inside a cache row (0 usually) */
    int64_t k_stride, v_stride;/* distance between KV heads inside a cache row (dk, dv usually) */
    bool v_in_k;               /* V rows are read from the K cache (MLA) */
    float scale;               /* applied to q.k */
    float softcap;             /* 0 = none */
    int window;                /* >0: key p0 masked for query p1 iff p1 - p0 >= window */
    const struct eng_tensor *sinks; /* NULL or F32 [n_head] logits in the softmax denominator */
    const struct eng_attn_sel *sel; /* NULL, or the only positions each query reads (DSA) */
};

/* Sparse attention's choice: the positions each query of a batch reads,
 * one set per token (DeepSeek's lightning indexer, model/dsa.h) or, per_kv,
 * one per token and KV head (MiniMax's block selection, model/msa.h): row
 * r = t, or t * n_head_kv + g. Host memory. */
struct eng_attn_sel {
    int32_t *pos;  /* [rows][stride]: the row's positions, ascending */
    int32_t *n;    /* [rows]: how many; -1: every position up to its own */
    int stride;    /* the most a row holds */
    bool per_kv;
};

static inline int64_t eng_attn_sel_row(const struct eng_attn_sel *s, int t, int g, int n_head_kv)
{
    return s->per_kv ? (int64_t)t * n_head_kv + g : t;
}

/* MiniMax's sparse attention (model/msa.h): n_head indexer heads (one per
 * KV head) of head_dim against one key per position, kept in the layer's V
 * rows from float key_off on; positions in blocks of `block`; each query
 * and KV head reads the top_k blocks (its own local blocks first). */
struct eng_msa {
    int n_head;
    int64_t head_dim, key_off;
    int block, top_k, local;
};

/* The lightning indexer's sizes: n_head query heads of head_dim against one
 * key of head_dim per position; top_k positions chosen. */
struct eng_indexer {
    int n_head;
    int64_t head_dim;
    int top_k;
};

struct eng_route {
    int64_t n_expert, k;
    enum eng_gating gating;
    bool norm;                 /* renormalise the k weights to sum 1 */
    float scale;               /* 0 or 1: none */
    const struct eng_tensor *sel_bias; /* NULL or F32 [n_expert], added for the choice only */
    /* DeepSeek-V3's group-limited choice: n_groups > 1 consecutive groups of
     * experts, only the n_group_used best of which may be chosen (0: none) */
    int n_groups, n_group_used;
};

struct eng_moe {
    const struct eng_tensor *gate, *up, *down;       /* 3-D [n_in, n_out, n_expert] */
    const struct eng_tensor *gate_b, *up_b, *down_b; /* NULL or 2-D [n_out, n_expert] F32 */
    struct eng_gated act;
    /* What the routers read when the experts take another input (Kimi K3's
     * latent experts: x is the latent, this the full-width normed input the
     * expert source's predictor routes); NULL: x */
    const float *router_in;
};

/* The hidden rows an expert source's predictor reads for a MoE call. */
static inline const float *eng_moe_router_in(const struct eng_moe *e, const float *x)
{
    return e->router_in ? e->router_in : x;
}

/* Kimi K3's residual attention (NULL in struct eng_prenorm: the plain
 * residual stream): every block-th layer banks its input as a checkpoint
 * and restarts the stream from its attention output; each sublayer (and
 * the output) reads a softmax-weighted mix of the checkpoints and the
 * stream, scored by a weight of its own. */
struct eng_res_attn {
    int block;
    const struct eng_tensor *const *attn_score, *const *ffn_score; /* [n_layer], F32 [n_embd] */
    const struct eng_tensor *out_score;
};

/* A Gated DeltaNet layer's recurrence (qwen35moe, qwen3next; llama.cpp's
 * ggml_gated_delta_net): per value head h, q and k of key head
 * h % n_k_head (qwen35moe's tiling) or, k_grouped, h / (n_v_head /
 * n_k_head) (qwen3next's repeat-interleave) L2-normed (eps), decay g = softplus(alpha + dt_bias) * a,
 * beta = sigmoid(beta), then S = exp(g) S; S += k (beta (v - S^T k))^T;
 * out = S^T q / sqrt(d_state). per_channel (Kimi Delta Attention, ggml's
 * "kda" form): alpha and dt_bias hold one value per key channel, and row i
 * of S (key channel i) decays by exp(g_i). bounded (Kimi K3's gate lower
 * bound lb): g = lb * sigmoid(-(alpha + dt_bias) * a) instead. */
struct eng_delta_net {
    int n_k_head, n_v_head;
    bool k_grouped, per_channel, bounded;
    float lower_bound;
    int64_t d_state;                      /* dims of each head's q, k and v */
    const struct eng_tensor *dt_bias, *a; /* F32 [n_v_head] (dt_bias per_channel: [n_v_head * d_state]) */
    float eps;
};

/* --- the op table -------------------------------------------------------------
 * Pointers to activations (x, y, q, ...) are the backend's memory (eng_tmp);
 * every other argument is on the host. */

struct eng_dev_mark {
    int block;
    size_t used;
};

struct eng_backend {
    const char *name;
    /* Before the pass: device scratch reset (may be NULL). */
    void (*begin)(struct eng_ctx *c);
    /* n floats of the backend's memory, valid until the pass ends (a failed
     * device gives NULL, and every op then does nothing). */
    float *(*tmp)(struct eng_ctx *c, int64_t n);
    /* The backend's own part of eng_mark/eng_release (NULL: none). */
    struct eng_dev_mark (*mark)(struct eng_ctx *c);
    void (*release)(struct eng_ctx *c, struct eng_dev_mark m);
    /* n host floats where the backend reads them: x itself on the host, a
     * copy in device memory on a device. */
    const float *(*upload)(struct eng_ctx *c, const float *x, int64_t n);
    /* x[i] = row b->tokens[i] of t (the embedding, looked up on the host). */
    int (*embed)(struct eng_ctx *c, const struct eng_tensor *t, const struct eng_batch *b,
                 float *x, struct fl_err *err);
    /* y = x / sqrt(mean(x^2) + eps) * w over n_rows rows of n, `stride`
     * floats apart (w NULL: no weight; F32 [n]); y may equal x. */
    void (*rmsnorm)(struct eng_ctx *c, float *y, const float *x, const struct eng_tensor *w,
                    int64_t n, int64_t n_rows, int64_t stride, float eps);
    /* y[n_tok][ne[1]] = x[n_tok][ne[0]] . W^T for a 2-D weight (slice < 0),
     * or slice `slice` of a 3-D one; activations quantized as llama.cpp
     * does for w's type. */
    void (*matmul)(struct eng_ctx *c, const struct eng_tensor *w, int64_t slice, const float *x,
                   int64_t n_tok, float *y);
    /* y[i] = w[i] . x for n <= 8 weights that read the same x (q, k and v):
     * the bits of n matmuls, x quantized once per activation type. */
    void (*matmul_shared)(struct eng_ctx *c, int n, const struct eng_tensor *const *w,
                          const float *x, int64_t n_tok, float *const *y);
    /* y_h = (slice h of the 3-D w) . x_h for every head h < n_head: x_h of a
     * token at x + h*x_head, tokens x_stride apart; y_h likewise (MLA's
     * per-head products, heads left where they are). */
    void (*matmul_heads)(struct eng_ctx *c, const struct eng_tensor *w, int n_head,
                         const float *x, int64_t x_head, int64_t x_stride, float *y,
                         int64_t y_head, int64_t y_stride, int64_t n_tok);
    /* Rotates the first n_rot dims of n_head heads of each of n_tok rows
     * (`stride` apart); cs is uploaded (cos, sin) pairs, n_rot per token. */
    void (*rope)(struct eng_ctx *c, float *x, int n_tok, int64_t stride, int n_head,
                 int64_t head_dim, int n_rot, enum eng_rope_mode mode, const float *cs);
    /* K rows [n_tok][kd] and V rows [n_tok][vd] of the batch's positions
     * into layer's cache (F16); v NULL (vd 0): only K (MLA). */
    void (*kv_store)(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *k,
                     int64_t kd, const float *v, int64_t vd);
    /* out[t][h*dv ..] = softmax(q_t.K^T * scale + mask) V over the cached
     * positions 0 .. own position of layer (causal); q [n_tok][q_stride]
     * with head h at q + h*dk. */
    void (*attention)(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *q,
                      int64_t q_stride, const struct eng_attn *p, float *out, int64_t out_stride);
    void (*add)(struct eng_ctx *c, float *y, const float *x, int64_t n); /* y += x */
    /* y (n_rows rows of b->ne[0]) += the F32 bias b */
    void (*add_bias)(struct eng_ctx *c, float *y, const struct eng_tensor *b, int64_t n_rows);
    /* g[i] = silu(g[i]) * u[i] */
    void (*swiglu)(struct eng_ctx *c, float *g, const float *u, int64_t n);
    /* g[i] = act(g[i], u[i]) for the activations other than SwiGLU
     * (model/activation.h; may be NULL: a backend without it never runs a
     * model whose dense FFNs have them) */
    void (*gated)(struct eng_ctx *c, float *g, const float *u, int64_t n,
                  const struct eng_gated *a);
    /* Kimi K3's residual mix (struct eng_res_attn; may be NULL likewise): per
     * token t, over the checkpoints stack[k] (n_ckpt of [n_tok][width]) and
     * x: s = rmsnorm(row, eps) . score, p = softmax(s over the n_ckpt + 1
     * rows, x last), out[t] = sum_k p_k stack[k][t] + p_x x[t]. */
    void (*res_mix)(struct eng_ctx *c, const float *stack, int n_ckpt, const float *x,
                    const struct eng_tensor *score, int64_t n_tok, int64_t width, float eps,
                    float *out);
    /* n_rows rows of width floats; strides in floats */
    void (*copy_2d)(struct eng_ctx *c, float *dst, int64_t dst_stride, const float *src,
                    int64_t src_stride, int64_t width, int64_t n_rows);
    /* y = (x - mean(x)) / sqrt(var(x) + eps) * w + bias over n_rows rows
     * of n, `stride` floats apart (w, bias F32 [n]); y may equal x. */
    void (*layernorm)(struct eng_ctx *c, float *y, const float *x, const struct eng_tensor *w,
                      const struct eng_tensor *bias, int64_t n, int64_t n_rows, int64_t stride,
                      float eps);
    /* Each run of n floats of x (n_rows runs, contiguous) multiplied by the
     * orthonormal Walsh-Hadamard matrix H_n (n a power of two). */
    void (*hadamard)(struct eng_ctx *c, float *x, int64_t n_rows, int64_t n);
    /* The lightning indexer of block `layer` (may be NULL: a backend
     * without it never runs a model that has it): for each token t, the
     * positions j <= its own of its sequence scored sum_h w[t][h] *
     * relu(q[t][h] . k_j), k_j the V row the layer holds at j (F16, or
     * K's block type in a quantized cache); the
     * top_k best into sel (ties: the earlier position), or n = -1 when the
     * sequence has no more than top_k. q [n_tok][n_head * head_dim], w
     * [n_tok][n_head] (the op scales it by 1/sqrt(head_dim * n_head) first,
     * as llama.cpp pre-scales it). */
    void (*indexer)(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *q,
                    const float *w, const struct eng_indexer *p, const struct eng_attn_sel *sel);
    /* MiniMax's block selection (may be NULL likewise): for each token t and
     * indexer head g, per block of positions up to its own the largest
     * q[t][g] . k_j (k_j: the layer's V row at j from p->key_off, F16), the
     * p->local newest blocks forced, the top_k blocks' positions ascending
     * into sel's row t * n_head + g (n = -1 when it sees no more than top_k
     * blocks). q [n_tok][n_head * head_dim]. */
    void (*msa_select)(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *q,
                       const struct eng_msa *p, const struct eng_attn_sel *sel);
    /* Recurrent layers (may be NULL: a backend without them never runs a
     * model that has them). out[t] = silu(causal depthwise conv of the
     * sequence's window then x's rows, kernel w F32 [d_conv][width]) over
     * n_tok rows of width = w->ne[1]; each span's sequence keeps its last
     * d_conv-1 rows in the layer's rs_conv state from float state_off on
     * (Kimi Delta Attention keeps q's, k's and v's windows there one after
     * the other, as llama.cpp does). */
    void (*ssm_conv)(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *x,
                     const struct eng_tensor *w, int64_t state_off, float *out);
    /* The delta-rule recurrence over each span's tokens in order, from and
     * into its sequence's rs_ssm state: qkv rows [n_tok][q | k | v] (q and k
     * n_k_head heads, v n_v_head), alpha and beta [n_tok][n_v_head] (alpha
     * per_channel [n_tok][n_v_head * d_state]), out [n_tok][n_v_head * d_state]. */
    void (*delta_net)(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *qkv,
                      const float *alpha, const float *beta, const struct eng_delta_net *p,
                      float *out);
    /* y[r][i] *= sigmoid(g[r][i]) over n_rows rows of width (per_row: one
     * gate g[r] for the whole row). */
    void (*sigmoid_gate)(struct eng_ctx *c, float *y, const float *g, int64_t width,
                         int64_t n_rows, bool per_row);
    /* The mixture of experts of block `layer` on its normed input x
     * (n_tok rows), from the router's logits (overwritten): routing (the
     * routing sink hears it), the expert source's prefetch, every expert's
     * tokens in one product between acquire and release, the slots summed
     * in order 0..k-1 into out. The expert source's -errno stops the pass. */
    int (*moe)(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *x,
               float *logits, const struct eng_route *r, const struct eng_moe *e, float *out,
               struct fl_err *err);
    /* The final norm and output projection of the rows the batch wants
     * (every row or the last) into b->logits, and the final norm alone of
     * the rows its embedding spans want into b->embd; 0, or the pass's first
     * error. */
    int (*output)(struct eng_ctx *c, const float *x, const struct eng_batch *b,
                  const struct eng_tensor *norm, const struct eng_tensor *w, float eps,
                  struct fl_err *err);
};

/* --- what a pass calls: the running backend's ops ------------------------------ */

static inline float *eng_tmp(struct eng_ctx *c, int64_t n)
{
    return c->be->tmp(c, n);
}

/* Host scratch of the pass (64-byte aligned, uninitialised; never NULL:
 * out of memory aborts, a pass cannot go on without it). */
static inline void *eng_scratch(struct eng_ctx *c, size_t bytes)
{
    return eng_arena_alloc(c->arena, bytes);
}

static inline float *eng_scratch_f32(struct eng_ctx *c, int64_t n)
{
    return eng_arena_alloc(c->arena, (size_t)n * sizeof(float));
}

/* A layer's scratch (host and backend) dies with the layer: mark before it,
 * release after, and scratch stays at one layer's worth. */
struct eng_mark {
    struct eng_scratch_mark host;
    struct eng_dev_mark dev;
};

static inline struct eng_mark eng_mark(struct eng_ctx *c)
{
    struct eng_mark m = { .host = eng_scratch_mark(c->arena) };
    if (c->be->mark)
        m.dev = c->be->mark(c);
    return m;
}

static inline void eng_release(struct eng_ctx *c, struct eng_mark m)
{
    if (c->be->release)
        c->be->release(c, m.dev);
    eng_scratch_release(c->arena, m.host);
}

static inline const float *eng_upload(struct eng_ctx *c, const float *x, int64_t n)
{
    return c->be->upload(c, x, n);
}

static inline int eng_embed(struct eng_ctx *c, const struct eng_tensor *t,
                            const struct eng_batch *b, float *x, struct fl_err *err)
{
    return c->be->embed(c, t, b, x, err);
}

static inline void eng_rmsnorm(struct eng_ctx *c, float *y, const float *x,
                               const struct eng_tensor *w, int64_t n, int64_t n_rows,
                               int64_t stride, float eps)
{
    c->be->rmsnorm(c, y, x, w, n, n_rows, stride, eps);
}

static inline void eng_matmul(struct eng_ctx *c, const struct eng_tensor *w, const float *x,
                              int64_t n_tok, float *y)
{
    c->be->matmul(c, w, -1, x, n_tok, y);
}

static inline void eng_matmul_shared(struct eng_ctx *c, int n, const struct eng_tensor *const *w,
                                     const float *x, int64_t n_tok, float *const *y)
{
    c->be->matmul_shared(c, n, w, x, n_tok, y);
}

static inline void eng_matmul_heads(struct eng_ctx *c, const struct eng_tensor *w, int n_head,
                                    const float *x, int64_t x_head, int64_t x_stride, float *y,
                                    int64_t y_head, int64_t y_stride, int64_t n_tok)
{
    c->be->matmul_heads(c, w, n_head, x, x_head, x_stride, y, y_head, y_stride, n_tok);
}

static inline void eng_rope(struct eng_ctx *c, float *x, int n_tok, int64_t stride, int n_head,
                            int64_t head_dim, int n_rot, enum eng_rope_mode mode, const float *cs)
{
    c->be->rope(c, x, n_tok, stride, n_head, head_dim, n_rot, mode, cs);
}

static inline void eng_kv_store(struct eng_ctx *c, int layer, const struct eng_batch *b,
                                const float *k, int64_t kd, const float *v, int64_t vd)
{
    c->be->kv_store(c, layer, b, k, kd, v, vd);
}

static inline void eng_attention(struct eng_ctx *c, int layer, const struct eng_batch *b,
                                 const float *q, int64_t q_stride, const struct eng_attn *p,
                                 float *out, int64_t out_stride)
{
    c->be->attention(c, layer, b, q, q_stride, p, out, out_stride);
}

static inline void eng_add(struct eng_ctx *c, float *y, const float *x, int64_t n)
{
    c->be->add(c, y, x, n);
}

static inline void eng_add_bias(struct eng_ctx *c, float *y, const struct eng_tensor *b,
                                int64_t n_rows)
{
    c->be->add_bias(c, y, b, n_rows);
}

static inline void eng_swiglu(struct eng_ctx *c, float *g, const float *u, int64_t n)
{
    c->be->swiglu(c, g, u, n);
}

/* g[i] = act(g[i], u[i]): SwiGLU through the swiglu op, the others gated. */
static inline void eng_gated_act(struct eng_ctx *c, float *g, const float *u, int64_t n,
                                 const struct eng_gated *a)
{
    if (a->act == ENG_ACT_SWIGLU)
        c->be->swiglu(c, g, u, n);
    else
        c->be->gated(c, g, u, n, a);
}

static inline void eng_res_mix(struct eng_ctx *c, const float *stack, int n_ckpt, const float *x,
                               const struct eng_tensor *score, int64_t n_tok, int64_t width,
                               float eps, float *out)
{
    c->be->res_mix(c, stack, n_ckpt, x, score, n_tok, width, eps, out);
}

static inline void eng_copy_2d(struct eng_ctx *c, float *dst, int64_t dst_stride,
                               const float *src, int64_t src_stride, int64_t width,
                               int64_t n_rows)
{
    c->be->copy_2d(c, dst, dst_stride, src, src_stride, width, n_rows);
}

static inline void eng_layernorm(struct eng_ctx *c, float *y, const float *x,
                                 const struct eng_tensor *w, const struct eng_tensor *bias,
                                 int64_t n, int64_t n_rows, int64_t stride, float eps)
{
    c->be->layernorm(c, y, x, w, bias, n, n_rows, stride, eps);
}

static inline void eng_hadamard(struct eng_ctx *c, float *x, int64_t n_rows, int64_t n)
{
    c->be->hadamard(c, x, n_rows, n);
}

static inline void eng_indexer(struct eng_ctx *c, int layer, const struct eng_batch *b,
                               const float *q, const float *w, const struct eng_indexer *p,
                               const struct eng_attn_sel *sel)
{
    c->be->indexer(c, layer, b, q, w, p, sel);
}

static inline void eng_msa_select(struct eng_ctx *c, int layer, const struct eng_batch *b,
                                  const float *q, const struct eng_msa *p,
                                  const struct eng_attn_sel *sel)
{
    c->be->msa_select(c, layer, b, q, p, sel);
}

static inline void eng_ssm_conv(struct eng_ctx *c, int layer, const struct eng_batch *b,
                                const float *x, const struct eng_tensor *w, int64_t state_off,
                                float *out)
{
    c->be->ssm_conv(c, layer, b, x, w, state_off, out);
}

static inline void eng_delta_net(struct eng_ctx *c, int layer, const struct eng_batch *b,
                                 const float *qkv, const float *alpha, const float *beta,
                                 const struct eng_delta_net *p, float *out)
{
    c->be->delta_net(c, layer, b, qkv, alpha, beta, p, out);
}

static inline void eng_sigmoid_gate(struct eng_ctx *c, float *y, const float *g, int64_t width,
                                    int64_t n_rows, bool per_row)
{
    c->be->sigmoid_gate(c, y, g, width, n_rows, per_row);
}

static inline int eng_moe(struct eng_ctx *c, int layer, const struct eng_batch *b,
                          const float *x, float *logits, const struct eng_route *r,
                          const struct eng_moe *e, float *out, struct fl_err *err)
{
    return c->be->moe(c, layer, b, x, logits, r, e, out, err);
}

static inline int eng_output(struct eng_ctx *c, const float *x, const struct eng_batch *b,
                             const struct eng_tensor *norm, const struct eng_tensor *w,
                             float eps, struct fl_err *err)
{
    return c->be->output(c, x, b, norm, w, eps, err);
}

/* Dense gated FFN (gate, up, down 2-D): out = down(silu(gate x) * up x). */
void eng_ffn(struct eng_ctx *c, const float *x, int64_t n_tok, const struct eng_tensor *gate,
             const struct eng_tensor *up, const struct eng_tensor *down, float *out);
/* The same with another gated activation: out = down(act(gate x, up x)). */
void eng_ffn_act(struct eng_ctx *c, const float *x, int64_t n_tok, const struct eng_tensor *gate,
                 const struct eng_tensor *up, const struct eng_tensor *down,
                 const struct eng_gated *a, float *out);

/* The GQA attention of the llama family and Qwen3.5's full attention, after
 * their projections and norms: RoPE on q [n_tok][n_head * hd] and k
 * [n_tok][n_head_kv * hd] (cs: eng_rope_table), k and v into layer il's
 * cache, out [n_tok][n_head * hd] = attention with scale 1/sqrt(hd). */
void eng_gqa_attend(struct eng_ctx *c, int il, const struct eng_batch *b, float *q, float *k,
                    const float *v, const float *cs, float *out);

/* The (cos, sin) table of the batch's positions for eng_rope, n_dims/2
 * pairs per token (yarn_rope_table), uploaded. */
const float *eng_rope_table(struct eng_ctx *c, const struct eng_batch *b,
                            const struct yarn_rope *rope);

#endif
