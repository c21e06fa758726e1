/* cpu-impl.h: private interface between the CPU dispatcher, the per-ISA
 * kernel files and matmul. Not for use outside backend/cpu/ and its tests. */
#ifndef FL_CPU_IMPL_H
#define FL_CPU_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/tensor-types.h"

/* AMX: AVX-512 plus AMX int8 tiles that the OS lets this process use. */
enum fl_cpu_level { FL_CPU_SCALAR = 0, FL_CPU_AVX2 = 1, FL_CPU_AVX512 = 2, FL_CPU_AMX = 3 };

/* Largest tile any kernel takes (rows x tokens): AMX's 16 x 64. */
#define FL_TILE_MAX_R 16
#define FL_TILE_MAX_C 64

/* A register-tile kernel: for r < nr, c < nc,
 *   y[c][r] = dot(row r of W, x[c]) over n values,
 * row r at (const char *)w + r * w_stride, x[c] a row of the weight type's
 * vec_dot_type. xsum is NULL or, for Q8_0 activations, xsum[c] points at the
 * per-block sums of x[c]'s quants (kernels that need them compute them when
 * xsum is NULL). Each y value is computed by the same instructions whatever
 * nr and nc are (see matmul.h, "Determinism"). 1 <= nr <= tile_r,
 * 1 <= nc <= tile_c. */
typedef void (*fl_tile_fn)(int n, int nr, const void *w, size_t w_stride, int nc,
                           const void *const *x, const int16_t *const *xsum, float *const *y);

/* Activation quantizer for one row (n a multiple of the block size). */
typedef void (*fl_act_quant_fn)(const float *x, void *y, int64_t n);

/* Attention's kernels (backend/cpu/attn-kernels.c, used by attention.c). */
struct fl_attn_kernels {
    /* F16 steps of the short-batch kernel: a dot product summed as ggml's
     * AVX-512 build sums it; acc = f16(v*s + acc); acc = f16(acc*s); to F32 */
    float (*dot_f16)(const fl_f16 *x, const fl_f16 *y, int64_t n);
    void (*mad_f16)(fl_f16 *acc, const fl_f16 *v, float s, int64_t n);
    void (*scale_f16)(fl_f16 *acc, float s, int64_t n);
    void (*f16_to_f32)(const fl_f16 *x, float *y, int64_t n);
    /* a quantized V's F32 accumulator: acc = fma(v, s, acc); acc *= s */
    void (*mad_f32)(float *acc, const float *v, float s, int64_t n);
    void (*scale_f32)(float *acc, float s, int64_t n);
    /* a Q8_0 V row to F32, the types module's values (NULL: its to_float) */
    void (*q8_0_to_f32)(const void *src, float *y, int64_t n);
    /* F32 path: s[i] = q . kt[.][i] for n keys (kt rows ld apart); the same
     * for the r query heads of a KV head at once, the same bits (NULL: one
     * head at a time), s rows lds apart; s[i] = exp(s[i] - M) returning the sum; acc = sum_i w[i] v[i] */
    void (*key_scores)(float *s, const float *q, const float *kt, int64_t ld, int64_t dk, int n);
    void (*key_scores_group)(float *s, int64_t lds, const float *q, int r, const float *kt,
                             int64_t ld, int64_t dk, int n);
    float (*exp_shifted)(float *s, int n, float M);
    float (*scale_max)(float *s, int n, float scale); /* s[i] *= scale; the largest */
    void (*weighted_rows)(float *acc, const float *w, const float *v, int n, int64_t dv);
    /* weighted_rows for r heads (acc and w rows lda apart) reading V once;
     * the same bits per head (NULL: one head at a time) */
    void (*weighted_rows_group)(float *acc, int64_t lda, const float *w, int r, const float *v,
                                int n, int64_t dv);
};

void fl_attn_kernels_scalar(struct fl_attn_kernels *k);
void fl_attn_kernels_avx2(struct fl_attn_kernels *k);
void fl_attn_kernels_avx512(struct fl_attn_kernels *k);

