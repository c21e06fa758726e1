/* cpu-ops.c: the CPU's row ops (backend/cpu/cpu-ops.h). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu-ops.h"
#include "gguf/tensor-types.h"

void cpu_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    if (w) {
        for (int64_t i = 0; i < n; i++)
            y[i] = (x[i] * scale) * w[i];
    } else {
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] * scale;
    }
}

void cpu_rmsnorm_rows(float *y, const float *x, const struct eng_tensor *w, int64_t n,
                      int64_t n_rows, int64_t stride, float eps)
{
    const float *wf = w ? (const float *)w->data : NULL;
    for (int64_t r = 0; r < n_rows; r++)
        cpu_rmsnorm(y + r * stride, x + r * stride, wf, n, eps);
}

/* ggml_norm's steps: the mean and the variance summed in double, then the
 * scale; ggml_mul and ggml_add apply the weight and the bias after it. */
void cpu_layernorm(float *y, const float *x, const float *w, const float *b, int64_t n, float eps)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)x[i];
    const float mean = (float)(sum / (double)n);
    double var = 0.0;
    for (int64_t i = 0; i < n; i++) {
        y[i] = x[i] - mean;
        var += (double)(y[i] * y[i]);
    }
    const float scale = 1.0f / sqrtf((float)(var / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) {
        y[i] *= scale;
        if (w)
            y[i] *= w[i];
        if (b)
            y[i] += b[i];
    }
}

void cpu_swiglu(float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void cpu_add(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += x[i];
}

void cpu_add_bias(float *y, const struct eng_tensor *b, int64_t n_tok)
{
    const int64_t n = b->ne[0];
    for (int64_t t = 0; t < n_tok; t++)
        cpu_add(y + t * n, (const float *)b->data, n);
}

int cpu_get_rows(const struct eng_tensor *t, const int32_t *ids, int n, float *out,
                 struct fl_err *err)
{
    const struct fl_type_traits *tr = fl_type_traits(t->type);
    if (!tr || !tr->to_float)
        return fl_err_set(err, -EINVAL, "%s: cannot read rows of type %u", t->name, t->type);
    const size_t row = fl_row_size(t->type, t->ne[0]);
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->ne[1])
            return fl_err_set(err, -EINVAL, "token id %d is outside the vocabulary [0, %lld)",
                              ids[i], (long long)t->ne[1]);
        tr->to_float(t->data + (size_t)ids[i] * row, out + (int64_t)i * t->ne[0], t->ne[0]);
    }
    return 0;
}

void cpu_rope(float *x, int n_head, int64_t head_dim, int n_rot, enum eng_rope_mode mode,
              const float *cs)
{
    /* NORM pairs adjacent values, NEOX pairs the two halves of the rotated
     * part; both use angle i0/2 for pair i0. */
    const int half = n_rot / 2;
    for (int h = 0; h < n_head; h++) {
        float *v = x + (int64_t)h * head_dim;
        for (int i0 = 0; i0 < n_rot; i0 += 2) {
            const float c = cs[i0], s = cs[i0 + 1];
            const int a = mode == ENG_ROPE_NEOX ? i0 / 2 : i0;
            const int b = mode == ENG_ROPE_NEOX ? i0 / 2 + half : i0 + 1;
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
        }
    }
}

void cpu_rope_rows(float *x, int n_tok, int64_t stride, int n_head, int64_t head_dim, int n_rot,
                   enum eng_rope_mode mode, const float *cs)
{
    for (int t = 0; t < n_tok; t++)
        cpu_rope(x + (int64_t)t * stride, n_head, head_dim, n_rot, mode, cs + (int64_t)t * n_rot);
}

/* sum_i rmsnorm(x)_i * w_i, in ggml's steps: the normed row in float,
 * times the weight in float, summed in double (ggml_sum_rows). */
static float res_score(const float *x, const float *w, int64_t n, float eps)
{
    double sq = 0.0;
    for (int64_t i = 0; i < n; i++)
        sq += (double)(x[i] * x[i]);
    const float scale = 1.0f / sqrtf((float)(sq / (double)n) + eps);
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)((x[i] * scale) * w[i]);
    return (float)sum;
}

void cpu_res_mix(const float *const *rows, int n_rows, const float *w, int64_t n, float eps,
                 float *p, float *out)
{
    float max = -INFINITY;
    for (int k = 0; k < n_rows; k++) {
        p[k] = res_score(rows[k], w, n, eps);
        max = p[k] > max ? p[k] : max;
    }
    double sum = 0.0; /* ggml_soft_max: exp(s - max), summed in double, then one scale */
    for (int k = 0; k < n_rows; k++)
        sum += (double)(p[k] = expf(p[k] - max));
    const float inv = (float)(1.0 / sum);
    for (int k = 0; k < n_rows; k++)
        p[k] *= inv;
    const float *cur = rows[n_rows - 1];
    for (int64_t i = 0; i < n; i++) { /* the checkpoints in order, then the stream */
        float acc = 0.0f;
        for (int k = 0; k + 1 < n_rows; k++)
            acc += rows[k][i] * p[k];
        out[i] = acc + cur[i] * p[n_rows - 1];
    }
}
