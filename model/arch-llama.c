/* arch-llama.c: the llama-family decoder (llama dense, Mixtral-style MoE
 * under arch "llama", and qwen3moe through model/arch-qwen3moe.c), written
 * after llama.cpp's models/llama.cpp and models/qwen3moe.cpp graphs:
 *
 *   x = token_embd[tok]
 *   per block: h = rmsnorm(x)*attn_norm; q,k,v = Wq h, Wk h, Wv h
 *              [qwen3moe: q,k = rmsnorm per head * q_norm/k_norm]
 *              q,k = rope(q,k); cache k,v (F16); a = attention(q)
 *              x = x + Wo a
 *              h = rmsnorm(x)*ffn_norm; x = x + ffn(h)   (dense or MoE)
 *   logits = output(rmsnorm(x)*output_norm)   (output tied to token_embd if absent)
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/tensor-types.h"
#include "model/arch-prenorm.h"
#include "model/arch.h"

struct llama_layer {
    const struct eng_tensor *attn_norm, *wq, *wk, *wv, *wo, *wo_b, *q_norm, *k_norm;
    const struct eng_tensor *ffn_norm;
    const struct eng_tensor *gate_inp, *gate_exps, *up_exps, *down_exps; /* MoE */
    const struct eng_tensor *ffn_gate, *ffn_up, *ffn_down;               /* dense */
};

struct llama_data {
    struct eng_llama_opts o;
    struct llama_layer *layers;
};

#define SHAPE(...) ((const int64_t[]){ __VA_ARGS__ })
#define NDIMS(...) (int)(sizeof((const int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t))
#define REQ(m, l, name, err, ...) \
    eng_model_tensor(m, l, name, true, NDIMS(__VA_ARGS__), SHAPE(__VA_ARGS__), err)
#define OPT(m, l, name, err, ...) \
    eng_model_tensor(m, l, name, false, NDIMS(__VA_ARGS__), SHAPE(__VA_ARGS__), err)

static int load_ffn(struct eng_model *m, int l, struct llama_layer *L, int64_t n_ff_exp,
                    struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd;
    if (hp->n_expert == 0) {
        if (hp->n_ff < 1)
            return fl_err_set(err, -EINVAL, "%s: missing key %s.feed_forward_length",
                              gguf_name(m->gguf), hp->arch);
        L->ffn_gate = REQ(m, l, "ffn_gate.weight", err, E, hp->n_ff);
        L->ffn_up = L->ffn_gate ? REQ(m, l, "ffn_up.weight", err, E, hp->n_ff) : NULL;
        L->ffn_down = L->ffn_up ? REQ(m, l, "ffn_down.weight", err, hp->n_ff, E) : NULL;
        return L->ffn_down ? 0 : -EINVAL;
    }
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
    return 0;
}

