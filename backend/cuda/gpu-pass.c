/* gpu-pass.c: the pass on the device (backend/cuda/gpu.h): the backend
 * table whose ops keep a pass's activations in VRAM, with the device's own
 * scratch and KV cache. Every op is queued on the compute stream and does
 * nothing once the GPU has failed; the pass reports the first error at its
 * end (pass_output), so an architecture's pass reads the same on every
 * backend. */
#include "backend/cuda/gpu-impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu-backend.h"
#include "backend/cpu/cpu-ops.h"
#include "gguf/tensor-names.h"
#include "gguf/tensor-types.h"
#include "model/kv-cache.h"

/* Smallest scratch block: a decode step's whole pass fits in one. */
#define ARENA_BLOCK ((size_t)64 << 20)

static bool usable(const struct eng_ctx *c)
{
    return c->gpu && !c->gpu->failed;
}

/* An op's failure: kept, and every later op of the pass does nothing. */
static void op_failed(struct eng_ctx *c, int rc, const struct fl_err *err)
{
    gpu_fail(c->gpu, rc, err);
}

static void *arena_get(struct eng_gpu *g, size_t bytes)
{
    struct gpu_arena *a = &g->arena;
    bytes = (bytes + 255) & ~(size_t)255;
    while (a->cur < a->n && a->used + bytes > a->cap[a->cur]) {
        a->cur++;
        a->used = 0;
    }
    if (a->cur == a->n) {
        struct fl_err err;
        if (a->n == GPU_ARENA_BLOCKS) {
            gpu_fail(g, fl_err_set(&err, -ENOMEM, "gpu: device scratch exhausted"), &err);
            return NULL;
        }
        const size_t cap = bytes > ARENA_BLOCK ? bytes : ARENA_BLOCK;
        int rc = fl_cuda_malloc(g->cu, &a->block[a->n], cap, &err);
        if (rc) {
            gpu_fail(g, rc, &err);
            return NULL;
        }
        a->cap[a->n++] = cap;
        a->used = 0;
    }
    void *p = (char *)a->block[a->cur] + a->used;
    a->used += bytes;
    return p;
}

static float *pass_tmp(struct eng_ctx *c, int64_t n)
{
    return usable(c) ? arena_get(c->gpu, sizeof(float) * (size_t)(n > 0 ? n : 1)) : NULL;
}

static struct eng_dev_mark pass_mark(struct eng_ctx *c)
{
    return (struct eng_dev_mark){ c->gpu->arena.cur, c->gpu->arena.used };
}

static void pass_release(struct eng_ctx *c, struct eng_dev_mark m)
{
    /* stream order: later kernels reuse the memory after earlier ones ran */
    c->gpu->arena.cur = m.block;
    c->gpu->arena.used = m.used;
}

static void put(struct eng_ctx *c, float *d, const float *x, int64_t n)
{
    struct fl_err err;
    int rc;
    if (usable(c) && d && (rc = fl_cuda_upload(c->gpu->cu, d, x, sizeof(float) * (size_t)n, &err)))
        op_failed(c, rc, &err);
}

static const float *pass_upload(struct eng_ctx *c, const float *x, int64_t n)
{
    float *d = pass_tmp(c, n);
    put(c, d, x, n);
    return d;
}

/* Whether a sequence's first n positions sit in cells 0..n-1 (a lone
 * sequence 0): then the kernels read the cache in place. */
static bool cells_in_place(const int32_t *cells, int n)
{
    for (int p = 0; p < n; p++)
        if (cells[p] != p)
            return false;
    return true;
}

/* The cell tables of the batch's spans whose positions are not their
 * cells, in VRAM for the whole pass (one upload, before any layer's
 * scratch): attention gathers their K/V rows through them. */
