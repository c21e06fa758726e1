/* arch-deepseek2.c: DeepSeek-V2/V3-style MoE (llama.cpp arch "deepseek2").
 *
 * Blocks: RMSNorm -> multi-head latent attention (model/mla.h, absorbed
 * layout, YaRN rope on the rope part) -> residual -> RMSNorm -> FFN ->
 * residual. The first leading_dense_block_count blocks have a dense SwiGLU
 * FFN; the others a routed MoE (gating softmax or sigmoid, the optional
 * exp_probs_b bias deciding the choice only, optional renormalisation and
 * scale, optional group-limited choice) plus shared experts (ffn_*_shexp)
 * added to the routed output, as llama.cpp's src/models/deepseek2.cpp.
 * Trailing next-token-prediction blocks (nextn_predict_layers) are not part
 * of the normal forward pass; they are neither loaded nor run.
 *
 * DeepSeek V3.2 ("deepseek32") and GLM-5 ("glm-dsa") are this network with
 * DeepSeek sparse attention: a lightning indexer per block (model/dsa.h)
 * chooses the positions its latent attention reads, as llama.cpp's
 * src/models/deepseek32.cpp and glm-dsa.cpp. They differ in the indexer's
 * rope pairing, its LayerNorm's eps, the YaRN log multiplier and GLM-5.2's
 * shared-indexer blocks (attention.indexer.types).
 *
 * Kimi-Linear ("kimi-linear", llama.cpp's src/models/kimi-linear.cpp) is
 * this network with most blocks' attention Kimi Delta Attention (model/
 * kda.h, linear attention over a per-sequence state: the blocks whose
 * head_count_kv is 0) and the others MLA without any rope (its key's rope
 * part is used as projected); its routing always renormalises. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/tensor-types.h"
#include "model/arch-prenorm.h"
#include "model/arch.h"
#include "model/dsa.h"
#include "model/kda.h"
#include "model/mla.h"
#include "model/yarn.h"

struct ds2_layer {
    const struct eng_tensor *attn_norm, *ffn_norm;
    struct mla_tensors mla;
    const struct eng_tensor *gate, *up, *down;                /* dense blocks */
    const struct eng_tensor *router, *sel_bias;               /* MoE blocks */
    const struct eng_tensor *gate_exps, *up_exps, *down_exps;
    const struct eng_tensor *gate_sh, *up_sh, *down_sh;
    struct dsa_tensors dsa;                                   /* sparse attention */
    bool shared_index;                                        /* glm-dsa: the last full layer's choice */
    bool recurrent;                                           /* kimi-linear: a KDA block */
    struct kda_tensors kda;
};

enum ds2_kind { DS2_DEEPSEEK2, DS2_DEEPSEEK32, DS2_GLM_DSA, DS2_KIMI_LINEAR };

struct ds2 {
    enum ds2_kind kind;
    struct dsa_dims dsa;        /* sparse kinds only */
    struct kda_dims kda;        /* kimi-linear only */
    struct mla_dims d;
    int n_groups, n_group_used; /* DeepSeek-V3 group-limited routing; 0/1: off */
    int n_trunk;                /* blocks run per token: block_count minus the
                                   nextn (multi-token-prediction) blocks */
    struct yarn_rope rope;
    bool no_rope;               /* kimi-linear's MLA */
    float kq_scale;
    struct ds2_layer *layers;
};

static const char *fname(const struct eng_model *m) { return gguf_name(m->gguf); }

