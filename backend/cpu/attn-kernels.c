/* attn-kernels.c: the attention kernels of each CPU level (installed into
 * the kernel table by backend/cpu/dispatch.c, used by attention.c): a
 * function per level with its own target.
 *
 * As in the matmul kernels, every multiply-add is written out (this file is
 * compiled with -ffp-contract=off): a fused one is an intrinsic or fmaf, so
 * the bits are the source's whatever the compiler's optimisation level (a
 * release and a sanitizer build agree). The F16 steps use F16C/FMA where
 * the CPU has them; the scalar versions give the same bits (conversions and
 * FMAs are exact operations). */
#include <math.h>
#include <stdint.h>

#include "backend/cpu/cpu-impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* --- F16 helpers: scalar and F16C/FMA versions with identical results --------- */

/* ggml_vec_dot_f16 as its AVX-512 build sums: 64-value steps into four
 * 16-lane FMA accumulators reduced pairwise (as _mm512_reduce_add_ps), then
 * the remaining values as float products added in double. Products of two
 * F16 values are exact in float, so the double tail does not depend on the
 * order it is summed in. */
static float dot_scalar(const fl_f16 *x, const fl_f16 *y, int64_t n)
{
    const int64_t np = n & ~(int64_t)63;
    double sum = 0.0;
    if (np) {
        float acc[4][16] = { { 0 } };
        for (int64_t i = 0; i < np; i += 64)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 16; l++)
                    acc[j][l] = fmaf(fl_f16_to_f32(x[i + j * 16 + l]),
                                     fl_f16_to_f32(y[i + j * 16 + l]), acc[j][l]);
        float v[16], h8[8], h4[4];
        for (int l = 0; l < 16; l++)
            v[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
        for (int l = 0; l < 8; l++)
            h8[l] = v[l + 8] + v[l];
        for (int l = 0; l < 4; l++)
            h4[l] = h8[l + 4] + h8[l];
        sum = (double)((h4[0] + h4[2]) + (h4[1] + h4[3]));
    }
    for (int64_t i = np; i < n; i++)
        sum += (double)(fl_f16_to_f32(x[i]) * fl_f16_to_f32(y[i]));
    return (float)sum;
}

static void mad_scalar(fl_f16 *acc, const fl_f16 *v, float s, int64_t n)
{
    for (int64_t d = 0; d < n; d++)
        acc[d] = fl_f32_to_f16(fmaf(fl_f16_to_f32(v[d]), s, fl_f16_to_f32(acc[d])));
}

static void scale_scalar(fl_f16 *acc, float s, int64_t n)
{
    for (int64_t d = 0; d < n; d++)
        acc[d] = fl_f32_to_f16(fl_f16_to_f32(acc[d]) * s);
}

static void to_f32_scalar(const fl_f16 *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = fl_f16_to_f32(x[i]);
}

/* The F32 accumulator of a quantized V (ggml_vec_mad_f32, ggml_vec_scale_f32):
 * one fused multiply-add or one product per value, so any width agrees;
 * each level compiles the same loops for its own vectors. */
#define F32_STEPS(sfx, TARGET)                                                             \
    TARGET static void mad_f32_##sfx(float *restrict acc, const float *restrict v, float s, \
                                     int64_t n)                                            \
    {                                                                                      \
        for (int64_t d = 0; d < n; d++)                                                    \
            acc[d] = fmaf(v[d], s, acc[d]);                                                \
    }                                                                                      \
    TARGET static void scale_f32_##sfx(float *acc, float s, int64_t n)                     \
    {                                                                                      \
        for (int64_t d = 0; d < n; d++)                                                    \
            acc[d] = acc[d] * s;                                                           \
    }

F32_STEPS(scalar, )
#if defined(__x86_64__)
F32_STEPS(avx2, __attribute__((target("avx2,fma"))))
F32_STEPS(avx512, __attribute__((target("avx512f,fma"))))
#endif

#if defined(__x86_64__)
#define F16C_TARGET __attribute__((target("avx2,fma,f16c")))

