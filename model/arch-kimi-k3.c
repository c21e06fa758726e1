/* arch-kimi-k3.c: Kimi K3 (llama.cpp arch "kimi-k3", src/models/kimi-k3.cpp).
 *
 * Kimi-Linear's stack (model/arch-deepseek2.c: Kimi Delta Attention blocks
 * where head_count_kv is 0, MLA without rope in the others, a dense lead,
 * sigmoid routing with a selection bias) with five changes:
 *   - residual attention (attn_res.block_size > 0): every block-th block
 *     banks its input and restarts the stream; every norm reads a
 *     softmax-weighted mix of the banked inputs and the stream
 *     (struct eng_res_attn, run by the shared layer loop);
 *   - latent experts: the routed experts run at expert_latent_length
 *     (ffn_routed_down before them, an optional RMSNorm and ffn_routed_up
 *     after), routed by the full-width input; shared experts stay full;
 *   - situ instead of SwiGLU in every FFN (model/activation.h);
 *   - an optional sigmoid output gate on MLA (attn_gate, model/mla.h);
 *   - KDA's full-rank output gate ssm_g and, with kda.gate_lower_bound, the
 *     bounded decay (model/kda.h).
 * Routing renormalises only where expert_weights_norm says so. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gguf/tensor-types.h"
#include "model/arch-prenorm.h"
#include "model/arch.h"
#include "model/kda.h"
#include "model/mla.h"

struct k3_layer {
    const struct eng_tensor *attn_norm, *ffn_norm;
    bool recurrent;
    struct kda_tensors kda;
    struct mla_tensors mla;
    const struct eng_tensor *gate, *up, *down;                 /* dense blocks */
    const struct eng_tensor *router, *sel_bias;                /* MoE blocks */
    const struct eng_tensor *gate_exps, *up_exps, *down_exps;  /* at the latent width */
    const struct eng_tensor *routed_down, *routed_up, *routed_norm; /* NULL: no latent */
    const struct eng_tensor *gate_sh, *up_sh, *down_sh;        /* NULL: no shared experts */
};

struct k3 {
    struct kda_dims kda;
    struct mla_dims d;
    float kq_scale;
    struct eng_gated situ;              /* every FFN's activation */
    int64_t latent;                     /* the experts' width */
    bool latent_proj;                   /* expert_latent_length given: routed_down/up */
    struct eng_res_attn res;
    const struct eng_tensor **scores;   /* [2][n_layer]: attn's, then ffn's */
    struct k3_layer *layers;
};

static const char *fname(const struct eng_model *m) { return gguf_name(m->gguf); }

/* An optional tensor: NULL when absent, else shape-checked like need(). */
static int maybe(struct eng_model *m, int layer, const char *name, int n_dims, int64_t a,
                 int64_t b, const struct eng_tensor **out, struct fl_err *err)
{
    char full[96];
    snprintf(full, sizeof(full), "blk.%d.%s", layer, name);
    const bool there = eng_model_find(m, full) != NULL;
    *out = there ? eng_model_need(m, layer, name, n_dims, a, b, 1, err) : NULL;
    return there && !*out ? -EINVAL : 0;
}

/* The latent pair and norm, and the shared experts (all three or none). */
static int load_moe_edges(struct eng_model *m, const struct k3 *a, int il, struct k3_layer *L,
                          struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const int64_t e = hp->n_embd, la = a->latent, fs = hp->n_ff_exp * hp->n_expert_shared;
    if (a->latent_proj &&
        (!(L->routed_down = eng_model_need(m, il, "ffn_routed_down.weight", 2, e, la, 1, err)) ||
         !(L->routed_up = eng_model_need(m, il, "ffn_routed_up.weight", 2, la, e, 1, err)) ||
         maybe(m, il, "ffn_routed_norm.weight", 1, la, 1, &L->routed_norm, err)))
        return -EINVAL;
    if (maybe(m, il, "ffn_gate_shexp.weight", 2, e, fs, &L->gate_sh, err))
        return -EINVAL;
    if (L->gate_sh &&
        (!(L->up_sh = eng_model_need(m, il, "ffn_up_shexp.weight", 2, e, fs, 1, err)) ||
         !(L->down_sh = eng_model_need(m, il, "ffn_down_shexp.weight", 2, fs, e, 1, err))))
        return -EINVAL;
    const struct eng_tensor *f32s[] = { L->routed_norm, L->sel_bias };
    for (size_t i = 0; i < 2; i++)
        if (f32s[i] && f32s[i]->type != FL_TYPE_F32)
            return fl_err_set(err, -EINVAL, "%s: %s must be F32", fname(m), f32s[i]->name);
    return 0;
}

