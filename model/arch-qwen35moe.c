/* arch-qwen35moe.c: Qwen3.5 / 3.6 MoE (llama.cpp arch "qwen35moe") and
 * Qwen3-Next (arch "qwen3next"), after llama.cpp's src/models/qwen35moe.cpp,
 * qwen3next.cpp and delta-net-base.cpp. A hybrid
 * stack: every full_attention_interval-th block is gated full attention,
 * the others Gated DeltaNet linear attention; every block's FFN is routed
 * experts (softmax, top k renormalised) plus one shared expert scaled by a
 * sigmoid gate of its own.
 *
 *   full attention: [q | gate] per head = Wq h; q, k RMSNormed per head;
 *     NEOX RoPE on the first n_rot dims; a = attention(q) * sigmoid(gate);
 *     out = Wo a
 *   Gated DeltaNet: qkv = Wqkv h, z = Wgate h, beta = Wbeta h, alpha =
 *     Walpha h; qkv = silu(conv1d(qkv)) over the sequence's conv window;
 *     o = delta rule (model/backend.h, eng_delta_net) from the sequence's
 *     state; o = rmsnorm(o per head) * silu(z); out = Wout o
 *   ffn: moe(h) + sigmoid(w_shexp_gate . h) * shexp(h)
 *
 * Qwen3-Next differs only in how its files hold the projections: beta and
 * alpha in one ssm_ba matrix, grouped per key head ([beta x r | alpha x r]
 * for the r = value/key heads of each), and, in files converted before
 * attn_qkv/attn_gate existed, q, k, v and z in one ssm_in matrix grouped
 * the same way ([q | k | v x r | z x r] per key head); its RoPE is plain
 * NEOX (no sections), and its value heads share key heads in groups (head
 * h reads key head h / r; Qwen3.5 tiles them: h % K).
 *
 * Both kinds of state (the conv window, the delta-rule matrices) live per
 * sequence beside the KV cache (model/kv-cache.h). The trailing nextn
 * (MTP) blocks are neither loaded nor run. Multimodal RoPE sections are
 * accepted where text positions make them plain NEOX RoPE (every rotated
 * pair in the t, h or w section, which all get the token's position). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gguf/tensor-types.h"
#include "model/arch-prenorm.h"
#include "model/arch.h"

struct q35_layer {
    bool recurrent;
    const struct eng_tensor *attn_norm, *post_norm;
    const struct eng_tensor *wq, *wk, *wv, *wo, *q_norm, *k_norm;           /* attention */
    const struct eng_tensor *wqkv, *wgate, *wbeta, *walpha, *conv, *dt_bias, *a, *ssm_norm,
        *ssm_out;                                                           /* DeltaNet */
    const struct eng_tensor *wba, *win;        /* qwen3next: ssm_ba; ssm_in (older files) */
    const struct eng_tensor *gate_inp, *gate_exps, *up_exps, *down_exps;    /* experts */
    const struct eng_tensor *sh_gate, *gate_sh, *up_sh, *down_sh;           /* shared */
};

struct q35_opts {
    bool ba_fused;      /* ssm_ba, and attn_qkv/attn_gate or ssm_in (qwen3next) */
    bool k_grouped;     /* value head h reads key head h / r (qwen3next), else h % K */
    bool rope_sections; /* rope.dimension_sections is required (qwen35moe) */
};

struct q35_data {
    struct q35_opts o;
    int n_trunk;
    int64_t n_ff_sh;
    struct q35_layer *layers;
};

#define SHAPE(...) ((const int64_t[]){ __VA_ARGS__ })
#define NDIMS(...) (int)(sizeof((const int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t))
#define REQ(m, l, name, err, ...) \
    eng_model_tensor(m, l, name, true, NDIMS(__VA_ARGS__), SHAPE(__VA_ARGS__), err)

static int64_t conv_width(const struct eng_hparams *hp)
{
    return 2 * hp->ssm_n_k_head * hp->ssm_d_state + hp->ssm_n_v_head * hp->ssm_d_state;
}

