/* gpu-matmul.c: the GPU backend's products of weights, batch invariant.
 *
 * cuBLAS picks its algorithm by the product's shape, so the same column
 * can come out with other bits in a product of more columns; the matvec
 * kernels compute each column alone (one warp per output, the same order
 * for any number of columns). The rule (docs/batching.md): rows of a span
 * of at least GPU_GEMM_MIN_TOK tokens go to cuBLAS as one product of their
 * own, every other row to the matvec kernels. A prompt chunk is cut the
 * same way alone and batched, and a decode token is a decode token,
 * whatever shares the step. */
#include "backend/cuda/gpu-impl.h"

#include <limits.h>

#include "model/arch.h"

_Static_assert(ENG_SPAN_SHORT_MAX < GPU_GEMM_MIN_TOK, "a short span's rows are matvec columns");

static int matvec_rows(struct eng_gpu *g, const void *d_w, uint32_t type, int64_t n_in,
                       int64_t n_out, const float *d_x, int64_t r0, int64_t r1, float *d_y,
                       struct fl_err *err)
{
    return fl_cuda_matvec(g->cu, d_w, type, n_in, n_out, d_x + r0 * n_in, r1 - r0,
                          d_y + r0 * n_out, err);
}

int gpu_matmul_rows(struct eng_gpu *g, const void *d_w, uint32_t type, int64_t n_in,
                    int64_t n_out, const float *d_x, int64_t n_tok, float *d_y,
                    const int32_t *row_span, struct fl_err *err)
{
    if (!row_span) /* rows of unknown spans: by the batch, or each alone when it matters */
        return fl_cuda_matmul(g->cu, d_w, type, n_in, n_out, d_x, n_tok, d_y,
                              g->o.batch_invariant ? INT_MAX : GPU_GEMM_MIN_TOK, err);
    int64_t mv = -1; /* first row of the matvec rows not run yet */
    int rc = 0;
    for (int64_t i = 0; i < n_tok && !rc;) {
        int64_t j = i + 1;
        while (j < n_tok && row_span[j] == row_span[i])
            j++;
        if (j - i >= GPU_GEMM_MIN_TOK) {
            if (mv >= 0)
                rc = matvec_rows(g, d_w, type, n_in, n_out, d_x, mv, i, d_y, err);
            mv = -1;
            if (!rc)
                rc = fl_cuda_matmul_gemm(g->cu, d_w, type, n_in, n_out, d_x + i * n_in, j - i,
                                         d_y + i * n_out, err);
        } else if (mv < 0) {
            mv = i;
        }
        i = j;
    }
    if (!rc && mv >= 0)
        rc = matvec_rows(g, d_w, type, n_in, n_out, d_x, mv, n_tok, d_y, err);
    return rc;
}

const int32_t *gpu_row_spans(struct eng_ctx *c, int64_t n_rows)
{
    const struct eng_batch *b = c->batch;
    if (!b || !b->span)
        return NULL;
    if (n_rows == b->n_tok)
        return b->span;
    if (n_rows != b->n_out) /* no product of the passes has other rows */
        return NULL;
    int32_t *s = eng_scratch(c, sizeof(int32_t) * (size_t)n_rows); /* the head's rows */
    for (int64_t i = 0; i < n_rows; i++)
        s[i] = b->span[b->out[i]];
    return s;
}
