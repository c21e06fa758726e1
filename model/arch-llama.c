/* arch-llama.c: the llama-family decoder (llama dense, Mixtral-style MoE
 * under arch "llama", and qwen3moe, glm4moe, minimax-m2, minimax-m3 through
 * their own arch files), written after llama.cpp's models/llama.cpp,
 * qwen3moe.cpp, glm4-moe.cpp, minimax-m2.cpp and minimax-m3.cpp graphs:
 *
 *   x = token_embd[tok]
 *   per block: h = rmsnorm(x)*attn_norm; q,k,v = Wq h (+bq), Wk h (+bk), Wv h (+bv)
 *              [qk norm: per head (qwen3moe, glm4moe) or over all heads (minimax-m2)]
 *              q,k = rope(q,k) on the first n_rot dims; cache k,v; a = attention(q)
 *              x = x + Wo a
 *              h = rmsnorm(x)*ffn_norm; x = x + ffn(h)
 *   logits = output(rmsnorm(x)*output_norm)   (output tied to token_embd if absent)
 *
 * ffn is dense SwiGLU, or routed experts: softmax renormalised over the top
 * k (llama, qwen3moe), or biased routing (sigmoid + exp_probs_b, glm4moe and
 * minimax-m2/m3) plus GLM's and M3's shared expert and leading dense blocks;
 * M3's FFNs use SwiGLU-OAI (opts.act) and its routed blocks attend through
 * MiniMax Sparse Attention (opts.msa, model/msa.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/tensor-types.h"
#include "model/arch-prenorm.h"
#include "model/arch.h"
#include "model/msa.h"

struct llama_layer {
    const struct eng_tensor *attn_norm, *wq, *wk, *wv, *wo, *wo_b, *q_norm, *k_norm;
    const struct eng_tensor *bq, *bk, *bv;
    const struct eng_tensor *ffn_norm;
    const struct eng_tensor *gate_inp, *sel_bias, *gate_exps, *up_exps, *down_exps; /* MoE */
    const struct eng_tensor *gate_sh, *up_sh, *down_sh;                  /* shared expert */
    const struct eng_tensor *ffn_gate, *ffn_up, *ffn_down;               /* dense */
    struct msa_tensors msa;                                              /* sparse attention */
};

struct llama_data {
    struct eng_llama_opts o;
    struct eng_msa msa;
    bool *msa_layers;  /* [n_trunk] */
    int n_trunk; /* blocks run: block_count minus the nextn blocks */
    struct llama_layer *layers;
};

#define SHAPE(...) ((const int64_t[]){ __VA_ARGS__ })
#define NDIMS(...) (int)(sizeof((const int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t))
#define REQ(m, l, name, err, ...) \
    eng_model_tensor(m, l, name, true, NDIMS(__VA_ARGS__), SHAPE(__VA_ARGS__), err)
#define OPT(m, l, name, err, ...) \
    eng_model_tensor(m, l, name, false, NDIMS(__VA_ARGS__), SHAPE(__VA_ARGS__), err)

static int load_dense(struct eng_model *m, int l, struct llama_layer *L, struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd;
    if (hp->n_ff < 1)
        return fl_err_set(err, -EINVAL, "%s: missing key %s.feed_forward_length",
                          gguf_name(m->gguf), hp->arch);
    L->ffn_gate = REQ(m, l, "ffn_gate.weight", err, E, hp->n_ff);
    L->ffn_up = L->ffn_gate ? REQ(m, l, "ffn_up.weight", err, E, hp->n_ff) : NULL;
    L->ffn_down = L->ffn_up ? REQ(m, l, "ffn_down.weight", err, hp->n_ff, E) : NULL;
    return L->ffn_down ? 0 : -EINVAL;
}

/* Biased routing's extras: the selection bias and the shared expert. */
static int load_biased(struct eng_model *m, int l, struct llama_layer *L, int64_t n_ff_exp,
                       struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, S = n_ff_exp * hp->n_expert_shared;
    if (!(L->sel_bias = REQ(m, l, "exp_probs_b.bias", err, hp->n_expert)))
        return -EINVAL;
    if (L->sel_bias->type != FL_TYPE_F32)
        return fl_err_set(err, -EINVAL, "%s: %s must be F32", gguf_name(m->gguf), L->sel_bias->name);
    if (S == 0)
        return 0;
    L->gate_sh = REQ(m, l, "ffn_gate_shexp.weight", err, E, S);
    L->up_sh = L->gate_sh ? REQ(m, l, "ffn_up_shexp.weight", err, E, S) : NULL;
    L->down_sh = L->up_sh ? REQ(m, l, "ffn_down_shexp.weight", err, S, E) : NULL;
    return L->down_sh ? 0 : -EINVAL;
}

