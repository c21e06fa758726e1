/* x86-blocks.h: block decoders and shuffles the kernel files share
 * (kern-x86.inc's levels, kern-avx512.c's row-transposed kernels,
 * kern-amx.c's tile panels). Included by a kernel file after it defines
 * FL_INL (static inline, always_inline, with its level's target). */
#ifndef FL_CPU_X86_BLOCKS_H
#define FL_CPU_X86_BLOCKS_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/cpu-impl.h"

FL_INL float h2f(fl_f16 h)
{
    return _cvtsh_ss(h);
}

/* The 32 nibbles of a 16-byte run in ggml order: low nibbles are values
 * 0..15, high nibbles 16..31. */
FL_INL __m256i nibbles32(const uint8_t *qs)
{
    const __m128i t = _mm_loadu_si128((const __m128i *)qs);
    const __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

FL_INL __m256i lut16(const int8_t *table, __m256i idx)
{
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)table));
    return _mm256_shuffle_epi8(lut, idx);
}

/* 4 bytes at p in every lane, straight from memory (a load, no shuffle) */
FL_INL __m256i bcast4(const int8_t *p)
{
    return _mm256_castps_si256(_mm256_broadcast_ss((const float *)(const void *)p));
}

static const int8_t k_iq4nl[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
                                    1, 13, 25, 38, 53, 69, 89, 113 };
static const int8_t k_mxfp4[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

/* Each returns a block's 32 signed weights and its scale. */
FL_INL __m256i unpack_q8_0(const struct fl_block_q8_0 *b, float *d)
{
    *d = h2f(b->d);
    return _mm256_loadu_si256((const __m256i *)b->qs);
}

FL_INL __m256i unpack_q4_0(const struct fl_block_q4_0 *b, float *d)
{
    *d = h2f(b->d);
    return _mm256_sub_epi8(nibbles32(b->qs), _mm256_set1_epi8(8));
}

FL_INL __m256i unpack_iq4_nl(const struct fl_block_iq4_nl *b, float *d)
{
    *d = h2f(b->d);
    return lut16(k_iq4nl, nibbles32(b->qs));
}

FL_INL __m256i unpack_mxfp4(const struct fl_block_mxfp4 *b, float *d)
{
    *d = fl_e8m0_half(b->e);
    return lut16(k_mxfp4, nibbles32(b->qs));
}


/* Q4_K/Q5_K: the 12 packed bytes to 8 scales (bytes 0..7) and 8 mins
 * (bytes 8..15), all six bits wide, four at a time in 32-bit words. */
FL_INL __m128i scales_mins_k4(const uint8_t *q)
{
    uint32_t u[4];
    memcpy(u, q, 12);
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    u[3] = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4); /* mins 4..7 */
    const uint32_t mins03 = u[1] & m6;
    u[1] = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);        /* scales 4..7 */
    u[2] = mins03;
    u[0] &= m6;                                            /* scales 0..3 */
    return _mm_loadu_si128((const __m128i *)u);
}

/* v[j] lane r <- v[r] lane j: the 8x8 transpose of 32-bit elements */
FL_INL void transpose8(__m256i v[8])
{
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        u[4 * i + 0] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int j = 0; j < 4; j++) {
        v[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
        v[j + 4] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
    }
}

/* Block b of 8 file rows (rows[r]: row r's block b) as a Q4_K_R8 block,
 * fl_q4_K_to_r8's bytes: quant dwords transposed, scales unpacked. The
 * kernels that take file rows many tokens at a time (AMX's tiles, the
 * wide Q4_K tile) rebuild them so, once for all their tokens. */
FL_INL void to_r8(const struct fl_block_q4_K *const rows[8], struct fl_block_q4_K_r8 *o)
{
    for (int i = 0; i < 4; i++) {
        __m256i v[8];
        for (int r = 0; r < 8; r++)
            v[r] = _mm256_loadu_si256((const __m256i *)(rows[r]->qs + 32 * i));
        transpose8(v);
        for (int j = 0; j < 8; j++)
            _mm256_storeu_si256((__m256i *)o->qs[i][j], v[j]);
    }
    for (int r = 0; r < 8; r++) {
        uint8_t sm[16]; /* scales 0..7, mins 0..7 */
        _mm_storeu_si128((__m128i *)sm, scales_mins_k4(rows[r]->scales));
        for (int k = 0; k < 8; k++) {
            o->sc[k][r] = sm[k];
            o->mn[k / 2][r][k % 2] = sm[8 + k];
        }
        o->d[r] = rows[r]->d;
        o->dmin[r] = rows[r]->dmin;
    }
}

#endif
