/* mla.c: multi-head latent attention, absorbed form (see mla.h). */
#include "model/mla.h"

#include <errno.h>
#include <string.h>

#include "gguf/tensor-types.h"
#include "model/backend.h"

static const struct eng_tensor *need(struct eng_model *m, int layer, const char *name,
                                     int n_dims, int64_t a, int64_t b, int64_t c,
                                     struct fl_err *err)
{
    const int64_t ne[3] = { a, b, c };
    return eng_model_tensor(m, layer, name, true, n_dims, ne, err);
}

int mla_find_tensors(struct eng_model *m, int layer, const struct mla_dims *d,
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

/* q [n_tok][n_head][nope+rope] with q_pe roped; *qa_out the q LoRA's
 * normed output (NULL without one). */
static float *project_q(struct eng_ctx *c, const struct mla_dims *d, const struct mla_tensors *t,
                        const float *x, int n_tok, const float *cs, float **qa_out)
{
    const int64_t hk = d->qk_nope + d->qk_rope, nq = d->n_head * hk;
    float *q = eng_tmp(c, n_tok * nq);
    *qa_out = NULL;
    if (t->q_a) {
        float *qa = eng_tmp(c, (int64_t)n_tok * d->q_lora);
        eng_matmul(c, t->q_a, x, n_tok, qa);
        eng_rmsnorm(c, qa, qa, t->q_a_norm, d->q_lora, n_tok, d->q_lora, d->eps);
        eng_matmul(c, t->q_b, qa, n_tok, q);
        *qa_out = qa;
    } else {
        eng_matmul(c, t->q, x, n_tok, q);
    }
    if (cs)
        eng_rope(c, q ? q + d->qk_nope : NULL, n_tok, nq, d->n_head, hk, d->qk_rope,
                 ENG_ROPE_NORM, cs);
    return q;
}

/* Latent + shared rope key per token, normed/roped, into the K cache (v:
 * the indexer's keys, vd floats a token, as its V rows; or NULL). */
static void project_kv(struct eng_ctx *c, int layer, const struct mla_dims *d,
                       const struct mla_tensors *t, const float *x, const struct eng_batch *b,
                       const float *cs, const float *v, int64_t vd)
{
    const int64_t row = mla_cache_row(d);
    float *kv = eng_tmp(c, b->n_tok * row);
    eng_matmul(c, t->kv_a, x, b->n_tok, kv);
    if (cs)
        eng_rope(c, kv ? kv + d->kv_lora : NULL, b->n_tok, row, 1, d->qk_rope, d->qk_rope,
                 ENG_ROPE_NORM, cs);
    eng_rmsnorm(c, kv, kv, t->kv_a_norm, d->kv_lora, b->n_tok, row, d->eps);
    eng_kv_store(c, layer, b, kv, row, v, vd);
}

/* query [n_tok][n_head][kv_lora+rope] = [k_b_h q_nope_h | q_pe_h] (k_b's
 * heads are its 3rd dim, like experts). */
static float *absorb(struct eng_ctx *c, const struct mla_dims *d, const struct mla_tensors *t,
                     const float *q, int n_tok)
{
    const int64_t hk = d->qk_nope + d->qk_rope, dk = mla_cache_row(d);
    const int64_t nq = d->n_head * hk, nd = d->n_head * dk;
    float *query = eng_tmp(c, n_tok * nd);
    if (!q || !query)
        return NULL; /* a failed device: the pass reports it */
    eng_matmul_heads(c, t->k_b, d->n_head, q, hk, nq, query, dk, nd, n_tok);
    /* every (token, head)'s rope part at once: rows hk apart in q, dk in query */
    eng_copy_2d(c, query + d->kv_lora, dk, q + d->qk_nope, hk, d->qk_rope,
                (int64_t)n_tok * d->n_head);
    return query;
}

/* o [n_tok][n_head*v_head], o_h = v_b_h att_h. */
static float *decompress(struct eng_ctx *c, const struct mla_dims *d, const struct mla_tensors *t,
                         const float *att, int n_tok)
{
    const int64_t no = (int64_t)d->n_head * d->v_head, na = (int64_t)d->n_head * d->kv_lora;
    float *o = eng_tmp(c, n_tok * no);
    if (!att || !o)
        return NULL;
    eng_matmul_heads(c, t->v_b, d->n_head, att, d->kv_lora, na, o, d->v_head, no, n_tok);
    return o;
}

void mla_attention(struct eng_ctx *c, int layer, const struct mla_dims *d,
                   const struct mla_tensors *t, const struct yarn_rope *rope, float kq_scale,
                   const struct mla_sparse *sp, const float *x, const struct eng_batch *b,
                   float *out)
{
    const int n_tok = b->n_tok;
    const int64_t dk = mla_cache_row(d);
    const float *d_cs = NULL; /* no rope (Kimi-Linear): the rope part is used as projected */
    if (rope) {
        float *cs = eng_scratch_f32(c, (int64_t)n_tok * d->qk_rope);
        yarn_rope_table(rope, cs, b->pos, n_tok);
        d_cs = eng_upload(c, cs, (int64_t)n_tok * d->qk_rope);
    }

    float *qa;
    float *q = project_q(c, d, t, x, n_tok, d_cs, &qa);
    /* a full indexer layer keeps its keys beside the latent, then chooses */
    const bool index = sp && sp->t->q_b;
    const float *ik = index ? dsa_keys(c, sp->d, sp->t, x, n_tok, d_cs) : NULL;
    project_kv(c, layer, d, t, x, b, d_cs, ik, index ? sp->d->ix.head_dim : 0);
    if (index)
        dsa_select(c, layer, sp->d, sp->t, x, qa, b, d_cs, sp->sel);
    float *query = absorb(c, d, t, q, n_tok);

    /* MQA over the latent: one KV head whose value is its key's first kv_lora. */
    const struct eng_attn a = {
        .n_head = d->n_head, .n_head_kv = 1, .dk = dk, .dv = d->kv_lora,
        .k_stride = dk, .v_stride = dk, .v_in_k = true, .scale = kq_scale,
        .sel = sp ? sp->sel : NULL,
    };
    float *att = eng_tmp(c, (int64_t)n_tok * d->n_head * d->kv_lora);
    eng_attention(c, layer, b, query, d->n_head * dk, &a, att, (int64_t)d->n_head * d->kv_lora);
    float *o = decompress(c, d, t, query ? att : NULL, n_tok);
    eng_matmul(c, t->o, o, n_tok, out);
}
