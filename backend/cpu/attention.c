/* attention.c: causal attention of a batch of queries over the F16 KV cache,
 * with the numerics of ggml's CPU flash-attention kernels (llama.cpp's
 * references ran with flash attention on):
 *  - batches of fewer than 64 queries (decode, short prompts) follow the
 *    one-chunk kernel: Q rounded to F16, F16 dot products with K summed as
 *    ggml's AVX-512 build sums them, online softmax, V accumulated in an F16
 *    buffer (each step rounded to F16);
 *  - larger batches follow the tiled kernel's arithmetic class: Q, K and V
 *    in F32. K is transposed once per call so that scores for all keys of a
 *    query are one vectorisable sweep (shared by the query heads of one KV
 *    head), then softmax, then the V sum.
 * The F16 steps use F16C/FMA when the CPU has them; the scalar fallback
 * gives the same bits (conversions and FMAs are exact operations). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/attention.h"
#include "backend/cpu/cpu-backend.h"
#include "backend/cpu/threadpool.h"
#include "model/kv-cache.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define ENG_FA_TILE_Q 64 /* ggml's GGML_FA_TILE_Q: batches this large use the F32 kernel */

/* --- F16 helpers: scalar and F16C/FMA versions with identical results --------- */

struct f16_kernels {
    float (*dot)(const fl_f16 *x, const fl_f16 *y, int64_t n);
    void (*mad)(fl_f16 *acc, const fl_f16 *v, float s, int64_t n); /* acc = f16(v*s + acc) */
    void (*scale)(fl_f16 *acc, float s, int64_t n);                /* acc = f16(acc*s) */
    void (*to_f32)(const fl_f16 *x, float *y, int64_t n);
};

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

F16C_TARGET static void to_f32_f16c(const fl_f16 *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, load8(x + i));
    to_f32_scalar(x + i, y + i, n - i);
}
#endif

