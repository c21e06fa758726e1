/* arch-prenorm.h: the layer loop deepseek2 and gpt-oss share.
 *
 * Both are pre-norm residual stacks: x = embd[tokens]; per layer
 *   x += attention(rmsnorm(x, attn_norm)); x += ffn(rmsnorm(x, ffn_norm));
 * then the output norm and head. Only attention and the FFN (dense, MoE,
 * shared experts) differ, so an architecture gives those two callbacks and
 * its norms; the loop owns the residual buffers and the per-layer scratch
 * marks (a layer's scratch dies with the layer). */
#ifndef FL_ARCH_PRENORM_H
#define FL_ARCH_PRENORM_H

#include "model/ops.h"

struct eng_prenorm {
    const void *arch;                   /* the architecture's own data */
    const struct eng_tensor *embd, *out_norm, *output;
    int n_layer;                        /* blocks run per token */
    /* layer il's norms before attention and before the FFN */
    void (*norms)(const void *arch, int il, const struct eng_tensor **attn_norm,
                  const struct eng_tensor **ffn_norm);
    /* out = attention of the normed input x (n_tok rows of n_embd) */
    void (*attention)(struct eng_ctx *c, const void *arch, int il, const float *x,
                      const struct eng_batch *b, float *out);
    /* out = FFN of the normed input x; -errno from the expert source */
    int (*ffn)(struct eng_ctx *c, const void *arch, int il, const float *x,
               const struct eng_batch *b, float *out, struct fl_err *err);

    /* The pass on the device (backend/cuda/gpu-offload.h), taken when every tensor
     * gpu_tensors names (at most PRENORM_GPU_TENSORS; experts excluded: they
     * reach the GPU through the expert cache or run on the CPU) and the
     * norms are in VRAM. NULL: the architecture has none. The callbacks are
     * attention and ffn over device rows (errors surface at the pass end). */
    int (*gpu_tensors)(const void *arch, int il, const struct eng_tensor **w);
    void (*gpu_attention)(struct eng_ctx *c, const void *arch, int il, const float *d_x,
                          const struct eng_batch *b, float *d_out);
    void (*gpu_ffn)(struct eng_ctx *c, const void *arch, int il, const float *d_x,
                    const struct eng_batch *b, float *d_out);
};
#define PRENORM_GPU_TENSORS 24

int eng_prenorm_forward(struct eng_ctx *c, const struct eng_batch *b,
                        const struct eng_prenorm *p, struct fl_err *err);

#endif
