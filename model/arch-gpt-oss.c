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

#include "model/arch.h"
#include "model/arch-prenorm.h"
#include "model/arch2-ops.h"
#include "backend/cuda/gpu-offload.h"
#include "model/ops.h"
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
    struct arch2_oai_act act;
    const struct eng_tensor *embd, *out_norm, *output;
    struct oss_layer *layers;
};

static const char *fname(const struct eng_model *m) { return gguf_name(m->gguf); }

static const struct eng_tensor *need(const struct eng_model *m, int layer, const char *name,
                                     int n_dims, int64_t a, int64_t b, int64_t c,
                                     struct fl_err *err)
{
    const int64_t ne[3] = { a, b, c };
    return eng_model_tensor(m, layer, name, true, n_dims, ne, err);
}

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

static int load_attn(const struct eng_model *m, int il, struct oss_layer *L, struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const int64_t e = hp->n_embd, nq = hp->n_head * hp->n_embd_head_k;
    const int64_t nk = hp->n_head_kv * hp->n_embd_head_k, nv = hp->n_head_kv * hp->n_embd_head_v;
    if (!(L->attn_norm = need(m, il, "attn_norm.weight", 1, e, 1, 1, err)) ||
        !(L->post_norm = need(m, il, "post_attention_norm.weight", 1, e, 1, 1, err)) ||
        !(L->wq = need(m, il, "attn_q.weight", 2, e, nq, 1, err)) ||
        !(L->bq = need(m, il, "attn_q.bias", 1, nq, 1, 1, err)) ||
        !(L->wk = need(m, il, "attn_k.weight", 2, e, nk, 1, err)) ||
        !(L->bk = need(m, il, "attn_k.bias", 1, nk, 1, 1, err)) ||
        !(L->wv = need(m, il, "attn_v.weight", 2, e, nv, 1, err)) ||
        !(L->bv = need(m, il, "attn_v.bias", 1, nv, 1, 1, err)) ||
        !(L->wo = need(m, il, "attn_output.weight", 2, hp->n_head * hp->n_embd_head_v, e, 1, err)) ||
        !(L->bo = need(m, il, "attn_output.bias", 1, e, 1, 1, err)) ||
        !(L->sinks = need(m, il, "attn_sinks.weight", 1, hp->n_head, 1, 1, err)))
        return -EINVAL;
    return 0;
}

