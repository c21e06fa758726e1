/* quant-impl.h: private to the tensor-types module. The per-family block
 * codecs (quant-legacy.c, quant-k.c, quant-nl.c) and the helpers they share;
 * the traits table in tensor-types.c is the only public face of these. */
#ifndef FL_QUANT_IMPL_H
#define FL_QUANT_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gguf/tensor-types.h"

/* --- scalar conversions, inline because every block decode calls them ----- */

static inline uint32_t fl_q_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float fl_q_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float fl_q_h2f(fl_f16 h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    if (exp == 0) { /* zero or subnormal: mant * 2^-24 is exact in float */
        float v = (float)mant * 0x1p-24f;
        return fl_q_bits_f32(fl_q_f32_bits(v) | sign);
    }
    if (exp == 31) /* inf, or NaN made quiet as a float multiply would (ggml) */
        return fl_q_bits_f32(sign | 0x7f800000u | (mant ? 0x400000u : 0) | (mant << 13));
    return fl_q_bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

/* float -> half, round to nearest even; NaN becomes sign|0x7e00 (ggml's
 * software converter does exactly this). */
static inline fl_f16 fl_q_f2h(float f)
{
    uint32_t x = fl_q_f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u)
        return sign | 0x7e00u;
    if (x >= 0x477ff000u) /* >= 65520 rounds to inf (65520 is a tie, inf is even) */
        return sign | 0x7c00u;
    if (x >= 0x38800000u) { /* normal half: rebias and round the 13 dropped bits */
        x = x - (112u << 23) + 0xfffu + ((x >> 13) & 1u);
        return sign | (uint16_t)(x >> 13);
    }
    if (x <= 0x33000000u) /* <= 2^-25: rounds to (even) zero */
        return sign;
    /* subnormal half: value * 2^24 rounded to an integer, ties to even */
    const uint32_t e = x >> 23, m = (x & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e; /* 14..24 */
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    uint32_t r = m >> shift;
    if (rem > half || (rem == half && (r & 1u)))
        r++;
    return sign | (uint16_t)r;
}

/* --- shared decoding helpers --------------------------------------------- */

/* Q4_K/Q5_K: the j-th (0..7) 6-bit scale and min packed into 12 bytes. */
static inline void fl_q_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* ggml's nearest_int: round to nearest, ties to even, for |f| <= 2^22. */
static inline int fl_q_nearest_int(float f)
{
    const float v = f + 12582912.f;
    return (int)(fl_q_f32_bits(v) & 0x007fffffu) - 0x00400000;
}

/* --- per-family codecs (n: values, a multiple of the block size) ---------- */

#define FL_Q_CODEC(t)                                                         \
    void fl_q_to_float_##t(const void *src, float *dst, int64_t n);           \
    void fl_q_vec_dot_##t(int n, float *s, const void *x, const void *y);

FL_Q_CODEC(q4_0) FL_Q_CODEC(q4_1) FL_Q_CODEC(q5_0) FL_Q_CODEC(q5_1)
FL_Q_CODEC(q8_0) FL_Q_CODEC(q2_K) FL_Q_CODEC(q3_K) FL_Q_CODEC(q4_K)
FL_Q_CODEC(q5_K) FL_Q_CODEC(q6_K) FL_Q_CODEC(iq4_nl) FL_Q_CODEC(iq4_xs)
FL_Q_CODEC(mxfp4)
#undef FL_Q_CODEC

void fl_q_to_float_q8_1(const void *src, float *dst, int64_t n);
void fl_q_to_float_q8_K(const void *src, float *dst, int64_t n);

void fl_q_from_float_q4_0(const float *src, void *dst, int64_t n);
void fl_q_from_float_q4_1(const float *src, void *dst, int64_t n);
void fl_q_from_float_q5_0(const float *src, void *dst, int64_t n);
void fl_q_from_float_q5_1(const float *src, void *dst, int64_t n);
void fl_q_from_float_q8_0(const float *src, void *dst, int64_t n);
void fl_q_from_float_q8_1(const float *src, void *dst, int64_t n);
void fl_q_from_float_q8_K(const float *src, void *dst, int64_t n);
void fl_q_from_float_mxfp4(const float *src, void *dst, int64_t n);
void fl_q_from_float_q4_K(const float *src, void *dst, int64_t n);
void fl_q_from_float_q5_K(const float *src, void *dst, int64_t n);
void fl_q_from_float_q6_K(const float *src, void *dst, int64_t n);
void fl_q_from_float_iq4_nl(const float *src, void *dst, int64_t n);

/* llama.cpp's x86 (AVX) activation quantizers, see fl_type_from_float_act. */
void fl_q_act_q8_0(const float *src, void *dst, int64_t n);
void fl_q_act_q8_1(const float *src, void *dst, int64_t n);

#endif
