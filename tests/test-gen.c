/* test-gen: faultline gen, the synthetic model generator, and the GGUF writer.
 *
 * 1. Each architecture x weight type is generated small and read back with
 *    the GGUF reader. Its tensor set and shapes must follow a table of
 *    shape rules that is first checked against the llama.cpp-made reference
 *    model of the same architecture in tests/data; the reference's
 *    metadata keys must all be present (same value types), and its BPE
 *    vocabulary arrays must be equal to the generated ones.
 * 2. Weight statistics, dequantized with the type table: matrices have std
 *    ~ 1/sqrt(fan_in) and mean ~ 0; the planted router direction exists
 *    (one constant embedding column, the output head and residual writers
 *    blind to it, routers' column spread by the skew, flat without skew).
 * 3. Determinism: same options, 1 or 3 threads, same bytes; another seed,
 *    other bytes.
 * 4. --size lands within +-10 % (64M, 256M, each arch, two types), and a
 *    written file has exactly the size announced.
 * 5. Bad options: non-zero exit, exactly one line on stderr, no file.
 * 6. Memory stays bounded while writing a 256 MiB model. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/cli/commands.h"
#include "gguf/gguf.h"
#include "gguf/gguf-writer.h"
#include "gen/model-gen.h"
#include "gguf/tensor-types.h"
#define CHECK_OUT stderr
#include "tests/check.h"

static char tmpdir[64];

static const char *const ref_model[GEN_ARCH_COUNT] = {
    [GEN_ARCH_QWEN3MOE] = "tests/data/qwen3moe-tiny-F16.gguf",
    [GEN_ARCH_LLAMA] = "tests/data/mixtral-tiny-Q4_K_M.gguf",
    [GEN_ARCH_DEEPSEEK2] = "tests/data/deepseek2-tiny-F16.gguf",
    [GEN_ARCH_GPT_OSS] = "tests/data/gpt-oss-tiny-MXFP4.gguf",
    /* made by gen itself, then loaded and run by llama.cpp for tests/data/ref */
    [GEN_ARCH_GLM4MOE] = "tests/data/glm4moe-tiny-F16.gguf",
    [GEN_ARCH_MINIMAX_M2] = "tests/data/minimax-m2-tiny-F16.gguf",
    [GEN_ARCH_QWEN35MOE] = "tests/data/qwen35moe-tiny-F16.gguf",
    [GEN_ARCH_QWEN3NEXT] = "tests/data/qwen3next-tiny-F16.gguf",
    [GEN_ARCH_DEEPSEEK32] = "tests/data/deepseek32-tiny-F16.gguf",
    [GEN_ARCH_GLM_DSA] = "tests/data/glm-dsa-tiny-F16.gguf",
    [GEN_ARCH_KIMI_LINEAR] = "tests/data/kimi-linear-tiny-F16.gguf",
    [GEN_ARCH_KIMI_K3] = "tests/data/kimi-k3-tiny-F16.gguf",
    [GEN_ARCH_MINIMAX_M3] = "tests/data/minimax-m3-tiny-F16.gguf",
};

/* --- shape rules -------------------------------------------------------------- */

/* Tensor name (blk.#. for per-layer ones), where it appears (A all layers,
 * D dense layers, M MoE layers, T top level) and its dims as symbols that
 * are read from the file's own metadata (see sym()). */
struct rule {
    const char *name;
    char where;
    const char *dims;
};

/* Rows every architecture has; check_layout reads them before the arch's. */
static const struct rule rules_common[] = {
    { "token_embd.weight", 'T', "D,V" }, { "output_norm.weight", 'T', "D" },
    { "output.weight", 'T', "D,V" }, { "blk.#.attn_norm.weight", 'A', "D" },
};
#define N_COMMON ((int)(sizeof(rules_common) / sizeof(rules_common[0])))

static const struct rule rules_gqa[] = {
    { "blk.#.attn_q.weight", 'A', "D,Q" }, { "blk.#.attn_k.weight", 'A', "D,K" },
    { "blk.#.attn_v.weight", 'A', "D,K" }, { "blk.#.attn_output.weight", 'A', "Q,D" },
    { "blk.#.ffn_norm.weight", 'A', "D" }, { "blk.#.ffn_gate_inp.weight", 'A', "D,X" },
    { "blk.#.ffn_gate_exps.weight", 'A', "D,F,X" }, { "blk.#.ffn_up_exps.weight", 'A', "D,F,X" },
    { "blk.#.ffn_down_exps.weight", 'A', "F,D,X" },
    /* qwen3moe only */
    { "blk.#.attn_q_norm.weight", 'A', "H" }, { "blk.#.attn_k_norm.weight", 'A', "H" },
    { NULL, 0, NULL },
};

static const struct rule rules_deepseek2[] = {
    { "blk.#.attn_q_a_norm.weight", 'A', "ql" }, { "blk.#.attn_kv_a_norm.weight", 'A', "kl" },
    { "blk.#.attn_q_a.weight", 'A', "D,ql" }, { "blk.#.attn_q_b.weight", 'A', "ql,qb" },
    { "blk.#.attn_kv_a_mqa.weight", 'A', "D,kva" }, { "blk.#.attn_k_b.weight", 'A', "nope,kl,N" },
    { "blk.#.attn_v_b.weight", 'A', "kl,vmla,N" }, { "blk.#.attn_output.weight", 'A', "o,D" },
    { "blk.#.ffn_norm.weight", 'A', "D" }, { "blk.#.ffn_gate.weight", 'D', "D,dff" },
    { "blk.#.ffn_up.weight", 'D', "D,dff" }, { "blk.#.ffn_down.weight", 'D', "dff,D" },
    { "blk.#.ffn_gate_inp.weight", 'M', "D,X" }, { "blk.#.exp_probs_b.bias", 'M', "X" },
    { "blk.#.ffn_gate_exps.weight", 'M', "D,F,X" }, { "blk.#.ffn_up_exps.weight", 'M', "D,F,X" },
    { "blk.#.ffn_down_exps.weight", 'M', "F,D,X" }, { "blk.#.ffn_gate_shexp.weight", 'M', "D,S" },
    { "blk.#.ffn_up_shexp.weight", 'M', "D,S" }, { "blk.#.ffn_down_shexp.weight", 'M', "S,D" },
    { NULL, 0, NULL },
};

/* deepseek2's tensors (the same rules, read first) plus the lightning
 * indexer's: 'I' = the blocks attention.indexer.types marks full (all when
 * the file has no such key). */
static const struct rule rules_sparse[] = {
    { "blk.#.indexer.attn_q_b.weight", 'I', "ql,iq" }, { "blk.#.indexer.attn_k.weight", 'I', "D,id" },
    { "blk.#.indexer.k_norm.weight", 'I', "id" }, { "blk.#.indexer.k_norm.bias", 'I', "id" },
    { "blk.#.indexer.proj.weight", 'I', "D,ih" },
    { NULL, 0, NULL },
};

