/* mla.c: multi-head latent attention, absorbed form (see mla.h). */
#include "model/mla.h"

#include <errno.h>
#include <string.h>

#include "backend/cuda/gpu-offload.h"
#include "model/ops.h"

static const struct eng_tensor *need(const struct eng_model *m, int layer, const char *name,
                                     int n_dims, int64_t a, int64_t b, int64_t c,
                                     struct fl_err *err)
{
    const int64_t ne[3] = { a, b, c };
    return eng_model_tensor(m, layer, name, true, n_dims, ne, err);
}

int mla_find_tensors(const struct eng_model *m, int layer, const struct mla_dims *d,
                     struct mla_tensors *t, struct fl_err *err)
{
    const int64_t nq = (int64_t)d->n_head * (d->qk_nope + d->qk_rope);
    memset(t, 0, sizeof(*t));
    if (d->q_lora > 0) {
        if (!(t->q_a = need(m, layer, "attn_q_a.weight", 2, d->n_embd, d->q_lora, 1, err)) ||
            !(t->q_a_norm = need(m, layer, "attn_q_a_norm.weight", 1, d->q_lora, 1, 1, err)) ||
            !(t->q_b = need(m, layer, "attn_q_b.weight", 2, d->q_lora, nq, 1, err)))
            return -EINVAL;
    } else if (!(t->q = need(m, layer, "attn_q.weight", 2, d->n_embd, nq, 1, err))) {
        return -EINVAL;
    }
    if (!(t->kv_a = need(m, layer, "attn_kv_a_mqa.weight", 2, d->n_embd, mla_cache_row(d), 1, err)) ||
        !(t->kv_a_norm = need(m, layer, "attn_kv_a_norm.weight", 1, d->kv_lora, 1, 1, err)) ||
        !(t->k_b = need(m, layer, "attn_k_b.weight", 3, d->qk_nope, d->kv_lora, d->n_head, err)) ||
        !(t->v_b = need(m, layer, "attn_v_b.weight", 3, d->kv_lora, d->v_head, d->n_head, err)) ||
        !(t->o = need(m, layer, "attn_output.weight", 2, (int64_t)d->n_head * d->v_head,
                      d->n_embd, 1, err)))
        return -EINVAL;
    /* The norms are applied as float arrays. */
    if (t->kv_a_norm->type != FL_TYPE_F32 || (t->q_a_norm && t->q_a_norm->type != FL_TYPE_F32))
        return fl_err_set(err, -EINVAL, "%s: blk.%d MLA norm weights must be F32",
                          gguf_name(m->gguf), layer);
    return 0;
}

/* q [n_tok][n_head][nope+rope] with q_pe roped. */
static float *project_q(struct eng_ctx *c, const struct mla_dims *d, const struct mla_tensors *t,
                        const float *x, int n_tok, const float *cs)
{
    const int64_t hk = d->qk_nope + d->qk_rope, nq = d->n_head * hk;
    float *q = eng_scratch_f32(c, n_tok * nq);
    if (t->q_a) {
        float *qa = eng_scratch_f32(c, (int64_t)n_tok * d->q_lora);
        eng_matmul(c, t->q_a, -1, x, n_tok, qa);
        eng_rmsnorm_rows(qa, qa, t->q_a_norm, d->q_lora, n_tok, d->q_lora, d->eps);
        eng_matmul(c, t->q_b, -1, qa, n_tok, q);
    } else {
        eng_matmul(c, t->q, -1, x, n_tok, q);
    }
    eng_rope_rows(q + d->qk_nope, n_tok, nq, d->n_head, hk, d->qk_rope, ENG_ROPE_NORM, cs);
    return q;
}

/* Latent + shared rope key per token, normed/roped, into the K cache. */
static void project_kv(struct eng_ctx *c, int layer, const struct mla_dims *d,
                       const struct mla_tensors *t, const float *x, int n_tok, int pos0,
                       const float *cs)
{
    const int64_t row = mla_cache_row(d);
    float *kv = eng_scratch_f32(c, n_tok * row);
    eng_matmul(c, t->kv_a, -1, x, n_tok, kv);
    eng_rope_rows(kv + d->kv_lora, n_tok, row, 1, d->qk_rope, d->qk_rope, ENG_ROPE_NORM, cs);
    eng_rmsnorm_rows(kv, kv, t->kv_a_norm, d->kv_lora, n_tok, row, d->eps);
    eng_kv_store(c->kv, layer, pos0, n_tok, kv, NULL);
}

/* query [n_tok][n_head][kv_lora+rope] = [k_b_h q_nope_h | q_pe_h]: per head
 * one matmul over all tokens (k_b's heads are its 3rd dim, like experts). */
