/* dsa.h: DeepSeek sparse attention's lightning indexer (DeepSeek V3.2,
 * llama.cpp arch "deepseek32"; GLM-5, "glm-dsa"), which picks the positions
 * each query's latent attention (model/mla.h) reads.
 *
 * Per token, from the attention-normed x and the q LoRA's normed output qa:
 *   iq    = indexer.attn_q_b qa, n_head heads of head_dim, the first n_rot
 *           dims of each roped (the model's rope table; NEOX pairs in
 *           deepseek32, NORM in glm-dsa)
 *   ik    = LayerNorm(indexer.attn_k x) (weight and bias), roped likewise
 *   both multiplied by the orthonormal Walsh-Hadamard matrix H_head_dim
 *   (as llama.cpp does, so that its cache could hold ik quantized); ik is
 *   kept as the layer's V row (F16: MLA's value lives in its K row)
 *   w     = indexer.proj x / sqrt(head_dim * n_head)
 *   score = sum_h w_h relu(iq_h . ik_j) for each position j <= own
 * and attention reads the top_k positions by score (every position while
 * there are no more than top_k). GLM-5.2's "shared" layers have no indexer
 * and read what the last full layer chose. */
#ifndef FL_DSA_H
#define FL_DSA_H

#include <stdbool.h>

#include "base/error.h"
#include "model/backend.h"

struct dsa_dims {
    struct eng_indexer ix;  /* heads, head_dim, top_k */
    int n_rot;
    enum eng_rope_mode rope;
    float eps;              /* the key's LayerNorm */
};

struct dsa_tensors {
    const struct eng_tensor *q_b, *k, *k_norm, *k_norm_b, *proj; /* q_b NULL: a shared layer */
};

/* Reads <arch>.attention.indexer.{head_count,key_length,top_k} into d
 * (rope mode and eps are the architecture's). -EINVAL with a one-line
 * message for a missing key or sizes llama.cpp cannot run (a head that is
 * not a power of two from 64, rope dims beyond it). */
int dsa_load_dims(struct eng_model *m, struct dsa_dims *d, struct fl_err *err);

/* Finds and shape-checks block `layer`'s indexer tensors (q_lora: the q
 * LoRA rank its query reads). */
int dsa_find_tensors(struct eng_model *m, int layer, const struct dsa_dims *d, int q_lora,
                     struct dsa_tensors *t, struct fl_err *err);

/* ik of every token [n_tok][head_dim] (backend memory), for the layer's
 * cache; cs is the uploaded rope table of the batch's positions. */
float *dsa_keys(struct eng_ctx *c, const struct dsa_dims *d, const struct dsa_tensors *t,
                const float *x, int n_tok, const float *cs);

/* After the keys are stored: each token's positions into sel (host, n_tok
 * rows of top_k). */
void dsa_select(struct eng_ctx *c, int layer, const struct dsa_dims *d,
                const struct dsa_tensors *t, const float *x, const float *qa,
                const struct eng_batch *b, const float *cs, const struct eng_attn_sel *sel);

#endif
