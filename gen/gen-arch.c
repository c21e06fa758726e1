/* gen-arch.c: what each architecture's GGUF holds, as llama.cpp loads it:
 * default shapes (scaled by one width) and the tensor list in file order
 * (the metadata keys: gen-meta.c). The layouts follow the reference models
 * in tests/data and llama.cpp's src/models/<arch>.cpp. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/gen-internal.h"
#include "gguf/tensor-types.h"

static int64_t round256(int64_t x)
{
    return x < 256 ? 256 : (x + 255) / 256 * 256;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* KV heads for n_head query heads at about `ratio` queries per KV head:
 * the largest count up to n_head / ratio that divides n_head. */
static int64_t kv_heads(int64_t n_head, int64_t ratio)
{
    int64_t kv = max64(1, n_head / ratio);
    while (n_head % kv)
        kv--;
    return kv;
}

/* Sets each shape field still 0 from a model of the given width, after the
 * real models each architecture is named for (Qwen3-30B-A3B, Mixtral-8x7B,
 * DeepSeek-V2-Lite, gpt-oss-20b at their own widths). Widths and FFN sizes
 * stay multiples of 256 so Q4_K fits every big matrix. */
void gen_arch_defaults(struct gen_params *p, int64_t w)
{
#define DEF(field, value) do { if (!p->field) p->field = (value); } while (0)
    DEF(n_embd, w);
    w = p->n_embd;
    switch (p->arch) {
    case GEN_ARCH_QWEN3MOE:
        DEF(head_dim, w >= 2048 ? 128 : 64);
        DEF(n_head, max64(1, 2 * w / p->head_dim));
        DEF(n_head_kv, kv_heads(p->n_head, 8));
        DEF(n_expert, 128);
        DEF(n_expert_used, 8);
        DEF(n_ff_exp, round256(w * 3 / 8));
        DEF(n_ff, round256(w * 3));
        break;
    case GEN_ARCH_LLAMA:
        DEF(head_dim, w >= 2048 ? 128 : 64);
        DEF(n_head, max64(1, w / p->head_dim));
        DEF(n_head_kv, kv_heads(p->n_head, 4));
        DEF(n_expert, 8);
        DEF(n_expert_used, 2);
        DEF(n_ff_exp, round256(w * 7 / 2));
        break;
    case GEN_ARCH_DEEPSEEK2:
    case GEN_ARCH_DEEPSEEK32:
    case GEN_ARCH_GLM_DSA: /* V3.2: 64 indexer heads of 128, top 2048 */
        DEF(idx_n_head, max64(4, w / 112));
        DEF(idx_head_dim, w >= 2048 ? 128 : 64);
        DEF(idx_top_k, 2048);
        DEF(n_head, max64(2, w / 128));
        DEF(q_lora_rank, max64(32, w * 3 / 4 / 32 * 32));
        DEF(kv_lora_rank, max64(32, w / 4 / 32 * 32));
        DEF(qk_nope, w >= 2048 ? 128 : 64);
        DEF(qk_rope, p->qk_nope / 2);
        DEF(v_head, p->qk_nope);
        DEF(n_expert, 64);
        DEF(n_expert_used, 6);
        DEF(n_expert_shared, 2);
        DEF(n_layer_dense, 1);
        DEF(n_ff_exp, round256(w * 11 / 16));
        DEF(n_ff, round256(w * 21 / 4));
        break;
    case GEN_ARCH_KIMI_LINEAR: /* Kimi-Linear-48B-A3B: 2304 wide, 32 heads, KDA heads of 128 */
    case GEN_ARCH_KIMI_K3:     /* its shapes; K3's experts at half the width */
        DEF(n_head, max64(2, w / 72));
        DEF(kv_lora_rank, max64(32, w * 2 / 9 / 32 * 32));
        DEF(qk_nope, w >= 2048 ? 128 : 64);
        DEF(qk_rope, p->qk_nope / 2);
        DEF(v_head, p->qk_nope);
        DEF(ssm_d_state, w >= 2048 ? 128 : 32);
        DEF(n_expert, 256);
        DEF(n_expert_used, 8);
        DEF(n_expert_shared, 1);
        DEF(n_layer_dense, 1);
        DEF(n_ff_exp, round256(w * 4 / 9));
        DEF(n_ff, round256(w * 4));
        if (p->arch == GEN_ARCH_KIMI_K3) {
            DEF(expert_latent, w / 2);
            DEF(res_block, 4);
        }
        break;
    case GEN_ARCH_GPT_OSS:
        DEF(head_dim, 64);
        DEF(n_head, max64(1, 2 * w / p->head_dim));
        DEF(n_head_kv, kv_heads(p->n_head, 8));
        DEF(n_expert, 32);
        DEF(n_expert_used, 4);
        DEF(n_ff_exp, round256(w));
        break;
    case GEN_ARCH_GLM4MOE: /* GLM-4.5-Air: 4096 wide, 96 x 128 heads, 8 kv */
        DEF(head_dim, w >= 2048 ? 128 : 64);
        DEF(n_head, max64(1, 3 * w / p->head_dim));
        DEF(n_head_kv, kv_heads(p->n_head, 12));
        DEF(n_rot, p->head_dim / 2);
        DEF(n_expert, 128);
        DEF(n_expert_used, 8);
        DEF(n_expert_shared, 1);
        DEF(n_layer_dense, 1);
        DEF(n_ff_exp, round256(w * 11 / 32));
        DEF(n_ff, round256(w * 8 / 3));
        break;
    case GEN_ARCH_MINIMAX_M3: /* MiniMax-M3: M2's attention, a dense lead, a shared expert */
        DEF(idx_head_dim, w >= 2048 ? 128 : 64);
        DEF(idx_top_k, 16);
        DEF(msa_block, 64);
        DEF(msa_local, 1);
        DEF(n_expert_shared, 1);
        DEF(n_layer_dense, 1);
        DEF(n_ff, round256(w * 8 / 3));
        /* fall through */
    case GEN_ARCH_MINIMAX_M2: /* MiniMax-M2: 3072 wide, 48 x 128 heads, 8 kv */
        DEF(head_dim, w >= 2048 ? 128 : 64);
        DEF(n_head, max64(1, 2 * w / p->head_dim));
        DEF(n_head_kv, kv_heads(p->n_head, 6));
        DEF(n_rot, p->head_dim / 2);
        DEF(n_expert, 256);
        DEF(n_expert_used, 8);
        DEF(n_ff_exp, round256(w / 2));
        break;
    case GEN_ARCH_QWEN35MOE: /* Qwen3.5-35B-A3B: 2048 wide, 16 x 256 heads, 2 kv, 64 rotated */
    case GEN_ARCH_QWEN3NEXT: /* Qwen3-Next-80B-A3B: the same block shapes, 512 experts */
        DEF(head_dim, w >= 2048 ? 256 : 64);
        DEF(n_head, max64(1, 2 * w / p->head_dim));
        DEF(n_head_kv, kv_heads(p->n_head, 8));
        DEF(n_rot, max64(2, p->head_dim / 4));
        DEF(n_expert, p->arch == GEN_ARCH_QWEN3NEXT ? 512 : 256);
        DEF(n_expert_used, p->arch == GEN_ARCH_QWEN3NEXT ? 10 : 8);
        DEF(n_expert_shared, 1);
        DEF(n_ff_exp, round256(w / 4));
        DEF(ssm_d_state, w >= 2048 ? 128 : 32); /* 16 key and 32 value heads of 128 */
        DEF(ssm_n_k_head, max64(1, w / 128));
        DEF(ssm_n_v_head, 2 * p->ssm_n_k_head);
        break;
    default:
        break;
    }
#undef DEF
}

