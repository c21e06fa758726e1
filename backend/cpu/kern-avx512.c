/* kern-avx512.c: the x86 kernels for AVX-512 CPUs with VNNI.
 *
 * The shared x86 kernels (kern-x86.inc) are compiled here with VNNI and
 * AVX-512's 32 registers for larger tiles; they stay on 256-bit vectors
 * (no frequency licence drop; AMD Zen 4 splits 512-bit ops anyway).
 *
 * On top, "row-transposed" kernels for Q8_0, Q4_0, IQ4_NL, MXFP4 and Q4_K:
 * 8 weight rows are loaded and transposed so that each int32 lane belongs
 * to one row; every 4 activation bytes are broadcast to all lanes and one
 * VNNI instruction advances 8 dot products. Scales then apply once per
 * block for 8 rows instead of once per row, and the transposes are shared
 * by a tile of tokens: about half the instructions of the per-row kernels.
 * Their float arithmetic per output is a plain sequence over the blocks,
 * acc += S_b * d_w * d_x with S_b the block's exact integer dot product, in
 * the types module's scalar order, so they give vec_dot_ref's exact bits
 * (Q4_K: its own order, t8k_float; its kernels, shared with the AVX2
 * level, are in kern-q4k-transposed.inc), for every tile shape. For one token
 * the transposes do not pay off; the one-token kernels (tile1, dec8_<type>)
 * read rows one after another with per-row integer products and then run
 * the same float steps, so a token's bits never depend on how many tokens
 * share a product (batch invariance), and Q4_K's repacked layout (r8_q4_K,
 * repack.h) follows t8k_float too. */
#define FL_TGT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define FL_SFX(name) name##_avx512
#define FL_VNNI 1
#define FL_QR 4
#define FL_QC 4
#define FL_KR 2
#define FL_KC 4
#define FL_FR 4
#define FL_FC 4
#include "backend/cpu/kern-x86.inc"

/* tokens per transposed tile: the transposes are shared by T8_C tokens */
#define T8_C 8
#define T8_KC 8
#include "backend/cpu/kern-q4k-transposed.inc"

/* sum of a Q8_0 block's quants */
FL_INL int q8_sum(const struct fl_block_q8_0 *b)
{
    const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1),
                                          _mm256_loadu_si256((const __m256i *)b->qs));
    __m128i v = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    v = _mm_add_epi32(v, _mm_unpackhi_epi64(v, v));
    return _mm_cvtsi128_si32(v) + _mm_extract_epi32(v, 1);
}

/* t8_load_<type>: block b of 8 rows as v[j] lane r = 4 weights (values
 * 4j..4j+3) of row r, biased by +128 to go to the unsigned side of VNNI,
 * and the rows' scales. Rows nr..7 get scale 0 (they are never stored). */
FL_INL void t8_load_q8_0(const char *w, size_t ws, int nr, int b, __m256i v[8], float d[8])
{
    for (int r = 0; r < 8; r++) {
        const struct fl_block_q8_0 *blk = (const struct fl_block_q8_0 *)(w + (r < nr ? r : 0) * ws) + b;
        v[r] = unpack_q8_0(blk, &d[r]);
        if (r < nr)
            prefetch_ahead(blk + 2 * FL_PF, sizeof(*blk));
        else
            d[r] = 0.0f;
    }
    transpose8(v);
    for (int j = 0; j < 8; j++)
        v[j] = _mm256_xor_si256(v[j], _mm256_set1_epi8((char)0x80));
}

/* 4-bit formats: the 16 packed bytes of 8 rows, two rows per register,
 * transposed as dwords, so the nibbles come out in lanes = rows: low
 * nibbles of dword j are values 4j.., high nibbles values 16+4j... */