static int load_ffn(struct eng_model *m, int l, struct llama_layer *L, int64_t n_ff_exp,
                    struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const struct llama_data *d = m->arch_data;
    const int64_t E = hp->n_embd;
    int rc;
    if (hp->n_expert == 0 || (d->o.biased_routing && l < hp->n_layer_dense_lead))
        return load_dense(m, l, L, err);
    const int64_t X = hp->n_expert;
    L->gate_inp = REQ(m, l, "ffn_gate_inp.weight", err, E, X);
    L->gate_exps = L->gate_inp ? REQ(m, l, "ffn_gate_exps.weight", err, E, n_ff_exp, X) : NULL;
    L->up_exps = L->gate_exps ? REQ(m, l, "ffn_up_exps.weight", err, E, n_ff_exp, X) : NULL;
    L->down_exps = L->up_exps ? REQ(m, l, "ffn_down_exps.weight", err, n_ff_exp, E, X) : NULL;
    if (!L->down_exps)
        return -EINVAL;
    if (L->gate_inp->type != FL_TYPE_F32)
        return fl_err_set(err, -EINVAL, "%s: blk.%d.ffn_gate_inp.weight must be F32",
                          gguf_name(m->gguf), l);
    if (d->o.msa && (rc = msa_find_tensors(m, l, &d->msa, &L->msa, err)))
        return rc;
    return d->o.biased_routing ? load_biased(m, l, L, n_ff_exp, err) : 0;
}

static int load_qk_norm(struct eng_model *m, int l, struct llama_layer *L, struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const struct llama_data *d = m->arch_data;
    const int64_t hd = hp->n_embd_head_k;
    switch (d->o.qk_norm) {
    case ENG_QK_NORM_NONE:
        return 0;
    case ENG_QK_NORM_HEAD_OPT:
        L->q_norm = OPT(m, l, "attn_q_norm.weight", err, hd);
        L->k_norm = OPT(m, l, "attn_k_norm.weight", err, hd);
        return 0;
    case ENG_QK_NORM_HEAD:
        L->q_norm = REQ(m, l, "attn_q_norm.weight", err, hd);
        L->k_norm = L->q_norm ? REQ(m, l, "attn_k_norm.weight", err, hd) : NULL;
        break;
    case ENG_QK_NORM_FULL:
        L->q_norm = REQ(m, l, "attn_q_norm.weight", err, hp->n_head * hd);
        L->k_norm = L->q_norm ? REQ(m, l, "attn_k_norm.weight", err, hp->n_head_kv * hd) : NULL;
        break;
    }
    return L->k_norm ? 0 : -EINVAL;
}

static int load_layer(struct eng_model *m, int l, struct llama_layer *L, int64_t n_ff_exp,
                      struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, dq = hp->n_head * hp->n_embd_head_k;
    const int64_t dk = hp->n_head_kv * hp->n_embd_head_k, dv = hp->n_head_kv * hp->n_embd_head_v;
    const struct llama_data *d = m->arch_data;
    const char *ffn_norm = d->o.post_attn_norm ? "post_attention_norm.weight" : "ffn_norm.weight";
    if (!(L->attn_norm = REQ(m, l, "attn_norm.weight", err, E)) ||
        !(L->wq = REQ(m, l, "attn_q.weight", err, E, dq)) ||
        !(L->wk = REQ(m, l, "attn_k.weight", err, E, dk)) ||
        !(L->wv = REQ(m, l, "attn_v.weight", err, E, dv)) ||
        !(L->wo = REQ(m, l, "attn_output.weight", err, hp->n_head * hp->n_embd_head_v, E)) ||
        !(L->ffn_norm = REQ(m, l, ffn_norm, err, E)))
        return -EINVAL;
    L->wo_b = OPT(m, l, "attn_output.bias", err, E);
    if (d->o.qkv_bias) {
        L->bq = OPT(m, l, "attn_q.bias", err, dq);
        L->bk = OPT(m, l, "attn_k.bias", err, dk);
        L->bv = OPT(m, l, "attn_v.bias", err, dv);
    }
    int rc = load_qk_norm(m, l, L, err);
    if (rc)
        return rc;
    const struct eng_tensor *f32s[] = { L->attn_norm, L->ffn_norm, L->q_norm, L->k_norm,
                                        L->wo_b, L->bq, L->bk, L->bv };
    for (size_t i = 0; i < sizeof(f32s) / sizeof(f32s[0]); i++)
        if (f32s[i] && f32s[i]->type != FL_TYPE_F32)
            return fl_err_set(err, -EINVAL, "%s: %s must be F32", gguf_name(m->gguf), f32s[i]->name);
    return load_ffn(m, l, L, n_ff_exp, err);
}

