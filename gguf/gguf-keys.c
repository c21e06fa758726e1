/* gguf-keys.c: the table of known metadata keys and the check that each one
 * present holds the kind of value its readers expect (see gguf-keys.h).
 * Types follow what llama.cpp's converters write and its loader accepts;
 * integers are accepted at any width because only their value matters. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "gguf/gguf-keys.h"

static const struct gguf_key_info general_keys[] = {
    { "general.architecture", GGUF_KEY_STR, "architecture", false },
    { "general.type", GGUF_KEY_STR, "file kind", false },
    { "general.name", GGUF_KEY_STR, "model name", false },
    { "general.author", GGUF_KEY_STR, "author", false },
    { "general.version", GGUF_KEY_STR, "model version", false },
    { "general.description", GGUF_KEY_STR, "description", false },
    { "general.license", GGUF_KEY_STR, "license", false },
    { "general.url", GGUF_KEY_STR, "url", false },
    { "general.alignment", GGUF_KEY_U32, "data alignment", false },
    { "general.file_type", GGUF_KEY_COUNT, "file type (llama_ftype)", false },
    { "general.quantization_version", GGUF_KEY_COUNT, "quantization version", false },
    { "split.no", GGUF_KEY_COUNT, "index of this split file", false },
    { "split.count", GGUF_KEY_COUNT, "files the model is split into", false },
    { "split.tensors.count", GGUF_KEY_COUNT, "tensors in all split files", false },
    { "tokenizer.ggml.model", GGUF_KEY_STR, "tokenizer model", false },
    { "tokenizer.ggml.pre", GGUF_KEY_STR, "pre-tokenizer", false },
    { "tokenizer.ggml.tokens", GGUF_KEY_STR_ARR, "vocabulary", false },
    { "tokenizer.ggml.scores", GGUF_KEY_F32_ARR, "token scores", true },
    { "tokenizer.ggml.token_type", GGUF_KEY_I32_ARR, "token types", true },
    { "tokenizer.ggml.merges", GGUF_KEY_STR_ARR, "BPE merges", false },
    { "tokenizer.ggml.bos_token_id", GGUF_KEY_COUNT, "BOS token", false },
    { "tokenizer.ggml.eos_token_id", GGUF_KEY_COUNT, "EOS token", false },
    { "tokenizer.ggml.eot_token_id", GGUF_KEY_COUNT, "EOT token", false },
    { "tokenizer.ggml.eom_token_id", GGUF_KEY_COUNT, "EOM token", false },
    { "tokenizer.ggml.unknown_token_id", GGUF_KEY_COUNT, "UNK token", false },
    { "tokenizer.ggml.seperator_token_id", GGUF_KEY_COUNT, "SEP token", false },
    { "tokenizer.ggml.padding_token_id", GGUF_KEY_COUNT, "PAD token", false },
    { "tokenizer.ggml.cls_token_id", GGUF_KEY_COUNT, "CLS token", false },
    { "tokenizer.ggml.mask_token_id", GGUF_KEY_COUNT, "MASK token", false },
    { "tokenizer.ggml.fim_pre_token_id", GGUF_KEY_COUNT, "FIM prefix token", false },
    { "tokenizer.ggml.fim_suf_token_id", GGUF_KEY_COUNT, "FIM suffix token", false },
    { "tokenizer.ggml.fim_mid_token_id", GGUF_KEY_COUNT, "FIM middle token", false },
    { "tokenizer.ggml.add_bos_token", GGUF_KEY_BOOL, "add BOS", false },
    { "tokenizer.ggml.add_eos_token", GGUF_KEY_BOOL, "add EOS", false },
    { "tokenizer.ggml.add_sep_token", GGUF_KEY_BOOL, "add SEP", false },
    { "tokenizer.ggml.add_space_prefix", GGUF_KEY_BOOL, "add space prefix", false },
    { "tokenizer.ggml.remove_extra_whitespaces", GGUF_KEY_BOOL, "remove extra whitespace", false },
    { "tokenizer.chat_template", GGUF_KEY_STR, "chat template", false },
};

/* Suffixes of "<arch>.*" keys. */
static const struct gguf_key_info arch_keys[] = {
    { "vocab_size", GGUF_KEY_COUNT, "vocabulary size", false },
    { "context_length", GGUF_KEY_COUNT, "training context length", false },
    { "embedding_length", GGUF_KEY_COUNT, "embedding size (n_embd)", false },
    { "block_count", GGUF_KEY_COUNT, "layers", false },
    { "leading_dense_block_count", GGUF_KEY_COUNT, "leading dense layers", false },
    { "feed_forward_length", GGUF_KEY_PER_LAYER, "dense FFN size (n_ff)", false },
    { "expert_feed_forward_length", GGUF_KEY_COUNT, "expert FFN size", false },
    { "expert_shared_feed_forward_length", GGUF_KEY_COUNT, "shared expert FFN size", false },
    { "expert_count", GGUF_KEY_COUNT, "experts per MoE layer", false },
    { "expert_used_count", GGUF_KEY_COUNT, "experts used per token (top-k)", false },
    { "expert_shared_count", GGUF_KEY_COUNT, "shared experts", false },
    { "expert_group_count", GGUF_KEY_COUNT, "expert groups", false },
    { "expert_group_used_count", GGUF_KEY_COUNT, "expert groups used", false },
    { "expert_weights_scale", GGUF_KEY_FLOAT, "routed weight scale", false },
    { "expert_weights_norm", GGUF_KEY_BOOL, "renormalise routed weights", false },
    { "expert_gating_func", GGUF_KEY_COUNT, "gating function (1 softmax, 2 sigmoid)", false },
    { "interleave_moe_layer_step", GGUF_KEY_COUNT, "MoE every n-th layer", false },
    { "moe_every_n_layers", GGUF_KEY_COUNT, "MoE every n-th layer", false },
    { "nextn_predict_layers", GGUF_KEY_COUNT, "next-token prediction layers", false },
    { "logit_scale", GGUF_KEY_FLOAT, "logit scale", false },
    { "attn_logit_softcapping", GGUF_KEY_FLOAT, "attention logit soft-cap", false },
    { "final_logit_softcapping", GGUF_KEY_FLOAT, "final logit soft-cap", false },
    { "router_logit_softcapping", GGUF_KEY_FLOAT, "router logit soft-cap", false },
    { "attention.head_count", GGUF_KEY_PER_LAYER, "attention heads", false },
    { "attention.head_count_kv", GGUF_KEY_PER_LAYER, "KV heads", false },
    { "attention.key_length", GGUF_KEY_COUNT, "key head size", false },
    { "attention.value_length", GGUF_KEY_COUNT, "value head size", false },
    { "attention.key_length_mla", GGUF_KEY_COUNT, "MLA key head size", false },
    { "attention.value_length_mla", GGUF_KEY_COUNT, "MLA value head size", false },
    { "attention.q_lora_rank", GGUF_KEY_COUNT, "MLA query rank", false },
    { "attention.kv_lora_rank", GGUF_KEY_COUNT, "MLA KV rank", false },
    { "attention.indexer.head_count", GGUF_KEY_COUNT, "sparse attention indexer heads", false },
    { "attention.indexer.key_length", GGUF_KEY_COUNT, "indexer key size", false },
    { "attention.indexer.top_k", GGUF_KEY_COUNT, "positions (DSA) or blocks (MSA) each query reads", false },
    { "attention.indexer.types", GGUF_KEY_INT_ARR, "indexer per layer (1 full, 0 shared)", false },
    { "attention.indexer.block_size", GGUF_KEY_COUNT, "positions per block (MSA)", false },
    { "attention.indexer.local_blocks", GGUF_KEY_COUNT, "newest blocks always read (MSA)", false },
    { "kda.head_dim", GGUF_KEY_COUNT, "Kimi Delta Attention head size", false },
    { "kda.gate_lower_bound", GGUF_KEY_FLOAT, "KDA decay gate's lower bound (Kimi K3)", false },
    { "attn_res.block_size", GGUF_KEY_COUNT, "residual attention: blocks per checkpoint", false },
    { "activation.situ_beta", GGUF_KEY_FLOAT, "situ activation's gate beta", false },
    { "activation.situ_linear_beta", GGUF_KEY_FLOAT, "situ activation's up beta", false },
    { "expert_latent_length", GGUF_KEY_COUNT, "routed experts' latent width", false },
    { "ssm.conv_kernel", GGUF_KEY_COUNT, "linear attention's short conv width", false },
    { "attention.layer_norm_epsilon", GGUF_KEY_FLOAT, "LayerNorm epsilon", false },
    { "attention.layer_norm_rms_epsilon", GGUF_KEY_FLOAT, "RMSNorm epsilon", false },
    { "attention.sliding_window", GGUF_KEY_COUNT, "sliding window", false },
    { "attention.scale", GGUF_KEY_FLOAT, "attention scale", false },
    { "attention.causal", GGUF_KEY_BOOL, "causal attention", false },
    { "rope.dimension_count", GGUF_KEY_COUNT, "RoPE dimensions", false },
    { "rope.dimension_sections", GGUF_KEY_INT_ARR, "RoPE sections", false },
    { "rope.freq_base", GGUF_KEY_FLOAT, "RoPE base", false },
    { "rope.freq_base_swa", GGUF_KEY_FLOAT, "RoPE base (sliding window)", false },
    { "rope.scale_linear", GGUF_KEY_FLOAT, "RoPE linear scale", false },
    { "rope.scaling.type", GGUF_KEY_STR, "RoPE scaling", false },
    { "rope.scaling.factor", GGUF_KEY_FLOAT, "RoPE scaling factor", false },
    { "rope.scaling.attn_factor", GGUF_KEY_FLOAT, "RoPE attention factor", false },
    { "rope.scaling.original_context_length", GGUF_KEY_COUNT, "RoPE original context", false },
    { "rope.scaling.finetuned", GGUF_KEY_BOOL, "RoPE scaling fine-tuned", false },
    { "rope.scaling.yarn_log_multiplier", GGUF_KEY_FLOAT, "YaRN log multiplier", false },
    { "rope.scaling.yarn_ext_factor", GGUF_KEY_FLOAT, "YaRN extrapolation factor", false },
    { "rope.scaling.yarn_attn_factor", GGUF_KEY_FLOAT, "YaRN attention factor", false },
    { "rope.scaling.yarn_beta_fast", GGUF_KEY_FLOAT, "YaRN beta fast", false },
    { "rope.scaling.yarn_beta_slow", GGUF_KEY_FLOAT, "YaRN beta slow", false },
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const struct gguf_key_info *find_in(const struct gguf_key_info *t, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].name, key))
            return &t[i];
    return NULL;
}

