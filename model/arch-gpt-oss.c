/* arch-gpt-oss.c: OpenAI's gpt-oss MoE (llama.cpp arch "gpt-oss",
 * src/models/openai-moe.cpp).
 *
 * Blocks: RMSNorm -> GQA attention with biases on q/k/v/o, NEOX rope with
 * YaRN, a learned per-head sink logit in every softmax denominator, and a
 * sliding window on some layers -> residual -> RMSNorm (post_attention_norm,
 * the pre-FFN norm) -> MoE with biased router and experts, experts picked by
 * raw router logit and weighted by a softmax over the k picked, SwiGLU-OAI
 * activation -> residual.
 *
 * Sliding-window layers: llama.cpp's pattern with period
 * attention.sliding_window_pattern (2 when absent): layer il uses the window
 * iff il % period < period - 1 (so even layers of period 2), all layers when
 * the period is 0. A key at p0 is hidden from the query at p1 iff
 * p1 - p0 >= sliding_window. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "model/activation.h"
#include "gguf/tensor-types.h"
#include "model/arch-prenorm.h"
#include "model/arch.h"
#include "model/yarn.h"

struct oss_layer {
    const struct eng_tensor *attn_norm, *post_norm;
    const struct eng_tensor *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo, *sinks;
    const struct eng_tensor *router, *router_b;
    const struct eng_tensor *gate_exps, *up_exps, *down_exps, *gate_b, *up_b, *down_b;
    int window; /* 0: full attention */
};

struct oss {
    struct yarn_rope rope, rope_swa;
    float kq_scale;
    struct oss_layer *layers;
};

static const char *fname(const struct eng_model *m) { return gguf_name(m->gguf); }

/* All of these are added/used as float arrays. */
static int check_f32(const struct eng_model *m, int il, const struct oss_layer *L,
                     struct fl_err *err)
{
    const struct eng_tensor *f[] = { L->attn_norm, L->post_norm, L->bq, L->bk, L->bv, L->bo,
                                     L->sinks, L->router_b, L->gate_b, L->up_b, L->down_b };
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
        if (f[i]->type != FL_TYPE_F32)
            return fl_err_set(err, -EINVAL, "%s: blk.%d: %s must be F32", fname(m), il, f[i]->name);
    return 0;
}

static int load_attn(struct eng_model *m, int il, struct oss_layer *L, struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const int64_t e = hp->n_embd, nq = hp->n_head * hp->n_embd_head_k;
    const int64_t nk = hp->n_head_kv * hp->n_embd_head_k, nv = hp->n_head_kv * hp->n_embd_head_v;
    if (!(L->attn_norm = eng_model_need(m, il, "attn_norm.weight", 1, e, 1, 1, err)) ||
        !(L->post_norm = eng_model_need(m, il, "post_attention_norm.weight", 1, e, 1, 1, err)) ||
        !(L->wq = eng_model_need(m, il, "attn_q.weight", 2, e, nq, 1, err)) ||
        !(L->bq = eng_model_need(m, il, "attn_q.bias", 1, nq, 1, 1, err)) ||
        !(L->wk = eng_model_need(m, il, "attn_k.weight", 2, e, nk, 1, err)) ||
        !(L->bk = eng_model_need(m, il, "attn_k.bias", 1, nk, 1, 1, err)) ||
        !(L->wv = eng_model_need(m, il, "attn_v.weight", 2, e, nv, 1, err)) ||
        !(L->bv = eng_model_need(m, il, "attn_v.bias", 1, nv, 1, 1, err)) ||
        !(L->wo = eng_model_need(m, il, "attn_output.weight", 2, hp->n_head * hp->n_embd_head_v, e,
                                 1, err)) ||
        !(L->bo = eng_model_need(m, il, "attn_output.bias", 1, e, 1, 1, err)) ||
        !(L->sinks = eng_model_need(m, il, "attn_sinks.weight", 1, hp->n_head, 1, 1, err)))
        return -EINVAL;
    return 0;
}

static int load_moe(struct eng_model *m, int il, struct oss_layer *L, struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const int64_t e = hp->n_embd, f = hp->n_ff_exp, n = hp->n_expert;
    if (!(L->router = eng_model_need(m, il, "ffn_gate_inp.weight", 2, e, n, 1, err)) ||
        !(L->router_b = eng_model_need(m, il, "ffn_gate_inp.bias", 1, n, 1, 1, err)) ||
        !(L->gate_exps = eng_model_need(m, il, "ffn_gate_exps.weight", 3, e, f, n, err)) ||
        !(L->gate_b = eng_model_need(m, il, "ffn_gate_exps.bias", 2, f, n, 1, err)) ||
        !(L->up_exps = eng_model_need(m, il, "ffn_up_exps.weight", 3, e, f, n, err)) ||
        !(L->up_b = eng_model_need(m, il, "ffn_up_exps.bias", 2, f, n, 1, err)) ||
        !(L->down_exps = eng_model_need(m, il, "ffn_down_exps.weight", 3, f, e, n, err)) ||
        !(L->down_b = eng_model_need(m, il, "ffn_down_exps.bias", 2, e, n, 1, err)))
        return -EINVAL;
    return 0;
}