FL_INL void t8_nibbles(const uint8_t *const qs[8], __m256i v[8])
{
    __m256i a[4];
    for (int i = 0; i < 4; i++)
        a[i] = _mm256_loadu2_m128i((const __m128i *)qs[i + 4], (const __m128i *)qs[i]);
    const __m256i t0 = _mm256_unpacklo_epi32(a[0], a[1]), t1 = _mm256_unpackhi_epi32(a[0], a[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(a[2], a[3]), t3 = _mm256_unpackhi_epi32(a[2], a[3]);
    const __m256i c[4] = { _mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                           _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3) };
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int j = 0; j < 4; j++) {
        v[j] = _mm256_and_si256(c[j], m4);
        v[j + 4] = _mm256_and_si256(_mm256_srli_epi16(c[j], 4), m4);
    }
}

/* +128 biased lookup tables (value + 128 as a byte) */
static const uint8_t k_iq4nl_u[16] = { 1, 24, 45, 63, 79, 93, 106, 118,
                                       129, 141, 153, 166, 181, 197, 217, 241 };
static const uint8_t k_mxfp4_u[16] = { 128, 129, 130, 131, 132, 134, 136, 140,
                                       128, 127, 126, 125, 124, 122, 120, 116 };

#define FL_Q4_0_SCALE(blk) h2f((blk)->d)
#define FL_Q4_0_BIAS(v) _mm256_add_epi8(v, _mm256_set1_epi8(120)) /* q - 8 + 128 */
#define FL_IQ4_NL_SCALE(blk) h2f((blk)->d)
#define FL_IQ4_NL_BIAS(v) lut16((const int8_t *)k_iq4nl_u, v)
#define FL_MXFP4_SCALE(blk) fl_e8m0_half((blk)->e)
#define FL_MXFP4_BIAS(v) lut16((const int8_t *)k_mxfp4_u, v)