static int load_attention(struct eng_model *m, int l, struct q35_layer *L, struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, hd = hp->n_embd_head_k, nq = hp->n_head * hd;
    const int64_t nkv = hp->n_head_kv * hd;
    L->wq = REQ(m, l, "attn_q.weight", err, E, 2 * nq);
    L->wk = L->wq ? REQ(m, l, "attn_k.weight", err, E, nkv) : NULL;
    L->wv = L->wk ? REQ(m, l, "attn_v.weight", err, E, nkv) : NULL;
    L->wo = L->wv ? REQ(m, l, "attn_output.weight", err, nq, E) : NULL;
    L->q_norm = L->wo ? REQ(m, l, "attn_q_norm.weight", err, hd) : NULL;
    L->k_norm = L->q_norm ? REQ(m, l, "attn_k_norm.weight", err, hd) : NULL;
    return L->k_norm ? 0 : -EINVAL;
}

/* q/k/v and z as attn_qkv + attn_gate, or (qwen3next's older files) one
 * ssm_in; beta and alpha as ssm_beta + ssm_alpha, or (qwen3next) ssm_ba. */
static int load_projections(struct eng_model *m, int l, struct q35_layer *L, bool ba_fused,
                            struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, H = hp->ssm_n_v_head, D = hp->ssm_d_state;
    char legacy[64];
    snprintf(legacy, sizeof(legacy), "blk.%d.ssm_in.weight", l);
    if (ba_fused && eng_model_find(m, legacy)) {
        L->win = REQ(m, l, "ssm_in.weight", err, E, conv_width(hp) + H * D);
    } else {
        L->wqkv = REQ(m, l, "attn_qkv.weight", err, E, conv_width(hp));
        L->wgate = L->wqkv ? REQ(m, l, "attn_gate.weight", err, E, H * D) : NULL;
    }
    if (!L->win && !L->wgate)
        return -EINVAL;
    if (ba_fused)
        return (L->wba = REQ(m, l, "ssm_ba.weight", err, E, 2 * H)) ? 0 : -EINVAL;
    L->wbeta = REQ(m, l, "ssm_beta.weight", err, E, H);
    L->walpha = L->wbeta ? REQ(m, l, "ssm_alpha.weight", err, E, H) : NULL;
    return L->walpha ? 0 : -EINVAL;
}

static int load_delta_net(struct eng_model *m, int l, struct q35_layer *L, struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const int64_t H = hp->ssm_n_v_head, D = hp->ssm_d_state, E = hp->n_embd;
    const struct q35_data *d = m->arch_data;
    if (load_projections(m, l, L, d->o.ba_fused, err))
        return -EINVAL;
    L->conv = REQ(m, l, "ssm_conv1d.weight", err, hp->ssm_d_conv, conv_width(hp));
    L->dt_bias = L->conv ? REQ(m, l, "ssm_dt.bias", err, H) : NULL;
    L->a = L->dt_bias ? REQ(m, l, "ssm_a", err, H) : NULL;
    L->ssm_norm = L->a ? REQ(m, l, "ssm_norm.weight", err, D) : NULL;
    L->ssm_out = L->ssm_norm ? REQ(m, l, "ssm_out.weight", err, H * D, E) : NULL;
    return L->ssm_out ? 0 : -EINVAL;
}

static int load_ffn(struct eng_model *m, int l, struct q35_layer *L, int64_t n_ff_sh,
                    struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, X = hp->n_expert, F = hp->n_ff_exp;
    L->gate_inp = REQ(m, l, "ffn_gate_inp.weight", err, E, X);
    L->gate_exps = L->gate_inp ? REQ(m, l, "ffn_gate_exps.weight", err, E, F, X) : NULL;
    L->up_exps = L->gate_exps ? REQ(m, l, "ffn_up_exps.weight", err, E, F, X) : NULL;
    L->down_exps = L->up_exps ? REQ(m, l, "ffn_down_exps.weight", err, F, E, X) : NULL;
    L->sh_gate = L->down_exps ? REQ(m, l, "ffn_gate_inp_shexp.weight", err, E) : NULL;
    L->gate_sh = L->sh_gate ? REQ(m, l, "ffn_gate_shexp.weight", err, E, n_ff_sh) : NULL;
    L->up_sh = L->gate_sh ? REQ(m, l, "ffn_up_shexp.weight", err, E, n_ff_sh) : NULL;
    L->down_sh = L->up_sh ? REQ(m, l, "ffn_down_shexp.weight", err, n_ff_sh, E) : NULL;
    return L->down_sh ? 0 : -EINVAL;
}

