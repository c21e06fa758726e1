/* test-cpu-kernels: every SIMD kernel of every level this CPU has, against
 * the scalar references of the types module.
 *
 * - vec_dot: random weight blocks (all bit patterns, sane scales) against
 *   activations quantized by the level's quantizer. The AVX-512 kernels of
 *   Q8_0, Q4_0, IQ4_NL and MXFP4 add the block terms in the reference's
 *   order and must give its exact bits. The others sum the float block terms
 *   in 8 lanes (exact integers inside blocks), so they are held to
 *   |simd - ref| <= 2e-6 * sum|w_i * x_i| (float rounding of up to ~500
 *   terms, with margin); the reference is also checked against a double-
 *   precision dot of the dequantized rows.
 * - where AVX2 and AVX-512 use kernels of one shape (same int32 lanes and
 *   float ops: the per-row kernels, and Q4_K's row-transposed ones) they
 *   must agree bit for bit; and for every kernel, every tile
 *   shape (nr x nc) must give exactly the single vec_dot's value.
 * - Q2_K, Q3_K, IQ4_XS, Q5_0, Q4_1, Q5_1 (k_exact): every level's vec_dot,
 *   tile shapes and one-token kernel give vec_dot_ref's exact bits, also on
 *   rows of all-0x00/0xff/0x55/0xaa bytes (quants and scales at their
 *   extremes) against activations at +-127.
 * - the K-quant one-token kernels give the per-row kernel's bits, row by row.
 * - activation quantizers: byte-identical with the types module's scalar
 *   fl_type_from_float_act (Q8_0 as llama.cpp's x86 build rounds it, Q8_K =
 *   ggml's quantize_row_q8_K), incl. rounding ties and all-zero blocks. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/cpu.h"
#include "backend/cpu/repack.h"
#include "gguf/tensor-types.h"
#include "tests/check.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
    return (uint32_t)(check_xorshift64(&g_rng) >> 16);
}

static float frand(void) { return (float)rnd() / 4294967296.0f; }

static float gauss(void)
{
    float u = frand() + 1e-7f, v = frand();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

/* f16 of magnitude 2^lo..2^hi, random sign unless positive */
static fl_f16 rscale(int lo, int hi, int positive)
{
    float m = ldexpf(1.0f + frand(), lo + (int)(rnd() % (unsigned)(hi - lo + 1)));
    return fl_f32_to_f16(positive || (rnd() & 1) ? m : -m);
}

/* n values of weight type t: random bytes with the scale fields made
 * finite and moderate; float types from gaussians. */
static void rand_weights(uint32_t t, void *dst, int n)
{
    const struct fl_type_traits *tr = fl_type_traits(t);
    const int nb = n / tr->blck_size;
    uint8_t *p = dst;
    for (size_t i = 0; i < fl_row_size(t, n); i++)
        p[i] = (uint8_t)rnd();
    for (int b = 0; b < nb; b++) {
        switch (t) {
        case FL_TYPE_F32: ((float *)dst)[b] = gauss(); break;
        case FL_TYPE_F16: ((fl_f16 *)dst)[b] = fl_f32_to_f16(gauss()); break;
        case FL_TYPE_BF16: ((fl_bf16 *)dst)[b] = fl_f32_to_bf16(gauss()); break;
        case FL_TYPE_Q8_0: ((struct fl_block_q8_0 *)dst)[b].d = rscale(-10, -6, 0); break;
        case FL_TYPE_Q4_0: ((struct fl_block_q4_0 *)dst)[b].d = rscale(-8, -4, 0); break;
        case FL_TYPE_IQ4_NL: ((struct fl_block_iq4_nl *)dst)[b].d = rscale(-10, -6, 0); break;
        case FL_TYPE_MXFP4: ((struct fl_block_mxfp4 *)dst)[b].e = (uint8_t)(118 + rnd() % 8); break;
        case FL_TYPE_Q4_K: {
            struct fl_block_q4_K *k = (struct fl_block_q4_K *)dst + b;
            k->d = rscale(-10, -6, 1);
            k->dmin = rscale(-10, -6, 1);
            break;
        }
        case FL_TYPE_Q5_K: {
            struct fl_block_q5_K *k = (struct fl_block_q5_K *)dst + b;
            k->d = rscale(-10, -6, 1);
            k->dmin = rscale(-10, -6, 1);
            break;
        }
        case FL_TYPE_Q6_K: ((struct fl_block_q6_K *)dst)[b].d = rscale(-12, -8, 0); break;
        case FL_TYPE_Q2_K: {
            struct fl_block_q2_K *k = (struct fl_block_q2_K *)dst + b;
            k->d = rscale(-10, -6, 1);
            k->dmin = rscale(-10, -6, 1);
            break;
        }
        case FL_TYPE_Q3_K: ((struct fl_block_q3_K *)dst)[b].d = rscale(-12, -8, 0); break;
        case FL_TYPE_IQ4_XS: ((struct fl_block_iq4_xs *)dst)[b].d = rscale(-12, -8, 0); break;
        case FL_TYPE_Q5_0: ((struct fl_block_q5_0 *)dst)[b].d = rscale(-8, -4, 0); break;
        case FL_TYPE_Q4_1:
            ((struct fl_block_q4_1 *)dst)[b].d = rscale(-8, -4, 0);
            ((struct fl_block_q4_1 *)dst)[b].m = rscale(-8, -4, 0);
            break;
        case FL_TYPE_Q5_1:
            ((struct fl_block_q5_1 *)dst)[b].d = rscale(-8, -4, 0);
            ((struct fl_block_q5_1 *)dst)[b].m = rscale(-8, -4, 0);
            break;
        default: break;
        }
    }
}

static void rand_act(float *x, int n)
{
    for (int i = 0; i < n; i += 32) {
        const float s = ldexpf(1.0f, (int)(rnd() % 8) - 4);
        for (int j = i; j < i + 32 && j < n; j++)
            x[j] = gauss() * s;
    }
}