/* Kimi-Linear and Kimi K3 (their own rows follow): 'K' = the KDA blocks
 * (head_count_kv 0), 'm' = the MLA blocks (no q LoRA); a name both have is
 * matched by the block's kind. */
static const struct rule rules_kimi[] = {
    { "blk.#.attn_kv_a_norm.weight", 'm', "kl" }, { "blk.#.attn_q.weight", 'm', "D,qb" },
    { "blk.#.attn_kv_a_mqa.weight", 'm', "D,kva" }, { "blk.#.attn_k_b.weight", 'm', "nope,kl,N" },
    { "blk.#.attn_v_b.weight", 'm', "kl,vmla,N" }, { "blk.#.attn_output.weight", 'm', "o,D" },
    { "blk.#.attn_q.weight", 'K', "D,kw" }, { "blk.#.attn_k.weight", 'K', "D,kw" },
    { "blk.#.attn_v.weight", 'K', "D,kw" }, { "blk.#.ssm_conv1d_q.weight", 'K', "C,1,kw" },
    { "blk.#.ssm_conv1d_k.weight", 'K', "C,1,kw" }, { "blk.#.ssm_conv1d_v.weight", 'K', "C,1,kw" },
    { "blk.#.ssm_f_a.weight", 'K', "D,kd" }, { "blk.#.ssm_f_b.weight", 'K', "kd,kw" },
    { "blk.#.ssm_beta.weight", 'K', "D,N" }, { "blk.#.ssm_dt.bias", 'K', "kw" },
    { "blk.#.ssm_norm.weight", 'K', "kd" }, { "blk.#.attn_output.weight", 'K', "kw,D" },
    { "blk.#.ffn_norm.weight", 'A', "D" }, { "blk.#.ffn_gate.weight", 'D', "D,dff" },
    { "blk.#.ffn_up.weight", 'D', "D,dff" }, { "blk.#.ffn_down.weight", 'D', "dff,D" },
    { "blk.#.ffn_gate_inp.weight", 'M', "D,X" }, { "blk.#.exp_probs_b.bias", 'M', "X" },
    { "blk.#.ffn_gate_shexp.weight", 'M', "D,S" }, { "blk.#.ffn_up_shexp.weight", 'M', "D,S" },
    { "blk.#.ffn_down_shexp.weight", 'M', "S,D" },
    { NULL, 0, NULL },
};

/* Kimi-Linear's own: the low-rank KDA gate, [1, n_head] A, full-width experts. */
static const struct rule rules_kimi_linear[] = {
    { "blk.#.ssm_a", 'K', "1,N" }, { "blk.#.ssm_g_a.weight", 'K', "D,kd" },
    { "blk.#.ssm_g_b.weight", 'K', "kd,kw" }, { "blk.#.ffn_gate_exps.weight", 'M', "D,F,X" },
    { "blk.#.ffn_up_exps.weight", 'M', "D,F,X" }, { "blk.#.ffn_down_exps.weight", 'M', "F,D,X" },
    { NULL, 0, NULL },
};

/* Kimi K3's own: the full-rank KDA gate, a 1-D A, the MLA output gate, the
 * residual attention's scores and the latent experts. */
static const struct rule rules_kimi_k3[] = {
    { "output_res_score.weight", 'T', "D" },
    { "blk.#.attn_res_score.weight", 'A', "D" }, { "blk.#.ffn_res_score.weight", 'A', "D" },
    { "blk.#.attn_gate.weight", 'm', "D,o" }, { "blk.#.ssm_a", 'K', "N" },
    { "blk.#.ssm_g.weight", 'K', "D,kw" },
    { "blk.#.ffn_gate_exps.weight", 'M', "la,F,X" }, { "blk.#.ffn_up_exps.weight", 'M', "la,F,X" },
    { "blk.#.ffn_down_exps.weight", 'M', "F,la,X" }, { "blk.#.ffn_routed_down.weight", 'M', "D,la" },
    { "blk.#.ffn_routed_norm.weight", 'M', "la" }, { "blk.#.ffn_routed_up.weight", 'M', "la,D" },
    { NULL, 0, NULL },
};

static const struct rule rules_gpt_oss[] = {
    { "blk.#.attn_q.weight", 'A', "D,Q" }, { "blk.#.attn_q.bias", 'A', "Q" },
    { "blk.#.attn_k.weight", 'A', "D,K" }, { "blk.#.attn_k.bias", 'A', "K" },
    { "blk.#.attn_v.weight", 'A', "D,K" }, { "blk.#.attn_v.bias", 'A', "K" },
    { "blk.#.attn_output.weight", 'A', "Q,D" }, { "blk.#.attn_output.bias", 'A', "D" },
    { "blk.#.attn_sinks.weight", 'A', "N" }, { "blk.#.post_attention_norm.weight", 'A', "D" },
    { "blk.#.ffn_gate_inp.weight", 'A', "D,X" }, { "blk.#.ffn_gate_inp.bias", 'A', "X" },
    { "blk.#.ffn_gate_exps.weight", 'A', "D,F,X" }, { "blk.#.ffn_gate_exps.bias", 'A', "F,X" },
    { "blk.#.ffn_up_exps.weight", 'A', "D,F,X" }, { "blk.#.ffn_up_exps.bias", 'A', "F,X" },
    { "blk.#.ffn_down_exps.weight", 'A', "F,D,X" }, { "blk.#.ffn_down_exps.bias", 'A', "D,X" },
    { NULL, 0, NULL },
};

/* 'N': the nextn blocks only (glm4moe); 'M' counts them as MoE blocks. */
static const struct rule rules_glm4moe[] = {
    { "blk.#.attn_q.weight", 'A', "D,Q" }, { "blk.#.attn_q.bias", 'A', "Q" },
    { "blk.#.attn_k.weight", 'A', "D,K" }, { "blk.#.attn_k.bias", 'A', "K" },
    { "blk.#.attn_v.weight", 'A', "D,K" }, { "blk.#.attn_v.bias", 'A', "K" },
    { "blk.#.attn_output.weight", 'A', "Q,D" }, { "blk.#.attn_q_norm.weight", 'A', "H" },
    { "blk.#.attn_k_norm.weight", 'A', "H" }, { "blk.#.post_attention_norm.weight", 'A', "D" },
    { "blk.#.ffn_gate.weight", 'D', "D,dff" }, { "blk.#.ffn_up.weight", 'D', "D,dff" },
    { "blk.#.ffn_down.weight", 'D', "dff,D" }, { "blk.#.ffn_gate_inp.weight", 'M', "D,X" },
    { "blk.#.exp_probs_b.bias", 'M', "X" }, { "blk.#.ffn_gate_exps.weight", 'M', "D,F,X" },
    { "blk.#.ffn_up_exps.weight", 'M', "D,F,X" }, { "blk.#.ffn_down_exps.weight", 'M', "F,D,X" },
    { "blk.#.ffn_gate_shexp.weight", 'M', "D,S" }, { "blk.#.ffn_up_shexp.weight", 'M', "D,S" },
    { "blk.#.ffn_down_shexp.weight", 'M', "S,D" }, { "blk.#.nextn.eh_proj.weight", 'N', "D2,D" },
    { "blk.#.nextn.enorm.weight", 'N', "D" }, { "blk.#.nextn.hnorm.weight", 'N', "D" },
    { "blk.#.nextn.shared_head_norm.weight", 'N', "D" },
    { NULL, 0, NULL },
};