static void upload_span_cells(struct eng_ctx *c)
{
    struct eng_gpu *g = c->gpu;
    const struct eng_batch *b = c->batch;
    g->span_cells = NULL;
    if (!b || !c->kv)
        return;
    const int32_t **tab = eng_scratch(c, sizeof(*tab) * (size_t)b->n_spans);
    int64_t *at = eng_scratch(c, sizeof(*at) * (size_t)b->n_spans); /* -1: in place */
    int64_t total = 0;
    for (int s = 0; s < b->n_spans; s++) {
        const struct eng_span *sp = &b->spans[s];
        const int n = sp->pos0 + sp->n_tok;
        const bool moved = !cells_in_place(eng_kv_seq_cells(c->kv, sp->seq), n);
        at[s] = moved ? total : -1;
        total += moved ? n : 0;
        tab[s] = NULL;
    }
    g->span_cells = tab;
    if (!total)
        return;
    int32_t *host = eng_scratch(c, sizeof(int32_t) * (size_t)total);
    for (int s = 0; s < b->n_spans; s++)
        if (at[s] >= 0)
            memcpy(host + at[s], eng_kv_seq_cells(c->kv, b->spans[s].seq),
                   sizeof(int32_t) * (size_t)(b->spans[s].pos0 + b->spans[s].n_tok));
    const int32_t *d = (const int32_t *)pass_upload(c, (const float *)host, total); /* int32 bits */
    for (int s = 0; d && s < b->n_spans; s++)
        tab[s] = at[s] >= 0 ? d + at[s] : NULL;
}

static void pass_begin(struct eng_ctx *c)
{
    c->gpu->device_pass = true;
    if (!usable(c))
        return;
    c->gpu->arena.cur = 0;
    c->gpu->arena.used = 0;
    upload_span_cells(c);
}

/* The embedding's rows are taken on the host, then uploaded. */
static int pass_embed(struct eng_ctx *c, const struct eng_tensor *t, const struct eng_batch *b,
                      float *d_x, struct fl_err *err)
{
    const int64_t n = (int64_t)b->n_tok * t->ne[0];
    float *x = eng_scratch_f32(c, n);
    int rc = cpu_get_rows(t, b->tokens, b->n_tok, x, err);
    if (!rc)
        put(c, d_x, x, n);
    return rc;
}

/* Runs an op when the pass is still good and its buffers exist. */
#define GPU_OP(c, call)                                                        \
    do {                                                                       \
        struct fl_err op_err;                                                  \
        int op_rc;                                                             \
        if (usable(c) && (op_rc = (call)))                                     \
            op_failed(c, op_rc, &op_err);                                      \
    } while (0)

static void pass_rmsnorm(struct eng_ctx *c, float *d_y, const float *d_x,
                         const struct eng_tensor *w, int64_t n, int64_t n_rows, int64_t stride,
                         float eps)
{
    const float *d_w = usable(c) && w ? gpu_device_of(c->gpu, w) : NULL;
    GPU_OP(c, w && !d_w ? fl_err_set(&op_err, -EINVAL, "gpu: %s is not in VRAM", w->name)
                        : fl_cuda_rmsnorm(c->gpu->cu, d_y, d_x, d_w, n, n_rows, stride, eps,
                                          &op_err));
}

static void pass_copy_2d(struct eng_ctx *c, float *d_dst, int64_t dst_stride, const float *d_src,
                         int64_t src_stride, int64_t width, int64_t n_rows)
{
    GPU_OP(c, fl_cuda_copy_2d(c->gpu->cu, d_dst, dst_stride, d_src, src_stride, width, n_rows,
                              &op_err));
}

/* Bytes of one 2-D slice of a 3-D tensor (a head of MLA's k_b / v_b). */
static size_t slice_bytes(const struct eng_tensor *w)
{
    return (size_t)w->ne[1] * fl_row_size(w->type, w->ne[0]);
}

static void pass_mm_slice(struct eng_ctx *c, const struct eng_tensor *w, int64_t i,
                          const float *d_x, int64_t n_tok, float *d_y)
{
    const uint8_t *d_w = usable(c) ? gpu_device_of(c->gpu, w) : NULL;
    GPU_OP(c, !d_w ? fl_err_set(&op_err, -EINVAL, "gpu: %s is not in VRAM", w->name)
           : w->n_dims != 3 || i < 0 || i >= w->ne[2]
               ? fl_err_set(&op_err, -EINVAL, "gpu: %s has no slice %lld", w->name, (long long)i)
               : gpu_matmul_rows(c->gpu, d_w + (size_t)i * slice_bytes(w), w->type, w->ne[0],
                                 w->ne[1], d_x, n_tok, d_y, gpu_row_spans(c, n_tok), &op_err));
}

/* One token: every head's product straight from its strided columns, as
 * groups of one-token products (bit-identical to single matvecs). */
