/* tensor-types.c: the type-traits table, the float formats (F32, F16, BF16)
 * and the lookups by id and name. The block codecs live in quant-*.c. */
#include "gguf/tensor-types.h"

#include <strings.h>

#include "gguf/quant-impl.h"

const int8_t fl_iq4nl_values[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

/* E2M1 values doubled so they are integers; the block scale is halved to
 * compensate (fl_e8m0_half_to_f32). */
const int8_t fl_mxfp4_values[16] = {
    0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
};

float fl_e8m0_half_to_f32(uint8_t e)
{
    /* 2^(e-128): e = 0 and 1 are float subnormals, the rest normal. */
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return fl_q_bits_f32(bits);
}

float fl_f16_to_f32(fl_f16 h) { return fl_q_h2f(h); }
fl_f16 fl_f32_to_f16(float f) { return fl_q_f2h(f); }

float fl_bf16_to_f32(fl_bf16 h) { return fl_q_bits_f32((uint32_t)h << 16); }

fl_bf16 fl_f32_to_bf16(float f)
{
    const uint32_t u = fl_q_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep the top payload, force quiet */
        return (fl_bf16)((u >> 16) | 64);
    return (fl_bf16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* --- F32 / F16 / BF16 rows -------------------------------------------------- */

static void f32_to_float(const void *src, float *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void f32_from_float(const float *src, void *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void f16_to_float(const void *src, float *dst, int64_t n)
{
    const fl_f16 *h = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = fl_q_h2f(h[i]);
}

static void f16_from_float(const float *src, void *dst, int64_t n)
{
    fl_f16 *h = dst;
    for (int64_t i = 0; i < n; i++)
        h[i] = fl_q_f2h(src[i]);
}

static void bf16_to_float(const void *src, float *dst, int64_t n)
{
    const fl_bf16 *h = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = fl_bf16_to_f32(h[i]);
}

static void bf16_from_float(const float *src, void *dst, int64_t n)
{
    fl_bf16 *h = dst;
    for (int64_t i = 0; i < n; i++)
        h[i] = fl_f32_to_bf16(src[i]);
}

/* ggml's scalar float dot products: each product rounded to float, the sum
 * kept in double and rounded once at the end. */
static void f32_vec_dot(int n, float *s, const void *vx, const void *vy)
{
    const float *x = vx, *y = vy;
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)(x[i] * y[i]);
    *s = (float)sum;
}

static void f16_vec_dot(int n, float *s, const void *vx, const void *vy)
{
    const fl_f16 *x = vx, *y = vy;
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)(fl_q_h2f(x[i]) * fl_q_h2f(y[i]));
    *s = (float)sum;
}

static void bf16_vec_dot(int n, float *s, const void *vx, const void *vy)
{
    const fl_bf16 *x = vx, *y = vy;
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)(fl_bf16_to_f32(x[i]) * fl_bf16_to_f32(y[i]));
    *s = (float)sum;
}

/* --- the table -------------------------------------------------------------- */

#define FLOATT(id, nm, ctype, pfx)                                            \
    [id] = { .name = nm, .blck_size = 1, .type_size = sizeof(ctype),          \
             .is_quantized = false, .to_float = pfx##_to_float,               \
             .from_float = pfx##_from_float, .vec_dot_type = id,              \
             .vec_dot = pfx##_vec_dot, .vec_dot_ref = pfx##_vec_dot }

/* A quantized weight type: its codec is fl_q_<pfx>, from_float may be NULL. */
#define QUANT(id, nm, pfx, blk, ff, vdt)                                      \
    [id] = { .name = nm, .blck_size = blk,                                    \
             .type_size = sizeof(struct fl_block_##pfx), .is_quantized = true,\
             .to_float = fl_q_to_float_##pfx, .from_float = ff,               \
             .vec_dot_type = vdt, .vec_dot = fl_q_vec_dot_##pfx,              \
             .vec_dot_ref = fl_q_vec_dot_##pfx }

/* An activation-only type (Q8_1, Q8_K): never the left operand of vec_dot,
 * as in ggml, so it has no kernel; its vec_dot_type is itself. */
#define ACT(id, nm, pfx, blk)                                                 \
    [id] = { .name = nm, .blck_size = blk,                                    \
             .type_size = sizeof(struct fl_block_##pfx), .is_quantized = true,\
             .to_float = fl_q_to_float_##pfx,                                 \
             .from_float = fl_q_from_float_##pfx, .vec_dot_type = id }

static struct fl_type_traits g_traits[FL_TYPE_COUNT] = {
    FLOATT(FL_TYPE_F32, "F32", float, f32),
    FLOATT(FL_TYPE_F16, "F16", fl_f16, f16),
    FLOATT(FL_TYPE_BF16, "BF16", fl_bf16, bf16),
    QUANT(FL_TYPE_Q4_0, "Q4_0", q4_0, FL_QK4_0, fl_q_from_float_q4_0, FL_TYPE_Q8_0),
    QUANT(FL_TYPE_Q4_1, "Q4_1", q4_1, FL_QK4_1, fl_q_from_float_q4_1, FL_TYPE_Q8_1),
    QUANT(FL_TYPE_Q5_0, "Q5_0", q5_0, FL_QK5_0, fl_q_from_float_q5_0, FL_TYPE_Q8_0),
    QUANT(FL_TYPE_Q5_1, "Q5_1", q5_1, FL_QK5_1, fl_q_from_float_q5_1, FL_TYPE_Q8_1),
    QUANT(FL_TYPE_Q8_0, "Q8_0", q8_0, FL_QK8_0, fl_q_from_float_q8_0, FL_TYPE_Q8_0),
    ACT(FL_TYPE_Q8_1, "Q8_1", q8_1, FL_QK8_1),
    QUANT(FL_TYPE_Q2_K, "Q2_K", q2_K, FL_QK_K, NULL, FL_TYPE_Q8_K),
    QUANT(FL_TYPE_Q3_K, "Q3_K", q3_K, FL_QK_K, NULL, FL_TYPE_Q8_K),
    QUANT(FL_TYPE_Q4_K, "Q4_K", q4_K, FL_QK_K, fl_q_from_float_q4_K, FL_TYPE_Q8_K),
    QUANT(FL_TYPE_Q5_K, "Q5_K", q5_K, FL_QK_K, fl_q_from_float_q5_K, FL_TYPE_Q8_K),
    QUANT(FL_TYPE_Q6_K, "Q6_K", q6_K, FL_QK_K, fl_q_from_float_q6_K, FL_TYPE_Q8_K),
    ACT(FL_TYPE_Q8_K, "Q8_K", q8_K, FL_QK_K),
    QUANT(FL_TYPE_IQ4_NL, "IQ4_NL", iq4_nl, FL_QK4_NL, fl_q_from_float_iq4_nl, FL_TYPE_Q8_0),
    QUANT(FL_TYPE_IQ4_XS, "IQ4_XS", iq4_xs, FL_QK_K, NULL, FL_TYPE_Q8_K),
    QUANT(FL_TYPE_MXFP4, "MXFP4", mxfp4, FL_QK_MXFP4, fl_q_from_float_mxfp4, FL_TYPE_Q8_0),
    [FL_TYPE_Q4_K_R8] = { .name = "Q4_K_R8", .blck_size = FL_QK_K,
                          .type_size = sizeof(struct fl_block_q4_K_r8) / 8, .is_quantized = true,
                          .is_layout = true, .vec_dot_type = FL_TYPE_Q8_K },
};

const struct fl_type_traits *fl_type_traits(uint32_t type)
{
    if (type >= FL_TYPE_COUNT || !g_traits[type].name)
        return NULL;
    return &g_traits[type];
}

void fl_type_set_vec_dot(uint32_t type, fl_vec_dot_fn fn)
{
    if (type < FL_TYPE_COUNT && g_traits[type].name && g_traits[type].vec_dot_ref)
        g_traits[type].vec_dot = fn ? fn : g_traits[type].vec_dot_ref;
}

fl_from_float_fn fl_type_from_float_act(uint32_t type)
{
    switch (type) {
    case FL_TYPE_Q8_0: return fl_q_act_q8_0;
    case FL_TYPE_Q8_1: return fl_q_act_q8_1;
    default: {
        const struct fl_type_traits *t = fl_type_traits(type);
        return t ? t->from_float : NULL;
    }
    }
}

size_t fl_row_size(uint32_t type, int64_t n)
{
    const struct fl_type_traits *t = fl_type_traits(type);
    if (!t || n < 0)
        return 0;
    return t->type_size * (size_t)(n / t->blck_size);
}

const char *fl_type_name(uint32_t type)
{
    const struct fl_type_traits *t = fl_type_traits(type);
    return t ? t->name : "?";
}

int fl_type_by_name(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < FL_TYPE_FILE_COUNT; i++) /* layouts are not for users to pick */
        if (g_traits[i].name && strcasecmp(g_traits[i].name, name) == 0)
            return i;
    return -1;
}
