/* cuda-ops.cu: the non-matmul kernels of a forward pass: F16 conversion,
 * RMSNorm, SwiGLU, RoPE, fused MoE routing and attention over the F16 KV
 * cache. Each follows the CPU op in model/ops.h (same formulas, sums in
 * double where the CPU sums in double); written for clarity, not peak
 * speed: one block per row / token / (token, head). */
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "backend/cuda/cuda-impl.h"

namespace {

constexpr int NT = 128; /* threads per block of the row kernels */

template <typename V> __device__ V warp_sum(V v)
{
    for (int off = 16; off > 0; off /= 2)
        v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

__device__ float warp_max(float v)
{
    for (int off = 16; off > 0; off /= 2)
        v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, off));
    return v;
}

/* Block-wide sum / max over NT threads; every thread gets the result. */
template <typename V> __device__ V block_sum(V v)
{
    __shared__ V part[NT / 32];
    v = warp_sum(v);
    __syncthreads(); /* part[] may still be read by a previous call */
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = v;
    __syncthreads();
    V s = 0;
    for (int i = 0; i < NT / 32; i++)
        s += part[i];
    return s;
}

__device__ float block_max(float v)
{
    __shared__ float part[NT / 32];
    v = warp_max(v);
    __syncthreads();
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = v;
    __syncthreads();
    float m = part[0];
    for (int i = 1; i < NT / 32; i++)
        m = fmaxf(m, part[i]);
    return m;
}

__global__ void f32_to_f16_kernel(const float *x, __half *y, int64_t n)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = __float2half_rn(x[i]);
}

__global__ void rmsnorm_kernel(float *y, const float *x, const float *w, int64_t n,
                               int64_t stride, float eps)
{
    const float *xr = x + blockIdx.x * stride;
    float *yr = y + blockIdx.x * stride;
    double sum = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += NT)
        sum += (double)__fmul_rn(xr[i], xr[i]);
    sum = block_sum(sum);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = threadIdx.x; i < n; i += NT)
        yr[i] = w ? __fmul_rn(__fmul_rn(xr[i], scale), w[i]) : __fmul_rn(xr[i], scale);
}

__global__ void swiglu_kernel(float *g, const float *u, int64_t n)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

__global__ void add_kernel(float *y, const float *x, int64_t n)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = __fadd_rn(y[i], x[i]);
}

/* As arch2_swiglu_oai: std::min/std::clamp order, so a NaN gate or up
 * passes through as on the CPU. */
__global__ void swiglu_oai_kernel(float *g, const float *u, int64_t n, float alpha, float limit)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float gi = g[i], ui = u[i];
        const float x = limit < gi ? limit : gi;
        const float y = ui < -limit ? -limit : (limit < ui ? limit : ui);
        g[i] = x / (1.f + expf(alpha * (-x))) * (y + 1.f);
    }
}

__global__ void add_rows_kernel(float *y, const float *b, int64_t n, int64_t n_rows,
                                int64_t stride)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n * n_rows) {
        const int64_t r = i / n, j = i % n;
        y[r * stride + j] = __fadd_rn(y[r * stride + j], b[j]);
    }
}