static int load_layer(struct eng_model *m, int l, struct llama_layer *L, int64_t n_ff_exp,
                      struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, dq = hp->n_head * hp->n_embd_head_k;
    const int64_t dk = hp->n_head_kv * hp->n_embd_head_k, dv = hp->n_head_kv * hp->n_embd_head_v;
    const struct llama_data *d = m->arch_data;
    if (!(L->attn_norm = REQ(m, l, "attn_norm.weight", err, E)) ||
        !(L->wq = REQ(m, l, "attn_q.weight", err, E, dq)) ||
        !(L->wk = REQ(m, l, "attn_k.weight", err, E, dk)) ||
        !(L->wv = REQ(m, l, "attn_v.weight", err, E, dv)) ||
        !(L->wo = REQ(m, l, "attn_output.weight", err, hp->n_head * hp->n_embd_head_v, E)) ||
        !(L->ffn_norm = REQ(m, l, "ffn_norm.weight", err, E)))
        return -EINVAL;
    L->wo_b = OPT(m, l, "attn_output.bias", err, E);
    if (d->o.qk_norm &&
        (!(L->q_norm = REQ(m, l, "attn_q_norm.weight", err, hp->n_embd_head_k)) ||
         !(L->k_norm = REQ(m, l, "attn_k_norm.weight", err, hp->n_embd_head_k))))
        return -EINVAL;
    const struct eng_tensor *f32s[] = { L->attn_norm, L->ffn_norm, L->q_norm, L->k_norm, L->wo_b };
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

int eng_llama_family_load(struct eng_model *m, const struct eng_llama_opts *o, struct fl_err *err)
{
    struct llama_data *d = calloc(1, sizeof(*d));
    if (!d)
        return fl_err_set(err, -ENOMEM, "out of memory");
    d->o = *o;
    m->arch_data = d;
    int rc = eng_model_load_common_hparams(m, err);
    if (rc)
        return rc;
    struct eng_hparams *hp = &m->hp;
    hp->rope_mode = o->rope;
    hp->gating = ENG_GATING_SOFTMAX;
    hp->expert_weights_norm = true;
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
    d->layers = calloc((size_t)hp->n_layer, sizeof(*d->layers));
    if (!d->layers)
        return fl_err_set(err, -ENOMEM, "out of memory");
    for (int l = 0; l < hp->n_layer; l++) {
        const struct llama_layer *L = &d->layers[l];
        if ((rc = load_layer(m, l, &d->layers[l], n_ff_exp, err)) ||
            (L->gate_inp && (rc = eng_model_set_router(m, l, L->gate_inp, NULL, L->ffn_norm, err))))
            return rc;
    }
    return eng_model_default_kv_dims(m, err);
}

void eng_llama_family_unload(struct eng_model *m)
{
    struct llama_data *d = m->arch_data;
    if (d)
        free(d->layers);
    free(d);
    m->arch_data = NULL;
}

/* GQA over the cache rows [n_head_kv][head dim], 1/sqrt(dk) scale; q and k
 * per-head RMSNormed first where the arch has QK norms (qwen3moe). */
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
    if (d->o.qk_norm) {
        eng_rmsnorm(c, q, q, L->q_norm, dk, n * hp->n_head, dk, hp->rms_eps);
        eng_rmsnorm(c, k, k, L->k_norm, dk, n * hp->n_head_kv, dk, hp->rms_eps);
    }
    eng_rope(c, q, n, nq, (int)hp->n_head, dk, (int)hp->n_rot, hp->rope_mode, p->pass);
    eng_rope(c, k, n, nk, (int)hp->n_head_kv, dk, (int)hp->n_rot, hp->rope_mode, p->pass);
    eng_kv_store(c, il, b, k, nk, v, nv);
    const struct eng_attn at = {
        .n_head = (int)hp->n_head, .n_head_kv = (int)hp->n_head_kv, .dk = dk, .dv = dv,
        .k_stride = dk, .v_stride = dv, .scale = 1.0f / sqrtf((float)dk),
    };
    eng_attention(c, il, b, q, nq, &at, a, hp->n_head * dv);
    eng_matmul(c, L->wo, a, n, out);
    if (L->wo_b)
        eng_add_bias(c, out, L->wo_b, n);
}

/* Dense SwiGLU, or softmax-routed experts renormalised over the top k. */
static int llama_ffn(struct eng_ctx *c, const struct eng_prenorm *p, int il, const float *x,
                     const struct eng_batch *b, float *out, struct fl_err *err)
{
    const struct eng_hparams *hp = &c->m->hp;
    const struct llama_layer *L = &((const struct llama_data *)p->arch)->layers[il];
    if (!L->gate_inp) {
        eng_ffn(c, x, b->n_tok, L->ffn_gate, L->ffn_up, L->ffn_down, out);
        return 0;
    }
    float *logits = eng_tmp(c, b->n_tok * hp->n_expert);
    eng_matmul(c, L->gate_inp, x, b->n_tok, logits);
    const struct eng_route r = { .n_expert = hp->n_expert, .k = hp->n_expert_used,
                                 .gating = hp->gating, .norm = hp->expert_weights_norm,
                                 .scale = hp->expert_weights_scale };
    const struct eng_moe e = { .gate = L->gate_exps, .up = L->up_exps, .down = L->down_exps };
    return eng_moe(c, il, b, x, logits, &r, &e, out, err);
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
    /* one rope table for every layer */
    const float *cs = eng_rope_table(c, b, (int)hp->n_rot, hp->rope_freq_base, hp->rope_freq_scale);
    const struct eng_prenorm p = {
        .arch = c->m->arch_data, .pass = cs, .n_layer = (int)hp->n_layer, .norms = llama_norms,
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
