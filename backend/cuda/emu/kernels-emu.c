/* kernels-emu.c: the launchers of backend/cuda/cuda-impl.h run on the host
 * for the emulated device (emu.h). Each names the exact device ranges the
 * kernel in cuda-ops.cu / cuda-quant.cu reads and writes (flemu_dev), so a
 * wrong shape or pointer fails the launch with one line saying which
 * argument, then computes what the kernel computes: the same formulas,
 * float where the kernel uses float, double where it sums in double. The
 * summation order follows the kernels where that is cheap (a warp's
 * lanes); bit-identity with a GPU is not a goal (docs/cuda.md). Weights
 * are dequantized by the CPU engine's to_float, which the GPU's decoders
 * match bit for bit (test-cuda-decode). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "model/activation.h"
#include "backend/cuda/cuda-impl.h"
#include "backend/cuda/emu/emu.h"
#include "gguf/tensor-types.h"

#define F32(n) ((size_t)(n) * sizeof(float))
#define F16(n) ((size_t)(n) * sizeof(uint16_t))

enum { UNIT = 32, NT = 128 }; /* a kernel's 32-value unit; threads per row block */

/* --- matrix products ------------------------------------------------------------- */

/* One row's dot as the kernel's warp forms it: lane l sums units l, l+32,
 * ..., then __shfl_down's tree adds the lanes. Shared by the single and
 * grouped products, so they agree bit for bit as on the GPU. */
static float row_dot(const float *w, const float *x, int64_t n_in)
{
    float lane[32] = { 0 };
    for (int64_t u = 0; u < n_in / UNIT; u++) {
        float acc = lane[u % 32]; /* the lane's sum in a register: the same steps */
        for (int l = 0; l < UNIT; l++)
            acc += w[u * UNIT + l] * x[u * UNIT + l];
        lane[u % 32] = acc;
    }
    for (int off = 16; off > 0; off /= 2)
        for (int l = 0; l < off; l++)
            lane[l] += lane[l + off];
    return lane[0];
}