static int check_hparams(struct eng_model *m, int64_t n_ff_exp, struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    if (hp->n_expert > 0 && n_ff_exp < 1)
        return fl_err_set(err, -EINVAL, "%s: missing key %s.%s", gguf_name(m->gguf), hp->arch,
                          ((struct llama_data *)m->arch_data)->o.ff_exp_key
                              ? "expert_feed_forward_length" : "feed_forward_length");
    if (eng_model_find(m, "rope_freqs.weight"))
        return fl_err_set(err, -EINVAL, "%s: rope_freqs (llama3 RoPE factors) is not supported",
                          gguf_name(m->gguf));
    if (hp->n_embd_head_k != hp->n_embd_head_v)
        return fl_err_set(err, -EINVAL, "%s: key_length %lld != value_length %lld",
                          gguf_name(m->gguf), (long long)hp->n_embd_head_k,
                          (long long)hp->n_embd_head_v);
    return 0;
}

/* Biased routing: gating from the file (or the arch's default), the nextn
 * blocks cut off the trunk, the dense blocks in range. */
static int load_biased_hparams(struct eng_model *m, struct llama_data *d, struct fl_err *err)
{
    struct eng_hparams *hp = &m->hp;
    int64_t gating = 0, nextn = 0;
    int rc = eng_model_key_int(m, "expert_gating_func", false, &gating, err);
    rc = rc ? rc : eng_model_key_int(m, "nextn_predict_layers", false, &nextn, err);
    if (rc)
        return rc;
    if (gating == 0 && d->o.gating_default == 0)
        return fl_err_set(err, -EINVAL, "%s: missing key %s.expert_gating_func",
                          gguf_name(m->gguf), hp->arch);
    hp->gating = gating ? hp->gating : d->o.gating_default;
    if (d->o.norm_always)
        hp->expert_weights_norm = true;
    if (nextn < 0 || nextn >= hp->n_layer)
        return fl_err_set(err, -EINVAL, "%s: nextn_predict_layers %lld is out of range",
                          gguf_name(m->gguf), (long long)nextn);
    d->n_trunk = (int)(hp->n_layer - nextn);
    if (hp->n_layer_dense_lead < 0 || hp->n_layer_dense_lead > d->n_trunk ||
        hp->n_expert_shared < 0 || hp->n_expert_shared > 64)
        return fl_err_set(err, -EINVAL, "%s: leading_dense_block_count %lld or "
                          "expert_shared_count %lld is out of range", gguf_name(m->gguf),
                          (long long)hp->n_layer_dense_lead, (long long)hp->n_expert_shared);
    return 0;
}

static int load_routing(struct eng_model *m, struct llama_data *d, struct fl_err *err)
{
    struct eng_hparams *hp = &m->hp;
    d->n_trunk = (int)hp->n_layer;
    if (d->o.biased_routing)
        return load_biased_hparams(m, d, err);
    hp->gating = ENG_GATING_SOFTMAX;
    hp->expert_weights_norm = true;
    hp->n_expert_shared = hp->n_layer_dense_lead = 0;
    return 0;
}

/* MiniMax's sparse attention: its sizes; its indexer keys ride at the end
 * of the V rows, which stay F16, and the device has no selection. */
static int load_msa(struct eng_model *m, struct llama_data *d, struct fl_err *err)
{
    m->hp.attention_host_only = "sparse attention (MiniMax's block selection)";
    m->hp.kv_f16_only = "MiniMax's sparse attention keeps its indexer keys in the V rows";
    int rc = msa_load_dims(m, &d->msa, err);
    m->hp.msa = (struct eng_msa_sizes){ .n_head = d->msa.n_head, .block = d->msa.block,
                                        .top_k = d->msa.top_k, .head_dim = d->msa.head_dim };
    return rc;
}