static void heads_grouped(struct eng_ctx *c, const struct eng_tensor *w, int n_head,
                          const float *d_x, int64_t x_head, float *d_y, int64_t y_head)
{
    const uint8_t *d_w = gpu_device_of(c->gpu, w);
    const size_t slice = slice_bytes(w);
    for (int h0 = 0; h0 < n_head && usable(c); h0 += FL_CUDA_GROUP_MAX) {
        const int n = n_head - h0 < FL_CUDA_GROUP_MAX ? n_head - h0 : FL_CUDA_GROUP_MAX;
        const void *wj[FL_CUDA_GROUP_MAX];
        const float *xj[FL_CUDA_GROUP_MAX];
        float *yj[FL_CUDA_GROUP_MAX];
        for (int j = 0; j < n; j++) {
            wj[j] = d_w + (size_t)(h0 + j) * slice;
            xj[j] = d_x + (int64_t)(h0 + j) * x_head;
            yj[j] = d_y + (int64_t)(h0 + j) * y_head;
        }
        GPU_OP(c, fl_cuda_matvec_group(c->gpu->cu, wj, w->type, w->ne[0], w->ne[1], xj, yj, n,
                                       &op_err));
    }
}

static void pass_matmul(struct eng_ctx *c, const struct eng_tensor *w, int64_t slice,
                        const float *d_x, int64_t n_tok, float *d_y)
{
    if (slice >= 0) {
        pass_mm_slice(c, w, slice, d_x, n_tok, d_y);
        return;
    }
    const void *d_w = usable(c) ? gpu_device_of(c->gpu, w) : NULL;
    GPU_OP(c, d_w ? gpu_matmul_rows(c->gpu, d_w, w->type, w->ne[0], w->ne[1], d_x, n_tok, d_y,
                                    gpu_row_spans(c, n_tok), &op_err)
                  : fl_err_set(&op_err, -EINVAL, "gpu: %s is not in VRAM", w->name));
}

static void pass_matmul_shared(struct eng_ctx *c, int n, const struct eng_tensor *const *w,
                               const float *d_x, int64_t n_tok, float *const *d_y)
{
    for (int i = 0; i < n; i++)
        pass_matmul(c, w[i], -1, d_x, n_tok, d_y[i]);
}

static void pass_matmul_heads(struct eng_ctx *c, const struct eng_tensor *w, int n_head,
                              const float *d_x, int64_t x_head, int64_t x_stride, float *d_y,
                              int64_t y_head, int64_t y_stride, int64_t n_tok)
{
    const int64_t n_in = w->ne[0], n_out = w->ne[1];
    if (!usable(c) || !d_x || !d_y)
        return;
    if (!gpu_device_of(c->gpu, w) || w->n_dims != 3 || w->ne[2] < n_head) {
        struct fl_err err;
        op_failed(c, fl_err_set(&err, -EINVAL, "gpu: %s is not %d heads in VRAM", w->name,
                                n_head), &err);
        return;
    }
    if (n_tok == 1) {
        heads_grouped(c, w, n_head, d_x, x_head, d_y, y_head);
        return;
    }
    float *in = pass_tmp(c, n_tok * n_in), *res = pass_tmp(c, n_tok * n_out);
    for (int h = 0; h < n_head && in && res; h++) {
        pass_copy_2d(c, in, n_in, d_x + (int64_t)h * x_head, x_stride, n_in, n_tok);
        pass_mm_slice(c, w, h, in, n_tok, res);
        pass_copy_2d(c, d_y + (int64_t)h * y_head, y_stride, res, n_out, n_out, n_tok);
    }
}

static void pass_rope(struct eng_ctx *c, float *d_x, int n_tok, int64_t stride, int n_head,
                      int64_t head_dim, int n_rot, enum eng_rope_mode mode, const float *d_cs)
{
    GPU_OP(c, fl_cuda_rope(c->gpu->cu, d_x, n_tok, stride, n_head, head_dim, n_rot,
                           (enum fl_cuda_rope_mode)mode, d_cs, &op_err));
}

/* Layer `layer`'s K and V rows, allocated at first use for the context
 * size of the CPU cache (positions are checked against it by eng_forward). */