const struct gguf_key_info *gguf_key_info(const char *arch, const char *key)
{
    const struct gguf_key_info *k = find_in(general_keys, N_OF(general_keys), key);
    if (k || !arch || !*arch)
        return k;
    size_t n = strlen(arch);
    if (strncmp(key, arch, n) || key[n] != '.')
        return NULL;
    return find_in(arch_keys, N_OF(arch_keys), key + n + 1);
}

const char *gguf_key_kind_name(enum gguf_key_kind kind)
{
    switch (kind) {
    case GGUF_KEY_STR: return "a string";
    case GGUF_KEY_U32: return "a u32";
    case GGUF_KEY_COUNT: return "an unsigned 32-bit integer";
    case GGUF_KEY_FLOAT: return "a float";
    case GGUF_KEY_BOOL: return "a bool";
    case GGUF_KEY_PER_LAYER: return "an unsigned integer or one per layer";
    case GGUF_KEY_STR_ARR: return "an array of strings";
    case GGUF_KEY_F32_ARR: return "an array of f32";
    case GGUF_KEY_I32_ARR: return "an array of i32";
    case GGUF_KEY_INT_ARR: return "an array of integers";
    }
    return "?";
}

static bool is_int_type(enum gguf_vtype t)
{
    return t <= GGUF_VT_INT32 || t == GGUF_VT_UINT64 || t == GGUF_VT_INT64;
}

