/* kern-amx.c: products of many tokens on AMX int8 tiles (Q4_K, and the
 * 32-value block types Q8_0, Q4_0, IQ4_NL, MXFP4 further down), bit for
 * bit the AVX-512 VNNI kernels' results.
 *
 * One call: up to 16 weight rows x up to 64 tokens. AMX multiplies bytes,
 * so a Q4_K block (8 sub-blocks of 32 4-bit quants w, each with a 6-bit
 * scale sc) is first "expanded" once per call into the weight side of the
 * tiles: the products w * sc (<= 15 * 63 = 945) as two byte planes, lo =
 * (w*sc) & 255 and hi = (w*sc) >> 8, in the tile layout B[k/4][row][k%4].
 * Then per 16 tokens (A: their Q8_K quants, as stored)
 *     C_lo += A . B_lo,  C_hi += A . B_hi   (tdpbsud: int8 x uint8)
 * and S = C_lo + 256 * C_hi = sum_k sc_k * dot_k is the same exact integer
 * the VNNI kernels form; a third plane holds each position's sub-block min,
 * so C_min = sum_k min_k * bsum_k is the mins term M (exact); the float
 * steps
 *     acc = fma(S, d * dy, acc); acc = fma(-M, dmin * dy, acc)
 * are t8k_float's (kern-q4k-transposed.inc) one for one, with lanes = 16 rows. So a
 * token's logits are the same bits whether its product ran here, in the
 * VNNI kernels of a decode step, or in the repacked layout's kernel, and
 * whatever else shares the step (batch invariance, paged = resident).
 *
 * The expansion costs per weight what one token's dot costs, and is paid
 * once per call: products of fewer tokens than amx_min go to the VNNI
 * kernels. Measured (bench-kernels -t 1 -k 4096 -m 4096, Xeon with AMX,
 * GFLOP per CPU-second, AMX / VNNI): Q4_K_R8 at 8 tokens 195 / 194, 16:
 * 251 / 194, 32: 320 / 193, 64: 329 / 186; file rows (rebuilt per call)
 * at 16: 126 / 129, 32: 196 / 137, 64: 244 / 130. Hence 16 and 32.
 *
 * Tiles need the process's permission (dispatch.c asks for it at start)
 * and a tile configuration in the thread that uses them: each call loads
 * it and releases the tiles at its end (amx_configure). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu-impl.h"

#define FL_AMX_TGT                                                                          \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi," \
                          "amx-tile,amx-int8")))
#define FL_INL static inline FL_AMX_TGT __attribute__((always_inline))
#include "backend/cpu/x86-blocks.h"

#define AMX_ROWS 16 /* weight rows per call: the tiles' 16 columns */
#define AMX_TOKS 64 /* tokens per call: 4 tiles of 16, one after another */

/* GCC's tile intrinsics tell the compiler too little: _tile_loadconfig's
 * operand is 8 bytes (the rest of the configuration's stores may be moved
 * past it or dropped: SIGILL), and _tile_loadd reads no memory at all (the
 * stores that fill a panel could sink below it, or be removed as dead).
 * So the configuration goes through an operand of its whole size, and each
 * tile load follows a compiler barrier. */
#define FL_TILE_LOAD(t, base, stride)              \
    do {                                           \
        __asm__ volatile("" ::: "memory");         \
        _tile_loadd(t, base, stride);              \
    } while (0)

