/* arch-qwen3moe.c: Qwen3-MoE = the llama-family decoder with per-head
 * RMSNorm of q and k before a NEOX RoPE, softmax routing renormalised over
 * the top k (llama.cpp passes norm_w = true for this arch whatever the
 * metadata says) and the expert width from expert_feed_forward_length. */
#include "model/arch.h"

static int qwen3moe_load(struct eng_model *m, struct fl_err *err)
{
    const struct eng_llama_opts o = { .qk_norm = ENG_QK_NORM_HEAD, .rope = ENG_ROPE_NEOX,
                                      .ff_exp_key = true };
    return eng_llama_family_load(m, &o, err);
}

const struct eng_arch eng_arch_qwen3moe = {
    .name = "qwen3moe",
    .load = qwen3moe_load,
    .unload = eng_llama_family_unload,
    .forward = eng_llama_family_forward,
};