/* MiniMax-M3: per-head QK norms, a dense lead, shared experts, and the
 * sparse attention's indexer in the MoE blocks. */
static const struct rule rules_minimax_m3[] = {
    { "blk.#.attn_q.weight", 'A', "D,Q" }, { "blk.#.attn_k.weight", 'A', "D,K" },
    { "blk.#.attn_v.weight", 'A', "D,K" }, { "blk.#.attn_output.weight", 'A', "Q,D" },
    { "blk.#.attn_q_norm.weight", 'A', "H" }, { "blk.#.attn_k_norm.weight", 'A', "H" },
    { "blk.#.ffn_norm.weight", 'A', "D" }, { "blk.#.ffn_gate.weight", 'D', "D,dff" },
    { "blk.#.ffn_up.weight", 'D', "D,dff" }, { "blk.#.ffn_down.weight", 'D', "dff,D" },
    { "blk.#.ffn_gate_inp.weight", 'M', "D,X" }, { "blk.#.exp_probs_b.bias", 'M', "X" },
    { "blk.#.ffn_gate_exps.weight", 'M', "D,F,X" }, { "blk.#.ffn_up_exps.weight", 'M', "D,F,X" },
    { "blk.#.ffn_down_exps.weight", 'M', "F,D,X" }, { "blk.#.ffn_gate_shexp.weight", 'M', "D,S" },
    { "blk.#.ffn_up_shexp.weight", 'M', "D,S" }, { "blk.#.ffn_down_shexp.weight", 'M', "S,D" },
    { "blk.#.indexer.q_proj.weight", 'M', "D,iqk" }, { "blk.#.indexer.k_proj.weight", 'M', "D,id" },
    { "blk.#.indexer.q_norm.weight", 'M', "id" }, { "blk.#.indexer.k_norm.weight", 'M', "id" },
    { NULL, 0, NULL },
};

static const struct rule rules_minimax_m2[] = {
    { "blk.#.attn_q.weight", 'A', "D,Q" }, { "blk.#.attn_k.weight", 'A', "D,K" },
    { "blk.#.attn_v.weight", 'A', "D,K" }, { "blk.#.attn_output.weight", 'A', "Q,D" },
    { "blk.#.attn_q_norm.weight", 'A', "Q" }, { "blk.#.attn_k_norm.weight", 'A', "K" },
    { "blk.#.ffn_norm.weight", 'A', "D" }, { "blk.#.ffn_gate_inp.weight", 'A', "D,X" },
    { "blk.#.exp_probs_b.bias", 'A', "X" }, { "blk.#.ffn_gate_exps.weight", 'A', "D,F,X" },
    { "blk.#.ffn_up_exps.weight", 'A', "D,F,X" }, { "blk.#.ffn_down_exps.weight", 'A', "F,D,X" },
    { NULL, 0, NULL },
};

/* 'L': Gated DeltaNet blocks, 'G': gated full attention blocks (every
 * full_attention_interval-th); 'b' / 'B': the DeltaNet blocks of qwen35moe
 * (ssm_beta, ssm_alpha) / of qwen3next (ssm_ba) only. */
static const struct rule rules_qwen35[] = {
    { "blk.#.attn_q.weight", 'G', "D,Q2" }, { "blk.#.attn_k.weight", 'G', "D,K" },
    { "blk.#.attn_v.weight", 'G', "D,K" }, { "blk.#.attn_output.weight", 'G', "Q,D" },
    { "blk.#.attn_q_norm.weight", 'G', "H" }, { "blk.#.attn_k_norm.weight", 'G', "H" },
    { "blk.#.attn_qkv.weight", 'L', "D,W" }, { "blk.#.attn_gate.weight", 'L', "D,VD" },
    { "blk.#.ssm_beta.weight", 'b', "D,Hv" }, { "blk.#.ssm_alpha.weight", 'b', "D,Hv" },
    { "blk.#.ssm_ba.weight", 'B', "D,Hv2" },
    { "blk.#.ssm_conv1d.weight", 'L', "C,W" }, { "blk.#.ssm_dt.bias", 'L', "Hv" },
    { "blk.#.ssm_a", 'L', "Hv" }, { "blk.#.ssm_norm.weight", 'L', "Ds" },
    { "blk.#.ssm_out.weight", 'L', "VD,D" }, { "blk.#.post_attention_norm.weight", 'A', "D" },
    { "blk.#.ffn_gate_inp.weight", 'A', "D,X" }, { "blk.#.ffn_gate_exps.weight", 'A', "D,F,X" },
    { "blk.#.ffn_up_exps.weight", 'A', "D,F,X" }, { "blk.#.ffn_down_exps.weight", 'A', "F,D,X" },
    { "blk.#.ffn_gate_inp_shexp.weight", 'A', "D" }, { "blk.#.ffn_gate_shexp.weight", 'A', "D,Ss" },
    { "blk.#.ffn_up_shexp.weight", 'A', "D,Ss" }, { "blk.#.ffn_down_shexp.weight", 'A', "Ss,D" },
    { NULL, 0, NULL },
};


static int64_t kv_int(const struct gguf_file *f, const char *arch, const char *suffix)
{
    char key[128];
    int64_t v = -1;
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    gguf_get_int(f, key, &v);
    return v;
}

