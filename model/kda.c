/* kda.c: Kimi Delta Attention (see kda.h), over the backend's recurrent
 * ops: the short conv (three windows in one conv state) and the delta
 * rule with a per-channel decay. */
#include "model/kda.h"

#include <errno.h>

#include "gguf/tensor-types.h"

int64_t kda_conv_state(const struct kda_dims *d)
{
    return 3 * (d->d_conv - 1) * d->n_head * d->head_dim;
}

int64_t kda_ssm_state(const struct kda_dims *d)
{
    return (int64_t)d->n_head * d->head_dim * d->head_dim;
}

static const struct eng_tensor *need(struct eng_model *m, int layer, const char *name,
                                     int64_t a, int64_t b, int64_t c, struct fl_err *err)
{
    const int64_t ne[4] = { a, b, c, 1 };
    return eng_model_tensor(m, layer, name, true, 4, ne, err);
}

/* The conv kernels are [d_conv, 1, width] in the file; the op reads
 * [d_conv, width]: a view of the same floats. */
static int conv_view(struct eng_model *m, int layer, const char *name, const struct kda_dims *d,
                     struct eng_tensor *view, struct fl_err *err)
{
    const int64_t w = d->n_head * d->head_dim;
    const struct eng_tensor *t = need(m, layer, name, d->d_conv, 1, w, err);
    if (!t)
        return -EINVAL;
    if (t->type != FL_TYPE_F32)
        return fl_err_set(err, -EINVAL, "%s: %s must be F32", gguf_name(m->gguf), t->name);
    *view = *t;
    view->n_dims = 2;
    view->ne[1] = w;
    view->ne[2] = 1;
    return 0;
}

static int check_f32(struct eng_model *m, const struct kda_tensors *t, struct fl_err *err)
{
    const struct eng_tensor *f32s[] = { t->a, t->dt_bias, t->o_norm };
    for (size_t i = 0; i < sizeof(f32s) / sizeof(f32s[0]); i++)
        if (f32s[i]->type != FL_TYPE_F32)
            return fl_err_set(err, -EINVAL, "%s: %s must be F32", gguf_name(m->gguf),
                              f32s[i]->name);
    return 0;
}

int kda_find_tensors(struct eng_model *m, int layer, const struct kda_dims *d,
                     struct kda_tensors *t, struct fl_err *err)
{
    const int64_t e = m->hp.n_embd, hd = d->head_dim, w = d->n_head * hd, h = d->n_head;
    int rc = conv_view(m, layer, "ssm_conv1d_q.weight", d, &t->conv[0], err);
    rc = rc ? rc : conv_view(m, layer, "ssm_conv1d_k.weight", d, &t->conv[1], err);
    rc = rc ? rc : conv_view(m, layer, "ssm_conv1d_v.weight", d, &t->conv[2], err);
    if (rc)
        return rc;
    if (!(t->wq = need(m, layer, "attn_q.weight", e, w, 1, err)) ||
        !(t->wk = need(m, layer, "attn_k.weight", e, w, 1, err)) ||
        !(t->wv = need(m, layer, "attn_v.weight", e, w, 1, err)) ||
        !(t->f_a = need(m, layer, "ssm_f_a.weight", e, hd, 1, err)) ||
        !(t->f_b = need(m, layer, "ssm_f_b.weight", hd, w, 1, err)) ||
        !(t->beta = need(m, layer, "ssm_beta.weight", e, h, 1, err)) ||
        !(t->a = need(m, layer, "ssm_a", 1, h, 1, err)) ||
        !(t->dt_bias = need(m, layer, "ssm_dt.bias", w, 1, 1, err)) ||
        !(t->g_a = need(m, layer, "ssm_g_a.weight", e, hd, 1, err)) ||
        !(t->g_b = need(m, layer, "ssm_g_b.weight", hd, w, 1, err)) ||
        !(t->o_norm = need(m, layer, "ssm_norm.weight", hd, 1, 1, err)) ||
        !(t->o = need(m, layer, "attn_output.weight", w, e, 1, err)))
        return -EINVAL;
    return check_f32(m, t, err);
}

/* qkv [n][q | k | v] after the three convs, each from its own window. */
static float *convolve(struct eng_ctx *c, int layer, const struct kda_dims *d,
                       const struct kda_tensors *t, const float *x, const struct eng_batch *b)
{
    const int n = b->n_tok;
    const int64_t w = d->n_head * d->head_dim, window = (d->d_conv - 1) * w;
    float *qkv = eng_tmp(c, n * 3 * w), *proj[3], *conv = eng_tmp(c, n * w);
    for (int i = 0; i < 3; i++)
        proj[i] = eng_tmp(c, n * w);
    const struct eng_tensor *ws[3] = { t->wq, t->wk, t->wv };
    eng_matmul_shared(c, 3, ws, x, n, proj);
    for (int i = 0; i < 3; i++) {
        eng_ssm_conv(c, layer, b, proj[i], &t->conv[i], i * window, conv);
        eng_copy_2d(c, qkv + i * w, 3 * w, conv, w, w, n);
    }
    return qkv;
}

void kda_attention(struct eng_ctx *c, int layer, const struct kda_dims *d,
                   const struct kda_tensors *t, const float *x, const struct eng_batch *b,
                   float *out)
{
    const int n = b->n_tok;
    const int64_t hd = d->head_dim, w = d->n_head * hd;
    float *qkv = convolve(c, layer, d, t, x, b);
    float *fa = eng_tmp(c, n * hd), *ga = eng_tmp(c, n * hd), *beta = eng_tmp(c, n * d->n_head);
    const struct eng_tensor *ws[3] = { t->f_a, t->g_a, t->beta };
    eng_matmul_shared(c, 3, ws, x, n, (float *const[3]){ fa, ga, beta });
    float *alpha = eng_tmp(c, n * w), *gate = eng_tmp(c, n * w), *o = eng_tmp(c, n * w);
    eng_matmul(c, t->f_b, fa, n, alpha);
    eng_matmul(c, t->g_b, ga, n, gate);
    const struct eng_delta_net dn = {
        .n_k_head = d->n_head, .n_v_head = d->n_head, .d_state = hd, .per_channel = true,
        .dt_bias = t->dt_bias, .a = t->a, .eps = d->eps,
    };
    eng_delta_net(c, layer, b, qkv, alpha, beta, &dn, o);
    eng_rmsnorm(c, o, o, t->o_norm, hd, (int64_t)n * d->n_head, hd, d->eps);
    eng_sigmoid_gate(c, o, gate, w, n, false);
    eng_matmul(c, t->o, o, n, out);
}