static int load_moe(struct eng_model *m, int il, struct ds2_layer *L, struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const int64_t e = hp->n_embd, f = hp->n_ff_exp, n = hp->n_expert, fs = f * hp->n_expert_shared;
    const int64_t nb[1] = { n };
    if (n < 1 || hp->n_expert_used < 1 || f < 1 || hp->n_expert_shared < 1)
        return fl_err_set(err, -EINVAL,
                          "%s: MoE block %d needs expert_count, expert_used_count, "
                          "expert_feed_forward_length and expert_shared_count",
                          fname(m), il);
    if (!(L->router = eng_model_need(m, il, "ffn_gate_inp.weight", 2, e, n, 1, err)) ||
        !(L->gate_exps = eng_model_need(m, il, "ffn_gate_exps.weight", 3, e, f, n, err)) ||
        !(L->up_exps = eng_model_need(m, il, "ffn_up_exps.weight", 3, e, f, n, err)) ||
        !(L->down_exps = eng_model_need(m, il, "ffn_down_exps.weight", 3, f, e, n, err)) ||
        !(L->gate_sh = eng_model_need(m, il, "ffn_gate_shexp.weight", 2, e, fs, 1, err)) ||
        !(L->up_sh = eng_model_need(m, il, "ffn_up_shexp.weight", 2, e, fs, 1, err)) ||
        !(L->down_sh = eng_model_need(m, il, "ffn_down_shexp.weight", 2, fs, e, 1, err)))
        return -EINVAL;
    L->sel_bias = eng_model_tensor(m, il, "exp_probs_b.bias", false, 1, nb, err);
    if (L->sel_bias && L->sel_bias->type != FL_TYPE_F32)
        return fl_err_set(err, -EINVAL, "%s: blk.%d.exp_probs_b.bias must be F32", fname(m), il);
    return 0;
}

static int load_layer(struct eng_model *m, const struct ds2 *a, int il,
                      struct ds2_layer *L, struct fl_err *err)
{
    const int64_t e = m->hp.n_embd;
    if (!(L->attn_norm = eng_model_need(m, il, "attn_norm.weight", 1, e, 1, 1, err)) ||
        !(L->ffn_norm = eng_model_need(m, il, "ffn_norm.weight", 1, e, 1, 1, err)))
        return -EINVAL;
    int rc = L->recurrent ? kda_find_tensors(m, il, &a->kda, &L->kda, err)
                          : mla_find_tensors(m, il, &a->d, &L->mla, err);
    if (!rc && (a->kind == DS2_DEEPSEEK32 || a->kind == DS2_GLM_DSA) && !L->shared_index)
        rc = dsa_find_tensors(m, il, &a->dsa, a->d.q_lora, &L->dsa, err);
    if (rc)
        return rc;
    return il < m->hp.n_layer_dense_lead
               ? eng_model_dense_ffn(m, il, &L->gate, &L->up, &L->down, err)
               : load_moe(m, il, L, err);
}

/* expert_group_count / expert_group_used_count (DeepSeek-V3: 8 / 4). */
static int load_groups(struct eng_model *m, struct ds2 *a, struct fl_err *err)
{
    int64_t groups = 0, used = 0;
    int rc = eng_model_key_int(m, "expert_group_count", false, &groups, err);
    rc = rc ? rc : eng_model_key_int(m, "expert_group_used_count", false, &used, err);
    if (rc || groups <= 1)
        return rc;
    const int64_t n = m->hp.n_expert;
    if (groups > 256 || n % groups || n / groups < 2 || used < 1 || used > groups ||
        m->hp.n_expert_used > used * (n / groups))
        return fl_err_set(err, -EINVAL,
                          "%s: bad expert groups (expert_group_count %lld, used %lld, %lld experts, "
                          "%lld per token)",
                          fname(m), (long long)groups, (long long)used, (long long)n,
                          (long long)m->hp.n_expert_used);
    a->n_groups = (int)groups;
    a->n_group_used = (int)used;
    return 0;
}