/* One thread per rotated pair of one head of one row. */
__global__ void rope_kernel(float *x, int64_t n_tok, int64_t stride, int n_head,
                            int64_t head_dim, int n_rot, int neox, const float *cs)
{
    const int half = n_rot / 2;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_tok * n_head * half)
        return;
    const int p = (int)(i % half);
    const int64_t h = (i / half) % n_head, t = i / half / n_head;
    float *v = x + t * stride + h * head_dim;
    const float c = cs[t * n_rot + 2 * p], s = cs[t * n_rot + 2 * p + 1];
    const int a = neox ? p : 2 * p, b = neox ? p + half : 2 * p + 1;
    const float x0 = v[a], x1 = v[b];
    v[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    v[b] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

/* --- routing -------------------------------------------------------------------- */

/* The best (score, id) pair: higher score, then lower id. */
struct pick { float v; int id; };

__device__ bool better(pick a, pick b)
{
    return a.id >= 0 && (b.id < 0 || a.v > b.v || (a.v == b.v && a.id < b.id));
}

__device__ pick block_best(pick p)
{
    __shared__ pick part[NT / 32];
    for (int off = 16; off > 0; off /= 2) {
        pick o;
        o.v = __shfl_down_sync(0xffffffffu, p.v, off);
        o.id = __shfl_down_sync(0xffffffffu, p.id, off);
        if (better(o, p))
            p = o;
    }
    __syncthreads();
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = p;
    __syncthreads();
    pick best = part[0];
    for (int i = 1; i < NT / 32; i++)
        if (better(part[i], best))
            best = part[i];
    return best;
}

/* Shared memory: prob[n], score[n], taken[n]. */
__global__ void route_kernel(const float *logits, int n, int k, int gating, int norm,
                             float scale, const float *sel_bias, int32_t *ids, float *weights)
{
    extern __shared__ float sh[];
    float *prob = sh, *score = sh + n;
    unsigned char *taken = (unsigned char *)(sh + 2 * n);
    __shared__ int sel[64];
    const float *l = logits + (int64_t)blockIdx.x * n;

    float mx = -INFINITY;
    for (int e = threadIdx.x; e < n; e += NT) {
        prob[e] = l[e];
        mx = fmaxf(mx, l[e]);
        taken[e] = 0;
    }
    if (gating == FL_CUDA_GATING_SOFTMAX) {
        mx = block_max(mx);
        double sum = 0.0;
        for (int e = threadIdx.x; e < n; e += NT) {
            prob[e] = expf(prob[e] - mx);
            sum += (double)prob[e];
        }
        const float inv = (float)(1.0 / block_sum(sum));
        for (int e = threadIdx.x; e < n; e += NT)
            prob[e] *= inv;
    } else if (gating == FL_CUDA_GATING_SIGMOID) {
        for (int e = threadIdx.x; e < n; e += NT)
            prob[e] = 1.0f / (1.0f + expf(-prob[e]));
    }
    for (int e = threadIdx.x; e < n; e += NT)
        score[e] = sel_bias ? prob[e] + sel_bias[e] : prob[e];
    __syncthreads();

    for (int j = 0; j < k; j++) {
        pick p = {0.0f, -1};
        for (int e = threadIdx.x; e < n; e += NT) {
            const pick c = {score[e], e};
            if (!taken[e] && better(c, p))
                p = c;
        }
        p = block_best(p);
        if (threadIdx.x == 0) {
            sel[j] = p.id;
            taken[p.id] = 1;
        }
        __syncthreads();
    }
    if (threadIdx.x != 0)
        return;

    /* k values: one thread, in slot order, as the CPU */
    float w[64];
    for (int j = 0; j < k; j++)
        w[j] = prob[sel[j]];
    if (gating == FL_CUDA_GATING_SOFTMAX_WEIGHT) {
        float m = -INFINITY;
        for (int j = 0; j < k; j++)
            m = fmaxf(m, w[j]);
        double sum = 0.0;
        for (int j = 0; j < k; j++) {
            w[j] = expf(w[j] - m);
            sum += (double)w[j];
        }
        const float inv = (float)(1.0 / sum);
        for (int j = 0; j < k; j++)
            w[j] *= inv;
    }
    if (norm) {
        double sum = 0.0;
        for (int j = 0; j < k; j++)
            sum += (double)w[j];
        float s = (float)sum;
        if (!(s >= 6.103515625e-5f)) /* F16's smallest normal, as llama.cpp clamps */
            s = 6.103515625e-5f;
        for (int j = 0; j < k; j++)
            w[j] = w[j] / s;
    }
    if (scale != 0.0f && scale != 1.0f)
        for (int j = 0; j < k; j++)
            w[j] *= scale;
    for (int j = 0; j < k; j++) {
        ids[(int64_t)blockIdx.x * k + j] = sel[j];
        weights[(int64_t)blockIdx.x * k + j] = w[j];
    }
}

/* --- attention ------------------------------------------------------------------ */

/* One block per (token, head): keys in tiles of NT positions (a thread per
 * key), online softmax across tiles; the output accumulator lives in
 * shared memory, dimension d owned by thread d % NT.
 * Shared memory: q[dk], acc[dv], w[NT]. */
__global__ void attention_kernel(const float *q, int64_t q_stride, int pos0, const __half *kc,
                                 const __half *vc, fl_cuda_attn p, float *out,
                                 int64_t out_stride)
{
    extern __shared__ float sh[];
    float *qs = sh, *acc = sh + p.dk, *w = acc + p.dv;
    const int t = blockIdx.x / p.n_head, h = blockIdx.x % p.n_head;
    const int kvh = h / (p.n_head / p.n_head_kv);
    const int qpos = pos0 + t, n_kv = qpos + 1;
    const int lo = p.window > 0 && qpos - p.window + 1 > 0 ? qpos - p.window + 1 : 0;
    const __half *kb = kc + p.k_off + kvh * p.k_stride;
    const __half *vb = vc + p.v_off + kvh * p.v_stride;

    for (int64_t i = threadIdx.x; i < p.dk; i += NT) /* Q rounded to F16, as the CPU */
        qs[i] = __half2float(__float2half_rn(q[t * q_stride + h * p.dk + i]));
    for (int64_t d = threadIdx.x; d < p.dv; d += NT)
        acc[d] = 0.0f;
    __syncthreads();

    float M = -INFINITY, S = 0.0f;
    for (int base = lo; base < n_kv; base += NT) {
        const int pos = base + threadIdx.x, n = min(NT, n_kv - base);
        float s = -INFINITY;
        if (pos < n_kv) {
            const __half *kr = kb + (int64_t)pos * p.k_row;
            float dot = 0.0f;
            for (int64_t i = 0; i < p.dk; i++)
                dot += qs[i] * __half2float(kr[i]);
            s = p.softcap != 0.0f ? p.softcap * tanhf(dot * (p.scale / p.softcap)) : dot * p.scale;
        }
        const float m_new = fmaxf(M, block_max(s));
        const float ms = M == -INFINITY ? 0.0f : expf(M - m_new);
        const float e = pos < n_kv ? expf(s - m_new) : 0.0f;
        w[threadIdx.x] = e;
        S = S * ms + block_sum(e); /* block_sum's barriers publish w[] */
        for (int64_t d = threadIdx.x; d < p.dv; d += NT) {
            float a = acc[d] * ms;
            for (int j = 0; j < n; j++)
                a += w[j] * __half2float(vb[(int64_t)(base + j) * p.v_row + d]);
            acc[d] = a;
        }
        M = m_new;
        __syncthreads(); /* w[] is rewritten by the next tile */
    }
    if (p.d_sinks) { /* a sink adds to the denominator only, after the keys */
        const float sink = p.d_sinks[h];
        float ms = 1.0f;
        if (sink > M) {
            ms = expf(M - sink);
            S = S * ms + 1.0f;
        } else {
            S += expf(sink - M);
        }
        for (int64_t d = threadIdx.x; d < p.dv; d += NT)
            acc[d] *= ms;
    }
    float *o = out + t * out_stride + h * p.dv;
    for (int64_t d = threadIdx.x; d < p.dv; d += NT)
        o[d] = acc[d] / S;
}

/* --- MoE gather / scatter / combine ------------------------------------------- */

/* dst row j = src row src_rows[j] (or j) written to dst row dst_rows[j] (or j). */
__global__ void copy_rows_kernel(float *dst, const float *src, int64_t width,
                                 const int32_t *src_rows, const int32_t *dst_rows, int64_t n)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * width)
        return;
    const int64_t j = i / width, c = i % width;
    const int64_t s = src_rows ? src_rows[j] : j, d = dst_rows ? dst_rows[j] : j;
    dst[d * width + c] = src[s * width + c];
}