/* A dimension symbol's value, from the file's metadata. */
static int64_t sym(const struct gguf_file *f, const char *arch, const char *s)
{
    const struct gguf_value *toks;
    int64_t D = kv_int(f, arch, "embedding_length"), N = kv_int(f, arch, "attention.head_count");
    int64_t hd = kv_int(f, arch, "attention.key_length");
    if (hd < 0 && N > 0)
        hd = D / N; /* llama: no key_length key */
    int64_t F = kv_int(f, arch, "expert_feed_forward_length");
    if (F < 0)
        F = kv_int(f, arch, "feed_forward_length"); /* llama's experts */
    int64_t R = kv_int(f, arch, "rope.dimension_count");
    int64_t kmla = kv_int(f, arch, "attention.key_length_mla");
    int64_t vmla = kv_int(f, arch, "attention.value_length_mla");
    int64_t kl = kv_int(f, arch, "attention.kv_lora_rank");
    if (!strcmp(s, "D")) return D;
    if (!strcmp(s, "1")) return 1;
    if (!strcmp(s, "kd")) return kv_int(f, arch, "kda.head_dim");
    if (!strcmp(s, "kw")) return N * kv_int(f, arch, "kda.head_dim");
    if (!strcmp(s, "la")) return kv_int(f, arch, "expert_latent_length");
    if (!strcmp(s, "iqk")) /* one indexer head per KV head */
        return kv_int(f, arch, "attention.indexer.key_length") *
               kv_int(f, arch, "attention.indexer.head_count");
    if (!strcmp(s, "D2")) return 2 * D;
    if (!strcmp(s, "V")) return gguf_get_arr(f, "tokenizer.ggml.tokens", &toks) ? -1 : (int64_t)toks->arr.n;
    if (!strcmp(s, "X")) return kv_int(f, arch, "expert_count");
    if (!strcmp(s, "F")) return F;
    if (!strcmp(s, "H")) return hd;
    if (!strcmp(s, "N")) return N;
    if (!strcmp(s, "Q")) return N * hd;
    if (!strcmp(s, "K")) return kv_int(f, arch, "attention.head_count_kv") * hd;
    if (!strcmp(s, "ql")) return kv_int(f, arch, "attention.q_lora_rank");
    if (!strcmp(s, "kl")) return kl;
    if (!strcmp(s, "qb")) return N * kmla;
    if (!strcmp(s, "kva")) return kl + R;
    if (!strcmp(s, "nope")) return kmla - R;
    if (!strcmp(s, "vmla")) return vmla;
    if (!strcmp(s, "o")) return N * vmla;
    if (!strcmp(s, "dff")) return kv_int(f, arch, "feed_forward_length");
    if (!strcmp(s, "S")) return F * kv_int(f, arch, "expert_shared_count");
    if (!strcmp(s, "Q2")) return 2 * N * hd;
    if (!strcmp(s, "Ss")) return kv_int(f, arch, "expert_shared_feed_forward_length");
    if (!strcmp(s, "id")) return kv_int(f, arch, "attention.indexer.key_length");
    if (!strcmp(s, "ih")) return kv_int(f, arch, "attention.indexer.head_count");
    if (!strcmp(s, "iq"))
        return kv_int(f, arch, "attention.indexer.key_length") *
               kv_int(f, arch, "attention.indexer.head_count");
    if (!strcmp(s, "Hv")) return kv_int(f, arch, "ssm.time_step_rank");
    if (!strcmp(s, "Hv2")) return 2 * kv_int(f, arch, "ssm.time_step_rank");
    if (!strcmp(s, "Ds")) return kv_int(f, arch, "ssm.state_size");
    if (!strcmp(s, "VD")) return kv_int(f, arch, "ssm.inner_size");
    if (!strcmp(s, "C")) return kv_int(f, arch, "ssm.conv_kernel");
    if (!strcmp(s, "W"))
        return 2 * kv_int(f, arch, "ssm.group_count") * kv_int(f, arch, "ssm.state_size") +
               kv_int(f, arch, "ssm.inner_size");
    return -1;
}

static const struct rule *rules_for(enum gen_arch a)
{
    switch (a) {
    case GEN_ARCH_DEEPSEEK2:
    case GEN_ARCH_DEEPSEEK32:
    case GEN_ARCH_GLM_DSA: return rules_deepseek2;
    case GEN_ARCH_GPT_OSS: return rules_gpt_oss;
    case GEN_ARCH_GLM4MOE: return rules_glm4moe;
    case GEN_ARCH_MINIMAX_M2: return rules_minimax_m2;
    case GEN_ARCH_MINIMAX_M3: return rules_minimax_m3;
    case GEN_ARCH_QWEN35MOE:
    case GEN_ARCH_QWEN3NEXT: return rules_qwen35;
    case GEN_ARCH_KIMI_LINEAR: return rules_kimi_linear;
    case GEN_ARCH_KIMI_K3: return rules_kimi_k3;
    default: return rules_gqa;
    }
}

/* Checks f's tensors against the rules: every tensor matches a rule with
 * the right shape, and every rule that applies to the arch has its count. */
