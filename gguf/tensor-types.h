/* tensor-types.h: the ggml tensor formats faultline reads, behind one
 * type-traits table.
 *
 * Type ids are ggml's (they are what GGUF files store). Block layouts are
 * ggml's byte for byte, so a pointer into a mapped GGUF file can be cast to
 * the block type. Every quantized weight type names the 8-bit "companion"
 * format its activations are quantized to before an integer dot product, as
 * llama.cpp's CPU backend does (vec_dot_type); matching that choice is what
 * makes faultline's routing decisions match llama.cpp's. */
#ifndef FL_TENSOR_TYPES_H
#define FL_TENSOR_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum fl_type {
    FL_TYPE_F32 = 0,
    FL_TYPE_F16 = 1,
    FL_TYPE_Q4_0 = 2,
    FL_TYPE_Q4_1 = 3,
    FL_TYPE_Q5_0 = 6,
    FL_TYPE_Q5_1 = 7,
    FL_TYPE_Q8_0 = 8,
    FL_TYPE_Q8_1 = 9,
    FL_TYPE_Q2_K = 10,
    FL_TYPE_Q3_K = 11,
    FL_TYPE_Q4_K = 12,
    FL_TYPE_Q5_K = 13,
    FL_TYPE_Q6_K = 14,
    FL_TYPE_Q8_K = 15,
    FL_TYPE_IQ4_NL = 20,
    FL_TYPE_IQ4_XS = 23,
    FL_TYPE_BF16 = 30,
    FL_TYPE_MXFP4 = 39,
    FL_TYPE_FILE_COUNT = 40, /* one past the highest id a GGUF file may hold */
    /* Layouts faultline builds in memory, never found in a file (the GGUF
     * reader rejects their ids); see struct fl_block_q4_K_r8. */
    FL_TYPE_Q4_K_R8 = 40,
    FL_TYPE_COUNT = 41, /* one past the highest id the table is indexed by */
};

typedef uint16_t fl_f16;  /* IEEE half, stored as bits */
typedef uint16_t fl_bf16; /* bfloat16, stored as bits */

#define FL_QK4_0 32
#define FL_QK4_1 32
#define FL_QK5_0 32
#define FL_QK5_1 32
#define FL_QK8_0 32
#define FL_QK8_1 32
#define FL_QK_MXFP4 32
#define FL_QK4_NL 32
#define FL_QK_K 256
#define FL_K_SCALE_SIZE 12

struct fl_block_q4_0 { fl_f16 d; uint8_t qs[FL_QK4_0 / 2]; };
struct fl_block_q4_1 { fl_f16 d; fl_f16 m; uint8_t qs[FL_QK4_1 / 2]; };
struct fl_block_q5_0 { fl_f16 d; uint8_t qh[4]; uint8_t qs[FL_QK5_0 / 2]; };
struct fl_block_q5_1 { fl_f16 d; fl_f16 m; uint8_t qh[4]; uint8_t qs[FL_QK5_1 / 2]; };
struct fl_block_q8_0 { fl_f16 d; int8_t qs[FL_QK8_0]; };
struct fl_block_q8_1 { fl_f16 d; fl_f16 s; int8_t qs[FL_QK8_1]; };
struct fl_block_mxfp4 { uint8_t e; uint8_t qs[FL_QK_MXFP4 / 2]; };
struct fl_block_iq4_nl { fl_f16 d; uint8_t qs[FL_QK4_NL / 2]; };