F16C_TARGET static __m256 load8(const fl_f16 *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

F16C_TARGET static float dot_f16c(const fl_f16 *x, const fl_f16 *y, int64_t n)
{
    const int64_t np = n & ~(int64_t)63;
    double sum = 0.0;
    if (np) {
        __m256 acc[4][2];
        for (int j = 0; j < 4; j++)
            acc[j][0] = acc[j][1] = _mm256_setzero_ps();
        for (int64_t i = 0; i < np; i += 64)
            for (int j = 0; j < 4; j++)
                for (int hh = 0; hh < 2; hh++) {
                    const int64_t at = i + j * 16 + hh * 8;
                    acc[j][hh] = _mm256_fmadd_ps(load8(x + at), load8(y + at), acc[j][hh]);
                }
        float v[16], h8[8], h4[4];
        for (int hh = 0; hh < 2; hh++)
            _mm256_storeu_ps(v + 8 * hh, _mm256_add_ps(_mm256_add_ps(acc[0][hh], acc[2][hh]),
                                                       _mm256_add_ps(acc[1][hh], acc[3][hh])));
        for (int l = 0; l < 8; l++)
            h8[l] = v[l + 8] + v[l];
        for (int l = 0; l < 4; l++)
            h4[l] = h8[l + 4] + h8[l];
        sum = (double)((h4[0] + h4[2]) + (h4[1] + h4[3]));
    }
    int64_t i = np;
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (; i + 8 <= n; i += 8) {
        const __m256 p = _mm256_mul_ps(load8(x + i), load8(y + i)); /* exact */
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
    }
    double t[4];
    _mm256_storeu_pd(t, _mm256_add_pd(s0, s1));
    sum += (t[0] + t[1]) + (t[2] + t[3]);
    for (; i < n; i++)
        sum += (double)(fl_f16_to_f32(x[i]) * fl_f16_to_f32(y[i]));
    return (float)sum;
}

F16C_TARGET static void mad_f16c(fl_f16 *acc, const fl_f16 *v, float s, int64_t n)
{
    const __m256 vs = _mm256_set1_ps(s);
    int64_t d = 0;
    for (; d + 8 <= n; d += 8) {
        const __m256 r = _mm256_fmadd_ps(load8(v + d), vs, load8(acc + d));
        _mm_storeu_si128((__m128i *)(acc + d), _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));
    }
    mad_scalar(acc + d, v + d, s, n - d);
}

F16C_TARGET static void scale_f16c(fl_f16 *acc, float s, int64_t n)
{
    const __m256 vs = _mm256_set1_ps(s);
    int64_t d = 0;
    for (; d + 8 <= n; d += 8) {
        const __m256 r = _mm256_mul_ps(load8(acc + d), vs);
        _mm_storeu_si128((__m128i *)(acc + d), _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));
    }
    scale_scalar(acc + d, s, n - d);
}

/* Q8_0 rows to F32: d * q per value (one exact conversion and one product,
 * as the types module's to_float). */
F16C_TARGET static void q8_0_to_f32_avx2(const void *src, float *y, int64_t n)
{
    const struct fl_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const __m256 d = _mm256_set1_ps(fl_f16_to_f32(b[i].d));
        for (int j = 0; j < 32; j += 8) {
            const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b[i].qs + j)));
            _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
        }
    }
}

F16C_TARGET static void to_f32_f16c(const fl_f16 *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, load8(x + i));
    to_f32_scalar(x + i, y + i, n - i);
}
#endif

/* s[i] = sum_d q[d] * kt[d][i] for n keys (kt rows ld apart): blocks of
 * keys with their sums held in registers over all d. */
static void key_scores_scalar(float *s, const float *q, const float *kt, int64_t ld, int64_t dk,
                              int n)
{
    for (int i = 0; i < n; i++) {
        float acc = 0.0f;
        for (int64_t d = 0; d < dk; d++)
            acc += q[d] * kt[d * ld + i];
        s[i] = acc;
    }
}

#if defined(__x86_64__)
__attribute__((target("avx512f,fma")))
static void key_scores_avx512(float *s, const float *q, const float *kt, int64_t ld, int64_t dk,
                              int n)
{
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        for (int64_t d = 0; d < dk; d++) {
            const __m512 qd = _mm512_set1_ps(q[d]);
            a0 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(kt + d * ld + i), a0);
            a1 = _mm512_fmadd_ps(qd, _mm512_loadu_ps(kt + d * ld + i + 16), a1);
        }
        _mm512_storeu_ps(s + i, a0);
        _mm512_storeu_ps(s + i + 16, a1);
    }
    for (; i + 16 <= n; i += 16) {
        __m512 a0 = _mm512_setzero_ps();
        for (int64_t d = 0; d < dk; d++)
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(q[d]), _mm512_loadu_ps(kt + d * ld + i), a0);
        _mm512_storeu_ps(s + i, a0);
    }
    key_scores_scalar(s + i, q, kt + i, ld, dk, n - i);
}

