/* activation.h: gated activations the CPU and the emulated device share
 * (the CUDA kernels are written to match them).
 *
 * SwiGLU-OAI (ggml_swiglu_oai): the gate is clamped from above, the up
 * projection to [-limit, limit], and the "+1" on up keeps a residual path:
 *   out = min(g, limit) * sigmoid(alpha * min(g, limit)) * (clamp(u, -limit, limit) + 1)
 * gpt-oss uses alpha 1.702 and limit 7 (fixed in llama.cpp, not metadata). */
#ifndef FL_ACTIVATION_H
#define FL_ACTIVATION_H

#include <stdint.h>

/* The gated activation between a FFN's (gate, up) and down products. */
enum eng_act {
    ENG_ACT_SWIGLU = 0,        /* silu(gate) * up (ggml_swiglu_split) */
    ENG_ACT_SWIGLU_OAI,        /* gpt-oss's clamped form (below) */
    ENG_ACT_SITU,              /* Kimi K3's situ (below) */
};

/* A gated activation and its constants. */
struct eng_gated {
    enum eng_act act;
    float alpha, limit;      /* ENG_ACT_SWIGLU_OAI's */
    float beta, linear_beta; /* ENG_ACT_SITU's */
};

#define ENG_OAI_ALPHA 1.702f
#define ENG_OAI_LIMIT 7.0f

/* out[i] for i < n as above; out may alias gate. */
void eng_swiglu_oai(const float *gate, const float *up, float *out, int64_t n, float alpha,
                    float limit);

/* Kimi K3's situ (llama.cpp's LLM_FFN_SITU, in ggml's float steps):
 *   out = (beta * tanh(g / beta)) * sigmoid(g) * u',
 *   u' = linear_beta * tanh(u / linear_beta), or u when linear_beta <= 0.
 * tanh is computed through expf (within a few ulp of tanhf, several times
 * faster). out may alias gate. */
void eng_situ_f32(const float *gate, const float *up, float *out, int64_t n, float beta,
                  float linear_beta);

/* out[i] = a's activation of (gate[i], up[i]) for SwiGLU-OAI or situ (a's
 * constants); out may alias gate. SwiGLU is the CPU's own kernel. */
void eng_gated_f32(const struct eng_gated *a, const float *gate, const float *up, float *out,
                   int64_t n);

#endif
