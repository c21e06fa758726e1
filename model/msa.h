/* msa.h: MiniMax Sparse Attention (MiniMax-M3, llama.cpp arch "minimax-m3",
 * src/models/minimax-m3.cpp), the attention of its routed blocks.
 *
 * Per token, from the attention-normed x, beside the block's GQA:
 *   iq = indexer.q_proj x, one head of head_dim per KV head, RMSNormed per
 *        head (indexer.q_norm) and roped like q (NEOX, the model's rope dims)
 *   ik = indexer.k_proj x, one head, RMSNormed (indexer.k_norm) and roped;
 *        kept at the end of the layer's V row (F16, as llama.cpp's indexer
 *        cache)
 *   per KV head g: the positions it may see fall in blocks of `block`; a
 *   block's score is the largest iq_g . ik_j over its visible positions;
 *   the `local` newest blocks and then the best others, top_k blocks in
 *   all, are the positions that KV head's query heads read (every position
 *   while it sees no more than top_k blocks).
 * llama.cpp runs this selection only with flash attention on and a single
 * sequence (or separate per-sequence caches) and dense attention otherwise;
 * faultline always runs it, per token and sequence. */
#ifndef FL_MSA_H
#define FL_MSA_H

#include "base/error.h"
#include "model/backend.h"

struct msa_tensors {
    const struct eng_tensor *q_proj, *k_proj, *q_norm, *k_norm; /* q_proj NULL: a dense block */
};

/* Reads <arch>.attention.indexer.{head_count,key_length,top_k,block_size,
 * local_blocks} into p (key_off: after the block's n_head_kv * head_dim
 * values). -EINVAL with a one-line message for a missing key or sizes that
 * cannot run (one indexer head per KV head, rope dims within its head). */
int msa_load_dims(struct eng_model *m, struct eng_msa *p, struct fl_err *err);

/* Finds and shape-checks block `layer`'s indexer tensors. */
int msa_find_tensors(struct eng_model *m, int layer, const struct eng_msa *p,
                     struct msa_tensors *t, struct fl_err *err);

/* The block's attention after its q, k (normed, not yet roped) and v: both
 * roped with cs (eng_rope_table), k and [v | ik] into the cache, the
 * selection, and GQA over it into out [n_tok][n_head * head dim]. */
void msa_attend(struct eng_ctx *c, int layer, const struct eng_msa *p,
                const struct msa_tensors *t, const float *x, const struct eng_batch *b,
                float *q, float *k, const float *v, const float *cs, float *out);

#endif