/* out[t][c] = sum_j w[t][j] * y[t*k + j][c], j in slot order as the CPU. */
__global__ void combine_kernel(float *out, const float *y, const float *w, int64_t n_tok, int k,
                               int64_t width)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_tok * width)
        return;
    const int64_t t = i / width, c = i % width;
    float acc = 0.0f;
    for (int j = 0; j < k; j++)
        acc += w[t * k + j] * y[(t * k + j) * width + c];
    out[t * width + c] = acc;
}

/* Gated DeltaNet (backend/cpu/recurrent.c's formulas and orders) ------------- */

__device__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void sigmoid_gate_kernel(float *y, const float *g, int64_t width, int64_t n_rows,
                                    int per_row)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < width * n_rows)
        y[i] = __fmul_rn(y[i], sigmoidf_(per_row ? g[i / width] : g[i]));
}

/* One thread per channel of one sequence's span: the window is the kept
 * k-1 inputs (zeros when reset), then the span's rows. */
__global__ void ssm_conv_kernel(const float *x, const float *w, float *state, float *out,
                                int64_t n_tok, int64_t width, int k, int reset)
{
    const int64_t ch = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= width)
        return;
    float *st = state + ch * (k - 1);
    const float *kw = w + ch * k;
    float keep[16];
    for (int i = 0; i < k - 1; i++)
        keep[i] = reset ? 0.0f : st[i];
    for (int64_t t = 0; t < n_tok; t++) {
        float sum = 0.0f;
        for (int i = 0; i < k; i++) {
            const int64_t at = t + i;
            const float v = at < k - 1 ? keep[at] : x[(at - (k - 1)) * width + ch];
            sum = __fadd_rn(sum, __fmul_rn(v, kw[i]));
        }
        out[t * width + ch] = sum / (1.0f + expf(-sum));
    }
    for (int i = 0; i < k - 1; i++) {
        const int64_t at = n_tok + i;
        st[i] = at < k - 1 ? keep[at] : x[(at - (k - 1)) * width + ch];
    }
}