static int check_f32(const struct eng_model *m, const struct q35_layer *L, struct fl_err *err)
{
    const struct eng_tensor *f32s[] = { L->attn_norm, L->post_norm, L->q_norm, L->k_norm,
                                        L->conv, L->dt_bias, L->a, L->ssm_norm, L->gate_inp,
                                        L->sh_gate };
    for (size_t i = 0; i < sizeof(f32s) / sizeof(f32s[0]); i++)
        if (f32s[i] && f32s[i]->type != FL_TYPE_F32)
            return fl_err_set(err, -EINVAL, "%s: %s must be F32", gguf_name(m->gguf),
                              f32s[i]->name);
    return 0;
}

static int load_layer(struct eng_model *m, int l, struct q35_layer *L, int64_t n_ff_sh,
                      struct fl_err *err)
{
    const int64_t E = m->hp.n_embd;
    if (!(L->attn_norm = REQ(m, l, "attn_norm.weight", err, E)) ||
        !(L->post_norm = REQ(m, l, "post_attention_norm.weight", err, E)))
        return -EINVAL;
    int rc = L->recurrent ? load_delta_net(m, l, L, err) : load_attention(m, l, L, err);
    rc = rc ? rc : load_ffn(m, l, L, n_ff_sh, err);
    return rc ? rc : check_f32(m, L, err);
}

/* Text positions give every M-RoPE section the token's position but the
 * fourth, which llama.cpp sets to 0: plain NEOX RoPE unless some rotated
 * pair falls to that one (llama.cpp's interleaved rule). */
static int check_rope_sections(struct eng_model *m, bool required, struct fl_err *err)
{
    char key[96];
    snprintf(key, sizeof(key), "%s.rope.dimension_sections", m->hp.arch);
    const struct gguf_value *v;
    if (gguf_get_arr(m->gguf, key, &v) != 0)
        return required ? fl_err_set(err, -EINVAL, "%s: missing key %s", gguf_name(m->gguf), key)
                        : 0;
    if (v->arr.n != 4 || (v->arr.type != GGUF_VT_INT32 && v->arr.type != GGUF_VT_UINT32))
        return fl_err_set(err, -EINVAL, "%s: %s must be 4 integers", gguf_name(m->gguf), key);
    const int32_t *s = v->arr.elems;
    const int64_t sum = (int64_t)s[0] + s[1] + s[2] + s[3];
    for (int64_t p = 0; sum > 0 && p < m->hp.n_rot / 2; p++) {
        const int64_t k = p % sum;
        const bool txt = (k % 3 == 0 && k < 3 * (int64_t)s[0]) ||
                         (k % 3 == 1 && k < 3 * (int64_t)s[1]) ||
                         (k % 3 == 2 && k < 3 * (int64_t)s[2]);
        if (!txt || s[0] < 0 || s[1] < 0 || s[2] < 0 || s[3] < 0)
            return fl_err_set(err, -EINVAL, "%s: RoPE sections %d,%d,%d,%d leave rotated dims "
                              "to a vision-only position: not supported", gguf_name(m->gguf),
                              s[0], s[1], s[2], s[3]);
    }
    return 0;
}

