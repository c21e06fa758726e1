/* msa.c: MiniMax Sparse Attention (see msa.h). */
#include "model/msa.h"

#include <errno.h>
#include <math.h>

#include "gguf/tensor-types.h"

int msa_load_dims(struct eng_model *m, struct eng_msa *p, struct fl_err *err)
{
    const struct eng_hparams *hp = &m->hp;
    int64_t heads = 0, dim = 0, top_k = 0, block = 0, local = 0;
    int rc = eng_model_key_int(m, "attention.indexer.head_count", true, &heads, err);
    rc = rc ? rc : eng_model_key_int(m, "attention.indexer.key_length", true, &dim, err);
    rc = rc ? rc : eng_model_key_int(m, "attention.indexer.top_k", true, &top_k, err);
    rc = rc ? rc : eng_model_key_int(m, "attention.indexer.block_size", true, &block, err);
    rc = rc ? rc : eng_model_key_int(m, "attention.indexer.local_blocks", true, &local, err);
    if (rc)
        return rc;
    if (heads != hp->n_head_kv || dim < 2 || dim > 4096 || dim % 2 || hp->n_rot > dim ||
        top_k < 1 || top_k > (1 << 20) || block < 1 || block > (1 << 16) || local < 0 ||
        local > top_k)
        return fl_err_set(err, -EINVAL, "%s: bad sparse attention sizes (indexer heads %lld for "
                          "%lld KV heads, key length %lld, top_k %lld blocks of %lld, %lld local)",
                          gguf_name(m->gguf), (long long)heads, (long long)hp->n_head_kv,
                          (long long)dim, (long long)top_k, (long long)block, (long long)local);
    *p = (struct eng_msa){ .n_head = (int)heads, .head_dim = dim,
                           .key_off = hp->n_head_kv * hp->n_embd_head_v, .block = (int)block,
                           .top_k = (int)top_k, .local = (int)local };
    return 0;
}

int msa_find_tensors(struct eng_model *m, int layer, const struct eng_msa *p,
                     struct msa_tensors *t, struct fl_err *err)
{
    const int64_t e = m->hp.n_embd, dim = p->head_dim;
    if (!(t->q_proj = eng_model_need(m, layer, "indexer.q_proj.weight", 2, e, p->n_head * dim, 1,
                                     err)) ||
        !(t->k_proj = eng_model_need(m, layer, "indexer.k_proj.weight", 2, e, dim, 1, err)) ||
        !(t->q_norm = eng_model_need(m, layer, "indexer.q_norm.weight", 1, dim, 1, 1, err)) ||
        !(t->k_norm = eng_model_need(m, layer, "indexer.k_norm.weight", 1, dim, 1, 1, err)))
        return -EINVAL;
    if (t->q_norm->type != FL_TYPE_F32 || t->k_norm->type != FL_TYPE_F32)
        return fl_err_set(err, -EINVAL, "%s: blk.%d's indexer norms must be F32",
                          gguf_name(m->gguf), layer);
    return 0;
}

void msa_attend(struct eng_ctx *c, int layer, const struct eng_msa *p,
                const struct msa_tensors *t, const float *x, const struct eng_batch *b,
                float *q, float *k, const float *v, const float *cs, float *out)
{
    const struct eng_hparams *hp = &c->m->hp;
    const int n = b->n_tok, rot = (int)hp->n_rot;
    const int64_t hd = hp->n_embd_head_k, nq = hp->n_head * hd, nkv = hp->n_head_kv * hd;
    const int64_t dim = p->head_dim, nv = nkv + dim;
    float *iq = eng_tmp(c, n * p->n_head * dim), *vk = eng_tmp(c, n * nv);
    float *ik = eng_tmp(c, n * dim);
    const struct eng_tensor *w[2] = { t->q_proj, t->k_proj };
    eng_matmul_shared(c, 2, w, x, n, (float *const[2]){ iq, ik });
    eng_rmsnorm(c, iq, iq, t->q_norm, dim, (int64_t)n * p->n_head, dim, hp->rms_eps);
    eng_rmsnorm(c, ik, ik, t->k_norm, dim, n, dim, hp->rms_eps);
    eng_rope(c, iq, n, p->n_head * dim, p->n_head, dim, rot, hp->rope_mode, cs);
    eng_rope(c, ik, n, dim, 1, dim, rot, hp->rope_mode, cs);
    eng_rope(c, q, n, nq, (int)hp->n_head, hd, rot, hp->rope_mode, cs);
    eng_rope(c, k, n, nkv, (int)hp->n_head_kv, hd, rot, hp->rope_mode, cs);
    eng_copy_2d(c, vk, nv, v, nkv, nkv, n);
    eng_copy_2d(c, vk + nkv, nv, ik, dim, dim, n);
    eng_kv_store(c, layer, b, k, nkv, vk, nv);
    const int64_t rows = (int64_t)n * p->n_head, stride = (int64_t)p->top_k * p->block;
    const struct eng_attn_sel sel = {
        .pos = eng_scratch(c, sizeof(int32_t) * (size_t)(rows * stride)),
        .n = eng_scratch(c, sizeof(int32_t) * (size_t)rows), .stride = (int)stride,
        .per_kv = true,
    };
    eng_msa_select(c, layer, b, iq, p, &sel);
    const struct eng_attn at = {
        .n_head = (int)hp->n_head, .n_head_kv = (int)hp->n_head_kv, .dk = hd, .dv = hd,
        .k_stride = hd, .v_stride = hd, .scale = 1.0f / sqrtf((float)hd), .sel = &sel,
    };
    eng_attention(c, layer, b, q, nq, &at, out, nq);
}