__device__ float row_dot_f(const float *a, const float *b, int64_t n)
{
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++)
        s = __fadd_rn(s, __fmul_rn(a[i], b[i]));
    return s;
}

/* One block per value head, thread r owning row r of the head's state
 * (stored transposed as on the CPU: row r = column r of S): rows never
 * read each other, so each is the CPU's arithmetic in the CPU's order.
 * Thread 0 forms the L2 norms (in double), decay and beta per token. */
__global__ void delta_net_kernel(const float *qkv, const float *alpha, const float *beta,
                                 const float *dt_bias, const float *a, float *state, float *out,
                                 int64_t n_tok, int n_k_head, int n_v_head, int d, float eps,
                                 int reset, int k_grouped)
{
    extern __shared__ float sh[]; /* q[d], k[d], then decay, beta */
    float *q = sh, *kk = sh + d, *gb = sh + 2 * d;
    const int h = blockIdx.x, r = threadIdx.x;
    const int kh = k_grouped ? h / (n_v_head / n_k_head) : h % n_k_head;
    const int64_t width = 2 * (int64_t)n_k_head * d + (int64_t)n_v_head * d;
    float *M = state + ((int64_t)h * d + r) * d;
    if (reset)
        for (int i = 0; i < d; i++)
            M[i] = 0.0f;
    for (int64_t t = 0; t < n_tok; t++) {
        const float *row = qkv + t * width;
        if (r == 0) {
            const float *qr = row + (int64_t)kh * d, *kr = row + (int64_t)(n_k_head + kh) * d;
            double sq = 0.0, sk = 0.0;
            for (int i = 0; i < d; i++) {
                sq += (double)__fmul_rn(qr[i], qr[i]);
                sk += (double)__fmul_rn(kr[i], kr[i]);
            }
            const float cq = 1.0f / fmaxf(sqrtf((float)sq), eps);
            const float ck = 1.0f / fmaxf(sqrtf((float)sk), eps);
            for (int i = 0; i < d; i++) {
                q[i] = __fmul_rn(qr[i], cq);
                kk[i] = __fmul_rn(kr[i], ck);
            }
            const float z = __fadd_rn(alpha[t * n_v_head + h], dt_bias[h]);
            const float sp = z > 20.0f ? z : logf(1.0f + expf(z));
            gb[0] = expf(__fmul_rn(sp, a[h]));
            gb[1] = sigmoidf_(beta[t * n_v_head + h]);
        }
        __syncthreads();
        for (int i = 0; i < d; i++)
            M[i] = __fmul_rn(M[i], gb[0]);
        const float v = row[2 * (int64_t)n_k_head * d + (int64_t)h * d + r];
        const float delta = __fmul_rn(__fsub_rn(v, row_dot_f(M, kk, d)), gb[1]);
        for (int i = 0; i < d; i++)
            M[i] = __fadd_rn(M[i], __fmul_rn(kk[i], delta));
        out[t * n_v_head * d + (int64_t)h * d + r] =
            __fmul_rn(row_dot_f(M, q, d), 1.0f / sqrtf((float)d));
        __syncthreads(); /* q, k and gb are rewritten for the next token */
    }
}

unsigned blocks(int64_t n, int per) { return (unsigned)((n + per - 1) / per); }

} /* namespace */

extern "C" cudaError_t flc_launch_sigmoid_gate(cudaStream_t s, float *y, const float *g,
                                               int64_t width, int64_t n_rows, int per_row)
{
    sigmoid_gate_kernel<<<blocks(width * n_rows, 256), 256, 0, s>>>(y, g, width, n_rows, per_row);
    return cudaGetLastError();
}

extern "C" cudaError_t flc_launch_ssm_conv(cudaStream_t s, const float *x, const float *w,
                                           float *state, float *out, int64_t n_tok,
                                           int64_t width, int k, int reset)
{
    ssm_conv_kernel<<<blocks(width, 128), 128, 0, s>>>(x, w, state, out, n_tok, width, k, reset);
    return cudaGetLastError();
}

extern "C" cudaError_t flc_launch_delta_net(cudaStream_t s, const struct flc_delta_net *p,
                                            const float *qkv, const float *alpha,
                                            const float *beta, float *state, float *out,
                                            int64_t n_tok, int reset)
{
    delta_net_kernel<<<(unsigned)p->n_v_head, (unsigned)p->d, (size_t)(2 * p->d + 2) * sizeof(float),
                       s>>>(qkv, alpha, beta, p->dt_bias, p->a, state, out, n_tok, p->n_k_head,
                            p->n_v_head, p->d, p->eps, reset, p->k_grouped);
    return cudaGetLastError();
}

