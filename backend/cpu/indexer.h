/* indexer.h: DeepSeek's lightning indexer on the CPU, the backend's indexer
 * op (model/backend.h; the model's side is model/dsa.h). */
#ifndef FL_CPU_INDEXER_H
#define FL_CPU_INDEXER_H

#include "model/backend.h"

/* Scores of the tokens scored together (floats): the op's scratch stays
 * within this plus cpu_indexer_thread_floats per thread, whatever the
 * context. */
#define CPU_INDEXER_SCORE_FLOATS (1 << 22)
#define CPU_INDEXER_KEY_BLOCK 256 /* positions scored together */

/* Each thread's floats: a key block transposed, a key row and one head's
 * dot products; or a token's scores to select from. */
static inline int64_t cpu_indexer_thread_floats(int64_t head_dim, int64_t n_kv)
{
    const int64_t score = (head_dim + 1) * CPU_INDEXER_KEY_BLOCK + head_dim;
    return score > n_kv ? score : n_kv;
}

/* For each token of b, the top p->top_k positions of its sequence (up to
 * its own) by sum_h w[t][h] * relu(q[t][h] . k_j), k_j the layer's V row
 * at position j (F16 or K's block type, as F32), ascending, into sel; ties
 * go to the earlier position (llama.cpp's partial sort leaves them
 * unordered). n = -1 for a token that sees no more than top_k positions.
 * Scores are a token's own arithmetic, so a selection never depends on the
 * batch around it. */
void cpu_indexer(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *q,
                 const float *w, const struct eng_indexer *p, const struct eng_attn_sel *sel);

#endif
