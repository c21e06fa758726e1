/* cpu-backend.c: the CPU's ops of the backend interface (cpu-backend.h):
 * activations in host scratch, products on the quantized blocks through
 * backend/cpu/matmul.h, attention over the host KV cache. */
#include "backend/cpu/cpu-backend.h"

#include <errno.h>
#include <string.h>

#include "backend/cpu/attention.h"
#include "backend/cpu/cpu-ops.h"
#include "backend/cpu/indexer.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/msa.h"
#include "backend/cpu/recurrent.h"
#include "backend/cpu/threadpool.h"
#include "model/activation.h"
#include "model/kv-cache.h"

/* Below this many multiply-adds a job runs on the calling thread: a pool
 * round trip costs a few microseconds on idle cores (far more on busy
 * ones), about what one core needs for this much quantized dot product.
 * (256K kept a decode's attention over the first 128 positions on one
 * thread while the others spun; at 64K it is split from 32 positions.) */
#define PARALLEL_WORK (64.0 * 1024.0)

struct fl_pool *eng_cpu_pool_for(const struct eng_ctx *c, double work)
{
    return work >= PARALLEL_WORK ? c->pool : NULL;
}

static float *cpu_tmp(struct eng_ctx *c, int64_t n)
{
    return eng_scratch_f32(c, n);
}

static const float *cpu_upload(struct eng_ctx *c, const float *x, int64_t n)
{
    (void)c, (void)n;
    return x; /* host rows are where the CPU reads them */
}

static int cpu_embed(struct eng_ctx *c, const struct eng_tensor *t, const struct eng_batch *b,
                     float *x, struct fl_err *err)
{
    (void)c;
    return cpu_get_rows(t, b->tokens, b->n_tok, x, err);
}

static void cpu_rmsnorm_op(struct eng_ctx *c, float *y, const float *x,
                           const struct eng_tensor *w, int64_t n, int64_t n_rows, int64_t stride,
                           float eps)
{
    (void)c;
    cpu_rmsnorm_rows(y, x, w, n, n_rows, stride, eps);
}

static void cpu_layernorm_op(struct eng_ctx *c, float *y, const float *x,
                             const struct eng_tensor *w, const struct eng_tensor *bias, int64_t n,
                             int64_t n_rows, int64_t stride, float eps)
{
    (void)c;
    for (int64_t r = 0; r < n_rows; r++)
        cpu_layernorm(y + r * stride, x + r * stride, w ? (const float *)w->data : NULL,
                      bias ? (const float *)bias->data : NULL, n, eps);
}

/* The cache's fast transform (the same matrix as llama.cpp's product with
 * it; rounding may differ in the last bit). */
static void cpu_hadamard(struct eng_ctx *c, float *x, int64_t n_rows, int64_t n)
{
    (void)c;
    eng_kv_rotate(x, n_rows * n, (int)n);
}

static void cpu_matmul(struct eng_ctx *c, const struct eng_tensor *w, int64_t slice,
                       const float *x, int64_t n_tok, float *y)
{
    const int64_t n_in = w->ne[0], n_out = w->ne[1];
    const uint8_t *data = w->data;
    if (slice >= 0)
        data += (size_t)slice * (size_t)n_out * fl_row_size(w->type, n_in);
    void *scratch = eng_scratch(c, fl_matmul_scratch_size(w->type, n_in, n_tok) + 64);
    /* Shapes and types were checked at load, so this cannot fail. */
    (void)fl_matmul(eng_cpu_pool_for(c, (double)n_in * n_out * n_tok), data, w->type, n_in, n_out,
                    x, n_tok, y, scratch);
}

/* x quantized once per activation type and the products in one pool round
 * (fl_matmul_batch), so the small ones fill the big one's tail. */
