/* activation.c: see model/activation.h. */
#include "model/activation.h"

#include <math.h>

void eng_swiglu_oai(const float *gate, const float *up, float *out, int64_t n, float alpha,
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
