/* mla.c: multi-head latent attention, absorbed form (see mla.h). */
#include "model/mla.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gguf/tensor-types.h"
#include "model/backend.h"

int mla_load_dims(struct eng_model *m, bool any_value_length, struct mla_dims *d,
                  struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    const char *f = gguf_name(m->gguf);
    int64_t q_lora = 0, kv_lora = 0, k_mla = 0, v_mla = 0;
    int rc = eng_model_key_int(m, "attention.q_lora_rank", false, &q_lora, err);
    rc = rc ? rc : eng_model_key_int(m, "attention.kv_lora_rank", true, &kv_lora, err);
    rc = rc ? rc : eng_model_key_int(m, "attention.key_length_mla", true, &k_mla, err);
    rc = rc ? rc : eng_model_key_int(m, "attention.value_length_mla", true, &v_mla, err);
    if (rc)
        return rc;
    if (q_lora < 0 || q_lora > (1 << 16) || kv_lora < 1 || kv_lora > (1 << 16) ||
        k_mla <= hp->n_rot || k_mla > (1 << 16) || v_mla < 1 || v_mla > (1 << 16) || hp->n_rot < 2)
        return fl_err_set(err, -EINVAL,
                          "%s: bad MLA sizes (q_lora_rank %lld, kv_lora_rank %lld, key_length_mla "
                          "%lld, value_length_mla %lld, rope dims %lld)",
                          f, (long long)q_lora, (long long)kv_lora, (long long)k_mla,
                          (long long)v_mla, (long long)hp->n_rot);
    /* The MQA view the file advertises must be the latent cache. */
    if (hp->n_head_kv != 1 || hp->n_embd_head_k != kv_lora + hp->n_rot ||
        (hp->n_embd_head_v != kv_lora && !any_value_length))
        return fl_err_set(err, -EINVAL,
                          "%s: not an absorbed-MLA file (head_count_kv %lld, key_length %lld, "
                          "value_length %lld; expected 1, %lld, %lld)",
                          f, (long long)hp->n_head_kv, (long long)hp->n_embd_head_k,
                          (long long)hp->n_embd_head_v, (long long)(kv_lora + hp->n_rot),
                          (long long)kv_lora);
    *d = (struct mla_dims){
        .n_embd = (int)hp->n_embd, .n_head = (int)hp->n_head, .q_lora = (int)q_lora,
        .kv_lora = (int)kv_lora, .qk_nope = (int)(k_mla - hp->n_rot), .qk_rope = (int)hp->n_rot,
        .v_head = (int)v_mla, .eps = hp->rms_eps,
    };
    return 0;
}

int mla_find_tensors(struct eng_model *m, int layer, const struct mla_dims *d,
                     struct mla_tensors *t, struct fl_err *err)
{
    const int64_t nq = (int64_t)d->n_head * (d->qk_nope + d->qk_rope);
    memset(t, 0, sizeof(*t));
    if (d->q_lora > 0) {
        if (!(t->q_a =
                  eng_model_need(m, layer, "attn_q_a.weight", 2, d->n_embd, d->q_lora, 1, err)) ||
            !(t->q_a_norm =
                  eng_model_need(m, layer, "attn_q_a_norm.weight", 1, d->q_lora, 1, 1, err)) ||
            !(t->q_b = eng_model_need(m, layer, "attn_q_b.weight", 2, d->q_lora, nq, 1, err)))
            return -EINVAL;
    } else if (!(t->q = eng_model_need(m, layer, "attn_q.weight", 2, d->n_embd, nq, 1, err))) {
        return -EINVAL;
    }
    if (!(t->kv_a = eng_model_need(m, layer, "attn_kv_a_mqa.weight", 2, d->n_embd, mla_cache_row(d),
                                   1, err)) ||
        !(t->kv_a_norm =
              eng_model_need(m, layer, "attn_kv_a_norm.weight", 1, d->kv_lora, 1, 1, err)) ||
        !(t->k_b = eng_model_need(m, layer, "attn_k_b.weight", 3, d->qk_nope, d->kv_lora, d->n_head,
                                  err)) ||
        !(t->v_b = eng_model_need(m, layer, "attn_v_b.weight", 3, d->kv_lora, d->v_head, d->n_head,
                                  err)) ||
        !(t->o = eng_model_need(m, layer, "attn_output.weight", 2, (int64_t)d->n_head * d->v_head,
                                d->n_embd, 1, err)))
        return -EINVAL;
    char gate[64];
    snprintf(gate, sizeof(gate), "blk.%d.attn_gate.weight", layer);
    if (d->out_gate && eng_model_find(m, gate) &&
        !(t->gate = eng_model_need(m, layer, "attn_gate.weight", 2, d->n_embd,
                                   (int64_t)d->n_head * d->v_head, 1, err)))
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
    if (t->gate) {
        const int64_t no = (int64_t)d->n_head * d->v_head;
        float *g = eng_tmp(c, n_tok * no);
        eng_matmul(c, t->gate, x, n_tok, g);
        eng_sigmoid_gate(c, o, g, no, n_tok, false);
    }
    eng_matmul(c, t->o, o, n_tok, out);
}