static int kv_layer(struct eng_ctx *c, int layer, int64_t kd, int64_t vd, struct fl_err *err)
{
    struct gpu_kv *kv = &c->gpu->kv;
    if (!kv->k) {
        kv->n_layer = (int)c->m->hp.n_layer;
        kv->n_ctx = eng_kv_n_cells(c->kv);
        kv->k = calloc((size_t)kv->n_layer, sizeof(*kv->k));
        kv->v = calloc((size_t)kv->n_layer, sizeof(*kv->v));
        kv->kd = calloc((size_t)kv->n_layer, sizeof(*kv->kd));
        kv->vd = calloc((size_t)kv->n_layer, sizeof(*kv->vd));
        if (!kv->k || !kv->v || !kv->kd || !kv->vd)
            return fl_err_set(err, -ENOMEM, "out of memory");
    }
    if (layer < 0 || layer >= kv->n_layer)
        return fl_err_set(err, -EINVAL, "gpu: KV cache has no layer %d", layer);
    if (kv->k[layer])
        return kv->kd[layer] == kd && kv->vd[layer] == vd
                   ? 0 : fl_err_set(err, -EINVAL, "gpu: KV rows of layer %d changed size", layer);
    const size_t rows = (size_t)kv->n_ctx * sizeof(uint16_t);
    int rc = fl_cuda_malloc(c->gpu->cu, (void **)&kv->k[layer], rows * (size_t)kd, err);
    if (!rc && vd > 0) /* vd 0: the values are read from K (MLA) */
        rc = fl_cuda_malloc(c->gpu->cu, (void **)&kv->v[layer], rows * (size_t)vd, err);
    if (rc)
        return rc;
    kv->kd[layer] = kd;
    kv->vd[layer] = vd;
    return 0;
}

/* The device's cache holds the host's cells at the same rows: a token's K
 * and V rows go to its cell, one conversion per run of adjacent cells. */
static int store_rows(struct eng_ctx *c, uint16_t *d_cache, int64_t width, const float *d_src,
                      const struct eng_batch *b, struct fl_err *err)
{
    int rc = 0;
    for (int t = 0; t < b->n_tok && !rc;) {
        int u = t + 1;
        while (u < b->n_tok && b->cell[u] == b->cell[u - 1] + 1)
            u++;
        rc = fl_cuda_f32_to_f16(c->gpu->cu, d_src + (int64_t)t * width,
                                d_cache + (size_t)b->cell[t] * (size_t)width,
                                (int64_t)(u - t) * width, err);
        t = u;
    }
    return rc;
}

static void pass_kv_store(struct eng_ctx *c, int layer, const struct eng_batch *b,
                          const float *d_k, int64_t kd, const float *d_v, int64_t vd)
{
    if (!usable(c))
        return;
    struct fl_err err;
    int rc = kv_layer(c, layer, kd, vd, &err);
    struct gpu_kv *kv = &c->gpu->kv;
    for (int t = 0; !rc && t < b->n_tok; t++)
        if (b->cell[t] < 0 || b->cell[t] >= kv->n_ctx)
            rc = fl_err_set(&err, -EINVAL, "gpu: KV cell %d beyond the cache (%d)", b->cell[t],
                            kv->n_ctx);
    if (!rc)
        rc = store_rows(c, kv->k[layer], kd, d_k, b, &err);
    if (!rc && vd > 0)
        rc = store_rows(c, kv->v[layer], vd, d_v, b, &err);
    if (rc)
        op_failed(c, rc, &err);
}

/* The F16 rows of one sequence's positions 0..n-1 copied out of the cache
 * into position order (the kernel reads positions), in pass scratch. */
static const uint16_t *gather_rows(struct eng_ctx *c, const uint16_t *d_cache, int64_t width,
                                   const int32_t *d_cells, int n, struct fl_err *err)
{
    if (width % 2) {
        fl_err_set(err, -EINVAL, "gpu: KV rows of %lld halves cannot be gathered",
                   (long long)width);
        return NULL;
    }
    float *d = pass_tmp(c, (int64_t)n * (width / 2));
    if (d && fl_cuda_copy_rows(c->gpu->cu, d, (const float *)d_cache, width / 2, d_cells, NULL, n,
                               err))
        return NULL;
    return (const uint16_t *)d;
}