/* ldtilecfg's 64-byte operand (palette 1). */
struct tile_config {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

static FL_AMX_TGT void load_config(const struct tile_config *c)
{
    __asm__ volatile("ldtilecfg %0" ::"m"(*c));
}

/* Eight tiles of 16 rows x 64 bytes. Loaded at the start of each call
 * and released at its end (_tile_release): between calls the thread holds
 * no tile state, so a context switch saves none of it and threads that
 * never multiply many tokens are untouched. A call is tens of
 * microseconds; the two instructions are noise beside it. */
static FL_AMX_TGT void amx_configure(void)
{
    struct tile_config c;
    memset(&c, 0, sizeof(c));
    c.palette = 1;
    for (int i = 0; i < 8; i++) {
        c.colsb[i] = 64;
        c.rows[i] = 16;
    }
    load_config(&c);
}

/* One Q4_K block of 16 rows, ready for the tiles. */
struct q4k_panel {
    _Alignas(64) uint8_t lo[4][16][64]; /* [64-value chunk][k/4][row*4 + k%4] */
    _Alignas(64) uint8_t hi[4][16][64];
    _Alignas(64) uint8_t mins[4][16][64]; /* each position's sub-block min, as lo */
    _Alignas(64) float d[16], dmin[16];
};

/* 32 words: word 4r + t = sc[r] (8 rows' scales, each for its 4 bytes) */
FL_INL __m512i scale_words(const uint8_t sc[8])
{
    static const uint8_t idx[32] = { 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
                                     4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7 };
    const __m256i v = _mm256_permutexvar_epi8(_mm256_loadu_si256((const __m256i *)idx),
                                              _mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)sc)));
    return _mm512_cvtepu8_epi16(v);
}

/* The two planes of 64 quants (rows 0-7 from a, 8-15 from b, 4 bytes per
 * row) times their rows' scales. */
FL_INL void plane_row(__m256i a, __m256i b, __m512i sa, __m512i sb, uint8_t *lo, uint8_t *hi)
{
    static const uint8_t even[64] = {
        0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30,
        32, 34, 36, 38, 40, 42, 44, 46, 48, 50, 52, 54, 56, 58, 60, 62,
        64, 66, 68, 70, 72, 74, 76, 78, 80, 82, 84, 86, 88, 90, 92, 94,
        96, 98, 100, 102, 104, 106, 108, 110, 112, 114, 116, 118, 120, 122, 124, 126 };
    const __m512i ie = _mm512_loadu_si512(even);
    const __m512i io = _mm512_add_epi8(ie, _mm512_set1_epi8(1));
    const __m512i pa = _mm512_mullo_epi16(_mm512_cvtepu8_epi16(a), sa);
    const __m512i pb = _mm512_mullo_epi16(_mm512_cvtepu8_epi16(b), sb);
    _mm512_store_si512(lo, _mm512_permutex2var_epi8(pa, ie, pb));
    _mm512_store_si512(hi, _mm512_permutex2var_epi8(pa, io, pb));
}

/* Block b of two 8-row groups (g[1] == g[0] when there is one: its rows'
 * outputs are not stored). */
FL_INL void expand(const struct fl_block_q4_K_r8 *const g[2], struct q4k_panel *p)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m512i sw[2][8];
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 8; k++)
            sw[h][k] = scale_words(g[h]->sc[k]);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) {
            const __m256i ra = _mm256_loadu_si256((const __m256i *)g[0]->qs[i][j]);
            const __m256i rb = _mm256_loadu_si256((const __m256i *)g[1]->qs[i][j]);
            plane_row(_mm256_and_si256(ra, m4), _mm256_and_si256(rb, m4), sw[0][2 * i],
                      sw[1][2 * i], p->lo[i][j], p->hi[i][j]);
            plane_row(_mm256_and_si256(_mm256_srli_epi16(ra, 4), m4),
                      _mm256_and_si256(_mm256_srli_epi16(rb, 4), m4), sw[0][2 * i + 1],
                      sw[1][2 * i + 1], p->lo[i][j + 8], p->hi[i][j + 8]);
        }
    for (int q = 0; q < 4; q++) { /* byte 4r + t: row r's min of sub-block 2q (+1) */
        const __m512i mn = _mm512_castsi256_si512(_mm256_set_m128i(
            _mm_loadu_si128((const __m128i *)g[1]->mn[q]), _mm_loadu_si128((const __m128i *)g[0]->mn[q])));
        const __m512i idx = _mm512_srli_epi32(_mm512_set_epi8(
            60, 60, 60, 60, 56, 56, 56, 56, 52, 52, 52, 52, 48, 48, 48, 48,
            44, 44, 44, 44, 40, 40, 40, 40, 36, 36, 36, 36, 32, 32, 32, 32,
            28, 28, 28, 28, 24, 24, 24, 24, 20, 20, 20, 20, 16, 16, 16, 16,
            12, 12, 12, 12, 8, 8, 8, 8, 4, 4, 4, 4, 0, 0, 0, 0), 1); /* 2 * (m / 4) */
        const __m512i m0 = _mm512_permutexvar_epi8(idx, mn);
        const __m512i m1 = _mm512_permutexvar_epi8(_mm512_add_epi8(idx, _mm512_set1_epi8(1)), mn);
        for (int j = 0; j < 8; j++) {
            _mm512_store_si512(p->mins[q][j], m0);
            _mm512_store_si512(p->mins[q][j + 8], m1);
        }
    }
    const __m256i d = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)g[1]->d),
                                       _mm_loadu_si128((const __m128i *)g[0]->d));
    const __m256i dm = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)g[1]->dmin),
                                        _mm_loadu_si128((const __m128i *)g[0]->dmin));
    _mm512_store_ps(p->d, _mm512_cvtph_ps(d));
    _mm512_store_ps(p->dmin, _mm512_cvtph_ps(dm));
}

