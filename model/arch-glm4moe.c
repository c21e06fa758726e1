/* arch-glm4moe.c: GLM-4.5 / 4.6 / 4.7 MoE (llama.cpp arch "glm4moe") = the
 * llama-family decoder with q/k/v biases, per-head QK norm where the file
 * has it (the 355B model has, Air not), NEOX RoPE on the first
 * rope.dimension_count dims of each head (partial), post_attention_norm as
 * the pre-FFN norm, leading dense blocks, routed experts chosen by sigmoid
 * + exp_probs_b (renormalised and scaled as the file says) plus one shared
 * expert; the trailing nextn (MTP) block is neither loaded nor run. As
 * llama.cpp's src/models/glm4-moe.cpp. Multimodal files (M-RoPE sections)
 * are refused: llama.cpp runs them only with vision input. */
#include <errno.h>
#include <stdio.h>

#include "model/arch.h"

static int refuse_mrope(struct eng_model *m, struct fl_err *err)
{
    char key[96];
    snprintf(key, sizeof(key), "%s.rope.dimension_sections", m->hp.arch);
    const struct gguf_value *v;
    if (gguf_get_arr(m->gguf, key, &v) != 0 || v->arr.n < 2 ||
        (v->arr.type != GGUF_VT_INT32 && v->arr.type != GGUF_VT_UINT32))
        return 0;
    const int32_t *s = v->arr.elems;
    if (s[0] > 0 && s[1] > 0)
        return fl_err_set(err, -EINVAL, "%s: multimodal RoPE sections (%s) are not supported",
                          gguf_name(m->gguf), key);
    return 0;
}

static int glm4moe_load(struct eng_model *m, struct fl_err *err)
{
    const struct eng_llama_opts o = {
        .qk_norm = ENG_QK_NORM_HEAD_OPT, .rope = ENG_ROPE_NEOX, .ff_exp_key = true,
        .qkv_bias = true, .post_attn_norm = true, .biased_routing = true,
        .gating_default = ENG_GATING_SIGMOID,
    };
    int rc = eng_llama_family_load(m, &o, err);
    return rc ? rc : refuse_mrope(m, err);
}

const struct eng_arch eng_arch_glm4moe = {
    .name = "glm4moe",
    .load = glm4moe_load,
    .unload = eng_llama_family_unload,
    .forward = eng_llama_family_forward,
};
