/* quant-legacy.c: the 32-value block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
 * and Q8_1: dequantization, ggml's reference quantizers and the scalar dot
 * products against Q8_0/Q8_1, with ggml's arithmetic order (float
 * expressions are written exactly as ggml groups them, because float
 * multiplication is not associative and SIMD kernels are held to these). */
#include <float.h>

#include "gguf/quant-impl.h"

#define QK 32

/* --- integer quants of one block ------------------------------------------ */

/* 4-bit: value j in the low nibble of qs[j], value j+16 in the high one. */
static void unpack4(const uint8_t *qs, int offset, int8_t q[QK])
{
    for (int j = 0; j < QK / 2; j++) {
        q[j] = (int8_t)((qs[j] & 0xf) - offset);
        q[j + QK / 2] = (int8_t)((qs[j] >> 4) - offset);
    }
}

/* 5-bit: as 4-bit, plus bit j of the little-endian qh word as bit 4. */
static void unpack5(const uint8_t *qs, const uint8_t qh_bytes[4], int offset, int8_t q[QK])
{
    uint32_t qh;
    memcpy(&qh, qh_bytes, 4);
    for (int j = 0; j < QK / 2; j++) {
        q[j] = (int8_t)(((qs[j] & 0xf) | (((qh >> j) & 1u) << 4)) - offset);
        q[j + QK / 2] = (int8_t)(((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - offset);
    }
}

static void pack4(const uint8_t q[QK], uint8_t *qs)
{
    for (int j = 0; j < QK / 2; j++)
        qs[j] = (uint8_t)(q[j] | (q[j + QK / 2] << 4));
}

static void pack5(const uint8_t q[QK], uint8_t *qs, uint8_t qh_bytes[4])
{
    uint32_t qh = 0;
    for (int j = 0; j < QK / 2; j++) {
        qs[j] = (uint8_t)((q[j] & 0xf) | ((q[j + QK / 2] & 0xf) << 4));
        qh |= (uint32_t)((q[j] >> 4) & 1) << j;
        qh |= (uint32_t)((q[j + QK / 2] >> 4) & 1) << (j + QK / 2);
    }
    memcpy(qh_bytes, &qh, 4);
}

static int dot_i8(const int8_t *a, const int8_t *b, int n)
{
    int s = 0;
    for (int j = 0; j < n; j++)
        s += a[j] * b[j];
    return s;
}

/* --- dequantization -------------------------------------------------------- */

void fl_q_to_float_q4_0(const void *src, float *dst, int64_t n)
{
    const struct fl_block_q4_0 *b = src;
    int8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        const float d = fl_q_h2f(b[i].d);
        unpack4(b[i].qs, 8, q);
        for (int j = 0; j < QK; j++)
            dst[j] = q[j] * d;
    }
}

void fl_q_to_float_q4_1(const void *src, float *dst, int64_t n)
{
    const struct fl_block_q4_1 *b = src;
    int8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        const float d = fl_q_h2f(b[i].d), m = fl_q_h2f(b[i].m);
        unpack4(b[i].qs, 0, q);
        for (int j = 0; j < QK; j++)
            dst[j] = q[j] * d + m;
    }
}

void fl_q_to_float_q5_0(const void *src, float *dst, int64_t n)
{
    const struct fl_block_q5_0 *b = src;
    int8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        const float d = fl_q_h2f(b[i].d);
        unpack5(b[i].qs, b[i].qh, 16, q);
        for (int j = 0; j < QK; j++)
            dst[j] = q[j] * d;
    }
}

void fl_q_to_float_q5_1(const void *src, float *dst, int64_t n)
{
    const struct fl_block_q5_1 *b = src;
    int8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        const float d = fl_q_h2f(b[i].d), m = fl_q_h2f(b[i].m);
        unpack5(b[i].qs, b[i].qh, 0, q);
        for (int j = 0; j < QK; j++)
            dst[j] = q[j] * d + m;
    }
}

