/* arch-minimax-m2.c: MiniMax-M2 (llama.cpp arch "minimax-m2") = the
 * llama-family decoder with one RMSNorm over all heads' q and one over all
 * heads' k (attn_q_norm [n_head * head dim]), NEOX RoPE on the first
 * rope.dimension_count dims of each head (64 of 128 in the real model), and
 * routed experts chosen by the file's gating (sigmoid) + exp_probs_b,
 * always renormalised, scaled as the file says; no shared expert. As
 * llama.cpp's src/models/minimax-m2.cpp, which needs expert_gating_func and
 * sizes the experts by feed_forward_length. */
#include "model/arch.h"

static int minimax_m2_load(struct eng_model *m, struct fl_err *err)
{
    const struct eng_llama_opts o = {
        .qk_norm = ENG_QK_NORM_FULL, .rope = ENG_ROPE_NEOX, .biased_routing = true,
        .norm_always = true,
    };
    return eng_llama_family_load(m, &o, err);
}

const struct eng_arch eng_arch_minimax_m2 = {
    .name = "minimax-m2",
    .load = minimax_m2_load,
    .unload = eng_llama_family_unload,
    .forward = eng_llama_family_forward,
};
