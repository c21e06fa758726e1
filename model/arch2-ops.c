/* arch2-ops.c: SwiGLU-OAI and group-limited routing. */
#include "model/arch2-ops.h"

#include <math.h>
#include <stdbool.h>

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

/* Sum of the two largest of n >= 2 values. */
static float top2_sum(const float *v, int n)
{
    int a = v[1] > v[0] ? 1 : 0, b = 1 - a;
    for (int i = 2; i < n; i++) {
        if (v[i] > v[a]) {
            b = a;
            a = i;
        } else if (v[i] > v[b]) {
            b = i;
        }
    }
    return v[a] + v[b];
}

void arch2_group_mask(const float *sel, int n_expert, int n_groups, int n_used, float *mask)
{
    const int per = n_expert / n_groups;
    float score[256];
    bool chosen[256] = { false };
    for (int g = 0; g < n_groups && g < 256; g++)
        score[g] = top2_sum(sel + g * per, per);
    /* the n_used best groups, ties to the lower index */
    for (int j = 0; j < n_used; j++) {
        int best = -1;
        for (int g = 0; g < n_groups && g < 256; g++)
            if (!chosen[g] && (best < 0 || score[g] > score[best]))
                best = g;
        if (best >= 0)
            chosen[best] = true;
    }
    for (int e = 0; e < n_expert; e++)
        mask[e] = e / per < 256 && chosen[e / per] ? 0.0f : -INFINITY;
}