static int load_ssm_hparams(struct eng_model *m, struct fl_err *err)
{
    struct eng_hparams *hp = &m->hp;
    int64_t inner = 0;
    int rc = eng_model_key_int(m, "ssm.conv_kernel", true, &hp->ssm_d_conv, err);
    rc = rc ? rc : eng_model_key_int(m, "ssm.inner_size", true, &inner, err);
    rc = rc ? rc : eng_model_key_int(m, "ssm.state_size", true, &hp->ssm_d_state, err);
    rc = rc ? rc : eng_model_key_int(m, "ssm.time_step_rank", true, &hp->ssm_n_v_head, err);
    rc = rc ? rc : eng_model_key_int(m, "ssm.group_count", true, &hp->ssm_n_k_head, err);
    if (rc)
        return rc;
    if (hp->ssm_d_conv < 2 || hp->ssm_d_conv > 16 || hp->ssm_d_state < 1 ||
        hp->ssm_d_state > 1024 || hp->ssm_n_k_head < 1 || hp->ssm_n_v_head < 1 ||
        hp->ssm_n_v_head % hp->ssm_n_k_head || inner != hp->ssm_n_v_head * hp->ssm_d_state)
        return fl_err_set(err, -EINVAL, "%s: bad linear attention shape (conv %lld, inner %lld, "
                          "state %lld, %lld value heads, %lld key heads)", gguf_name(m->gguf),
                          (long long)hp->ssm_d_conv, (long long)inner, (long long)hp->ssm_d_state,
                          (long long)hp->ssm_n_v_head, (long long)hp->ssm_n_k_head);
    return 0;
}

static int load_hparams(struct eng_model *m, struct q35_data *d, struct fl_err *err)
{
    struct eng_hparams *hp = &m->hp;
    int64_t nextn = 0;
    d->n_ff_sh = 0;
    int rc = eng_model_load_common_hparams(m, err);
    rc = rc ? rc : load_ssm_hparams(m, err);
    rc = rc ? rc : eng_model_key_int(m, "nextn_predict_layers", false, &nextn, err);
    rc = rc ? rc : eng_model_key_int(m, "expert_shared_feed_forward_length", false, &d->n_ff_sh,
                                     err);
    rc = rc ? rc : check_rope_sections(m, d->o.rope_sections, err);
    if (rc)
        return rc;
    if (nextn < 0 || nextn >= hp->n_layer)
        return fl_err_set(err, -EINVAL, "%s: nextn_predict_layers %lld is out of range",
                          gguf_name(m->gguf), (long long)nextn);
    d->n_trunk = (int)(hp->n_layer - nextn);
    if (!d->n_ff_sh)
        d->n_ff_sh = hp->n_ff;
    if (hp->n_ff_exp == 0 && hp->n_expert_used > 0)
        hp->n_ff_exp = hp->n_ff / hp->n_expert_used; /* llama.cpp's fallback */
    if (hp->n_expert < 1 || hp->n_ff_exp < 1 || d->n_ff_sh < 1)
        return fl_err_set(err, -EINVAL, "%s: missing key %s.expert_count, "
                          "expert_feed_forward_length or expert_shared_feed_forward_length",
                          gguf_name(m->gguf), hp->arch);
    if (hp->n_embd_head_k != hp->n_embd_head_v)
        return fl_err_set(err, -EINVAL, "%s: key_length %lld != value_length %lld",
                          gguf_name(m->gguf), (long long)hp->n_embd_head_k,
                          (long long)hp->n_embd_head_v);
    hp->rope_mode = ENG_ROPE_NEOX;
    hp->gating = ENG_GATING_SOFTMAX;
    hp->expert_weights_norm = true;
    return 0;
}

/* Which blocks are linear attention: attention.recurrent_layers where the
 * file has it, else all but every full_attention_interval-th (default 4). */
static int mark_recurrent(struct eng_model *m, struct q35_data *d, struct fl_err *err)
{
    char key[96];
    snprintf(key, sizeof(key), "%s.attention.recurrent_layers", m->hp.arch);
    const struct gguf_value *v;
    if (gguf_get_arr(m->gguf, key, &v) == 0) {
        if (v->arr.n < (uint64_t)d->n_trunk || v->arr.type != GGUF_VT_BOOL)
            return fl_err_set(err, -EINVAL, "%s: %s must be %d bools", gguf_name(m->gguf), key,
                              d->n_trunk);
        for (int l = 0; l < d->n_trunk; l++)
            d->layers[l].recurrent = ((const bool *)v->arr.elems)[l];
        return 0;
    }
    int64_t every = 4;
    int rc = eng_model_key_int(m, "full_attention_interval", false, &every, err);
    if (rc)
        return rc;
    if (every < 1)
        return fl_err_set(err, -EINVAL, "%s: full_attention_interval %lld must be at least 1",
                          gguf_name(m->gguf), (long long)every);
    for (int l = 0; l < d->n_trunk; l++)
        d->layers[l].recurrent = (l + 1) % every != 0;
    return 0;
}