#define FL_T8_LOAD4(T, SCALE, BIAS)                                                \
    FL_INL void t8_load_##T(const char *w, size_t ws, int nr, int b, __m256i v[8], float d[8]) \
    {                                                                              \
        const uint8_t *qs[8];                                                      \
        for (int r = 0; r < 8; r++) {                                              \
            const struct fl_block_##T *blk =                                       \
                (const struct fl_block_##T *)(w + (r < nr ? r : 0) * ws) + b;      \
            qs[r] = blk->qs;                                                       \
            d[r] = r < nr ? SCALE(blk) : 0.0f;                                     \
            if (r < nr)                                                            \
                prefetch_ahead(blk + 2 * FL_PF, sizeof(*blk));                     \
        }                                                                          \
        t8_nibbles(qs, v);                                                         \
        for (int j = 0; j < 8; j++)                                                \
            v[j] = BIAS(v[j]);                                                     \
    }

FL_T8_LOAD4(q4_0, FL_Q4_0_SCALE, FL_Q4_0_BIAS)
FL_T8_LOAD4(iq4_nl, FL_IQ4_NL_SCALE, FL_IQ4_NL_BIAS)
FL_T8_LOAD4(mxfp4, FL_MXFP4_SCALE, FL_MXFP4_BIAS)

/* S = sum (w+128) x - 128 sum x, then the block term in the reference's
 * order. */
#define FL_T8_FAMILY(T, COMBINE)                                                         \
    FL_INL void t8_##T##_rc(int n, const int nr, const char *w, size_t ws,         \
                            const int nc, const void *const *x,                   \
                            const int16_t *const *xsum, float *const *y)           \
    {                                                                              \
        __m256 acc[T8_C];                                                          \
        for (int c = 0; c < nc; c++)                                               \
            acc[c] = _mm256_setzero_ps();                                          \
        for (int b = 0; b < n / 32; b++) {                                         \
            __m256i v[8];                                                          \
            float d[8];                                                            \
            t8_load_##T(w, ws, nr, b, v, d);                                       \
            const __m256 dw = _mm256_loadu_ps(d);                                  \
            FL_UNROLL8 for (int c = 0; c < nc; c++) {                               \
                const struct fl_block_q8_0 *yb = (const struct fl_block_q8_0 *)x[c] + b; \
                const int sy = xsum ? xsum[c][b] : q8_sum(yb);                     \
                __m256i s = _mm256_set1_epi32(-128 * sy);                          \
                for (int j = 0; j < 8; j++)                                        \
                    s = _mm256_dpbusd_epi32(s, v[j], bcast4(yb->qs + 4 * j));      \
                acc[c] = _mm256_add_ps(acc[c], COMBINE(_mm256_cvtepi32_ps(s), dw,  \
                                                       _mm256_set1_ps(h2f(yb->d)))); \
            }                                                                      \
        }                                                                          \
        for (int c = 0; c < nc; c++) {                                             \
            if (nr == 8) {                                                         \
                _mm256_storeu_ps(y[c], acc[c]);                                    \
            } else {                                                               \
                float o[8];                                                        \
                _mm256_storeu_ps(o, acc[c]);                                       \
                memcpy(y[c], o, (size_t)nr * sizeof(float));                       \
            }                                                                      \
        }                                                                          \
    }                                                                              \
    static FL_TGT void t8_##T(int n, int nr, const void *w, size_t ws, int nc,     \
                              const void *const *x, const int16_t *const *xsum,    \
                              float *const *y)                                     \
    {                                                                              \
        switch (nc) {                                                              \
        case 1: t8_##T##_rc(n, nr, w, ws, 1, x, xsum, y); break;                   \
        case 2: t8_##T##_rc(n, nr, w, ws, 2, x, xsum, y); break;                   \
        case 3: t8_##T##_rc(n, nr, w, ws, 3, x, xsum, y); break;                   \
        case 4: t8_##T##_rc(n, nr, w, ws, 4, x, xsum, y); break;                   \
        case 5: t8_##T##_rc(n, nr, w, ws, 5, x, xsum, y); break;                   \
        case 6: t8_##T##_rc(n, nr, w, ws, 6, x, xsum, y); break;                   \
        case 7: t8_##T##_rc(n, nr, w, ws, 7, x, xsum, y); break;                   \
        default: t8_##T##_rc(n, nr, w, ws, 8, x, xsum, y); break;                  \
        }                                                                          \
    }                                                                              \
    static FL_TGT void t8_vec_dot_##T(int n, float *s, const void *vx, const void *vy) \
    {                                                                              \
        const void *xs[1] = { vy };                                                \
        float *ys[1] = { s };                                                      \
        t8_##T##_rc(n, 1, vx, 0, 1, xs, NULL, ys);                                 \
    }

/* The block term in the types module's scalar order (vec_dot_ref), so
 * these kernels give its exact bits: Q4_0 (S * dw) * dx, the others
 * (dw * dx) * S. (Built with -ffp-contract=off: no fused multiply-add.) */
#define FL_PROD_FIRST(S, dw, dx) _mm256_mul_ps(_mm256_mul_ps(dw, dx), S)
#define FL_S_FIRST(S, dw, dx) _mm256_mul_ps(_mm256_mul_ps(S, dw), dx)

FL_T8_FAMILY(q8_0, FL_PROD_FIRST)
FL_T8_FAMILY(q4_0, FL_S_FIRST)
FL_T8_FAMILY(iq4_nl, FL_PROD_FIRST)
FL_T8_FAMILY(mxfp4, FL_PROD_FIRST)


/* Q8_0, Q4_0, IQ4_NL and MXFP4 against one token in their row-transposed
 * kernels' float order (t8_<type>), for the same reason as dec8_q4_K: a
 * token's bits must not depend on how many tokens share the product
 * (batch invariance; a decode step of one sequence against many). Rows are
 * read one after another; per row and block, one VNNI product of the +128
 * biased weights with the activation gives 8 int32 lanes (exact); 8
 * blocks' lanes are summed into one lane per block (one store per 8
 * blocks), and after 8 rows the sums are transposed to lanes = rows,
 * corrected by -128 * sum(x) and put through t8's block term. */
