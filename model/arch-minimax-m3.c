/* arch-minimax-m3.c: MiniMax-M3 (llama.cpp arch "minimax-m3", after its
 * src/models/minimax-m3.cpp) = MiniMax-M2's GQA with an RMSNorm per head on
 * q and k (one head_dim weight each) and NEOX RoPE on the first rope dims,
 * DeepSeek-V3's leading dense blocks and routed + shared experts (the
 * file's gating, sigmoid, with exp_probs_b; renormalised where
 * expert_weights_norm says), SwiGLU-OAI in every FFN (gpt-oss's constants,
 * as llama.cpp fixes them), and MiniMax Sparse Attention in the routed
 * blocks (model/msa.h). */
#include <errno.h>

#include "model/activation.h"
#include "model/arch.h"

static int minimax_m3_load(struct eng_model *m, struct fl_err *err)
{
    const struct eng_llama_opts o = {
        .qk_norm = ENG_QK_NORM_HEAD, .rope = ENG_ROPE_NEOX, .ff_exp_key = true,
        .biased_routing = true, .msa = true,
        .act = { .act = ENG_ACT_SWIGLU_OAI, .alpha = ENG_OAI_ALPHA, .limit = ENG_OAI_LIMIT },
    };
    int rc = eng_llama_family_load(m, &o, err);
    if (!rc && m->hp.n_expert_shared < 1) /* llama.cpp requires the shared expert */
        rc = fl_err_set(err, -EINVAL, "%s: missing key %s.expert_shared_count",
                        gguf_name(m->gguf), m->hp.arch);
    return rc;
}

const struct eng_arch eng_arch_minimax_m3 = {
    .name = "minimax-m3",
    .load = minimax_m3_load,
    .unload = eng_llama_family_unload,
    .forward = eng_llama_family_forward,
};