bool gen_arch_has_dense(enum gen_arch a)
{
    return gen_arch_is_mla(a) || a == GEN_ARCH_GLM4MOE || a == GEN_ARCH_MINIMAX_M3;
}

bool gen_arch_is_mla(enum gen_arch a)
{
    return a == GEN_ARCH_DEEPSEEK2 || gen_arch_has_indexer(a) || gen_arch_is_kimi(a);
}

bool gen_arch_is_kimi(enum gen_arch a)
{
    return a == GEN_ARCH_KIMI_LINEAR || a == GEN_ARCH_KIMI_K3;
}

bool gen_arch_has_indexer(enum gen_arch a)
{
    return a == GEN_ARCH_DEEPSEEK32 || a == GEN_ARCH_GLM_DSA;
}

int64_t gen_arch_base_width(enum gen_arch a)
{
    return a == GEN_ARCH_LLAMA ? 4096 : 2048;
}

/* Shape constraints llama.cpp (or the file format) relies on. */
int gen_arch_check(const struct gen_params *p, struct fl_err *err)
{
    const char *arch = gen_arch_name(p->arch);
    if (p->n_embd % 32)
        return fl_err_set(err, -EINVAL, "--n-embd %lld must be a multiple of 32",
                          (long long)p->n_embd);
    if (p->n_expert_used > p->n_expert)
        return fl_err_set(err, -EINVAL, "--top-k %lld exceeds --experts %lld",
                          (long long)p->n_expert_used, (long long)p->n_expert);
    const int64_t g = p->n_expert_groups, gu = p->n_expert_groups_used;
    if (g > 1 && (!gen_arch_is_mla(p->arch) || p->n_expert % g || p->n_expert / g < 2 ||
                  gu < 1 || gu > g || p->n_expert_used > gu * (p->n_expert / g)))
        return fl_err_set(err, -EINVAL, "bad expert groups %lld (%lld used) for %lld experts",
                          (long long)g, (long long)gu, (long long)p->n_expert);
    if (gen_arch_has_dense(p->arch) && p->n_layer <= p->n_layer_dense)
        return fl_err_set(err, -EINVAL, "%s needs more layers than its %lld dense ones", arch,
                          (long long)p->n_layer_dense);
    if (p->ssm_in && p->arch != GEN_ARCH_QWEN3NEXT)
        return fl_err_set(err, -EINVAL, "--ssm-in is qwen3next's layout");
    if ((p->arch == GEN_ARCH_QWEN35MOE || p->arch == GEN_ARCH_QWEN3NEXT) &&
        (p->ssm_n_k_head < 1 || p->ssm_n_v_head % p->ssm_n_k_head || p->ssm_d_state < 1))
        return fl_err_set(err, -EINVAL, "--ssm-heads %lld must be a multiple of --ssm-groups %lld",
                          (long long)p->ssm_n_v_head, (long long)p->ssm_n_k_head);
    if (p->arch == GEN_ARCH_MINIMAX_M3 &&
        (p->idx_head_dim < 2 || p->idx_head_dim % 2 || p->n_rot > p->idx_head_dim ||
         p->idx_top_k < 1 || p->msa_block < 1 || p->msa_local > p->idx_top_k))
        return fl_err_set(err, -EINVAL, "minimax-m3's indexer: an even --indexer-dim of at least "
                          "the rope dims, --indexer-top-k blocks from 1, --indexer-local at most that");
    if (p->arch == GEN_ARCH_KIMI_K3 &&
        (p->expert_latent < 32 || p->expert_latent > p->n_embd || p->expert_latent % 32 ||
         p->res_block < 1))
        return fl_err_set(err, -EINVAL, "--expert-latent %lld must be a multiple of 32 up to "
                          "--n-embd, --res-block at least 1", (long long)p->expert_latent);
    if (p->n_rot % 2 || p->n_rot > p->head_dim)
        return fl_err_set(err, -EINVAL, "--rope-dims %lld must be even and at most --head-dim",
                          (long long)p->n_rot);
    if (gen_arch_is_mla(p->arch)) {
        /* llama.cpp takes 26- and 27-layer deepseek2 files for V2-Lite,
         * which has no q_lora and would not load these tensors */
        if ((p->n_layer == 26 || p->n_layer == 27) && !gen_arch_is_kimi(p->arch))
            return fl_err_set(err, -EINVAL, "deepseek2 cannot have 26 or 27 layers "
                              "(llama.cpp reads those as DeepSeek-V2-Lite)");
        if (p->qk_rope % 2 || p->qk_nope % 32 || p->kv_lora_rank % 32 || p->q_lora_rank % 32)
            return fl_err_set(err, -EINVAL, "deepseek2 MLA ranks must be multiples of 32");
        const int64_t d = p->idx_head_dim;
        if (gen_arch_has_indexer(p->arch) && (d < 64 || d > 4096 || (d & (d - 1)) ||
                                              p->qk_rope > d || p->idx_n_head < 1 ||
                                              p->idx_top_k < 1))
            return fl_err_set(err, -EINVAL, "the indexer's head must be a power of two from 64 "
                              "and at least the rope dims");
    } else if (p->head_dim % 2 || p->head_dim < 2 || p->head_dim > 1024) {
        return fl_err_set(err, -EINVAL, "%s --head-dim %lld must be even and at most 1024",
                          arch, (long long)p->head_dim);
    } else if (p->n_head_kv < 1 || p->n_head % p->n_head_kv) {
        return fl_err_set(err, -EINVAL, "--heads %lld is not a multiple of --heads-kv %lld",
                          (long long)p->n_head, (long long)p->n_head_kv);
    }
    return 0;
}