static float f16_values[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

static void f16_fill(void)
{
    for (uint32_t h = 0; h < 65536; h++)
        f16_values[h] = fl_f16_to_f32((fl_f16)h);
}

const float *flemu_f16_table(void)
{
    pthread_once(&f16_once, f16_fill);
    return f16_values;
}

static void decode(const void *w, uint32_t type, int64_t n_in, int64_t r, float *out)
{
    const uint8_t *row = (const uint8_t *)w + (size_t)r * fl_row_size(type, n_in);
    if (type == FL_TYPE_F16) { /* to_float's values, by table */
        const float *f16 = flemu_f16_table();
        const fl_f16 *h = (const fl_f16 *)row;
        for (int64_t i = 0; i < n_in; i++)
            out[i] = f16[h[i]];
        return;
    }
    fl_type_traits(type)->to_float(row, out, n_in);
}

static bool known(struct flemu_op *op, uint32_t type)
{
    if (op->err == cudaSuccess && !fl_cuda_type_supported(type))
        op->err = cudaErrorInvalidValue; /* the .cu switch's default */
    return op->err == cudaSuccess;
}

cudaError_t flc_launch_matvec(cudaStream_t s, const void *w, uint32_t type, int64_t n_in,
                              int64_t n_out, const float *x, int64_t n_tok, float *y)
{
    struct flemu_op op;
    flemu_begin(&op, "matvec", s);
    if (known(&op, type)) {
        flemu_dev(&op, w, fl_row_size(type, n_in) * (size_t)n_out, "w");
        flemu_dev(&op, x, F32(n_in * n_tok), "x");
        flemu_dev(&op, y, F32(n_out * n_tok), "y");
    }
    float *row = op.err == cudaSuccess ? malloc(F32(n_in)) : NULL;
    for (int64_t o = 0; row && o < n_out; o++) {
        decode(w, type, n_in, o, row);
        for (int64_t t = 0; t < n_tok; t++)
            y[t * n_out + o] = row_dot(row, x + t * n_in, n_in);
    }
    if (op.err == cudaSuccess && !row)
        op.err = cudaErrorMemoryAllocation;
    free(row);
    return flemu_launched(&op);
}

cudaError_t flc_launch_matvec_group(cudaStream_t s, const flc_mv_group *g, uint32_t type,
                                    int64_t n_in, int64_t n_out)
{
    struct flemu_op op;
    flemu_begin(&op, "matvec group", s);
    for (int j = 0; j < g->n && known(&op, type); j++) {
        flemu_dev(&op, g->w[j], fl_row_size(type, n_in) * (size_t)n_out, "w[j]");
        flemu_dev(&op, g->x[j], F32(n_in), "x[j]");
        flemu_dev(&op, g->y[j], F32(n_out), "y[j]");
    }
    float *row = op.err == cudaSuccess ? malloc(F32(n_in)) : NULL;
    for (int j = 0; row && j < g->n; j++)
        for (int64_t o = 0; o < n_out; o++) {
            decode(g->w[j], type, n_in, o, row);
            g->y[j][o] = row_dot(row, g->x[j], n_in);
        }
    if (op.err == cudaSuccess && !row)
        op.err = cudaErrorMemoryAllocation;
    free(row);
    return flemu_launched(&op);
}

cudaError_t flc_launch_dequant_f16(cudaStream_t s, const void *w, uint32_t type, int64_t n_in,
                                   int64_t n_rows, uint16_t *dst)
{
    struct flemu_op op;
    flemu_begin(&op, "dequant_f16", s);
    if (known(&op, type)) {
        flemu_dev(&op, w, fl_row_size(type, n_in) * (size_t)n_rows, "w");
        flemu_dev(&op, dst, F16(n_in * n_rows), "dst");
    }
    float *row = op.err == cudaSuccess ? malloc(F32(n_in)) : NULL;
    for (int64_t r = 0; row && r < n_rows; r++) {
        decode(w, type, n_in, r, row);
        for (int64_t i = 0; i < n_in; i++)
            dst[r * n_in + i] = fl_f32_to_f16(row[i]);
    }
    if (op.err == cudaSuccess && !row)
        op.err = cudaErrorMemoryAllocation;
    free(row);
    return flemu_launched(&op);
}

/* --- element-wise and row ops ----------------------------------------------------- */

cudaError_t flc_launch_f32_to_f16(cudaStream_t s, const float *x, uint16_t *y, int64_t n)
{
    struct flemu_op op;
    flemu_begin(&op, "f32_to_f16", s);
    flemu_dev(&op, x, F32(n), "x");
    flemu_dev(&op, y, F16(n), "y");
    for (int64_t i = 0; op.err == cudaSuccess && i < n; i++)
        y[i] = fl_f32_to_f16(x[i]);
    return flemu_launched(&op);
}

cudaError_t flc_launch_rmsnorm(cudaStream_t s, float *y, const float *x, const float *w,
                               int64_t n, int64_t n_rows, int64_t stride, float eps)
{
    struct flemu_op op;
    flemu_begin(&op, "rmsnorm", s);
    flemu_dev(&op, x, F32((n_rows - 1) * stride + n), "x");
    flemu_dev(&op, y, F32((n_rows - 1) * stride + n), "y");
    if (w)
        flemu_dev(&op, w, F32(n), "w");
    for (int64_t r = 0; op.err == cudaSuccess && r < n_rows; r++) {
        const float *xr = x + r * stride;
        float *yr = y + r * stride;
        double sum = 0.0; /* squares rounded to float, summed in double */
        for (int64_t i = 0; i < n; i++)
            sum += (double)(xr[i] * xr[i]);
        const float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
        for (int64_t i = 0; i < n; i++)
            yr[i] = w ? xr[i] * scale * w[i] : xr[i] * scale;
    }
    return flemu_launched(&op);
}

cudaError_t flc_launch_swiglu(cudaStream_t s, float *g, const float *u, int64_t n)
{
    struct flemu_op op;
    flemu_begin(&op, "swiglu", s);
    flemu_dev(&op, g, F32(n), "g");
    flemu_dev(&op, u, F32(n), "u");
    for (int64_t i = 0; op.err == cudaSuccess && i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    return flemu_launched(&op);
}

cudaError_t flc_launch_add(cudaStream_t s, float *y, const float *x, int64_t n)
{
    struct flemu_op op;
    flemu_begin(&op, "add", s);
    flemu_dev(&op, y, F32(n), "y");
    flemu_dev(&op, x, F32(n), "x");
    for (int64_t i = 0; op.err == cudaSuccess && i < n; i++)
        y[i] += x[i];
    return flemu_launched(&op);
}

cudaError_t flc_launch_swiglu_oai(cudaStream_t s, float *g, const float *u, int64_t n,
                                  float alpha, float limit)
{
    struct flemu_op op;
    flemu_begin(&op, "swiglu_oai", s);
    flemu_dev(&op, g, F32(n), "g");
    flemu_dev(&op, u, F32(n), "u");
    if (op.err == cudaSuccess) /* the kernel is this formula, element by element */
        eng_swiglu_oai(g, u, g, n, alpha, limit);
    return flemu_launched(&op);
}

cudaError_t flc_launch_add_rows(cudaStream_t s, float *y, const float *b, int64_t n,
                                int64_t n_rows, int64_t stride)
{
    struct flemu_op op;
    flemu_begin(&op, "add_rows", s);
    flemu_dev(&op, y, F32((n_rows - 1) * stride + n), "y");
    flemu_dev(&op, b, F32(n), "b");
    for (int64_t r = 0; op.err == cudaSuccess && r < n_rows; r++)
        for (int64_t i = 0; i < n; i++)
            y[r * stride + i] += b[i];
    return flemu_launched(&op);
}

cudaError_t flc_launch_rope(cudaStream_t s, float *x, int64_t n_tok, int64_t stride, int n_head,
                            int64_t head_dim, int n_rot, int neox, const float *cs)
{
    struct flemu_op op;
    flemu_begin(&op, "rope", s);
    flemu_dev(&op, x, F32((n_tok - 1) * stride + (n_head - 1) * head_dim + n_rot), "x");
    flemu_dev(&op, cs, F32(n_tok * n_rot), "cs");
    const int half = n_rot / 2;
    for (int64_t t = 0; op.err == cudaSuccess && t < n_tok; t++)
        for (int h = 0; h < n_head; h++)
            for (int p = 0; p < half; p++) {
                float *v = x + t * stride + h * head_dim;
                const float c = cs[t * n_rot + 2 * p], sn = cs[t * n_rot + 2 * p + 1];
                const int a = neox ? p : 2 * p, b = neox ? p + half : 2 * p + 1;
                const float x0 = v[a], x1 = v[b];
                v[a] = x0 * c - x1 * sn;
                v[b] = x0 * sn + x1 * c;
            }
    return flemu_launched(&op);
}

/* --- routing ---------------------------------------------------------------------- */

/* The kernel's order: higher score, then lower id; id -1 is "none yet". */
static bool better(float av, int a, float bv, int b)
{
    return a >= 0 && (b < 0 || av > bv || (av == bv && a < b));
}

/* One token: gating, top-k of the biased scores, weights in slot order. */
static void route_token(const float *l, const struct fl_cuda_route *r, int32_t *ids, float *wt)
{
    static _Thread_local float prob[4096], score[4096];
    static _Thread_local unsigned char taken[4096];
    const int n = r->n_expert, k = r->k;
    float mx = -INFINITY;
    for (int e = 0; e < n; e++)
        prob[e] = l[e], mx = fmaxf(mx, l[e]), taken[e] = 0;
    if (r->gating == FL_CUDA_GATING_SOFTMAX) {
        double sum = 0.0;
        for (int e = 0; e < n; e++)
            sum += (double)(prob[e] = expf(prob[e] - mx));
        const float inv = (float)(1.0 / sum);
        for (int e = 0; e < n; e++)
            prob[e] *= inv;
    } else if (r->gating == FL_CUDA_GATING_SIGMOID) {
        for (int e = 0; e < n; e++)
            prob[e] = 1.0f / (1.0f + expf(-prob[e]));
    }
    for (int e = 0; e < n; e++)
        score[e] = r->d_sel_bias ? prob[e] + r->d_sel_bias[e] : prob[e];
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < n; e++)
            if (!taken[e] && better(score[e], e, best < 0 ? 0.0f : score[best], best))
                best = e;
        taken[best] = 1;
        ids[j] = best;
        wt[j] = prob[best];
    }
    if (r->gating == FL_CUDA_GATING_SOFTMAX_WEIGHT) {
        float m = -INFINITY;
        double sum = 0.0;
        for (int j = 0; j < k; j++)
            m = fmaxf(m, wt[j]);
        for (int j = 0; j < k; j++)
            sum += (double)(wt[j] = expf(wt[j] - m));
        const float inv = (float)(1.0 / sum);
        for (int j = 0; j < k; j++)
            wt[j] *= inv;
    }
    if (r->norm) {
        double sum = 0.0;
        for (int j = 0; j < k; j++)
            sum += (double)wt[j];
        float sm = (float)sum;
        if (!(sm >= 6.103515625e-5f)) /* F16's smallest normal, as the kernel */
            sm = 6.103515625e-5f;
        for (int j = 0; j < k; j++)
            wt[j] = wt[j] / sm;
    }
    if (r->scale != 0.0f && r->scale != 1.0f)
        for (int j = 0; j < k; j++)
            wt[j] *= r->scale;
}