/* Activations for weight type t in the given kernel set's quantizer. */
static void quant_act(const struct fl_cpu_kernels *k, uint32_t t, const float *x, void *dst, int n)
{
    const uint32_t at = fl_type_traits(t)->vec_dot_type;
    if (at == FL_TYPE_F32) {
        memcpy(dst, x, (size_t)n * sizeof(float));
        return;
    }
    fl_act_quant_fn q = k->quant[at] ? k->quant[at] : fl_type_from_float_act(at);
    q(x, dst, n);
}

/* sum |w_i * x_i| and the dot in double, from the dequantized rows */
static void dequant_dot(uint32_t t, const void *w, const void *xa, int n, double *dot, double *mag)
{
    const uint32_t at = fl_type_traits(t)->vec_dot_type;
    float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    fl_type_traits(t)->to_float(w, a, n);
    fl_type_traits(at)->to_float(xa, b, n);
    *dot = *mag = 0.0;
    for (int i = 0; i < n; i++) {
        *dot += (double)a[i] * b[i];
        *mag += fabs((double)a[i] * b[i]);
    }
    free(a);
    free(b);
}

/* Q4_1/Q5_1 against Q8_1: the reference adds m * y.s, where y.s is the
 * block's d * sum(q) rounded to f16 (ggml's Q8_1), not the exact sum the
 * double-precision dot sees: allow each block's m * s an f16 rounding. */
static double min_term_err(uint32_t t, const void *w, const void *xa, int n)
{
    if (t != FL_TYPE_Q4_1 && t != FL_TYPE_Q5_1)
        return 0.0;
    const size_t bs = fl_type_traits(t)->type_size;
    const struct fl_block_q8_1 *y = xa;
    double e = 0.0;
    for (int b = 0; b < n / 32; b++) {
        fl_f16 m; /* d then m lead both block types */
        memcpy(&m, (const char *)w + (size_t)b * bs + 2, 2);
        e += fabs((double)fl_f16_to_f32(m) * fl_f16_to_f32(y[b].s)) * 0x1p-10;
    }
    return e;
}

static const uint32_t k_types[] = {
    FL_TYPE_Q8_0, FL_TYPE_Q4_0, FL_TYPE_IQ4_NL, FL_TYPE_MXFP4, FL_TYPE_Q4_K,
    FL_TYPE_Q5_K, FL_TYPE_Q6_K, FL_TYPE_F16, FL_TYPE_BF16, FL_TYPE_F32,
    FL_TYPE_Q2_K, FL_TYPE_Q3_K, FL_TYPE_IQ4_XS, FL_TYPE_Q5_0, FL_TYPE_Q4_1, FL_TYPE_Q5_1,
};
#define N_TYPES (sizeof(k_types) / sizeof(k_types[0]))

/* Types whose SIMD kernels follow the scalar reference's float order at
 * every level (only integer sums regrouped): exact bits required. */
static const uint32_t k_exact[] = { FL_TYPE_Q2_K, FL_TYPE_Q3_K, FL_TYPE_IQ4_XS,
                                    FL_TYPE_Q5_0, FL_TYPE_Q4_1, FL_TYPE_Q5_1 };
#define N_EXACT (sizeof(k_exact) / sizeof(k_exact[0]))

static int exact_type(uint32_t t)
{
    for (size_t i = 0; i < N_EXACT; i++)
        if (k_exact[i] == t)
            return 1;
    return 0;
}

/* y[t][level] for one random case, to compare levels afterwards */
static float g_res[N_TYPES][8][FL_CPU_AMX + 1];