/* Span s's queries over its sequence's cached positions 0 .. pos0 + n - 1. */
static int attend_span(struct eng_ctx *c, int layer, const struct eng_batch *b, int s,
                       const float *d_q, int64_t q_stride, const uint16_t *d_v,
                       const struct fl_cuda_attn *a, float *d_out, int64_t out_stride,
                       struct fl_err *err)
{
    const struct gpu_kv *kv = &c->gpu->kv;
    const struct eng_span *sp = &b->spans[s];
    const int n = sp->pos0 + sp->n_tok;
    const int32_t *d_cells = c->gpu->span_cells ? c->gpu->span_cells[s] : NULL;
    if (!c->gpu->span_cells && !cells_in_place(eng_kv_seq_cells(c->kv, sp->seq), n))
        return fl_err_set(err, -EINVAL, "gpu: attention outside a pass (no cell tables)");
    const uint16_t *d_k = kv->k[layer];
    const struct eng_dev_mark m = pass_mark(c);
    if (d_cells) {
        d_k = gather_rows(c, d_k, kv->kd[layer], d_cells, n, err);
        d_v = d_k && d_v != kv->k[layer] ? gather_rows(c, d_v, kv->vd[layer], d_cells, n, err)
                                         : d_k;
        if (!usable(c)) /* the upload or the scratch failed: the pass reports it */
            return 0;
        if (!d_k || !d_v)
            return -EINVAL;
    }
    int rc = fl_cuda_attention(c->gpu->cu, d_q, q_stride, sp->n_tok, sp->pos0, d_k, d_v, a, d_out,
                               out_stride, err);
    pass_release(c, m);
    return rc;
}

static void pass_attention(struct eng_ctx *c, int layer, const struct eng_batch *b,
                           const float *d_q, int64_t q_stride, const struct eng_attn *p,
                           float *d_out, int64_t out_stride)
{
    if (!usable(c))
        return;
    struct fl_err err;
    const struct gpu_kv *kv = &c->gpu->kv;
    if (!kv->k || layer >= kv->n_layer || !kv->k[layer] || (!p->v_in_k && !kv->v[layer])) {
        op_failed(c, fl_err_set(&err, -EINVAL, "gpu: attention of layer %d: no cached keys",
                                layer), &err);
        return;
    }
    /* MLA's values are the first dv halves of its key rows */
    const uint16_t *d_v = p->v_in_k ? kv->k[layer] : kv->v[layer];
    const struct fl_cuda_attn a = {
        .n_head = p->n_head, .n_head_kv = p->n_head_kv, .dk = p->dk, .dv = p->dv,
        .k_row = kv->kd[layer], .v_row = p->v_in_k ? kv->kd[layer] : kv->vd[layer],
        .k_off = p->k_off, .v_off = p->v_off, .k_stride = p->k_stride, .v_stride = p->v_stride,
        .scale = p->scale, .softcap = p->softcap, .window = p->window,
        .d_sinks = p->sinks ? gpu_device_of(c->gpu, p->sinks) : NULL,
    };
    /* each span alone, over its own sequence's cells: a query's bits do
     * not depend on the other spans */
    int rc = 0;
    for (int s = 0, t0 = 0; s < b->n_spans && !rc && usable(c); t0 += b->spans[s++].n_tok)
        rc = attend_span(c, layer, b, s, d_q + (int64_t)t0 * q_stride, q_stride, d_v, &a,
                         d_out + (int64_t)t0 * out_stride, out_stride, &err);
    if (rc)
        op_failed(c, rc, &err);
}

static void pass_add(struct eng_ctx *c, float *d_y, const float *d_x, int64_t n)
{
    GPU_OP(c, fl_cuda_add(c->gpu->cu, d_y, d_x, n, &op_err));
}

static void pass_swiglu(struct eng_ctx *c, float *d_g, const float *d_u, int64_t n)
{
    GPU_OP(c, fl_cuda_swiglu(c->gpu->cu, d_g, d_u, n, &op_err));
}

static void pass_add_bias(struct eng_ctx *c, float *d_y, const struct eng_tensor *b,
                          int64_t n_rows)
{
    const float *d_b = usable(c) ? gpu_device_of(c->gpu, b) : NULL;
    GPU_OP(c, d_b ? fl_cuda_add_rows(c->gpu->cu, d_y, d_b, b->ne[0], n_rows, b->ne[0], &op_err)
                  : fl_err_set(&op_err, -EINVAL, "gpu: %s is not in VRAM", b->name));
}

/* The experts of a routed layer (ids/w on the host, d_w the weights on the
 * device; x the input on the host, or NULL when nothing read it yet): on
 * the device where --gpu-experts says, else on the CPU with the input
 * downloaded and the sum uploaded. */