__attribute__((target("avx2,fma")))
static void key_scores_avx2(float *s, const float *q, const float *kt, int64_t ld, int64_t dk,
                            int n)
{
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        for (int64_t d = 0; d < dk; d++) {
            const __m256 qd = _mm256_set1_ps(q[d]);
            a0 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(kt + d * ld + i), a0);
            a1 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(kt + d * ld + i + 8), a1);
        }
        _mm256_storeu_ps(s + i, a0);
        _mm256_storeu_ps(s + i + 8, a1);
    }
    key_scores_scalar(s + i, q, kt + i, ld, dk, n - i);
}
#endif

/* s[i] = exp(s[i] - M) for s[i] <= M, returning the sum. A branch-free
 * exp (2^k by exponent bits times a degree-6 polynomial of 2^f, relative
 * error ~2e-7) so it runs 8 or 16 wide; the F32 kernel is not the one the
 * references were made with, so only accuracy matters here. */
static inline float exp2_poly(float f)
{
    float p = 1.5403530393381606e-4f;
    p = p * f + 1.3333558146428443e-3f;
    p = p * f + 9.6181291076284772e-3f;
    p = p * f + 5.5504108664821580e-2f;
    p = p * f + 2.4022650695910071e-1f;
    p = p * f + 6.9314718055994531e-1f;
    return p * f + 1.0f;
}

/* s[i] *= scale, returning the largest (-INFINITY for n = 0); a NaN is
 * never the maximum, as in `M = s > M ? s : M`. The products are the same
 * at every level and the maximum is a value, not a sum, so any order of
 * comparisons gives the same M. */
static float scale_max_scalar(float *s, int n, float scale)
{
    float M = -INFINITY;
    for (int i = 0; i < n; i++) {
        s[i] *= scale;
        M = s[i] > M ? s[i] : M;
    }
    return M;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) static float scale_max_avx2(float *s, int n, float scale)
{
    const __m256 sc = _mm256_set1_ps(scale);
    __m256 m = _mm256_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + i), sc);
        _mm256_storeu_ps(s + i, x);
        m = _mm256_max_ps(x, m); /* x > m ? x : m: m when x is NaN */
    }
    float part[8];
    _mm256_storeu_ps(part, m);
    float M = scale_max_scalar(s + i, n - i, scale);
    for (int l = 0; l < 8; l++)
        M = part[l] > M ? part[l] : M;
    return M;
}
#endif

static float exp_shifted_scalar(float *s, int n, float M)
{
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        const float x = s[i] - M < -87.0f ? -87.0f : s[i] - M;
        const float t = x * 1.44269504088896341f;
        const int k = -(int)(0.5f - t); /* round(t) for t <= 0 */
        union { float f; int32_t i; } u = { .f = exp2_poly(t - (float)k) };
        u.i += k * (1 << 23);
        s[i] = u.f;
        sum += u.f;
    }
    return sum;
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) static float exp_shifted_avx2(float *s, int n, float M)
{
    const __m256 vm = _mm256_set1_ps(M), lo = _mm256_set1_ps(-87.0f);
    const __m256 l2e = _mm256_set1_ps(1.44269504088896341f);
    static const float c[7] = { 1.5403530393381606e-4f, 1.3333558146428443e-3f,
                                9.6181291076284772e-3f, 5.5504108664821580e-2f,
                                2.4022650695910071e-1f, 6.9314718055994531e-1f, 1.0f };
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_max_ps(_mm256_sub_ps(_mm256_loadu_ps(s + i), vm), lo);
        const __m256 t = _mm256_mul_ps(x, l2e);
        const __m256 kf = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m256 f = _mm256_sub_ps(t, kf);
        __m256 p = _mm256_set1_ps(c[0]);
        for (int j = 1; j < 7; j++)
            p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(c[j]));
        const __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(kf), 23);
        const __m256 r = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
        _mm256_storeu_ps(s + i, r);
        acc = _mm256_add_ps(acc, r);
    }
    float part[8];
    _mm256_storeu_ps(part, acc);
    float sum = exp_shifted_scalar(s + i, n - i, M);
    for (int l = 0; l < 8; l++)
        sum += part[l];
    return sum;
}
#endif

/* acc[d] = sum_i w[i] * v[i][d], each term added in order i = 0..n-1:
 * with a fused multiply-add where the level has one (avx512), a product and
 * a sum elsewhere. Common head sizes get a copy with the width fixed, so the
 * accumulator stays in registers across the rows. MAD is the step. */