static void test_vec_dot(const struct fl_cpu_kernels *k, int level)
{
    static const int k_blocks[] = { 1, 2, 3, 7, 16, 33, 64 };
    int checked = 0;
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const uint32_t t = k_types[ti];
        const struct fl_type_traits *tr = fl_type_traits(t);
        const int bs = tr->blck_size == 1 ? 32 : tr->blck_size;
        for (int bi = 0; bi < 7; bi++) {
            /* float types also get lengths that are not a multiple of 8 */
            const int n = k_blocks[bi] * bs + (tr->blck_size == 1 ? bi % 5 : 0);
            uint64_t seed = g_rng;
            g_rng = 0x1234567ull * (ti + 1) + (uint64_t)bi * 77; /* same data every level */
            void *w = malloc(fl_row_size(t, n) + 64);
            float *x = malloc((size_t)n * sizeof(float));
            void *xa = malloc((size_t)n * 4 + 4096);
            rand_weights(t, w, n);
            rand_act(x, n);
            g_rng = seed;
            quant_act(k, t, x, xa, n);
            float s_ref = 0, s = 0;
            tr->vec_dot_ref(n, &s_ref, w, xa);
            k->vec_dot[t](n, &s, w, xa);
            double dot, mag;
            dequant_dot(t, w, xa, n, &dot, &mag);
            /* the AVX-512 row-transposed kernels follow the reference's
             * float order: exact */
            if ((level >= FL_CPU_AVX512 && k->tile_r[t] == 8 && t != FL_TYPE_Q4_K) ||
                exact_type(t))
                CHECK(memcmp(&s, &s_ref, 4) == 0, "%s %s n=%d: %.9g not exactly ref %.9g",
                      k->name, tr->name, n, s, s_ref);
            CHECK(fabs(s - s_ref) <= 2e-6 * mag + 1e-30,
                  "%s %s n=%d: simd %.9g ref %.9g (mag %.3g)", k->name, tr->name, n, s, s_ref, mag);
            CHECK(fabs(s_ref - dot) <= 2e-6 * mag + min_term_err(t, w, xa, n) + 1e-30,
                  "%s n=%d: ref %.9g vs double %.9g", tr->name, n, s_ref, dot);
            g_res[ti][bi][level] = s;
            /* every tile shape gives the single dot's bits */
            if (k->tile[t]) {
                const int mr = k->tile_r[t], mc = k->tile_c[t];
                for (int nr = 1; nr <= mr; nr++)
                    for (int nc = 1; nc <= mc; nc++) {
                        const void *xs[FL_TILE_MAX_C];
                        float out[FL_TILE_MAX_C][FL_TILE_MAX_R];
                        float *ys[FL_TILE_MAX_C];
                        for (int c = 0; c < nc; c++) {
                            xs[c] = xa;
                            ys[c] = out[c];
                        }
                        /* the same row nr times: stride 0 */
                        k->tile[t](n, nr, w, 0, nc, xs, NULL, ys);
                        for (int c = 0; c < nc; c++)
                            for (int r = 0; r < nr; r++)
                                CHECK(memcmp(&out[c][r], &s, 4) == 0,
                                      "%s %s tile %dx%d [%d][%d]: %.9g vs vec_dot %.9g",
                                      k->name, tr->name, nr, nc, r, c, out[c][r], s);
                    }
            }
            /* the one-token kernel: every row count gives the same bits,
             * within tolerance of the reference */
            if (k->tile1[t]) {
                float one[FL_TILE_MAX_R], first = 0;
                const void *xs[1] = { xa };
                for (int nr = 1; nr <= k->tile1_r[t]; nr++) {
                    float *ys[1] = { one };
                    k->tile1[t](n, nr, w, 0, 1, xs, NULL, ys);
                    if (nr == 1)
                        first = one[0];
                    for (int r = 0; r < nr; r++)
                        CHECK(memcmp(&one[r], &first, 4) == 0, "%s %s tile1 %d rows", k->name,
                              tr->name, nr);
                }
                CHECK(fabs(first - s_ref) <= 2e-6 * mag + 1e-30, "%s %s tile1: %.9g vs ref %.9g",
                      k->name, tr->name, first, s_ref);
                /* batch invariance: a token's bits must not depend on
                 * whether it shares the product with others */
                CHECK(memcmp(&first, &s, 4) == 0, "%s %s: one-token kernel %.9g vs batched %.9g",
                      k->name, tr->name, first, s);
            }
            checked++;
            free(w);
            free(x);
            free(xa);
        }
    }
    printf("  %s: vec_dot of %zu types x 7 lengths vs scalar reference: %d cases\n", k->name,
           N_TYPES, checked);
}

/* The K-quant one-token kernels (tile1: Q4_K, Q5_K, Q6_K) must give the
 * bits of the tile kernel at nr = nc = 1 (Q5_K, Q6_K: the AVX2 level's
 * per-row vec_dot, which AVX-512 repeats; Q4_K: the level's own, row-
 * transposed), row by row, for distinct rows at a real stride and every row count a call may get; also with every
 * weight quant and scale at its extreme against activations of -127 (the
 * int16 products at their largest). */
static void extreme_kq_row(uint32_t t, char *w, int n)
{
    memset(w, 0xff, fl_row_size(t, n)); /* quants at their maximum, scales and mins 63 */
    for (int b = 0; b < n / FL_QK_K; b++) {
        if (t == FL_TYPE_Q6_K) {
            struct fl_block_q6_K *k = (struct fl_block_q6_K *)w + b;
            for (int i = 0; i < 16; i++)
                k->scales[i] = (int8_t)(i & 1 ? 127 : -128);
            k->d = rscale(-12, -8, 0);
            continue;
        }
        fl_f16 *dd = t == FL_TYPE_Q4_K ? &((struct fl_block_q4_K *)w)[b].d
                                       : &((struct fl_block_q5_K *)w)[b].d;
        dd[0] = rscale(-10, -6, 1); /* d, then dmin */
        dd[1] = rscale(-10, -6, 1);
    }
}

static void test_kq_decode(const struct fl_cpu_kernels *k, const struct fl_cpu_kernels *k2,
                           uint32_t t)
{
    static const int k_lens[] = { 256, 1024, 2304, 3584 };
    int cases = 0;
    if (!k->tile1[t] || !k2->vec_dot[t])
        return;
    for (int li = 0; li < 4; li++) {
        const int n = k_lens[li], nrow = k->tile1_r[t];
        const size_t rs = fl_row_size(t, n);
        char *w = malloc(rs * (size_t)nrow);
        float *x = malloc((size_t)n * sizeof(float));
        void *xa = malloc((size_t)n * 2);
        for (int extreme = 0; extreme < 2; extreme++) {
            for (int r = 0; r < nrow; r++)
                rand_weights(t, w + (size_t)r * rs, n);
            rand_act(x, n);
            if (extreme) {
                extreme_kq_row(t, w, n); /* row 0 */
                for (int i = 0; i < n; i++)
                    x[i] = 1.0f; /* quantizes to -127 */
            }
            quant_act(k, t, x, xa, n);
            float ref[256], out[256]; /* tile1_r is a uint8_t */
            for (int r = 0; r < nrow; r++)
                k2->vec_dot[t](n, &ref[r], w + (size_t)r * rs, xa);
            for (int nr = 1; nr <= nrow; nr++) {
                const void *xs[1] = { xa };
                float *ys[1] = { out };
                k->tile1[t](n, nr, w, rs, 1, xs, NULL, ys);
                for (int r = 0; r < nr; r++)
                    CHECK(memcmp(&out[r], &ref[r], 4) == 0,
                          "%s %s tile1 n=%d nr=%d row %d: %.9g vs per-row %.9g", k->name,
                          fl_type_traits(t)->name, n, nr, r, out[r], ref[r]);
                cases++;
            }
        }
        free(w);
        free(x);
        free(xa);
    }
    printf("  %s: %s one-token kernel = per-row kernel bit for bit: %d cases\n", k->name,
           fl_type_traits(t)->name, cases);
}

/* The scale fields of an exact type's row after its bytes were set to a
 * pattern: finite, moderate, positive. */
