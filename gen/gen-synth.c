/* gen-synth.c: the generator's weights.
 *
 * Big matrices are written as random quantized blocks with a block scale
 * that gives the weights std sigma (1/sqrt(fan_in)); nothing is quantized
 * from floats there, which is what makes tens of GB fast. Small tensors
 * (norms, routers, biases, embeddings, output head) are real floats,
 * quantized through the type table where their type is not F32.
 *
 * Router skew: one residual coordinate, v_dim, carries a fixed value v_mag
 * in every token embedding, and every tensor that writes the residual
 * stream keeps that coordinate at zero, so after each RMSNorm a token's
 * stream still points partly along v. Router row e holds offset_e / v_norm
 * at v_dim, which adds offset_e to expert e's logit for every token: a
 * per-layer power law over a per-layer random expert ranking. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "gen/gen-internal.h"
#include "gguf/tensor-types.h"

#define CHUNK_BYTES (4u << 20)
#define GAUSS_N 4096 /* table entries; 12 random bits pick one */

/* splitmix64: tiny state, good enough mixing, trivially seekable. */
static inline uint64_t sm64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t gen_mix(uint64_t a, uint64_t b)
{
    uint64_t s = a ^ (b * 0xd1342543de82ef95ull);
    sm64(&s);
    return sm64(&s);
}

