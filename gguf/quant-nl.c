/* quant-nl.c: the 32-value lookup-table formats IQ4_NL and MXFP4. Both
 * store 4-bit indices into a 16-entry int8 table (value j in the low nibble
 * of qs[j], value j+16 in the high one) times one block scale, and both are
 * dotted with Q8_0 activations. */
#include "gguf/quant-impl.h"

#define QK 32

static void lut_unpack(const uint8_t *qs, const int8_t table[16], int8_t v[QK])
{
    int8_t lut[16]; /* a local copy: stores to v cannot change it */
    memcpy(lut, table, sizeof(lut));
    for (int j = 0; j < QK / 2; j++) {
        v[j] = lut[qs[j] & 0xf];
        v[j + QK / 2] = lut[qs[j] >> 4];
    }
}

static void lut_pack(const uint8_t idx[QK], uint8_t *qs)
{
    for (int j = 0; j < QK / 2; j++)
        qs[j] = (uint8_t)(idx[j] | (idx[j + QK / 2] << 4));
}

static void lut_to_float(const uint8_t *qs, const int8_t lut[16], float d, float *y)
{
    int8_t v[QK];
    lut_unpack(qs, lut, v);
    for (int j = 0; j < QK; j++)
        y[j] = d * (float)v[j];
}

/* ggml: sum += (scale product) * (isum), one term per block. */
static float lut_dot(const uint8_t *qs, const int8_t lut[16], const int8_t *q8)
{
    int8_t v[QK];
    int isum = 0;
    lut_unpack(qs, lut, v);
    for (int j = 0; j < QK; j++)
        isum += q8[j] * v[j];
    return (float)isum;
}

void fl_q_to_float_iq4_nl(const void *src, float *dst, int64_t n)
{
    const struct fl_block_iq4_nl *x = src;
    for (int64_t i = 0; i < n / QK; i++)
        lut_to_float(x[i].qs, fl_iq4nl_values, fl_q_h2f(x[i].d), dst + i * QK);
}

void fl_q_to_float_mxfp4(const void *src, float *dst, int64_t n)
{
    const struct fl_block_mxfp4 *x = src;
    for (int64_t i = 0; i < n / QK; i++)
        lut_to_float(x[i].qs, fl_mxfp4_values, fl_e8m0_half_to_f32(x[i].e), dst + i * QK);
}

void fl_q_vec_dot_iq4_nl(int n, float *s, const void *vx, const void *vy)
{
    const struct fl_block_iq4_nl *x = vx;
    const struct fl_block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int i = 0; i < n / QK; i++) {
        const float d = fl_q_h2f(y[i].d) * fl_q_h2f(x[i].d);
        sum += d * lut_dot(x[i].qs, fl_iq4nl_values, y[i].qs);
    }
    *s = sum;
}

void fl_q_vec_dot_mxfp4(int n, float *s, const void *vx, const void *vy)
{
    const struct fl_block_mxfp4 *x = vx;
    const struct fl_block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int i = 0; i < n / QK; i++) {
        const float d = fl_q_h2f(y[i].d) * fl_e8m0_half_to_f32(x[i].e);
        sum += d * lut_dot(x[i].qs, fl_mxfp4_values, y[i].qs);
    }
    *s = sum;
}

/* --- MXFP4: ggml's reference quantizer ------------------------------------- */

/* Index of the table entry nearest x/d (the first on ties), compared as
 * |lut*d - x| exactly as ggml does. */
static int lut_nearest(const int8_t lut[16], float x, float d)
{
    int best = 0;
    float best_err = fabsf((float)lut[0] * d - x);
    for (int i = 1; i < 16; i++) {
        const float err = fabsf((float)lut[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

/* The shared exponent puts amax in [4, 8) times 2^(e-127): floor(log2f)
 * with libm's log2f, as ggml computes it (not frexpf, which differs where
 * log2f rounds up just below a power of two). */
static uint8_t mxfp4_exponent(float amax)
{
    if (!(amax > 0.0f))
        return 0;
    const float e = floorf(log2f(amax)) - 2.0f + 127.0f;
    return (uint8_t)(e < 0.0f ? 0.0f : e > 254.0f ? 254.0f : e);
}

void fl_q_from_float_mxfp4(const float *src, void *dst, int64_t n)
{
    struct fl_block_mxfp4 *y = dst;
    uint8_t idx[QK];
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        float amax = 0.0f;
        for (int j = 0; j < QK; j++)
            if (amax < fabsf(src[j]))
                amax = fabsf(src[j]);
        y[i].e = mxfp4_exponent(amax);
        const float d = fl_e8m0_half_to_f32(y[i].e);
        for (int j = 0; j < QK; j++)
            idx[j] = (uint8_t)lut_nearest(fl_mxfp4_values, src[j], d);
        lut_pack(idx, y[i].qs);
    }
}

/* --- IQ4_NL: ggml's quantize_iq4_nl without an importance matrix ----------- */

/* Index of the sorted IQ4_NL table entry nearest x, the upper one on ties
 * (ggml's best_index_int8). */
static int iq4nl_nearest(float x)
{
    const int8_t *v = fl_iq4nl_values;
    if (x <= v[0])
        return 0;
    if (x >= v[15])
        return 15;
    int hi = 1;
    while (x >= v[hi])
        hi++;
    return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

/* Weighted (w = x^2) least-squares sums of x against its table values at
 * inverse scale id. */
static void iq4nl_trial(const float *x, float id, float *sumqx, float *sumq2)
{
    *sumqx = *sumq2 = 0;
    for (int j = 0; j < QK; j++) {
        const float q = fl_iq4nl_values[iq4nl_nearest(id * x[j])];
        const float w = x[j] * x[j];
        *sumqx += w * q * x[j];
        *sumq2 += w * q * q;
    }
}

/* Starts from the scale that maps the value of largest magnitude to the
 * table's end, refits it by least squares, then tries 15 inverse scales
 * around that and keeps the best fit (as llama-quantize does: ntry 7). */
static float iq4nl_scale(const float *x)
{
    float amax = 0, max = 0;
    for (int j = 0; j < QK; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    if (amax < 1e-15f)
        return 0.0f;
    const float v0 = fl_iq4nl_values[0];
    float sumqx, sumq2;
    iq4nl_trial(x, 1 / (-max / v0), &sumqx, &sumq2);
    float d = sumq2 > 0 ? sumqx / sumq2 : 0.f, best = d * sumqx;
    for (int itry = -7; itry <= 7; itry++) {
        iq4nl_trial(x, (float)(itry + fl_iq4nl_values[0]) / max, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

void fl_q_from_float_iq4_nl(const float *src, void *dst, int64_t n)
{
    struct fl_block_iq4_nl *y = dst;
    uint8_t idx[QK];
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        const float d = iq4nl_scale(src);
        const float id = d ? 1 / d : 0;
        y[i].d = fl_q_f2h(d);
        for (int j = 0; j < QK; j++)
            idx[j] = (uint8_t)iq4nl_nearest(id * src[j]);
        lut_pack(idx, y[i].qs);
    }
}