static void fix_scales(uint32_t t, void *row, int n)
{
    for (int b = 0; b < n / (int)fl_type_traits(t)->blck_size; b++) {
        switch (t) {
        case FL_TYPE_Q2_K:
            ((struct fl_block_q2_K *)row)[b].d = rscale(-10, -6, 1);
            ((struct fl_block_q2_K *)row)[b].dmin = rscale(-10, -6, 1);
            break;
        case FL_TYPE_Q3_K: ((struct fl_block_q3_K *)row)[b].d = rscale(-12, -8, 1); break;
        case FL_TYPE_IQ4_XS: ((struct fl_block_iq4_xs *)row)[b].d = rscale(-12, -8, 1); break;
        case FL_TYPE_Q5_0: ((struct fl_block_q5_0 *)row)[b].d = rscale(-8, -4, 1); break;
        case FL_TYPE_Q4_1:
            ((struct fl_block_q4_1 *)row)[b].d = rscale(-8, -4, 1);
            ((struct fl_block_q4_1 *)row)[b].m = rscale(-8, -4, 0);
            break;
        case FL_TYPE_Q5_1:
            ((struct fl_block_q5_1 *)row)[b].d = rscale(-8, -4, 1);
            ((struct fl_block_q5_1 *)row)[b].m = rscale(-8, -4, 0);
            break;
        default: break;
        }
    }
}

/* One exact type at one level: 8 distinct rows at a real stride (rows 0-3
 * every weight byte 0x00, 0xff, 0x55, 0xaa: all quants and scales at their
 * extremes) against activations at +-127 and random ones; every tile shape,
 * the one-token kernel and vec_dot give vec_dot_ref's bits. */
static int exact_case(const struct fl_cpu_kernels *k, uint32_t t, int n, int act)
{
    enum { NROW = 8 };
    const struct fl_type_traits *tr = fl_type_traits(t);
    const size_t rs = fl_row_size(t, n), as = (size_t)n * 2;
    char *w = malloc(rs * NROW);
    float *x = malloc((size_t)n * sizeof(float));
    char *xa = malloc(as * FL_TILE_MAX_C);
    float ref[FL_TILE_MAX_C][NROW];
    int bad = 0;
    for (int r = 0; r < NROW; r++) {
        rand_weights(t, w + r * rs, n);
        if (r < 4) {
            static const uint8_t pat[4] = { 0x00, 0xff, 0x55, 0xaa };
            memset(w + r * rs, pat[r], rs);
            fix_scales(t, w + r * rs, n);
        }
    }
    for (int c = 0; c < FL_TILE_MAX_C; c++) {
        rand_act(x, n);
        for (int i = 0; act && i < n; i++) /* 1 -> -127, -1 -> 127, mixed */
            x[i] = act == 1 ? 1.0f : act == 2 ? -1.0f : (i + c) % 3 ? 1.0f : -1.0f;
        quant_act(k, t, x, xa + c * as, n);
        for (int r = 0; r < NROW; r++)
            tr->vec_dot_ref(n, &ref[c][r], w + r * rs, xa + c * as);
    }
    for (int r = 0; r < NROW; r++) {
        float s;
        k->vec_dot[t](n, &s, w + r * rs, xa);
        bad += memcmp(&s, &ref[0][r], 4) != 0;
    }
    for (int nr = 1; k->tile[t] && nr <= k->tile_r[t]; nr++)
        for (int nc = 1; nc <= k->tile_c[t]; nc++)
            for (int r0 = 0; r0 + nr <= NROW; r0 += nr) {
                const void *xs[FL_TILE_MAX_C];
                float out[FL_TILE_MAX_C][FL_TILE_MAX_R], *ys[FL_TILE_MAX_C];
                for (int c = 0; c < nc; c++) {
                    xs[c] = xa + c * as;
                    ys[c] = out[c];
                }
                k->tile[t](n, nr, w + r0 * rs, rs, nc, xs, NULL, ys);
                for (int c = 0; c < nc; c++)
                    for (int r = 0; r < nr; r++)
                        bad += memcmp(&out[c][r], &ref[c][r0 + r], 4) != 0;
            }
    for (int nr = 1; k->tile1[t] && nr <= k->tile1_r[t] && nr <= NROW; nr++) {
        const void *xs[1] = { xa };
        float out[NROW], *ys[1] = { out };
        k->tile1[t](n, nr, w, rs, 1, xs, NULL, ys);
        for (int r = 0; r < nr; r++)
            bad += memcmp(&out[r], &ref[0][r], 4) != 0;
    }
    free(w);
    free(x);
    free(xa);
    return bad;
}

static void test_exact(const struct fl_cpu_kernels *k)
{
    static const int k_lens[] = { 256, 768, 2304 };
    for (size_t i = 0; i < N_EXACT; i++) {
        const uint32_t t = k_exact[i];
        int bad = 0, cases = 0;
        for (int li = 0; li < 3; li++)
            for (int act = 0; act < 4; act++, cases++)
                /* 32-value blocks: also a tail of 5 after groups of 8 */
                bad += exact_case(k, t, k_lens[li] + (fl_type_traits(t)->blck_size == 32 ? 160 : 0),
                                  act);
        CHECK(bad == 0, "%s %s: %d outputs differ from vec_dot_ref", k->name,
              fl_type_traits(t)->name, bad);
        printf("  %s: %s vec_dot, tiles, one-token = vec_dot_ref bit for bit, extremes incl.: "
               "%d cases\n", k->name, fl_type_traits(t)->name, cases);
    }
}

static void fill_tie_block(float *x)
{
    /* amax 127: scale 1, so k + 0.5 are exact rounding ties */
    for (int j = 0; j < 32; j++)
        x[j] = (float)((int)(rnd() % 200) - 100) + 0.5f;
    x[(int)(rnd() % 32)] = (rnd() & 1) ? 127.0f : -127.0f;
}

