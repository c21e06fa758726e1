/* arch.h: the architecture registry.
 *
 * One entry per general.architecture value. An architecture reads its
 * hyperparameters and tensors at load time (clear error naming any missing
 * key or tensor) and runs one batch through the network at forward time.
 * Adding an architecture = one file model/arch-<name>.c defining a
 * `const struct eng_arch eng_arch_<name>` plus one line in model/arch.c. */
#ifndef FL_ARCH_H
#define FL_ARCH_H

#include "base/error.h"
#include "model/model.h"

struct eng_ctx;

/* One forward call: tokens at positions pos0 .. pos0+n_tok-1 (their K/V
 * rows are written to the cache; attention is causal over 0 .. own pos). */
struct eng_batch {
    const int32_t *tokens;
    int n_tok;
    int pos0;
    bool all_logits; /* true: a logits row per token; false: the last only */
    float *logits;   /* [all_logits ? n_tok : 1][n_vocab] */
};

struct eng_arch {
    const char *name; /* general.architecture */
    /* Reads hparams (m->hp, eng_model_load_common_hparams and extras),
     * finds and checks the tensors, sets m->kv_k_dim/kv_v_dim and
     * m->arch_data. Returns 0 or -errno with err set. */
    int (*load)(struct eng_model *m, struct fl_err *err);
    void (*unload)(struct eng_model *m); /* frees arch_data; may be NULL */
    /* Runs one batch; scratch comes from eng_scratch(c, ...). Returns 0 or
     * -errno with err set (an expert-source error stops the pass). */
    int (*forward)(struct eng_ctx *c, const struct eng_batch *b, struct fl_err *err);
};

/* The entry for general.architecture `name`, or NULL. */
const struct eng_arch *eng_arch_find(const char *name);
/* Comma-separated names of the known architectures, for messages. */
const char *eng_arch_names(void);

/* --- the llama-family decoder -----------------------------------------------
 * Pre-norm GQA attention + SwiGLU FFN (dense or MoE), shared by arch-llama.c
 * (llama, Mixtral) and arch-qwen3moe.c; they differ only in these options. */
struct eng_llama_opts {
    bool qk_norm;              /* attn_q_norm/attn_k_norm per head, before RoPE */
    enum eng_rope_mode rope;
    bool ff_exp_key;           /* expert width from expert_feed_forward_length */
};
int eng_llama_family_load(struct eng_model *m, const struct eng_llama_opts *o, struct fl_err *err);
void eng_llama_family_unload(struct eng_model *m);
int eng_llama_family_forward(struct eng_ctx *c, const struct eng_batch *b, struct fl_err *err);

#endif
