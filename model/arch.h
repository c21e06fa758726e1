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
#include "model/activation.h"
#include "model/model.h"

struct eng_ctx;

/* A run of one sequence's tokens at consecutive positions pos0 .. pos0+n_tok-1
 * (their K/V go to the sequence's cells; attention is causal over the
 * sequence's own positions 0 .. own pos). */
struct eng_span {
    int32_t seq;     /* KV sequence (model/kv-cache.h) */
    int32_t pos0;
    int32_t n_tok;
    bool logits;     /* a logits row for its last token */
    bool all_rows;   /* a logits row for each of its tokens (a prompt's log-probabilities) */
    bool embd;       /* the rows above are the final norm's output (embeddings), not logits */
    int32_t first_row; /* with all_rows: rows for its tokens from this index on only
                        * (perplexity's second half of a chunk); 0: all */
};

/* Spans of at most this many tokens give every row the bits of the same
 * token decoded alone, on every backend: the CPU's attention takes its
 * one-query path below 64 queries (backend/cpu/attention.c), the device its
 * matvec products below 32 tokens (backend/cuda/gpu-matmul.c). Speculative
 * decoding verifies a draft in such a span (app/speculate.h). */
#define ENG_SPAN_SHORT_MAX 31

/* One forward call. A backend may choose an op's arithmetic by the length
 * of a token's span (a prompt chunk or one decoded token), never by what
 * else shares the batch: that keeps a sequence's logits the same whether it
 * runs alone or with others (batch invariance, docs/batching.md).
 *
 * Callers fill the first block. spans == NULL is the single-sequence form:
 * one span {seq 0, pos0, n_tok, logits}. */
struct eng_batch {
    const int32_t *tokens;
    int n_tok;
    int pos0;                     /* spans == NULL only */
    const struct eng_span *spans; /* [n_spans]; span i's tokens follow span i-1's */
    int n_spans;
    bool all_logits; /* true: a logits row per token; false: per span asking */
    float *logits;   /* [n_out][n_vocab], rows in token order */
    float *embd;     /* [n_embd_out][n_embd]: the rows of spans with .embd, in token order */

    /* Set by eng_forward for the pass (callers leave them zero): */
    const int32_t *pos;   /* [n_tok] each token's position */
    const int32_t *seq;   /* [n_tok] its sequence */
    const int32_t *span;  /* [n_tok] its span */
    const int32_t *cell;  /* [n_tok] the KV cell its K/V rows go to */
    const int32_t *out;   /* [n_out] the tokens that get a logits row */
    int n_out;
    const int32_t *embd_out; /* [n_embd_out] the tokens that get an embedding row */
    int n_embd_out;
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
 * (llama, Mixtral), arch-qwen3moe.c, arch-glm4moe.c and arch-minimax-m2.c;
 * they differ only in these options. */
enum eng_qk_norm {
    ENG_QK_NORM_NONE,
    ENG_QK_NORM_HEAD,     /* attn_q_norm/attn_k_norm [head dim], per head, before RoPE */
    ENG_QK_NORM_HEAD_OPT, /* the same where the file has them (GLM-4.5 355B has, Air not) */
    ENG_QK_NORM_FULL,     /* one RMSNorm over all heads' q (k): [n_head * head dim] */
};

struct eng_llama_opts {
    enum eng_qk_norm qk_norm;
    enum eng_rope_mode rope;
    bool ff_exp_key;           /* expert width from expert_feed_forward_length */
    bool qkv_bias;             /* optional attn_q/k/v.bias (GLM) */
    bool post_attn_norm;       /* the pre-FFN norm is post_attention_norm (GLM) */
    /* Biased routing (GLM-4.5, MiniMax-M2; false: softmax renormalised over
     * the top k): the file's gating (gating_default where it has no
     * expert_gating_func; 0 = the key is required), the selection bias
     * exp_probs_b, scale, renormalisation (always when norm_always, else the
     * file's expert_weights_norm); leading dense blocks, shared experts, and
     * trailing nextn blocks that are neither loaded nor run. */
    bool biased_routing;
    enum eng_gating gating_default;
    bool norm_always;
    struct eng_gated act;      /* every FFN's (zero: SwiGLU) */
    bool msa;                  /* MiniMax's sparse attention in the routed blocks (model/msa.h) */
};
int eng_llama_family_load(struct eng_model *m, const struct eng_llama_opts *o, struct fl_err *err);
void eng_llama_family_unload(struct eng_model *m);
int eng_llama_family_forward(struct eng_ctx *c, const struct eng_batch *b, struct fl_err *err);

#endif
