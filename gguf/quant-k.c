/* quant-k.c: the 256-value K-quant super-blocks Q2_K..Q6_K, Q8_K (the
 * activation format they are dotted with) and IQ4_XS, which shares their
 * super-block shape.
 *
 * Every weight format decodes into one shape (struct kblock): 256 small
 * integers plus a scale (and min) per 16 values, so dequantization and the
 * scalar dot products are written once. The float arithmetic follows ggml's
 * dequantize_row_* and generic vec_dot kernels operation by operation. */
#include "gguf/quant-impl.h"

#define QK FL_QK_K
#define NG (QK / 16) /* 16-value groups per super-block */

struct kblock {
    int8_t q[QK];    /* the integer quants, in value order */
    int16_t sc[NG];  /* integer scale of each 16-value group */
    int16_t mn[NG];  /* integer min of each group (0 for symmetric formats) */
    float d, dmin;   /* super-block scales (dmin 0 for symmetric formats) */
};

/* Q3_K: the 16 6-bit scales packed into 12 bytes (low nibbles in bytes 0..7,
 * high bit pairs in bytes 8..11), returned centred (stored value - 32). */
static void unpack_q3k_scales(const uint8_t p[12], int8_t out[16])
{
    for (int j = 0; j < 16; j++) {
        const int lo = j < 8 ? p[j] & 0xf : p[j - 8] >> 4;
        const int hi = (p[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

/* 2-bit fields: value n + 32*k + l (n = 0, 128; k = 0..3; l < 32) is bits
 * 2k..2k+1 of qs[n/4 + l]; Q2_K and Q3_K share this layout. */
static void unpack_2bit(const uint8_t *qs, int8_t q[QK])
{
    for (int n = 0; n < QK; n += 128)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++)
                q[n + 32 * k + l] = (int8_t)((qs[n / 4 + l] >> (2 * k)) & 3);
}

/* Q4_K/Q5_K: value 64*k + l is the low nibble of qs[32*k + l], value
 * 64*k + 32 + l the high one; the 8 scale/min pairs cover 32 values each. */
static void unpack_k4(const uint8_t *qs, const uint8_t *scales, struct kblock *b)
{
    for (int k = 0; k < QK / 64; k++)
        for (int l = 0; l < 32; l++) {
            b->q[64 * k + l] = (int8_t)(qs[32 * k + l] & 0xf);
            b->q[64 * k + 32 + l] = (int8_t)(qs[32 * k + l] >> 4);
        }
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        fl_q_scale_min_k4(j, scales, &sc, &m);
        b->sc[2 * j] = b->sc[2 * j + 1] = sc;
        b->mn[2 * j] = b->mn[2 * j + 1] = m;
    }
}

static void decode_q2_K(const struct fl_block_q2_K *x, struct kblock *b)
{
    unpack_2bit(x->qs, b->q);
    for (int g = 0; g < NG; g++) {
        b->sc[g] = x->scales[g] & 0xf;
        b->mn[g] = x->scales[g] >> 4;
    }
    b->d = fl_q_h2f(x->d);
    b->dmin = fl_q_h2f(x->dmin);
}

static void decode_q3_K(const struct fl_block_q3_K *x, struct kblock *b)
{
    int8_t sc[16];
    unpack_2bit(x->qs, b->q);
    for (int v = 0; v < QK; v++) /* a clear hmask bit subtracts 4 */
        if (!(x->hmask[v % 32] & (1u << (v / 32))))
            b->q[v] -= 4;
    unpack_q3k_scales(x->scales, sc);
    for (int g = 0; g < NG; g++) {
        b->sc[g] = sc[g];
        b->mn[g] = 0;
    }
    b->d = fl_q_h2f(x->d);
    b->dmin = 0.0f;
}

static void decode_q4_K(const struct fl_block_q4_K *x, struct kblock *b)
{
    unpack_k4(x->qs, x->scales, b);
    b->d = fl_q_h2f(x->d);
    b->dmin = fl_q_h2f(x->dmin);
}

static void decode_q5_K(const struct fl_block_q5_K *x, struct kblock *b)
{
    unpack_k4(x->qs, x->scales, b);
    for (int v = 0; v < QK; v++) /* bit v/32 of qh[v%32] is the fifth bit */
        b->q[v] += (int8_t)(((x->qh[v % 32] >> (v / 32)) & 1) << 4);
    b->d = fl_q_h2f(x->d);
    b->dmin = fl_q_h2f(x->dmin);
}

static void decode_q6_K(const struct fl_block_q6_K *x, struct kblock *b)
{
    /* value 128*n + 32*k + l: low nibble from ql[64*n + l + 32*(k&1)]
     * (high nibble when k >= 2), high 2 bits from qh[32*n + l] bits 2k. */
    for (int n = 0; n < 2; n++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                const uint8_t ql = x->ql[64 * n + l + 32 * (k & 1)];
                const int lo = k < 2 ? ql & 0xf : ql >> 4;
                const int hi = (x->qh[32 * n + l] >> (2 * k)) & 3;
                b->q[128 * n + 32 * k + l] = (int8_t)((lo | (hi << 4)) - 32);
            }
    for (int g = 0; g < NG; g++) {
        b->sc[g] = x->scales[g];
        b->mn[g] = 0;
    }
    b->d = fl_q_h2f(x->d);
    b->dmin = 0.0f;
}

static void decode_iq4_xs(const struct fl_block_iq4_xs *x, struct kblock *b)
{
    for (int v = 0; v < QK; v++) { /* 32-value sub-blocks of 16 bytes */
        const uint8_t byte = x->qs[16 * (v / 32) + v % 16];
        b->q[v] = fl_iq4nl_values[(v % 32) < 16 ? byte & 0xf : byte >> 4];
    }
    for (int g = 0; g < NG; g++) { /* 6-bit scale of sub-block g/2, biased by 32 */
        const int ib = g / 2;
        const int ls = ((x->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf)
                     | (((x->scales_h >> (2 * ib)) & 3) << 4);
        b->sc[g] = (int16_t)(ls - 32);
        b->mn[g] = 0;
    }
    b->d = fl_q_h2f(x->d);
    b->dmin = 0.0f;
}

/* y = (d*sc)*q - dmin*mn, as ggml groups it (subtracting +0 is exact). */
static void kblock_to_float(const struct kblock *b, float *y)
{
    for (int g = 0; g < NG; g++) {
        const float dl = b->d * (float)b->sc[g], ml = b->dmin * (float)b->mn[g];
        for (int l = 0; l < 16; l++)
            y[16 * g + l] = dl * (float)b->q[16 * g + l] - ml;
    }
}

#define K_TO_FLOAT(t)                                                        \
    void fl_q_to_float_##t(const void *src, float *dst, int64_t n)          \
    {                                                                        \
        const struct fl_block_##t *x = src;                                  \
        struct kblock b = {0};                                                   \
        for (int64_t i = 0; i < n / QK; i++) {                               \
            decode_##t(&x[i], &b);                                           \
            kblock_to_float(&b, dst + i * QK);                               \
        }                                                                    \
    }
K_TO_FLOAT(q2_K)
K_TO_FLOAT(q3_K)
K_TO_FLOAT(q4_K)
K_TO_FLOAT(q5_K)
K_TO_FLOAT(q6_K)
K_TO_FLOAT(iq4_xs)
#undef K_TO_FLOAT

/* --- Q8_K ------------------------------------------------------------------ */

void fl_q_to_float_q8_K(const void *src, float *dst, int64_t n)
{
    const struct fl_block_q8_K *x = src;
    for (int64_t i = 0; i < n / QK; i++)
        for (int j = 0; j < QK; j++)
            dst[i * QK + j] = x[i].d * x[i].qs[j];
}

/* ggml's quantize_row_q8_K: the value of largest magnitude (first on ties)
 * maps to -127 times its sign; quants round half to even via nearest_int;
 * bsums are the sums of each 16 quants. (ggml leaves bsums unwritten for an
 * all-zero block; they are zero here.) llama.cpp's x86 backend uses this
 * same function for activations. */
void fl_q_from_float_q8_K(const float *src, void *dst, int64_t n)
{
    struct fl_block_q8_K *y = dst;
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK; j++)
            if (fabsf(src[j]) > amax) {
                amax = fabsf(src[j]);
                max = src[j];
            }
        memset(&y[i], 0, sizeof(y[i]));
        if (!amax)
            continue;
        const float iscale = -127.0f / max;
        for (int j = 0; j < QK; j++) {
            const int v = fl_q_nearest_int(iscale * src[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int g = 0; g < NG; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++)
                sum += y[i].qs[16 * g + l];
            y[i].bsums[g] = (int16_t)sum;
        }
        y[i].d = 1.0f / iscale;
    }
}

/* --- scalar dot products against Q8_K -------------------------------------- */

/* ggml's generic Q3_K..Q6_K kernels keep 8 integer lanes (value index mod 8)
 * of scale*q*q8 per super-block, then 8 float lane sums across blocks. */
static void kblock_lanes(const struct kblock *b, const int8_t *q8, int32_t lanes[8])
{
    memset(lanes, 0, 8 * sizeof(lanes[0]));
    for (int v = 0; v < QK; v++)
        lanes[v % 8] += b->sc[v / 16] * (q8[v] * b->q[v]);
}

static int kblock_min_sum(const struct kblock *b, const struct fl_block_q8_K *y)
{
    int sum = 0;
    for (int g = 0; g < NG; g++)
        sum += y->bsums[g] * b->mn[g];
    return sum;
}

/* Q3_K..Q6_K: sums[l] += (d*y.d)*lane[l]; sum -= (dmin*y.d)*min_sum. */
#define K_VEC_DOT(t)                                                          \
    void fl_q_vec_dot_##t(int n, float *s, const void *vx, const void *vy)   \
    {                                                                         \
        const struct fl_block_##t *x = vx;                                    \
        const struct fl_block_q8_K *y = vy;                                   \
        struct kblock b = {0};                                                    \
        float sums[8] = {0}, sum = 0.0f;                                      \
        int32_t lanes[8];                                                     \
        for (int i = 0; i < n / QK; i++) {                                    \
            decode_##t(&x[i], &b);                                            \
            kblock_lanes(&b, y[i].qs, lanes);                                 \
            const float d = b.d * y[i].d;                                     \
            for (int l = 0; l < 8; l++)                                       \
                sums[l] += d * (float)lanes[l];                               \
            /* +0 for the symmetric formats: subtracting it is exact */      \
            sum -= (b.dmin * y[i].d) * (float)kblock_min_sum(&b, &y[i]);      \
        }                                                                     \
        for (int l = 0; l < 8; l++)                                           \
            sum += sums[l];                                                   \
        *s = sum;                                                             \
    }
K_VEC_DOT(q3_K)
K_VEC_DOT(q4_K)
K_VEC_DOT(q5_K)
K_VEC_DOT(q6_K)
#undef K_VEC_DOT

/* Q2_K: one integer sum per super-block; sum += (d*y.d)*isum - (dmin*y.d)*msum. */
void fl_q_vec_dot_q2_K(int n, float *s, const void *vx, const void *vy)
{
    const struct fl_block_q2_K *x = vx;
    const struct fl_block_q8_K *y = vy;
    struct kblock b = {0};
    float sum = 0.0f;
    for (int i = 0; i < n / QK; i++) {
        decode_q2_K(&x[i], &b);
        int isum = 0;
        for (int v = 0; v < QK; v++)
            isum += b.sc[v / 16] * (y[i].qs[v] * b.q[v]);
        const float dall = y[i].d * b.d, dmin = y[i].d * b.dmin;
        sum += dall * (float)isum - dmin * (float)kblock_min_sum(&b, &y[i]);
    }
    *s = sum;
}

/* IQ4_XS: one float term per 32-value sub-block, (d*y.d*scale)*isum. */
void fl_q_vec_dot_iq4_xs(int n, float *s, const void *vx, const void *vy)
{
    const struct fl_block_iq4_xs *x = vx;
    const struct fl_block_q8_K *y = vy;
    struct kblock b = {0};
    float sum = 0.0f;
    for (int i = 0; i < n / QK; i++) {
        decode_iq4_xs(&x[i], &b);
        const float d4d8 = b.d * y[i].d;
        for (int ib = 0; ib < QK / 32; ib++) {
            int isum = 0;
            for (int j = 0; j < 32; j++)
                isum += y[i].qs[32 * ib + j] * b.q[32 * ib + j];
            sum += (d4d8 * (float)b.sc[2 * ib]) * (float)isum;
        }
    }
    *s = sum;
}

/* --- quantizers: ggml's reference algorithms (quantize_row_q{4,5,6}_K_ref,
 * which is also what llama-quantize runs without an importance matrix) ---- */

/* Packs 8 6-bit (scale, min) pairs: the inverse of fl_q_scale_min_k4. */
static void pack_scale_min_k4(const uint8_t ls[8], const uint8_t lm[8], uint8_t out[12])
{
    memset(out, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            out[j] = ls[j];
            out[j + 4] = lm[j];
        } else {
            out[j + 4] = (uint8_t)((ls[j] & 0xf) | ((lm[j] & 0xf) << 4));
            out[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            out[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Weighted squared error of x ~ scale*L + min. */
static float affine_error(int n, const float *x, const float *w, const uint8_t *L, float scale, float min)
{
    float err = 0.0f;
    for (int i = 0; i < n; i++) {
        const float diff = scale * (float)L[i] + min - x[i];
        err += w[i] * (diff * diff);
    }
    return err;
}

/* ggml's make_qkx2_quants (squared error): fits x ~ scale*L + min with L in
 * 0..nmax and min <= 0, trying the plain range split and then nstep+1
 * stretched ones, each refined by weighted least squares. Returns the scale,
 * sets *neg_min = -min and L to the best quants. */
static float fit_affine(int n, int nmax, const float *x, const float *w, uint8_t *L,
                        float *neg_min, float rmin, float rdelta, int nstep)
{
    float min = x[0], max = x[0], sum_w = w[0], sum_x = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min), scale = 1 / iscale;
    for (int i = 0; i < n; i++)
        L[i] = (uint8_t)clampi(fl_q_nearest_int(iscale * (x[i] - min)), 0, nmax);
    float best = affine_error(n, x, w, L, scale, min);
    uint8_t aux[32];
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(fl_q_nearest_int(iscale * (x[i] - min)), 0, nmax);
            aux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            const float err = affine_error(n, x, w, aux, this_scale, this_min);
            if (err < best) {
                memcpy(L, aux, (size_t)n);
                best = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

/* Q4_K/Q5_K: fit each 32-value sub-block (weights rms + |x|), quantize the 8
 * scales and 8 mins to 6 bits against their maxima, then re-quantize the
 * values with the stored (rounded) scales. */
static void quant_k_affine(const float *x, int nmax, float rmin, int nstep,
                           fl_f16 *d_out, fl_f16 *dmin_out, uint8_t scales12[12], uint8_t L[QK])
{
    float scales[8], mins[8], w[32], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xb = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += xb[l] * xb[l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            w[l] = av_x + fabsf(xb[l]);
        scales[j] = fit_affine(32, nmax, xb, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        const uint8_t s = (uint8_t)fl_q_nearest_int(inv_scale * scales[j]);
        const uint8_t m = (uint8_t)fl_q_nearest_int(inv_min * mins[j]);
        ls[j] = s < 63 ? s : 63;
        lm[j] = m < 63 ? m : 63;
    }
    pack_scale_min_k4(ls, lm, scales12);
    *d_out = fl_q_f2h(max_scale / 63.f);
    *dmin_out = fl_q_f2h(max_min / 63.f);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        fl_q_scale_min_k4(j, scales12, &sc, &m);
        const float d = fl_q_h2f(*d_out) * (float)sc;
        if (!d) /* keep the fitted quants: they decode to the min anyway */
            continue;
        const float dm = fl_q_h2f(*dmin_out) * (float)m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)clampi(fl_q_nearest_int((x[32 * j + l] + dm) / d), 0, nmax);
    }
}

void fl_q_from_float_q4_K(const float *src, void *dst, int64_t n)
{
    struct fl_block_q4_K *y = dst;
    uint8_t L[QK];
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        quant_k_affine(src, 15, -1.f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
        for (int k = 0; k < QK / 64; k++)
            for (int l = 0; l < 32; l++)
                y[i].qs[32 * k + l] = (uint8_t)(L[64 * k + l] | (L[64 * k + 32 + l] << 4));
    }
}

void fl_q_from_float_q5_K(const float *src, void *dst, int64_t n)
{
    struct fl_block_q5_K *y = dst;
    uint8_t L[QK];
    for (int64_t i = 0; i < n / QK; i++, src += QK) {
        quant_k_affine(src, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        memset(y[i].qh, 0, sizeof(y[i].qh));
        for (int v = 0; v < QK; v++) /* fifth bit: bit v/32 of qh[v%32] */
            y[i].qh[v % 32] |= (uint8_t)((L[v] >> 4) << (v / 32));
        for (int k = 0; k < QK / 64; k++)
            for (int l = 0; l < 32; l++)
                y[i].qs[32 * k + l] = (uint8_t)((L[64 * k + l] & 0xf) | ((L[64 * k + 32 + l] & 0xf) << 4));
    }
}

/* Sums of ggml's make_qx_quants for one trial inverse scale (weights x^2). */
static void symmetric_trial(int n, int nmax, const float *x, float iscale, float *sumlx, float *suml2)
{
    *sumlx = *suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clampi(fl_q_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        const float w = x[i] * x[i];
        *sumlx += w * x[i] * (float)l;
        *suml2 += w * (float)l * (float)l;
    }
}

static void symmetric_quants(int n, int nmax, const float *x, float iscale, int8_t *L)
{
    for (int i = 0; i < n; i++)
        L[i] = (int8_t)(nmax + clampi(fl_q_nearest_int(iscale * x[i]), -nmax, nmax - 1));
}

/* ggml's make_qx_quants with x^2 weights (rmse_type 1): the value of largest
 * magnitude maps to -nmax, then 18 nearby inverse scales are tried and the
 * one with the best weighted least-squares fit kept. L holds l + nmax. */
static float fit_symmetric(int n, int nmax, const float *x, int8_t *L)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = (float)-nmax / max, sumlx, suml2;
    symmetric_quants(n, nmax, x, iscale, L);
    symmetric_trial(n, nmax, x, iscale, &sumlx, &suml2);
    float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        symmetric_trial(n, nmax, x, iscale, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            symmetric_quants(n, nmax, x, iscale, L);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q6_K: fit each 16-value group, quantize the 16 scales to int8 against the
 * one of largest magnitude, re-quantize the values with the stored scales. */
static void quant_q6_K_block(const float *x, struct fl_block_q6_K *y)
{
    int8_t L[QK];
    float scales[NG], max_scale = 0, max_abs = 0;
    for (int g = 0; g < NG; g++) {
        scales[g] = fit_symmetric(16, 32, x + 16 * g, L + 16 * g);
        if (fabsf(scales[g]) > max_abs) {
            max_abs = fabsf(scales[g]);
            max_scale = scales[g];
        }
    }
    memset(y, 0, sizeof(*y));
    if (max_abs < 1e-15f)
        return;
    const float iscale = -128.f / max_scale;
    y->d = fl_q_f2h(1 / iscale);
    for (int g = 0; g < NG; g++) {
        const int s = fl_q_nearest_int(iscale * scales[g]);
        y->scales[g] = (int8_t)(s < 127 ? s : 127);
    }
    for (int g = 0; g < NG; g++) {
        const float d = fl_q_h2f(y->d) * (float)y->scales[g];
        if (!d)
            continue;
        for (int l = 0; l < 16; l++)
            L[16 * g + l] = (int8_t)(32 + clampi(fl_q_nearest_int(x[16 * g + l] / d), -32, 31));
    }
    /* the layout decode_q6_K reads */
    for (int v = 0; v < QK; v++) {
        const int nh = v / 128, k = (v / 32) % 4, l = v % 32;
        const uint8_t q = (uint8_t)L[v];
        y->ql[64 * nh + l + 32 * (k & 1)] |= (uint8_t)((q & 0xf) << (k < 2 ? 0 : 4));
        y->qh[32 * nh + l] |= (uint8_t)((q >> 4) << (2 * k));
    }
}

void fl_q_from_float_q6_K(const float *src, void *dst, int64_t n)
{
    struct fl_block_q6_K *y = dst;
    for (int64_t i = 0; i < n / QK; i++)
        quant_q6_K_block(src + i * QK, &y[i]);
}

void fl_q4_K_to_r8(const struct fl_block_q4_K *const rows[8], int64_t nb,
                   struct fl_block_q4_K_r8 *out)
{
    for (int64_t b = 0; b < nb; b++) {
        struct fl_block_q4_K_r8 *o = out + b;
        for (int r = 0; r < 8; r++) {
            const struct fl_block_q4_K *x = rows[r] + b;
            o->d[r] = x->d;
            o->dmin[r] = x->dmin;
            for (int k = 0; k < 8; k++)
                fl_q_scale_min_k4(k, x->scales, &o->sc[k][r], &o->mn[k / 2][r][k % 2]);
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 8; j++)
                    memcpy(&o->qs[i][j][4 * r], x->qs + 32 * i + 4 * j, 4);
        }
    }
}