/* The distance between x[0..15] when they lie at one positive stride (a
 * tile then loads them where they are), else 0. Compared as addresses:
 * the rows may be in different allocations. */
FL_INL size_t even_stride(const void *const *x)
{
    const uintptr_t x0 = (uintptr_t)x[0], s = (uintptr_t)x[1] - x0;
    if ((uintptr_t)x[1] <= x0)
        return 0;
    for (int c = 2; c < 16; c++)
        if ((uintptr_t)x[c] - x0 != (uintptr_t)c * s)
            return 0;
    return (size_t)s;
}

/* The 16 tokens from x[c0] as a tile's rows for block b: straight from the
 * activations when they lie at one stride, else copied (rows past nc zero). */
struct tok_tile {
    const int8_t *base;
    size_t stride;
    _Alignas(64) int8_t buf[16][FL_QK_K];
};

FL_INL void tok_tile(const void *const *x, int c0, int nc, int b, struct tok_tile *t)
{
    const int n = nc - c0 < 16 ? nc - c0 : 16;
    const char *x0 = (const char *)x[c0];
    const size_t s = n == 16 ? even_stride(x + c0) : 0;
    if (s) {
        t->base = ((const struct fl_block_q8_K *)x0 + b)->qs;
        t->stride = s;
        return;
    }
    for (int c = 0; c < 16; c++) {
        if (c < n)
            memcpy(t->buf[c], ((const struct fl_block_q8_K *)x[c0 + c] + b)->qs, FL_QK_K);
        else
            memset(t->buf[c], 0, FL_QK_K);
    }
    t->base = t->buf[0];
    t->stride = FL_QK_K;
}

/* The float steps of block b for the n tokens from c0 (lanes = rows), from
 * the tiles' int32 sums C[lo/hi/min][token][row]. */
FL_INL void finish16(const struct q4k_panel *p, const int32_t C[3][16][16], const void *const *x,
                      int c0, int n, int b, float (*acc)[AMX_ROWS])
{
    const __m512 d = _mm512_load_ps(p->d), dmin = _mm512_load_ps(p->dmin);
    for (int c = 0; c < n; c++) {
        const float dy = ((const struct fl_block_q8_K *)x[c0 + c] + b)->d;
        const __m512i S = _mm512_add_epi32(_mm512_load_si512(C[0][c]),
                                           _mm512_slli_epi32(_mm512_load_si512(C[1][c]), 8));
        const __m512i M = _mm512_load_si512(C[2][c]);
        const __m512 vy = _mm512_set1_ps(dy);
        __m512 a = _mm512_load_ps(acc[c0 + c]);
        a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(d, vy), a);
        a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_setzero_si512(), M)),
                            _mm512_mul_ps(dmin, vy), a);
        _mm512_store_ps(acc[c0 + c], a);
    }
}

/* Tokens c0 .. c0+15 (or fewer) of block b against the panel: tiles 0-2
 * the sums against the lo, hi and min planes (5-7), 4 the tokens; the sums
 * go to C, read by finish16 only after the block's last pass (a vector load
 * right behind a tile store waits for it). */