static void check_layout(const struct gguf_file *f, enum gen_arch a, const char *what)
{
    const char *arch = gen_arch_name(a);
    const struct rule *own = rules_for(a);
    struct rule rules[64];
    int n_rules = 0;
    for (int r = 0; r < N_COMMON; r++)
        rules[n_rules++] = rules_common[r];
    for (int r = 0; own[r].name && n_rules < 63; r++)
        rules[n_rules++] = own[r];
    for (int r = 0; gen_arch_has_indexer(a) && rules_sparse[r].name; r++)
        rules[n_rules++] = rules_sparse[r];
    for (int r = 0; gen_arch_is_kimi(a) && rules_kimi[r].name && n_rules < 63; r++)
        rules[n_rules++] = rules_kimi[r];
    rules[n_rules] = (struct rule){ NULL, 0, NULL };
    int64_t nl = kv_int(f, arch, "block_count");
    int64_t nd = gen_arch_has_dense(a) ? kv_int(f, arch, "leading_dense_block_count") : 0;
    int64_t nn = a == GEN_ARCH_GLM4MOE ? kv_int(f, arch, "nextn_predict_layers") : 0;
    int64_t every = kv_int(f, arch, "full_attention_interval"), ng = every > 0 ? nl / every : 0;
    int64_t count[64] = {0}, ni = nl; /* blocks with a full indexer */
    char key[128];
    const struct gguf_value *types, *kv;
    bool kda[64] = { false }; /* kimi-linear: the blocks without KV heads */
    int64_t nk = 0;
    snprintf(key, sizeof(key), "%s.attention.head_count_kv", arch);
    if (!gguf_get_arr(f, key, &kv) && kv->arr.n <= 64)
        for (uint64_t i = 0; i < kv->arr.n; i++)
            nk += kda[i] = ((const int32_t *)kv->arr.elems)[i] == 0;
    snprintf(key, sizeof(key), "%s.attention.indexer.types", arch);
    if (!gguf_get_arr(f, key, &types)) {
        ni = 0;
        for (uint64_t i = 0; i < types->arr.n; i++)
            ni += ((const int32_t *)types->arr.elems)[i] != 0;
    }
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        char pat[96];
        int il = -1, n = 0;
        if (sscanf(t->name, "blk.%d.%n", &il, &n) == 1 && n > 0)
            snprintf(pat, sizeof(pat), "blk.#.%s", t->name + n);
        else
            snprintf(pat, sizeof(pat), "%s", t->name);
        int r = 0;
        while (rules[r].name && (strcmp(rules[r].name, pat) ||
                                 (rules[r].where == 'K' && !(il >= 0 && il < 64 && kda[il])) ||
                                 (rules[r].where == 'm' && (il >= 0 && il < 64 && kda[il]))))
            r++;
        if (!rules[r].name) {
            CHECK(0, "%s: unexpected tensor %s", what, t->name);
            continue;
        }
        count[r]++;
        char dims[32];
        snprintf(dims, sizeof(dims), "%s", rules[r].dims);
        uint32_t d = 0;
        for (char *s = strtok(dims, ","); s; s = strtok(NULL, ","), d++)
            CHECK(d < t->n_dims && t->ne[d] == sym(f, arch, s), "%s: %s dim %u is %lld, want %s = %lld",
                  what, t->name, d, d < t->n_dims ? (long long)t->ne[d] : -1LL, s,
                  (long long)sym(f, arch, s));
        CHECK(d == t->n_dims, "%s: %s has %u dims, want %u", what, t->name, t->n_dims, d);
    }
    for (int r = 0; rules[r].name; r++) {
        bool qk_norm = strstr(rules[r].name, "_norm.weight") && strstr(rules[r].name, "attn_q_norm");
        bool qk_norm2 = strstr(rules[r].name, "attn_k_norm") != NULL;
        int64_t want = rules[r].where == 'T' ? 1 : rules[r].where == 'D' ? nd
                     : rules[r].where == 'M' ? nl - nd : rules[r].where == 'N' ? nn
                     : rules[r].where == 'G' ? ng : rules[r].where == 'L' ? nl - ng
                     : rules[r].where == 'b' ? (a == GEN_ARCH_QWEN35MOE ? nl - ng : 0)
                     : rules[r].where == 'B' ? (a == GEN_ARCH_QWEN3NEXT ? nl - ng : 0)
                     : rules[r].where == 'I' ? ni : rules[r].where == 'K' ? nk
                     : rules[r].where == 'm' ? nl - nk : nl;
        if ((qk_norm || qk_norm2) && own == rules_gqa && a != GEN_ARCH_QWEN3MOE)
            want = 0; /* rules_gqa's QK norms are qwen3moe's */
        CHECK(count[r] == want, "%s: %lld x %s, want %lld", what, (long long)count[r],
              rules[r].name, (long long)want);
    }
}

/* --- metadata against the reference ---------------------------------------------- */

static bool value_equal(const struct gguf_value *a, const struct gguf_value *b)
{
    if (a->type != b->type)
        return false;
    if (a->type == GGUF_VT_STRING)
        return a->str.len == b->str.len && !memcmp(a->str.data, b->str.data, a->str.len);
    if (a->type != GGUF_VT_ARRAY)
        return true; /* scalar values differ by design (shapes) */
    if (a->arr.type != b->arr.type || a->arr.n != b->arr.n)
        return false;
    if (a->arr.type == GGUF_VT_STRING) {
        const struct gguf_str *x = a->arr.elems, *y = b->arr.elems;
        for (uint64_t i = 0; i < a->arr.n; i++)
            if (x[i].len != y[i].len || memcmp(x[i].data, y[i].data, x[i].len))
                return false;
        return true;
    }
    size_t sz = a->arr.type == GGUF_VT_INT32 || a->arr.type == GGUF_VT_UINT32 ||
                a->arr.type == GGUF_VT_FLOAT32 ? 4 : 8;
    return !memcmp(a->arr.elems, b->arr.elems, sz * a->arr.n);
}

static void check_metadata(const struct gguf_file *g, const struct gguf_file *ref, enum gen_arch a,
                           const char *what)
{
    for (int64_t i = 0; i < gguf_n_kv(ref); i++) {
        const char *key = gguf_kv_key(ref, i);
        bool tok = !strncmp(key, "tokenizer.", 10);
        if (a == GEN_ARCH_LLAMA && tok)
            continue; /* the Mixtral reference has an SPM vocab; generated ones are BPE */
        if (!strcmp(key, "general.name") || !strcmp(key, "general.description") ||
            !strcmp(key, "general.file_type"))
            continue;
        int64_t j = gguf_find_kv(g, key);
        CHECK(j >= 0, "%s: key %s missing", what, key);
        if (j < 0)
            continue;
        const struct gguf_value *x = gguf_kv_value(ref, i), *y = gguf_kv_value(g, j);
        bool strict = tok || !strcmp(key, "general.architecture");
        CHECK(x->type == y->type && (!strict || value_equal(x, y)) &&
              (x->type != GGUF_VT_ARRAY || x->arr.type == y->arr.type),
              "%s: key %s differs from the reference", what, key);
    }
}

/* --- weight statistics ---------------------------------------------------------------- */

static float *read_rows(const char *path, const struct gguf_tensor *t, int64_t nrows)
{
    const struct fl_type_traits *tr = fl_type_traits(t->type);
    size_t rb = fl_row_size(t->type, t->ne[0]);
    void *raw = malloc(rb * (size_t)nrows);
    float *out = malloc(sizeof(float) * (size_t)(t->ne[0] * nrows));
    int fd = open(path, O_RDONLY);
    if (!raw || !out || fd < 0 || pread(fd, raw, rb * (size_t)nrows, (off_t)t->offset) !=
                                      (ssize_t)(rb * (size_t)nrows)) {
        CHECK(0, "%s: cannot read %s", path, t->name);
        free(out);
        out = NULL;
    } else {
        tr->to_float(raw, out, t->ne[0] * nrows);
    }
    if (fd >= 0)
        close(fd);
    free(raw);
    return out;
}

static bool is_writer(const char *name)
{
    return strstr(name, "attn_output.weight") || strstr(name, "ffn_down") ||
           strstr(name, "ssm_out.weight") || strstr(name, "ffn_routed_up");
}

/* Matrices: std * sqrt(fan_in) near 1 (residual writers: scaled down by
 * 1/sqrt(n_layer), so in [1/sqrt(n_layer), 1]), mean near 0, over the rows
 * that are not the zeroed v output. */