static int load_moe(struct eng_model *m, const struct k3 *a, int il, struct k3_layer *L,
                    struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const int64_t e = hp->n_embd, f = hp->n_ff_exp, n = hp->n_expert, la = a->latent;
    if (n < 1 || hp->n_expert_used < 1 || f < 1)
        return fl_err_set(err, -EINVAL, "%s: MoE block %d needs expert_count, expert_used_count "
                          "and expert_feed_forward_length", fname(m), il);
    if (!(L->router = eng_model_need(m, il, "ffn_gate_inp.weight", 2, e, n, 1, err)) ||
        !(L->sel_bias = eng_model_need(m, il, "exp_probs_b.bias", 1, n, 1, 1, err)) ||
        !(L->gate_exps = eng_model_need(m, il, "ffn_gate_exps.weight", 3, la, f, n, err)) ||
        !(L->up_exps = eng_model_need(m, il, "ffn_up_exps.weight", 3, la, f, n, err)) ||
        !(L->down_exps = eng_model_need(m, il, "ffn_down_exps.weight", 3, f, la, n, err)))
        return -EINVAL;
    return load_moe_edges(m, a, il, L, err);
}

static int load_layer(struct eng_model *m, struct k3 *a, int il, struct k3_layer *L,
                      struct fl_err *err)
{
    const int64_t e = m->hp.n_embd, nl = m->hp.n_layer;
    if (!(L->attn_norm = eng_model_need(m, il, "attn_norm.weight", 1, e, 1, 1, err)) ||
        !(L->ffn_norm = eng_model_need(m, il, "ffn_norm.weight", 1, e, 1, 1, err)))
        return -EINVAL;
    if (a->res.block > 0 &&
        (!(a->scores[il] = eng_model_need(m, il, "attn_res_score.weight", 1, e, 1, 1, err)) ||
         !(a->scores[nl + il] = eng_model_need(m, il, "ffn_res_score.weight", 1, e, 1, 1, err))))
        return -EINVAL;
    int rc = L->recurrent ? kda_find_tensors(m, il, &a->kda, &L->kda, err)
                          : mla_find_tensors(m, il, &a->d, &L->mla, err);
    if (rc)
        return rc;
    rc = il < m->hp.n_layer_dense_lead ? eng_model_dense_ffn(m, il, &L->gate, &L->up, &L->down, err)
                                       : load_moe(m, a, il, L, err);
    return rc ? rc : L->router ? eng_model_set_router(m, il, L->router, NULL, L->ffn_norm, err) : 0;
}

/* K3's own keys: the residual attention's block, situ's betas, the latent
 * width, the KDA gate's lower bound. */
static int load_keys(struct eng_model *m, struct k3 *a, struct fl_err *err)
{
    int64_t block = 0, gating = 0, latent = 0;
    float lb = -INFINITY;
    int rc = eng_model_key_int(m, "attn_res.block_size", true, &block, err);
    a->situ.act = ENG_ACT_SITU;
    rc = rc ? rc : eng_model_key_float(m, "activation.situ_beta", true, &a->situ.beta, err);
    rc = rc ? rc : eng_model_key_float(m, "activation.situ_linear_beta", true,
                                       &a->situ.linear_beta, err);
    rc = rc ? rc : eng_model_key_int(m, "expert_latent_length", false, &latent, err);
    rc = rc ? rc : eng_model_key_float(m, "kda.gate_lower_bound", false, &lb, err);
    rc = rc ? rc : eng_model_key_int(m, "expert_gating_func", true, &gating, err);
    if (rc)
        return rc;
    if (block < 0 || block > INT32_MAX || !(a->situ.beta > 0.0f) ||
        isnan(a->situ.linear_beta) || latent < 0 || latent > m->hp.n_embd || isnan(lb))
        return fl_err_set(err, -EINVAL, "%s: bad Kimi K3 settings (attn_res.block_size %lld, "
                          "situ betas %g / %g, expert_latent_length %lld)", fname(m),
                          (long long)block, a->situ.beta, a->situ.linear_beta, (long long)latent);
    a->res.block = (int)block;
    a->latent = latent > 0 ? latent : m->hp.n_embd;
    a->latent_proj = latent > 0;
    a->kda.full_gate = true;
    a->kda.bounded = lb > -INFINITY;
    a->kda.lower_bound = a->kda.bounded ? lb : 0.0f;
    a->d.out_gate = true;
    a->kq_scale = 1.0f / sqrtf((float)(a->d.qk_nope + a->d.qk_rope)); /* no rope, no YaRN */
    return 0;
}

