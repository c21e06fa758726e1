/* repack.c: when and how a matrix is rebuilt in a faster layout (the block
 * rearrangement itself is the types module's fl_q4_K_to_r8), and the
 * layout's scalar kernel (the reference the SIMD kernel is held to; also
 * what runs if a repacked matrix meets a lower kernel level, e.g.
 * FL_CPU_FEATURES in tests). */
#include "backend/cpu/repack.h"

#include <errno.h>
#include <math.h>

#include "backend/cpu/cpu-impl.h"

int fl_repack_layout(uint32_t type, int64_t n_in, int64_t n_rows)
{
    if (type != FL_TYPE_Q4_K || n_in <= 0 || n_in % FL_QK_K || n_rows <= 0 || n_rows % 8 ||
        n_in > INT32_MAX || fl_cpu_level() < FL_CPU_AVX2)
        return -1;
    return FL_TYPE_Q4_K_R8;
}

size_t fl_repack_size(uint32_t layout, int64_t n_in, int64_t n_rows)
{
    return n_rows < 0 ? 0 : fl_row_size(layout, n_in) * (size_t)n_rows;
}

int fl_repack(uint32_t type, const void *src, void *dst, int64_t n_in, int64_t n_rows)
{
    if (fl_repack_layout(type, n_in, n_rows) != FL_TYPE_Q4_K_R8)
        return -EINVAL;
    const int64_t nb = n_in / FL_QK_K;
    const size_t rs = fl_row_size(FL_TYPE_Q4_K, n_in);
    struct fl_block_q4_K_r8 *o = dst;
    for (int64_t g = 0; g < n_rows / 8; g++) {
        const struct fl_block_q4_K *rows[8];
        for (int r = 0; r < 8; r++)
            rows[r] = (const struct fl_block_q4_K *)((const char *)src + (size_t)(8 * g + r) * rs);
        fl_q4_K_to_r8(rows, nb, o);
        o += nb;
    }
    return 0;
}

/* Row r of a group against token y, in the order the SIMD kernels use:
 * per block the exact integers S = sum_k sc_k * dot_k and M = sum_k mn_k *
 * (bsum_2k + bsum_2k+1), then acc = fma(S, d * dy, acc) and
 * acc = fma(-M, dmin * dy, acc). */
static float r8_row(const struct fl_block_q4_K_r8 *g, int nb, int r, const struct fl_block_q8_K *y)
{
    float acc = 0.0f;
    for (int b = 0; b < nb; b++) {
        const struct fl_block_q4_K_r8 *x = g + b;
        int32_t S = 0, M = 0;
        for (int k = 0; k < 8; k++) {
            const int i = k / 2, shift = 4 * (k % 2);
            int32_t dot = 0;
            for (int l = 0; l < 32; l++) {
                const int q = (x->qs[i][l / 4][4 * r + l % 4] >> shift) & 0xf;
                dot += q * y[b].qs[32 * k + l];
            }
            S += (int32_t)x->sc[k][r] * dot;
            M += (int32_t)x->mn[k / 2][r][k % 2] * (y[b].bsums[2 * k] + y[b].bsums[2 * k + 1]);
        }
        const float dy = y[b].d;
        acc = fmaf((float)S, fl_f16_to_f32(x->d[r]) * dy, acc);
        acc = fmaf((float)(-M), fl_f16_to_f32(x->dmin[r]) * dy, acc);
    }
    return acc;
}

void fl_tile_q4_K_r8_scalar(int n, int nr, const void *w, size_t ws, int nc,
                            const void *const *x, const int16_t *const *xsum, float *const *y)
{
    (void)xsum;
    const int nb = n / FL_QK_K;
    for (int r0 = 0; r0 < nr; r0 += 8) { /* a tile1 call may take several groups */
        const struct fl_block_q4_K_r8 *g =
            (const struct fl_block_q4_K_r8 *)((const char *)w + (size_t)r0 * ws);
        for (int c = 0; c < nc; c++)
            for (int r = 0; r < 8 && r0 + r < nr; r++)
                y[c][r0 + r] = r8_row(g, nb, r, x[c]);
    }
}