/* --- tensor types ---------------------------------------------------------- */

enum role { ROLE_EXPERT, ROLE_DENSE, ROLE_EDGE, ROLE_F32 };

/* llama-quantize's mixes, loosely: experts in the file's type; MXFP4 files
 * (MXFP4_MOE) keep every other matrix in Q8_0; embeddings and the output
 * head, made from real floats, are Q8_0 in every quantized file. A row
 * that does not fill the type's blocks falls back to Q8_0, then F16. */
static uint32_t pick_type(const struct gen_params *p, enum role r, int64_t ne0)
{
    uint32_t t = p->type;
    if (r == ROLE_F32)
        return FL_TYPE_F32;
    if (t != FL_TYPE_F16 && (r == ROLE_EDGE || (r == ROLE_DENSE && t == FL_TYPE_MXFP4)))
        t = FL_TYPE_Q8_0;
    if (ne0 % fl_type_traits(t)->blck_size)
        t = ne0 % FL_QK8_0 ? FL_TYPE_F16 : FL_TYPE_Q8_0;
    return t;
}

struct tb {
    struct gen_plan *plan;
    int rc;
    float rho; /* std scale of residual writers */
};

static void add(struct tb *b, int il, const char *name, enum role r, enum gen_init init,
                float sigma, bool orth, int64_t ne0, int64_t ne1, int64_t ne2)
{
    struct gen_tensor t = {0};
    if (b->rc)
        return;
    if (il >= 0)
        snprintf(t.name, sizeof(t.name), "blk.%d.%s", il, name);
    else
        snprintf(t.name, sizeof(t.name), "%s", name);
    t.ne[0] = ne0;
    t.ne[1] = ne1 ? ne1 : 1;
    t.ne[2] = ne2 ? ne2 : 1;
    t.ne[3] = 1;
    t.n_dims = ne2 ? 3 : ne1 ? 2 : 1;
    t.type = pick_type(b->plan->p, r, ne0);
    t.init = init;
    t.orth = orth;
    t.layer = il;
    /* matrices: std 1/sqrt(fan_in), residual writers scaled down */
    t.sigma = init == GEN_INIT_MATRIX ? (orth ? b->rho : 1.0f) / sqrtf((float)ne0) : sigma;
    b->rc = gen_plan_add(b->plan, &t);
}