FL_INL void tiles_pass(const struct q4k_panel *p, const void *const *x, int c0, int nc, int b,
                       struct tok_tile *t, int32_t C[3][16][16])
{
    tok_tile(x, c0, nc, b, t);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    for (int i = 0; i < 4; i++) {
        FL_TILE_LOAD(4, t->base + 64 * i, t->stride);
        FL_TILE_LOAD(5, p->lo[i], 64);
        _tile_dpbsud(0, 4, 5);
        FL_TILE_LOAD(6, p->hi[i], 64);
        _tile_dpbsud(1, 4, 6);
        FL_TILE_LOAD(7, p->mins[i], 64);
        _tile_dpbsud(2, 4, 7);
    }
    _tile_stored(0, C[0], 64);
    _tile_stored(1, C[1], 64);
    _tile_stored(2, C[2], 64);
}

/* The shared body: blocks(b, g) names block b's two row groups. */
FL_INL void q4k_tiles(int n, int nr, int nc, const void *const *x, float *const *y,
                       const void *w, size_t ws, int r8)
{
    amx_configure();
    _Alignas(64) float acc[AMX_TOKS][AMX_ROWS];
    _Alignas(64) struct q4k_panel p;
    _Alignas(64) struct fl_block_q4_K_r8 conv[2];
    struct tok_tile t;
    _Alignas(64) int32_t C[AMX_TOKS / 16][3][16][16];
    memset(acc, 0, sizeof(acc));
    const int nb = n / FL_QK_K;
    for (int b = 0; b < nb; b++) {
        const struct fl_block_q4_K_r8 *g[2];
        if (r8) { /* groups of 8 rows, 8 * ws bytes apart */
            g[0] = (const struct fl_block_q4_K_r8 *)w + b;
            g[1] = nr > 8 ? (const struct fl_block_q4_K_r8 *)((const char *)w + 8 * ws) + b : g[0];
        } else {  /* file rows: rebuilt as the layout, rows past nr repeat the last */
            for (int h = 0; h < 2; h++) {
                const struct fl_block_q4_K *rows[8];
                for (int r = 0; r < 8; r++) {
                    const int rr = 8 * h + r < nr ? 8 * h + r : nr - 1;
                    rows[r] = (const struct fl_block_q4_K *)((const char *)w + (size_t)rr * ws) + b;
                }
                to_r8(rows, &conv[h]);
                g[h] = &conv[h];
            }
        }
        expand(g, &p);
        for (int c0 = 0; c0 < nc; c0 += 16)
            tiles_pass(&p, x, c0, nc, b, &t, C[c0 / 16]);
        for (int c0 = 0; c0 < nc; c0 += 16)
            finish16(&p, C[c0 / 16], x, c0, nc - c0 < 16 ? nc - c0 : 16, b, acc);
    }
    _tile_release();
    for (int c = 0; c < nc; c++)
        memcpy(y[c], acc[c], (size_t)nr * sizeof(float));
}

static FL_AMX_TGT void amx_q4_K(int n, int nr, const void *w, size_t ws, int nc,
                                const void *const *x, const int16_t *const *xsum, float *const *y)
{
    (void)xsum;
    q4k_tiles(n, nr, nc, x, y, w, ws, 0);
}

static FL_AMX_TGT void amx_q4_K_r8(int n, int nr, const void *w, size_t ws, int nc,
                                   const void *const *x, const int16_t *const *xsum,
                                   float *const *y)
{
    (void)xsum;
    q4k_tiles(n, nr, nc, x, y, w, ws, 1);
}


/* --- Q8_0, Q4_0, IQ4_NL, MXFP4 ----------------------------------------------
 * A block is 32 weights that decode to int8 (x86-blocks.h's unpack_*) and
 * one scale; the activations are Q8_0. Per block and 16 tokens one
 * tdpbssd (int8 x int8, K = 32) gives the exact sums S, and the float step
 * is t8_<type>'s (kern-avx512.c) lane for lane: acc + (d_w * d_x) * S, for
 * Q4_0 acc + (S * d_w) * d_x. Tiles: 0 the sums, 4 the tokens (16 x 32
 * bytes), 6 the weights (8 rows of 16 rows x 4 bytes). */