struct fl_block_q2_K { uint8_t scales[FL_QK_K / 16]; uint8_t qs[FL_QK_K / 4]; fl_f16 d; fl_f16 dmin; };
struct fl_block_q3_K { uint8_t hmask[FL_QK_K / 8]; uint8_t qs[FL_QK_K / 4]; uint8_t scales[12]; fl_f16 d; };
struct fl_block_q4_K { fl_f16 d; fl_f16 dmin; uint8_t scales[FL_K_SCALE_SIZE]; uint8_t qs[FL_QK_K / 2]; };
struct fl_block_q5_K { fl_f16 d; fl_f16 dmin; uint8_t scales[FL_K_SCALE_SIZE]; uint8_t qh[FL_QK_K / 8]; uint8_t qs[FL_QK_K / 2]; };
struct fl_block_q6_K { uint8_t ql[FL_QK_K / 2]; uint8_t qh[FL_QK_K / 4]; int8_t scales[FL_QK_K / 16]; fl_f16 d; };
struct fl_block_q8_K { float d; int8_t qs[FL_QK_K]; int16_t bsums[FL_QK_K / 16]; };
/* Q4_K with 8 rows interleaved (backend/cpu/repack.h builds it from Q4_K
 * rows; only the matmul kernels read it). For rows 8g..8g+7 and block b:
 * the same values and scales as the 8 rows' Q4_K blocks, laid out so that
 * one 32-byte load holds 4 quant bytes of each of the 8 rows and the scales
 * need no unpacking: qs[i][j][4r + t] = row r's qs[32i + 4j + t],
 * sc[k][r] = row r's scale k, mn[p][r][h] = row r's min 2p + h. A matrix
 * is its groups one after another, each its blocks in order: rows 8g..8g+7
 * start at 8g * fl_row_size(FL_TYPE_Q4_K_R8, n), as rows do in a file. */
struct fl_block_q4_K_r8 {
    fl_f16 d[8];
    fl_f16 dmin[8];
    uint8_t sc[8][8];
    uint8_t mn[4][8][2];
    uint8_t qs[4][8][32];
};
struct fl_block_iq4_xs { fl_f16 d; uint16_t scales_h; uint8_t scales_l[FL_QK_K / 64]; uint8_t qs[FL_QK_K / 2]; };

_Static_assert(sizeof(struct fl_block_q4_0) == 18, "q4_0");
_Static_assert(sizeof(struct fl_block_q4_1) == 20, "q4_1");
_Static_assert(sizeof(struct fl_block_q5_0) == 22, "q5_0");
_Static_assert(sizeof(struct fl_block_q5_1) == 24, "q5_1");
_Static_assert(sizeof(struct fl_block_q8_0) == 34, "q8_0");
_Static_assert(sizeof(struct fl_block_q8_1) == 36, "q8_1");
_Static_assert(sizeof(struct fl_block_mxfp4) == 17, "mxfp4");
_Static_assert(sizeof(struct fl_block_iq4_nl) == 18, "iq4_nl");
_Static_assert(sizeof(struct fl_block_q2_K) == 84, "q2_K");
_Static_assert(sizeof(struct fl_block_q3_K) == 110, "q3_K");
_Static_assert(sizeof(struct fl_block_q4_K) == 144, "q4_K");
_Static_assert(sizeof(struct fl_block_q5_K) == 176, "q5_K");
_Static_assert(sizeof(struct fl_block_q6_K) == 210, "q6_K");
_Static_assert(sizeof(struct fl_block_q8_K) == 292, "q8_K");
_Static_assert(sizeof(struct fl_block_iq4_xs) == 136, "iq4_xs");
_Static_assert(sizeof(struct fl_block_q4_K_r8) == 8 * 148, "q4_K_r8");

/* Rows 8g..8g+7 of a Q4_K matrix (rows[r]: row r's first block) as nb
 * Q4_K_R8 blocks at out: the same values in the interleaved layout. */
void fl_q4_K_to_r8(const struct fl_block_q4_K *const rows[8], int64_t nb,
                   struct fl_block_q4_K_r8 *out);

/* n is always a multiple of the type's block size. */
typedef void (*fl_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*fl_from_float_fn)(const float *src, void *dst, int64_t n);
/* s = dot(x, y) over n values; x is a weight row of this type, y a row of
 * the type's vec_dot_type (the quantized activations). */
typedef void (*fl_vec_dot_fn)(int n, float *s, const void *x, const void *y);

