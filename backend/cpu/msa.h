/* msa.h: MiniMax's sparse attention block selection on the CPU, the
 * backend's msa_select op (model/backend.h; the model's side is
 * model/msa.h). */
#ifndef FL_CPU_MSA_H
#define FL_CPU_MSA_H

#include "model/backend.h"

/* Each thread's floats for a batch whose last position is max_pos: a key
 * block transposed, a key row, one head's dot products and every head's
 * block maxima. */
int64_t cpu_msa_thread_floats(const struct eng_msa *p, int64_t max_pos);

/* As the op: per token and indexer head, block scores = the largest dot
 * product of its query with a block's visible keys (F32, each key converted
 * from F16); the local newest blocks first, then the best others (ties: the
 * earlier block); their positions ascending. A token's own arithmetic: the
 * choice never depends on the batch around it. */
void cpu_msa_select(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *q,
                    const struct eng_msa *p, const struct eng_attn_sel *sel);

#endif