/* A matrix: dense or expert, writer of the residual stream or not. */
static void mat(struct tb *b, int il, const char *name, bool orth, int64_t ne0, int64_t ne1,
                int64_t ne2)
{
    add(b, il, name, ne2 && strstr(name, "exps") ? ROLE_EXPERT : ROLE_DENSE, GEN_INIT_MATRIX,
        0, orth, ne0, ne1, ne2);
}

static void norm(struct tb *b, int il, const char *name, int64_t n)
{
    add(b, il, name, ROLE_F32, GEN_INIT_NORM, 0.05f, false, n, 0, 0);
}

static void noise(struct tb *b, int il, const char *name, float sigma, bool orth, int64_t ne0,
                  int64_t ne1)
{
    add(b, il, name, ROLE_F32, GEN_INIT_NOISE, sigma, orth, ne0, ne1, 0);
}

static void router(struct tb *b, int il, const struct gen_params *p)
{
    add(b, il, "ffn_gate_inp.weight", ROLE_F32, GEN_INIT_ROUTER, 1.0f / sqrtf((float)p->n_embd),
        false, p->n_embd, p->n_expert, 0);
}

/* A layer's router, its selection bias where the family routes with one,
 * and the routed experts' gate, up and down matrices. */
static void routed_experts(struct tb *b, const struct gen_params *p, int il, bool sel_bias)
{
    int64_t e = p->n_embd, ff = p->n_ff_exp, ne = p->n_expert;
    router(b, il, p);
    if (sel_bias)
        noise(b, il, "exp_probs_b.bias", 0.05f, false, ne, 0);
    mat(b, il, "ffn_gate_exps.weight", false, e, ff, ne);
    mat(b, il, "ffn_up_exps.weight", false, e, ff, ne);
    mat(b, il, "ffn_down_exps.weight", true, ff, e, ne);
}

/* A SwiGLU FFN of width ff: the dense one (suffix "") or the shared
 * expert ("_shexp"). */
static void swiglu_ffn(struct tb *b, const struct gen_params *p, int il, const char *suffix,
                       int64_t ff)
{
    char name[48];
    snprintf(name, sizeof(name), "ffn_gate%s.weight", suffix);
    mat(b, il, name, false, p->n_embd, ff, 0);
    snprintf(name, sizeof(name), "ffn_up%s.weight", suffix);
    mat(b, il, name, false, p->n_embd, ff, 0);
    snprintf(name, sizeof(name), "ffn_down%s.weight", suffix);
    mat(b, il, name, true, ff, p->n_embd, 0);
}

static void edges(struct tb *b, const struct gen_params *p)
{
    int64_t nv = gen_vocab_size(p);
    add(b, -1, "token_embd.weight", ROLE_EDGE, GEN_INIT_EMBD, 1.0f, false, p->n_embd, nv, 0);
    norm(b, -1, "output_norm.weight", p->n_embd);
    /* std 10/sqrt(n_embd): logits of std ~9, clearly peaked */
    add(b, -1, "output.weight", ROLE_EDGE, GEN_INIT_OUTPUT, 10.0f / sqrtf((float)p->n_embd),
        true, p->n_embd, nv, 0);
    if (p->arch == GEN_ARCH_KIMI_K3) /* the residual attention's scores of order 1 */
        noise(b, -1, "output_res_score.weight", 1.0f / sqrtf((float)p->n_embd), false, p->n_embd, 0);
}