void fl_q_to_float_q8_0(const void *src, float *dst, int64_t n)
{
    const struct fl_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        const float d = fl_q_h2f(b[i].d);
        for (int j = 0; j < QK; j++)
            dst[j] = b[i].qs[j] * d;
    }
}

void fl_q_to_float_q8_1(const void *src, float *dst, int64_t n)
{
    const struct fl_block_q8_1 *b = src;
    for (int64_t i = 0; i < n / QK; i++, dst += QK) {
        const float d = fl_q_h2f(b[i].d);
        for (int j = 0; j < QK; j++)
            dst[j] = b[i].qs[j] * d;
    }
}

/* --- ggml's reference quantizers ------------------------------------------ */

/* Q4_0/Q5_0: the value of largest magnitude (first one on ties) maps to
 * -2^(bits-1); the rest truncate x/d + 2^(bits-1) + 0.5. */
static float quant_sym(const float *x, int bits, uint8_t q[QK])
{
    const int half = 1 << (bits - 1), top = (1 << bits) - 1;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    const float d = max / (float)-half;
    const float id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < QK; j++) {
        const int v = (int8_t)(x[j] * id + ((float)half + 0.5f));
        q[j] = (uint8_t)(v < top ? v : top);
    }
    return d;
}

/* Q4_1/Q5_1: min and max span 2^bits - 1 steps. */
static float quant_asym(const float *x, int bits, uint8_t q[QK], float *min_out)
{
    const int top = (1 << bits) - 1;
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < QK; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / (float)top;
    const float id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < QK; j++) {
        const int v = (int8_t)((x[j] - min) * id + 0.5f);
        q[j] = (uint8_t)(v < top ? v : top);
    }
    *min_out = min;
    return d;
}

void fl_q_from_float_q4_0(const float *src, void *dst, int64_t n)
{
    struct fl_block_q4_0 *b = dst;
    uint8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        b[i].d = fl_q_f2h(quant_sym(src, 4, q));
        pack4(q, b[i].qs);
    }
}

void fl_q_from_float_q5_0(const float *src, void *dst, int64_t n)
{
    struct fl_block_q5_0 *b = dst;
    uint8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        b[i].d = fl_q_f2h(quant_sym(src, 5, q));
        pack5(q, b[i].qs, b[i].qh);
    }
}

void fl_q_from_float_q4_1(const float *src, void *dst, int64_t n)
{
    struct fl_block_q4_1 *b = dst;
    uint8_t q[QK];
    float min;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        b[i].d = fl_q_f2h(quant_asym(src, 4, q, &min));
        b[i].m = fl_q_f2h(min);
        pack4(q, b[i].qs);
    }
}

void fl_q_from_float_q5_1(const float *src, void *dst, int64_t n)
{
    struct fl_block_q5_1 *b = dst;
    uint8_t q[QK];
    float min;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        b[i].d = fl_q_f2h(quant_asym(src, 5, q, &min));
        b[i].m = fl_q_f2h(min);
        pack5(q, b[i].qs, b[i].qh);
    }
}

/* Q8_0/Q8_1 share the scale: amax/127. ggml's reference divides by d and
 * rounds half away from zero; llama.cpp's x86 activation path multiplies by
 * 127/amax and rounds half to even (act = true). The results differ in rare
 * ties and last-ulp cases, so both are kept. Returns the sum of the quants. */
static int quant_q8(const float *x, int8_t *qs, float *d_out, bool act)
{
    float amax = 0.0f;
    for (int j = 0; j < QK; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f;
    const float id = act ? (amax != 0.0f ? 127.0f / amax : 0.0f) : (d ? 1.0f / d : 0.0f);
    int sum = 0;
    for (int j = 0; j < QK; j++) {
        const float v = x[j] * id;
        qs[j] = (int8_t)(act ? nearbyintf(v) : roundf(v));
        sum += qs[j];
    }
    *d_out = d;
    return sum;
}

static void q8_0_rows(const float *src, void *dst, int64_t n, bool act)
{
    struct fl_block_q8_0 *b = dst;
    float d;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        quant_q8(src, b[i].qs, &d, act);
        b[i].d = fl_q_f2h(d);
    }
}