#define WEIGHTED_ROWS(name, MAD, TARGET)                                                     \
    TARGET static inline __attribute__((always_inline)) void                                \
    name##_n(float *restrict acc, const float *restrict w, const float *restrict v, int n,  \
             int64_t dv)                                                                    \
    {                                                                                       \
        float a[256];                                                                       \
        for (int64_t d = 0; d < dv; d++)                                                    \
            a[d] = 0.0f;                                                                    \
        for (int i = 0; i < n; i++)                                                         \
            for (int64_t d = 0; d < dv; d++)                                                \
                a[d] = MAD(a[d], w[i], v[(int64_t)i * dv + d]);                             \
        for (int64_t d = 0; d < dv; d++)                                                    \
            acc[d] = a[d];                                                                  \
    }                                                                                       \
    TARGET static void name(float *restrict acc, const float *restrict w,                   \
                            const float *restrict v, int n, int64_t dv)                     \
    {                                                                                       \
        switch (dv) {                                                                       \
        case 16: name##_n(acc, w, v, n, 16); return;                                        \
        case 32: name##_n(acc, w, v, n, 32); return;                                        \
        case 64: name##_n(acc, w, v, n, 64); return;                                        \
        case 128: name##_n(acc, w, v, n, 128); return;                                      \
        default:                                                                            \
            for (int64_t d = 0; d < dv; d++)                                                \
                acc[d] = 0.0f;                                                              \
            for (int i = 0; i < n; i++)                                                     \
                for (int64_t d = 0; d < dv; d++)                                            \
                    acc[d] = MAD(acc[d], w[i], v[(int64_t)i * dv + d]);                     \
        }                                                                                   \
    }

#define MAD_SPLIT(a, w, v) ((a) + (w) * (v))
#define MAD_FUSED(a, w, v) fmaf((w), (v), (a))

WEIGHTED_ROWS(weighted_rows_scalar, MAD_SPLIT, )
#if defined(__x86_64__)
WEIGHTED_ROWS(weighted_rows_avx2, MAD_SPLIT, __attribute__((target("avx2"))))
WEIGHTED_ROWS(weighted_rows_avx512, MAD_FUSED, __attribute__((target("avx512f,fma"))))
#endif
#if defined(__x86_64__)
/* key_scores for r <= 8 query heads that share one KV head: each block
 * of keys is loaded once for all of them (GQA), two blocks of 16 at a time
 * so that the loads of K and the broadcasts of q feed twice as many fmas.
 * Every key's sum is the same chain of fmas over d as key_scores_avx512's,
 * and the keys past the last whole block of 16 the same products and sums
 * as its scalar tail (in masked lanes: a tail key read down a column of kt
 * one float at a time cost more than the whole blocks), so the scores are
 * bit for bit that kernel's. s rows are lds apart. */
__attribute__((target("avx512f,fma"))) static inline __attribute__((always_inline)) void
key_scores_group_r(float *s, int64_t lds, const float *q, const int r, const float *kt,
                   int64_t ld, int64_t dk, int n)
{
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 a0[8], a1[8];
        for (int h = 0; h < r; h++)
            a0[h] = a1[h] = _mm512_setzero_ps();
        for (int64_t d = 0; d < dk; d++) {
            const __m512 k0 = _mm512_loadu_ps(kt + d * ld + i);
            const __m512 k1 = _mm512_loadu_ps(kt + d * ld + i + 16);
            for (int h = 0; h < r; h++) {
                const __m512 qd = _mm512_set1_ps(q[h * dk + d]);
                a0[h] = _mm512_fmadd_ps(qd, k0, a0[h]);
                a1[h] = _mm512_fmadd_ps(qd, k1, a1[h]);
            }
        }
        for (int h = 0; h < r; h++) {
            _mm512_storeu_ps(s + h * lds + i, a0[h]);
            _mm512_storeu_ps(s + h * lds + i + 16, a1[h]);
        }
    }
    for (; i + 16 <= n; i += 16) {
        __m512 acc[8];
        for (int h = 0; h < r; h++)
            acc[h] = _mm512_setzero_ps();
        for (int64_t d = 0; d < dk; d++) {
            const __m512 kv = _mm512_loadu_ps(kt + d * ld + i);
            for (int h = 0; h < r; h++)
                acc[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[h * dk + d]), kv, acc[h]);
        }
        for (int h = 0; h < r; h++)
            _mm512_storeu_ps(s + h * lds + i, acc[h]);
    }
    if (i < n) { /* key_scores_scalar's product-then-sum per key, the keys as lanes */
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        __m512 acc[8];
        for (int h = 0; h < r; h++)
            acc[h] = _mm512_setzero_ps();
        for (int64_t d = 0; d < dk; d++) {
            const __m512 kv = _mm512_maskz_loadu_ps(m, kt + d * ld + i);
            for (int h = 0; h < r; h++)
                acc[h] = _mm512_add_ps(acc[h], _mm512_mul_ps(_mm512_set1_ps(q[h * dk + d]), kv));
        }
        for (int h = 0; h < r; h++)
            _mm512_mask_storeu_ps(s + h * lds + i, m, acc[h]);
    }
}