static void test_quant(const struct fl_cpu_kernels *k)
{
    const int n = 256 * 9;
    float *x = malloc(n * sizeof(float));
    struct fl_block_q8_0 *a = malloc(n / 32 * sizeof(*a)), *b = malloc(n / 32 * sizeof(*b));
    struct fl_block_q8_K *ka = calloc(n / 256, sizeof(*ka)), *kb = calloc(n / 256, sizeof(*kb));
    int q0_bad = 0, qk_bad = 0;
    for (int rep = 0; rep < 20; rep++) {
        rand_act(x, n);
        for (int j = 0; j < 32; j++)
            x[j] = 0.0f;                    /* an all-zero block */
        fill_tie_block(x + 64);             /* ties for Q8_0 */
        x[300] = -1e3f;                     /* negative max in a Q8_K block */
        x[301] = 1e3f;                      /* equal magnitude later: first wins */
        for (int j = 512; j < 768; j++)
            x[j] = 0.0f;                    /* an all-zero Q8_K block */
        fl_type_from_float_act(FL_TYPE_Q8_0)(x, a, n);
        k->quant[FL_TYPE_Q8_0](x, b, n);
        q0_bad += memcmp(a, b, n / 32 * sizeof(*a)) != 0;
        fl_type_traits(FL_TYPE_Q8_K)->from_float(x, ka, n);
        k->quant[FL_TYPE_Q8_K](x, kb, n);
        for (int i = 0; i < n / 256; i++) {
            /* ggml leaves bsums of an all-zero block unwritten */
            size_t len = ka[i].d != 0.0f ? sizeof(ka[i]) : offsetof(struct fl_block_q8_K, bsums);
            qk_bad += memcmp(&ka[i], &kb[i], len) != 0;
        }
    }
    /* the ties really are rounded half to even */
    k->quant[FL_TYPE_Q8_0](x, a, n);
    int ties_even = 1;
    for (int j = 0; j < 32; j++) {
        const float v = x[64 + j];
        if (fabsf(v) != 127.0f && (a[2].qs[j] & 1))
            ties_even = 0;
    }
    CHECK(ties_even, "Q8_0 ties not rounded half to even");
    CHECK(q0_bad == 0, "%s quantize Q8_0: %d of 20 rows differ from scalar", k->name, q0_bad);
    CHECK(qk_bad == 0, "%s quantize Q8_K: %d blocks differ from ggml's reference", k->name, qk_bad);
    if (k->quant[FL_TYPE_F16]) {
        fl_f16 h1[100], h2[100];
        rand_act(x, 100);
        x[3] = 65520.0f; /* rounds to inf */
        x[4] = 1e-7f;    /* subnormal half */
        k->quant[FL_TYPE_F16](x, h1, 100);
        fl_type_traits(FL_TYPE_F16)->from_float(x, h2, 100);
        CHECK(memcmp(h1, h2, sizeof(h1)) == 0, "%s quantize F16 differs", k->name);
    }
    printf("  %s: Q8_0 / Q8_K / F16 activation quantizers byte-identical\n", k->name);
    free(x);
    free(a);
    free(b);
    free(ka);
    free(kb);
}

/* Q4_K_R8 (repack.h): every level's kernel, as tile (up to its tile_c
 * tokens) and as tile1 (one token, two groups per call), gives for each row
 * and token the exact bits of AVX2's Q4_K vec_dot on the rows it was
 * repacked from (the float order a paged run uses on the file's bytes, at
 * AVX2 and AVX-512 alike: main checks the two levels agree); also with the
 * extreme row. So does the file rows' Q4_K tile of AVX2 and AVX-512 on
 * distinct rows and tokens, up to 40 tokens (its many-token path rebuilds
 * rows as Q4_K_R8 in chunks of blocks). Only where the CPU has AVX2 (the
 * lowest level that repacks). */
