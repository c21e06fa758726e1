/* model-gen.h: synthetic MoE models in GGUF, of any size, for tests and
 * benchmarks ("faultline gen").
 *
 * The files have exactly the tensors and metadata llama.cpp expects for
 * qwen3moe, llama (Mixtral layout), deepseek2 (MLA), gpt-oss, glm4moe (with
 * its nextn block), minimax-m2, qwen35moe and qwen3next (Gated DeltaNet), a small
 * built-in byte-level BPE vocabulary and random weights that still make a
 * well-behaved network: matrices have std ~ 1/sqrt(fan_in), and a fixed
 * direction v in every token's residual stream gives each layer's router a
 * power-law preference over its experts (see gen-synth.c).
 *
 * Output is a pure function of the parameters and the seed: every chunk of
 * every tensor draws from its own PRNG stream, so any number of threads
 * writes the same bytes. Memory stays bounded (a few MiB per thread)
 * whatever the file size. */
#ifndef FL_MODEL_GEN_H
#define FL_MODEL_GEN_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

struct gguf_file;

enum gen_arch {
    GEN_ARCH_QWEN3MOE,
    GEN_ARCH_LLAMA,
    GEN_ARCH_DEEPSEEK2,
    GEN_ARCH_GPT_OSS,
    GEN_ARCH_GLM4MOE,
    GEN_ARCH_MINIMAX_M2,
    GEN_ARCH_QWEN35MOE,
    GEN_ARCH_QWEN3NEXT,
    GEN_ARCH_DEEPSEEK32,  /* deepseek2 with DeepSeek sparse attention (V3.2) */
    GEN_ARCH_GLM_DSA,     /* the same as GLM-5 writes it */
    GEN_ARCH_KIMI_LINEAR, /* Kimi Delta Attention blocks and MLA without rope */
    GEN_ARCH_KIMI_K3,     /* kimi-linear with residual attention, latent experts, situ */
    GEN_ARCH_MINIMAX_M3,  /* MiniMax-M2's attention with MiniMax Sparse Attention */
    GEN_ARCH_COUNT
};

/* What the user asks for. Every shape field left 0 is chosen by
 * gen_resolve(): from the architecture's defaults, scaled to target_size
 * when one is given. */
struct gen_params {
    enum gen_arch arch;
    uint32_t type;         /* enum fl_type of the big matrices: F16, Q8_0, Q4_K, MXFP4 */
    uint64_t seed;
    uint64_t target_size;  /* bytes; 0 = no target */
    int n_threads;         /* 0 = 2 */
    double skew;           /* router power-law exponent; < 0 = default, 0 = none */

    int64_t n_embd;
    int64_t n_layer;
    int64_t n_expert;
    int64_t n_expert_used;
    int64_t n_ff_exp;      /* per expert */
    int64_t n_ff;          /* dense FFN (deepseek2's leading dense layers) */
    int64_t n_head;
    int64_t n_head_kv;
    int64_t head_dim;      /* all but deepseek2, which uses the MLA dims */
    int64_t n_rot;         /* glm4moe/minimax-m2/qwen35moe: rotated dims per head (partial RoPE) */
    int64_t n_expert_shared;   /* deepseek2, glm4moe, qwen35moe */
    int64_t ssm_d_state, ssm_n_k_head, ssm_n_v_head; /* qwen35moe/qwen3next's Gated DeltaNet:
                                                      head dims, key and value heads
                                                      (kimi-linear: KDA's head dim; its
                                                      heads are --heads) */
    bool ssm_in;           /* qwen3next: one ssm_in matrix for q, k, v and z, as files
                              converted before attn_qkv/attn_gate */
    int64_t n_layer_dense;     /* deepseek2, glm4moe: leading dense layers */
    int64_t q_lora_rank, kv_lora_rank, qk_nope, qk_rope, v_head; /* deepseek2 MLA */
    int64_t idx_n_head, idx_head_dim, idx_top_k; /* deepseek32, glm-dsa: the lightning
                                                    indexer (glm-dsa: full every other block) */
    int64_t msa_block, msa_local;     /* minimax-m3: positions per block; local blocks
                                         (its indexer: --indexer-dim, --indexer-top-k
                                         blocks, one head per KV head) */
    int64_t expert_latent, res_block; /* kimi-k3: the routed experts' width; every
                                         res_block-th block banks its input */
    int64_t n_expert_groups, n_expert_groups_used; /* deepseek2: DeepSeek-V3's group-limited
                                                    routing (0/1: none); library only */
    const struct gguf_file *vocab; /* NULL: gen's byte-level BPE vocabulary; else every
                                    * tokenizer.* key of this file (--vocab) */
};

const char *gen_arch_name(enum gen_arch a); /* llama.cpp's name, e.g. "qwen3moe" */
/* Whether the architecture has leading dense layers and shared experts. */
bool gen_arch_has_dense(enum gen_arch a);
/* Whether its attention is DeepSeek's latent attention (deepseek2 and the
 * sparse kinds built on it; kimi-linear's attention blocks). */
bool gen_arch_is_mla(enum gen_arch a);
/* Whether it has DeepSeek sparse attention's indexer (deepseek32, glm-dsa). */
bool gen_arch_has_indexer(enum gen_arch a);
/* Whether it is Moonshot's KDA + MLA stack (kimi-linear, kimi-k3). */
bool gen_arch_is_kimi(enum gen_arch a);
int gen_arch_by_name(const char *name);     /* enum gen_arch or -1 */
const char *gen_arch_names(void);           /* "qwen3moe, llama, ...": every name, in order */

/* Fills the free shape fields, fitting target_size, and validates them all.
 * -EINVAL with a one-line message in err for an impossible request. */
int gen_resolve(struct gen_params *p, struct fl_err *err);

/* Exact size in bytes of the file gen_write() would write for p (resolved). */
uint64_t gen_file_size(const struct gen_params *p);

/* Called from the calling thread about every 100 ms while writing, and
 * once at the end with done == total. */
typedef void (*gen_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/* Writes the model to path (resolved p). On failure the partial file is
 * removed. */
int gen_write(const struct gen_params *p, const char *path, gen_progress_fn progress,
              void *ctx, struct fl_err *err);

/* Router skew of MoE layer il as the generator planted it: the share of
 * top-k selections that go to that layer's 8 most popular experts, estimated
 * by routing n_tokens simulated tokens (random router noise on top of the
 * planted per-expert offsets). Deterministic for (p, il, n_tokens). */
double gen_router_top8_share(const struct gen_params *p, int64_t il, int n_tokens);

#endif