static void check_matrix_stats(const char *path, const struct gguf_file *f, int64_t nl)
{
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        if (t->n_dims < 2 || t->type == FL_TYPE_F32 || strstr(t->name, "token_embd") ||
            strstr(t->name, "output.weight") == t->name)
            continue;
        int64_t rows = t->ne[1] * t->ne[2] < 64 ? t->ne[1] * t->ne[2] : 64;
        float *v = read_rows(path, t, rows);
        if (!v)
            continue;
        double s = 0, ss = 0;
        int64_t n = 0;
        for (int64_t r = 0; r < rows; r++) {
            bool zero = true;
            for (int64_t j = 0; j < t->ne[0] && zero; j++)
                zero = v[r * t->ne[0] + j] == 0.0f;
            for (int64_t j = 0; !zero && j < t->ne[0]; j++, n++) {
                s += v[r * t->ne[0] + j];
                ss += (double)v[r * t->ne[0] + j] * v[r * t->ne[0] + j];
            }
        }
        double mean = s / (double)n, sd = sqrt(ss / (double)n - mean * mean);
        double rel = sd * sqrt((double)t->ne[0]);
        double lo = is_writer(t->name) ? 0.85 / sqrt((double)nl) : 0.85;
        CHECK(n > 0 && rel > lo && rel < 1.15 && fabs(mean) < 0.1 * sd,
              "%s: %s (%s) std*sqrt(fan_in) %.3f mean/std %.3f", path, t->name,
              fl_type_name(t->type), rel, mean / sd);
        free(v);
    }
}

/* The planted direction: one embedding column constant over all tokens;
 * the output head's column there zero; the routers' column spread with
 * skew (and flat without). */
static void check_direction(const char *path, const struct gguf_file *f, bool skewed)
{
    const struct gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
    const struct gguf_tensor *to = gguf_find_tensor(f, "output.weight");
    float *e = read_rows(path, te, te->ne[1]), *o = read_rows(path, to, to->ne[1]);
    int64_t d = te->ne[0], col = -1;
    for (int64_t c = 0; e && c < d && col < 0; c++) {
        bool same = e[c] > 3.0f;
        for (int64_t r = 1; same && r < te->ne[1]; r++)
            same = e[r * d + c] == e[c];
        if (same)
            col = c;
    }
    CHECK(col >= 0, "%s: no constant embedding column (the router direction)", path);
    if (col >= 0 && o) {
        bool zero = true;
        for (int64_t r = 0; r < to->ne[1]; r++)
            zero &= o[r * d + col] == 0.0f;
        CHECK(zero, "%s: output head sees the router direction", path);
    }
    for (int64_t i = 0; col >= 0 && i < gguf_n_tensors(f); i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        if (is_writer(t->name) && t->ne[1] == d) {
            /* a residual writer's output row at the direction is all zero
             * (first expert's matrix for the 3-D ones) */
            float *w = read_rows(path, t, d);
            bool zero = w != NULL;
            for (int64_t j = 0; w && j < t->ne[0]; j++)
                zero &= w[col * t->ne[0] + j] == 0.0f;
            CHECK(zero, "%s: %s writes along the router direction", path, t->name);
            free(w);
        }
        if (!strstr(t->name, "ffn_gate_inp.weight"))
            continue;
        float *g = read_rows(path, t, t->ne[1]);
        double lo = 1e30, hi = -1e30;
        for (int64_t x = 0; g && x < t->ne[1]; x++) {
            lo = fmin(lo, g[x * d + col]);
            hi = fmax(hi, g[x * d + col]);
        }
        /* skewed: offsets of at least 0.1 logit once multiplied by v's
         * coordinate after RMSNorm (about sqrt(d / 2.5)); unskewed: flat */
        CHECK(skewed ? (hi - lo) * sqrt((double)d / 2.5) > 0.1 : hi - lo < 1e-6,
              "%s: %s spread %.4f along the router direction", path, t->name, hi - lo);
        free(g);
    }
    free(e);
    free(o);
}

/* --- generation ------------------------------------------------------------------------ */

/* Small shapes whose dimensions all differ, so a swapped or misnamed
 * dimension cannot pass for another. */
static struct gen_params small(enum gen_arch a, uint32_t type, uint64_t seed)
{
    struct gen_params p = { .arch = a, .type = type, .seed = seed, .skew = -1 };
    p.n_embd = 256;
    p.n_layer = gen_arch_has_dense(a) ? 3 : 2;
    p.n_expert = 8;
    p.n_expert_used = 2;
    p.n_ff_exp = 768;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = 32;
    if (gen_arch_is_mla(a)) {
        p.idx_n_head = 4;
        p.idx_head_dim = 64;
        p.idx_top_k = 16;
        p.q_lora_rank = 160;
        p.kv_lora_rank = 96;
        p.qk_nope = 32;
        p.qk_rope = 16;
        p.v_head = 48;
        p.n_ff = 512;
        p.n_expert_shared = 2;
    }
    if (a == GEN_ARCH_GLM4MOE)
        p.n_ff = 512;
    if (a == GEN_ARCH_MINIMAX_M3) { /* block 0 dense, 1-2 sparse */
        p.n_ff = 512;
        p.n_expert_shared = 2;
        p.idx_head_dim = 48;
        p.n_rot = 16;
    }
    if (gen_arch_is_kimi(a)) /* blocks 0, 1 KDA (0 dense), 2 MLA */
        p.ssm_d_state = 40;
    if (a == GEN_ARCH_KIMI_K3) { /* latent experts of whole Q4_K blocks, unlike n_embd */
        p.n_embd = 512;
        p.expert_latent = 256;
    }
    if (a == GEN_ARCH_QWEN35MOE || a == GEN_ARCH_QWEN3NEXT) { /* 3 DeltaNet blocks, 1 attention */
        p.n_layer = 4;
        p.head_dim = 40;
        p.ssm_d_state = 48;
        p.ssm_n_k_head = 1;
        p.ssm_n_v_head = 3;
    }
    return p;
}

static int write_model(struct gen_params *p, const char *path)
{
    struct fl_err err = {{0}};
    int rc = gen_resolve(p, &err);
    if (!rc)
        rc = gen_write(p, path, NULL, NULL, &err);
    CHECK(!rc, "gen %s: %s", path, err.msg);
    return rc;
}

