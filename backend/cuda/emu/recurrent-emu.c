/* recurrent-emu.c: Gated DeltaNet's launchers (cuda-impl.h) on the host for
 * the emulated device, as kernels-emu.c does for the others: each names
 * the device ranges its kernel in cuda-ops.cu reads and writes, then
 * computes what the kernel computes, in its order (a channel's window, a
 * state row's products in index order, the L2 sums in double). */
#include <math.h>
#include <string.h>

#include "backend/cuda/cuda-impl.h"
#include "backend/cuda/emu/emu.h"

#define F32(n) ((size_t)(n) * sizeof(float))

static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

cudaError_t flc_launch_sigmoid_gate(cudaStream_t s, float *y, const float *g, int64_t width,
                                    int64_t n_rows, int per_row)
{
    struct flemu_op op;
    flemu_begin(&op, "sigmoid_gate", s);
    flemu_dev(&op, y, F32(width * n_rows), "y");
    flemu_dev(&op, g, F32(per_row ? n_rows : width * n_rows), "g");
    for (int64_t i = 0; op.err == cudaSuccess && i < width * n_rows; i++)
        y[i] *= sigmoid(per_row ? g[i / width] : g[i]);
    return flemu_launched(&op);
}

static void conv_channel(const float *x, const float *kw, float *st, float *out, int64_t n_tok,
                         int64_t width, int k, int reset, int64_t ch)
{
    float keep[16];
    for (int i = 0; i < k - 1; i++)
        keep[i] = reset ? 0.0f : st[i];
    for (int64_t t = 0; t < n_tok; t++) {
        float sum = 0.0f;
        for (int i = 0; i < k; i++) {
            const int64_t at = t + i;
            sum += (at < k - 1 ? keep[at] : x[(at - (k - 1)) * width + ch]) * kw[i];
        }
        out[t * width + ch] = sum / (1.0f + expf(-sum));
    }
    for (int i = 0; i < k - 1; i++) {
        const int64_t at = n_tok + i;
        st[i] = at < k - 1 ? keep[at] : x[(at - (k - 1)) * width + ch];
    }
}

cudaError_t flc_launch_ssm_conv(cudaStream_t s, const float *x, const float *w, float *state,
                                float *out, int64_t n_tok, int64_t width, int k, int reset)
{
    struct flemu_op op;
    flemu_begin(&op, "ssm_conv", s);
    flemu_dev(&op, x, F32(n_tok * width), "x");
    flemu_dev(&op, w, F32(width * k), "w");
    flemu_dev(&op, state, F32(width * (k - 1)), "state");
    flemu_dev(&op, out, F32(n_tok * width), "out");
    if (k < 2 || k > 16)
        op.err = cudaErrorInvalidValue;
    for (int64_t ch = 0; op.err == cudaSuccess && ch < width; ch++)
        conv_channel(x, w + ch * k, state + ch * (k - 1), out, n_tok, width, k, reset, ch);
    return flemu_launched(&op);
}

static float dot(const float *a, const float *b, int d)
{
    float s = 0.0f;
    for (int i = 0; i < d; i++)
        s += a[i] * b[i];
    return s;
}

/* Thread 0's part of a token: the normed q and k, decay and beta. */
static void token_shared(const struct flc_delta_net *p, const float *row, float alpha, float beta,
                         int h, float *q, float *k, float *gb)
{
    const int d = p->d;
    const int kh = p->k_grouped ? h / (p->n_v_head / p->n_k_head) : h % p->n_k_head;
    const float *qr = row + (int64_t)kh * d, *kr = row + (int64_t)(p->n_k_head + kh) * d;
    double sq = 0.0, sk = 0.0;
    for (int i = 0; i < d; i++) {
        sq += (double)(qr[i] * qr[i]);
        sk += (double)(kr[i] * kr[i]);
    }
    const float cq = 1.0f / fmaxf(sqrtf((float)sq), p->eps);
    const float ck = 1.0f / fmaxf(sqrtf((float)sk), p->eps);
    for (int i = 0; i < d; i++) {
        q[i] = qr[i] * cq;
        k[i] = kr[i] * ck;
    }
    const float z = alpha + p->dt_bias[h];
    const float sp = z > 20.0f ? z : logf(1.0f + expf(z));
    gb[0] = expf(sp * p->a[h]);
    gb[1] = sigmoid(beta);
}

static void delta_head(const struct flc_delta_net *p, const float *qkv, const float *alpha,
                       const float *beta, float *state, float *out, int64_t n_tok, int reset,
                       int h)
{
    const int d = p->d, H = p->n_v_head;
    const int64_t width = 2 * (int64_t)p->n_k_head * d + (int64_t)H * d;
    float q[1024], k[1024], gb[2];
    float *S = state + (int64_t)h * d * d;
    if (reset)
        memset(S, 0, F32((int64_t)d * d));
    for (int64_t t = 0; t < n_tok; t++) {
        const float *row = qkv + t * width;
        token_shared(p, row, alpha[t * H + h], beta[t * H + h], h, q, k, gb);
        for (int r = 0; r < d; r++) {
            float *M = S + (int64_t)r * d;
            for (int i = 0; i < d; i++)
                M[i] *= gb[0];
            const float delta = (row[2 * (int64_t)p->n_k_head * d + (int64_t)h * d + r] -
                                 dot(M, k, d)) * gb[1];
            for (int i = 0; i < d; i++)
                M[i] += k[i] * delta;
            out[t * H * d + (int64_t)h * d + r] = dot(M, q, d) * (1.0f / sqrtf((float)d));
        }
    }
}

cudaError_t flc_launch_delta_net(cudaStream_t s, const struct flc_delta_net *p, const float *qkv,
                                 const float *alpha, const float *beta, float *state, float *out,
                                 int64_t n_tok, int reset)
{
    struct flemu_op op;
    flemu_begin(&op, "delta_net", s);
    const int64_t d = p->d, H = p->n_v_head, width = 2 * (int64_t)p->n_k_head * d + H * d;
    if (d < 1 || d > 1024) /* one block of d threads */
        op.err = cudaErrorInvalidConfiguration;
    flemu_dev(&op, qkv, F32(n_tok * width), "qkv");
    flemu_dev(&op, alpha, F32(n_tok * H), "alpha");
    flemu_dev(&op, beta, F32(n_tok * H), "beta");
    flemu_dev(&op, p->dt_bias, F32(H), "dt_bias");
    flemu_dev(&op, p->a, F32(H), "a");
    flemu_dev(&op, state, F32(H * d * d), "state");
    flemu_dev(&op, out, F32(n_tok * H * d), "out");
    for (int h = 0; op.err == cudaSuccess && h < p->n_v_head; h++)
        delta_head(p, qkv, alpha, beta, state, out, n_tok, reset, h);
    return flemu_launched(&op);
}
