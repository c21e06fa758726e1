/* tensor-check.c: the values --check-tensors refuses (tensor-types.h), by
 * each block layout's scale fields, as ggml's ggml_validate_row_data. */
#include <stddef.h>
#include <string.h>

#include "gguf/tensor-types.h"

static enum fl_bad_data f16_bad(uint16_t h)
{
    if ((h & 0x7c00) != 0x7c00)
        return FL_DATA_OK;
    return h & 0x03ff ? FL_DATA_NAN : FL_DATA_INF;
}

static enum fl_bad_data bf16_bad(uint16_t h)
{
    const uint16_t m = h & 0x7fff;
    return m > 0x7f80 ? FL_DATA_NAN : m == 0x7f80 ? FL_DATA_INF : FL_DATA_OK;
}

static enum fl_bad_data f32_bad(uint32_t u)
{
    if ((u & 0x7f800000u) != 0x7f800000u)
        return FL_DATA_OK;
    return u & 0x007fffffu ? FL_DATA_NAN : FL_DATA_INF;
}

/* Where a block type keeps its f16 scales (second -1: one scale). */
struct scales {
    uint32_t type;
    int first, second;
};

static const struct scales block_scales[] = {
    { FL_TYPE_Q4_0, offsetof(struct fl_block_q4_0, d), -1 },
    { FL_TYPE_Q4_1, offsetof(struct fl_block_q4_1, d), offsetof(struct fl_block_q4_1, m) },
    { FL_TYPE_Q5_0, offsetof(struct fl_block_q5_0, d), -1 },
    { FL_TYPE_Q5_1, offsetof(struct fl_block_q5_1, d), offsetof(struct fl_block_q5_1, m) },
    { FL_TYPE_Q8_0, offsetof(struct fl_block_q8_0, d), -1 },
    { FL_TYPE_Q2_K, offsetof(struct fl_block_q2_K, d), offsetof(struct fl_block_q2_K, dmin) },
    { FL_TYPE_Q3_K, offsetof(struct fl_block_q3_K, d), -1 },
    { FL_TYPE_Q4_K, offsetof(struct fl_block_q4_K, d), offsetof(struct fl_block_q4_K, dmin) },
    { FL_TYPE_Q5_K, offsetof(struct fl_block_q5_K, d), offsetof(struct fl_block_q5_K, dmin) },
    { FL_TYPE_Q6_K, offsetof(struct fl_block_q6_K, d), -1 },
    { FL_TYPE_IQ4_NL, offsetof(struct fl_block_iq4_nl, d), -1 },
    { FL_TYPE_IQ4_XS, offsetof(struct fl_block_iq4_xs, d), -1 },
};

static uint16_t rd16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static uint32_t rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static enum fl_bad_data check_scales(const struct scales *sc, const unsigned char *b, size_t size,
                                     uint64_t n, uint64_t *at)
{
    for (uint64_t i = 0; i < n; i++, b += size) {
        enum fl_bad_data bad = f16_bad(rd16(b + sc->first));
        if (!bad && sc->second >= 0)
            bad = f16_bad(rd16(b + sc->second));
        if (bad) {
            *at = i;
            return bad;
        }
    }
    return FL_DATA_OK;
}

/* Plain values or per-block fields that are not f16 scales. */
static enum fl_bad_data check_other(uint32_t type, const unsigned char *b, uint64_t n, uint64_t *at)
{
    enum fl_bad_data bad = FL_DATA_OK;
    uint64_t i = 0;
    switch (type) {
    case FL_TYPE_F32:
        for (; i < n && !bad; i++)
            bad = f32_bad(rd32(b + 4 * i));
        break;
    case FL_TYPE_F16:
        for (; i < n && !bad; i++)
            bad = f16_bad(rd16(b + 2 * i));
        break;
    case FL_TYPE_BF16:
        for (; i < n && !bad; i++)
            bad = bf16_bad(rd16(b + 2 * i));
        break;
    case FL_TYPE_Q8_K:
        for (; i < n && !bad; i++)
            bad = f32_bad(rd32(b + i * sizeof(struct fl_block_q8_K)));
        break;
    case FL_TYPE_MXFP4:
        for (; i < n && !bad; i++)
            bad = b[i * sizeof(struct fl_block_mxfp4)] == 0xff ? FL_DATA_BAD_EXP : FL_DATA_OK;
        break;
    default:
        return FL_DATA_BAD_TYPE;
    }
    if (bad)
        *at = i - 1;
    return bad;
}

enum fl_bad_data fl_blocks_check(uint32_t type, const void *data, uint64_t n, uint64_t *at)
{
    const struct fl_type_traits *t = fl_type_traits(type);
    if (!t || t->is_layout)
        return FL_DATA_BAD_TYPE;
    for (size_t k = 0; k < sizeof(block_scales) / sizeof(block_scales[0]); k++)
        if (block_scales[k].type == type)
            return check_scales(&block_scales[k], data, t->type_size, n, at);
    return check_other(type, data, n, at);
}

const char *fl_bad_data_name(enum fl_bad_data b)
{
    switch (b) {
    case FL_DATA_OK: return "no problem";
    case FL_DATA_NAN: return "NaN";
    case FL_DATA_INF: return "an infinity";
    case FL_DATA_BAD_EXP: return "the exponent 0xff (no number)";
    case FL_DATA_BAD_TYPE: return "a type that cannot be checked";
    }
    return "?";
}