static void q8_1_rows(const float *src, void *dst, int64_t n, bool act)
{
    struct fl_block_q8_1 *b = dst;
    float d;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        const int sum = quant_q8(src, b[i].qs, &d, act);
        b[i].d = fl_q_f2h(d);
        b[i].s = fl_q_f2h((float)sum * d);
    }
}

void fl_q_from_float_q8_0(const float *src, void *dst, int64_t n) { q8_0_rows(src, dst, n, false); }
void fl_q_from_float_q8_1(const float *src, void *dst, int64_t n) { q8_1_rows(src, dst, n, false); }
void fl_q_act_q8_0(const float *src, void *dst, int64_t n) { q8_0_rows(src, dst, n, true); }
void fl_q_act_q8_1(const float *src, void *dst, int64_t n) { q8_1_rows(src, dst, n, true); }

/* --- scalar dot products (ggml's generic kernels' arithmetic) -------------- */

void fl_q_vec_dot_q4_0(int n, float *s, const void *vx, const void *vy)
{
    const struct fl_block_q4_0 *x = vx;
    const struct fl_block_q8_0 *y = vy;
    int8_t q[QK];
    float sum = 0.0f;
    for (int i = 0; i < n / QK; i++) {
        unpack4(x[i].qs, 8, q);
        const int si = dot_i8(q, y[i].qs, QK);
        sum += (float)si * fl_q_h2f(x[i].d) * fl_q_h2f(y[i].d);
    }
    *s = sum;
}

void fl_q_vec_dot_q4_1(int n, float *s, const void *vx, const void *vy)
{
    const struct fl_block_q4_1 *x = vx;
    const struct fl_block_q8_1 *y = vy;
    int8_t q[QK];
    float sum = 0.0f;
    for (int i = 0; i < n / QK; i++) {
        unpack4(x[i].qs, 0, q);
        const int si = dot_i8(q, y[i].qs, QK);
        sum += (fl_q_h2f(x[i].d) * fl_q_h2f(y[i].d)) * (float)si
             + fl_q_h2f(x[i].m) * fl_q_h2f(y[i].s);
    }
    *s = sum;
}

void fl_q_vec_dot_q5_0(int n, float *s, const void *vx, const void *vy)
{
    const struct fl_block_q5_0 *x = vx;
    const struct fl_block_q8_0 *y = vy;
    int8_t q[QK];
    float sum = 0.0f;
    for (int i = 0; i < n / QK; i++) {
        unpack5(x[i].qs, x[i].qh, 16, q);
        const int si = dot_i8(q, y[i].qs, QK);
        sum += (fl_q_h2f(x[i].d) * fl_q_h2f(y[i].d)) * (float)si;
    }
    *s = sum;
}

void fl_q_vec_dot_q5_1(int n, float *s, const void *vx, const void *vy)
{
    const struct fl_block_q5_1 *x = vx;
    const struct fl_block_q8_1 *y = vy;
    int8_t q[QK];
    float sum = 0.0f;
    for (int i = 0; i < n / QK; i++) {
        unpack5(x[i].qs, x[i].qh, 0, q);
        const int si = dot_i8(q, y[i].qs, QK);
        sum += (fl_q_h2f(x[i].d) * fl_q_h2f(y[i].d)) * (float)si
             + fl_q_h2f(x[i].m) * fl_q_h2f(y[i].s);
    }
    *s = sum;
}

void fl_q_vec_dot_q8_0(int n, float *s, const void *vx, const void *vy)
{
    const struct fl_block_q8_0 *x = vx, *y = vy;
    float sum = 0.0f;
    for (int i = 0; i < n / QK; i++) {
        const int si = dot_i8(x[i].qs, y[i].qs, QK);
        sum += (float)si * (fl_q_h2f(x[i].d) * fl_q_h2f(y[i].d));
    }
    *s = sum;
}
