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

/* tanh(y) through expf, which is several times faster than libm's tanhf
 * (its expm1f): (e - 1) / (e + 1) of e = exp(2y), and for |y| < 1/8, where
 * that difference would cancel, the series to y^9 (relative error under
 * 3e-10); within a few ulp of tanhf. NaN passes through. */
static float fast_tanhf(float y)
{
    const float a = fabsf(y);
    if (a < 0.125f) {
        const float y2 = y * y;
        return y + y * y2 * (-1.0f / 3 + y2 * (2.0f / 15 + y2 * (-17.0f / 315 + y2 * (62.0f / 2835))));
    }
    if (a > 10.0f)
        return copysignf(1.0f, y); /* tanh is 1 in float from 9.01 on */
    const float e = expf(2.0f * y);
    return (e - 1.0f) / (e + 1.0f);
}

void eng_situ_f32(const float *gate, const float *up, float *out, int64_t n, float beta,
                  float linear_beta)
{
    const float inv = 1.0f / beta, linv = linear_beta > 0.0f ? 1.0f / linear_beta : 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i], u = up[i];
        const float a = fast_tanhf(g * inv) * beta * (1.0f / (1.0f + expf(-g)));
        out[i] = a * (linear_beta > 0.0f ? fast_tanhf(u * linv) * linear_beta : u);
    }
}

void eng_gated_f32(const struct eng_gated *a, const float *gate, const float *up, float *out,
                   int64_t n)
{
    if (a->act == ENG_ACT_SWIGLU_OAI)
        eng_swiglu_oai(gate, up, out, n, a->alpha, a->limit);
    else
        eng_situ_f32(gate, up, out, n, a->beta, a->linear_beta);
}