extern "C" cudaError_t flc_launch_f32_to_f16(cudaStream_t s, const float *x, uint16_t *y, int64_t n)
{
    f32_to_f16_kernel<<<blocks(n, 256), 256, 0, s>>>(x, (__half *)y, n);
    return cudaGetLastError();
}

extern "C" cudaError_t flc_launch_rmsnorm(cudaStream_t s, float *y, const float *x,
                                          const float *w, int64_t n, int64_t n_rows,
                                          int64_t stride, float eps)
{
    rmsnorm_kernel<<<(unsigned)n_rows, NT, 0, s>>>(y, x, w, n, stride, eps);
    return cudaGetLastError();
}

extern "C" cudaError_t flc_launch_swiglu(cudaStream_t s, float *g, const float *u, int64_t n)
{
    swiglu_kernel<<<blocks(n, 256), 256, 0, s>>>(g, u, n);
    return cudaGetLastError();
}

extern "C" cudaError_t flc_launch_add(cudaStream_t s, float *y, const float *x, int64_t n)
{
    add_kernel<<<blocks(n, 256), 256, 0, s>>>(y, x, n);
    return cudaGetLastError();
}

extern "C" cudaError_t flc_launch_swiglu_oai(cudaStream_t s, float *g, const float *u,
                                             int64_t n, float alpha, float limit)
{
    swiglu_oai_kernel<<<blocks(n, 256), 256, 0, s>>>(g, u, n, alpha, limit);
    return cudaGetLastError();
}

extern "C" cudaError_t flc_launch_add_rows(cudaStream_t s, float *y, const float *b, int64_t n,
                                           int64_t n_rows, int64_t stride)
{
    add_rows_kernel<<<blocks(n * n_rows, 256), 256, 0, s>>>(y, b, n, n_rows, stride);
    return cudaGetLastError();
}

extern "C" cudaError_t flc_launch_rope(cudaStream_t s, float *x, int64_t n_tok, int64_t stride,
                                       int n_head, int64_t head_dim, int n_rot, int neox,
                                       const float *cs)
{
    rope_kernel<<<blocks(n_tok * n_head * (n_rot / 2), 256), 256, 0, s>>>(
        x, n_tok, stride, n_head, head_dim, n_rot, neox, cs);
    return cudaGetLastError();
}

extern "C" cudaError_t flc_launch_route(cudaStream_t s, const float *logits, int64_t n_tok,
                                        const struct fl_cuda_route *r, int32_t *ids,
                                        float *weights)
{
    const size_t shm = (size_t)r->n_expert * (2 * sizeof(float) + 1);
    route_kernel<<<(unsigned)n_tok, NT, shm, s>>>(logits, r->n_expert, r->k, (int)r->gating,
                                                   r->norm, r->scale, r->d_sel_bias, ids, weights);
    return cudaGetLastError();
}

extern "C" cudaError_t flc_launch_attention(cudaStream_t s, const float *q, int64_t q_stride,
                                            int n_tok, int pos0, const uint16_t *k,
                                            const uint16_t *v, const struct fl_cuda_attn *p,
                                            float *out, int64_t out_stride)
{
    const size_t shm = (size_t)(p->dk + p->dv + NT) * sizeof(float);
    if (shm > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(attention_kernel,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shm);
        if (e != cudaSuccess)
            return e;
    }
    attention_kernel<<<(unsigned)(n_tok * p->n_head), NT, shm, s>>>(
        q, q_stride, pos0, (const __half *)k, (const __half *)v, *p, out, out_stride);
    return cudaGetLastError();
}

extern "C" cudaError_t flc_launch_copy_rows(cudaStream_t s, float *dst, const float *src,
                                            int64_t width, const int32_t *src_rows,
                                            const int32_t *dst_rows, int64_t n)
{
    copy_rows_kernel<<<blocks(n * width, 256), 256, 0, s>>>(dst, src, width, src_rows, dst_rows, n);
    return cudaGetLastError();
}

extern "C" cudaError_t flc_launch_combine(cudaStream_t s, float *out, const float *y,
                                          const float *w, int64_t n_tok, int k, int64_t width)
{
    combine_kernel<<<blocks(n_tok * width, 256), 256, 0, s>>>(out, y, w, n_tok, k, width);
    return cudaGetLastError();
}