static int moe_routed(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *d_x,
                      float *x, const int32_t *ids, const float *w, const float *d_w, int64_t k,
                      const struct eng_moe *e, float *d_out, struct fl_err *err)
{
    struct eng_gpu *g = c->gpu;
    const int64_t n_tok = b->n_tok, n_in = e->gate->ne[0], n_embd = e->down->ne[1];
    struct eng_expert_lists L;
    int rc = eng_moe_begin(c, layer, b, x, ids, w, k, e->gate->ne[2], &L, err);
    if (!rc && (rc = gpu_moe_device(c, layer, d_x, n_tok, &L, d_w, k, e, d_out, err)) == 0) {
        /* the CPU computes these experts (--gpu-experts cpu, or no kernel) */
        float *out = eng_scratch_f32(c, n_tok * n_embd);
        if (!x && (x = eng_scratch_f32(c, n_tok * n_in)))
            rc = fl_cuda_download(g->cu, x, d_x, sizeof(float) * (size_t)(n_tok * n_in), err);
        if (!rc)
            rc = eng_cpu_moe_experts(c, layer, x, n_tok, &L, w, k, e, out, err);
        if (!rc)
            rc = fl_cuda_upload(g->cu, d_out, out, sizeof(float) * (size_t)(n_tok * n_embd), err);
    }
    return rc < 0 ? rc : 0;
}

/* The layer's input on the host when the expert source's predictor reads it. */
static float *host_input(struct eng_ctx *c, int64_t n)
{
    return c->experts && c->experts->hidden ? eng_scratch_f32(c, n) : NULL;
}

/* The router's choices [ids | weights], and the layer's input when the host
 * needs it (the predictor reads it, or the CPU computes the experts), side
 * by side in VRAM so that one download (one wait) brings them all. */
struct route_blob {
    float *d;                  /* ids as int32, then weights, then x */
    int32_t *ids;
    float *w, *x;
    size_t pairs, nx, n;
};

static int fetch_route(struct eng_ctx *c, struct route_blob *b, const float *d_x,
                       struct fl_err *err)
{
    struct eng_gpu *g = c->gpu;
    int rc = b->x ? fl_cuda_copy_2d(g->cu, b->d + 2 * b->pairs, (int64_t)b->nx, d_x,
                                    (int64_t)b->nx, (int64_t)b->nx, 1, err) : 0;
    float *h = eng_scratch_f32(c, (int64_t)b->n);
    if (!rc)
        rc = fl_cuda_download(g->cu, h, b->d, sizeof(float) * b->n, err);
    if (rc)
        return rc;
    memcpy(b->ids, h, sizeof(int32_t) * b->pairs);
    memcpy(b->w, h + b->pairs, sizeof(float) * b->pairs);
    if (b->x)
        memcpy(b->x, h + 2 * b->pairs, sizeof(float) * b->nx);
    return 0;
}

/* Routing on the device: its choices come to the host with one download. */
static int route_on_device(struct eng_ctx *c, int layer, const struct eng_batch *b,
                           const float *d_x, const float *d_logits, const struct eng_route *r,
                           const struct eng_moe *e, float *d_out, struct fl_err *err)
{
    const int64_t n_tok = b->n_tok, k = r->k;
    struct route_blob rb = { .pairs = (size_t)(n_tok * k) };
    rb.ids = eng_scratch(c, sizeof(int32_t) * rb.pairs);
    rb.w = eng_scratch_f32(c, (int64_t)rb.pairs);
    rb.x = host_input(c, n_tok * e->gate->ne[0]);
    if (!rb.x && gpu_moe_on_cpu(c->gpu, e, n_tok))
        rb.x = eng_scratch_f32(c, n_tok * e->gate->ne[0]);
    rb.nx = rb.x ? (size_t)(n_tok * e->gate->ne[0]) : 0;
    rb.n = 2 * rb.pairs + rb.nx;
    if (!(rb.d = pass_tmp(c, (int64_t)rb.n)))
        return 0; /* failed: the pass reports it */
    const struct fl_cuda_route cr = {
        .n_expert = (int)r->n_expert, .k = (int)k, .gating = (enum fl_cuda_gating)r->gating,
        .norm = r->norm, .scale = r->scale,
        .d_sel_bias = r->sel_bias ? gpu_device_of(c->gpu, r->sel_bias) : NULL,
    };
    int rc = fl_cuda_route(c->gpu->cu, d_logits, n_tok, &cr, (int32_t *)rb.d, rb.d + rb.pairs, err);
    if (!rc)
        rc = fetch_route(c, &rb, d_x, err);
    return rc ? rc : moe_routed(c, layer, b, d_x, rb.x, rb.ids, rb.w, rb.d + rb.pairs, k, e, d_out, err);
}