static FL_AMX_TGT void amx_configure_q8(void)
{
    struct tile_config c;
    memset(&c, 0, sizeof(c));
    c.palette = 1;
    c.colsb[0] = 64;
    c.rows[0] = 16;
    c.colsb[4] = 32;
    c.rows[4] = 16;
    c.colsb[6] = 64;
    c.rows[6] = 8;
    load_config(&c);
}

/* The 16 tokens from x[c0] for block b: at one stride, or copied. */
FL_INL void q8_tokens(const void *const *x, int c0, int nc, int b, int8_t buf[16][32],
                      const int8_t **base, size_t *stride)
{
    const int n = nc - c0 < 16 ? nc - c0 : 16;
    const char *x0 = (const char *)x[c0];
    const size_t s = n == 16 ? even_stride(x + c0) : 0;
    if (s) {
        *base = ((const struct fl_block_q8_0 *)x0 + b)->qs;
        *stride = s;
        return;
    }
    for (int c = 0; c < 16; c++) {
        if (c < n)
            memcpy(buf[c], ((const struct fl_block_q8_0 *)x[c0 + c] + b)->qs, 32);
        else
            memset(buf[c], 0, 32);
    }
    *base = buf[0];
    *stride = 32;
}

/* Block b's sums for the call's tokens into C[tile][token][row]. */
FL_INL void q8_sums(const uint8_t B[8][64], const void *const *x, int nc, int b,
                    int32_t C[AMX_TOKS / 16][16][16])
{
    _Alignas(64) int8_t buf[16][32];
    FL_TILE_LOAD(6, B, 64);
    for (int c0 = 0; c0 < nc; c0 += 16) {
        const int8_t *base;
        size_t stride;
        q8_tokens(x, c0, nc, b, buf, &base, &stride);
        _tile_zero(0);
        FL_TILE_LOAD(4, base, stride);
        _tile_dpbssd(0, 4, 6);
        _tile_stored(0, C[c0 / 16], 64);
    }
}

#define FL_AMX_PROD_FIRST(S, dw, dx) _mm512_mul_ps(_mm512_mul_ps(dw, dx), S)
#define FL_AMX_S_FIRST(S, dw, dx) _mm512_mul_ps(_mm512_mul_ps(S, dw), dx)

/* Block b of 16 rows (rows past nr repeat the last) in the tile layout
 * B[k/4][row*4 + k%4], and the rows' scales; then the sums and the float
 * steps of every token. */
#define FL_AMX_Q8_FAMILY(T, COMBINE)                                                      \
    static FL_AMX_TGT void amx_##T(int n, int nr, const void *w, size_t ws, int nc,        \
                                   const void *const *x, const int16_t *const *xsum,      \
                                   float *const *y)                                       \
    {                                                                                     \
        (void)xsum;                                                                       \
        amx_configure_q8();                                                               \
        _Alignas(64) float acc[AMX_TOKS][AMX_ROWS];                                       \
        _Alignas(64) uint8_t B[8][64];                                                    \
        _Alignas(64) float d[16];                                                         \
        _Alignas(64) int32_t C[AMX_TOKS / 16][16][16];                                    \
        memset(acc, 0, sizeof(acc));                                                      \
        for (int b = 0; b < n / 32; b++) {                                                \
            for (int h = 0; h < 2; h++) {                                                 \
                __m256i v[8];                                                             \
                for (int r = 0; r < 8; r++) {                                             \
                    const int rr = 8 * h + r < nr ? 8 * h + r : nr - 1;                   \
                    v[r] = unpack_##T((const struct fl_block_##T *)((const char *)w +    \
                                                                 (size_t)rr * ws) + b,  \
                                      &d[8 * h + r]);                                     \
                }                                                                         \
                transpose8(v);                                                            \
                for (int j = 0; j < 8; j++)                                               \
                    _mm256_store_si256((__m256i *)(B[j] + 32 * h), v[j]);                 \
            }                                                                             \
            q8_sums(B, x, nc, b, C);                                                      \
            const __m512 dw = _mm512_load_ps(d);                                          \
            for (int c = 0; c < nc; c++) {                                                \
                const __m512 dx = _mm512_set1_ps(                                         \
                    _cvtsh_ss(((const struct fl_block_q8_0 *)x[c] + b)->d));              \
                const __m512 S = _mm512_cvtepi32_ps(_mm512_load_si512(C[c / 16][c % 16])); \
                _mm512_store_ps(acc[c], _mm512_add_ps(_mm512_load_ps(acc[c]),             \
                                                      COMBINE(S, dw, dx)));               \
            }                                                                             \
        }                                                                                 \
        _tile_release();                                                                  \
        for (int c = 0; c < nc; c++)                                                      \
            memcpy(y[c], acc[c], (size_t)nr * sizeof(float));                             \
    }