static int load_rope(struct eng_model *m, struct ds2 *a, struct fl_err *err)
{
    if (a->kind == DS2_KIMI_LINEAR) { /* no rope, no YaRN: 1/sqrt of the MLA key */
        a->no_rope = true;
        a->kq_scale = 1.0f / sqrtf((float)(a->d.qk_nope + a->d.qk_rope));
        return 0;
    }
    struct yarn_params yp;
    float log_mul = 0.0f, temp_scale = 0.0f;
    int rc = eng_model_key_float(m, "attention.temperature_scale", false, &temp_scale, err);
    if (rc)
        return rc;
    if (temp_scale != 0.0f)
        return fl_err_set(err, -EINVAL, "%s: attention temperature scaling is not supported",
                          fname(m));
    if ((rc = yarn_from_gguf(m->gguf, m->hp.arch, a->d.qk_rope, &m->rope_ctx, &yp, &log_mul, err)) < 0)
        return rc;
    if (yarn_rope_init(&a->rope, &yp) < 0)
        return fl_err_set(err, -EINVAL, "%s: bad rope settings", fname(m));
    a->kq_scale = yarn_deepseek2_kq_scale(&yp, log_mul, a->d.qk_nope + a->d.qk_rope);
    return 0;
}

static void ds2_unload(struct eng_model *m)
{
    struct ds2 *a = m->arch_data;
    if (a)
        free(a->layers);
    free(a);
    m->arch_data = NULL;
}

static int load_globals(struct eng_model *m, struct fl_err *err)
{
    const int64_t e = m->hp.n_embd;
    m->embd = eng_model_tensor(m, -1, "token_embd.weight", true, 0, NULL, err);
    m->out_norm = m->embd ? eng_model_need(m, -1, "output_norm.weight", 1, e, 1, 1, err) : NULL;
    if (!m->out_norm)
        return -EINVAL;
    /* Untied head when present, else the embedding (as llama.cpp). */
    m->output = eng_model_tensor(m, -1, "output.weight", false, 0, NULL, err);
    if (!m->output)
        m->output = m->embd;
    if (m->output->n_dims != 2 || m->output->ne[0] != e || m->output->ne[1] != m->hp.n_vocab)
        return fl_err_set(err, -EINVAL, "%s: output.weight is not [%lld, %lld]", fname(m),
                          (long long)e, (long long)m->hp.n_vocab);
    return 0;
}

/* Which blocks are dense, and how many run (the nextn blocks do not). */
static int load_layout(struct eng_model *m, struct ds2 *a, struct fl_err *err)
{
    int64_t nextn = 0;
    int rc = eng_model_key_int(m, "nextn_predict_layers", false, &nextn, err);
    if (rc)
        return rc;
    if (nextn < 0 || nextn >= m->hp.n_layer)
        return fl_err_set(err, -EINVAL, "%s: nextn_predict_layers %lld is out of range", fname(m),
                          (long long)nextn);
    a->n_trunk = (int)(m->hp.n_layer - nextn);
    if (m->hp.n_layer_dense_lead < 0 || m->hp.n_layer_dense_lead > a->n_trunk)
        return fl_err_set(err, -EINVAL, "%s: leading_dense_block_count %lld is out of range",
                          fname(m), (long long)m->hp.n_layer_dense_lead);
    return 0;
}

/* GLM-5.2's indexer types: 1 = full, 0 = shared, per block
 * (attention.indexer.types, a number or one per block); without the key,
 * a model trained for fewer than 1M positions (GLM-5, 5.1) has only full
 * ones and a longer one (GLM-5.2) llama.cpp's default: full at blocks 0, 1
 * and every fourth from 2. */