int eng_llama_family_load(struct eng_model *m, const struct eng_llama_opts *o, struct fl_err *err)
{
    struct llama_data *d = calloc(1, sizeof(*d));
    if (!d)
        return fl_err_set(err, -ENOMEM, "out of memory");
    d->o = *o;
    m->arch_data = d;
    int rc = eng_model_load_common_hparams(m, err);
    rc = rc ? rc : load_routing(m, d, err);
    rc = rc ? rc : o->msa ? load_msa(m, d, err) : 0;
    if (rc)
        return rc;
    struct eng_hparams *hp = &m->hp;
    hp->rope_mode = o->rope;
    int64_t n_ff_exp = o->ff_exp_key ? hp->n_ff_exp : hp->n_ff;
    if (o->ff_exp_key && n_ff_exp == 0 && hp->n_expert_used > 0)
        n_ff_exp = hp->n_ff / hp->n_expert_used; /* llama.cpp's fallback */
    hp->n_ff_exp = n_ff_exp;
    if ((rc = check_hparams(m, n_ff_exp, err)))
        return rc;
    const int64_t E = hp->n_embd;
    if (!(m->embd = REQ(m, -1, "token_embd.weight", err, E, hp->n_vocab)) ||
        !(m->out_norm = REQ(m, -1, "output_norm.weight", err, E)))
        return -EINVAL;
    m->output = OPT(m, -1, "output.weight", err, E, hp->n_vocab);
    if (!m->output)
        m->output = m->embd; /* tied head */
    d->layers = calloc((size_t)d->n_trunk, sizeof(*d->layers));
    d->msa_layers = calloc((size_t)d->n_trunk, sizeof(*d->msa_layers));
    if (!d->layers || !d->msa_layers)
        return fl_err_set(err, -ENOMEM, "out of memory");
    for (int l = 0; l < d->n_trunk; l++) {
        const struct llama_layer *L = &d->layers[l];
        if ((rc = load_layer(m, l, &d->layers[l], n_ff_exp, err)) ||
            (L->gate_inp && (rc = eng_model_set_router(m, l, L->gate_inp, NULL, L->ffn_norm, err))))
            return rc;
    }
    rc = eng_model_default_kv_dims(m, err);
    for (int64_t l = d->n_trunk; !rc && l < hp->n_layer; l++)
        m->kv_k_dim[l] = m->kv_v_dim[l] = 0; /* nextn blocks cache nothing */
    for (int l = 0; !rc && l < d->n_trunk; l++)
        if ((d->msa_layers[l] = d->layers[l].msa.q_proj)) /* the indexer key after the values */
            m->kv_v_dim[l] += d->msa.head_dim;
    hp->msa_layers = d->o.msa ? d->msa_layers : NULL;
    return rc;
}

void eng_llama_family_unload(struct eng_model *m)
{
    struct llama_data *d = m->arch_data;
    if (d) {
        free(d->layers);
        free(d->msa_layers);
    }
    free(d);
    m->arch_data = NULL;
}

/* GQA over the cache rows [n_head_kv][head dim], 1/sqrt(dk) scale; q and k
 * biased and RMSNormed first where the arch has those (per head: qwen3moe,
 * glm4moe; over all heads: minimax-m2). */