FL_AMX_Q8_FAMILY(q8_0, FL_AMX_PROD_FIRST)
FL_AMX_Q8_FAMILY(q4_0, FL_AMX_S_FIRST)
FL_AMX_Q8_FAMILY(iq4_nl, FL_AMX_PROD_FIRST)
FL_AMX_Q8_FAMILY(mxfp4, FL_AMX_PROD_FIRST)

/* The tiles' own speed: int8 multiply-adds per second (x2 = ops) of
 * tdpbusd on register-resident tiles (four independent accumulators, no
 * loads in the loop) for about `seconds` of this thread's time; what
 * bench-kernels holds the kernels to. 0 without AMX. */
static FL_AMX_TGT double peak_loop(long iters)
{
    _Alignas(64) static const int8_t zero[16][64];
    amx_configure();
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    FL_TILE_LOAD(4, zero, 64);
    FL_TILE_LOAD(5, zero, 64);
    FL_TILE_LOAD(6, zero, 64);
    FL_TILE_LOAD(7, zero, 64);
    for (long i = 0; i < iters; i++) {
        _tile_dpbusd(0, 4, 6);
        _tile_dpbusd(1, 4, 7);
        _tile_dpbusd(2, 5, 6);
        _tile_dpbusd(3, 5, 7);
    }
    _Alignas(64) int32_t sink[16][16];
    _tile_stored(0, sink, 64);
    _tile_release();
    return (double)sink[0][0];
}

double fl_amx_peak_macs(double seconds)
{
    if (fl_cpu_level() < FL_CPU_AMX)
        return 0;
    long iters = 1 << 12;
    for (;;) {
        struct timespec a, b;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        const double sink = peak_loop(iters);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        const double s = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
        if (s >= seconds || iters > (1L << 34))
            return (double)iters * 4 * 16 * 16 * 64 / s + 0 * sink;
        iters *= s > 0 ? (long)(seconds / s * 1.2) + 2 : 4;
    }
}

void fl_cpu_kernels_amx(struct fl_cpu_kernels *k)
{
    k->amx[FL_TYPE_Q4_K] = amx_q4_K;
    k->amx[FL_TYPE_Q4_K_R8] = amx_q4_K_r8;
    k->amx_r[FL_TYPE_Q4_K] = k->amx_r[FL_TYPE_Q4_K_R8] = AMX_ROWS;
    k->amx_c[FL_TYPE_Q4_K] = k->amx_c[FL_TYPE_Q4_K_R8] = AMX_TOKS;
    k->amx_min[FL_TYPE_Q4_K_R8] = 16;
    k->amx_min[FL_TYPE_Q4_K] = 32;
    static const uint32_t q8_types[4] = { FL_TYPE_Q8_0, FL_TYPE_Q4_0, FL_TYPE_IQ4_NL,
                                          FL_TYPE_MXFP4 };
    const fl_tile_fn q8_fns[4] = { amx_q8_0, amx_q4_0, amx_iq4_nl, amx_mxfp4 };
    for (int i = 0; i < 4; i++) {
        k->amx[q8_types[i]] = q8_fns[i];
        k->amx_r[q8_types[i]] = AMX_ROWS;
        k->amx_c[q8_types[i]] = AMX_TOKS;
        k->amx_min[q8_types[i]] = 16;
    }
    k->name = "amx";
}