static int load_indexer_types(struct eng_model *m, struct ds2 *a, struct fl_err *err)
{
    int64_t ctx = 0, one = -1;
    int rc = eng_model_key_int(m, "context_length", false, &ctx, err);
    if (rc)
        return rc;
    for (int il = 0; il < a->n_trunk; il++)
        a->layers[il].shared_index = ctx >= 1048576 && il >= 2 && (il - 2) % 4 != 0;
    char key[96];
    snprintf(key, sizeof(key), "%s.attention.indexer.types", m->hp.arch);
    const struct gguf_value *v;
    if (gguf_get_arr(m->gguf, key, &v) == 0) {
        if (v->arr.n < (uint64_t)a->n_trunk ||
            (v->arr.type != GGUF_VT_INT32 && v->arr.type != GGUF_VT_UINT32))
            return fl_err_set(err, -EINVAL, "%s: %s must be %d integers", fname(m), key,
                              a->n_trunk);
        for (int il = 0; il < a->n_trunk; il++)
            a->layers[il].shared_index = ((const int32_t *)v->arr.elems)[il] == 0;
    } else if ((rc = eng_model_key_int(m, "attention.indexer.types", false, &one, err))) {
        return rc;
    } else if (one >= 0) {
        for (int il = 0; il < a->n_trunk; il++)
            a->layers[il].shared_index = one == 0;
    }
    if (a->layers[0].shared_index) /* llama.cpp asserts this too */
        return fl_err_set(err, -EINVAL, "%s: block 0's indexer is shared: no full one before it",
                          fname(m));
    return 0;
}

/* The indexer's sizes and the kind's own rules (dsa.h). */
static int load_sparse(struct eng_model *m, struct ds2 *a, struct fl_err *err)
{
    int64_t gating = 0;
    int rc = dsa_load_dims(m, &a->dsa, err);
    if (rc)
        return rc;
    if (a->d.q_lora < 1)
        return fl_err_set(err, -EINVAL, "%s: the indexer reads the q LoRA, which the file lacks",
                          fname(m));
    m->hp.attention_host_only = "sparse attention (the lightning indexer)";
    m->hp.indexer_n_head = a->dsa.ix.n_head;
    m->hp.indexer_head_dim = a->dsa.ix.head_dim;
    m->hp.indexer_top_k = a->dsa.ix.top_k;
    if (a->kind == DS2_DEEPSEEK32) {
        a->dsa.rope = ENG_ROPE_NEOX;
        a->dsa.eps = 1e-6f; /* llama.cpp's f_norm_eps for deepseek32 */
        return 0;
    }
    /* glm-dsa: NORM pairs; llama.cpp leaves f_norm_eps at its zero */
    a->dsa.rope = ENG_ROPE_NORM;
    a->dsa.eps = 0.0f;
    if ((rc = eng_model_key_int(m, "expert_gating_func", false, &gating, err)))
        return rc;
    if (gating == 0)
        m->hp.gating = ENG_GATING_SIGMOID; /* GLM's, where the file does not say */
    return load_indexer_types(m, a, err);
}

/* Kimi-Linear: the KDA blocks (model/kda.h) and the routing llama.cpp
 * fixes (renormalised; the gating function is a required key). */
static int load_kimi(struct eng_model *m, struct ds2 *a, struct fl_err *err)
{
    int64_t gating = 0;
    int rc = eng_model_key_int(m, "expert_gating_func", true, &gating, err);
    if (!rc)
        rc = kda_load_dims(m, &a->kda, err);
    for (int il = 0; !rc && il < a->n_trunk; il++)
        a->layers[il].recurrent = kda_is_block(m, il);
    m->hp.expert_weights_norm = true;
    return rc;
}

/* The cache holds the latent + rope key of MLA blocks (V is read from it;
 * a V row is a full indexer block's key); KDA blocks keep state instead. */
static int set_state_dims(struct eng_model *m, const struct ds2 *a, struct fl_err *err)
{
    int rc = eng_model_default_kv_dims(m, err);
    if (rc)
        return rc;
    m->kv_latent = true;
    if (a->kind == DS2_KIMI_LINEAR) {
        m->rs_conv_dim = calloc((size_t)m->hp.n_layer, sizeof(int64_t));
        m->rs_ssm_dim = calloc((size_t)m->hp.n_layer, sizeof(int64_t));
        if (!m->rs_conv_dim || !m->rs_ssm_dim)
            return fl_err_set(err, -ENOMEM, "%s: out of memory", fname(m));
    }
    for (int64_t l = 0; l < m->hp.n_layer; l++) {
        const bool trunk = l < a->n_trunk, kda = trunk && a->layers[l].recurrent;
        m->kv_k_dim[l] = trunk && !kda ? mla_cache_row(&a->d) : 0;
        m->kv_v_dim[l] = trunk && a->layers[l].dsa.q_b ? a->dsa.ix.head_dim : 0;
        if (kda) {
            m->rs_conv_dim[l] = kda_conv_state(&a->kda);
            m->rs_ssm_dim[l] = kda_ssm_state(&a->kda);
        }
    }
    return 0;
}