/* Whether a scalar value is an integer in 0..UINT32_MAX. */
static bool is_count(const struct gguf_value *v)
{
    int64_t x;
    return is_int_type(v->type) && !gguf_value_int(v, &x) && x >= 0 && x <= UINT32_MAX;
}

/* Whether every element of the integer array v is a count. */
static bool all_counts(const struct gguf_value *v)
{
    static const size_t size[] = { 1, 1, 2, 2, 4, 4 };
    for (uint64_t i = 0; i < v->arr.n; i++) {
        struct gguf_value e = { .type = v->arr.type };
        size_t s = v->arr.type <= GGUF_VT_INT32 ? size[v->arr.type] : 8;
        memcpy(&e.u64, (const char *)v->arr.elems + i * s, s);
        if (!is_count(&e))
            return false;
    }
    return true;
}

static bool is_arr_of(const struct gguf_value *v, enum gguf_vtype t)
{
    return v->type == GGUF_VT_ARRAY && v->arr.type == t;
}

/* Whether v has the kind k asks for (array lengths are checked apart). */
static bool kind_ok(const struct gguf_value *v, enum gguf_key_kind k)
{
    switch (k) {
    case GGUF_KEY_STR: return v->type == GGUF_VT_STRING;
    case GGUF_KEY_U32: return v->type == GGUF_VT_UINT32;
    case GGUF_KEY_COUNT: return is_count(v);
    case GGUF_KEY_FLOAT: return v->type == GGUF_VT_FLOAT32 || v->type == GGUF_VT_FLOAT64;
    case GGUF_KEY_BOOL: return v->type == GGUF_VT_BOOL;
    case GGUF_KEY_PER_LAYER:
        if (v->type != GGUF_VT_ARRAY)
            return is_count(v);
        return is_int_type(v->arr.type) && all_counts(v);
    case GGUF_KEY_STR_ARR: return is_arr_of(v, GGUF_VT_STRING);
    case GGUF_KEY_F32_ARR: return is_arr_of(v, GGUF_VT_FLOAT32);
    case GGUF_KEY_I32_ARR: return is_arr_of(v, GGUF_VT_INT32);
    case GGUF_KEY_INT_ARR: return v->type == GGUF_VT_ARRAY && is_int_type(v->arr.type);
    }
    return false;
}