/* A rule the router kernel lacks (DeepSeek-V3's expert groups): the logits
 * come to the host, which chooses. */
static int route_on_host(struct eng_ctx *c, int layer, const struct eng_batch *b,
                         const float *d_x, const float *d_logits, const struct eng_route *r,
                         const struct eng_moe *e, float *d_out, struct fl_err *err)
{
    const int64_t n_tok = b->n_tok, k = r->k, X = r->n_expert, n_in = e->gate->ne[0];
    float *logits = eng_scratch_f32(c, n_tok * X), *w = eng_scratch_f32(c, n_tok * k);
    int32_t *ids = eng_scratch(c, sizeof(int32_t) * (size_t)(n_tok * k));
    memset(logits, 0, sizeof(float) * (size_t)(n_tok * X)); /* stays so if the GPU failed */
    int rc = fl_cuda_download(c->gpu->cu, logits, d_logits, sizeof(float) * (size_t)(n_tok * X),
                              err);
    if (rc)
        return rc;
    eng_moe_route(logits, n_tok, r, ids, w);
    float *d_w = pass_tmp(c, n_tok * k);
    float *x = host_input(c, n_tok * n_in);
    if (!d_w)
        return 0;
    rc = fl_cuda_upload(c->gpu->cu, d_w, w, sizeof(float) * (size_t)(n_tok * k), err);
    if (!rc && x)
        rc = fl_cuda_download(c->gpu->cu, x, d_x, sizeof(float) * (size_t)(n_tok * n_in), err);
    return rc ? rc : moe_routed(c, layer, b, d_x, x, ids, w, d_w, k, e, d_out, err);
}

static int pass_moe(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *d_x,
                    float *d_logits, const struct eng_route *r, const struct eng_moe *e,
                    float *d_out, struct fl_err *err)
{
    if (!usable(c))
        return 0; /* the pass's end reports the failure */
    if (e->router_in) /* latent experts' models keep attention on the host (no pass here) */
        return fl_err_set(err, -EINVAL, "gpu: latent experts run in the CPU's pass");
    int rc = r->n_groups > 1 ? route_on_host(c, layer, b, d_x, d_logits, r, e, d_out, err)
                             : route_on_device(c, layer, b, d_x, d_logits, r, e, d_out, err);
    if (rc < 0)
        op_failed(c, rc, err);
    return rc < 0 ? rc : 0;
}

/* Whether the host reads t in the passes on the device (or might, through
 * the predictor or a CPU fallback): see eng_gpu_options.host_copy_unused. */
static bool host_reads(const struct eng_tensor *t, bool head_on_device)
{
    const enum fl_tensor_role r = fl_tensor_role(t->name);
    if (t->n_dims < 2)
        return true;
    if (r == FL_TENSOR_OUTPUT || r == FL_TENSOR_OUTPUT_NORM)
        return !head_on_device;
    return r == FL_TENSOR_TOKEN_EMBD || r == FL_TENSOR_NORM || r == FL_TENSOR_ROUTER ||
           r == FL_TENSOR_SEL_BIAS || r == FL_TENSOR_EXPERTS;
}

/* After the first pass on the device: the host copies nothing reads again. */
static void release_host_copies(struct eng_gpu *g, const struct eng_tensor *norm,
                                const struct eng_tensor *output)
{
    if (!g->o.host_copy_unused)
        return;
    const bool head = gpu_device_of(g, norm) && gpu_device_of(g, output);
    for (int64_t i = 0; i < g->m->n_tensors; i++) {
        const struct eng_tensor *t = &g->m->tensors[i];
        if (g->d_tensor[i] && !host_reads(t, head))
            g->o.host_copy_unused(g->o.host_copy_ctx, t);
    }
}

/* Rows idx[0..n) of d_x, in order: in place when they are adjacent (one
 * sequence's), else gathered into scratch. */
