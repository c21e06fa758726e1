/* gen-meta.c: the metadata keys of each architecture's GGUF as llama.cpp
 * reads them (general.*, the tokenizer, <arch>.*), for gen's shapes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/gen-internal.h"
#include "gguf/tensor-types.h"

static uint32_t file_type(uint32_t type)
{
    switch (type) {
    case FL_TYPE_F16: return 1;    /* LLAMA_FTYPE_MOSTLY_F16 */
    case FL_TYPE_Q8_0: return 7;   /* MOSTLY_Q8_0 */
    case FL_TYPE_Q4_K: return 14;  /* MOSTLY_Q4_K_S: experts and attention all Q4_K */
    case FL_TYPE_MXFP4: return 38; /* MOSTLY_MXFP4_MOE */
    default: return 0;
    }
}

struct kw {
    struct gguf_writer *w;
    const char *arch;
    int rc;
};

static const char *akey(struct kw *k, const char *suffix, char *buf, size_t len)
{
    snprintf(buf, len, "%s.%s", k->arch, suffix);
    return buf;
}

static void ku32(struct kw *k, const char *suffix, int64_t v)
{
    char key[128];
    if (!k->rc)
        k->rc = gguf_writer_kv_u32(k->w, akey(k, suffix, key, sizeof(key)), (uint32_t)v);
}

static void kf32(struct kw *k, const char *suffix, float v)
{
    char key[128];
    if (!k->rc)
        k->rc = gguf_writer_kv_f32(k->w, akey(k, suffix, key, sizeof(key)), v);
}

static void kstr(struct kw *k, const char *suffix, const char *v)
{
    char key[128];
    if (!k->rc)
        k->rc = gguf_writer_kv_str(k->w, akey(k, suffix, key, sizeof(key)), v);
}

/* The pre-tokenizer the family's own GGUFs name, for gen's small
 * byte-level BPE vocabulary (whatever the family). */
static const char *vocab_pre(enum gen_arch a)
{
    switch (a) {
    case GEN_ARCH_GLM4MOE: return "glm4";
    case GEN_ARCH_MINIMAX_M2:
    case GEN_ARCH_MINIMAX_M3: return "minimax-m2";
    case GEN_ARCH_QWEN35MOE: return "qwen35";
    case GEN_ARCH_QWEN3NEXT: return "qwen2";
    default: return "gpt-2";
    }
}

static int general_and_vocab(const struct gen_params *p, struct gguf_writer *w)
{
    char name[64], desc[160];
    snprintf(name, sizeof(name), "faultline-gen-%s", gen_arch_name(p->arch));
    snprintf(desc, sizeof(desc), "synthetic MoE model, random weights (faultline gen, %s, "
             "seed %llu)", fl_type_name(p->type), (unsigned long long)p->seed);
    int rc = gguf_writer_kv_str(w, "general.architecture", gen_arch_name(p->arch));
    if (!rc) rc = gguf_writer_kv_str(w, "general.name", name);
    if (!rc) rc = gguf_writer_kv_str(w, "general.description", desc);
    if (!rc) rc = gguf_writer_kv_u32(w, "general.file_type", file_type(p->type));
    if (!rc) rc = gguf_writer_kv_u32(w, "general.quantization_version", 2);
    if (!rc) rc = gen_vocab_write(p, vocab_pre(p->arch), w);
    return rc;
}

static void common_hparams(struct kw *k, const struct gen_params *p, int64_t ctx)
{
    ku32(k, "vocab_size", gen_vocab_size(p));
    ku32(k, "context_length", ctx);
    ku32(k, "embedding_length", p->n_embd);
    ku32(k, "block_count", p->n_layer + (p->arch == GEN_ARCH_GLM4MOE)); /* + its nextn block */
    ku32(k, "attention.head_count", p->n_head);
    ku32(k, "expert_count", p->n_expert);
    ku32(k, "expert_used_count", p->n_expert_used);
}

static void kbool(struct kw *k, const char *suffix, bool v)
{
    char key[128];
    if (!k->rc)
        k->rc = gguf_writer_kv_bool(k->w, akey(k, suffix, key, sizeof(key)), v);
}

/* GLM-4.5 (scale 2.5 as the 355B model; Air has 1.0) with one nextn block
 * counted in block_count, as its GGUFs are converted. */