/* Any number of heads, 8 at a time; r a constant in each case, so the
 * accumulators live in registers. */
__attribute__((target("avx512f,fma")))
static void key_scores_group_avx512(float *s, int64_t lds, const float *q, int r,
                                    const float *kt, int64_t ld, int64_t dk, int n)
{
    for (int h = 0; h < r; h += 8) {
        float *sh = s + h * lds;
        const float *qh = q + h * dk;
        switch (r - h < 8 ? r - h : 8) {
        case 1: key_scores_group_r(sh, lds, qh, 1, kt, ld, dk, n); break;
        case 2: key_scores_group_r(sh, lds, qh, 2, kt, ld, dk, n); break;
        case 3: key_scores_group_r(sh, lds, qh, 3, kt, ld, dk, n); break;
        case 4: key_scores_group_r(sh, lds, qh, 4, kt, ld, dk, n); break;
        case 5: key_scores_group_r(sh, lds, qh, 5, kt, ld, dk, n); break;
        case 6: key_scores_group_r(sh, lds, qh, 6, kt, ld, dk, n); break;
        case 7: key_scores_group_r(sh, lds, qh, 7, kt, ld, dk, n); break;
        default: key_scores_group_r(sh, lds, qh, 8, kt, ld, dk, n); break;
        }
    }
}

/* weighted_rows for r heads at once (acc and w rows lda apart): each row of
 * V is loaded once for all of them. Per head and element the same chain of
 * fused multiply-adds over i as weighted_rows_avx512 (from zero, i = 0..n-1),
 * so the same bits. nv = dv / 16 vectors per row, r * nv <= 16 registers. */
__attribute__((target("avx512f,fma"))) static inline __attribute__((always_inline)) void
weighted_rows_group_rn(float *acc, int64_t lda, const float *w, const int r, const float *v,
                       int n, const int nv)
{
    __m512 a[16];
    for (int x = 0; x < r * nv; x++)
        a[x] = _mm512_setzero_ps();
    for (int i = 0; i < n; i++) {
        __m512 vv[8];
        for (int c = 0; c < nv; c++)
            vv[c] = _mm512_loadu_ps(v + ((int64_t)i * nv + c) * 16);
        for (int h = 0; h < r; h++) {
            const __m512 wi = _mm512_set1_ps(w[h * lda + i]);
            for (int c = 0; c < nv; c++)
                a[h * nv + c] = _mm512_fmadd_ps(wi, vv[c], a[h * nv + c]);
        }
    }
    for (int h = 0; h < r; h++)
        for (int c = 0; c < nv; c++)
            _mm512_storeu_ps(acc + h * lda + c * 16, a[h * nv + c]);
}

__attribute__((target("avx512f,fma")))
static void weighted_rows_group_avx512(float *acc, int64_t lda, const float *w, int r,
                                       const float *v, int n, int64_t dv)
{
    int h = 0;
    if (dv == 64)
        for (; h + 4 <= r; h += 4)
            weighted_rows_group_rn(acc + h * lda, lda, w + h * lda, 4, v, n, 4);
    else if (dv == 128)
        for (; h + 2 <= r; h += 2)
            weighted_rows_group_rn(acc + h * lda, lda, w + h * lda, 2, v, n, 8);
    for (; h < r; h++) /* the rest, and other head sizes: one head at a time */
        weighted_rows_avx512(acc + h * lda, w + h * lda, v, n, dv);
}

/* The avx2 level's key_scores for r <= 4 heads of one KV head (any number,
 * 4 at a time, below): the same
 * blocks of 16 keys with fmas as key_scores_avx2, each K load feeding r
 * heads, and its scalar tail's products and sums in masked lanes. Bit for
 * bit key_scores_avx2's scores. */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