static int ds2_load_kind(struct eng_model *m, enum ds2_kind kind, struct fl_err *err)
{
    struct ds2 *a = calloc(1, sizeof(*a));
    if (!a)
        return fl_err_set(err, -ENOMEM, "%s: out of memory", fname(m));
    m->arch_data = a;
    a->kind = kind;
    m->hp.kv_heads_zero_ok = kind == DS2_KIMI_LINEAR;
    int rc = eng_model_load_common_hparams(m, err);
    rc = rc ? rc : mla_load_dims(m, kind == DS2_KIMI_LINEAR, &a->d, err);
    rc = rc ? rc : load_rope(m, a, err);
    rc = rc ? rc : load_groups(m, a, err);
    rc = rc ? rc : load_globals(m, err);
    rc = rc ? rc : load_layout(m, a, err);
    if (rc)
        return rc;
    a->layers = calloc((size_t)a->n_trunk, sizeof(*a->layers));
    if (!a->layers)
        return fl_err_set(err, -ENOMEM, "%s: out of memory", fname(m));
    if ((kind == DS2_DEEPSEEK32 || kind == DS2_GLM_DSA) && (rc = load_sparse(m, a, err)))
        return rc;
    if (kind == DS2_KIMI_LINEAR && (rc = load_kimi(m, a, err)))
        return rc;
    for (int il = 0; il < a->n_trunk && !rc; il++) {
        const struct ds2_layer *L = &a->layers[il];
        rc = load_layer(m, a, il, &a->layers[il], err);
        if (!rc && L->router)
            rc = eng_model_set_router(m, il, L->router, NULL, L->ffn_norm, err);
    }
    return rc ? rc : set_state_dims(m, a, err);
}

static int ds2_load(struct eng_model *m, struct fl_err *err)
{
    return ds2_load_kind(m, DS2_DEEPSEEK2, err);
}

static int ds32_load(struct eng_model *m, struct fl_err *err)
{
    return ds2_load_kind(m, DS2_DEEPSEEK32, err);
}

static int glm_dsa_load(struct eng_model *m, struct fl_err *err)
{
    return ds2_load_kind(m, DS2_GLM_DSA, err);
}

static int kimi_linear_load(struct eng_model *m, struct fl_err *err)
{
    return ds2_load_kind(m, DS2_KIMI_LINEAR, err);
}

/* Routed experts + shared experts of one MoE block: out = moe(x) + shexp(x). */
static int moe_block(struct eng_ctx *c, const struct ds2 *a, const struct ds2_layer *L, int il,
                     const float *x, const struct eng_batch *b, float *out, struct fl_err *err)
{
    const struct eng_hparams *hp = &c->m->hp;
    const int64_t n_tok = b->n_tok, e = hp->n_embd;
    float *logits = eng_tmp(c, n_tok * hp->n_expert);
    eng_matmul(c, L->router, x, n_tok, logits);
    const struct eng_route r = {
        .n_expert = hp->n_expert, .k = hp->n_expert_used, .gating = hp->gating,
        .norm = hp->expert_weights_norm, .scale = hp->expert_weights_scale,
        .sel_bias = L->sel_bias, .n_groups = a->n_groups, .n_group_used = a->n_group_used,
    };
    const struct eng_moe moe = { .gate = L->gate_exps, .up = L->up_exps, .down = L->down_exps };
    int rc = eng_moe(c, il, b, x, logits, &r, &moe, out, err);
    if (rc)
        return rc;
    float *sh = eng_tmp(c, n_tok * e);
    eng_ffn(c, x, n_tok, L->gate_sh, L->up_sh, L->down_sh, sh);
    eng_add(c, out, sh, n_tok * e);
    return 0;
}