cudaError_t flc_launch_route(cudaStream_t s, const float *logits, int64_t n_tok,
                             const struct fl_cuda_route *r, int32_t *ids, float *weights)
{
    struct flemu_op op;
    flemu_begin(&op, "route", s);
    flemu_dev(&op, logits, F32(n_tok * r->n_expert), "logits");
    if (r->d_sel_bias)
        flemu_dev(&op, r->d_sel_bias, F32(r->n_expert), "sel_bias");
    flemu_dev(&op, ids, sizeof(int32_t) * (size_t)(n_tok * r->k), "ids");
    flemu_dev(&op, weights, F32(n_tok * r->k), "weights");
    for (int64_t t = 0; op.err == cudaSuccess && t < n_tok; t++)
        route_token(logits + t * r->n_expert, r, ids + t * r->k, weights + t * r->k);
    return flemu_launched(&op);
}

/* --- attention --------------------------------------------------------------------- */

/* One (token, head), as the kernel's block: keys in tiles of NT positions
 * from the window's start, online softmax across tiles, sink last. */
static void attend(const float *q, int qpos, int h, const uint16_t *kc, const uint16_t *vc,
                   const struct fl_cuda_attn *p, float *o)
{
    static _Thread_local float qs[2048], acc[1024], e[NT];
    const float *f16 = flemu_f16_table();
    const int kvh = h / (p->n_head / p->n_head_kv), n_kv = qpos + 1;
    const int lo = p->window > 0 && qpos - p->window + 1 > 0 ? qpos - p->window + 1 : 0;
    const uint16_t *kb = kc + p->k_off + kvh * p->k_stride, *vb = vc + p->v_off + kvh * p->v_stride;
    for (int64_t i = 0; i < p->dk; i++) /* Q rounded to F16, as the CPU */
        qs[i] = f16[fl_f32_to_f16(q[i])];
    memset(acc, 0, F32(p->dv));
    float M = -INFINITY, S = 0.0f;
    for (int base = lo; base < n_kv; base += NT) {
        const int n = n_kv - base < NT ? n_kv - base : NT;
        float bm = -INFINITY, es = 0.0f;
        for (int j = 0; j < n; j++) {
            const uint16_t *kr = kb + (int64_t)(base + j) * p->k_row;
            float dot = 0.0f;
            for (int64_t i = 0; i < p->dk; i++)
                dot += qs[i] * f16[kr[i]];
            e[j] = p->softcap != 0.0f ? p->softcap * tanhf(dot * (p->scale / p->softcap))
                                      : dot * p->scale;
            bm = fmaxf(bm, e[j]);
        }
        const float m_new = fmaxf(M, bm), ms = M == -INFINITY ? 0.0f : expf(M - m_new);
        for (int j = 0; j < n; j++)
            es += (e[j] = expf(e[j] - m_new));
        S = S * ms + es;
        for (int64_t d = 0; d < p->dv; d++) {
            float a = acc[d] * ms;
            for (int j = 0; j < n; j++)
                a += e[j] * f16[vb[(int64_t)(base + j) * p->v_row + d]];
            acc[d] = a;
        }
        M = m_new;
    }
    float ms = 1.0f;
    if (p->d_sinks && p->d_sinks[h] > M) { /* a sink adds to the denominator only */
        ms = expf(M - p->d_sinks[h]);
        S = S * ms + 1.0f;
    } else if (p->d_sinks) {
        S += expf(p->d_sinks[h] - M);
    }
    for (int64_t d = 0; d < p->dv; d++)
        o[d] = acc[d] * ms / S;
}