static float *absorb(struct eng_ctx *c, const struct mla_dims *d, const struct mla_tensors *t,
                     const float *q, int n_tok)
{
    const int64_t hk = d->qk_nope + d->qk_rope, dk = mla_cache_row(d);
    float *query = eng_scratch_f32(c, n_tok * d->n_head * dk);
    float *in = eng_scratch_f32(c, (int64_t)n_tok * d->qk_nope);
    float *res = eng_scratch_f32(c, (int64_t)n_tok * d->kv_lora);
    for (int h = 0; h < d->n_head; h++) {
        for (int i = 0; i < n_tok; i++)
            memcpy(in + (int64_t)i * d->qk_nope, q + ((int64_t)i * d->n_head + h) * hk,
                   sizeof(float) * d->qk_nope);
        eng_matmul(c, t->k_b, h, in, n_tok, res);
        for (int i = 0; i < n_tok; i++) {
            float *qr = query + ((int64_t)i * d->n_head + h) * dk;
            memcpy(qr, res + (int64_t)i * d->kv_lora, sizeof(float) * d->kv_lora);
            memcpy(qr + d->kv_lora, q + ((int64_t)i * d->n_head + h) * hk + d->qk_nope,
                   sizeof(float) * d->qk_rope);
        }
    }
    return query;
}

/* o [n_tok][n_head*v_head], o_h = v_b_h att_h. */
static float *decompress(struct eng_ctx *c, const struct mla_dims *d, const struct mla_tensors *t,
                         const float *att, int n_tok)
{
    const int64_t no = (int64_t)d->n_head * d->v_head;
    float *o = eng_scratch_f32(c, n_tok * no);
    float *in = eng_scratch_f32(c, (int64_t)n_tok * d->kv_lora);
    float *res = eng_scratch_f32(c, (int64_t)n_tok * d->v_head);
    for (int h = 0; h < d->n_head; h++) {
        for (int i = 0; i < n_tok; i++)
            memcpy(in + (int64_t)i * d->kv_lora, att + ((int64_t)i * d->n_head + h) * d->kv_lora,
                   sizeof(float) * d->kv_lora);
        eng_matmul(c, t->v_b, h, in, n_tok, res);
        for (int i = 0; i < n_tok; i++)
            memcpy(o + i * no + (int64_t)h * d->v_head, res + (int64_t)i * d->v_head,
                   sizeof(float) * d->v_head);
    }
    return o;
}

void mla_attention(struct eng_ctx *c, int layer, const struct mla_dims *d,
                   const struct mla_tensors *t, const struct yarn_rope *rope, float kq_scale,
                   const float *x, int n_tok, int pos0, float *out)
{
    const int64_t dk = mla_cache_row(d);
    float *cs = eng_scratch_f32(c, (int64_t)n_tok * d->qk_rope);
    yarn_rope_table(rope, cs, pos0, n_tok);

    float *q = project_q(c, d, t, x, n_tok, cs);
    project_kv(c, layer, d, t, x, n_tok, pos0, cs);
    float *query = absorb(c, d, t, q, n_tok);

    /* MQA over the latent: one KV head whose value is its key's first kv_lora. */
    const struct eng_attn a = {
        .n_head = d->n_head, .n_head_kv = 1, .dk = dk, .dv = d->kv_lora,
        .k_off = 0, .v_off = 0, .k_stride = dk, .v_stride = dk, .v_in_k = true,
        .scale = kq_scale, .softcap = 0.0f, .window = 0, .sinks = NULL,
    };
    float *att = eng_scratch_f32(c, (int64_t)n_tok * d->n_head * d->kv_lora);
    eng_attention(c, layer, query, d->n_head * dk, n_tok, pos0, &a, att,
                  (int64_t)d->n_head * d->kv_lora);

    float *o = decompress(c, d, t, att, n_tok);
    eng_matmul(c, t->o, -1, o, n_tok, out);
}

/* --- on the device: the same steps (the per-head products: eng_gpu_mm_heads) ----- */

int mla_gpu_tensors(const struct mla_tensors *t, const struct eng_tensor **w)
{
    const struct eng_tensor *all[] = { t->q_a, t->q_a_norm, t->q_b, t->q, t->kv_a,
                                       t->kv_a_norm, t->k_b, t->v_b, t->o };
    int n = 0;
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (all[i])
            w[n++] = all[i];
    return n;
}