key_scores_group2_r(float *s, int64_t lds, const float *q, const int r, const float *kt,
                    int64_t ld, int64_t dk, int n)
{
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a0[4], a1[4];
        for (int h = 0; h < r; h++)
            a0[h] = a1[h] = _mm256_setzero_ps();
        for (int64_t d = 0; d < dk; d++) {
            const __m256 k0 = _mm256_loadu_ps(kt + d * ld + i);
            const __m256 k1 = _mm256_loadu_ps(kt + d * ld + i + 8);
            for (int h = 0; h < r; h++) {
                const __m256 qd = _mm256_set1_ps(q[h * dk + d]);
                a0[h] = _mm256_fmadd_ps(qd, k0, a0[h]);
                a1[h] = _mm256_fmadd_ps(qd, k1, a1[h]);
            }
        }
        for (int h = 0; h < r; h++) {
            _mm256_storeu_ps(s + h * lds + i, a0[h]);
            _mm256_storeu_ps(s + h * lds + i + 8, a1[h]);
        }
    }
    for (; i < n; i += 8) { /* the tail, 8 lanes at a time */
        const int m = n - i < 8 ? n - i : 8;
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(m),
                                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 acc[4];
        for (int h = 0; h < r; h++)
            acc[h] = _mm256_setzero_ps();
        for (int64_t d = 0; d < dk; d++) {
            const __m256 kv = _mm256_maskload_ps(kt + d * ld + i, mask);
            for (int h = 0; h < r; h++)
                acc[h] = _mm256_add_ps(acc[h], _mm256_mul_ps(_mm256_set1_ps(q[h * dk + d]), kv));
        }
        for (int h = 0; h < r; h++)
            _mm256_maskstore_ps(s + h * lds + i, mask, acc[h]);
    }
}

__attribute__((target("avx2,fma")))
static void key_scores_group_avx2(float *s, int64_t lds, const float *q, int r,
                                  const float *kt, int64_t ld, int64_t dk, int n)
{
    for (int h = 0; h < r; h += 4) {
        switch (r - h < 4 ? r - h : 4) {
        case 1: key_scores_group2_r(s + h * lds, lds, q + h * dk, 1, kt, ld, dk, n); break;
        case 2: key_scores_group2_r(s + h * lds, lds, q + h * dk, 2, kt, ld, dk, n); break;
        case 3: key_scores_group2_r(s + h * lds, lds, q + h * dk, 3, kt, ld, dk, n); break;
        default: key_scores_group2_r(s + h * lds, lds, q + h * dk, 4, kt, ld, dk, n); break;
        }
    }
}
#endif


void fl_attn_kernels_scalar(struct fl_attn_kernels *k)
{
    *k = (struct fl_attn_kernels){
        .dot_f16 = dot_scalar, .mad_f16 = mad_scalar, .scale_f16 = scale_scalar,
        .f16_to_f32 = to_f32_scalar, .mad_f32 = mad_f32_scalar, .scale_f32 = scale_f32_scalar,
        .q8_0_to_f32 = NULL,
        .key_scores = key_scores_scalar, .key_scores_group = NULL,
        .exp_shifted = exp_shifted_scalar, .weighted_rows = weighted_rows_scalar,
        .scale_max = scale_max_scalar,
        .weighted_rows_group = NULL,
    };
}

#if defined(__x86_64__)
void fl_attn_kernels_avx2(struct fl_attn_kernels *k)
{
    k->dot_f16 = dot_f16c;
    k->mad_f16 = mad_f16c;
    k->scale_f16 = scale_f16c;
    k->f16_to_f32 = to_f32_f16c;
    k->mad_f32 = mad_f32_avx2;
    k->scale_f32 = scale_f32_avx2;
    k->q8_0_to_f32 = q8_0_to_f32_avx2;
    k->key_scores = key_scores_avx2;
    k->key_scores_group = key_scores_group_avx2;
    k->exp_shifted = exp_shifted_avx2;
    k->scale_max = scale_max_avx2;
    k->weighted_rows = weighted_rows_avx2;
}

void fl_attn_kernels_avx512(struct fl_attn_kernels *k)
{
    k->mad_f32 = mad_f32_avx512;
    k->scale_f32 = scale_f32_avx512;
    k->key_scores = key_scores_avx512;
    k->key_scores_group = key_scores_group_avx512;
    k->weighted_rows = weighted_rows_avx512;
    k->weighted_rows_group = weighted_rows_group_avx512;
}
#endif
