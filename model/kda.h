/* kda.h: Kimi Delta Attention, the linear-attention blocks of Kimi-Linear
 * (llama.cpp arch "kimi-linear", src/models/kimi-linear.cpp).
 *
 * Per token, from the attention-normed x (n_head heads of head_dim d):
 *   q, k, v = silu(short causal conv of (Wq x, Wk x, Wv x)), each with its
 *             own kernel (ssm_conv1d_q/k/v) and window in the sequence's
 *             conv state (q's, then k's, then v's, as llama.cpp keeps them)
 *   alpha   = f_b (f_a x)            per channel of every head
 *   beta    = ssm_beta x             per head
 *   o       = the delta rule with a per-channel decay (model/backend.h,
 *             eng_delta_net .per_channel): q and k L2-normed, decay
 *             exp(softplus(alpha + dt_bias) * a_h) per key channel,
 *             beta = sigmoid(beta), from the sequence's state
 *   o       = rmsnorm(o per head) * sigmoid(g_b (g_a x))
 *   out     = Wo o
 * The file's ssm_a already holds -exp(A_log) (the converter applies it).
 * Kimi K3's blocks ("kimi-k3") differ in two places: a full-rank output gate
 * (ssm_g x instead of g_b (g_a x)) and, with kda.gate_lower_bound lb, the
 * decay exp(lb * sigmoid(-(alpha + dt_bias) * a)). */
#ifndef FL_KDA_H
#define FL_KDA_H

#include "base/error.h"
#include "model/backend.h"

struct kda_dims {
    int n_head;
    int64_t head_dim, d_conv;
    float eps;          /* the L2 norms' and the output RMSNorm's */
    bool full_gate;     /* Kimi K3: ssm_g */
    bool bounded;       /* Kimi K3: the gate's lower bound */
    float lower_bound;
};

struct kda_tensors {
    const struct eng_tensor *wq, *wk, *wv;
    struct eng_tensor conv[3]; /* q's, k's, v's kernels viewed as [d_conv, width] */
    const struct eng_tensor *f_a, *f_b, *beta, *a, *dt_bias, *o_norm, *o;
    const struct eng_tensor *g_a, *g_b; /* the low-rank output gate, or */
    const struct eng_tensor *g;         /* the full-rank one (full_gate) */
};

/* Reads <arch>.kda.head_dim and ssm.conv_kernel into d (heads: the
 * attention's; eps the RMSNorm's) and marks the model's attention as the
 * host's with a GPU (the device's delta rule has one decay per head).
 * -EINVAL with a one-line message. */
int kda_load_dims(struct eng_model *m, struct kda_dims *d, struct fl_err *err);

/* Whether block `layer` is a KDA block: head_count_kv 0 in the per-block
 * array (as llama.cpp marks them). */
bool kda_is_block(const struct eng_model *m, int layer);

/* Floats of one sequence's conv and delta-rule state in a KDA block. */
int64_t kda_conv_state(const struct kda_dims *d);
int64_t kda_ssm_state(const struct kda_dims *d);

/* Finds and shape-checks block `layer`'s KDA tensors (the conv kernels 3-D
 * [d_conv, 1, n_head * head_dim] or 4-D with a trailing 1, as quantizers
 * leave them). -EINVAL with a one-line message. */
int kda_find_tensors(struct eng_model *m, int layer, const struct kda_dims *d,
                     struct kda_tensors *t, struct fl_err *err);

/* The block's attention on x [n_tok][n_embd] into out [n_tok][n_embd]
 * (before the residual add); each span's sequence state is read and kept. */
void kda_attention(struct eng_ctx *c, int layer, const struct kda_dims *d,
                   const struct kda_tensors *t, const float *x, const struct eng_batch *b,
                   float *out);

#endif
