/* model.h: a loaded model as the forward passes see it.
 *
 * The engine never opens the model file. It is given `base`, a region where
 * offset in memory = offset in file (the pager maps the whole file as one
 * region), and the parsed gguf_file; from those it builds a tensor table
 * (name -> pointer, type, shape). Expert weights (the 3-D *_exps tensors)
 * are only touched between acquire and release of an eng_expert_source.
 *
 * This header is the framework's interface for architecture implementations
 * (model/arch-*.c); the CLI drives the engine through app/session.h. */
#ifndef FL_MODEL_H
#define FL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gguf/gguf.h"
#include "model/yarn.h"

struct eng_tensor {
    const char *name;         /* points into the gguf_file */
    const uint8_t *data;      /* base + file offset */
    uint32_t type;            /* enum fl_type */
    int n_dims;
    int64_t ne[4];            /* ne[0] = row length; unused dims are 1 */
    uint64_t offset, nbytes;  /* in the file */
    int64_t index;            /* in the file's tensor list */
    bool in_pass;             /* read by the forward pass (found through eng_model_tensor) */
    /* After eng_model_repack, a rebuilt tensor's data points at a copy in
     * another layout, owned by the model, and type is that layout's id
     * (e.g. Q4_K_R8); offset/nbytes still name its bytes in the file. */
};

enum eng_rope_mode {
    ENG_ROPE_NORM = 0, /* rotates adjacent pairs (x[2i], x[2i+1]) */
    ENG_ROPE_NEOX = 2, /* rotates (x[i], x[i + n_rot/2]) */
};

/* Values as llama.cpp's llama_expert_gating_func_type. */
enum eng_gating {
    ENG_GATING_SOFTMAX = 1,        /* probs = softmax(logits) over all experts */
    ENG_GATING_SIGMOID = 2,        /* probs = sigmoid(logits) */
    ENG_GATING_SOFTMAX_WEIGHT = 3, /* pick by logits, softmax over the k picked */
};

/* Hyperparameters common to the architectures; all read from metadata by
 * the arch's load function (helpers below). Arch-specific extras live in
 * the arch's own data (eng_model.arch_data). */
struct eng_hparams {
    const char *arch;        /* general.architecture */
    int64_t n_vocab;
    int64_t n_ctx_train;
    int64_t n_embd;
    int64_t n_layer;
    int64_t n_head, n_head_kv;
    int64_t n_embd_head_k, n_embd_head_v;
    int64_t n_rot;
    enum eng_rope_mode rope_mode;
    /* the rope of the first n_rot dims of every head, the file's settings
     * under the run's (eng_model.rope_ctx); n_dims 0 where n_rot is 0. An
     * arch with its own rope (MLA, sliding layers) keeps its own. */
    struct yarn_rope rope;
    float rms_eps;
    int64_t n_ff;            /* dense FFN width; 0 when the arch has none */
    int64_t n_expert, n_expert_used, n_ff_exp;
    int64_t n_expert_shared, n_layer_dense_lead;
    enum eng_gating gating;
    bool expert_weights_norm;
    float expert_weights_scale; /* 0 or 1 = no scaling */
    /* Gated DeltaNet layers (qwen35moe; 0 elsewhere): conv kernel width,
     * key heads (ssm.group_count) and value heads (ssm.time_step_rank) of
     * ssm_d_state dims each */
    int64_t ssm_d_conv, ssm_n_k_head, ssm_n_v_head, ssm_d_state;
    /* DeepSeek sparse attention's lightning indexer (model/dsa.h; 0 in a
     * dense model): query heads, key length, positions each query reads */
    int64_t indexer_n_head, indexer_head_dim, indexer_top_k;
    /* Set by an arch before the common keys are read: blocks whose
     * head_count_kv is 0 have no attention (Kimi-Linear's KDA blocks) */
    bool kv_heads_zero_ok;
    /* Kimi K3's residual attention: every res_attn_block-th block banks its
     * input (0: none; the pass's scratch holds the banked rows) */
    int64_t res_attn_block;
    /* Why the device cannot run this model's attention (NULL: it can):
     * the KV cache and attention stay on the host with a GPU */
    const char *attention_host_only;
    /* MiniMax's sparse attention (model/msa.h; all 0 without): its sizes,
     * and which blocks have it (msa_layers[il]; NULL: none) */
    struct eng_msa_sizes { int n_head, block, top_k; int64_t head_dim; } msa;
    const bool *msa_layers;
    /* Why the KV cache must stay F16 (NULL: -ctk/-ctv may quantize it) */
    const char *kv_f16_only;
};

struct eng_arch;

/* A MoE layer's router: logits = w . x (+ bias) of the layer's normed FFN
 * input x (norm: the weight of that RMSNorm, NULL when it has none). */
struct eng_router {
    const struct eng_tensor *w, *bias, *norm;
};