static void cpu_matmul_shared(struct eng_ctx *c, int n, const struct eng_tensor *const *w,
                              const float *x, int64_t n_tok, float *const *y)
{
    enum { MAX = 8 };
    if (n > MAX) {
        for (int i = 0; i < n; i++)
            c->be->matmul(c, w[i], -1, x, n_tok, y[i]);
        return;
    }
    struct fl_qact xq[MAX];
    struct fl_matmul_task t[MAX];
    const int64_t n_in = w[0]->ne[0];
    double work = 0;
    for (int i = 0; i < n; i++) {
        int same = -1;
        for (int j = 0; j < i && same < 0; j++)
            if (fl_act_type(w[j]->type) == fl_act_type(w[i]->type))
                same = j;
        if (same >= 0)
            xq[i] = xq[same];
        else /* shapes and types were checked at load: cannot fail */
            (void)fl_quantize_act(eng_cpu_pool_for(c, (double)n_in * n_tok * 16), w[i]->type, x,
                                  n_in, n_tok, n_in,
                                  eng_scratch(c, fl_matmul_scratch_size(w[i]->type, n_in, n_tok) + 64),
                                  &xq[i]);
        t[i] = (struct fl_matmul_task){ w[i]->data, w[i]->type, w[i]->ne[1], &xq[i], NULL, n_tok,
                                        y[i], w[i]->ne[1], NULL };
        work += (double)n_in * (double)w[i]->ne[1] * (double)n_tok;
    }
    (void)fl_matmul_batch(eng_cpu_pool_for(c, work), t, n);
}

/* Per head: its rows gathered, the head's slice product, scattered back. */
static void cpu_matmul_heads(struct eng_ctx *c, const struct eng_tensor *w, int n_head,
                             const float *x, int64_t x_head, int64_t x_stride, float *y,
                             int64_t y_head, int64_t y_stride, int64_t n_tok)
{
    const int64_t n_in = w->ne[0], n_out = w->ne[1];
    float *in = eng_scratch_f32(c, n_tok * n_in), *res = eng_scratch_f32(c, n_tok * n_out);
    for (int h = 0; h < n_head; h++) {
        for (int64_t i = 0; i < n_tok; i++)
            memcpy(in + i * n_in, x + i * x_stride + h * x_head, sizeof(float) * (size_t)n_in);
        c->be->matmul(c, w, h, in, n_tok, res);
        for (int64_t i = 0; i < n_tok; i++)
            memcpy(y + i * y_stride + h * y_head, res + i * n_out, sizeof(float) * (size_t)n_out);
    }
}

static void cpu_rope_op(struct eng_ctx *c, float *x, int n_tok, int64_t stride, int n_head,
                        int64_t head_dim, int n_rot, enum eng_rope_mode mode, const float *cs)
{
    (void)c;
    cpu_rope_rows(x, n_tok, stride, n_head, head_dim, n_rot, mode, cs);
}

static void cpu_kv_store(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *k,
                         int64_t kd, const float *v, int64_t vd)
{
    (void)kd, (void)vd; /* the cache's rows are the model's kv dims */
    eng_kv_write(c->kv, layer, b->cell, b->n_tok, k, v);
}

static void cpu_add_op(struct eng_ctx *c, float *y, const float *x, int64_t n)
{
    (void)c;
    cpu_add(y, x, n);
}

static void cpu_add_bias_op(struct eng_ctx *c, float *y, const struct eng_tensor *b,
                            int64_t n_rows)
{
    (void)c;
    cpu_add_bias(y, b, n_rows);
}

static void cpu_swiglu_op(struct eng_ctx *c, float *g, const float *u, int64_t n)
{
    (void)c;
    cpu_swiglu(g, u, n);
}

static void cpu_gated_op(struct eng_ctx *c, float *g, const float *u, int64_t n,
                         const struct eng_gated *a)
{
    (void)c;
    eng_gated_f32(a, g, u, g, n);
}

struct res_mix_job {
    const float *stack, *x, *w;
    int n_ckpt;
    int64_t n_tok, width;
    float eps, *out;
    const float **rows; /* n_ckpt + 1 per thread */
    float *p;           /* likewise */
};

/* A range of tokens: each one's rows are the checkpoints' rows and its
 * stream's, its numbers its own whichever thread runs it. */
static void res_mix_run(void *arg, int ith, int nth)
{
    const struct res_mix_job *j = arg;
    const float **rows = j->rows + (int64_t)ith * (j->n_ckpt + 1);
    float *p = j->p + (int64_t)ith * (j->n_ckpt + 1);
    int64_t t0, t1;
    fl_split_range(j->n_tok, ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        for (int k = 0; k < j->n_ckpt; k++)
            rows[k] = j->stack + ((int64_t)k * j->n_tok + t) * j->width;
        rows[j->n_ckpt] = j->x + t * j->width;
        cpu_res_mix(rows, j->n_ckpt + 1, j->w, j->width, j->eps, p, j->out + t * j->width);
    }
}