/* qwen3moe and llama share the plain GQA block; qwen3moe adds QK-norm. */
static void gqa_layer(struct tb *b, const struct gen_params *p, int il)
{
    int64_t nq = p->n_head * p->head_dim, nkv = p->n_head_kv * p->head_dim, e = p->n_embd;
    norm(b, il, "attn_norm.weight", e);
    mat(b, il, "attn_q.weight", false, e, nq, 0);
    mat(b, il, "attn_k.weight", false, e, nkv, 0);
    mat(b, il, "attn_v.weight", false, e, nkv, 0);
    mat(b, il, "attn_output.weight", true, nq, e, 0);
    if (p->arch == GEN_ARCH_QWEN3MOE) {
        norm(b, il, "attn_q_norm.weight", p->head_dim);
        norm(b, il, "attn_k_norm.weight", p->head_dim);
    }
    norm(b, il, "ffn_norm.weight", e);
    routed_experts(b, p, il, false);
}

/* Kimi K3's routed experts at the latent width between their projections. */
static void latent_experts(struct tb *b, const struct gen_params *p, int il)
{
    const int64_t e = p->n_embd, la = p->expert_latent, ff = p->n_ff_exp, ne = p->n_expert;
    router(b, il, p);
    noise(b, il, "exp_probs_b.bias", 0.05f, false, ne, 0);
    mat(b, il, "ffn_gate_exps.weight", false, la, ff, ne);
    mat(b, il, "ffn_up_exps.weight", false, la, ff, ne);
    mat(b, il, "ffn_down_exps.weight", false, ff, la, ne);
    mat(b, il, "ffn_routed_down.weight", false, e, la, 0);
    norm(b, il, "ffn_routed_norm.weight", la);
    mat(b, il, "ffn_routed_up.weight", true, la, e, 0);
}

/* The FFN of a family with leading dense blocks: dense SwiGLU there, else
 * the routed experts (Kimi K3's latent ones) and the shared ones. Whether
 * the block is routed. */
static bool dense_or_experts(struct tb *b, const struct gen_params *p, int il)
{
    if (il < p->n_layer_dense) {
        swiglu_ffn(b, p, il, "", p->n_ff);
        return false;
    }
    if (p->arch == GEN_ARCH_KIMI_K3)
        latent_experts(b, p, il);
    else
        routed_experts(b, p, il, true);
    swiglu_ffn(b, p, il, "_shexp", p->n_ff_exp * p->n_expert_shared);
    return true;
}

static void deepseek2_layer(struct tb *b, const struct gen_params *p, int il)
{
    int64_t e = p->n_embd, h = p->n_head, kvl = p->kv_lora_rank;
    norm(b, il, "attn_norm.weight", e);
    norm(b, il, "attn_q_a_norm.weight", p->q_lora_rank);
    norm(b, il, "attn_kv_a_norm.weight", kvl);
    mat(b, il, "attn_q_a.weight", false, e, p->q_lora_rank, 0);
    mat(b, il, "attn_q_b.weight", false, p->q_lora_rank, h * (p->qk_nope + p->qk_rope), 0);
    mat(b, il, "attn_kv_a_mqa.weight", false, e, kvl + p->qk_rope, 0);
    mat(b, il, "attn_k_b.weight", false, p->qk_nope, kvl, h);
    mat(b, il, "attn_v_b.weight", false, kvl, p->v_head, h);
    mat(b, il, "attn_output.weight", true, h * p->v_head, e, 0);
    norm(b, il, "ffn_norm.weight", e);
    dense_or_experts(b, p, il);
}

bool gen_full_indexer(const struct gen_params *p, int il)
{
    return p->arch == GEN_ARCH_DEEPSEEK32 || il % 2 == 0;
}

/* deepseek2's block plus the lightning indexer (model/dsa.h). */
static void sparse_layer(struct tb *b, const struct gen_params *p, int il)
{
    const int64_t e = p->n_embd, h = p->idx_n_head, d = p->idx_head_dim;
    deepseek2_layer(b, p, il);
    if (!gen_full_indexer(p, il))
        return;
    mat(b, il, "indexer.attn_q_b.weight", false, p->q_lora_rank, h * d, 0);
    mat(b, il, "indexer.attn_k.weight", false, e, d, 0);
    norm(b, il, "indexer.k_norm.weight", d);
    noise(b, il, "indexer.k_norm.bias", 0.02f, false, d, 0);
    mat(b, il, "indexer.proj.weight", false, e, h, 0);
}