static void describe(const struct gguf_value *v, char *buf, size_t len)
{
    if (v->type == GGUF_VT_ARRAY)
        snprintf(buf, len, "arr[%s]", gguf_vtype_name(v->arr.type));
    else if (is_int_type(v->type) && !is_count(v))
        snprintf(buf, len, "%s out of range", gguf_vtype_name(v->type));
    else
        snprintf(buf, len, "%s", gguf_vtype_name(v->type));
}

/* The length an array key must have (per layer, per token), or -1 if free. */
static int64_t wanted_len(const struct gguf_file *f, const char *arch, const struct gguf_key_info *k)
{
    const struct gguf_value *tokens;
    if (k->per_token)
        return gguf_get_arr(f, "tokenizer.ggml.tokens", &tokens) ? -1 : (int64_t)tokens->arr.n;
    if (k->kind == GGUF_KEY_PER_LAYER && arch) {
        char key[160];
        int64_t n;
        snprintf(key, sizeof(key), "%s.block_count", arch);
        return gguf_get_int(f, key, &n) ? -1 : n;
    }
    return -1;
}

static int check_one(const struct gguf_file *f, const char *arch, int64_t i, struct fl_err *err)
{
    const char *key = gguf_kv_key(f, i);
    const struct gguf_value *v = gguf_kv_value(f, i);
    const struct gguf_key_info *k = gguf_key_info(arch, key);
    if (!k)
        return 0;
    if (!kind_ok(v, k->kind)) {
        char got[48];
        describe(v, got, sizeof(got));
        return fl_err_set(err, -EINVAL, "%s: key '%s' holds %s, expected %s at byte %" PRIu64,
                          gguf_name(f), key, got, gguf_key_kind_name(k->kind), gguf_kv_offset(f, i));
    }
    int64_t want = v->type == GGUF_VT_ARRAY ? wanted_len(f, arch, k) : -1;
    if (want >= 0 && v->arr.n != (uint64_t)want)
        return fl_err_set(err, -EINVAL, "%s: key '%s' has %" PRIu64 " elements, expected %" PRId64 " at byte %"
                          PRIu64, gguf_name(f), key, v->arr.n, want, gguf_kv_offset(f, i));
    return 0;
}

int gguf_keys_check(const struct gguf_file *f, struct fl_err *err)
{
    const char *arch = NULL;
    int64_t ai = gguf_find_kv(f, "general.architecture");
    /* The architecture names the other keys, so it is checked first. */
    if (ai >= 0) {
        int rc = check_one(f, NULL, ai, err);
        if (rc)
            return rc;
        arch = gguf_kv_value(f, ai)->str.data;
    }
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        int rc = check_one(f, arch, i, err);
        if (rc)
            return rc;
    }
    return 0;
}