/* KV rows for the attention blocks, recurrent state for the others. */
static int set_state_dims(struct eng_model *m, const struct q35_data *d, struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    int rc = eng_model_default_kv_dims(m, err);
    if (rc)
        return rc;
    m->rs_conv_dim = calloc((size_t)hp->n_layer, sizeof(int64_t));
    m->rs_ssm_dim = calloc((size_t)hp->n_layer, sizeof(int64_t));
    if (!m->rs_conv_dim || !m->rs_ssm_dim)
        return fl_err_set(err, -ENOMEM, "out of memory");
    for (int64_t l = 0; l < hp->n_layer; l++) {
        if (l < d->n_trunk && !d->layers[l].recurrent)
            continue;
        m->kv_k_dim[l] = m->kv_v_dim[l] = 0; /* nextn blocks keep nothing */
        if (l >= d->n_trunk)
            continue;
        m->rs_conv_dim[l] = (hp->ssm_d_conv - 1) * conv_width(hp);
        m->rs_ssm_dim[l] = hp->ssm_n_v_head * hp->ssm_d_state * hp->ssm_d_state;
    }
    return 0;
}

static int q35_load_with(struct eng_model *m, const struct q35_opts *o, struct fl_err *err)
{
    struct q35_data *d = calloc(1, sizeof(*d));
    if (!d)
        return fl_err_set(err, -ENOMEM, "out of memory");
    d->o = *o;
    m->arch_data = d;
    int rc = load_hparams(m, d, err);
    if (rc)
        return rc;
    const int64_t E = m->hp.n_embd;
    if (!(m->embd = REQ(m, -1, "token_embd.weight", err, E, m->hp.n_vocab)) ||
        !(m->out_norm = REQ(m, -1, "output_norm.weight", err, E)))
        return -EINVAL;
    m->output = eng_model_tensor(m, -1, "output.weight", false, 2, SHAPE(E, m->hp.n_vocab), err);
    if (!m->output)
        m->output = m->embd; /* tied head */
    if (!(d->layers = calloc((size_t)d->n_trunk, sizeof(*d->layers))))
        return fl_err_set(err, -ENOMEM, "out of memory");
    if ((rc = mark_recurrent(m, d, err)))
        return rc;
    for (int l = 0; l < d->n_trunk; l++) {
        const struct q35_layer *L = &d->layers[l];
        if ((rc = load_layer(m, l, &d->layers[l], d->n_ff_sh, err)) ||
            (rc = eng_model_set_router(m, l, L->gate_inp, NULL, L->post_norm, err)))
            return rc;
    }
    return set_state_dims(m, d, err);
}

static int qwen35moe_load(struct eng_model *m, struct fl_err *err)
{
    const struct q35_opts o = { .rope_sections = true };
    return q35_load_with(m, &o, err);
}

static int qwen3next_load(struct eng_model *m, struct fl_err *err)
{
    const struct q35_opts o = { .ba_fused = true, .k_grouped = true };
    return q35_load_with(m, &o, err);
}

static void q35_unload(struct eng_model *m)
{
    struct q35_data *d = m->arch_data;
    if (d)
        free(d->layers);
    free(d);
    m->arch_data = NULL;
}

/* Gated full attention: q and its gate interleaved per head in Wq's rows. */
static void q35_full_attention(struct eng_ctx *c, const struct eng_prenorm *p,
                               const struct q35_layer *L, int il, const float *x,
                               const struct eng_batch *b, float *out)
{
    const struct eng_hparams *hp = &c->m->hp;
    const int n = b->n_tok;
    const int64_t hd = hp->n_embd_head_k, nq = hp->n_head * hd, nkv = hp->n_head_kv * hd;
    float *qg = eng_tmp(c, n * 2 * nq), *k = eng_tmp(c, n * nkv), *v = eng_tmp(c, n * nkv);
    float *q = eng_tmp(c, n * nq), *gate = eng_tmp(c, n * nq), *a = eng_tmp(c, n * nq);
    const struct eng_tensor *qkv[3] = { L->wq, L->wk, L->wv };
    eng_matmul_shared(c, 3, qkv, x, n, (float *const[3]){ qg, k, v });
    eng_copy_2d(c, q, hd, qg, 2 * hd, hd, n * hp->n_head);
    eng_copy_2d(c, gate, hd, qg + hd, 2 * hd, hd, n * hp->n_head);
    eng_rmsnorm(c, q, q, L->q_norm, hd, n * hp->n_head, hd, hp->rms_eps);
    eng_rmsnorm(c, k, k, L->k_norm, hd, n * hp->n_head_kv, hd, hp->rms_eps);
    eng_gqa_attend(c, il, b, q, k, v, p->pass, a);
    eng_sigmoid_gate(c, a, gate, nq, n, false);
    eng_matmul(c, L->wo, a, n, out);
}

