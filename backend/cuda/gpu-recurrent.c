/* gpu-recurrent.c: the device pass's ops for recurrent layers (Gated
 * DeltaNet, model/backend.h) over the one sequence the device pass holds:
 * each recurrent layer keeps its conv window and delta-rule matrices in
 * VRAM (the host KV cache's rs_* sizes), read as zeros when the span
 * starts at position 0, as the host cache zeroes its own. */
#include "backend/cuda/gpu-impl.h"

#include <errno.h>
#include <stdlib.h>

#include "model/kv-cache.h"

static bool usable(const struct eng_ctx *c)
{
    return c->gpu && !c->gpu->failed;
}

/* Layer `layer`'s device state in *out, allocated on first use. */
static int state_of(struct eng_ctx *c, int layer, bool ssm, float **out, struct fl_err *err)
{
    struct gpu_rs *rs = &c->gpu->rs;
    const struct eng_model *m = c->m;
    if (!rs->conv) {
        rs->n_layer = (int)m->hp.n_layer;
        rs->conv = calloc((size_t)rs->n_layer, sizeof(*rs->conv));
        rs->ssm = calloc((size_t)rs->n_layer, sizeof(*rs->ssm));
        if (!rs->conv || !rs->ssm)
            return fl_err_set(err, -ENOMEM, "out of memory");
    }
    const int64_t n = !m->rs_conv_dim || layer < 0 || layer >= rs->n_layer ? 0
                      : ssm ? m->rs_ssm_dim[layer] : m->rs_conv_dim[layer];
    if (n <= 0)
        return fl_err_set(err, -EINVAL, "gpu: layer %d keeps no recurrent state", layer);
    float **slot = ssm ? &rs->ssm[layer] : &rs->conv[layer];
    int rc = *slot ? 0 : fl_cuda_malloc(c->gpu->cu, (void **)slot, (size_t)n * sizeof(float), err);
    *out = *slot;
    return rc;
}

/* The device holds one sequence; the span continues it or starts it. */
static int one_span(const struct eng_batch *b, struct fl_err *err)
{
    return b->n_spans == 1 ? 0 : fl_err_set(err, -EINVAL, "gpu: the device pass runs one "
                                            "sequence at a time");
}

void gpu_pass_ssm_conv(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *d_x,
                       const struct eng_tensor *w, float *d_out)
{
    if (!usable(c))
        return;
    struct fl_err err;
    const float *d_w = gpu_device_of(c->gpu, w);
    float *d_st = NULL;
    int rc = one_span(b, &err);
    if (!rc && !d_w)
        rc = fl_err_set(&err, -EINVAL, "gpu: %s is not in VRAM", w->name);
    if (!rc)
        rc = state_of(c, layer, false, &d_st, &err);
    if (!rc)
        rc = fl_cuda_ssm_conv(c->gpu->cu, d_x, d_w, d_st, d_out, b->n_tok, w->ne[1],
                              (int)w->ne[0], b->spans[0].pos0 == 0, &err);
    if (rc)
        gpu_fail(c->gpu, rc, &err);
}

void gpu_pass_delta_net(struct eng_ctx *c, int layer, const struct eng_batch *b,
                        const float *d_qkv, const float *d_alpha, const float *d_beta,
                        const struct eng_delta_net *p, float *d_out)
{
    if (!usable(c))
        return;
    struct fl_err err;
    const struct fl_cuda_delta_net k = {
        .n_k_head = p->n_k_head, .n_v_head = p->n_v_head, .d = (int)p->d_state,
        .k_grouped = p->k_grouped,
        .d_dt_bias = gpu_device_of(c->gpu, p->dt_bias), .d_a = gpu_device_of(c->gpu, p->a),
        .eps = p->eps,
    };
    float *d_st = NULL;
    int rc = one_span(b, &err);
    if (!rc && (!k.d_dt_bias || !k.d_a))
        rc = fl_err_set(&err, -EINVAL, "gpu: %s is not in VRAM",
                        k.d_a ? p->dt_bias->name : p->a->name);
    if (!rc)
        rc = state_of(c, layer, true, &d_st, &err);
    if (!rc)
        rc = fl_cuda_delta_net(c->gpu->cu, &k, d_qkv, d_alpha, d_beta, d_st, d_out, b->n_tok,
                               b->spans[0].pos0 == 0, &err);
    if (rc)
        gpu_fail(c->gpu, rc, &err);
}

void gpu_pass_sigmoid_gate(struct eng_ctx *c, float *d_y, const float *d_g, int64_t width,
                           int64_t n_rows, bool per_row)
{
    struct fl_err err;
    int rc;
    if (usable(c) && (rc = fl_cuda_sigmoid_gate(c->gpu->cu, d_y, d_g, width, n_rows, per_row,
                                                 &err)))
        gpu_fail(c->gpu, rc, &err);
}

void gpu_recurrent_free(struct eng_gpu *g)
{
    for (int l = 0; g->rs.conv && l < g->rs.n_layer; l++) {
        fl_cuda_free(g->cu, g->rs.conv[l]);
        fl_cuda_free(g->cu, g->rs.ssm[l]);
    }
    free(g->rs.conv);
    free(g->rs.ssm);
}