static void test_arch_types(void)
{
    static const uint32_t types[] = { FL_TYPE_F16, FL_TYPE_Q8_0, FL_TYPE_Q4_K, FL_TYPE_MXFP4 };
    for (int a = 0; a < GEN_ARCH_COUNT; a++) {
        struct gguf_file *ref = NULL;
        struct fl_err err = {{0}};
        int rc = gguf_open(ref_model[a], &ref, &err);
        CHECK(!rc, "%s", err.msg);
        if (rc)
            continue;
        check_layout(ref, (enum gen_arch)a, ref_model[a]); /* the rules themselves */
        for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
            char path[128];
            struct gen_params p = small((enum gen_arch)a, types[ti], 7);
            snprintf(path, sizeof(path), "%s/%s-%s.gguf", tmpdir, gen_arch_name(p.arch),
                     fl_type_name(types[ti]));
            if (write_model(&p, path))
                continue;
            struct gguf_file *g = NULL;
            rc = gguf_open(path, &g, &err);
            CHECK(!rc, "%s", err.msg);
            if (rc)
                continue;
            struct stat st;
            CHECK(!stat(path, &st) && (uint64_t)st.st_size == gen_file_size(&p),
                  "%s: size differs from gen_file_size", path);
            check_layout(g, p.arch, path);
            check_metadata(g, ref, p.arch, path);
            check_matrix_stats(path, g, p.n_layer);
            check_direction(path, g, true);
            for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
                const struct gguf_tensor *t = gguf_tensor(g, i);
                if (strstr(t->name, "_exps.weight"))
                    CHECK(t->type == types[ti], "%s: %s is %s", path, t->name, fl_type_name(t->type));
                if (t->n_dims == 1 || strstr(t->name, "gate_inp"))
                    CHECK(t->type == FL_TYPE_F32, "%s: %s is not F32", path, t->name);
            }
            printf("  %-9s %-5s %3lld tensors, layout, keys, stats ok\n", gen_arch_name(p.arch),
                   fl_type_name(types[ti]), (long long)gguf_n_tensors(g));
            gguf_close(g);
            unlink(path);
        }
        gguf_close(ref);
    }
}

static void test_no_skew(void)
{
    char path[128];
    struct gen_params p = small(GEN_ARCH_QWEN3MOE, FL_TYPE_Q8_0, 3);
    p.skew = 0;
    snprintf(path, sizeof(path), "%s/noskew.gguf", tmpdir);
    if (write_model(&p, path))
        return;
    struct gguf_file *g = NULL;
    if (!gguf_open(path, &g, NULL)) {
        check_direction(path, g, false);
        gguf_close(g);
    }
    unlink(path);
    struct gen_params q = small(GEN_ARCH_QWEN3MOE, FL_TYPE_Q8_0, 3);
    q.skew = -1;
    q.n_expert = 128;
    q.n_expert_used = 8;
    gen_resolve(&q, NULL);
    double s = gen_router_top8_share(&q, 0, 256);
    p.n_expert = 128;
    p.n_expert_used = 8;
    double u = gen_router_top8_share(&p, 0, 256);
    CHECK(s > 0.2 && u < 0.12, "top-8 share %.3f skewed, %.3f unskewed", s, u);
    printf("  router top-8 share (128 experts): %.2f skewed, %.2f without skew\n", s, u);
}

static int files_equal(const char *a, const char *b)
{
    FILE *x = fopen(a, "rb"), *y = fopen(b, "rb");
    int eq = x && y;
    while (eq) {
        int c = fgetc(x), d = fgetc(y);
        eq = c == d;
        if (c == EOF || d == EOF)
            break;
    }
    if (x) fclose(x);
    if (y) fclose(y);
    return eq;
}

static void test_determinism(void)
{
    char p1[128], p2[128], p3[128];
    snprintf(p1, sizeof(p1), "%s/d1.gguf", tmpdir);
    snprintf(p2, sizeof(p2), "%s/d2.gguf", tmpdir);
    snprintf(p3, sizeof(p3), "%s/d3.gguf", tmpdir);
    for (int a = 0; a < GEN_ARCH_COUNT; a++) {
        struct gen_params x = small((enum gen_arch)a, FL_TYPE_Q4_K, 11);
        struct gen_params y = x, z = x;
        x.n_threads = 1;
        y.n_threads = 3;
        z.seed = 12;
        if (write_model(&x, p1) || write_model(&y, p2) || write_model(&z, p3))
            continue;
        CHECK(files_equal(p1, p2), "%s: 1 and 3 threads wrote different bytes", gen_arch_name(x.arch));
        CHECK(!files_equal(p1, p3), "%s: seeds 11 and 12 wrote the same bytes", gen_arch_name(x.arch));
    }
    printf("  determinism: same bytes with 1 and 3 threads, other bytes with another seed\n");
    unlink(p1);
    unlink(p2);
    unlink(p3);
}

static void test_sizes(void)
{
    static const uint64_t sizes[] = { 64ull << 20, 256ull << 20, 1ull << 30 };
    static const uint32_t types[] = { FL_TYPE_Q8_0, FL_TYPE_Q4_K, FL_TYPE_MXFP4, FL_TYPE_F16 };
    for (int a = 0; a < GEN_ARCH_COUNT; a++)
        for (size_t s = 0; s < 3; s++)
            for (size_t t = 0; t < 4; t++) {
                struct gen_params p = { .arch = (enum gen_arch)a, .type = types[t], .seed = 1,
                                        .skew = -1, .target_size = sizes[s] };
                struct fl_err err = {{0}};
                int rc = gen_resolve(&p, &err);
                double got = (double)gen_file_size(&p), want = (double)sizes[s];
                CHECK(!rc && fabs(got - want) <= 0.1 * want, "%s %s --size %llu: %s %.0f bytes",
                      gen_arch_name(p.arch), fl_type_name(p.type), (unsigned long long)sizes[s],
                      err.msg, got);
            }
    printf("  --size 64M/256M/1G lands within 10%% for %d archs x 4 types\n", GEN_ARCH_COUNT);
}

