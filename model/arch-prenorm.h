/* arch-prenorm.h: the layer loop every architecture here shares.
 *
 * All are pre-norm residual stacks: x = embd[tokens]; per layer
 *   x += attention(rmsnorm(x, attn_norm)); x += ffn(rmsnorm(x, ffn_norm));
 * then the output norm and head (the model's embd, out_norm, output). Only
 * attention and the FFN (dense, MoE, shared experts) differ, so an
 * architecture gives those two callbacks and its norms; the loop owns the
 * residual buffers and the per-layer scratch marks (a layer's scratch dies
 * with the layer). It runs on whichever backend eng_forward picked.
 * With res (Kimi K3's residual attention, model/backend.h) each norm reads
 * a mix of the checkpoints and the stream instead of the stream, every
 * res->block-th layer banks its input and restarts the stream from its
 * attention output, and the output reads the last mix. */
#ifndef FL_ARCH_PRENORM_H
#define FL_ARCH_PRENORM_H

#include "model/backend.h"

struct eng_prenorm {
    const void *arch;                   /* the architecture's own data */
    const void *pass;                   /* what it made for this pass (e.g. a rope table) */
    int n_layer;                        /* blocks run per token */
    /* layer il's norms before attention and before the FFN */
    void (*norms)(const void *arch, int il, const struct eng_tensor **attn_norm,
                  const struct eng_tensor **ffn_norm);
    /* out = attention of the normed input x (n_tok rows of n_embd) */
    void (*attention)(struct eng_ctx *c, const struct eng_prenorm *p, int il, const float *x,
                      const struct eng_batch *b, float *out);
    /* out = FFN of the normed input x; -errno from the expert source */
    int (*ffn)(struct eng_ctx *c, const struct eng_prenorm *p, int il, const float *x,
               const struct eng_batch *b, float *out, struct fl_err *err);
    const struct eng_res_attn *res; /* NULL: the plain residual stream */
};

int eng_prenorm_forward(struct eng_ctx *c, const struct eng_batch *b,
                        const struct eng_prenorm *p, struct fl_err *err);

#endif