/* The +128 biased weights of a block (u8, for VNNI's unsigned side); the
 * scales are kept raw (fp16 bits, MXFP4's exponent byte) and turned into
 * floats 8 rows at a time, the values t8_load_* gives. */
FL_INL __m256i dec8_u8_q8_0(const struct fl_block_q8_0 *b)
{
    return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)b->qs),
                            _mm256_set1_epi8((char)0x80));
}
#define FL_DEC8_U8_NIBBLES(T, BIAS)                                               \
    FL_INL __m256i dec8_u8_##T(const struct fl_block_##T *b) { return BIAS(nibbles32(b->qs)); }
FL_DEC8_U8_NIBBLES(q4_0, FL_Q4_0_BIAS)
FL_DEC8_U8_NIBBLES(iq4_nl, FL_IQ4_NL_BIAS)
FL_DEC8_U8_NIBBLES(mxfp4, FL_MXFP4_BIAS)

FL_INL __m256 dec8_f16_scales(const uint16_t *raw)
{
    return _mm256_cvtph_ps(_mm_load_si128((const __m128i *)raw));
}

/* fl_e8m0_half on 8 exponents */
FL_INL __m256 dec8_e8m0_scales(const uint8_t *raw)
{
    const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)raw));
    const __m256i big = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i small = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i is_big = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(small, big, is_big));
}

#define FL_DEC8_RAW_D(blk) (blk)->d
#define FL_DEC8_RAW_E(blk) (blk)->e

/* blocks per pass: a whole row up to 16384 wide, so each row is one
 * sequential stream; 32 KB of sums and scales on the stack */
#define DEC8_BLOCKS 512

/* Row r's block sums S[r][b .. b+8) (exact): 8 blocks' VNNI lanes summed
 * into one lane per block. */
#define FL_DEC8_ROW(T, RAW_T, RAW)                                                      \
    FL_INL void dec8_row_##T(const struct fl_block_##T *wb, const struct fl_block_q8_0 *yb, \
                             int bn, int32_t *S, RAW_T (*d)[8], int r)                  \
    {                                                                                   \
        int b = 0;                                                                      \
        for (; b + 8 <= bn; b += 8) { /* whole groups: no tests inside */              \
            __m256i v[8];                                                               \
            prefetch_ahead(wb + b + FL_PF, 8 * sizeof(*wb));                            \
            FL_UNROLL8 for (int j = 0; j < 8; j++) d[b + j][r] = RAW(wb + b + j);       \
            FL_UNROLL8 for (int j = 0; j < 8; j++)                                      \
                v[j] = _mm256_dpbusd_epi32(                                             \
                    _mm256_setzero_si256(), dec8_u8_##T(wb + b + j),                    \
                    _mm256_loadu_si256((const __m256i *)yb[b + j].qs));                 \
            _mm256_store_si256((__m256i *)(S + b), lanesum8(v));                        \
        }                                                                               \
        if (b < bn) {                                                                   \
            __m256i v[8];                                                               \
            for (int j = b; j < bn; j++)                                                \
                d[j][r] = RAW(wb + j);                                                  \
            for (int j = 0; j < 8; j++)                                                 \
                v[j] = b + j < bn ? _mm256_dpbusd_epi32(                                \
                                        _mm256_setzero_si256(), dec8_u8_##T(wb + b + j), \
                                        _mm256_loadu_si256((const __m256i *)yb[b + j].qs)) \
                                  : _mm256_setzero_si256();                             \
            _mm256_store_si256((__m256i *)(S + b), lanesum8(v));                        \
        }                                                                               \
    }