/* sliding_window (required, as llama.cpp) and the layer pattern. */
static int load_windows(struct eng_model *m, struct oss *a, struct fl_err *err)
{
    int64_t window = 0, period = 2;
    int rc = eng_model_key_int(m, "attention.sliding_window", true, &window, err);
    rc = rc ? rc : eng_model_key_int(m, "attention.sliding_window_pattern", false, &period, err);
    if (rc)
        return rc;
    if (window < 1 || window > INT32_MAX || period < 0 || period > m->hp.n_layer)
        return fl_err_set(err, -EINVAL, "%s: bad sliding window %lld / pattern %lld", fname(m),
                          (long long)window, (long long)period);
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        bool swa = period == 0 || il % period < period - 1;
        a->layers[il].window = swa ? (int)window : 0;
    }
    return 0;
}

/* NEOX rope with YaRN; sliding layers may have their own base (freq_base_swa).
 * As llama.cpp's, the run's --rope-freq-base and scale reach the full
 * attention layers only: sliding ones keep the file's base and scale (its
 * rope_freq_*_train_swa) with the run's YaRN mix and attention factor. */
static int load_rope(struct eng_model *m, struct oss *a, struct fl_err *err)
{
    struct yarn_params yp, file;
    int rc = yarn_from_gguf(m->gguf, m->hp.arch, (int)m->hp.n_rot, &m->rope_ctx, &yp, NULL, err);
    rc = rc ? rc : yarn_from_gguf(m->gguf, m->hp.arch, (int)m->hp.n_rot, NULL, &file, NULL, err);
    if (rc)
        return rc;
    if (yarn_rope_init(&a->rope, &yp) < 0)
        return fl_err_set(err, -EINVAL, "%s: bad rope settings", fname(m));
    yp.freq_base = file.freq_base;
    yp.freq_scale = file.freq_scale;
    rc = eng_model_key_float(m, "rope.freq_base_swa", false, &yp.freq_base, err);
    if (rc)
        return rc;
    if (yarn_rope_init(&a->rope_swa, &yp) < 0)
        return fl_err_set(err, -EINVAL, "%s: bad rope.freq_base_swa", fname(m));
    a->kq_scale = 1.0f / sqrtf((float)m->hp.n_rot);
    return 0;
}

static int load_globals(struct eng_model *m, struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    if (hp->n_expert < 1 || hp->n_expert_used < 1 || hp->n_ff_exp < 1)
        return fl_err_set(err, -EINVAL,
                          "%s: needs expert_count, expert_used_count and expert_feed_forward_length",
                          fname(m));
    if (hp->n_embd_head_k != hp->n_embd_head_v)
        return fl_err_set(err, -EINVAL, "%s: key_length %lld != value_length %lld", fname(m),
                          (long long)hp->n_embd_head_k, (long long)hp->n_embd_head_v);
    m->embd = eng_model_tensor(m, -1, "token_embd.weight", true, 0, NULL, err);
    m->out_norm =
        m->embd ? eng_model_need(m, -1, "output_norm.weight", 1, hp->n_embd, 1, 1, err) : NULL;
    m->output = m->out_norm
                    ? eng_model_need(m, -1, "output.weight", 2, hp->n_embd, hp->n_vocab, 1, err)
                    : NULL;
    if (!m->output)
        return -EINVAL;
    return 0;
}

static void oss_unload(struct eng_model *m)
{
    struct oss *a = m->arch_data;
    if (a)
        free(a->layers);
    free(a);
    m->arch_data = NULL;
}

static int oss_load(struct eng_model *m, struct fl_err *err)
{
    struct oss *a = calloc(1, sizeof(*a));
    if (!a)
        return fl_err_set(err, -ENOMEM, "%s: out of memory", fname(m));
    m->arch_data = a;
    int rc = eng_model_load_common_hparams(m, err);
    rc = rc ? rc : load_globals(m, err);
    rc = rc ? rc : load_rope(m, a, err);
    if (rc)
        return rc;
    a->layers = calloc((size_t)m->hp.n_layer, sizeof(*a->layers));
    if (!a->layers)
        return fl_err_set(err, -ENOMEM, "%s: out of memory", fname(m));
    rc = load_windows(m, a, err);
    for (int il = 0; !rc && il < m->hp.n_layer; il++) {
        const struct oss_layer *L = &a->layers[il];
        rc = load_attn(m, il, &a->layers[il], err);
        rc = rc ? rc : load_moe(m, il, &a->layers[il], err);
        rc = rc ? rc : check_f32(m, il, &a->layers[il], err);
        rc = rc ? rc : eng_model_set_router(m, il, L->router, L->router_b, L->post_norm, err);
    }
    return rc ? rc : eng_model_default_kv_dims(m, err);
}