struct fl_type_traits {
    const char *name;          /* ggml's name: "Q4_K", "MXFP4", ... */
    int blck_size;             /* values per block */
    size_t type_size;          /* bytes per block */
    bool is_quantized;
    /* An in-memory layout (id >= FL_TYPE_FILE_COUNT): type_size is the bytes
     * per block and row, but rows are interleaved, so there is no per-row
     * to_float / vec_dot; the matmul kernels alone read it, with the
     * activations in vec_dot_type. */
    bool is_layout;
    fl_to_float_fn to_float;   /* exact dequantization (bit-exact with ggml) */
    fl_from_float_fn from_float; /* quantization; NULL where faultline cannot quantize */
    enum fl_type vec_dot_type; /* format the other operand of vec_dot is in */
    fl_vec_dot_fn vec_dot;     /* best kernel for this CPU (backend/cpu/cpu.h's fl_types_init) */
    fl_vec_dot_fn vec_dot_ref; /* plain scalar reference of the same kernel */
};

/* What llama.cpp's --check-tensors finds wrong in a tensor's bytes (ggml's
 * ggml_validate_row_data): a NaN or an infinity among F32/F16/BF16 values
 * or in a quantized block's scales (d, and m or dmin where the block has
 * one; Q8_K's float d), or an MXFP4 block's exponent 0xff. */
enum fl_bad_data { FL_DATA_OK, FL_DATA_NAN, FL_DATA_INF, FL_DATA_BAD_EXP, FL_DATA_BAD_TYPE };

/* Checks n whole blocks of type at data (values, for F32/F16/BF16); on a
 * problem, *at is the index of the value or block it is in. An in-memory
 * layout or an unknown type: FL_DATA_BAD_TYPE. */
enum fl_bad_data fl_blocks_check(uint32_t type, const void *data, uint64_t n, uint64_t *at);
const char *fl_bad_data_name(enum fl_bad_data b); /* "NaN", "inf", ... */

/* Traits of a known type, NULL for an id faultline does not know. */
const struct fl_type_traits *fl_type_traits(uint32_t type);

/* Bytes of n values of type (n a multiple of the block size). */
size_t fl_row_size(uint32_t type, int64_t n);
const char *fl_type_name(uint32_t type); /* "?" when unknown */
/* Type id by ggml name (case-insensitive), or -1. */
int fl_type_by_name(const char *name);

float fl_f16_to_f32(fl_f16 h);
fl_f16 fl_f32_to_f16(float f);     /* round to nearest even, as ggml */
float fl_bf16_to_f32(fl_bf16 h);
fl_bf16 fl_f32_to_bf16(float f);   /* round to nearest even, as ggml */

/* Replaces type's vec_dot kernel (the CPU dispatcher calls this from
 * backend/cpu/cpu.h's fl_types_init); NULL restores vec_dot_ref. Ignored for unknown types and
 * for types without a kernel (Q8_1, Q8_K). */
void fl_type_set_vec_dot(uint32_t type, fl_vec_dot_fn fn);

/* The activation quantizer for a vec_dot_type, as llama.cpp's x86 CPU backend
 * runs it (its type_traits_cpu from_float), which is what decides llama.cpp's
 * expert routing. For Q8_0 and Q8_1 that is its AVX path: id = 127/amax and
 * round-half-to-even, which differs in rare ties/last-ulp cases from
 * from_float (ggml's reference quantizer, id = 1/d, round half away from
 * zero, what GGUF writers use). For every other type it is from_float. */
fl_from_float_fn fl_type_from_float_act(uint32_t type);

/* The 4-bit lookup tables (IQ4_NL/IQ4_XS; MXFP4 as doubled E2M1 values)
 * and MXFP4's block scale: 2^(e-128), i.e. half of E8M0, to undo the
 * doubling. */
extern const int8_t fl_iq4nl_values[16];
extern const int8_t fl_mxfp4_values[16];
float fl_e8m0_half_to_f32(uint8_t e);

#endif
