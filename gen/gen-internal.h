/* gen-internal.h: what the parts of the model generator share (model-gen.c,
 * gen-arch.c, gen-synth.c, gen-vocab.c). Not an interface for other modules:
 * they use model-gen.h. */
#ifndef FL_GEN_INTERNAL_H
#define FL_GEN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf-writer.h"
#include "gen/model-gen.h"

/* How a tensor's values are made. */
enum gen_init {
    GEN_INIT_MATRIX, /* random quantized blocks written directly, std sigma */
    GEN_INIT_NORM,   /* 1 + N(0, 0.05^2) */
    GEN_INIT_NOISE,  /* N(0, sigma^2): biases, sinks, exp_probs_b */
    GEN_INIT_EMBD,   /* N(0, 1) plus v */
    GEN_INIT_OUTPUT, /* N(0, sigma^2), orthogonal to v */
    GEN_INIT_ROUTER, /* N(0, sigma^2) plus the layer's expert offsets along v */
    GEN_INIT_SSM_A,  /* -(1 + 4|N(0, 1)|): a DeltaNet head's decay rate, -exp(A_log) */
    GEN_INIT_SSM_DT, /* -4 + N(0, sigma^2): softplus of it, dt ~ 0.02 as trained models */
};

struct gen_tensor {
    char name[64];
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[4];
    enum gen_init init;
    float sigma;
    bool orth;     /* writes the residual stream: its v coordinate is kept 0 */
    int32_t layer; /* routers: the layer whose offsets to use */
};

struct gen_plan {
    const struct gen_params *p;
    struct gen_tensor *t;
    int64_t n, cap;
    int64_t v_dim;  /* the residual coordinate that carries v */
    float v_mag;    /* v's value in every token embedding */
    float v_norm;   /* expected value of v's coordinate after RMSNorm */
    float *offsets; /* [n_layer][n_expert] planted router logit offsets, or NULL */
};

/* gen-arch.c: per-architecture shapes and tensor lists. */
void gen_arch_defaults(struct gen_params *p, int64_t width);
int64_t gen_arch_base_width(enum gen_arch a);
int gen_arch_check(const struct gen_params *p, struct fl_err *err);
int gen_arch_tensors(struct gen_plan *plan);
/* Which blocks are which, for the tensors and the keys alike: glm-dsa's
 * blocks alternate a full indexer and one reading its choice; Kimi's KDA
 * blocks are all but every fourth and the last (its full_attn_layers 4,
 * 8, ..., counted from 1, and the last). */
bool gen_full_indexer(const struct gen_params *p, int il);
bool gen_kimi_kda_block(const struct gen_params *p, int il);

/* gen-meta.c: per-architecture metadata keys. */
int gen_arch_metadata(const struct gen_params *p, struct gguf_writer *w);

/* model-gen.c: appends a tensor to the plan (returns -ENOMEM on failure). */
int gen_plan_add(struct gen_plan *plan, const struct gen_tensor *t);

/* gen-synth.c: the values. Rows are ne[0] values; a tensor's rows are
 * numbered over ne[1..3]. */
int64_t gen_chunk_rows(const struct gen_tensor *t); /* rows per work chunk */
/* Fills rows [row0, row0 + nrows) of tensor t into dst (its on-disk bytes),
 * drawing from the stream key. scratch holds gen_chunk_rows(t) * ne[0]
 * floats. */
void gen_synth_rows(const struct gen_plan *plan, const struct gen_tensor *t, int64_t row0,
                    int64_t nrows, uint64_t key, void *dst, float *scratch);
/* Planted offsets of one layer (n_expert values, mean 0), deterministic in
 * (seed, layer). */
void gen_layer_offsets(const struct gen_params *p, int64_t il, float *out);
uint64_t gen_mix(uint64_t a, uint64_t b);

/* gen-tokenizer.c: the model's tokenizer keys, gen's vocabulary below
 * (pre: its pre-tokenizer's name) or p->vocab's; its token count; whether
 * p->vocab's keys can be written. */
int gen_vocab_write(const struct gen_params *p, const char *pre, struct gguf_writer *w);
int64_t gen_vocab_size(const struct gen_params *p);
int gen_vocab_check(const struct gen_params *p, struct fl_err *err);

/* gen-vocab.c: byte-level BPE vocabulary (gpt-2 style). */
extern const char *const gen_vocab_tokens[];
extern const int32_t gen_vocab_token_type[];
extern const char *const gen_vocab_merges[];
extern const uint32_t gen_vocab_n_tokens;
extern const uint32_t gen_vocab_n_merges;
extern const uint32_t gen_vocab_eos_id;

#endif