static void glm4moe_hparams(struct kw *k, const struct gen_params *p)
{
    ku32(k, "nextn_predict_layers", 1);
    ku32(k, "feed_forward_length", p->n_ff);
    ku32(k, "attention.head_count_kv", p->n_head_kv);
    ku32(k, "attention.key_length", p->head_dim);
    ku32(k, "attention.value_length", p->head_dim);
    ku32(k, "rope.dimension_count", p->n_rot);
    kf32(k, "rope.freq_base", 1e6f);
    kf32(k, "attention.layer_norm_rms_epsilon", 1e-5f);
    ku32(k, "expert_feed_forward_length", p->n_ff_exp);
    ku32(k, "expert_shared_count", p->n_expert_shared);
    ku32(k, "leading_dense_block_count", p->n_layer_dense);
    kf32(k, "expert_weights_scale", 2.5f);
    kbool(k, "expert_weights_norm", true);
    ku32(k, "expert_gating_func", 2); /* sigmoid */
}

/* MiniMax's attention and routing keys (M2 and M3). */
static void minimax_hparams(struct kw *k, const struct gen_params *p)
{
    ku32(k, "attention.head_count_kv", p->n_head_kv);
    ku32(k, "attention.key_length", p->head_dim);
    ku32(k, "attention.value_length", p->head_dim);
    ku32(k, "rope.dimension_count", p->n_rot);
    kf32(k, "rope.freq_base", 5e6f);
    kf32(k, "attention.layer_norm_rms_epsilon", 1e-6f);
    ku32(k, "expert_feed_forward_length", p->n_ff_exp);
    ku32(k, "expert_gating_func", 2); /* sigmoid */
}

/* llama.cpp sizes MiniMax-M2's experts by feed_forward_length and requires
 * expert_feed_forward_length too: its GGUFs carry both, equal. */
static void minimax_m2_hparams(struct kw *k, const struct gen_params *p)
{
    ku32(k, "feed_forward_length", p->n_ff_exp);
    minimax_hparams(k, p);
}

static void kint_arr(struct kw *k, const char *suffix, const int32_t *v, uint64_t n)
{
    char key[128];
    if (!k->rc)
        k->rc = gguf_writer_kv_arr(k->w, akey(k, suffix, key, sizeof(key)), GGUF_VT_INT32, v, n);
}

/* MiniMax-M3: M2's keys but feed_forward_length the dense blocks' width,
 * plus the dense lead, the shared expert, renormalisation and the sparse
 * attention's indexer. */
static void minimax_m3_hparams(struct kw *k, const struct gen_params *p)
{
    ku32(k, "feed_forward_length", p->n_ff); /* the dense blocks' width */
    minimax_hparams(k, p);
    ku32(k, "leading_dense_block_count", p->n_layer_dense);
    ku32(k, "expert_shared_count", p->n_expert_shared);
    kf32(k, "expert_weights_scale", 2.0f);
    kbool(k, "expert_weights_norm", true);
    ku32(k, "attention.indexer.head_count", p->n_head_kv);
    ku32(k, "attention.indexer.key_length", p->idx_head_dim);
    ku32(k, "attention.indexer.top_k", p->idx_top_k);
    ku32(k, "attention.indexer.block_size", p->msa_block);
    ku32(k, "attention.indexer.local_blocks", p->msa_local);
}

/* Qwen3.5 MoE: M-RoPE sections that give text positions plain NEOX RoPE
 * (each rotated pair in the t, h or w section: ceil((P - r) / 3) pairs of
 * residue r, as Qwen3.5's 11, 11, 10 for 32 pairs). */
static void qwen35moe_hparams(struct kw *k, const struct gen_params *p)
{
    const int32_t P = (int32_t)(p->n_rot / 2);
    const int32_t sections[4] = { (P + 2) / 3, (P + 1) / 3, P / 3, 0 };
    ku32(k, "attention.head_count_kv", p->n_head_kv);
    ku32(k, "attention.key_length", p->head_dim);
    ku32(k, "attention.value_length", p->head_dim);
    ku32(k, "rope.dimension_count", p->n_rot);
    if (p->arch == GEN_ARCH_QWEN35MOE) /* Qwen3-Next's RoPE is plain NEOX */
        kint_arr(k, "rope.dimension_sections", sections, 4);
    kf32(k, "rope.freq_base", 1e7f);
    kf32(k, "attention.layer_norm_rms_epsilon", 1e-6f);
    ku32(k, "expert_feed_forward_length", p->n_ff_exp);
    ku32(k, "expert_shared_feed_forward_length", p->n_ff_exp * p->n_expert_shared);
    ku32(k, "ssm.conv_kernel", 4);
    ku32(k, "ssm.state_size", p->ssm_d_state);
    ku32(k, "ssm.group_count", p->ssm_n_k_head);
    ku32(k, "ssm.time_step_rank", p->ssm_n_v_head);
    ku32(k, "ssm.inner_size", p->ssm_n_v_head * p->ssm_d_state);
    ku32(k, "full_attention_interval", 4);
}

