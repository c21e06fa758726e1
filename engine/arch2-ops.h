/* arch2-ops.h: gpt-oss's gated activation, the one op deepseek2/gpt-oss need
 * that the common ops (engine/ops.h) do not have.
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

/* The same in the engine's activation-callback form (engine/ops.h
 * eng_act_fn): gate becomes the down projection's input; arg points at a
 * struct arch2_oai_act. */
void arch2_act_swiglu_oai(float *gate, const float *up, int64_t n, const void *arg);

#endif