bool gen_kimi_kda_block(const struct gen_params *p, int il)
{
    return (il + 1) % 4 != 0 && il != p->n_layer - 1;
}

/* Kimi Delta Attention: q, k, v with a short conv each, the decay's and
 * the output gate's low-rank pairs (K3: one full-rank gate), beta, A (as
 * -exp(A_log); K3's 1-D) and dt bias. */
static void kda_block(struct tb *b, const struct gen_params *p, int il)
{
    const bool k3 = p->arch == GEN_ARCH_KIMI_K3;
    const int64_t e = p->n_embd, d = p->ssm_d_state, w = p->n_head * d;
    mat(b, il, "attn_q.weight", false, e, w, 0);
    mat(b, il, "attn_k.weight", false, e, w, 0);
    mat(b, il, "attn_v.weight", false, e, w, 0);
    static const char *const convs[3] = { "ssm_conv1d_q.weight", "ssm_conv1d_k.weight",
                                          "ssm_conv1d_v.weight" };
    for (int i = 0; i < 3; i++)
        add(b, il, convs[i], ROLE_F32, GEN_INIT_NOISE, 0.5f, false, 4, 1, w);
    mat(b, il, "ssm_f_a.weight", false, e, d, 0);
    mat(b, il, "ssm_f_b.weight", false, d, w, 0);
    mat(b, il, "ssm_beta.weight", false, e, p->n_head, 0);
    add(b, il, "ssm_a", ROLE_F32, GEN_INIT_SSM_A, 0, false, k3 ? p->n_head : 1, k3 ? 0 : p->n_head,
        0);
    add(b, il, "ssm_dt.bias", ROLE_F32, GEN_INIT_SSM_DT, 0.5f, false, w, 0, 0);
    if (k3) {
        mat(b, il, "ssm_g.weight", false, e, w, 0);
    } else {
        mat(b, il, "ssm_g_a.weight", false, e, d, 0);
        mat(b, il, "ssm_g_b.weight", false, d, w, 0);
    }
    norm(b, il, "ssm_norm.weight", d);
    mat(b, il, "attn_output.weight", true, w, e, 0);
}

/* Kimi-Linear: KDA or MLA (no q LoRA, no rope), then deepseek2's FFN.
 * Kimi K3 adds the residual attention's scores, MLA's output gate and the
 * latent experts. */
static void kimi_linear_layer(struct tb *b, const struct gen_params *p, int il)
{
    const int64_t e = p->n_embd, h = p->n_head, kvl = p->kv_lora_rank;
    const bool k3 = p->arch == GEN_ARCH_KIMI_K3;
    norm(b, il, "attn_norm.weight", e);
    if (k3) {
        noise(b, il, "attn_res_score.weight", 1.0f / sqrtf((float)e), false, e, 0);
        noise(b, il, "ffn_res_score.weight", 1.0f / sqrtf((float)e), false, e, 0);
    }
    if (gen_kimi_kda_block(p, il)) {
        kda_block(b, p, il);
    } else {
        norm(b, il, "attn_kv_a_norm.weight", kvl);
        mat(b, il, "attn_q.weight", false, e, h * (p->qk_nope + p->qk_rope), 0);
        mat(b, il, "attn_kv_a_mqa.weight", false, e, kvl + p->qk_rope, 0);
        mat(b, il, "attn_k_b.weight", false, p->qk_nope, kvl, h);
        mat(b, il, "attn_v_b.weight", false, kvl, p->v_head, h);
        if (k3)
            mat(b, il, "attn_gate.weight", false, e, h * p->v_head, 0);
        mat(b, il, "attn_output.weight", true, h * p->v_head, e, 0);
    }
    norm(b, il, "ffn_norm.weight", e);
    dense_or_experts(b, p, il);
}

static void gpt_oss_layer(struct tb *b, const struct gen_params *p, int il)
{
    int64_t nq = p->n_head * p->head_dim, nkv = p->n_head_kv * p->head_dim;
    int64_t e = p->n_embd, ff = p->n_ff_exp, ne = p->n_expert;
    norm(b, il, "attn_norm.weight", e);
    mat(b, il, "attn_q.weight", false, e, nq, 0);
    noise(b, il, "attn_q.bias", 0.02f, false, nq, 0);
    mat(b, il, "attn_k.weight", false, e, nkv, 0);
    noise(b, il, "attn_k.bias", 0.02f, false, nkv, 0);
    mat(b, il, "attn_v.weight", false, e, nkv, 0);
    noise(b, il, "attn_v.bias", 0.02f, false, nkv, 0);
    mat(b, il, "attn_output.weight", true, nq, e, 0);
    noise(b, il, "attn_output.bias", 0.02f, true, e, 0);
    noise(b, il, "attn_sinks.weight", 1.0f, false, p->n_head, 0);
    norm(b, il, "post_attention_norm.weight", e);
    router(b, il, p);
    noise(b, il, "ffn_gate_inp.bias", 0.02f, false, ne, 0);
    mat(b, il, "ffn_gate_exps.weight", false, e, ff, ne);
    noise(b, il, "ffn_gate_exps.bias", 0.02f, false, ff, ne);
    mat(b, il, "ffn_up_exps.weight", false, e, ff, ne);
    noise(b, il, "ffn_up_exps.bias", 0.02f, false, ff, ne);
    mat(b, il, "ffn_down_exps.weight", true, ff, e, ne);
    noise(b, il, "ffn_down_exps.bias", 0.02f, true, e, ne);
}

