/* dsa.c: the lightning indexer of DeepSeek sparse attention (dsa.h). */
#include "model/dsa.h"

#include <errno.h>

#include "gguf/tensor-types.h"

int dsa_load_dims(struct eng_model *m, struct dsa_dims *d, struct fl_err *err)
{
    int64_t heads = 0, dim = 0, top_k = 0;
    int rc = eng_model_key_int(m, "attention.indexer.head_count", true, &heads, err);
    rc = rc ? rc : eng_model_key_int(m, "attention.indexer.key_length", true, &dim, err);
    rc = rc ? rc : eng_model_key_int(m, "attention.indexer.top_k", true, &top_k, err);
    if (rc)
        return rc;
    /* llama.cpp rotates with one Hadamard matrix the size of the head */
    if (heads < 1 || heads > 1024 || dim < 64 || dim > 4096 || (dim & (dim - 1)) ||
        top_k < 1 || top_k > (1 << 24) || m->hp.n_rot > dim)
        return fl_err_set(err, -EINVAL,
                          "%s: bad indexer sizes (head_count %lld, key_length %lld, top_k %lld, "
                          "rope dims %lld): the key length must be a power of two from 64",
                          gguf_name(m->gguf), (long long)heads, (long long)dim,
                          (long long)top_k, (long long)m->hp.n_rot);
    d->ix = (struct eng_indexer){ .n_head = (int)heads, .head_dim = dim, .top_k = (int)top_k };
    d->n_rot = (int)m->hp.n_rot;
    return 0;
}

int dsa_find_tensors(struct eng_model *m, int layer, const struct dsa_dims *d, int q_lora,
                     struct dsa_tensors *t, struct fl_err *err)
{
    const int64_t e = m->hp.n_embd, h = d->ix.n_head, dim = d->ix.head_dim;
    if (!(t->q_b = eng_model_need(m, layer, "indexer.attn_q_b.weight", 2, q_lora, h * dim, 1,
                                  err)) ||
        !(t->k = eng_model_need(m, layer, "indexer.attn_k.weight", 2, e, dim, 1, err)) ||
        !(t->k_norm = eng_model_need(m, layer, "indexer.k_norm.weight", 1, dim, 1, 1, err)) ||
        !(t->k_norm_b = eng_model_need(m, layer, "indexer.k_norm.bias", 1, dim, 1, 1, err)) ||
        !(t->proj = eng_model_need(m, layer, "indexer.proj.weight", 2, e, h, 1, err)))
        return -EINVAL;
    if (t->k_norm->type != FL_TYPE_F32 || t->k_norm_b->type != FL_TYPE_F32)
        return fl_err_set(err, -EINVAL, "%s: blk.%d.indexer.k_norm must be F32",
                          gguf_name(m->gguf), layer);
    return 0;
}

float *dsa_keys(struct eng_ctx *c, const struct dsa_dims *d, const struct dsa_tensors *t,
                const float *x, int n_tok, const float *cs)
{
    const int64_t dim = d->ix.head_dim;
    float *k = eng_tmp(c, n_tok * dim);
    eng_matmul(c, t->k, x, n_tok, k);
    eng_layernorm(c, k, k, t->k_norm, t->k_norm_b, dim, n_tok, dim, d->eps);
    eng_rope(c, k, n_tok, dim, 1, dim, d->n_rot, d->rope, cs);
    eng_hadamard(c, k, n_tok, dim);
    return k;
}

void dsa_select(struct eng_ctx *c, int layer, const struct dsa_dims *d,
                const struct dsa_tensors *t, const float *x, const float *qa,
                const struct eng_batch *b, const float *cs, const struct eng_attn_sel *sel)
{
    const int n_tok = b->n_tok, h = d->ix.n_head;
    const int64_t dim = d->ix.head_dim, nq = h * dim;
    float *q = eng_tmp(c, (int64_t)n_tok * nq), *w = eng_tmp(c, (int64_t)n_tok * h);
    eng_matmul(c, t->q_b, qa, n_tok, q);
    eng_rope(c, q, n_tok, nq, h, dim, d->n_rot, d->rope, cs);
    eng_hadamard(c, q, (int64_t)n_tok * h, dim);
    eng_matmul(c, t->proj, x, n_tok, w);
    eng_indexer(c, layer, b, q, w, &d->ix, sel);
}