static void cpu_res_mix_op(struct eng_ctx *c, const float *stack, int n_ckpt, const float *x,
                           const struct eng_tensor *score, int64_t n_tok, int64_t width,
                           float eps, float *out)
{
    struct fl_pool *pool = eng_cpu_pool_for(c, 4.0 * (double)n_tok * (n_ckpt + 1) * width);
    const size_t per = (size_t)fl_pool_size(pool) * (size_t)(n_ckpt + 1);
    struct res_mix_job j = {
        .stack = stack, .x = x, .w = (const float *)score->data, .n_ckpt = n_ckpt,
        .n_tok = n_tok, .width = width, .eps = eps, .out = out,
        .rows = eng_scratch(c, sizeof(float *) * per), .p = eng_scratch_f32(c, (int64_t)per),
    };
    fl_pool_run(pool, res_mix_run, &j);
}

static void cpu_copy_2d(struct eng_ctx *c, float *dst, int64_t dst_stride, const float *src,
                        int64_t src_stride, int64_t width, int64_t n_rows)
{
    (void)c;
    for (int64_t r = 0; r < n_rows; r++)
        memcpy(dst + r * dst_stride, src + r * src_stride, sizeof(float) * (size_t)width);
}

static int cpu_moe(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *x,
                   float *logits, const struct eng_route *r, const struct eng_moe *e, float *out,
                   struct fl_err *err)
{
    const int64_t n = b->n_tok, k = r->k;
    float *w = eng_scratch_f32(c, n * k);
    int32_t *ids = eng_scratch(c, sizeof(int32_t) * (size_t)(n * k));
    eng_moe_route(logits, n, r, ids, w);
    struct eng_expert_lists L;
    int rc = eng_moe_begin(c, layer, b, eng_moe_router_in(e, x), ids, w, k, e->gate->ne[2], &L,
                           err);
    return rc ? rc : eng_cpu_moe_experts(c, layer, x, n, &L, w, k, e, out, err);
}

static int cpu_output(struct eng_ctx *c, const float *x, const struct eng_batch *b,
                      const struct eng_tensor *norm, const struct eng_tensor *w, float eps,
                      struct fl_err *err)
{
    (void)err;
    const int64_t n_embd = c->m->hp.n_embd, n = b->n_out;
    for (int64_t i = 0; i < b->n_embd_out; i++) /* embeddings: the norm's output is the row */
        cpu_rmsnorm_rows(b->embd + i * n_embd, x + (int64_t)b->embd_out[i] * n_embd, norm, n_embd,
                         1, n_embd, eps);
    if (n == 0)
        return 0;
    float *h = eng_scratch_f32(c, n * n_embd);
    for (int64_t i = 0; i < n; i++) /* the rows asked for, each normed alone */
        cpu_rmsnorm_rows(h + i * n_embd, x + (int64_t)b->out[i] * n_embd, norm, n_embd, 1, n_embd, eps);
    c->be->matmul(c, w, -1, h, n, b->logits);
    return 0;
}

const struct eng_backend eng_cpu_backend = {
    .name = "cpu",
    .tmp = cpu_tmp,
    .upload = cpu_upload,
    .embed = cpu_embed,
    .rmsnorm = cpu_rmsnorm_op,
    .matmul = cpu_matmul,
    .matmul_shared = cpu_matmul_shared,
    .matmul_heads = cpu_matmul_heads,
    .rope = cpu_rope_op,
    .kv_store = cpu_kv_store,
    .attention = cpu_attention,
    .add = cpu_add_op,
    .add_bias = cpu_add_bias_op,
    .swiglu = cpu_swiglu_op,
    .gated = cpu_gated_op,
    .res_mix = cpu_res_mix_op,
    .copy_2d = cpu_copy_2d,
    .layernorm = cpu_layernorm_op,
    .hadamard = cpu_hadamard,
    .indexer = cpu_indexer,
    .msa_select = cpu_msa_select,
    .ssm_conv = cpu_ssm_conv,
    .delta_net = cpu_delta_net,
    .sigmoid_gate = cpu_sigmoid_gate,
    .moe = cpu_moe,
    .output = cpu_output,
};