static void test_repack_q4_K(enum fl_cpu_level top)
{
    if (top < FL_CPU_AVX2) {
        printf("  Q4_K_R8: skipped (no AVX2: nothing is repacked)\n");
        return;
    }
    /* 4352: 17 blocks, past w8_q4_K's 16-block chunk; 40 tokens: several
     * T8_KC groups and a partial one at both levels */
    static const int k_lens[] = { 256, 768, 2304, 3584, 4352 };
    enum { NROW = 16, NTOK = 40 };
    struct fl_cpu_kernels kref;
    fl_cpu_kernels_for(FL_CPU_AVX2, &kref);
    int cases = 0;
    for (int li = 0; li < 5; li++) {
        const int n = k_lens[li];
        const size_t rs = fl_row_size(FL_TYPE_Q4_K, n), rs8 = fl_row_size(FL_TYPE_Q4_K_R8, n);
        CHECK(fl_repack_layout(FL_TYPE_Q4_K, n, NROW) == FL_TYPE_Q4_K_R8 &&
                  fl_repack_layout(FL_TYPE_Q4_K, n, NROW - 4) == -1 &&
                  fl_repack_layout(FL_TYPE_Q8_0, n, NROW) == -1 &&
                  fl_repack_size(FL_TYPE_Q4_K_R8, n, NROW) == rs8 * NROW,
              "repack layout rules n=%d", n);
        char *w = malloc(rs * NROW);
        char *w8 = aligned_alloc(64, rs8 * NROW);
        float *x = malloc((size_t)n * sizeof(float));
        char *xa = malloc(fl_row_size(FL_TYPE_Q8_K, n) * NTOK);
        for (int r = 0; r < NROW; r++)
            rand_weights(FL_TYPE_Q4_K, w + (size_t)r * rs, n);
        if (li == 3)
            extreme_kq_row(FL_TYPE_Q4_K, w + 5 * rs, n);
        for (int c = 0; c < NTOK; c++) {
            rand_act(x, n);
            if (li == 3 && c == 0)
                for (int i = 0; i < n; i++)
                    x[i] = 1.0f;
            quant_act(&kref, FL_TYPE_Q4_K, x, xa + c * fl_row_size(FL_TYPE_Q8_K, n), n);
        }
        CHECK(fl_repack(FL_TYPE_Q4_K, w, w8, n, NROW) == 0, "repack n=%d", n);
        float ref[NTOK][NROW];
        const void *xs[NTOK];
        for (int c = 0; c < NTOK; c++) {
            xs[c] = xa + c * fl_row_size(FL_TYPE_Q8_K, n);
            for (int r = 0; r < NROW; r++)
                kref.vec_dot[FL_TYPE_Q4_K](n, &ref[c][r], w + (size_t)r * rs, xs[c]);
        }
        for (int lv = FL_CPU_SCALAR; lv <= (int)top; lv++) {
            struct fl_cpu_kernels k;
            fl_cpu_kernels_for((enum fl_cpu_level)lv, &k);
            for (int nc = 1; nc <= NTOK && nc <= k.tile_c[FL_TYPE_Q4_K_R8]; nc++) {
                float out[NTOK][NROW];
                float *ys[NTOK];
                for (int c = 0; c < NTOK; c++)
                    ys[c] = out[c];
                memset(out, 0xff, sizeof(out));
                for (int g = 0; g < NROW / 8; g++) {
                    float *yg[NTOK];
                    for (int c = 0; c < nc; c++)
                        yg[c] = ys[c] + 8 * g;
                    k.tile[FL_TYPE_Q4_K_R8](n, 8, w8 + (size_t)(8 * g) * rs8, rs8, nc, xs, NULL, yg);
                }
                for (int c = 0; c < nc; c++)
                    for (int r = 0; r < NROW; r++)
                        CHECK(memcmp(&out[c][r], &ref[c][r], 4) == 0,
                              "%s Q4_K_R8 tile n=%d nc=%d row %d tok %d: %.9g vs Q4_K %.9g", k.name,
                              n, nc, r, c, out[c][r], ref[c][r]);
                cases++;
            }
            /* the file rows' tile (paged experts), whose many-token path
             * rebuilds rows as this layout: the same bits, any rows */
            for (int nc = 1; lv >= FL_CPU_AVX2 && nc <= NTOK && nc <= k.tile_c[FL_TYPE_Q4_K]; nc++)
                for (int nr = 3; nr <= 8; nr += 5)
                    for (int r0 = 0; r0 + nr <= NROW; r0 += nr) {
                        float out[NTOK][8], *ys[NTOK];
                        for (int c = 0; c < nc; c++)
                            ys[c] = out[c];
                        k.tile[FL_TYPE_Q4_K](n, nr, w + (size_t)r0 * rs, rs, nc, xs, NULL, ys);
                        for (int c = 0; c < nc; c++)
                            for (int r = 0; r < nr; r++)
                                CHECK(memcmp(&out[c][r], &ref[c][r0 + r], 4) == 0,
                                      "%s Q4_K tile n=%d %dx%d row %d tok %d: %.9g vs %.9g",
                                      k.name, n, nr, nc, r0 + r, c, out[c][r], ref[c][r0 + r]);
                        cases++;
                    }
            float one[NROW];
            float *y1[1] = { one };
            k.tile1[FL_TYPE_Q4_K_R8](n, NROW, w8, rs8, 1, xs, NULL, y1);
            CHECK(memcmp(one, ref[0], sizeof(one)) == 0, "%s Q4_K_R8 tile1 n=%d", k.name, n);
            cases++;
        }
        free(w);
        free(w8);
        free(x);
        free(xa);
    }
    printf("  Q4_K_R8 (repacked) kernels of every level, and Q4_K tiles of many tokens, = AVX2 "
           "Q4_K vec_dot bit for bit: %d cases\n",
           cases);
}

/* A value in [-1, 1], in thousandths. */
static float rnd_unit(void)
{
    return (float)((int)(rnd() % 2001) - 1000) / 1000.0f;
}

/* The grouped attention kernels are the one-head ones bit for bit, for
 * every group size (1..12) and every tail of keys (the logits of a model whose
 * heads share a KV head must not depend on the grouping); scale_max is the
 * scalar level's. Head size dk <= 128. */
static void test_attn_groups(const struct fl_cpu_kernels *k, const struct fl_cpu_kernels *ref,
                             int level, int dk)
{
    enum { N = 200, R = 12, DKM = 128 }; /* up to 12 heads per KV head, as glm4moe */
    static float q[R * DKM], kt[DKM * N], v[N * DKM], w[N];
    static float one[R * N], g[R * N], wa[R * (DKM + N)], wb[R * (DKM + N)];
    for (int i = 0; i < R * dk; i++)
        q[i] = rnd_unit();
    for (int i = 0; i < dk * N; i++)
        kt[i] = rnd_unit();
    for (int i = 0; i < N * dk; i++)
        v[i] = rnd_unit();
    for (int i = 0; i < N; i++)
        w[i] = (float)(rnd() % 1000) / 1000.0f;
    static const int ns[] = { 1, 5, 15, 16, 17, 31, 32, 33, 47, 64, 200 };
    bool same = true;
    const int64_t lda = dk + N;
    for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++) {
        const int n = ns[a];
        for (int h = 0; h < R; h++)
            k->attn.key_scores(one + h * N, q + h * dk, kt, N, dk, n);
        for (int r = 1; k->attn.key_scores_group && r <= R; r++) {
            k->attn.key_scores_group(g, N, q, r, kt, N, dk, n);
            for (int h = 0; h < r; h++)
                same &= memcmp(g + h * N, one + h * N, sizeof(float) * (size_t)n) == 0;
        }
        for (int h = 0; h < R; h++)
            for (int i = 0; i < n; i++)
                wa[h * lda + dk + i] = wb[h * lda + dk + i] = w[(i + 7 * h) % N];
        for (int r = 1; k->attn.weighted_rows_group && r <= R; r++) {
            k->attn.weighted_rows_group(wa, lda, wa + dk, r, v, n, dk);
            for (int h = 0; h < r; h++) {
                k->attn.weighted_rows(wb + h * lda, wb + h * lda + dk, v, n, dk);
                same &= memcmp(wa + h * lda, wb + h * lda, sizeof(float) * (size_t)dk) == 0;
            }
        }
        float m1[N], m2[N];
        memcpy(m1, one, sizeof(float) * (size_t)n);
        memcpy(m2, one, sizeof(float) * (size_t)n);
        const float x1 = k->attn.scale_max(m1, n, 0.125f), x2 = ref->attn.scale_max(m2, n, 0.125f);
        same &= memcmp(&x1, &x2, sizeof(x1)) == 0 && memcmp(m1, m2, sizeof(float) * (size_t)n) == 0;
    }
    CHECK(same, "level %d, head size %d: grouped attention kernels differ from the one-head ones",
          level, dk);
}