struct fl_cpu_kernels {
    const char *name;                  /* "scalar", "avx2", "avx512", "amx" */
    fl_tile_fn tile[FL_TYPE_COUNT];    /* by weight type; NULL: pairwise vec_dot */
    uint8_t tile_r[FL_TYPE_COUNT];     /* the largest nr, nc tile[] accepts */
    uint8_t tile_c[FL_TYPE_COUNT];
    /* For one-token matmuls (decode) where a kernel made for token tiles
     * wastes work: NULL = use tile[]. Its float order may differ from
     * tile[]'s, so matmul picks one kernel per call, never per tile. */
    fl_tile_fn tile1[FL_TYPE_COUNT];
    /* The rows matmul hands one tile1 call. A one-token matmul reads each
     * weight byte once, from DRAM; more than 1 only where the kernel reads
     * its rows one after another (one sequential stream; rows read side
     * by side interleave streams and run slower, see matmul.c). */
    uint8_t tile1_r[FL_TYPE_COUNT];
    /* Products of many tokens on AMX tiles (NULL: none for the type), in
     * tile[]'s float order, so matmul may pick either per call: it takes
     * amx[] for products of amx_min tokens or more (where it measured
     * faster); amx_r x amx_c the largest call. */
    fl_tile_fn amx[FL_TYPE_COUNT];
    uint8_t amx_r[FL_TYPE_COUNT];
    uint8_t amx_c[FL_TYPE_COUNT];
    uint8_t amx_min[FL_TYPE_COUNT];
    fl_vec_dot_fn vec_dot[FL_TYPE_COUNT];
    /* One row by one row in ggml's own vec_dot order (its type_traits_cpu
     * vec_dot: the x86 AVX2 kernel, which its AVX-512 build runs too), as
     * ggml's attention dots queries with a quantized cache's keys; vec_dot
     * may be another level's order (the one its matmuls match). */
    fl_vec_dot_fn row_dot[FL_TYPE_COUNT];
    /* by activation type; all levels give the bytes of the types module's
     * fl_type_from_float_act (llama.cpp's x86 activation rounding) */
    fl_act_quant_fn quant[FL_TYPE_COUNT];
    struct fl_attn_kernels attn;
};

/* Each fills in what its ISA accelerates; entries it leaves alone keep the
 * lower level's choice. */
void fl_cpu_kernels_scalar(struct fl_cpu_kernels *k);
void fl_cpu_kernels_avx2(struct fl_cpu_kernels *k);
void fl_cpu_kernels_avx512(struct fl_cpu_kernels *k);
void fl_cpu_kernels_amx(struct fl_cpu_kernels *k);

/* Q4_K_R8's scalar kernel (repack.c): groups of 8 rows from w (nr a
 * multiple of 8 but for a matrix's last group), any nc; the bits of every
 * level's Q4_K_R8 kernel and of AVX-512's Q4_K kernels. */
void fl_tile_q4_K_r8_scalar(int n, int nr, const void *w, size_t ws, int nc,
                            const void *const *x, const int16_t *const *xsum, float *const *y);

/* AMX's int8 multiply-adds per second on register-resident tiles,
 * measured for about `seconds` of this thread's CPU time (kern-amx.c);
 * 0 without AMX. What bench-kernels prints beside the products. */
double fl_amx_peak_macs(double seconds);

/* The kernel set chosen by fl_types_init (called on first use). */
const struct fl_cpu_kernels *fl_cpu_kernels(void);
/* The highest level this CPU and FL_CPU_FEATURES allow. */
enum fl_cpu_level fl_cpu_level(void);
/* Builds the kernel set of one level (<= fl_cpu_level()), for tests. */
void fl_cpu_kernels_for(enum fl_cpu_level level, struct fl_cpu_kernels *k);

/* ggml's E8M0 exponent to float, halved (MXFP4 values are stored doubled). */
static inline float fl_e8m0_half(uint8_t e)
{
    union { uint32_t u; float f; } v;
    v.u = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return v.f;
}

#endif