static void llama_attention(struct eng_ctx *c, const struct eng_prenorm *p, int il,
                            const float *x, const struct eng_batch *b, float *out)
{
    const struct eng_hparams *hp = &c->m->hp;
    const struct llama_data *d = p->arch;
    const struct llama_layer *L = &d->layers[il];
    const int n = b->n_tok;
    const int64_t dk = hp->n_embd_head_k, dv = hp->n_embd_head_v;
    const int64_t nq = hp->n_head * dk, nk = hp->n_head_kv * dk, nv = hp->n_head_kv * dv;
    float *q = eng_tmp(c, n * nq), *k = eng_tmp(c, n * nk), *v = eng_tmp(c, n * nv);
    float *a = eng_tmp(c, n * hp->n_head * dv);
    const struct eng_tensor *qkv[3] = { L->wq, L->wk, L->wv };
    eng_matmul_shared(c, 3, qkv, x, n, (float *const[3]){ q, k, v });
    if (L->bq)
        eng_add_bias(c, q, L->bq, n);
    if (L->bk)
        eng_add_bias(c, k, L->bk, n);
    if (L->bv)
        eng_add_bias(c, v, L->bv, n);
    if (L->q_norm && d->o.qk_norm == ENG_QK_NORM_FULL) {
        eng_rmsnorm(c, q, q, L->q_norm, nq, n, nq, hp->rms_eps);
        eng_rmsnorm(c, k, k, L->k_norm, nk, n, nk, hp->rms_eps);
    } else if (L->q_norm) {
        eng_rmsnorm(c, q, q, L->q_norm, dk, n * hp->n_head, dk, hp->rms_eps);
        eng_rmsnorm(c, k, k, L->k_norm, dk, n * hp->n_head_kv, dk, hp->rms_eps);
    }
    if (L->msa.q_proj)
        msa_attend(c, il, &d->msa, &L->msa, x, b, q, k, v, p->pass, a);
    else
        eng_gqa_attend(c, il, b, q, k, v, p->pass, a); /* key_length = value_length: checked */
    eng_matmul(c, L->wo, a, n, out);
    if (L->wo_b)
        eng_add_bias(c, out, L->wo_b, n);
}

/* Dense SwiGLU, or routed experts (plus the shared expert where the layer
 * has one: out = moe(x) + shexp(x), as llama.cpp adds them). */
static int llama_ffn(struct eng_ctx *c, const struct eng_prenorm *p, int il, const float *x,
                     const struct eng_batch *b, float *out, struct fl_err *err)
{
    const struct eng_hparams *hp = &c->m->hp;
    const struct llama_data *d = p->arch;
    const struct llama_layer *L = &d->layers[il];
    if (!L->gate_inp) {
        eng_ffn_act(c, x, b->n_tok, L->ffn_gate, L->ffn_up, L->ffn_down, &d->o.act, out);
        return 0;
    }
    float *logits = eng_tmp(c, b->n_tok * hp->n_expert);
    eng_matmul(c, L->gate_inp, x, b->n_tok, logits);
    const struct eng_route r = { .n_expert = hp->n_expert, .k = hp->n_expert_used,
                                 .gating = hp->gating, .norm = hp->expert_weights_norm,
                                 .scale = hp->expert_weights_scale, .sel_bias = L->sel_bias };
    const struct eng_moe e = { .gate = L->gate_exps, .up = L->up_exps, .down = L->down_exps,
                               .act = d->o.act };
    int rc = eng_moe(c, il, b, x, logits, &r, &e, out, err);
    if (rc || !L->gate_sh)
        return rc;
    float *sh = eng_tmp(c, b->n_tok * hp->n_embd);
    eng_ffn_act(c, x, b->n_tok, L->gate_sh, L->up_sh, L->down_sh, &d->o.act, sh);
    eng_add(c, out, sh, b->n_tok * hp->n_embd);
    return 0;
}

static void llama_norms(const void *arch, int il, const struct eng_tensor **attn_norm,
                        const struct eng_tensor **ffn_norm)
{
    const struct llama_layer *L = &((const struct llama_data *)arch)->layers[il];
    *attn_norm = L->attn_norm;
    *ffn_norm = L->ffn_norm;
}

int eng_llama_family_forward(struct eng_ctx *c, const struct eng_batch *b, struct fl_err *err)
{
    const struct eng_hparams *hp = &c->m->hp;
    const struct llama_data *d = c->m->arch_data;
    /* one rope table for every layer */
    const float *cs = eng_rope_table(c, b, &hp->rope);
    const struct eng_prenorm p = {
        .arch = d, .pass = cs, .n_layer = d->n_trunk, .norms = llama_norms,
        .attention = llama_attention, .ffn = llama_ffn,
    };
    return eng_prenorm_forward(c, b, &p, err);
}

static int llama_load(struct eng_model *m, struct fl_err *err)
{
    const struct eng_llama_opts o = { .rope = ENG_ROPE_NORM };
    return eng_llama_family_load(m, &o, err);
}

const struct eng_arch eng_arch_llama = {
    .name = "llama",
    .load = llama_load,
    .unload = eng_llama_family_unload,
    .forward = eng_llama_family_forward,
};
