/* x86-shuffles.h: register shuffles the Q4_K kernels of several levels
 * share (kern-x86.inc's levels, kern-avx512.c's row-transposed kernels,
 * kern-amx.c's tile panels). Included by a kernel file after it defines
 * FL_INL (static inline, always_inline, with its level's target). */
#ifndef FL_CPU_X86_SHUFFLES_H
#define FL_CPU_X86_SHUFFLES_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

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

#endif