#define FL_DEC8_FAMILY(T, COMBINE, RAW_T, RAW, SCALES)                                  \
    FL_DEC8_ROW(T, RAW_T, RAW)                                                          \
    static FL_TGT void dec8_##T(int n, int nr, const void *w, size_t ws, int nc,        \
                                const void *const *x, const int16_t *const *xsum,       \
                                float *const *y)                                        \
    {                                                                                   \
        (void)nc; /* always 1 */                                                        \
        const struct fl_block_q8_0 *yb = x[0];                                          \
        const int nb = n / 32;                                                          \
        _Alignas(32) int32_t S[8][DEC8_BLOCKS];                                         \
        _Alignas(32) RAW_T d[DEC8_BLOCKS][8];                                           \
        for (int r0 = 0; r0 < nr; r0 += 8) {                                            \
            const int rn = nr - r0 < 8 ? nr - r0 : 8;                                   \
            __m256 acc = _mm256_setzero_ps();                                           \
            for (int b0 = 0; b0 < nb; b0 += DEC8_BLOCKS) {                              \
                const int bn = nb - b0 < DEC8_BLOCKS ? nb - b0 : DEC8_BLOCKS;           \
                for (int r = 0; r < 8; r++) {                                           \
                    if (r < rn) {                                                       \
                        const struct fl_block_##T *wb = (const struct fl_block_##T *)(  \
                            (const char *)w + (size_t)(r0 + r) * ws) + b0;              \
                        dec8_row_##T(wb, yb + b0, bn, S[r], d, r);                      \
                    } else { /* lanes past the last row: zeros */                       \
                        memset(S[r], 0, sizeof(S[r]));                                  \
                        for (int b = 0; b < bn; b++)                                    \
                            d[b][r] = 0;                                                \
                    }                                                                   \
                }                                                                       \
                for (int b = 0; b < bn; b += 8) { /* lanes = rows, as t8 */             \
                    __m256i t[8];                                                       \
                    for (int r = 0; r < 8; r++)                                         \
                        t[r] = _mm256_load_si256((const __m256i *)(S[r] + b));          \
                    transpose8(t);                                                      \
                    for (int j = 0; j < 8 && b + j < bn; j++) {                         \
                        const struct fl_block_q8_0 *xb = yb + b0 + b + j;               \
                        const int sy = xsum ? xsum[0][b0 + b + j] : q8_sum(xb);         \
                        const __m256i Sv = _mm256_add_epi32(t[j], _mm256_set1_epi32(-128 * sy)); \
                        acc = _mm256_add_ps(acc, COMBINE(_mm256_cvtepi32_ps(Sv),        \
                                                         SCALES(d[b + j]),               \
                                                         _mm256_set1_ps(h2f(xb->d))));  \
                    }                                                                   \
                }                                                                       \
            }                                                                           \
            float o[8];                                                                 \
            _mm256_storeu_ps(o, acc);                                                   \
            memcpy(y[0] + r0, o, (size_t)rn * sizeof(float));                           \
        }                                                                               \
    }

FL_DEC8_FAMILY(q8_0, FL_PROD_FIRST, uint16_t, FL_DEC8_RAW_D, dec8_f16_scales)
FL_DEC8_FAMILY(q4_0, FL_S_FIRST, uint16_t, FL_DEC8_RAW_D, dec8_f16_scales)
FL_DEC8_FAMILY(iq4_nl, FL_PROD_FIRST, uint16_t, FL_DEC8_RAW_D, dec8_f16_scales)
FL_DEC8_FAMILY(mxfp4, FL_PROD_FIRST, uint8_t, FL_DEC8_RAW_E, dec8_e8m0_scales)


/* BF16 x BF16 with AVX512-BF16 (where the CPU has it): one instruction
 * multiplies 16 pairs and adds each pair's sum to a float lane; the n % 16
 * leftover values are added after the horizontal sum, in order. */
#define FL_BF16_TGT \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16")))

