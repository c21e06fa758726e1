/* moe-route.h: choosing experts, and the (token, slot) pairs of a MoE layer
 * grouped by expert — what every backend's MoE op does on the host.
 *
 * Routing follows llama.cpp's build_moe_ffn: gating function, optional
 * selection bias for the choice only, optional group-limited choice
 * (DeepSeek-V3), top-k by descending score (ties to the lower id), weights
 * renormalised (sum clamped below at F16's smallest normal) and scaled. */
#ifndef FL_MOE_ROUTE_H
#define FL_MOE_ROUTE_H

#include <stdint.h>

#include "model/backend.h"

/* In-place softmax of n values (exp sum in double, as ggml). */
void eng_softmax(float *x, int64_t n);

/* From router logits [n_tok][n_expert] (overwritten) to ids/weights
 * [n_tok][k], descending selection score, ties to the lower id. */
void eng_moe_route(float *logits, int64_t n_tok, const struct eng_route *r, int32_t *ids,
                   float *weights);

/* DeepSeek-V3's group mask: the n_expert experts form n_groups consecutive
 * groups; a group's score is the sum of its two best selection scores
 * (gating output + selection bias); only the n_used best groups may be
 * chosen. Writes mask[e] = 0 for experts of a chosen group, -INFINITY for
 * the others. Needs n_expert % n_groups == 0, >= 2 experts per group,
 * 0 < n_used <= n_groups <= 256. */
void eng_moe_group_mask(const float *sel, int n_expert, int n_groups, int n_used, float *mask);

/* The (token, slot) pairs of one MoE call grouped by expert. */
struct eng_expert_lists {
    int64_t n_expert;
    int32_t *count;  /* [n_expert] */
    int32_t *start;  /* [n_expert + 1] offsets into tok/slot */
    int32_t *tok;    /* token index of each pair, for gathering its row */
    int32_t *slot;   /* t*k + j: where the expert's output row lands */
    int32_t *order;  /* experts with pairs, in compute order */
    int n_order;
};

/* After routing: records it (c->routing), groups the pairs by expert into L
 * (host scratch) and tells the expert source what is coming (hidden gets x,
 * the host copy of the layer's normed input, when it wants it; prefetch the
 * union of the chosen experts). 0, or the source's -errno with err set. */
int eng_moe_begin(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *x,
                  const int32_t *ids, const float *weights, int64_t k, int64_t n_expert,
                  struct eng_expert_lists *L, struct fl_err *err);

/* The experts the source has resident first (they compute while the others
 * are read). */
void eng_moe_resident_first(const struct eng_expert_source *src, int layer,
                            struct eng_expert_lists *L);

#endif
