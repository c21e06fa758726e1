/* mla.h: DeepSeek's multi-head latent attention in the absorbed form
 * llama.cpp runs.
 *
 * Per token x (already attention-normed):
 *   q      = q_b(rmsnorm(q_a x)) (or q x without a q LoRA), per head split into
 *            q_nope [qk_nope] and q_pe [qk_rope]; q_pe is roped
 *   kv     = kv_a_mqa x, split into the latent c [kv_lora] and k_pe [qk_rope]
 *            (one rope part shared by all heads); c = rmsnorm(c); k_pe roped
 *   cache  = one F16 K row per position: [c | k_pe] (MQA: one KV head of key
 *            length kv_lora + qk_rope; the value is the row's first kv_lora)
 *   query  = [k_b_h q_nope_h | q_pe_h] per head (k_b "absorbed" into q)
 *   o_h    = v_b_h attention(query_h, cache)   (decompression to v_head)
 *   out    = wo [o_0 .. o_{n_head-1}]  (Kimi K3: wo ([o ..] * sigmoid(attn_gate x)))
 * which equals standard attention with k_nope_h = k_b_h^T c and
 * v_h = v_b_h c, with a cache of kv_lora + qk_rope values per position.
 *
 * Tensors are the GGUF's absorbed layout: attn_k_b [qk_nope, kv_lora, n_head],
 * attn_v_b [kv_lora, v_head, n_head] (ggml order). Old files with a joint
 * attn_kv_b are not supported (they fail at load with a clear message). */
#ifndef FL_MLA_H
#define FL_MLA_H

#include "base/error.h"
#include "model/dsa.h"
#include "model/model.h"
#include "model/yarn.h"

struct eng_ctx;
struct eng_batch;

struct mla_dims {
    int n_embd, n_head;
    int q_lora;   /* 0: plain q projection (attn_q) */
    int kv_lora;
    int qk_nope, qk_rope, v_head;
    float eps;    /* rms norm epsilon */
    bool out_gate; /* Kimi K3: an optional attn_gate [n_embd, n_head * v_head] */
};

struct mla_tensors {
    const struct eng_tensor *q_a, *q_a_norm, *q_b; /* with a q LoRA */
    const struct eng_tensor *q;                    /* without */
    const struct eng_tensor *kv_a, *kv_a_norm;
    const struct eng_tensor *k_b, *v_b, *o;
    const struct eng_tensor *gate;                 /* NULL: no output gate */
};

/* F16 values of one K cache row (no V cache: V lives in K). */
static inline int64_t mla_cache_row(const struct mla_dims *d)
{
    return (int64_t)d->kv_lora + d->qk_rope;
}

/* Reads the MLA sizes (<arch>.attention.q_lora_rank, kv_lora_rank,
 * key_length_mla, value_length_mla; the rope dims) into d and checks that
 * the file's MQA view is the latent cache (head_count_kv 1, key_length
 * kv_lora + rope; value_length kv_lora unless any_value_length: Kimi's
 * converters write none). -EINVAL with a one-line message. */
int mla_load_dims(struct eng_model *m, bool any_value_length, struct mla_dims *d,
                  struct fl_err *err);

/* Finds and shape-checks the MLA tensors of block `layer` of m. Returns 0
 * or -EINVAL with "FILE: missing tensor ..."/"... has shape ..." in err. */
int mla_find_tensors(struct eng_model *m, int layer, const struct mla_dims *d,
                     struct mla_tensors *t, struct fl_err *err);

/* DeepSeek sparse attention over the latent cache (model/dsa.h); NULL in
 * mla_attention: dense. */
struct mla_sparse {
    const struct dsa_dims *d;
    const struct dsa_tensors *t; /* t->q_b NULL: sel is the last full layer's */
    const struct eng_attn_sel *sel; /* host, n_tok rows of top_k */
};

/* The attention block of `layer` on x [n_tok][n_embd] (normed input, the
 * backend's memory) for the batch's positions into out [n_tok][n_embd]
 * (before the residual add). rope has n_dims = qk_rope (NORM pairing;
 * NULL: no rope, as Kimi-Linear's MLA);
 * kq_scale is applied to q.k. The layer's K cache rows are written (and
 * with sp, the indexer's keys as its V rows). */
void mla_attention(struct eng_ctx *c, int layer, const struct mla_dims *d,
                   const struct mla_tensors *t, const struct yarn_rope *rope, float kq_scale,
                   const struct mla_sparse *sp, const float *x, const struct eng_batch *b,
                   float *out);

#endif