static int load_globals(struct eng_model *m, struct k3 *a, struct fl_err *err)
{
    const int64_t e = m->hp.n_embd;
    if (!(m->embd = eng_model_tensor(m, -1, "token_embd.weight", true, 0, NULL, err)) ||
        !(m->out_norm = eng_model_need(m, -1, "output_norm.weight", 1, e, 1, 1, err)) ||
        !(m->output = eng_model_need(m, -1, "output.weight", 2, e, m->hp.n_vocab, 1, err)))
        return -EINVAL;
    if (a->res.block > 0 &&
        !(a->res.out_score = eng_model_need(m, -1, "output_res_score.weight", 1, e, 1, 1, err)))
        return -EINVAL;
    return 0;
}

/* MLA blocks cache the latent + rope key; KDA blocks keep state. */
static int set_state_dims(struct eng_model *m, const struct k3 *a, struct fl_err *err)
{
    int rc = eng_model_default_kv_dims(m, err);
    if (rc)
        return rc;
    m->kv_latent = true;
    m->rs_conv_dim = calloc((size_t)m->hp.n_layer, sizeof(int64_t));
    m->rs_ssm_dim = calloc((size_t)m->hp.n_layer, sizeof(int64_t));
    if (!m->rs_conv_dim || !m->rs_ssm_dim)
        return fl_err_set(err, -ENOMEM, "%s: out of memory", fname(m));
    for (int l = 0; l < m->hp.n_layer; l++) {
        const bool kda = a->layers[l].recurrent;
        m->kv_k_dim[l] = kda ? 0 : mla_cache_row(&a->d);
        m->kv_v_dim[l] = 0;
        m->rs_conv_dim[l] = kda ? kda_conv_state(&a->kda) : 0;
        m->rs_ssm_dim[l] = kda ? kda_ssm_state(&a->kda) : 0;
    }
    return 0;
}

/* The residual attention's scores are read as float rows. */
static int check_scores(const struct eng_model *m, const struct k3 *a, struct fl_err *err)
{
    for (int64_t i = 0; a->res.block > 0 && i <= 2 * m->hp.n_layer; i++) {
        const struct eng_tensor *t = i < 2 * m->hp.n_layer ? a->scores[i] : a->res.out_score;
        if (t->type != FL_TYPE_F32)
            return fl_err_set(err, -EINVAL, "%s: %s must be F32", fname(m), t->name);
    }
    return 0;
}

static int k3_load(struct eng_model *m, struct fl_err *err)
{
    struct k3 *a = calloc(1, sizeof(*a));
    if (!a)
        return fl_err_set(err, -ENOMEM, "%s: out of memory", fname(m));
    m->arch_data = a;
    m->hp.kv_heads_zero_ok = true;
    int rc = eng_model_load_common_hparams(m, err);
    rc = rc ? rc : mla_load_dims(m, true, &a->d, err);
    rc = rc ? rc : kda_load_dims(m, &a->kda, err);
    rc = rc ? rc : load_keys(m, a, err);
    rc = rc ? rc : load_globals(m, a, err);
    if (rc)
        return rc;
    const int64_t nl = m->hp.n_layer;
    if (m->hp.n_layer_dense_lead < 0 || m->hp.n_layer_dense_lead > nl)
        return fl_err_set(err, -EINVAL, "%s: leading_dense_block_count %lld is out of range",
                          fname(m), (long long)m->hp.n_layer_dense_lead);
    a->layers = calloc((size_t)nl, sizeof(*a->layers));
    a->scores = calloc(2 * (size_t)nl, sizeof(*a->scores));
    if (!a->layers || !a->scores)
        return fl_err_set(err, -ENOMEM, "%s: out of memory", fname(m));
    a->res.attn_score = a->scores;
    a->res.ffn_score = a->scores + nl;
    m->hp.res_attn_block = a->res.block;
    for (int il = 0; il < nl && !rc; il++) {
        a->layers[il].recurrent = kda_is_block(m, il);
        rc = load_layer(m, a, il, &a->layers[il], err);
    }
    rc = rc ? rc : check_scores(m, a, err);
    return rc ? rc : set_state_dims(m, a, err);
}