/* Attention of layer il on normed x: biased q/k/v/o, YaRN NEOX rope (the
 * sliding layers' own base), sinks, the window; out [n_tok][n_embd]. */
static void oss_attention(struct eng_ctx *c, const struct eng_prenorm *p, int il,
                          const float *x, const struct eng_batch *b, float *out)
{
    const struct eng_hparams *hp = &c->m->hp;
    const struct oss *a = p->arch;
    const struct oss_layer *L = &a->layers[il];
    const int64_t n = b->n_tok, hd = hp->n_embd_head_k;
    const int64_t nq = hp->n_head * hd, nk = hp->n_head_kv * hd;
    float *q = eng_tmp(c, n * nq), *k = eng_tmp(c, n * nk);
    float *v = eng_tmp(c, n * nk), *att = eng_tmp(c, n * nq);
    float *cs = eng_scratch_f32(c, n * hp->n_rot);
    yarn_rope_table(L->window ? &a->rope_swa : &a->rope, cs, b->pos, b->n_tok);
    const float *d_cs = eng_upload(c, cs, n * hp->n_rot);

    const struct eng_tensor *qkv[3] = { L->wq, L->wk, L->wv };
    eng_matmul_shared(c, 3, qkv, x, n, (float *const[3]){ q, k, v });
    eng_add_bias(c, q, L->bq, n);
    eng_add_bias(c, k, L->bk, n);
    eng_add_bias(c, v, L->bv, n);
    eng_rope(c, q, b->n_tok, nq, (int)hp->n_head, hd, (int)hp->n_rot, ENG_ROPE_NEOX, d_cs);
    eng_rope(c, k, b->n_tok, nk, (int)hp->n_head_kv, hd, (int)hp->n_rot, ENG_ROPE_NEOX, d_cs);
    eng_kv_store(c, il, b, k, nk, v, nk);
    const struct eng_attn at = {
        .n_head = (int)hp->n_head, .n_head_kv = (int)hp->n_head_kv, .dk = hd, .dv = hd,
        .k_stride = hd, .v_stride = hd, .scale = a->kq_scale, .window = L->window,
        .sinks = L->sinks,
    };
    eng_attention(c, il, b, q, nq, &at, att, nq);
    eng_matmul(c, L->wo, att, n, out);
    eng_add_bias(c, out, L->bo, n);
}

/* Experts picked by raw (biased) router logit, weighted by a softmax over
 * the k picked; biased SwiGLU-OAI experts. */
static int oss_ffn(struct eng_ctx *c, const struct eng_prenorm *p, int il, const float *x,
                   const struct eng_batch *b, float *out, struct fl_err *err)
{
    const struct eng_hparams *hp = &c->m->hp;
    const struct oss_layer *L = &((const struct oss *)p->arch)->layers[il];
    float *logits = eng_tmp(c, b->n_tok * hp->n_expert);
    eng_matmul(c, L->router, x, b->n_tok, logits);
    eng_add_bias(c, logits, L->router_b, b->n_tok);
    const struct eng_route r = {
        .n_expert = hp->n_expert, .k = hp->n_expert_used, .gating = ENG_GATING_SOFTMAX_WEIGHT,
        .norm = false, .scale = hp->expert_weights_scale,
    };
    const struct eng_moe moe = {
        .gate = L->gate_exps, .up = L->up_exps, .down = L->down_exps,
        .gate_b = L->gate_b, .up_b = L->up_b, .down_b = L->down_b,
        .act = { .act = ENG_ACT_SWIGLU_OAI, .alpha = ENG_OAI_ALPHA, .limit = ENG_OAI_LIMIT },
    };
    return eng_moe(c, il, b, x, logits, &r, &moe, out, err);
}

static void oss_norms(const void *arch, int il, const struct eng_tensor **attn_norm,
                      const struct eng_tensor **ffn_norm)
{
    const struct oss_layer *L = &((const struct oss *)arch)->layers[il];
    *attn_norm = L->attn_norm;
    *ffn_norm = L->post_norm;
}

static int oss_forward(struct eng_ctx *c, const struct eng_batch *b, struct fl_err *err)
{
    const struct eng_prenorm p = {
        .arch = c->m->arch_data, .n_layer = (int)c->m->hp.n_layer, .norms = oss_norms,
        .attention = oss_attention, .ffn = oss_ffn,
    };
    return eng_prenorm_forward(c, b, &p, err);
}

const struct eng_arch eng_arch_gpt_oss = {
    .name = "gpt-oss",
    .load = oss_load,
    .unload = oss_unload,
    .forward = oss_forward,
};