/* GLM-4.5's attention: biased q/k/v, per-head QK norm (the 355B model's). */
static void glm4moe_attention(struct tb *b, const struct gen_params *p, int il)
{
    int64_t nq = p->n_head * p->head_dim, nkv = p->n_head_kv * p->head_dim, e = p->n_embd;
    norm(b, il, "attn_norm.weight", e);
    mat(b, il, "attn_q.weight", false, e, nq, 0);
    noise(b, il, "attn_q.bias", 0.02f, false, nq, 0);
    mat(b, il, "attn_k.weight", false, e, nkv, 0);
    noise(b, il, "attn_k.bias", 0.02f, false, nkv, 0);
    mat(b, il, "attn_v.weight", false, e, nkv, 0);
    noise(b, il, "attn_v.bias", 0.02f, false, nkv, 0);
    mat(b, il, "attn_output.weight", true, nq, e, 0);
    norm(b, il, "attn_q_norm.weight", p->head_dim);
    norm(b, il, "attn_k_norm.weight", p->head_dim);
    norm(b, il, "post_attention_norm.weight", e);
}

/* A glm4moe block; il == n_layer is the nextn (MTP) block llama.cpp loads
 * but does not run: a MoE block plus its projection and norms. */
static void glm4moe_layer(struct tb *b, const struct gen_params *p, int il)
{
    int64_t e = p->n_embd;
    glm4moe_attention(b, p, il);
    if (!dense_or_experts(b, p, il) || il < p->n_layer)
        return;
    mat(b, il, "nextn.eh_proj.weight", false, 2 * e, e, 0);
    norm(b, il, "nextn.enorm.weight", e);
    norm(b, il, "nextn.hnorm.weight", e);
    norm(b, il, "nextn.shared_head_norm.weight", e);
}

/* MiniMax-M2: QK norm over all heads, sigmoid routing with exp_probs_b. */
static void minimax_m2_layer(struct tb *b, const struct gen_params *p, int il)
{
    int64_t nq = p->n_head * p->head_dim, nkv = p->n_head_kv * p->head_dim, e = p->n_embd;
    norm(b, il, "attn_norm.weight", e);
    mat(b, il, "attn_q.weight", false, e, nq, 0);
    mat(b, il, "attn_k.weight", false, e, nkv, 0);
    mat(b, il, "attn_v.weight", false, e, nkv, 0);
    mat(b, il, "attn_output.weight", true, nq, e, 0);
    norm(b, il, "attn_q_norm.weight", nq);
    norm(b, il, "attn_k_norm.weight", nkv);
    norm(b, il, "ffn_norm.weight", e);
    routed_experts(b, p, il, true);
}

/* MiniMax-M3: M2's attention with a norm per head, a dense lead, routed and
 * shared experts, and the sparse attention's indexer in the routed blocks. */
static void minimax_m3_layer(struct tb *b, const struct gen_params *p, int il)
{
    const int64_t nq = p->n_head * p->head_dim, nkv = p->n_head_kv * p->head_dim, e = p->n_embd;
    const int64_t d = p->idx_head_dim;
    norm(b, il, "attn_norm.weight", e);
    mat(b, il, "attn_q.weight", false, e, nq, 0);
    mat(b, il, "attn_k.weight", false, e, nkv, 0);
    mat(b, il, "attn_v.weight", false, e, nkv, 0);
    mat(b, il, "attn_output.weight", true, nq, e, 0);
    norm(b, il, "attn_q_norm.weight", p->head_dim);
    norm(b, il, "attn_k_norm.weight", p->head_dim);
    norm(b, il, "ffn_norm.weight", e);
    if (!dense_or_experts(b, p, il))
        return;
    mat(b, il, "indexer.q_proj.weight", false, e, p->n_head_kv * d, 0);
    mat(b, il, "indexer.k_proj.weight", false, e, d, 0);
    norm(b, il, "indexer.q_norm.weight", d);
    norm(b, il, "indexer.k_norm.weight", d);
}