static void k3_unload(struct eng_model *m)
{
    struct k3 *a = m->arch_data;
    if (a) {
        free(a->layers);
        free(a->scores);
    }
    free(a);
    m->arch_data = NULL;
}

static void k3_norms(const void *arch, int il, const struct eng_tensor **attn_norm,
                     const struct eng_tensor **ffn_norm)
{
    const struct k3_layer *L = &((const struct k3 *)arch)->layers[il];
    *attn_norm = L->attn_norm;
    *ffn_norm = L->ffn_norm;
}

static void k3_attention(struct eng_ctx *c, const struct eng_prenorm *p, int il, const float *x,
                         const struct eng_batch *b, float *out)
{
    const struct k3 *a = p->arch;
    const struct k3_layer *L = &a->layers[il];
    if (L->recurrent)
        kda_attention(c, il, &a->kda, &L->kda, x, b, out);
    else
        mla_attention(c, il, &a->d, &L->mla, NULL, a->kq_scale, NULL, x, b, out);
}

/* Routed experts at the latent width, routed by the full-width x; then
 * the latent norm and up-projection; then the shared experts. */
static int k3_moe(struct eng_ctx *c, const struct k3 *a, const struct k3_layer *L, int il,
                  const float *x, const struct eng_batch *b, float *out, struct fl_err *err)
{
    const struct eng_hparams *hp = &c->m->hp;
    const int64_t n = b->n_tok, e = hp->n_embd, la = a->latent;
    float *logits = eng_tmp(c, n * hp->n_expert);
    eng_matmul(c, L->router, x, n, logits);
    const float *in = x;
    float *lat = out;
    if (L->routed_down) {
        float *down = eng_tmp(c, n * la);
        eng_matmul(c, L->routed_down, x, n, down);
        in = down;
        lat = eng_tmp(c, n * la);
    }
    const struct eng_route r = {
        .n_expert = hp->n_expert, .k = hp->n_expert_used, .gating = hp->gating,
        .norm = hp->expert_weights_norm, .scale = hp->expert_weights_scale,
        .sel_bias = L->sel_bias,
    };
    const struct eng_moe moe = {
        .gate = L->gate_exps, .up = L->up_exps, .down = L->down_exps, .act = a->situ,
        .router_in = x,
    };
    int rc = eng_moe(c, il, b, in, logits, &r, &moe, lat, err);
    if (rc)
        return rc;
    if (L->routed_norm)
        eng_rmsnorm(c, lat, lat, L->routed_norm, la, n, la, hp->rms_eps);
    if (L->routed_up)
        eng_matmul(c, L->routed_up, lat, n, out);
    if (L->gate_sh) {
        float *sh = eng_tmp(c, n * e);
        eng_ffn_act(c, x, n, L->gate_sh, L->up_sh, L->down_sh, &a->situ, sh);
        eng_add(c, out, sh, n * e);
    }
    return 0;
}

static int k3_ffn(struct eng_ctx *c, const struct eng_prenorm *p, int il, const float *x,
                  const struct eng_batch *b, float *out, struct fl_err *err)
{
    const struct k3 *a = p->arch;
    const struct k3_layer *L = &a->layers[il];
    if (!L->router) {
        eng_ffn_act(c, x, b->n_tok, L->gate, L->up, L->down, &a->situ, out);
        return 0;
    }
    return k3_moe(c, a, L, il, x, b, out, err);
}

static int k3_forward(struct eng_ctx *c, const struct eng_batch *b, struct fl_err *err)
{
    const struct k3 *a = c->m->arch_data;
    const struct eng_prenorm p = {
        .arch = a, .n_layer = (int)c->m->hp.n_layer, .norms = k3_norms,
        .attention = k3_attention, .ffn = k3_ffn, .res = a->res.block > 0 ? &a->res : NULL,
    };
    return eng_prenorm_forward(c, b, &p, err);
}

const struct eng_arch eng_arch_kimi_k3 = {
    .name = "kimi-k3",
    .load = k3_load,
    .unload = k3_unload,
    .forward = k3_forward,
};
