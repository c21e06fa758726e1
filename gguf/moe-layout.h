/* moe-layout.h: where the routed experts of a MoE GGUF file live.
 *
 * Expert weights are stored as tensors "blk.<il>.ffn_<role>_exps.weight" of
 * shape [ne0, ne1, n_expert] (biases: [ne0, n_expert]). The expert index is
 * the outermost dimension, so expert e's slice of such a tensor is one
 * contiguous byte range:
 *     [offset + e * expert_bytes, offset + (e + 1) * expert_bytes),
 *     expert_bytes = nbytes / n_expert.
 * This is what the pager pages in and out. Shared experts (*_shexp), the
 * router (ffn_gate_inp) and everything else count as non-expert bytes. */
#ifndef FL_MOE_LAYOUT_H
#define FL_MOE_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "gguf/gguf.h"

enum moe_role {
    MOE_GATE, MOE_UP, MOE_DOWN, MOE_GATE_UP,                     /* ffn_*_exps.weight */
    MOE_GATE_BIAS, MOE_UP_BIAS, MOE_DOWN_BIAS, MOE_GATE_UP_BIAS, /* ffn_*_exps.bias */
    MOE_N_ROLES
};

struct moe_expert_tensor {
    const struct gguf_tensor *t; /* NULL when the layer has no tensor in this role */
    uint64_t expert_bytes;       /* t->nbytes / n_expert: one expert's slice */
};

struct moe_layer {
    bool is_moe;                 /* the layer has routed expert tensors */
    bool is_nextn;               /* a trailing nextn (MTP) block: loaded, never run */
    int n_expert, n_expert_used; /* 0 for a dense layer */
    struct moe_expert_tensor role[MOE_N_ROLES];
    uint64_t bytes_per_expert;   /* sum of expert_bytes over the roles present */
};

struct moe_layout {
    int n_layer;                 /* <arch>.block_count */
    int n_expert, n_expert_used; /* <arch>.expert_count / expert_used_count (0 if absent) */
    int n_moe_layers;            /* MoE layers a token runs (nextn blocks not counted) */
    int n_nextn;                 /* <arch>.nextn_predict_layers: the last blocks, never run */
    int n_leading_dense;         /* dense layers before the first MoE layer (all, if none) */
    uint64_t expert_bytes;       /* all routed-expert tensors */
    uint64_t non_expert_bytes;   /* every other tensor */
    uint64_t bytes_per_token;    /* n_expert_used * bytes_per_expert, summed over the MoE
                                    layers a token runs */
    struct moe_layer *layers;    /* n_layer entries */
};

/* Computes the layout of f. A file with no expert tensors is a valid dense
 * layout (n_moe_layers 0). Fails with -EINVAL and a message when the file
 * contradicts itself: expert tensors without expert_count, a last dimension
 * that is not n_expert, expert_used_count outside 1..n_expert, a block index
 * outside block_count. */
int moe_layout_compute(const struct gguf_file *f, struct moe_layout **out, struct fl_err *err);
void moe_layout_free(struct moe_layout *l);

/* File offset of expert e's slice of an expert tensor (e < n_expert). */
static inline uint64_t moe_expert_offset(const struct moe_expert_tensor *et, int e)
{
    return et->t->offset + (uint64_t)e * et->expert_bytes;
}

const char *moe_role_name(enum moe_role r); /* "gate", "up_bias", ... */

#endif