static void deepseek2_hparams(struct kw *k, const struct gen_params *p)
{
    ku32(k, "feed_forward_length", p->n_ff);
    ku32(k, "attention.head_count_kv", 1); /* MLA is MQA over the latent */
    kf32(k, "rope.freq_base", 10000.0f);
    kf32(k, "attention.layer_norm_rms_epsilon", 1e-6f);
    ku32(k, "leading_dense_block_count", p->n_layer_dense);
    ku32(k, "attention.q_lora_rank", p->q_lora_rank);
    ku32(k, "attention.kv_lora_rank", p->kv_lora_rank);
    ku32(k, "attention.key_length", p->kv_lora_rank + p->qk_rope);
    ku32(k, "attention.value_length", p->kv_lora_rank);
    ku32(k, "attention.key_length_mla", p->qk_nope + p->qk_rope);
    ku32(k, "attention.value_length_mla", p->v_head);
    ku32(k, "expert_feed_forward_length", p->n_ff_exp);
    ku32(k, "expert_shared_count", p->n_expert_shared);
    kf32(k, "expert_weights_scale", 2.5f);
    kbool(k, "expert_weights_norm", true);
    ku32(k, "expert_gating_func", 2); /* sigmoid */
    if (p->n_expert_groups > 1) {
        ku32(k, "expert_group_count", p->n_expert_groups);
        ku32(k, "expert_group_used_count", p->n_expert_groups_used);
    }
    ku32(k, "rope.dimension_count", p->qk_rope);
    if (p->arch == GEN_ARCH_GLM_DSA) /* GLM-5: plain rope */
        return;
    kstr(k, "rope.scaling.type", "yarn");
    kf32(k, "rope.scaling.factor", 40.0f);
    ku32(k, "rope.scaling.original_context_length", 4096);
    kf32(k, "rope.scaling.yarn_log_multiplier", 0.1f);
}

/* Kimi-Linear as its converter writes it: head_count_kv per block (1 for
 * MLA, as MQA over the latent; 0 for KDA), no value_length, no q LoRA. */
static void kimi_linear_hparams(struct kw *k, const struct gen_params *p)
{
    int32_t *kv = malloc(sizeof(int32_t) * (size_t)p->n_layer);
    if (!kv) {
        k->rc = k->rc ? k->rc : -ENOMEM;
        return;
    }
    for (int il = 0; il < p->n_layer; il++)
        kv[il] = !gen_kimi_kda_block(p, il);
    kint_arr(k, "attention.head_count_kv", kv, (uint64_t)p->n_layer);
    free(kv);
    ku32(k, "feed_forward_length", p->n_ff);
    kf32(k, "rope.freq_base", 10000.0f);
    kf32(k, "attention.layer_norm_rms_epsilon", 1e-5f);
    ku32(k, "leading_dense_block_count", p->n_layer_dense);
    ku32(k, "attention.kv_lora_rank", p->kv_lora_rank);
    ku32(k, "attention.key_length", p->kv_lora_rank + p->qk_rope);
    ku32(k, "attention.key_length_mla", p->qk_nope + p->qk_rope);
    ku32(k, "attention.value_length_mla", p->v_head);
    ku32(k, "rope.dimension_count", p->qk_rope);
    ku32(k, "expert_feed_forward_length", p->n_ff_exp);
    ku32(k, "expert_shared_count", p->n_expert_shared);
    kf32(k, "expert_weights_scale", 2.446f);
    ku32(k, "expert_gating_func", 2); /* sigmoid */
    ku32(k, "ssm.conv_kernel", 4);
    ku32(k, "kda.head_dim", p->ssm_d_state);
    if (p->arch != GEN_ARCH_KIMI_K3)
        return;
    /* K3's converter also writes value_length and the renormalisation */
    ku32(k, "attention.value_length", p->kv_lora_rank);
    kbool(k, "expert_weights_norm", true);
    ku32(k, "attn_res.block_size", p->res_block);
    kf32(k, "activation.situ_beta", 2.0f);
    kf32(k, "activation.situ_linear_beta", 4.0f);
    ku32(k, "expert_latent_length", p->expert_latent);
    kf32(k, "kda.gate_lower_bound", -5.0f);
}