static struct f16_kernels pick_kernels(void)
{
    struct f16_kernels k = { dot_scalar, mad_scalar, scale_scalar, to_f32_scalar };
#if defined(__x86_64__)
    const char *cap = getenv("FL_CPU_FEATURES");
    __builtin_cpu_init();
    if ((!cap || strcmp(cap, "scalar")) && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
        k = (struct f16_kernels){ dot_f16c, mad_f16c, scale_f16c, to_f32_f16c };
#endif
    return k;
}

/* --- the job ---------------------------------------------------------------- */

struct attn_job {
    struct eng_ctx *c;
    struct f16_kernels k;
    int layer, n_tok, pos0, n_kv;
    const float *q;
    int64_t q_stride, out_stride;
    const struct eng_attn *p;
    const float *sinks;  /* p->sinks' values, or NULL */
    float *out;
    float *scratch; /* per thread: scratch_per floats */
    int64_t scratch_per;
    float *kt, *vf; /* F32 path: [n_head_kv][dk][n_kv] and [n_head_kv][n_kv][dv] */
};

static const fl_f16 *key_row(const struct attn_job *j, int pos, int kvh)
{
    return eng_kv_k(j->c->kv, j->layer, pos) + j->p->k_off + kvh * j->p->k_stride;
}

static const fl_f16 *val_row(const struct attn_job *j, int pos, int kvh)
{
    const fl_f16 *row = j->p->v_in_k ? eng_kv_k(j->c->kv, j->layer, pos)
                                     : eng_kv_v(j->c->kv, j->layer, pos);
    return row + j->p->v_off + kvh * j->p->v_stride;
}

/* First key position query position qpos may see (the window's start). */
static int first_key(const struct eng_attn *p, int qpos)
{
    return p->window > 0 && qpos - p->window + 1 > 0 ? qpos - p->window + 1 : 0;
}

/* Adds a sink logit to the running (M, S) of one head; acc is scaled when
 * the sink becomes the new maximum (ggml applies sinks after the keys). */
static void apply_sink(float sink, float *M, float *S, float *acc, int64_t dv)
{
    float ms = 1.0f, vs = 1.0f;
    if (sink > *M) {
        ms = expf(*M - sink);
        *M = sink;
        for (int64_t d = 0; d < dv; d++)
            acc[d] *= ms;
    } else {
        vs = expf(sink - *M);
    }
    *S = *S * ms + vs;
}

static float softcapped(const struct eng_attn *p, float s)
{
    if (p->softcap != 0.0f)
        return p->softcap * tanhf(s * (p->scale / p->softcap));
    return s * p->scale;
}

static void finish(const struct attn_job *j, int t, int h, float *acc, float M, float S)
{
    const struct eng_attn *p = j->p;
    if (j->sinks)
        apply_sink(j->sinks[h], &M, &S, acc, p->dv);
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    float *o = j->out + (int64_t)t * j->out_stride + (int64_t)h * p->dv;
    for (int64_t d = 0; d < p->dv; d++)
        o[d] = acc[d] * inv;
}

/* One (query, head) with the one-chunk kernel's F16 arithmetic. */
static void attend_f16(const struct attn_job *j, int t, int h, float *scr)
{
    const struct eng_attn *p = j->p;
    const int kvh = h / (p->n_head / p->n_head_kv), qpos = j->pos0 + t;
    float *acc = scr;
    fl_f16 *q16 = (fl_f16 *)(scr + p->dv), *acc16 = q16 + p->dk;
    const float *q = j->q + (int64_t)t * j->q_stride + (int64_t)h * p->dk;
    for (int64_t d = 0; d < p->dk; d++)
        q16[d] = fl_f32_to_f16(q[d]);
    memset(acc16, 0, (size_t)p->dv * sizeof(fl_f16));
    float M = -INFINITY, S = 0.0f;
    for (int kp = first_key(p, qpos); kp <= qpos; kp++) {
        const float s = softcapped(p, j->k.dot(key_row(j, kp, kvh), q16, p->dk));
        float ms = 1.0f, vs = 1.0f;
        if (s > M) {
            const float Mold = M;
            M = s;
            ms = expf(Mold - M);
            j->k.scale(acc16, ms, p->dv);
        } else {
            vs = expf(s - M);
        }
        j->k.mad(acc16, val_row(j, kp, kvh), vs, p->dv);
        S = S * ms + vs;
    }
    j->k.to_f32(acc16, acc, p->dv);
    finish(j, t, h, acc, M, S);
}

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

static void key_scores(float *s, const float *q, const float *kt, int64_t ld, int64_t dk, int n)
{
#if defined(__x86_64__)
    static int level = -1;
    if (level < 0) {
        const char *cap = getenv("FL_CPU_FEATURES");
        level = cap && !strcmp(cap, "scalar") ? 0
              : __builtin_cpu_supports("avx512f") && (!cap || strcmp(cap, "avx2")) ? 2
              : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
    }
    if (level == 2)
        return key_scores_avx512(s, q, kt, ld, dk, n);
    if (level == 1)
        return key_scores_avx2(s, q, kt, ld, dk, n);
#endif
    key_scores_scalar(s, q, kt, ld, dk, n);
}

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

static float exp_shifted(float *s, int n, float M)
{
#if defined(__x86_64__)
    static int have = -1;
    if (have < 0)
        have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (have)
        return exp_shifted_avx2(s, n, M);
#endif
    return exp_shifted_scalar(s, n, M);
}

/* acc[d] = sum_i w[i] * v[i][d]. Common head sizes get a copy with the
 * width fixed, so the accumulator stays in registers across the rows. */
static inline __attribute__((always_inline)) void
weighted_rows_n(float *restrict acc, const float *restrict w, const float *restrict v, int n,
                int64_t dv)
{
    float a[256];
    for (int64_t d = 0; d < dv; d++)
        a[d] = 0.0f;
    for (int i = 0; i < n; i++)
        for (int64_t d = 0; d < dv; d++)
            a[d] += w[i] * v[(int64_t)i * dv + d];
    for (int64_t d = 0; d < dv; d++)
        acc[d] = a[d];
}

__attribute__((target_clones("avx512f", "avx2", "default")))
static void weighted_rows(float *restrict acc, const float *restrict w, const float *restrict v,
                          int n, int64_t dv)
{
    switch (dv) {
    case 16: weighted_rows_n(acc, w, v, n, 16); return;
    case 32: weighted_rows_n(acc, w, v, n, 32); return;
    case 64: weighted_rows_n(acc, w, v, n, 64); return;
    case 128: weighted_rows_n(acc, w, v, n, 128); return;
    default:
        for (int64_t d = 0; d < dv; d++)
            acc[d] = 0.0f;
        for (int i = 0; i < n; i++)
            for (int64_t d = 0; d < dv; d++)
                acc[d] += w[i] * v[(int64_t)i * dv + d];
    }
}

#if defined(__x86_64__)
/* key_scores for the r <= 8 query heads that share one KV head: each block
 * of keys is loaded once for all of them (GQA). s rows are lds apart. */
__attribute__((target("avx512f,fma")))
static void key_scores_group_avx512(float *s, int64_t lds, const float *q, int r,
                                    const float *kt, int64_t ld, int64_t dk, int n)
{
    int i = 0;
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
    for (int h = 0; h < r; h++)
        key_scores_scalar(s + h * lds + i, q + h * dk, kt + i, ld, dk, n - i);
}
#endif

static void key_scores_group(float *s, int64_t lds, const float *q, int r, const float *kt,
                             int64_t ld, int64_t dk, int n)
{
#if defined(__x86_64__)
    static int ok = -1;
    if (ok < 0) {
        const char *cap = getenv("FL_CPU_FEATURES");
        ok = (!cap || !strcmp(cap, "avx512")) && __builtin_cpu_supports("avx512f");
    }
    if (ok && r <= 8)
        return key_scores_group_avx512(s, lds, q, r, kt, ld, dk, n);
#endif
    for (int h = 0; h < r; h++)
        key_scores(s + h * lds, q + h * dk, kt, ld, dk, n);
}

/* One query and the r query heads of KV head g, F32 arithmetic: scores for
 * all keys, softmax, V sum. Scratch: r rows of (dv + n_kv) floats. */
static void attend_f32(const struct attn_job *j, int t, int g, float *scr)
{
    const struct eng_attn *p = j->p;
    const int r = p->n_head / p->n_head_kv, qpos = j->pos0 + t;
    const int k0 = first_key(p, qpos), nk = qpos + 1 - k0;
    const int64_t lds = p->dv + j->n_kv;
    const float *q = j->q + (int64_t)t * j->q_stride + (int64_t)g * r * p->dk;
    const float *kt = j->kt + (int64_t)g * p->dk * j->n_kv;
    const float *vf = j->vf + (int64_t)g * j->n_kv * p->dv;
    key_scores_group(scr + p->dv, lds, q, r, kt + k0, j->n_kv, p->dk, nk);
    for (int hh = 0; hh < r; hh++) {
        float *acc = scr + hh * lds, *s = acc + p->dv;
        float M = -INFINITY;
        for (int i = 0; i < nk; i++) {
            s[i] = softcapped(p, s[i]);
            M = s[i] > M ? s[i] : M;
        }
        const float S = exp_shifted(s, nk, M);
        weighted_rows(acc, s, vf + (int64_t)k0 * p->dv, nk, p->dv);
        finish(j, t, g * r + hh, acc, M, S);
    }
}

/* F32 path, phase 1: K transposed and V converted, split by position. */
static void convert_worker(void *arg, int ith, int nth)
{
    const struct attn_job *j = arg;
    const struct eng_attn *p = j->p;
    int64_t begin, end;
    fl_split_range(j->n_kv, ith, nth, &begin, &end);
    float *tmp = j->scratch + ith * j->scratch_per;
    for (int g = 0; g < p->n_head_kv; g++) {
        float *kt = j->kt + (int64_t)g * p->dk * j->n_kv;
        for (int64_t kp = begin; kp < end; kp++) {
            j->k.to_f32(key_row(j, (int)kp, g), tmp, p->dk);
            for (int64_t d = 0; d < p->dk; d++)
                kt[d * j->n_kv + kp] = tmp[d];
            j->k.to_f32(val_row(j, (int)kp, g), j->vf + ((int64_t)g * j->n_kv + kp) * p->dv, p->dv);
        }
    }
}

static void attn_worker(void *arg, int ith, int nth)
{
    const struct attn_job *j = arg;
    /* F16 kernel: one item per (token, head); F32: per (token, KV head) */
    const int per_tok = j->kt ? j->p->n_head_kv : j->p->n_head;
    int64_t begin, end;
    fl_split_range((int64_t)j->n_tok * per_tok, ith, nth, &begin, &end);
    float *scr = j->scratch + ith * j->scratch_per;
    for (int64_t i = begin; i < end; i++) {
        const int t = (int)(i / per_tok), h = (int)(i % per_tok);
        if (j->kt)
            attend_f32(j, t, h, scr);
        else
            attend_f16(j, t, h, scr);
    }
}

void cpu_attention(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *q,
                   int64_t q_stride, const struct eng_attn *p, float *out, int64_t out_stride)
{
    const int n_tok = b->n_tok, pos0 = b->pos0;
    static struct f16_kernels kernels;
    if (!kernels.dot)
        kernels = pick_kernels(); /* idempotent: a race writes the same value */
    const int n_kv = pos0 + n_tok;
    struct fl_pool *pool = eng_cpu_pool_for(c, (double)n_tok * p->n_head * n_kv * (p->dk + p->dv));
    const int nth = fl_pool_size(pool);
    struct attn_job j = {
        .c = c, .k = kernels, .layer = layer, .n_tok = n_tok, .pos0 = pos0, .n_kv = n_kv, .q = q,
        .q_stride = q_stride, .out_stride = out_stride, .p = p, .out = out,
        .sinks = p->sinks ? (const float *)p->sinks->data : NULL,
    };
    /* F32 acc + F16 q + F16 acc, or F32 acc + scores; plus a K row */
    int64_t per = p->dv + (p->dk + p->dv + 1) / 2 + 1;
    if (n_tok >= ENG_FA_TILE_Q) {
        const int64_t grp = (int64_t)(p->n_head / p->n_head_kv) * (p->dv + n_kv);
        per = grp > per ? grp : per;
    }
    per = per > p->dk ? per : p->dk;
    j.scratch_per = (per + 15) & ~(int64_t)15;
    j.scratch = eng_scratch_f32(c, j.scratch_per * nth);
    if (n_tok >= ENG_FA_TILE_Q) {
        j.kt = eng_scratch_f32(c, (int64_t)p->n_head_kv * p->dk * n_kv);
        j.vf = eng_scratch_f32(c, (int64_t)p->n_head_kv * p->dv * n_kv);
        fl_pool_run(pool, convert_worker, &j);
    }
    fl_pool_run(pool, attn_worker, &j);
}