static inline FL_BF16_TGT __attribute__((always_inline)) void
bf16dp_rc(int n, const int nr, const char *w, size_t ws, const int nc, const void *const *x,
          float *const *y)
{
    __m256 acc[FL_FR][FL_FC];
    FL_UNROLL for (int r = 0; r < nr; r++)
        FL_UNROLL for (int c = 0; c < nc; c++) acc[r][c] = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256bh wv[FL_FR];
        FL_UNROLL for (int r = 0; r < nr; r++) {
            wv[r] = (__m256bh)_mm256_loadu_si256((const __m256i *)((const fl_bf16 *)(w + r * ws) + i));
            if ((i & 31) == 0)
                prefetch_ahead((const fl_bf16 *)(w + r * ws) + i + 256, 128);
        }
        FL_UNROLL for (int c = 0; c < nc; c++) {
            const __m256bh xv = (__m256bh)_mm256_loadu_si256((const __m256i *)((const fl_bf16 *)x[c] + i));
            FL_UNROLL for (int r = 0; r < nr; r++)
                acc[r][c] = _mm256_dpbf16_ps(acc[r][c], wv[r], xv);
        }
    }
    FL_UNROLL for (int r = 0; r < nr; r++)
        FL_UNROLL for (int c = 0; c < nc; c++) {
            float s = hsum8(acc[r][c]);
            for (int j = i; j < n; j++)
                s += ld1_bf16(w + r * ws, j) * ld1_bf16(x[c], j);
            y[c][r] = s;
        }
}

static FL_BF16_TGT void tile_bf16dp(int n, int nr, const void *w, size_t ws, int nc,
                                    const void *const *x, const int16_t *const *xsum,
                                    float *const *y)
{
    const char *wc = w;
    (void)xsum;
    switch ((nr - 1) * 4 + (nc - 1)) {
#define FL_BF_CASE(NR, NC) \
    case (NR - 1) * 4 + (NC - 1): bf16dp_rc(n, NR, wc, ws, NC, x, y); break;
    FL_BF_CASE(1, 1) FL_BF_CASE(1, 2) FL_BF_CASE(1, 3) FL_BF_CASE(1, 4)
    FL_BF_CASE(2, 1) FL_BF_CASE(2, 2) FL_BF_CASE(2, 3) FL_BF_CASE(2, 4)
    FL_BF_CASE(3, 1) FL_BF_CASE(3, 2) FL_BF_CASE(3, 3) FL_BF_CASE(3, 4)
    FL_BF_CASE(4, 1) FL_BF_CASE(4, 2) FL_BF_CASE(4, 3) FL_BF_CASE(4, 4)
#undef FL_BF_CASE
    default: break;
    }
}

static FL_BF16_TGT void vec_dot_bf16dp(int n, float *s, const void *vx, const void *vy)
{
    const void *xs[1] = { vy };
    float *ys[1] = { s };
    bf16dp_rc(n, 1, vx, 0, 1, xs, ys);
}

void fl_cpu_kernels_avx512(struct fl_cpu_kernels *k)
{
    install_avx512(k);
/* one token: the decode kernel in the same float order (dec8_<type>),
 * 8 rows per call */
#define FL_SET_T8(T, ID)                   \
    k->tile1[ID] = dec8_##T;               \
    k->tile1_r[ID] = 8;                    \
    k->tile[ID] = t8_##T;                  \
    k->vec_dot[ID] = t8_vec_dot_##T;       \
    k->tile_r[ID] = 8;                     \
    k->tile_c[ID] = T8_C;
    FL_SET_T8(q8_0, FL_TYPE_Q8_0)
    FL_SET_T8(q4_0, FL_TYPE_Q4_0)
    FL_SET_T8(iq4_nl, FL_TYPE_IQ4_NL)
    FL_SET_T8(mxfp4, FL_TYPE_MXFP4)
#undef FL_SET_T8
    install_q4k_avx512(k);
    if (__builtin_cpu_supports("avx512bf16")) {
        k->tile[FL_TYPE_BF16] = tile_bf16dp;
        k->vec_dot[FL_TYPE_BF16] = vec_dot_bf16dp;
    }
    k->name = "avx512";
}