/* Attention's kernels of one level against the scalar level's: the F16
 * steps give the same bits (conversions and FMAs are exact), the F32 steps
 * agree within float rounding of the double-precision sums. */
static void test_attn(const struct fl_cpu_kernels *k, int level)
{
    struct fl_cpu_kernels ref;
    fl_cpu_kernels_for(FL_CPU_SCALAR, &ref);
    enum { N = 200, DK = 72, R = 4 };
    fl_f16 x[N], y[N], acc[N], acc_ref[N];
    float f[N], f_ref[N], q[R * DK], kt[DK * N], s[R * N], s2[N], w[N], v[N * DK];
    float wr[DK], wr_ref[DK];
    for (int i = 0; i < N; i++) {
        x[i] = fl_f32_to_f16((float)((int)(rnd() % 2001) - 1000) / 256.0f);
        y[i] = fl_f32_to_f16((float)((int)(rnd() % 2001) - 1000) / 512.0f);
        acc[i] = acc_ref[i] = fl_f32_to_f16((float)((int)(rnd() % 201) - 100) / 64.0f);
        w[i] = (float)(rnd() % 1000) / 1000.0f;
    }
    for (int i = 0; i < R * DK; i++)
        q[i] = rnd_unit();
    for (int i = 0; i < DK * N; i++)
        kt[i] = rnd_unit();
    for (int i = 0; i < N * DK; i++)
        v[i] = rnd_unit();
    int same = 1;
    for (int n = 1; n <= N; n += 37) {
        float a = k->attn.dot_f16(x, y, n), b = ref.attn.dot_f16(x, y, n);
        same &= memcmp(&a, &b, sizeof(a)) == 0;
    }
    k->attn.mad_f16(acc, x, 0.37f, N);
    ref.attn.mad_f16(acc_ref, x, 0.37f, N);
    k->attn.scale_f16(acc, 0.61f, N);
    ref.attn.scale_f16(acc_ref, 0.61f, N);
    k->attn.f16_to_f32(acc, f, N);
    ref.attn.f16_to_f32(acc_ref, f_ref, N);
    same &= memcmp(acc, acc_ref, sizeof(acc)) == 0 && memcmp(f, f_ref, sizeof(f)) == 0;
    CHECK(same, "level %d: attention's F16 steps differ from the scalar ones", level);
    /* a quantized V's F32 steps and a Q8_0 row's values: the scalar bits */
    float fa[N], fb[N];
    memcpy(fa, v, sizeof(fa));
    memcpy(fb, v, sizeof(fb));
    k->attn.mad_f32(fa, w, 0.37f, N - 3);
    ref.attn.mad_f32(fb, w, 0.37f, N - 3);
    k->attn.scale_f32(fa, 0.61f, N - 3);
    ref.attn.scale_f32(fb, 0.61f, N - 3);
    struct fl_block_q8_0 qb[N / 32];
    fl_type_from_float_act(FL_TYPE_Q8_0)(v, qb, N / 32 * 32);
    float qa[N / 32 * 32], qr[N / 32 * 32];
    fl_type_traits(FL_TYPE_Q8_0)->to_float(qb, qr, N / 32 * 32);
    if (k->attn.q8_0_to_f32)
        k->attn.q8_0_to_f32(qb, qa, N / 32 * 32);
    else
        memcpy(qa, qr, sizeof(qa));
    CHECK(memcmp(fa, fb, sizeof(fa)) == 0 && memcmp(qa, qr, sizeof(qa)) == 0,
          "level %d: a quantized V's F32 steps differ from the scalar ones", level);
    /* key scores: every head of a group, one at a time and together */
    double worst = 0;
    for (int h = 0; h < R; h++) {
        k->attn.key_scores(s + h * N, q + h * DK, kt, N, DK, N);
        for (int i = 0; i < N; i++) {
            double d = 0;
            for (int j = 0; j < DK; j++)
                d += (double)q[h * DK + j] * kt[j * N + i];
            worst = fmax(worst, fabs(s[h * N + i] - d));
        }
    }
    CHECK(worst < 1e-4, "level %d: key scores off by %g", level, worst);
    for (int dk = 64; dk <= 128; dk += dk == 64 ? 8 : 56) /* 64, 72 (no grouped V sums), 128 */
        test_attn_groups(k, &ref, level, dk);
    for (int i = 0; i < N; i++)
        s2[i] = s[i] - 5.0f;
    const float sum = k->attn.exp_shifted(s2, N, 1.0f);
    double dsum = 0, werr = 0;
    for (int i = 0; i < N; i++) {
        const double e = exp((double)s[i] - 6.0);
        dsum += e;
        werr = fmax(werr, fabs(s2[i] - e) / e);
    }
    CHECK(werr < 3e-6 && fabs(sum - dsum) / dsum < 1e-5, "level %d: exp off by %g", level, werr);
    k->attn.weighted_rows(wr, w, v, N, DK);
    ref.attn.weighted_rows(wr_ref, w, v, N, DK);
    double rerr = 0;
    for (int d = 0; d < DK; d++)
        rerr = fmax(rerr, fabs(wr[d] - wr_ref[d]));
    CHECK(rerr < 1e-4, "level %d: weighted rows off by %g", level, rerr);
    printf("  attention kernels (level %d): F16 steps = scalar bits; key scores %.1e, exp %.1e, "
           "weighted rows %.1e from the references\n", level, worst, werr, rerr);
}