/* Runs cli_gen in a child with stderr captured; returns its exit status. */
static int run_cli(char **argv, char *errbuf, size_t len)
{
    int pfd[2];
    if (pipe(pfd))
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], STDERR_FILENO);
        close(pfd[0]);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, STDOUT_FILENO);
        int argc = 0;
        while (argv[argc])
            argc++;
        _exit(cli_gen(argc, argv));
    }
    close(pfd[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < len && (r = read(pfd[0], errbuf + n, len - 1 - n)) > 0)
        n += (size_t)r;
    errbuf[n] = 0;
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* A GGUF file without a tokenizer. */
static void write_no_tokenizer(const char *path)
{
    struct gguf_writer *w = NULL;
    struct fl_err err = {{0}};
    int rc = gguf_writer_open(path, &w, &err);
    if (!rc)
        rc = gguf_writer_kv_str(w, "general.architecture", "qwen3moe");
    if (!rc)
        rc = gguf_writer_finish(w, &err);
    gguf_writer_close(w);
    CHECK(!rc, "%s: %s", path, err.msg);
}

static void test_bad_options(void)
{
    char out[128], bad_dir[160], no_tok[128];
    snprintf(out, sizeof(out), "%s/bad.gguf", tmpdir);
    snprintf(no_tok, sizeof(no_tok), "%s/no-tokenizer.gguf", tmpdir);
    write_no_tokenizer(no_tok);
    snprintf(bad_dir, sizeof(bad_dir), "%s/no/such/dir/x.gguf", tmpdir);
    char *cases[][14] = {
        { "gen", "-o", out, NULL },
        { "gen", "--arch", "gpt5", "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", "--type", "Q5_K", "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", "--type", "bogus", "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", "--size", "12Q", "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", "--size", "0", "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", "--layers", "-3", "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", "--layers", "abc", "-o", out, NULL },
        { "gen", "--arch", "llama", "--experts", "8", "--top-k", "9", "-o", out, NULL },
        { "gen", "--arch", "llama", "--n-embd", "100", "--layers", "2", "-o", out, NULL },
        { "gen", "--arch", "deepseek2", "--layers", "27", "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", "--frobnicate", "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", NULL },
        { "gen", "--arch", "gpt-oss", "--heads", "6", "--heads-kv", "4", "--layers", "2", "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", "--size", "8M", "-o", bad_dir, NULL },
        { "gen", "--arch", "qwen3moe", "--seed", "-1", "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", "--layers", "2", "--experts", "4", "--size", "64M", "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", "--size", "100T", "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", "--layers", "2", "--expert-ff", "100", "--n-embd", "256", "-o", out },
        { "gen", "--arch", "qwen3moe", "--skew", "-1", "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", "--size", "8M", "extra", "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", "--size", NULL },
        { "gen", "--arch", "qwen3moe", "--size", "2M", "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", "--layers", "1000000000", "--size", "1G", "-o", out, NULL },
        { "gen", "--arch", "deepseek2", "--dense-layers", "3", "--layers", "3", "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", "--layers", "2", "--vocab", "/no/such.gguf", "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", "--layers", "2", "--vocab", "tests/data/trace-sample.json",
          "-o", out, NULL },
        { "gen", "--arch", "qwen3moe", "--layers", "2", "--vocab", no_tok, "-o", out, NULL },
    };
    int n = (int)(sizeof(cases) / sizeof(cases[0]));
    for (int i = 0; i < n; i++) {
        char err[2048];
        int rc = run_cli(cases[i], err, sizeof(err));
        int lines = 0;
        for (char *c = err; *c; c++)
            lines += *c == '\n';
        struct stat st;
        bool wrote = !stat(out, &st);
        /* --expert-ff 100 is not a usage error: the matrices fall back to F16 */
        if (i == 18) {
            CHECK(rc == 0 && wrote, "case %d: --expert-ff 100 should work: %s", i, err);
            unlink(out);
            continue;
        }
        CHECK(rc != 0 && lines == 1 && !wrote, "case %d (%s %s): exit %d, %d stderr lines: %s", i,
              cases[i][1], cases[i][2] ? cases[i][2] : "", rc, lines, err);
        unlink(out);
    }
    unlink(no_tok);
    printf("  %d bad command lines: one-line errors, no file\n", n - 1);
}

/* Scalars, strings and arrays alike, bit for bit. */
static bool value_same(const struct gguf_value *a, const struct gguf_value *b)
{
    if (a->type == GGUF_VT_STRING || a->type == GGUF_VT_ARRAY)
        return value_equal(a, b);
    return a->type == b->type && !memcmp(&a->u64, &b->u64, a->type == GGUF_VT_BOOL ? 1 : 4);
}

/* --vocab: every tokenizer.* key of the file, as it is, and the model's
 * vocabulary size (embedding and output rows, vocab_size) its token count. */
static void test_vocab(void)
{
    static const char *const files[] = { "tests/data/vocab/ggml-vocab-deepseek-coder.gguf",
                                         "tests/data/vocab/ggml-vocab-llama-spm.gguf" };
    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
        char out[128];
        snprintf(out, sizeof(out), "%s/vocab.gguf", tmpdir);
        struct gguf_file *v = NULL, *g = NULL;
        struct fl_err err = {{0}};
        struct gen_params p = small(GEN_ARCH_QWEN3MOE, FL_TYPE_Q8_0, 3);
        const struct gguf_value *tokens = NULL;
        if (gguf_open(files[f], &v, &err) || gguf_get_arr(v, "tokenizer.ggml.tokens", &tokens)) {
            CHECK(0, "%s: %s", files[f], err.msg);
            gguf_close(v);
            continue;
        }
        p.vocab = v;
        if (!write_model(&p, out) && !gguf_open(out, &g, &err)) {
            int n_keys = 0, n_same = 0;
            for (int64_t i = 0; i < gguf_n_kv(v); i++) {
                const char *key = gguf_kv_key(v, i);
                const int64_t j = gguf_find_kv(g, key);
                if (strncmp(key, "tokenizer.", 10))
                    continue;
                n_keys++;
                n_same += j >= 0 && value_same(gguf_kv_value(v, i), gguf_kv_value(g, j));
            }
            const int64_t n = (int64_t)tokens->arr.n;
            const struct gguf_tensor *e = gguf_find_tensor(g, "token_embd.weight"),
                                     *o = gguf_find_tensor(g, "output.weight");
            CHECK(n_keys > 3 && n_same == n_keys, "%s: %d of %d tokenizer keys copied", files[f],
                  n_same, n_keys);
            CHECK(e && o && e->ne[1] == n && o->ne[1] == n && kv_int(g, "qwen3moe", "vocab_size") == n,
                  "%s: %lld tokens: embedding, output and vocab_size", files[f], (long long)n);
            printf("  --vocab %s: %d tokenizer keys, %lld tokens\n", files[f], n_keys, (long long)n);
        } else {
            CHECK(0, "%s: %s", out, err.msg);
        }
        gguf_close(g);
        gguf_close(v);
        unlink(out);
    }
}

static void test_memory(void)
{
#if defined(__SANITIZE_ADDRESS__)
    printf("  memory bound: skipped under ASan (shadow memory)\n");
#else
    char out[128];
    snprintf(out, sizeof(out), "%s/mem.gguf", tmpdir);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct gen_params p = { .arch = GEN_ARCH_QWEN3MOE, .type = FL_TYPE_Q4_K, .seed = 5,
                                .skew = -1, .target_size = 256ull << 20 };
        _exit(gen_resolve(&p, NULL) || gen_write(&p, out, NULL, NULL, NULL));
    }
    int st = 0;
    waitpid(pid, &st, 0);
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    CHECK(WIFEXITED(st) && !WEXITSTATUS(st), "256M model failed");
    CHECK(ru.ru_maxrss < 64 * 1024, "peak RSS %ld KiB writing 256 MiB", ru.ru_maxrss);
    printf("  memory: peak RSS %ld KiB while writing a 256 MiB model\n", ru.ru_maxrss);
    unlink(out);
#endif
}

int main(void)
{
    const char *src = getenv("FL_SOURCE_DIR");
    if (src && chdir(src)) {
        perror(src);
        return 1;
    }
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/fl-test-gen-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    printf("test-gen:\n");
    test_arch_types();
    test_no_skew();
    test_determinism();
    test_sizes();
    test_bad_options();
    test_vocab();
    test_memory();
    rmdir(tmpdir);
    return check_summary("test-gen");
}
