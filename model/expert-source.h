/* expert-source.h: where a pass's expert weights come from, and who hears
 * its routing. The engine calls these; app/predict.c implements the source
 * over the pager (the pager itself knows bytes, not experts' uses). */
#ifndef FL_EXPERT_SOURCE_H
#define FL_EXPERT_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

/* NULL everywhere means every expert is resident. `layer` is the block
 * index (blk.N). */
struct eng_expert_source {
    void *ctx;
    /* Right after routing, with the union of the experts the batch selected
     * in that layer and, for each, how many of the batch's tokens chose it
     * (uses[i]; a cache policy counts uses per token, so a step of many
     * sequences weighs its experts as that many tokens would). May start
     * I/O and return at once. */
    int (*prefetch)(void *ctx, int layer, const int32_t *experts, const int32_t *uses, int n);
    /* Blocks until all of the expert's tensors in that layer are resident
     * and pins them; -errno on I/O error (the forward pass then stops).
     * Counts the uses its layer's prefetch gave for it. */
    int (*acquire)(void *ctx, int layer, int expert);
    void (*release)(void *ctx, int layer, int expert);
    /* Optional (may be NULL): true when the expert is resident now, so the
     * MoE layer computes those first while the others are read. A hint only:
     * acquire is still called before any use. */
    bool (*resident)(void *ctx, int layer, int expert);
    /* How many experts may be pinned at once (0: no limit). The budget holds
     * at least one layer's n_expert_used; pinning more than it holds would
     * wait forever for a release, so the MoE layer never does. */
    int max_pinned;
    /* Optional (may be NULL): the layer's FFN input (n_tok rows of n_embd,
     * after its norm), right before prefetch; predictors read it. */
    void (*hidden)(void *ctx, int layer, const float *x, int64_t n_tok);
};

/* Receives the routing of every MoE layer (for FLRT files and statistics).
 * ids/weights are [b->n_tok][k] in llama.cpp's order (descending selection
 * score); weights are the final gate weights applied to each expert output.
 * b->pos and b->seq say whose token each row is (model/arch.h). */
struct eng_batch;
struct eng_routing_sink {
    void *ctx;
    void (*record)(void *ctx, int layer, const struct eng_batch *b, int k, const int32_t *ids,
                   const float *weights);
};

#endif