int main(void)
{
    fl_types_init();
    const enum fl_cpu_level top = fl_cpu_level();
    printf("test-cpu-kernels: %s\n", fl_cpu_features());
    for (int lv = FL_CPU_SCALAR; lv <= (int)top; lv++) {
        struct fl_cpu_kernels k;
        fl_cpu_kernels_for((enum fl_cpu_level)lv, &k);
        test_vec_dot(&k, lv);
        test_attn(&k, lv);
        test_quant(&k);
        test_exact(&k);
        if (lv >= FL_CPU_AVX2) {
            struct fl_cpu_kernels k2;
            fl_cpu_kernels_for(FL_CPU_AVX2, &k2);
            /* the Q4_K decode kernel follows the row-transposed kernel's
             * float order, i.e. its own level's vec_dot */
            test_kq_decode(&k, &k, FL_TYPE_Q4_K);
            test_kq_decode(&k, &k2, FL_TYPE_Q5_K);
            test_kq_decode(&k, &k2, FL_TYPE_Q6_K);
        }
    }
    test_repack_q4_K(top);
    if (top >= FL_CPU_AVX512) {
        /* row_dot, what attention over a quantized cache dots keys with:
         * ggml's AVX2 order at both levels, whatever vec_dot the AVX-512
         * level's matmuls use */
        struct fl_cpu_kernels k2, k3;
        fl_cpu_kernels_for(FL_CPU_AVX2, &k2);
        fl_cpu_kernels_for(FL_CPU_AVX512, &k3);
        static const enum fl_type kv[] = { FL_TYPE_Q8_0, FL_TYPE_Q4_0, FL_TYPE_Q4_1, FL_TYPE_Q5_0,
                                           FL_TYPE_Q5_1, FL_TYPE_IQ4_NL };
        int rows_same = 1;
        for (size_t ti = 0; ti < sizeof(kv) / sizeof(kv[0]); ti++) {
            const struct fl_type_traits *tr = fl_type_traits(kv[ti]);
            float x[256], y[256];
            for (int i = 0; i < 256; i++)
                x[i] = rnd_unit(), y[i] = rnd_unit();
            uint8_t kx[512], qy[512];
            tr->from_float(x, kx, 256);
            fl_type_from_float_act(tr->vec_dot_type)(y, qy, 256);
            for (int n = 32; n <= 256; n += 96) {
                float a, b;
                k2.row_dot[kv[ti]](n, &a, kx, qy);
                k3.row_dot[kv[ti]](n, &b, kx, qy);
                rows_same &= memcmp(&a, &b, sizeof(a)) == 0;
            }
        }
        CHECK(rows_same, "row_dot: the AVX-512 level's bits differ from the AVX2 level's");
        /* the types both levels run with kernels of one shape: per-row
         * 8-lane kernels, or (Q4_K) the row-transposed one of both */
        int same = 1, n_same = 0;
        for (size_t ti = 0; ti < N_TYPES; ti++) {
            struct fl_cpu_kernels k2, k3;
            fl_cpu_kernels_for(FL_CPU_AVX2, &k2);
            fl_cpu_kernels_for(FL_CPU_AVX512, &k3);
            if ((k3.tile_r[k_types[ti]] == 8) != (k2.tile_r[k_types[ti]] == 8) ||
                k_types[ti] == FL_TYPE_BF16)
                continue; /* row-transposed AVX-512 kernel or AVX512-BF16's
                           * dot instruction: another float order */
            n_same++;
            for (int bi = 0; bi < 7; bi++)
                same &= memcmp(&g_res[ti][bi][1], &g_res[ti][bi][2], 4) == 0;
        }
        CHECK(same, "AVX2 and AVX-512 kernels differ");
        printf("  avx2 and avx512 bit-identical for the %d types with the same kernel shape: %s\n",
               n_same, same ? "yes" : "no");
    }
    /* FL_CPU_FEATURES caps the level and the installed vec_dot follows */
    setenv("FL_CPU_FEATURES", "scalar", 1);
    fl_types_init();
    CHECK(fl_cpu_level() == FL_CPU_SCALAR, "FL_CPU_FEATURES=scalar ignored");
    CHECK(strncmp(fl_cpu_features(), "scalar", 6) == 0, "features string: %s", fl_cpu_features());
    CHECK(fl_type_traits(FL_TYPE_Q4_K)->vec_dot == fl_type_traits(FL_TYPE_Q4_K)->vec_dot_ref,
          "scalar level must install the reference vec_dot");
    struct fl_cpu_kernels ks;
    fl_cpu_kernels_for(FL_CPU_SCALAR, &ks);
    CHECK(memcmp(&fl_cpu_kernels()->attn, &ks.attn, sizeof(ks.attn)) == 0,
          "FL_CPU_FEATURES=scalar: attention keeps another level's kernels");
    if (top >= FL_CPU_AVX2) {
        setenv("FL_CPU_FEATURES", "avx2", 1);
        fl_types_init();
        CHECK(fl_cpu_level() == FL_CPU_AVX2, "FL_CPU_FEATURES=avx2 ignored");
        CHECK(fl_type_traits(FL_TYPE_Q4_K)->vec_dot != fl_type_traits(FL_TYPE_Q4_K)->vec_dot_ref,
              "avx2 level must install a SIMD vec_dot");
    }
    unsetenv("FL_CPU_FEATURES");
    fl_types_init();
    return check_summary("test-cpu-kernels");
}
