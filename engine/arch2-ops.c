/* arch2-ops.c: SwiGLU-OAI. */
#include "engine/arch2-ops.h"

#include <math.h>

void arch2_swiglu_oai(const float *gate, const float *up, float *out, int64_t n, float alpha,
                      float limit)
{
    for (int64_t i = 0; i < n; i++) {
        /* std::min / std::clamp semantics, as ggml (a NaN passes through) */
        const float g = gate[i], u = up[i];
        const float x = limit < g ? limit : g;
        const float y = u < -limit ? -limit : (limit < u ? limit : u);
        out[i] = x / (1.f + expf(alpha * (-x))) * (y + 1.f);
    }
}

void arch2_act_swiglu_oai(float *gate, const float *up, int64_t n, const void *arg)
{
    const struct arch2_oai_act *a = arg;
    arch2_swiglu_oai(gate, up, gate, n, a->alpha, a->limit);
}