static const float *head_rows(struct eng_ctx *c, const float *d_x, const int32_t *idx, int64_t n,
                              int64_t E)
{
    const int64_t first = idx[0];
    if (idx[n - 1] == first + n - 1)
        return d_x + first * E;
    const int32_t *d_idx = (const int32_t *)pass_upload(c, (const float *)idx, n);
    float *d_rows = pass_tmp(c, n * E);
    GPU_OP(c, fl_cuda_copy_rows(c->gpu->cu, d_rows, d_x, E, d_idx, NULL, n, &op_err));
    return d_rows;
}

/* The final norm of rows idx[0..n) on the device: their scratch copy. */
static float *normed_rows(struct eng_ctx *c, const float *d_x, const int32_t *idx, int64_t n,
                          const struct eng_tensor *norm, int64_t E, float eps)
{
    const float *d_rows = head_rows(c, d_x, idx, n, E);
    float *d_h = pass_tmp(c, n * E);
    pass_rmsnorm(c, d_h, d_rows, norm, E, n, E, eps);
    return d_h;
}

static int pass_output(struct eng_ctx *c, const float *d_x, const struct eng_batch *b,
                       const struct eng_tensor *norm, const struct eng_tensor *output, float eps,
                       struct fl_err *err)
{
    struct eng_gpu *g = c->gpu;
    const int64_t E = c->m->hp.n_embd, V = c->m->hp.n_vocab, n = b->n_out, ne = b->n_embd_out;
    if (usable(c) && n + ne > 0 && gpu_device_of(g, norm) && gpu_device_of(g, output)) {
        if (n > 0) {
            const float *d_h = normed_rows(c, d_x, b->out, n, norm, E, eps);
            float *d_l = pass_tmp(c, n * V);
            const void *d_w = gpu_device_of(g, output);
            GPU_OP(c, gpu_matmul_rows(g, d_w, output->type, E, V, d_h, n, d_l,
                                      gpu_row_spans(c, n), &op_err));
            GPU_OP(c, fl_cuda_download(g->cu, b->logits, d_l, sizeof(float) * (size_t)(n * V),
                                       &op_err));
        }
        if (ne > 0) { /* embeddings: the norm's rows come back */
            const float *d_e = normed_rows(c, d_x, b->embd_out, ne, norm, E, eps);
            GPU_OP(c, fl_cuda_download(g->cu, b->embd, d_e, sizeof(float) * (size_t)(ne * E),
                                       &op_err));
        }
    } else if (usable(c) && n + ne > 0) { /* the head on the host: the hidden state comes back */
        float *x = eng_scratch_f32(c, b->n_tok * E);
        GPU_OP(c, fl_cuda_download(g->cu, x, d_x, sizeof(float) * (size_t)(b->n_tok * E),
                                   &op_err));
        if (usable(c))
            eng_cpu_backend.output(c, x, b, norm, output, eps, err);
    }
    g->span_cells = NULL; /* they were this pass's */
    int rc = eng_gpu_error(g, err);
    if (!rc && g->n_pass++ == 0)
        release_host_copies(g, norm, output);
    return rc;
}

void gpu_pass_free(struct eng_gpu *g)
{
    for (int i = 0; i < g->arena.n; i++)
        fl_cuda_free(g->cu, g->arena.block[i]);
    for (int l = 0; g->kv.k && l < g->kv.n_layer; l++) {
        fl_cuda_free(g->cu, g->kv.k[l]);
        fl_cuda_free(g->cu, g->kv.v[l]);
    }
    free(g->kv.k);
    free(g->kv.v);
    free(g->kv.kd);
    free(g->kv.vd);
    gpu_recurrent_free(g);
}

const struct eng_backend gpu_pass_backend = {
    .name = "gpu",
    .begin = pass_begin,
    .tmp = pass_tmp,
    .mark = pass_mark,
    .release = pass_release,
    .upload = pass_upload,
    .embed = pass_embed,
    .rmsnorm = pass_rmsnorm,
    .matmul = pass_matmul,
    .matmul_shared = pass_matmul_shared,
    .matmul_heads = pass_matmul_heads,
    .rope = pass_rope,
    .kv_store = pass_kv_store,
    .attention = pass_attention,
    .ssm_conv = gpu_pass_ssm_conv,
    .delta_net = gpu_pass_delta_net,
    .sigmoid_gate = gpu_pass_sigmoid_gate,
    .add = pass_add,
    .add_bias = pass_add_bias,
    .swiglu = pass_swiglu,
    .copy_2d = pass_copy_2d,
    .moe = pass_moe,
    .output = pass_output,
};