static float *gpu_project_q(struct eng_ctx *c, const struct mla_dims *d,
                            const struct mla_tensors *t, const float *d_x, int n_tok,
                            const float *d_cs)
{
    const int64_t hk = d->qk_nope + d->qk_rope, nq = d->n_head * hk;
    float *q = eng_gpu_tmp(c, n_tok * nq);
    if (t->q_a) {
        float *qa = eng_gpu_tmp(c, (int64_t)n_tok * d->q_lora);
        eng_gpu_mm(c, t->q_a, d_x, n_tok, qa);
        eng_gpu_rmsnorm_rows(c, qa, qa, t->q_a_norm, d->q_lora, n_tok, d->q_lora, d->eps);
        eng_gpu_mm(c, t->q_b, qa, n_tok, q);
    } else {
        eng_gpu_mm(c, t->q, d_x, n_tok, q);
    }
    eng_gpu_rope_rows(c, q ? q + d->qk_nope : NULL, n_tok, nq, d->n_head, hk, d->qk_rope,
                      ENG_ROPE_NORM, d_cs);
    return q;
}

static void gpu_project_kv(struct eng_ctx *c, int layer, const struct mla_dims *d,
                           const struct mla_tensors *t, const float *d_x, int n_tok, int pos0,
                           const float *d_cs)
{
    const int64_t row = mla_cache_row(d);
    float *kv = eng_gpu_tmp(c, n_tok * row);
    eng_gpu_mm(c, t->kv_a, d_x, n_tok, kv);
    eng_gpu_rope_rows(c, kv ? kv + d->kv_lora : NULL, n_tok, row, 1, d->qk_rope, d->qk_rope,
                      ENG_ROPE_NORM, d_cs);
    eng_gpu_rmsnorm_rows(c, kv, kv, t->kv_a_norm, d->kv_lora, n_tok, row, d->eps);
    eng_gpu_kv_store(c, layer, pos0, n_tok, kv, row, NULL, 0);
}

/* query [n_tok][n_head][kv_lora+rope] = [k_b_h q_nope_h | q_pe_h]. */
static float *gpu_absorb(struct eng_ctx *c, const struct mla_dims *d, const struct mla_tensors *t,
                         const float *q, int n_tok)
{
    const int64_t hk = d->qk_nope + d->qk_rope, dk = mla_cache_row(d);
    const int64_t nq = d->n_head * hk, nd = d->n_head * dk;
    float *query = eng_gpu_tmp(c, n_tok * nd);
    if (!q || !query)
        return NULL; /* the GPU failed: the pass reports it */
    eng_gpu_mm_heads(c, t->k_b, d->n_head, q, hk, nq, query, dk, nd, n_tok);
    /* every (token, head)'s rope part at once: rows hk apart in q, dk in query */
    eng_gpu_copy_2d(c, query + d->kv_lora, dk, q + d->qk_nope, hk, d->qk_rope,
                    (int64_t)n_tok * d->n_head);
    return query;
}

/* o [n_tok][n_head*v_head], o_h = v_b_h att_h. */
static float *gpu_decompress(struct eng_ctx *c, const struct mla_dims *d,
                             const struct mla_tensors *t, const float *att, int n_tok)
{
    const int64_t no = (int64_t)d->n_head * d->v_head, na = (int64_t)d->n_head * d->kv_lora;
    float *o = eng_gpu_tmp(c, n_tok * no);
    if (!att || !o)
        return NULL;
    eng_gpu_mm_heads(c, t->v_b, d->n_head, att, d->kv_lora, na, o, d->v_head, no, n_tok);
    return o;
}

void mla_gpu_attention(struct eng_ctx *c, int layer, const struct mla_dims *d,
                       const struct mla_tensors *t, const struct yarn_rope *rope, float kq_scale,
                       const float *d_x, int n_tok, int pos0, float *d_out)
{
    const int64_t dk = mla_cache_row(d);
    float *cs = eng_scratch_f32(c, (int64_t)n_tok * d->qk_rope);
    float *d_cs = eng_gpu_tmp(c, (int64_t)n_tok * d->qk_rope);
    yarn_rope_table(rope, cs, pos0, n_tok);
    eng_gpu_put(c, d_cs, cs, (int64_t)n_tok * d->qk_rope);

    float *q = gpu_project_q(c, d, t, d_x, n_tok, d_cs);
    gpu_project_kv(c, layer, d, t, d_x, n_tok, pos0, d_cs);
    float *query = gpu_absorb(c, d, t, q, n_tok);

    const struct eng_attn a = {
        .n_head = d->n_head, .n_head_kv = 1, .dk = dk, .dv = d->kv_lora,
        .k_stride = dk, .v_stride = dk, .v_in_k = true, .scale = kq_scale,
    };
    float *att = eng_gpu_tmp(c, (int64_t)n_tok * d->n_head * d->kv_lora);
    eng_gpu_attention(c, layer, query, d->n_head * dk, n_tok, pos0, &a, att,
                      (int64_t)d->n_head * d->kv_lora);
    float *o = gpu_decompress(c, d, t, query ? att : NULL, n_tok);
    eng_gpu_mm(c, t->o, o, n_tok, d_out);
}