cudaError_t flc_launch_attention(cudaStream_t s, const float *q, int64_t q_stride, int n_tok,
                                 int pos0, const uint16_t *k, const uint16_t *v,
                                 const struct fl_cuda_attn *p, float *out, int64_t out_stride)
{
    /* cache rows up to the last token's position, up to its last KV head */
    const int64_t last = pos0 + n_tok - 1, kvh = p->n_head_kv - 1;
    struct flemu_op op;
    flemu_begin(&op, "attention", s);
    flemu_dev(&op, q, F32((n_tok - 1) * q_stride + p->n_head * p->dk), "q");
    flemu_dev(&op, k, F16(last * p->k_row + p->k_off + kvh * p->k_stride + p->dk), "k");
    flemu_dev(&op, v, F16(last * p->v_row + p->v_off + kvh * p->v_stride + p->dv), "v");
    if (p->d_sinks)
        flemu_dev(&op, p->d_sinks, F32(p->n_head), "sinks");
    flemu_dev(&op, out, F32((n_tok - 1) * out_stride + p->n_head * p->dv), "out");
    for (int t = 0; op.err == cudaSuccess && t < n_tok; t++)
        for (int h = 0; h < p->n_head; h++)
            attend(q + t * q_stride + h * p->dk, pos0 + t, h, k, v, p,
                   out + t * out_stride + h * p->dv);
    return flemu_launched(&op);
}