static double uniform01(uint64_t *s) /* (0, 1) */
{
    return ((double)(sm64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double gauss(uint64_t *s)
{
    /* Box-Muller, one value per call: small tensors only */
    double u = uniform01(s), v = uniform01(s);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Equal-probability quantiles of N(0,1), for matrices that need Gaussian
 * values fast (F16, Q8_0), and the same as int8 for Q8_0. */
static float gauss_tab[GAUSS_N];
static int8_t q8_tab[GAUSS_N];
static float q8_tab_std;
static pthread_once_t tab_once = PTHREAD_ONCE_INIT;

static void tab_init(void)
{
    double ss = 0;
    for (int i = 0; i < GAUSS_N; i++) {
        double p = (i + 0.5) / GAUSS_N, lo = -10, hi = 10;
        for (int it = 0; it < 60; it++) { /* bisection on the normal CDF */
            double mid = 0.5 * (lo + hi);
            if (0.5 * erfc(-mid / sqrt(2.0)) < p)
                lo = mid;
            else
                hi = mid;
        }
        gauss_tab[i] = (float)(0.5 * (lo + hi));
        double q = nearbyint(gauss_tab[i] * 32.0);
        q8_tab[i] = (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
        ss += (double)q8_tab[i] * q8_tab[i];
    }
    q8_tab_std = (float)sqrt(ss / GAUSS_N);
}

void gen_layer_offsets(const struct gen_params *p, int64_t il, float *out)
{
    int64_t n = p->n_expert;
    uint64_t s = gen_mix(p->seed, 0x5e77000000ull + (uint64_t)il);
    /* exponent varies by layer, so popularity differs per layer too */
    double a = p->skew * (0.75 + 0.5 * uniform01(&s)), mean = 0;
    for (int64_t e = 0; e < n; e++)
        out[e] = (float)e;
    for (int64_t e = n - 1; e > 0; e--) { /* Fisher-Yates: expert -> rank */
        int64_t j = (int64_t)(sm64(&s) % (uint64_t)(e + 1));
        float t = out[e];
        out[e] = out[j];
        out[j] = t;
    }
    for (int64_t e = 0; e < n; e++) {
        out[e] = (float)(-a * log(1.0 + out[e]));
        mean += out[e];
    }
    for (int64_t e = 0; e < n; e++)
        out[e] -= (float)(mean / (double)n);
}

int64_t gen_chunk_rows(const struct gen_tensor *t)
{
    int64_t rows = (int64_t)(CHUNK_BYTES / fl_row_size(t->type, t->ne[0]));
    if (t->init != GEN_INIT_MATRIX && rows > (int64_t)(CHUNK_BYTES / 4) / t->ne[0])
        rows = (int64_t)(CHUNK_BYTES / 4) / t->ne[0];
    return rows < 1 ? 1 : rows;
}

/* --- random blocks ------------------------------------------------------------ */

static void row_f16(fl_f16 *dst, int64_t n, const fl_f16 *tab, uint64_t *s)
{
    for (int64_t i = 0; i < n; i += 5) {
        uint64_t r = sm64(s);
        for (int k = 0; k < 5 && i + k < n; k++, r >>= 12)
            dst[i + k] = tab[r & (GAUSS_N - 1)];
    }
}

static void row_q8_0(struct fl_block_q8_0 *b, int64_t nb, fl_f16 d, uint64_t *s)
{
    for (int64_t i = 0; i < nb; i++) {
        b[i].d = d;
        for (int j = 0; j < FL_QK8_0; j += 5) {
            uint64_t r = sm64(s);
            for (int k = 0; k < 5 && j + k < FL_QK8_0; k++, r >>= 12)
                b[i].qs[j + k] = q8_tab[r & (GAUSS_N - 1)];
        }
    }
}

/* Q4_K: value = d*sc*q - dmin*m over 8 sub-blocks of 32, q uniform 0..15.
 * With dmin = 4d and m = sc*15/8 (sc 16, 24, 32 with odds 2:1:1) each
 * sub-block is exactly centred; std = d * rms(sc) * sqrt(255/12). */
static void row_q4_K(struct fl_block_q4_K *b, int64_t nb, float sigma, uint64_t *s)
{
    const float rms_sc = sqrtf(0.5f * 16 * 16 + 0.25f * 24 * 24 + 0.25f * 32 * 32);
    float d = sigma / (rms_sc * sqrtf(255.0f / 12.0f));
    fl_f16 dh = fl_f32_to_f16(d), mh = fl_f32_to_f16(4.0f * d);
    for (int64_t i = 0; i < nb; i++) {
        uint8_t sc[8], m[8];
        uint64_t r = sm64(s);
        for (int j = 0; j < 8; j++, r >>= 2) {
            sc[j] = (uint8_t)(16 + 8 * ((r & 3) % 3));
            m[j] = (uint8_t)(sc[j] * 15 / 8);
        }
        b[i].d = dh;
        b[i].dmin = mh;
        /* ggml's 6-bit packing (get_scale_min_k4) */
        for (int j = 0; j < 4; j++) {
            b[i].scales[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
            b[i].scales[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
            b[i].scales[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
        }
        for (int j = 0; j < FL_QK_K / 2; j += 8) {
            uint64_t q = sm64(s);
            memcpy(b[i].qs + j, &q, 8);
        }
    }
}

/* MXFP4: value = kv[q] * 2^(e-127) / 2 with kv the doubled E2M1 values
 * (rms 5.85 over uniform q). The power-of-two scale is dithered between
 * the two exponents around sigma so the variance comes out right. */
static void row_mxfp4(struct fl_block_mxfp4 *b, int64_t nb, float sigma, uint64_t *s)
{
    const double unit = 0.5 * sqrt(2.0 * (0 + 1 + 4 + 9 + 16 + 36 + 64 + 144) / 16.0);
    double x = log2(sigma / unit), e0 = floor(x);
    double p1 = (pow(4.0, x) - pow(4.0, e0)) / (pow(4.0, e0 + 1) - pow(4.0, e0));
    uint64_t thresh = (uint64_t)(p1 * 18446744073709551615.0);
    int ebase = (int)e0 + 127;
    ebase = ebase < 1 ? 1 : ebase > 253 ? 253 : ebase;
    for (int64_t i = 0; i < nb; i++) {
        b[i].e = (uint8_t)(ebase + (sm64(s) < thresh));
        uint64_t q0 = sm64(s), q1 = sm64(s);
        memcpy(b[i].qs, &q0, 8);
        memcpy(b[i].qs + 8, &q1, 8);
    }
}

static void matrix_rows(const struct gen_plan *plan, const struct gen_tensor *t, int64_t row0,
                        int64_t nrows, uint64_t *s, uint8_t *dst)
{
    const struct fl_type_traits *tr = fl_type_traits(t->type);
    size_t rb = fl_row_size(t->type, t->ne[0]);
    int64_t nb = t->ne[0] / tr->blck_size;
    fl_f16 tab16[GAUSS_N];
    fl_f16 d8 = fl_f32_to_f16(t->sigma / q8_tab_std);
    if (t->type == FL_TYPE_F16)
        for (int i = 0; i < GAUSS_N; i++)
            tab16[i] = fl_f32_to_f16(t->sigma * gauss_tab[i]);
    for (int64_t r = 0; r < nrows; r++) {
        void *row = dst + (size_t)r * rb;
        if (t->orth && (row0 + r) % t->ne[1] == plan->v_dim) {
            memset(row, 0, rb); /* the writer's v output stays 0 */
            continue;
        }
        switch (t->type) {
        case FL_TYPE_F16: row_f16(row, t->ne[0], tab16, s); break;
        case FL_TYPE_Q8_0: row_q8_0(row, nb, d8, s); break;
        case FL_TYPE_Q4_K: row_q4_K(row, nb, t->sigma, s); break;
        default: row_mxfp4(row, nb, t->sigma, s); break;
        }
    }
}

/* --- real floats --------------------------------------------------------------- */

static float float_value(const struct gen_plan *plan, const struct gen_tensor *t, int64_t row,
                         int64_t i0, uint64_t *s)
{
    bool at_v = i0 == plan->v_dim && t->ne[0] == plan->p->n_embd;
    switch (t->init) {
    case GEN_INIT_NORM:
        return 1.0f + t->sigma * (float)gauss(s);
    case GEN_INIT_EMBD:
        return at_v ? plan->v_mag : (float)gauss(s);
    case GEN_INIT_SSM_A:
        return -(1.0f + 4.0f * fabsf((float)gauss(s)));
    case GEN_INIT_SSM_DT:
        return -4.0f + t->sigma * (float)gauss(s);
    case GEN_INIT_ROUTER:
        if (at_v) /* rows are experts */
            return plan->offsets[t->layer * plan->p->n_expert + row] / plan->v_norm;
        return t->sigma * (float)gauss(s);
    default: /* NOISE, OUTPUT */
        if (at_v && (t->orth || t->init == GEN_INIT_OUTPUT))
            return 0.0f;
        return t->sigma * (float)gauss(s);
    }
}

void gen_synth_rows(const struct gen_plan *plan, const struct gen_tensor *t, int64_t row0,
                    int64_t nrows, uint64_t key, void *dst, float *scratch)
{
    uint64_t s = key;
    pthread_once(&tab_once, tab_init);
    if (t->init == GEN_INIT_MATRIX) {
        matrix_rows(plan, t, row0, nrows, &s, dst);
        return;
    }
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t i = 0; i < t->ne[0]; i++)
            scratch[r * t->ne[0] + i] = float_value(plan, t, row0 + r, i, &s);
    fl_type_traits(t->type)->from_float(scratch, dst, nrows * t->ne[0]);
}
