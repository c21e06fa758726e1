/* arch2-ops.h: the ops deepseek2/gpt-oss need that the common ops
 * (model/ops.h) do not have: gpt-oss's gated activation and DeepSeek-V3's
 * group-limited expert choice.
 *
 * SwiGLU-OAI (ggml_swiglu_oai): the gate is clamped from above, the up
 * projection to [-limit, limit], and the "+1" on up keeps a residual path:
 *   out = min(g, limit) * sigmoid(alpha * min(g, limit)) * (clamp(u, -limit, limit) + 1)
 * gpt-oss uses alpha 1.702 and limit 7 (fixed in llama.cpp, not metadata). */
#ifndef FL_ARCH2_OPS_H
#define FL_ARCH2_OPS_H

#include <stdint.h>

struct arch2_oai_act {
    float alpha;
    float limit;
};

#define ARCH2_OAI_ALPHA 1.702f
#define ARCH2_OAI_LIMIT 7.0f

/* out[i] for i < n as above; out may alias gate. */
void arch2_swiglu_oai(const float *gate, const float *up, float *out, int64_t n, float alpha,
                      float limit);

/* The same in the engine's activation-callback form (model/ops.h
 * eng_act_fn): gate becomes the down projection's input; arg points at a
 * struct arch2_oai_act. */
void arch2_act_swiglu_oai(float *gate, const float *up, int64_t n, const void *arg);

/* DeepSeek-V3 group-limited routing (llama.cpp build_moe_ffn with
 * expert_group_count > 1): the n_expert experts form n_groups consecutive
 * groups; a group's score is the sum of its two best selection scores
 * (gating output + selection bias); only the n_used best groups may be
 * chosen. Writes mask[e] = 0 for experts of a chosen group, -INFINITY for
 * the others, so adding mask to the selection bias restricts the top-k.
 * Needs n_expert % n_groups == 0, >= 2 experts per group, 0 < n_used <= n_groups. */
void arch2_group_mask(const float *sel, int n_expert, int n_groups, int n_used, float *mask);

#endif
