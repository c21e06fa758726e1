/* cuda-quant.cu: quantized weights on the GPU: matrix-vector products and
 * dequantization to F16.
 *
 * Every supported type is read in 32-value units (a Q8_0/MXFP4 block, a
 * 32-value slice of an F16/F32 row, one of the eight 32-value sub-blocks of
 * a K-quant super-block), decoded into registers by one function per type
 * that both kernels share. The decoders repeat the CPU's float operations
 * one by one with explicit round-to-nearest intrinsics, so no fused
 * multiply-add creeps in and a dequantized value is bit-identical to
 * gguf/tensor-types.h's to_float. Simple on purpose: one warp per output
 * row, each lane a unit at a time. */
#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

#include "backend/cuda/cuda-impl.h"
/* tensor-types.h is C; its layout checks use C's spelling of static_assert */
#define _Static_assert static_assert
#include "gguf/tensor-types.h"
#undef _Static_assert

namespace {

constexpr int UNIT = 32;

/* The decoders are host+device code: on the device they use explicit
 * round-to-nearest intrinsics (no fused multiply-add); on the host, where
 * test-cuda-decode checks them against to_float without a GPU, plain float
 * operations compiled with -ffp-contract=off. */
#define HD __host__ __device__ __forceinline__

HD float mul_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

HD float sub_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

HD float bits_f32(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
#endif
}

HD float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }

HD uint16_t ld16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8)); /* blocks are byte-aligned (MXFP4: 17 bytes) */
}

/* v = dl * q - ml, two roundings, as kblock_to_float. */
HD float kval(float dl, int q, float ml) { return sub_rn(mul_rn(dl, (float)q), ml); }

template <int T> struct unit_decoder;

template <> struct unit_decoder<FL_TYPE_F32> {
    static constexpr int per_block = 1, bytes = 4 * UNIT;
    HD static void run(const uint8_t *b, int, float v[UNIT])
    {
        const float *f = (const float *)b;
        for (int l = 0; l < UNIT; l++)
            v[l] = f[l];
    }
};

template <> struct unit_decoder<FL_TYPE_F16> {
    static constexpr int per_block = 1, bytes = 2 * UNIT;
    HD static void run(const uint8_t *b, int, float v[UNIT])
    {
        for (int l = 0; l < UNIT; l++)
            v[l] = h2f(ld16(b + 2 * l));
    }
};

template <> struct unit_decoder<FL_TYPE_Q8_0> {
    static constexpr int per_block = 1, bytes = sizeof(fl_block_q8_0);
    HD static void run(const uint8_t *b, int, float v[UNIT])
    {
        const float d = h2f(ld16(b));
        for (int l = 0; l < UNIT; l++)
            v[l] = mul_rn((float)(int8_t)b[2 + l], d);
    }
};

