/* kda.c: Kimi Delta Attention (see kda.h), over the backend's recurrent
 * ops: the short conv (three windows in one conv state) and the delta
 * rule with a per-channel decay. */
#include "model/kda.h"

#include <errno.h>
#include <stdio.h>

#include "gguf/tensor-types.h"

int64_t kda_conv_state(const struct kda_dims *d)
{
    return 3 * (d->d_conv - 1) * d->n_head * d->head_dim;
}

int64_t kda_ssm_state(const struct kda_dims *d)
{
    return (int64_t)d->n_head * d->head_dim * d->head_dim;
}

int kda_load_dims(struct eng_model *m, struct kda_dims *d, struct fl_err *err)
{
    struct eng_hparams *hp = &m->hp;
    int64_t head_dim = 0;
    int rc = eng_model_key_int(m, "kda.head_dim", true, &head_dim, err);
    rc = rc ? rc : eng_model_key_int(m, "ssm.conv_kernel", true, &hp->ssm_d_conv, err);
    if (rc)
        return rc;
    if (head_dim < 1 || head_dim > 1024 || hp->ssm_d_conv < 2 || hp->ssm_d_conv > 16)
        return fl_err_set(err, -EINVAL, "%s: bad KDA sizes (head_dim %lld, conv kernel %lld)",
                          gguf_name(m->gguf), (long long)head_dim, (long long)hp->ssm_d_conv);
    hp->ssm_n_k_head = hp->ssm_n_v_head = hp->n_head;
    hp->ssm_d_state = head_dim;
    hp->attention_host_only = "Kimi Delta Attention";
    *d = (struct kda_dims){ .n_head = (int)hp->n_head, .head_dim = head_dim,
                            .d_conv = hp->ssm_d_conv, .eps = hp->rms_eps };
    return 0;
}

bool kda_is_block(const struct eng_model *m, int layer)
{
    char key[128];
    snprintf(key, sizeof(key), "%s.attention.head_count_kv", m->hp.arch);
    const struct gguf_value *v;
    /* eng_model_load_common_hparams checked the array: block_count integers */
    return gguf_get_arr(m->gguf, key, &v) == 0 && layer >= 0 && (uint64_t)layer < v->arr.n &&
           ((const int32_t *)v->arr.elems)[layer] == 0;
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

/* A per-head vector: [1, n_head] as Kimi-Linear's files hold it, or
 * [n_head] as Kimi K3's. */
static const struct eng_tensor *per_head(struct eng_model *m, int layer, const char *name,
                                         int64_t h, struct fl_err *err)
{
    char full[96];
    snprintf(full, sizeof(full), "blk.%d.%s", layer, name);
    const struct eng_tensor *t = eng_model_find(m, full);
    const bool lead_1 = t && t->ne[0] == 1;
    return need(m, layer, name, lead_1 ? 1 : h, lead_1 ? h : 1, 1, err);
}

/* The output gate: Kimi K3's full-rank ssm_g or Kimi-Linear's pair. */
static int find_gate(struct eng_model *m, int layer, const struct kda_dims *d,
                     struct kda_tensors *t, struct fl_err *err)
{
    const int64_t e = m->hp.n_embd, hd = d->head_dim, w = d->n_head * hd;
    if (d->full_gate)
        return (t->g = need(m, layer, "ssm_g.weight", e, w, 1, err)) ? 0 : -EINVAL;
    if (!(t->g_a = need(m, layer, "ssm_g_a.weight", e, hd, 1, err)) ||
        !(t->g_b = need(m, layer, "ssm_g_b.weight", hd, w, 1, err)))
        return -EINVAL;
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
        !(t->a = per_head(m, layer, "ssm_a", h, err)) ||
        !(t->dt_bias = need(m, layer, "ssm_dt.bias", w, 1, 1, err)) ||
        find_gate(m, layer, d, t, err) ||
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
    float *fa = eng_tmp(c, n * hd), *beta = eng_tmp(c, n * d->n_head);
    float *alpha = eng_tmp(c, n * w), *gate = eng_tmp(c, n * w), *o = eng_tmp(c, n * w);
    if (t->g) {
        const struct eng_tensor *ws[3] = { t->f_a, t->g, t->beta };
        eng_matmul_shared(c, 3, ws, x, n, (float *const[3]){ fa, gate, beta });
    } else {
        float *ga = eng_tmp(c, n * hd);
        const struct eng_tensor *ws[3] = { t->f_a, t->g_a, t->beta };
        eng_matmul_shared(c, 3, ws, x, n, (float *const[3]){ fa, ga, beta });
        eng_matmul(c, t->g_b, ga, n, gate);
    }
    eng_matmul(c, t->f_b, fa, n, alpha);
    const struct eng_delta_net dn = {
        .n_k_head = d->n_head, .n_v_head = d->n_head, .d_state = hd, .per_channel = true,
        .bounded = d->bounded, .lower_bound = d->lower_bound,
        .dt_bias = t->dt_bias, .a = t->a, .eps = d->eps,
    };
    eng_delta_net(c, layer, b, qkv, alpha, beta, &dn, o);
    eng_rmsnorm(c, o, o, t->o_norm, hd, (int64_t)n * d->n_head, hd, d->eps);
    eng_sigmoid_gate(c, o, gate, w, n, false);
    eng_matmul(c, t->o, o, n, out);
}
