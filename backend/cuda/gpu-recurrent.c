/* gpu-recurrent.c: the device pass's ops for recurrent layers (Gated
 * DeltaNet, model/backend.h): each recurrent layer keeps every sequence's
 * conv window and delta-rule matrices in VRAM (the host KV cache's rs_*
 * sizes, one slot per sequence), read as zeros when a span starts at
 * position 0, as the host cache zeroes its own. Each span runs alone over
 * its own sequence's state. */
#include "backend/cuda/gpu-impl.h"

#include <errno.h>
#include <stdlib.h>

#include "model/kv-cache.h"

static bool usable(const struct eng_ctx *c)
{
    return c->gpu && !c->gpu->failed;
}

/* Sequence seq's state of layer `layer` in *out; the layer's slots of all
 * sequences are allocated on first use. */
static int state_of(struct eng_ctx *c, int layer, bool ssm, int seq, float **out,
                    struct fl_err *err)
{
    struct gpu_rs *rs = &c->gpu->rs;
    const struct eng_model *m = c->m;
    if (!rs->conv) {
        rs->n_layer = (int)m->hp.n_layer;
        rs->n_seq = eng_kv_n_seq(c->kv);
        rs->conv = calloc((size_t)rs->n_layer, sizeof(*rs->conv));
        rs->ssm = calloc((size_t)rs->n_layer, sizeof(*rs->ssm));
        if (!rs->conv || !rs->ssm)
            return fl_err_set(err, -ENOMEM, "out of memory");
    }
    const int64_t n = !m->rs_conv_dim || layer < 0 || layer >= rs->n_layer ? 0
                      : ssm ? m->rs_ssm_dim[layer] : m->rs_conv_dim[layer];
    if (n <= 0)
        return fl_err_set(err, -EINVAL, "gpu: layer %d keeps no recurrent state", layer);
    if (seq < 0 || seq >= rs->n_seq)
        return fl_err_set(err, -EINVAL, "gpu: no recurrent state for sequence %d", seq);
    float **slot = ssm ? &rs->ssm[layer] : &rs->conv[layer];
    int rc = *slot ? 0 : fl_cuda_malloc(c->gpu->cu, (void **)slot,
                                        (size_t)n * (size_t)rs->n_seq * sizeof(float), err);
    *out = *slot ? *slot + (int64_t)seq * n : NULL;
    return rc;
}

/* One layer's slot src onto slot dst, through the host (no device-to-
 * device copy in the CUDA layer: a snapshot is rare, a few MiB). */
static int copy_slot(struct eng_gpu *g, float *d_arr, int64_t n, int dst, int src, float *buf,
                     struct fl_err *err)
{
    const size_t bytes = (size_t)n * sizeof(float);
    int rc = fl_cuda_download(g->cu, buf, d_arr + (int64_t)src * n, bytes, err);
    return rc ? rc : fl_cuda_upload(g->cu, d_arr + (int64_t)dst * n, buf, bytes, err);
}

void eng_gpu_rs_copy(struct eng_gpu *g, int dst, int src)
{
    struct gpu_rs *rs = g ? &g->rs : NULL;
    if (!rs || !rs->conv || g->failed || dst == src || dst < 0 || src < 0 || dst >= rs->n_seq ||
        src >= rs->n_seq)
        return;
    struct fl_err err = { "" };
    int rc = 0;
    for (int l = 0; !rc && l < rs->n_layer; l++)
        for (int ssm = 0; !rc && ssm < 2; ssm++) {
            float *d = ssm ? rs->ssm[l] : rs->conv[l];
            const int64_t n = d ? (ssm ? g->m->rs_ssm_dim[l] : g->m->rs_conv_dim[l]) : 0;
            float *buf = n > 0 ? malloc((size_t)n * sizeof(float)) : NULL;
            rc = n <= 0 ? 0 : buf ? copy_slot(g, d, n, dst, src, buf, &err)
                                  : fl_err_set(&err, -ENOMEM, "out of memory");
            free(buf);
        }
    if (rc)
        gpu_fail(g, rc, &err);
}

void gpu_pass_ssm_conv(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *d_x,
                       const struct eng_tensor *w, int64_t state_off, float *d_out)
{
    if (!usable(c))
        return;
    struct fl_err err;
    const float *d_w = gpu_device_of(c->gpu, w);
    const int64_t width = w->ne[1];
    int rc = d_w ? 0 : fl_err_set(&err, -EINVAL, "gpu: %s is not in VRAM", w->name);
    for (int s = 0, t0 = 0; !rc && s < b->n_spans; t0 += b->spans[s++].n_tok) {
        const struct eng_span *sp = &b->spans[s];
        float *d_st = NULL;
        rc = state_of(c, layer, false, sp->seq, &d_st, &err);
        if (!rc)
            rc = fl_cuda_ssm_conv(c->gpu->cu, d_x + (int64_t)t0 * width, d_w, d_st + state_off,
                                  d_out + (int64_t)t0 * width, sp->n_tok, width, (int)w->ne[0],
                                  sp->pos0 == 0, &err);
    }
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
    /* row widths: qkv [q | k | v], alpha and beta one per value head */
    const int64_t w_qkv = (2 * (int64_t)p->n_k_head + p->n_v_head) * p->d_state;
    const int64_t w_out = (int64_t)p->n_v_head * p->d_state, w_ab = p->n_v_head;
    int rc = 0;
    if (p->per_channel || p->bounded) /* the device's kernel has one softplus decay per head */
        rc = fl_err_set(&err, -EINVAL, "gpu: the per-channel gated delta rule runs on the CPU");
    else if (!k.d_dt_bias || !k.d_a)
        rc = fl_err_set(&err, -EINVAL, "gpu: %s is not in VRAM",
                        k.d_a ? p->dt_bias->name : p->a->name);
    for (int s = 0, t0 = 0; !rc && s < b->n_spans; t0 += b->spans[s++].n_tok) {
        const struct eng_span *sp = &b->spans[s];
        float *d_st = NULL;
        rc = state_of(c, layer, true, sp->seq, &d_st, &err);
        if (!rc)
            rc = fl_cuda_delta_net(c->gpu->cu, &k, d_qkv + t0 * w_qkv, d_alpha + t0 * w_ab,
                                   d_beta + t0 * w_ab, d_st, d_out + t0 * w_out, sp->n_tok,
                                   sp->pos0 == 0, &err);
    }
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
