/* attention.h: causal attention of a batch of queries over the host KV cache
 * (F16 or a block type), with the numerics of ggml's CPU flash-attention
 * kernels (llama.cpp's references ran with flash attention on); the
 * backend's attention op. */
#ifndef FL_CPU_ATTENTION_H
#define FL_CPU_ATTENTION_H

#include "model/backend.h"

/* Query heads of one KV head that the one-chunk path takes through the
 * keys together (each has its own scratch; the scratch bound counts them). */
#define ENG_FA_GROUP 16

/* out[t][h*dv ..] = softmax(q_t.K^T * scale + mask) V over the cached
 * positions 0 .. b->pos[t] of token t's sequence in `layer` (causal). q is
 * [n_tok][q_stride] with head h at q + h*dk. Runs on the pool over (token,
 * KV head): the query heads sharing a KV head are scored together. */
void cpu_attention(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *q,
                   int64_t q_stride, const struct eng_attn *p, float *out, int64_t out_stride);

#endif