struct eng_model {
    const struct gguf_file *gguf;
    const uint8_t *base;
    const struct eng_arch *arch;
    struct eng_hparams hp;
    struct yarn_context rope_ctx; /* the run's rope settings (zeroed: the file's) */
    int64_t n_tensors;
    struct eng_tensor *tensors;   /* sorted by name */
    /* Per layer: floats of one K row and one V row in the KV cache (all KV
     * heads together). Set by the arch's load; 0 = that layer caches nothing
     * of that kind (MLA stores only K). */
    int64_t *kv_k_dim, *kv_v_dim;
    /* MLA: a layer's K row is its latent cache and its value at once; a V
     * row, where a layer has one, holds DSA's indexer key. Both F16 only. */
    bool kv_latent;
    /* Per layer (NULL: no layer has any): floats of one sequence's
     * recurrent state beside the KV cache, the conv window and the
     * delta-rule matrices (model/kv-cache.h); 0 = none in that layer. */
    int64_t *rs_conv_dim, *rs_ssm_dim;
    void *arch_data;              /* owned by the arch (freed by its unload) */
    /* Set by the arch's load: the embedding (rows looked up on the host),
     * the final norm and the output matrix (the embedding when tied). */
    const struct eng_tensor *embd, *out_norm, *output;
    /* Per layer: its router and the norm before it (NULL: the layer routes
     * nothing), for predictors that guess a later layer's experts. */
    struct eng_router *routers;
    void *repack_arena;           /* eng_model_repack's copies (one mapping) */
    size_t repack_arena_size;
};

/* Builds the model over `base` (offset in memory = offset in file): tensor
 * table, hparams and per-arch setup. The gguf_file must outlive the model.
 * Errors: -EINVAL with "FILE: ..." in err (unknown arch, missing key or
 * tensor, wrong shape). rope (may be NULL: the file's) is the run's rope
 * settings, llama.cpp's --rope-* and --yarn-* flags. */
int eng_model_load(const struct gguf_file *g, const uint8_t *base,
                   const struct yarn_context *rope, struct eng_model **out, struct fl_err *err);
void eng_model_free(struct eng_model *m);

/* eng_model_repack (backend/cpu/cpu-backend.h) rebuilds RAM-tier weights in
 * the CPU kernels' layouts; the model only owns the copies. */

/* Tensor by name, NULL when absent. */
const struct eng_tensor *eng_model_find(const struct eng_model *m, const char *name);

/* --- helpers for an arch's load function ---------------------------------- */

/* Tensor "blk.<layer>.<name>" (layer < 0: just <name>); required ones set err
 * "FILE: missing tensor NAME" and return NULL. When n_dims > 0 the shape is
 * checked against ne[0..n_dims-1] (a value < 0 matches anything). A tensor
 * found is marked in_pass: the pass reads it (the device pass is taken only
 * when every such tensor but the experts, the embedding and the output
 * matrix is in VRAM). */
/* eng_model_tensor, required, of n_dims (up to 3) dims [a, b, c]. */
const struct eng_tensor *eng_model_need(struct eng_model *m, int layer, const char *name,
                                        int n_dims, int64_t a, int64_t b, int64_t c,
                                        struct fl_err *err);
/* Block `layer`'s dense FFN: ffn_gate and ffn_up [n_embd, n_ff], ffn_down
 * [n_ff, n_embd]; -EINVAL with a one-line message (also for a file without
 * feed_forward_length). */
int eng_model_dense_ffn(struct eng_model *m, int layer, const struct eng_tensor **gate,
                        const struct eng_tensor **up, const struct eng_tensor **down,
                        struct fl_err *err);
const struct eng_tensor *eng_model_tensor(struct eng_model *m, int layer, const char *name,
                                          bool required, int n_dims, const int64_t *ne,
                                          struct fl_err *err);

/* Metadata "<arch>.<key>"; required ones give "FILE: missing key ARCH.KEY".
 * On absence of an optional key *out keeps its value and 0 is returned. */
int eng_model_key_int(const struct eng_model *m, const char *key, bool required,
                      int64_t *out, struct fl_err *err);
int eng_model_key_float(const struct eng_model *m, const char *key, bool required,
                        float *out, struct fl_err *err);
int eng_model_key_bool(const struct eng_model *m, const char *key, bool required,
                       bool *out, struct fl_err *err);

/* The keys every architecture here shares: vocab (token_embd rows),
 * context, embedding, blocks, heads, head dims (key_length/value_length,
 * default n_embd/n_head), rope (dimension_count default head dim, freq_base
 * default 10000, scaling factor), rms eps, expert count/used/ffn length and
 * the expert gating/norm/scale keys when present. Sets m->hp. */
int eng_model_load_common_hparams(struct eng_model *m, struct fl_err *err);

/* Allocates kv_k_dim/kv_v_dim with n_head_kv*n_embd_head_{k,v} per layer. */
int eng_model_default_kv_dims(struct eng_model *m, struct fl_err *err);

/* Layer il's router (m->routers, allocated on first use); -ENOMEM. */
int eng_model_set_router(struct eng_model *m, int il, const struct eng_tensor *w,
                         const struct eng_tensor *bias, const struct eng_tensor *norm,
                         struct fl_err *err);
/* Layer il's router, NULL when it routes nothing. */
const struct eng_router *eng_model_router(const struct eng_model *m, int il);
/* logits[e] = w_e . x (+ bias[e]) for an F32 router, in 16 float lanes
 * then summed in double: a guess's arithmetic (a predictor's), not the
 * pass's. */
void eng_router_logits(const struct eng_router *r, const float *x, float *logits);

#endif