/* qwen3next's grouped rows into the layout the ops read: per key head kh
 * of r value heads, ssm_ba holds [beta x r | alpha x r] and ssm_in
 * [q (D) | k (D) | v (r D) | z (r D)]; llama.cpp lays them out again as
 * [beta ...], [alpha ...] and [q ... | k ... | v ...], [z ...] in kh order. */
static void ungroup(struct eng_ctx *c, const struct eng_hparams *hp, int n, const float *ba,
                    float *beta, float *alpha, const float *qkvz, float *qkv, float *z)
{
    const int64_t K = hp->ssm_n_k_head, H = hp->ssm_n_v_head, D = hp->ssm_d_state, r = H / K;
    const int64_t W = conv_width(hp), G = 2 * D + 2 * r * D;
    for (int64_t kh = 0; kh < K; kh++) {
        eng_copy_2d(c, beta + kh * r, H, ba + kh * 2 * r, 2 * H, r, n);
        eng_copy_2d(c, alpha + kh * r, H, ba + kh * 2 * r + r, 2 * H, r, n);
        if (!qkvz)
            continue;
        const float *g = qkvz + kh * G;
        eng_copy_2d(c, qkv + kh * D, W, g, K * G, D, n);
        eng_copy_2d(c, qkv + (K + kh) * D, W, g + D, K * G, D, n);
        eng_copy_2d(c, qkv + 2 * K * D + kh * r * D, W, g + 2 * D, K * G, r * D, n);
        eng_copy_2d(c, z + kh * r * D, H * D, g + 2 * D + r * D, K * G, r * D, n);
    }
}

/* qkv [n][W], z [n][H D], beta and alpha [n][H] from the layer's input. */
static void q35_project(struct eng_ctx *c, const struct q35_layer *L, const float *x, int n,
                        float *qkv, float *z, float *beta, float *alpha)
{
    const struct eng_hparams *hp = &c->m->hp;
    const int64_t H = hp->ssm_n_v_head, D = hp->ssm_d_state;
    if (!L->wba) {
        const struct eng_tensor *w[4] = { L->wqkv, L->wgate, L->wbeta, L->walpha };
        eng_matmul_shared(c, 4, w, x, n, (float *const[4]){ qkv, z, beta, alpha });
        return;
    }
    float *ba = eng_tmp(c, n * 2 * H);
    if (L->win) {
        float *qkvz = eng_tmp(c, n * (conv_width(hp) + H * D));
        const struct eng_tensor *w[2] = { L->win, L->wba };
        eng_matmul_shared(c, 2, w, x, n, (float *const[2]){ qkvz, ba });
        ungroup(c, hp, n, ba, beta, alpha, qkvz, qkv, z);
        return;
    }
    const struct eng_tensor *w[3] = { L->wqkv, L->wgate, L->wba };
    eng_matmul_shared(c, 3, w, x, n, (float *const[3]){ qkv, z, ba });
    ungroup(c, hp, n, ba, beta, alpha, NULL, NULL, NULL);
}