static int load_moe(const struct eng_model *m, int il, struct oss_layer *L, struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const int64_t e = hp->n_embd, f = hp->n_ff_exp, n = hp->n_expert;
    if (!(L->router = need(m, il, "ffn_gate_inp.weight", 2, e, n, 1, err)) ||
        !(L->router_b = need(m, il, "ffn_gate_inp.bias", 1, n, 1, 1, err)) ||
        !(L->gate_exps = need(m, il, "ffn_gate_exps.weight", 3, e, f, n, err)) ||
        !(L->gate_b = need(m, il, "ffn_gate_exps.bias", 2, f, n, 1, err)) ||
        !(L->up_exps = need(m, il, "ffn_up_exps.weight", 3, e, f, n, err)) ||
        !(L->up_b = need(m, il, "ffn_up_exps.bias", 2, f, n, 1, err)) ||
        !(L->down_exps = need(m, il, "ffn_down_exps.weight", 3, f, e, n, err)) ||
        !(L->down_b = need(m, il, "ffn_down_exps.bias", 2, e, n, 1, err)))
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

/* NEOX rope with YaRN; sliding layers may have their own base (freq_base_swa). */
static int load_rope(struct eng_model *m, struct oss *a, struct fl_err *err)
{
    struct yarn_params yp;
    int rc = yarn_from_gguf(m->gguf, m->hp.arch, (int)m->hp.n_rot, &yp, NULL, err);
    if (rc)
        return rc;
    if (yarn_rope_init(&a->rope, &yp) < 0)
        return fl_err_set(err, -EINVAL, "%s: bad rope settings", fname(m));
    rc = eng_model_key_float(m, "rope.freq_base_swa", false, &yp.freq_base, err);
    if (rc)
        return rc;
    if (yarn_rope_init(&a->rope_swa, &yp) < 0)
        return fl_err_set(err, -EINVAL, "%s: bad rope.freq_base_swa", fname(m));
    a->kq_scale = 1.0f / sqrtf((float)m->hp.n_rot);
    return 0;
}

static int load_globals(struct eng_model *m, struct oss *a, struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    if (hp->n_expert < 1 || hp->n_expert_used < 1 || hp->n_ff_exp < 1)
        return fl_err_set(err, -EINVAL,
                          "%s: needs expert_count, expert_used_count and expert_feed_forward_length",
                          fname(m));
    if (hp->n_embd_head_k != hp->n_embd_head_v)
        return fl_err_set(err, -EINVAL, "%s: key_length %lld != value_length %lld", fname(m),
                          (long long)hp->n_embd_head_k, (long long)hp->n_embd_head_v);
    a->embd = eng_model_tensor(m, -1, "token_embd.weight", true, 0, NULL, err);
    a->out_norm = need(m, -1, "output_norm.weight", 1, hp->n_embd, 1, 1, err);
    a->output = need(m, -1, "output.weight", 2, hp->n_embd, hp->n_vocab, 1, err);
    if (!a->embd || !a->out_norm || !a->output)
        return -EINVAL;
    a->act = (struct arch2_oai_act){ ARCH2_OAI_ALPHA, ARCH2_OAI_LIMIT };
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
    rc = rc ? rc : load_globals(m, a, err);
    rc = rc ? rc : load_rope(m, a, err);
    if (rc)
        return rc;
    a->layers = calloc((size_t)m->hp.n_layer, sizeof(*a->layers));
    if (!a->layers)
        return fl_err_set(err, -ENOMEM, "%s: out of memory", fname(m));
    rc = load_windows(m, a, err);
    for (int il = 0; !rc && il < m->hp.n_layer; il++) {
        rc = load_attn(m, il, &a->layers[il], err);
        rc = rc ? rc : load_moe(m, il, &a->layers[il], err);
        rc = rc ? rc : check_f32(m, il, &a->layers[il], err);
    }
    return rc ? rc : eng_model_default_kv_dims(m, err);
}

/* Attention block of layer il on normed x; out [n_tok][n_embd] incl. bias. */
static void attn_block(struct eng_ctx *c, const struct oss *a, int il, const float *x,
                       const struct eng_batch *b, float *out)
{
    const struct eng_hparams *hp = &c->m->hp;
    const struct oss_layer *L = &a->layers[il];
    const int64_t n = b->n_tok, hd = hp->n_embd_head_k;
    const int64_t nq = hp->n_head * hd, nk = hp->n_head_kv * hd;
    float *q = eng_scratch_f32(c, n * nq), *k = eng_scratch_f32(c, n * nk);
    float *v = eng_scratch_f32(c, n * nk), *att = eng_scratch_f32(c, n * nq);
    float *cs = eng_scratch_f32(c, n * hp->n_rot);

    const struct eng_tensor *qkv[3] = { L->wq, L->wk, L->wv };
    eng_matmul_shared(c, 3, qkv, x, n, (float *const[3]){ q, k, v });
    eng_add_bias(q, L->bq, n);
    eng_add_bias(k, L->bk, n);
    eng_add_bias(v, L->bv, n);
    yarn_rope_table(L->window ? &a->rope_swa : &a->rope, cs, b->pos0, b->n_tok);
    eng_rope_rows(q, b->n_tok, nq, (int)hp->n_head, hd, (int)hp->n_rot, ENG_ROPE_NEOX, cs);
    eng_rope_rows(k, b->n_tok, nk, (int)hp->n_head_kv, hd, (int)hp->n_rot, ENG_ROPE_NEOX, cs);
    eng_kv_store(c->kv, il, b->pos0, b->n_tok, k, v);

    const struct eng_attn p = {
        .n_head = (int)hp->n_head, .n_head_kv = (int)hp->n_head_kv, .dk = hd, .dv = hd,
        .k_off = 0, .v_off = 0, .k_stride = hd, .v_stride = hd, .v_in_k = false,
        .scale = a->kq_scale, .softcap = 0.0f, .window = L->window,
        .sinks = (const float *)L->sinks->data,
    };
    eng_attention(c, il, q, nq, b->n_tok, b->pos0, &p, att, nq);
    eng_matmul(c, L->wo, -1, att, n, out);
    eng_add_bias(out, L->bo, n);
}

static int moe_block(struct eng_ctx *c, const struct oss *a, int il, const float *x,
                     const struct eng_batch *b, float *out, struct fl_err *err)
{
    const struct eng_hparams *hp = &c->m->hp;
    const struct oss_layer *L = &a->layers[il];
    const int64_t n = b->n_tok, k = hp->n_expert_used;
    float *logits = eng_scratch_f32(c, n * hp->n_expert);
    int32_t *ids = eng_scratch(c, sizeof(int32_t) * (size_t)(n * k));
    float *w = eng_scratch_f32(c, n * k);
    eng_matmul(c, L->router, -1, x, n, logits);
    eng_add_bias(logits, L->router_b, n);
    const struct eng_route r = {
        .n_expert = hp->n_expert, .k = k, .gating = ENG_GATING_SOFTMAX_WEIGHT,
        .norm = false, .scale = hp->expert_weights_scale, .sel_bias = NULL,
    };
    eng_moe_route(logits, n, &r, ids, w);
    const struct eng_moe moe = {
        .gate = L->gate_exps, .up = L->up_exps, .down = L->down_exps,
        .gate_b = L->gate_b, .up_b = L->up_b, .down_b = L->down_b,
        .act = arch2_act_swiglu_oai, .act_arg = &a->act,
    };
    return eng_moe_ffn(c, il, b->pos0, x, n, ids, w, k, &moe, out, err);
}

static void oss_norms(const void *arch, int il, const struct eng_tensor **attn_norm,
                      const struct eng_tensor **ffn_norm)
{
    const struct oss_layer *L = &((const struct oss *)arch)->layers[il];
    *attn_norm = L->attn_norm;
    *ffn_norm = L->post_norm;
}

static void oss_attention(struct eng_ctx *c, const void *arch, int il, const float *x,
                          const struct eng_batch *b, float *out)
{
    attn_block(c, arch, il, x, b, out);
}

static int oss_ffn(struct eng_ctx *c, const void *arch, int il, const float *x,
                   const struct eng_batch *b, float *out, struct fl_err *err)
{
    return moe_block(c, arch, il, x, b, out, err);
}

/* --- the pass on the device (backend/cuda/gpu-offload.h): the same blocks over
 * activations in VRAM; the sinks and biases are read there too --------------------- */

static int oss_gpu_tensors(const void *arch, int il, const struct eng_tensor **w)
{
    const struct oss_layer *L = &((const struct oss *)arch)->layers[il];
    const struct eng_tensor *t[] = { L->wq, L->wk, L->wv, L->wo, L->bq, L->bk, L->bv, L->bo,
                                     L->sinks, L->router, L->router_b };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        w[i] = t[i];
    return (int)(sizeof(t) / sizeof(t[0]));
}

static void oss_gpu_attention(struct eng_ctx *c, const void *arch, int il, const float *d_x,
                              const struct eng_batch *b, float *d_out)
{
    const struct oss *a = arch;
    const struct eng_hparams *hp = &c->m->hp;
    const struct oss_layer *L = &a->layers[il];
    const int64_t n = b->n_tok, hd = hp->n_embd_head_k;
    const int64_t nq = hp->n_head * hd, nk = hp->n_head_kv * hd;
    float *q = eng_gpu_tmp(c, n * nq), *k = eng_gpu_tmp(c, n * nk);
    float *v = eng_gpu_tmp(c, n * nk), *att = eng_gpu_tmp(c, n * nq);
    float *cs = eng_scratch_f32(c, n * hp->n_rot), *d_cs = eng_gpu_tmp(c, n * hp->n_rot);
    yarn_rope_table(L->window ? &a->rope_swa : &a->rope, cs, b->pos0, b->n_tok);
    eng_gpu_put(c, d_cs, cs, n * hp->n_rot);

    eng_gpu_mm(c, L->wq, d_x, n, q);
    eng_gpu_add_bias(c, q, L->bq, n);
    eng_gpu_mm(c, L->wk, d_x, n, k);
    eng_gpu_add_bias(c, k, L->bk, n);
    eng_gpu_mm(c, L->wv, d_x, n, v);
    eng_gpu_add_bias(c, v, L->bv, n);
    eng_gpu_rope_rows(c, q, b->n_tok, nq, (int)hp->n_head, hd, (int)hp->n_rot, ENG_ROPE_NEOX, d_cs);
    eng_gpu_rope_rows(c, k, b->n_tok, nk, (int)hp->n_head_kv, hd, (int)hp->n_rot, ENG_ROPE_NEOX,
                      d_cs);
    eng_gpu_kv_store(c, il, b->pos0, b->n_tok, k, nk, v, nk);
    const struct eng_attn p = {
        .n_head = (int)hp->n_head, .n_head_kv = (int)hp->n_head_kv, .dk = hd, .dv = hd,
        .k_stride = hd, .v_stride = hd, .scale = a->kq_scale, .window = L->window,
        .sinks = eng_gpu_tensor(c, L->sinks),
    };
    eng_gpu_attention(c, il, q, nq, b->n_tok, b->pos0, &p, att, nq);
    eng_gpu_mm(c, L->wo, att, n, d_out);
    eng_gpu_add_bias(c, d_out, L->bo, n);
}

static void oss_gpu_ffn(struct eng_ctx *c, const void *arch, int il, const float *d_x,
                        const struct eng_batch *b, float *d_out)
{
    const struct oss *a = arch;
    const struct eng_hparams *hp = &c->m->hp;
    const struct oss_layer *L = &a->layers[il];
    float *logits = eng_gpu_tmp(c, b->n_tok * hp->n_expert);
    eng_gpu_mm(c, L->router, d_x, b->n_tok, logits);
    eng_gpu_add_bias(c, logits, L->router_b, b->n_tok);
    const struct eng_route r = {
        .n_expert = hp->n_expert, .k = hp->n_expert_used, .gating = ENG_GATING_SOFTMAX_WEIGHT,
        .norm = false, .scale = hp->expert_weights_scale,
    };
    const struct eng_moe moe = {
        .gate = L->gate_exps, .up = L->up_exps, .down = L->down_exps,
        .gate_b = L->gate_b, .up_b = L->up_b, .down_b = L->down_b,
        .act = arch2_act_swiglu_oai, .act_arg = &a->act,
    };
    eng_gpu_moe_ffn(c, il, b->pos0, d_x, b->n_tok, logits, &r, &moe, d_out);
}

static int oss_forward(struct eng_ctx *c, const struct eng_batch *b, struct fl_err *err)
{
    const struct oss *a = c->m->arch_data;
    const struct eng_prenorm p = {
        .arch = a, .embd = a->embd, .out_norm = a->out_norm, .output = a->output,
        .n_layer = (int)c->m->hp.n_layer, .norms = oss_norms, .attention = oss_attention,
        .ffn = oss_ffn, .gpu_tensors = oss_gpu_tensors, .gpu_attention = oss_gpu_attention,
        .gpu_ffn = oss_gpu_ffn,
    };
    return eng_prenorm_forward(c, b, &p, err);
}

const struct eng_arch eng_arch_gpt_oss = {
    .name = "gpt-oss",
    .load = oss_load,
    .unload = oss_unload,
    .forward = oss_forward,
};
