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

#include "model/arch.h"
#include "backend/cuda/gpu-offload.h"
#include "model/ops.h"

struct llama_layer {
    const struct eng_tensor *attn_norm, *wq, *wk, *wv, *wo, *wo_b, *q_norm, *k_norm;
    const struct eng_tensor *ffn_norm;
    const struct eng_tensor *gate_inp, *gate_exps, *up_exps, *down_exps; /* MoE */
    const struct eng_tensor *ffn_gate, *ffn_up, *ffn_down;               /* dense */
};

struct llama_data {
    struct eng_llama_opts o;
    const struct eng_tensor *tok_embd, *output_norm, *output;
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
    if (!(d->tok_embd = REQ(m, -1, "token_embd.weight", err, E, hp->n_vocab)) ||
        !(d->output_norm = REQ(m, -1, "output_norm.weight", err, E)))
        return -EINVAL;
    d->output = OPT(m, -1, "output.weight", err, E, hp->n_vocab);
    if (!d->output)
        d->output = d->tok_embd; /* tied head */
    d->layers = calloc((size_t)hp->n_layer, sizeof(*d->layers));
    if (!d->layers)
        return fl_err_set(err, -ENOMEM, "out of memory");
    for (int l = 0; l < hp->n_layer; l++)
        if ((rc = load_layer(m, l, &d->layers[l], n_ff_exp, err)))
            return rc;
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

/* The attention of every block (CPU and device pass alike): GQA over the
 * cache rows [n_head_kv][head dim], 1/sqrt(dk) scale. */
static struct eng_attn attn_params(const struct eng_hparams *hp)
{
    const int64_t dk = hp->n_embd_head_k, dv = hp->n_embd_head_v;
    return (struct eng_attn){
        .n_head = (int)hp->n_head, .n_head_kv = (int)hp->n_head_kv, .dk = dk, .dv = dv,
        .k_stride = dk, .v_stride = dv, .scale = 1.0f / sqrtf((float)dk),
    };
}

/* x += attention block of layer l (h: scratch [n_tok][n_embd]). */
static void attention_block(struct eng_ctx *c, const struct eng_batch *b, int l, float *x,
                            const float *cs)
{
    const struct eng_hparams *hp = &c->m->hp;
    const struct llama_data *d = c->m->arch_data;
    const struct llama_layer *L = &d->layers[l];
    const int n = b->n_tok;
    const int64_t E = hp->n_embd, dk = hp->n_embd_head_k, dv = hp->n_embd_head_v;
    const int64_t nq = hp->n_head * dk, nk = hp->n_head_kv * dk, nv = hp->n_head_kv * dv;
    float *h = eng_scratch_f32(c, n * E);
    float *q = eng_scratch_f32(c, n * nq), *k = eng_scratch_f32(c, n * nk);
    float *v = eng_scratch_f32(c, n * nv), *a = eng_scratch_f32(c, n * hp->n_head * dv);
    eng_rmsnorm_rows(h, x, L->attn_norm, E, n, E, hp->rms_eps);
    const struct eng_tensor *qkv[3] = { L->wq, L->wk, L->wv };
    eng_matmul_shared(c, 3, qkv, h, n, (float *const[3]){ q, k, v });
    if (d->o.qk_norm) {
        eng_rmsnorm_rows(q, q, L->q_norm, dk, n * hp->n_head, dk, hp->rms_eps);
        eng_rmsnorm_rows(k, k, L->k_norm, dk, n * hp->n_head_kv, dk, hp->rms_eps);
    }
    eng_rope_rows(q, n, nq, (int)hp->n_head, dk, (int)hp->n_rot, hp->rope_mode, cs);
    eng_rope_rows(k, n, nk, (int)hp->n_head_kv, dk, (int)hp->n_rot, hp->rope_mode, cs);
    eng_kv_store(c->kv, l, b->pos0, n, k, v);
    const struct eng_attn p = attn_params(hp);
    eng_attention(c, l, q, nq, n, b->pos0, &p, a, hp->n_head * dv);
    eng_matmul(c, L->wo, -1, a, n, h);
    if (L->wo_b)
        eng_add_bias(h, L->wo_b, n);
    eng_add(x, h, n * E);
}

/* x += FFN block (dense or MoE) of layer l. */
static int ffn_block(struct eng_ctx *c, const struct eng_batch *b, int l, float *x,
                     struct fl_err *err)
{
    const struct eng_hparams *hp = &c->m->hp;
    const struct llama_layer *L = &((const struct llama_data *)c->m->arch_data)->layers[l];
    const int n = b->n_tok;
    const int64_t E = hp->n_embd;
    float *h = eng_scratch_f32(c, n * E), *f = eng_scratch_f32(c, n * E);
    eng_rmsnorm_rows(h, x, L->ffn_norm, E, n, E, hp->rms_eps);
    if (!L->gate_inp) {
        eng_ffn(c, h, n, L->ffn_gate, L->ffn_up, L->ffn_down, f);
    } else {
        const int64_t X = hp->n_expert, k = hp->n_expert_used;
        float *logits = eng_scratch_f32(c, n * X), *w = eng_scratch_f32(c, n * k);
        int32_t *ids = eng_scratch(c, sizeof(int32_t) * (size_t)(n * k));
        eng_matmul(c, L->gate_inp, -1, h, n, logits);
        const struct eng_route r = { .n_expert = X, .k = k, .gating = hp->gating,
                                     .norm = hp->expert_weights_norm,
                                     .scale = hp->expert_weights_scale };
        eng_moe_route(logits, n, &r, ids, w);
        const struct eng_moe e = { .gate = L->gate_exps, .up = L->up_exps, .down = L->down_exps };
        int rc = eng_moe_ffn(c, l, b->pos0, h, n, ids, w, k, &e, f, err);
        if (rc)
            return rc;
    }
    eng_add(x, f, n * E);
    return 0;
}

/* --- the pass on the device (backend/cuda/gpu-offload.h): the same blocks over
 * activations in VRAM ------------------------------------------------------------- */

/* Every tensor the device pass reads is in VRAM, save the experts (they
 * reach the GPU through the expert cache, or run on the CPU) and the
 * embedding (its rows are taken on the host) and the head (run on the
 * host when it stayed there). */
static bool on_device(const struct eng_ctx *c)
{
    const struct llama_data *d = c->m->arch_data;
    if (!c->gpu || !eng_gpu_on_device(c, &d->output_norm, 1))
        return false;
    for (int l = 0; l < c->m->hp.n_layer; l++) {
        const struct llama_layer *L = &d->layers[l];
        const struct eng_tensor *w[] = { L->attn_norm, L->wq, L->wk, L->wv, L->wo, L->q_norm,
                                         L->k_norm, L->ffn_norm, L->gate_inp, L->ffn_gate,
                                         L->ffn_up, L->ffn_down };
        if (L->wo_b || !eng_gpu_on_device(c, w, (int)(sizeof(w) / sizeof(w[0]))))
            return false;
    }
    return true;
}

static void gpu_attention_block(struct eng_ctx *c, const struct eng_batch *b, int l, float *x,
                                const float *cs)
{
    const struct eng_hparams *hp = &c->m->hp;
    const struct llama_data *d = c->m->arch_data;
    const struct llama_layer *L = &d->layers[l];
    const int n = b->n_tok;
    const int64_t E = hp->n_embd, dk = hp->n_embd_head_k, dv = hp->n_embd_head_v;
    const int64_t nq = hp->n_head * dk, nk = hp->n_head_kv * dk, nv = hp->n_head_kv * dv;
    float *h = eng_gpu_tmp(c, n * E), *q = eng_gpu_tmp(c, n * nq), *k = eng_gpu_tmp(c, n * nk);
    float *v = eng_gpu_tmp(c, n * nv), *a = eng_gpu_tmp(c, n * hp->n_head * dv);
    eng_gpu_rmsnorm_rows(c, h, x, L->attn_norm, E, n, E, hp->rms_eps);
    eng_gpu_mm(c, L->wq, h, n, q);
    eng_gpu_mm(c, L->wk, h, n, k);
    eng_gpu_mm(c, L->wv, h, n, v);
    if (d->o.qk_norm) {
        eng_gpu_rmsnorm_rows(c, q, q, L->q_norm, dk, n * hp->n_head, dk, hp->rms_eps);
        eng_gpu_rmsnorm_rows(c, k, k, L->k_norm, dk, n * hp->n_head_kv, dk, hp->rms_eps);
    }
    eng_gpu_rope_rows(c, q, n, nq, (int)hp->n_head, dk, (int)hp->n_rot, hp->rope_mode, cs);
    eng_gpu_rope_rows(c, k, n, nk, (int)hp->n_head_kv, dk, (int)hp->n_rot, hp->rope_mode, cs);
    eng_gpu_kv_store(c, l, b->pos0, n, k, nk, v, nv);
    const struct eng_attn p = attn_params(hp);
    eng_gpu_attention(c, l, q, nq, n, b->pos0, &p, a, hp->n_head * dv);
    eng_gpu_mm(c, L->wo, a, n, h);
    eng_gpu_add(c, x, h, n * E);
}

static void gpu_ffn_block(struct eng_ctx *c, const struct eng_batch *b, int l, float *x)
{
    const struct eng_hparams *hp = &c->m->hp;
    const struct llama_layer *L = &((const struct llama_data *)c->m->arch_data)->layers[l];
    const int n = b->n_tok;
    const int64_t E = hp->n_embd;
    float *h = eng_gpu_tmp(c, n * E), *f = eng_gpu_tmp(c, n * E);
    eng_gpu_rmsnorm_rows(c, h, x, L->ffn_norm, E, n, E, hp->rms_eps);
    if (!L->gate_inp) {
        const int64_t F = L->ffn_gate->ne[1];
        float *g = eng_gpu_tmp(c, n * F), *u = eng_gpu_tmp(c, n * F);
        eng_gpu_mm(c, L->ffn_gate, h, n, g);
        eng_gpu_mm(c, L->ffn_up, h, n, u);
        eng_gpu_swiglu(c, g, u, n * F);
        eng_gpu_mm(c, L->ffn_down, g, n, f);
    } else {
        float *logits = eng_gpu_tmp(c, n * hp->n_expert);
        eng_gpu_mm(c, L->gate_inp, h, n, logits);
        const struct eng_route r = { .n_expert = hp->n_expert, .k = hp->n_expert_used,
                                     .gating = hp->gating, .norm = hp->expert_weights_norm,
                                     .scale = hp->expert_weights_scale };
        const struct eng_moe e = { .gate = L->gate_exps, .up = L->up_exps, .down = L->down_exps };
        eng_gpu_moe_ffn(c, l, b->pos0, h, n, logits, &r, &e, f);
    }
    eng_gpu_add(c, x, f, n * E);
}

static int gpu_forward(struct eng_ctx *c, const struct eng_batch *b, struct fl_err *err)
{
    const struct eng_hparams *hp = &c->m->hp;
    const struct llama_data *d = c->m->arch_data;
    const int64_t n_rot = hp->n_rot > 0 ? hp->n_rot : 1;
    float *x = eng_scratch_f32(c, b->n_tok * hp->n_embd);
    int rc = eng_get_rows(d->tok_embd, b->tokens, b->n_tok, x, err);
    if (rc)
        return rc;
    float *cs = eng_scratch_f32(c, (int64_t)b->n_tok * n_rot);
    eng_rope_table(cs, (int)hp->n_rot, hp->rope_freq_base, hp->rope_freq_scale, b->pos0, b->n_tok);
    float *d_x = eng_gpu_pass_begin(c, x, b->n_tok * hp->n_embd);
    float *d_cs = eng_gpu_tmp(c, b->n_tok * n_rot);
    eng_gpu_put(c, d_cs, cs, b->n_tok * n_rot);
    for (int l = 0; l < hp->n_layer; l++) {
        const struct eng_scratch_mark mark = eng_scratch_mark(c);
        const struct eng_gpu_mark dmark = eng_gpu_tmp_mark(c);
        gpu_attention_block(c, b, l, d_x, d_cs);
        gpu_ffn_block(c, b, l, d_x);
        eng_gpu_tmp_release(c, dmark);
        eng_scratch_release(c, mark);
    }
    return eng_gpu_pass_end(c, d_x, b, d->output_norm, d->output, hp->rms_eps, err);
}

int eng_llama_family_forward(struct eng_ctx *c, const struct eng_batch *b, struct fl_err *err)
{
    const struct eng_hparams *hp = &c->m->hp;
    const struct llama_data *d = c->m->arch_data;
    if (on_device(c))
        return gpu_forward(c, b, err);
    float *x = eng_scratch_f32(c, b->n_tok * hp->n_embd);
    int rc = eng_get_rows(d->tok_embd, b->tokens, b->n_tok, x, err);
    if (rc)
        return rc;
    float *cs = eng_scratch_f32(c, (int64_t)b->n_tok * (hp->n_rot > 0 ? hp->n_rot : 1));
    eng_rope_table(cs, (int)hp->n_rot, hp->rope_freq_base, hp->rope_freq_scale, b->pos0, b->n_tok);
    for (int l = 0; l < hp->n_layer; l++) {
        const struct eng_scratch_mark mark = eng_scratch_mark(c);
        attention_block(c, b, l, x, cs);
        if ((rc = ffn_block(c, b, l, x, err)))
            return rc;
        eng_scratch_release(c, mark);
    }
    eng_output(c, x, b, d->output_norm, d->output, hp->rms_eps);
    return 0;
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