static void q35_delta_net(struct eng_ctx *c, const struct q35_layer *L, int il, const float *x,
                          const struct eng_batch *b, float *out)
{
    const struct eng_hparams *hp = &c->m->hp;
    const int n = b->n_tok;
    const int64_t H = hp->ssm_n_v_head, D = hp->ssm_d_state, W = conv_width(hp);
    float *qkv = eng_tmp(c, n * W), *z = eng_tmp(c, n * H * D);
    float *beta = eng_tmp(c, n * H), *alpha = eng_tmp(c, n * H);
    float *conv = eng_tmp(c, n * W), *o = eng_tmp(c, n * H * D);
    q35_project(c, L, x, n, qkv, z, beta, alpha);
    eng_ssm_conv(c, il, b, qkv, L->conv, 0, conv);
    const struct eng_delta_net dn = {
        .n_k_head = (int)hp->ssm_n_k_head, .n_v_head = (int)H, .d_state = D,
        .k_grouped = ((const struct q35_data *)c->m->arch_data)->o.k_grouped,
        .dt_bias = L->dt_bias, .a = L->a, .eps = hp->rms_eps,
    };
    eng_delta_net(c, il, b, conv, alpha, beta, &dn, o);
    eng_rmsnorm(c, o, o, L->ssm_norm, D, n * H, D, hp->rms_eps);
    eng_swiglu(c, z, o, n * H * D); /* z = silu(z) * rmsnorm(o) */
    eng_matmul(c, L->ssm_out, z, n, out);
}

static void q35_attention(struct eng_ctx *c, const struct eng_prenorm *p, int il, const float *x,
                          const struct eng_batch *b, float *out)
{
    const struct q35_layer *L = &((const struct q35_data *)p->arch)->layers[il];
    if (L->recurrent)
        q35_delta_net(c, L, il, x, b, out);
    else
        q35_full_attention(c, p, L, il, x, b, out);
}

static int q35_ffn(struct eng_ctx *c, const struct eng_prenorm *p, int il, const float *x,
                   const struct eng_batch *b, float *out, struct fl_err *err)
{
    const struct eng_hparams *hp = &c->m->hp;
    const struct q35_layer *L = &((const struct q35_data *)p->arch)->layers[il];
    const int n = b->n_tok;
    float *logits = eng_tmp(c, n * hp->n_expert);
    eng_matmul(c, L->gate_inp, x, n, logits);
    const struct eng_route r = { .n_expert = hp->n_expert, .k = hp->n_expert_used,
                                 .gating = hp->gating, .norm = hp->expert_weights_norm,
                                 .scale = hp->expert_weights_scale };
    const struct eng_moe e = { .gate = L->gate_exps, .up = L->up_exps, .down = L->down_exps };
    int rc = eng_moe(c, il, b, x, logits, &r, &e, out, err);
    if (rc)
        return rc;
    float *sh = eng_tmp(c, n * hp->n_embd), *g = eng_tmp(c, n);
    eng_ffn(c, x, n, L->gate_sh, L->up_sh, L->down_sh, sh);
    eng_matmul(c, L->sh_gate, x, n, g);
    eng_sigmoid_gate(c, sh, g, hp->n_embd, n, true);
    eng_add(c, out, sh, n * hp->n_embd);
    return 0;
}

static void q35_norms(const void *arch, int il, const struct eng_tensor **attn_norm,
                      const struct eng_tensor **ffn_norm)
{
    const struct q35_layer *L = &((const struct q35_data *)arch)->layers[il];
    *attn_norm = L->attn_norm;
    *ffn_norm = L->post_norm;
}

static int q35_forward(struct eng_ctx *c, const struct eng_batch *b, struct fl_err *err)
{
    const struct eng_hparams *hp = &c->m->hp;
    const struct q35_data *d = c->m->arch_data;
    const float *cs = eng_rope_table(c, b, &hp->rope);
    const struct eng_prenorm p = {
        .arch = d, .pass = cs, .n_layer = d->n_trunk, .norms = q35_norms,
        .attention = q35_attention, .ffn = q35_ffn,
    };
    return eng_prenorm_forward(c, b, &p, err);
}

const struct eng_arch eng_arch_qwen35moe = {
    .name = "qwen35moe",
    .load = qwen35moe_load,
    .unload = q35_unload,
    .forward = q35_forward,
};

const struct eng_arch eng_arch_qwen3next = {
    .name = "qwen3next",
    .load = qwen3next_load,
    .unload = q35_unload,
    .forward = q35_forward,
};
