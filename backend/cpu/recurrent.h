/* recurrent.h: the CPU's ops for recurrent layers (Gated DeltaNet): the
 * short causal conv and the delta-rule recurrence over each sequence's
 * state in the host KV cache (model/kv-cache.h), and sigmoid gates. The
 * arithmetic of ggml's CPU ops (ssm_conv, gated_delta_net, l2_norm):
 * sums in float in index order but the L2 norm's sum of squares, in double.
 * Each sequence and head is computed alone, whatever shares the batch. */
#ifndef FL_CPU_RECURRENT_H
#define FL_CPU_RECURRENT_H

#include "model/backend.h"

void cpu_ssm_conv(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *x,
                  const struct eng_tensor *w, int64_t state_off, float *out);
void cpu_delta_net(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *qkv,
                   const float *alpha, const float *beta, const struct eng_delta_net *p,
                   float *out);
void cpu_sigmoid_gate(struct eng_ctx *c, float *y, const float *g, int64_t width, int64_t n_rows,
                      bool per_row);

#endif