/* Qwen3.5's blocks: Gated DeltaNet but every fourth (full_attention_interval). */
static bool qwen35_recurrent(int il)
{
    return (il + 1) % 4 != 0;
}

/* qwen3next: beta and alpha in one ssm_ba, and with --ssm-in the older
 * files' single ssm_in for q, k, v and z (grouped per key head). */
static void qwen35_delta_net(struct tb *b, const struct gen_params *p, int il)
{
    int64_t e = p->n_embd, D = p->ssm_d_state, H = p->ssm_n_v_head;
    int64_t W = 2 * p->ssm_n_k_head * D + H * D;
    if (p->ssm_in) {
        mat(b, il, "ssm_in.weight", false, e, W + H * D, 0);
    } else {
        mat(b, il, "attn_qkv.weight", false, e, W, 0);
        mat(b, il, "attn_gate.weight", false, e, H * D, 0);
    }
    if (p->arch == GEN_ARCH_QWEN3NEXT) {
        mat(b, il, "ssm_ba.weight", false, e, 2 * H, 0);
    } else {
        mat(b, il, "ssm_beta.weight", false, e, H, 0);
        mat(b, il, "ssm_alpha.weight", false, e, H, 0);
    }
    noise(b, il, "ssm_conv1d.weight", 0.5f, false, 4, W);
    add(b, il, "ssm_dt.bias", ROLE_F32, GEN_INIT_SSM_DT, 0.5f, false, H, 0, 0);
    add(b, il, "ssm_a", ROLE_F32, GEN_INIT_SSM_A, 0, false, H, 0, 0);
    norm(b, il, "ssm_norm.weight", D);
    mat(b, il, "ssm_out.weight", true, H * D, e, 0);
}

/* Gated attention: Wq's rows hold each head's query and its output gate. */
static void qwen35_attention(struct tb *b, const struct gen_params *p, int il)
{
    int64_t nq = p->n_head * p->head_dim, nkv = p->n_head_kv * p->head_dim, e = p->n_embd;
    mat(b, il, "attn_q.weight", false, e, 2 * nq, 0);
    mat(b, il, "attn_k.weight", false, e, nkv, 0);
    mat(b, il, "attn_v.weight", false, e, nkv, 0);
    mat(b, il, "attn_output.weight", true, nq, e, 0);
    norm(b, il, "attn_q_norm.weight", p->head_dim);
    norm(b, il, "attn_k_norm.weight", p->head_dim);
}

static void qwen35moe_layer(struct tb *b, const struct gen_params *p, int il)
{
    int64_t e = p->n_embd;
    norm(b, il, "attn_norm.weight", e);
    if (qwen35_recurrent(il))
        qwen35_delta_net(b, p, il);
    else
        qwen35_attention(b, p, il);
    norm(b, il, "post_attention_norm.weight", e);
    routed_experts(b, p, il, false);
    noise(b, il, "ffn_gate_inp_shexp.weight", 1.0f / sqrtf((float)e), false, e, 0);
    swiglu_ffn(b, p, il, "_shexp", p->n_ff_exp * p->n_expert_shared);
}

int gen_arch_tensors(struct gen_plan *plan)
{
    const struct gen_params *p = plan->p;
    /* GPT-2-style residual scaling: each layer's writes shrink with depth
     * so the stream keeps v a steady share of its norm in every layer, and
     * with it the planted router skew */
    struct tb b = { .plan = plan, .rho = 1.0f / sqrtf((float)p->n_layer) };
    edges(&b, p);
    for (int il = 0; il < p->n_layer; il++) {
        switch (p->arch) {
        case GEN_ARCH_DEEPSEEK2: deepseek2_layer(&b, p, il); break;
        case GEN_ARCH_DEEPSEEK32:
        case GEN_ARCH_GLM_DSA: sparse_layer(&b, p, il); break;
        case GEN_ARCH_KIMI_LINEAR:
        case GEN_ARCH_KIMI_K3: kimi_linear_layer(&b, p, il); break;
        case GEN_ARCH_GPT_OSS: gpt_oss_layer(&b, p, il); break;
        case GEN_ARCH_GLM4MOE: glm4moe_layer(&b, p, il); break;
        case GEN_ARCH_MINIMAX_M2: minimax_m2_layer(&b, p, il); break;
        case GEN_ARCH_MINIMAX_M3: minimax_m3_layer(&b, p, il); break;
        case GEN_ARCH_QWEN35MOE:
        case GEN_ARCH_QWEN3NEXT: qwen35moe_layer(&b, p, il); break;
        default: gqa_layer(&b, p, il); break;
        }
    }
    if (p->arch == GEN_ARCH_GLM4MOE)
        glm4moe_layer(&b, p, (int)p->n_layer); /* the nextn block */
    return b.rc;
}