static void ds2_norms(const void *arch, int il, const struct eng_tensor **attn_norm,
                      const struct eng_tensor **ffn_norm)
{
    const struct ds2_layer *L = &((const struct ds2 *)arch)->layers[il];
    *attn_norm = L->attn_norm;
    *ffn_norm = L->ffn_norm;
}

/* The sparse kinds' pass holds the positions the indexer chose (p->pass),
 * kept across blocks: GLM-5.2's shared blocks read the last full one's. */
static void ds2_attention(struct eng_ctx *c, const struct eng_prenorm *p, int il,
                          const float *x, const struct eng_batch *b, float *out)
{
    const struct ds2 *a = p->arch;
    const struct ds2_layer *L = &a->layers[il];
    if (L->recurrent) {
        kda_attention(c, il, &a->kda, &L->kda, x, b, out);
        return;
    }
    const struct mla_sparse sp = { .d = &a->dsa, .t = &L->dsa, .sel = p->pass };
    mla_attention(c, il, &a->d, &L->mla, a->no_rope ? NULL : &a->rope, a->kq_scale,
                  p->pass ? &sp : NULL, x, b, out);
}

/* The leading dense layers run a plain FFN, the others the MoE block. */
static int ds2_ffn(struct eng_ctx *c, const struct eng_prenorm *p, int il, const float *x,
                   const struct eng_batch *b, float *out, struct fl_err *err)
{
    const struct ds2 *a = p->arch;
    const struct ds2_layer *L = &a->layers[il];
    if (il < c->m->hp.n_layer_dense_lead) {
        eng_ffn(c, x, b->n_tok, L->gate, L->up, L->down, out);
        return 0;
    }
    return moe_block(c, a, L, il, x, b, out, err);
}

static int ds2_forward(struct eng_ctx *c, const struct eng_batch *b, struct fl_err *err)
{
    const struct ds2 *a = c->m->arch_data;
    struct eng_attn_sel sel = { 0 };
    const bool sparse = a->kind == DS2_DEEPSEEK32 || a->kind == DS2_GLM_DSA;
    if (sparse) { /* the pass's scratch, not a block's */
        const int k = a->dsa.ix.top_k;
        sel = (struct eng_attn_sel){
            .pos = eng_scratch(c, sizeof(int32_t) * (size_t)b->n_tok * (size_t)k),
            .n = eng_scratch(c, sizeof(int32_t) * (size_t)b->n_tok), .stride = k,
        };
    }
    const struct eng_prenorm p = {
        .arch = a, .pass = sparse ? &sel : NULL, .n_layer = a->n_trunk,
        .norms = ds2_norms, .attention = ds2_attention, .ffn = ds2_ffn,
    };
    return eng_prenorm_forward(c, b, &p, err);
}

const struct eng_arch eng_arch_deepseek2 = {
    .name = "deepseek2",
    .load = ds2_load,
    .unload = ds2_unload,
    .forward = ds2_forward,
};

const struct eng_arch eng_arch_deepseek32 = {
    .name = "deepseek32",
    .load = ds32_load,
    .unload = ds2_unload,
    .forward = ds2_forward,
};

const struct eng_arch eng_arch_glm_dsa = {
    .name = "glm-dsa",
    .load = glm_dsa_load,
    .unload = ds2_unload,
    .forward = ds2_forward,
};

const struct eng_arch eng_arch_kimi_linear = {
    .name = "kimi-linear",
    .load = kimi_linear_load,
    .unload = ds2_unload,
    .forward = ds2_forward,
};