static void sparse_hparams(struct kw *k, const struct gen_params *p)
{
    ku32(k, "attention.indexer.head_count", p->idx_n_head);
    ku32(k, "attention.indexer.key_length", p->idx_head_dim);
    ku32(k, "attention.indexer.top_k", p->idx_top_k);
    if (p->arch != GEN_ARCH_GLM_DSA)
        return;
    int32_t *types = malloc(sizeof(int32_t) * (size_t)p->n_layer);
    if (!types) {
        k->rc = k->rc ? k->rc : -ENOMEM;
        return;
    }
    for (int il = 0; il < p->n_layer; il++)
        types[il] = gen_full_indexer(p, il);
    kint_arr(k, "attention.indexer.types", types, (uint64_t)p->n_layer);
    free(types);
}

int gen_arch_metadata(const struct gen_params *p, struct gguf_writer *w)
{
    struct kw k = { .w = w, .arch = gen_arch_name(p->arch) };
    k.rc = general_and_vocab(p, w);
    common_hparams(&k, p, p->arch == GEN_ARCH_GPT_OSS ? 131072 : 4096);
    switch (p->arch) {
    case GEN_ARCH_QWEN3MOE:
        ku32(&k, "feed_forward_length", p->n_ff);
        ku32(&k, "attention.head_count_kv", p->n_head_kv);
        ku32(&k, "attention.key_length", p->head_dim);
        ku32(&k, "attention.value_length", p->head_dim);
        kf32(&k, "rope.freq_base", 1e6f);
        kf32(&k, "attention.layer_norm_rms_epsilon", 1e-6f);
        ku32(&k, "expert_feed_forward_length", p->n_ff_exp);
        break;
    case GEN_ARCH_LLAMA:
        ku32(&k, "feed_forward_length", p->n_ff_exp); /* Mixtral: the experts' n_ff */
        ku32(&k, "attention.head_count_kv", p->n_head_kv);
        if (p->head_dim * p->n_head != p->n_embd) {
            /* llama.cpp assumes n_embd / n_head unless told */
            ku32(&k, "attention.key_length", p->head_dim);
            ku32(&k, "attention.value_length", p->head_dim);
        }
        ku32(&k, "rope.dimension_count", p->head_dim);
        kf32(&k, "rope.freq_base", 1e6f);
        kf32(&k, "attention.layer_norm_rms_epsilon", 1e-5f);
        break;
    case GEN_ARCH_DEEPSEEK2:
        deepseek2_hparams(&k, p);
        break;
    case GEN_ARCH_DEEPSEEK32:
    case GEN_ARCH_GLM_DSA:
        deepseek2_hparams(&k, p);
        sparse_hparams(&k, p);
        break;
    case GEN_ARCH_KIMI_LINEAR:
    case GEN_ARCH_KIMI_K3:
        kimi_linear_hparams(&k, p);
        break;
    case GEN_ARCH_GLM4MOE:
        glm4moe_hparams(&k, p);
        break;
    case GEN_ARCH_MINIMAX_M2:
        minimax_m2_hparams(&k, p);
        break;
    case GEN_ARCH_MINIMAX_M3:
        minimax_m3_hparams(&k, p);
        break;
    case GEN_ARCH_QWEN35MOE:
    case GEN_ARCH_QWEN3NEXT:
        qwen35moe_hparams(&k, p);
        break;
    case GEN_ARCH_GPT_OSS:
        ku32(&k, "feed_forward_length", p->n_ff_exp);
        ku32(&k, "attention.head_count_kv", p->n_head_kv);
        ku32(&k, "attention.key_length", p->head_dim);
        ku32(&k, "attention.value_length", p->head_dim);
        kf32(&k, "rope.freq_base", 150000.0f);
        kf32(&k, "attention.layer_norm_rms_epsilon", 1e-5f);
        ku32(&k, "expert_feed_forward_length", p->n_ff_exp);
        ku32(&k, "attention.sliding_window", 128);
        kstr(&k, "rope.scaling.type", "yarn");
        kf32(&k, "rope.scaling.factor", 32.0f);
        ku32(&k, "rope.scaling.original_context_length", 4096);
        break;
    default:
        break;
    }
    return k.rc;
}
