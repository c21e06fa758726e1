/* repack.c: the Q4_K -> Q4_K_R8 rearrangement and the layout's scalar
 * kernel (the reference the SIMD kernel is held to; also what runs if a
 * repacked matrix meets a lower kernel level, e.g. FL_CPU_FEATURES in
 * tests). */
#include "engine/cpu/repack.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "engine/cpu/cpu-impl.h"

int fl_repack_layout(uint32_t type, int64_t n_in, int64_t n_rows)
{
    if (type != FL_TYPE_Q4_K || n_in <= 0 || n_in % FL_QK_K || n_rows <= 0 || n_rows % 8 ||
        n_in > INT32_MAX || fl_cpu_level() < FL_CPU_AVX512)
        return -1;
    return FL_TYPE_Q4_K_R8;
}

size_t fl_repack_size(uint32_t layout, int64_t n_in, int64_t n_rows)
{
    return n_rows < 0 ? 0 : fl_row_size(layout, n_in) * (size_t)n_rows;
}

/* Q4_K's 12 packed bytes to 8 six-bit scales and 8 mins (ggml's layout). */
static void unpack_scales(const uint8_t *q, uint8_t sc[8], uint8_t mn[8])
{
    for (int j = 0; j < 4; j++) {
        sc[j] = q[j] & 63;
        mn[j] = q[j + 4] & 63;
        sc[j + 4] = (uint8_t)((q[j + 8] & 0xf) | ((q[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
    }
}

static void repack_group(const struct fl_block_q4_K *rows[8], int b, struct fl_block_q4_K_r8 *o)
{
    for (int r = 0; r < 8; r++) {
        const struct fl_block_q4_K *x = rows[r] + b;
        uint8_t sc[8], mn[8];
        unpack_scales(x->scales, sc, mn);
        o->d[r] = x->d;
        o->dmin[r] = x->dmin;
        for (int k = 0; k < 8; k++) {
            o->sc[k][r] = sc[k];
            o->mn[k / 2][r][k % 2] = mn[k];
        }
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 8; j++)
                memcpy(&o->qs[i][j][4 * r], x->qs + 32 * i + 4 * j, 4);
    }
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
        for (int64_t b = 0; b < nb; b++)
            repack_group(rows, (int)b, o++);
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
