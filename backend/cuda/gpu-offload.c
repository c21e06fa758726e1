/* gpu-offload.c: which backend runs a pass when a GPU is open, and the
 * CPU's pass with the GPU taking what it holds (backend/cuda/gpu.h).
 *
 * The offload backend is the CPU's table with three ops replaced: a product
 * with a weight in VRAM runs there (its input uploaded, its output brought
 * back: a round trip per product, correct first; decode activations are
 * small), and a MoE layer's experts go where eng_gpu_decide says. When the
 * GPU fails, the product is computed on the CPU and the pass reports the
 * error at its end. */
#include "backend/cuda/gpu-impl.h"

#include "backend/cpu/cpu-backend.h"
#include "gguf/tensor-types.h"

static bool usable(const struct eng_gpu *g)
{
    return g && !g->failed;
}

const struct eng_backend *eng_gpu_pick(struct eng_ctx *c)
{
    struct eng_gpu *g = c->gpu;
    /* once the KV cache is in VRAM every later pass must run there too: a
     * failed GPU then fails the pass instead of the CPU reading an empty cache.
     * A cache kept on the host keeps its attention there */
    if (g->device_pass || (usable(g) && c->kv && g->trunk_in_vram && !g->o.kv_on_host))
        return &gpu_pass_backend;
    return &g->offload;
}

/* y = w . x on the device when w is in VRAM; false when the CPU must. */
static bool device_matmul(struct eng_gpu *g, const struct eng_tensor *w, int64_t slice,
                          const float *x, int64_t n_tok, float *y, const int32_t *row_span)
{
    const uint8_t *d_w = g->failed ? NULL : gpu_device_of(g, w);
    if (!d_w)
        return false;
    const int64_t n_in = w->ne[0], n_out = w->ne[1];
    if (slice >= 0)
        d_w += (size_t)slice * (size_t)n_out * fl_row_size(w->type, n_in);
    struct fl_err err;
    void *d_x, *d_y;
    int rc = gpu_dbuf(g, B_X, sizeof(float) * (size_t)(n_tok * n_in), &d_x, &err);
    if (!rc)
        rc = gpu_dbuf(g, B_Y, sizeof(float) * (size_t)(n_tok * n_out), &d_y, &err);
    if (!rc)
        rc = fl_cuda_upload(g->cu, d_x, x, sizeof(float) * (size_t)(n_tok * n_in), &err);
    if (!rc)
        rc = gpu_matmul_rows(g, d_w, w->type, n_in, n_out, d_x, n_tok, d_y, row_span, &err);
    if (!rc)
        rc = fl_cuda_download(g->cu, y, d_y, sizeof(float) * (size_t)(n_tok * n_out), &err);
    if (rc) {
        gpu_fail(g, rc, &err);
        return false; /* the CPU computes it; the pass then reports the error */
    }
    g->n_matmul++;
    return true;
}

static void offload_matmul(struct eng_ctx *c, const struct eng_tensor *w, int64_t slice,
                           const float *x, int64_t n_tok, float *y)
{
    if (!device_matmul(c->gpu, w, slice, x, n_tok, y, gpu_row_spans(c, n_tok)))
        eng_cpu_backend.matmul(c, w, slice, x, n_tok, y);
}

/* One product at a time: each goes where its weight is (the same bits as
 * the CPU's shared products). */
static void offload_matmul_shared(struct eng_ctx *c, int n, const struct eng_tensor *const *w,
                                  const float *x, int64_t n_tok, float *const *y)
{
    for (int i = 0; i < n; i++)
        offload_matmul(c, w[i], -1, x, n_tok, y[i]);
}

static int offload_moe(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *x,
                       float *logits, const struct eng_route *r, const struct eng_moe *e,
                       float *out, struct fl_err *err)
{
    const int64_t n = b->n_tok, k = r->k;
    float *w = eng_scratch_f32(c, n * k);
    int32_t *ids = eng_scratch(c, sizeof(int32_t) * (size_t)(n * k));
    eng_moe_route(logits, n, r, ids, w);
    struct eng_expert_lists L;
    int rc = eng_moe_begin(c, layer, b, eng_moe_router_in(e, x), ids, w, k, e->gate->ne[2], &L,
                           err);
    /* experts in VRAM, or brought there by --gpu-experts */
    if (!rc && (rc = gpu_moe_host(c, layer, x, n, &L, w, k, e, out, err)) != 0)
        return rc < 0 ? rc : 0;
    return rc ? rc : eng_cpu_moe_experts(c, layer, x, n, &L, w, k, e, out, err);
}

/* A product the CPU redid after the GPU failed is still the pass's error. */
static int offload_output(struct eng_ctx *c, const float *x, const struct eng_batch *b,
                          const struct eng_tensor *norm, const struct eng_tensor *w, float eps,
                          struct fl_err *err)
{
    int rc = eng_cpu_backend.output(c, x, b, norm, w, eps, err);
    return rc ? rc : eng_gpu_error(c->gpu, err);
}

void gpu_offload_init(struct eng_gpu *g)
{
    g->offload = eng_cpu_backend;
    g->offload.name = "cpu+gpu";
    g->offload.matmul = offload_matmul;
    g->offload.matmul_shared = offload_matmul_shared;
    g->offload.moe = offload_moe;
    g->offload.output = offload_output;
}