/* --- MoE gather / scatter / combine ------------------------------------------------ */

/* Row j of a buffer of rows of width floats: rows[j] of them, or j. The
 * address in unsigned arithmetic: a bad index must reach the check. */
static const float *row_at(const float *base, const int32_t *rows, int64_t j, int64_t width)
{
    const int64_t i = rows ? rows[j] : j;
    return (const float *)((uintptr_t)base + (uintptr_t)(i * width) * 4u);
}

static void widen(struct flemu_span *s, const void *p, size_t bytes)
{
    const uintptr_t lo = (uintptr_t)p;
    s->lo = lo < s->lo ? lo : s->lo;
    s->hi = lo + bytes > s->hi ? lo + bytes : s->hi;
}

cudaError_t flc_launch_copy_rows(cudaStream_t s, float *dst, const float *src, int64_t width,
                                 const int32_t *src_rows, const int32_t *dst_rows, int64_t n)
{
    struct flemu_op op;
    flemu_begin(&op, "copy_rows", s);
    if (src_rows)
        flemu_dev(&op, src_rows, sizeof(int32_t) * (size_t)n, "src_rows");
    if (dst_rows)
        flemu_dev(&op, dst_rows, sizeof(int32_t) * (size_t)n, "dst_rows");
    /* rows by index: each must stay inside the buffer its base points into;
     * then the extent the rows span is opened, not the whole buffer */
    const struct flemu_span ds = flemu_dev_span(&op, dst, "dst");
    const struct flemu_span ss = flemu_dev_span(&op, src, "src");
    struct flemu_span sx = { UINTPTR_MAX, 0 }, dx = { UINTPTR_MAX, 0 };
    for (int64_t j = 0; op.err == cudaSuccess && j < n; j++) {
        const float *from = row_at(src, src_rows, j, width), *to = row_at(dst, dst_rows, j, width);
        if (flemu_within(&op, ss, from, F32(width), "src row") &&
            flemu_within(&op, ds, to, F32(width), "dst row")) {
            widen(&sx, from, F32(width));
            widen(&dx, to, F32(width));
        }
    }
    if (n > 0) {
        flemu_dev(&op, (const void *)sx.lo, sx.hi - sx.lo, "src rows");
        flemu_dev(&op, (const void *)dx.lo, dx.hi - dx.lo, "dst rows");
    }
    for (int64_t j = 0; op.err == cudaSuccess && j < n; j++)
        memcpy((float *)row_at(dst, dst_rows, j, width), row_at(src, src_rows, j, width),
               F32(width));
    return flemu_launched(&op);
}

cudaError_t flc_launch_combine(cudaStream_t s, float *out, const float *y, const float *w,
                               int64_t n_tok, int k, int64_t width)
{
    struct flemu_op op;
    flemu_begin(&op, "moe_combine", s);
    flemu_dev(&op, out, F32(n_tok * width), "out");
    flemu_dev(&op, y, F32(n_tok * k * width), "y");
    flemu_dev(&op, w, F32(n_tok * k), "w");
    for (int64_t t = 0; op.err == cudaSuccess && t < n_tok; t++)
        for (int64_t c = 0; c < width; c++) {
            float acc = 0.0f; /* slot order, as the CPU */
            for (int j = 0; j < k; j++)
                acc += w[t * k + j] * y[(t * k + j) * width + c];
            out[t * width + c] = acc;
        }
    return flemu_launched(&op);
}