template <> struct unit_decoder<FL_TYPE_MXFP4> {
    static constexpr int per_block = 1, bytes = sizeof(fl_block_mxfp4);
    HD static void run(const uint8_t *b, int, float v[UNIT])
    {
        /* E2M1 values doubled, scale 2^(e-128) (see fl_e8m0_half_to_f32) */
        const int8_t lut[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
        const uint32_t e = b[0];
        const float d = bits_f32(e < 2 ? 0x00200000u << e : (e - 1) << 23);
        for (int l = 0; l < 16; l++) {
            v[l] = mul_rn(d, (float)lut[b[1 + l] & 0xf]);
            v[l + 16] = mul_rn(d, (float)lut[b[1 + l] >> 4]);
        }
    }
};

HD void scale_min_k4(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K / Q5_K sub-block s: values 32s..32s+31 are the low (s even) or high
 * nibbles of qs[32*(s/2) + l]; Q5_K adds bit s of qh[l] as the fifth bit. */
template <bool Q5>
HD void k4_unit(const uint8_t *b, int s, float v[UNIT])
{
    const uint8_t *scales = b + 4, *qh = b + 16, *qs = b + (Q5 ? 48 : 16);
    int sc, m;
    scale_min_k4(s, scales, &sc, &m);
    const float dl = mul_rn(h2f(ld16(b)), (float)sc);
    const float ml = mul_rn(h2f(ld16(b + 2)), (float)m);
    const uint8_t *q = qs + 32 * (s / 2);
    for (int l = 0; l < UNIT; l++) {
        int x = (s & 1) ? q[l] >> 4 : q[l] & 0xf;
        if (Q5)
            x += ((qh[l] >> s) & 1) << 4;
        v[l] = kval(dl, x, ml);
    }
}

template <> struct unit_decoder<FL_TYPE_Q4_K> {
    static constexpr int per_block = 8, bytes = sizeof(fl_block_q4_K);
    HD static void run(const uint8_t *b, int s, float v[UNIT]) { k4_unit<false>(b, s, v); }
};

template <> struct unit_decoder<FL_TYPE_Q5_K> {
    static constexpr int per_block = 8, bytes = sizeof(fl_block_q5_K);
    HD static void run(const uint8_t *b, int s, float v[UNIT]) { k4_unit<true>(b, s, v); }
};

/* Q6_K sub-block s = 4n + k: value 128n + 32k + l has its low nibble in
 * ql[64n + l + 32(k&1)] (high nibble when k >= 2) and bits 2k..2k+1 of
 * qh[32n + l] on top; scale of 16-value group 8n + 2k + l/16. */
template <> struct unit_decoder<FL_TYPE_Q6_K> {
    static constexpr int per_block = 8, bytes = sizeof(fl_block_q6_K);
    HD static void run(const uint8_t *b, int s, float v[UNIT])
    {
        const int n = s / 4, k = s % 4;
        const uint8_t *ql = b + 64 * n + 32 * (k & 1), *qh = b + 128 + 32 * n;
        const int8_t *sc = (const int8_t *)(b + 192) + 8 * n + 2 * k;
        const float d = h2f(ld16(b + 208));
        const float dl0 = mul_rn(d, (float)sc[0]), dl1 = mul_rn(d, (float)sc[1]);
        for (int l = 0; l < UNIT; l++) {
            const int lo = k < 2 ? ql[l] & 0xf : ql[l] >> 4;
            const int q = (lo | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
            v[l] = kval(l < 16 ? dl0 : dl1, q, 0.0f);
        }
    }
};

/* Unit u of a row (u < n_in / 32). */
template <int T>
HD void row_unit(const uint8_t *row, int64_t u, float v[UNIT])
{
    using D = unit_decoder<T>;
    D::run(row + (u / D::per_block) * D::bytes, (int)(u % D::per_block), v);
}

constexpr int WARPS = 4; /* rows per block of the matvec kernel */

/* One row's dot with xt, by a whole warp; lane 0 gets the sum. Both
 * matvec kernels use it, so a grouped product is bit-identical to the
 * single one. */
template <int T>
__device__ float row_dot(const uint8_t *row, const float *xt, int64_t n_in, int lane)
{
    float v[UNIT], acc = 0.0f;
    for (int64_t u = lane; u < n_in / UNIT; u += 32) {
        row_unit<T>(row, u, v);
        for (int l = 0; l < UNIT; l++)
            acc += v[l] * xt[u * UNIT + l];
    }
    for (int off = 16; off > 0; off /= 2)
        acc += __shfl_down_sync(0xffffffffu, acc, off);
    return acc;
}

template <int T>
__global__ void matvec_kernel(const uint8_t *w, size_t row_bytes, int64_t n_in, int64_t n_out,
                              const float *x, float *y)
{
    const int lane = threadIdx.x % 32;
    const int64_t o = (int64_t)blockIdx.x * WARPS + threadIdx.x / 32;
    const int64_t t = blockIdx.y;
    if (o >= n_out)
        return;
    const float acc = row_dot<T>(w + o * row_bytes, x + t * n_in, n_in, lane);
    if (lane == 0)
        y[t * n_out + o] = acc;
}

/* Product j of a group (blockIdx.y): its own matrix, input and output. */
template <int T>
__global__ void matvec_group_kernel(flc_mv_group g, size_t row_bytes, int64_t n_in, int64_t n_out)
{
    const int lane = threadIdx.x % 32;
    const int64_t o = (int64_t)blockIdx.x * WARPS + threadIdx.x / 32;
    const int j = blockIdx.y;
    if (o >= n_out)
        return;
    const float acc = row_dot<T>((const uint8_t *)g.w[j] + o * row_bytes, g.x[j], n_in, lane);
    if (lane == 0)
        g.y[j][o] = acc;
}

/* One thread per unit of the [n_rows][n_in] matrix. */
template <int T>
__global__ void dequant_kernel(const uint8_t *w, size_t row_bytes, int64_t n_in, int64_t n_rows,
                               __half *dst)
{
    const int64_t units = n_in / UNIT;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= units * n_rows)
        return;
    const int64_t r = i / units, u = i % units;
    float v[UNIT];
    row_unit<T>(w + r * row_bytes, u, v);
    __half *out = dst + r * n_in + u * UNIT;
    for (int l = 0; l < UNIT; l++)
        out[l] = __float2half_rn(v[l]);
}

template <int T>
cudaError_t launch_matvec(cudaStream_t s, const void *w, int64_t n_in, int64_t n_out,
                          const float *x, int64_t n_tok, float *y)
{
    const size_t row_bytes = (size_t)(n_in / UNIT / unit_decoder<T>::per_block) * unit_decoder<T>::bytes;
    dim3 grid((unsigned)((n_out + WARPS - 1) / WARPS), (unsigned)n_tok);
    matvec_kernel<T><<<grid, 32 * WARPS, 0, s>>>((const uint8_t *)w, row_bytes, n_in, n_out, x, y);
    return cudaGetLastError();
}

template <int T>
cudaError_t launch_matvec_group(cudaStream_t s, const flc_mv_group *g, int64_t n_in, int64_t n_out)
{
    const size_t row_bytes = (size_t)(n_in / UNIT / unit_decoder<T>::per_block) * unit_decoder<T>::bytes;
    dim3 grid((unsigned)((n_out + WARPS - 1) / WARPS), (unsigned)g->n);
    matvec_group_kernel<T><<<grid, 32 * WARPS, 0, s>>>(*g, row_bytes, n_in, n_out);
    return cudaGetLastError();
}

template <int T>
cudaError_t launch_dequant(cudaStream_t s, const void *w, int64_t n_in, int64_t n_rows,
                           uint16_t *dst)
{
    const size_t row_bytes = (size_t)(n_in / UNIT / unit_decoder<T>::per_block) * unit_decoder<T>::bytes;
    const int64_t n = n_in / UNIT * n_rows;
    dequant_kernel<T><<<(unsigned)((n + 127) / 128), 128, 0, s>>>((const uint8_t *)w, row_bytes,
                                                                n_in, n_rows, (__half *)dst);
    return cudaGetLastError();
}

} /* namespace */

/* Host run of the decoders over one row (test-cuda-decode). */
template <int T> void host_row(const void *w, int64_t n_in, float *out)
{
    for (int64_t u = 0; u < n_in / UNIT; u++)
        row_unit<T>((const uint8_t *)w, u, out + u * UNIT);
}

#define FLC_TYPES(X) X(FL_TYPE_F32) X(FL_TYPE_F16) X(FL_TYPE_Q8_0) X(FL_TYPE_MXFP4) \
                     X(FL_TYPE_Q4_K) X(FL_TYPE_Q5_K) X(FL_TYPE_Q6_K)

extern "C" cudaError_t flc_launch_matvec(cudaStream_t s, const void *w, uint32_t type,
                                         int64_t n_in, int64_t n_out, const float *x,
                                         int64_t n_tok, float *y)
{
    switch (type) {
#define CASE(t) case t: return launch_matvec<t>(s, w, n_in, n_out, x, n_tok, y);
    FLC_TYPES(CASE)
#undef CASE
    default: return cudaErrorInvalidValue;
    }
}

extern "C" cudaError_t flc_launch_matvec_group(cudaStream_t s, const flc_mv_group *g,
                                               uint32_t type, int64_t n_in, int64_t n_out)
{
    switch (type) {
#define CASE(t) case t: return launch_matvec_group<t>(s, g, n_in, n_out);
    FLC_TYPES(CASE)
#undef CASE
    default: return cudaErrorInvalidValue;
    }
}

extern "C" cudaError_t flc_launch_dequant_f16(cudaStream_t s, const void *w, uint32_t type,
                                              int64_t n_in, int64_t n_rows, uint16_t *dst)
{
    switch (type) {
#define CASE(t) case t: return launch_dequant<t>(s, w, n_in, n_rows, dst);
    FLC_TYPES(CASE)
#undef CASE
    default: return cudaErrorInvalidValue;
    }
}

extern "C" int flc_host_decode_row(const void *w, uint32_t type, int64_t n_in, float *out)
{
    switch (type) {
#define CASE(t) case t: host_row<t>(w, n_in, out); return 0;
    FLC_TYPES(CASE)
#undef CASE
    default: return -1;
    }
}
