/* cuda-ops.c: the public compute calls: argument checks, launches, and the
 * cuBLAS prefill path. Kernels live in cuda-quant.cu and cuda-ops.cu. */
#include <errno.h>

#include "backend/cuda/cuda-impl.h"
#include "gguf/tensor-types.h"

/* Largest F16 tile of dequantized weights the prefill path keeps at once. */
#define GEMM_TILE_BYTES ((size_t)64 << 20)

bool fl_cuda_type_supported(uint32_t t)
{
    return t == FL_TYPE_F32 || t == FL_TYPE_F16 || t == FL_TYPE_Q8_0 || t == FL_TYPE_MXFP4 ||
           t == FL_TYPE_Q4_K || t == FL_TYPE_Q5_K || t == FL_TYPE_Q6_K;
}

static int launched(struct fl_err *err, cudaError_t e, const char *what)
{
    return e == cudaSuccess ? 0 : flc_err(err, e, what);
}

static int check_matrix(uint32_t t, int64_t n_in, int64_t n_out, int64_t n_tok,
                        struct fl_err *err)
{
    if (!fl_cuda_type_supported(t))
        return fl_err_set(err, -EINVAL, "cuda: no kernel for %s weights", fl_type_name(t));
    const struct fl_type_traits *tr = fl_type_traits(t);
    const int64_t blk = tr->blck_size < 32 ? 32 : tr->blck_size;
    if (n_in <= 0 || n_in % blk || n_out <= 0 || n_tok <= 0)
        return fl_err_set(err, -EINVAL, "cuda: bad %s matrix shape %lld x %lld (x %lld tokens)",
                          tr->name, (long long)n_in, (long long)n_out, (long long)n_tok);
    return 0;
}

int fl_cuda_matvec(struct fl_cuda *cu, const void *d_w, uint32_t w_type, int64_t n_in,
                   int64_t n_out, const float *d_x, int64_t n_tok, float *d_y,
                   struct fl_err *err)
{
    int rc = check_matrix(w_type, n_in, n_out, n_tok, err);
    if (rc)
        return rc;
    if (n_tok > 65535)
        return fl_err_set(err, -EINVAL, "cuda: matvec of %lld tokens (use the GEMM path)",
                          (long long)n_tok);
    return launched(err, flc_launch_matvec(cu->stream, d_w, w_type, n_in, n_out, d_x, n_tok, d_y),
                    "matvec");
}

int fl_cuda_dequant_f16(struct fl_cuda *cu, const void *d_w, uint32_t w_type, int64_t n_in,
                        int64_t n_rows, uint16_t *d_dst, struct fl_err *err)
{
    int rc = check_matrix(w_type, n_in, n_rows, 1, err);
    if (rc)
        return rc;
    return launched(err, flc_launch_dequant_f16(cu->stream, d_w, w_type, n_in, n_rows, d_dst),
                    "dequantize");
}

/* Y^T (n_rows x n_tok, column-major, ld n_out) = W_tile (stored as n_in x
 * n_rows column-major, hence op T) . X^T (n_in x n_tok). */
static int gemm_tile(struct fl_cuda *cu, const uint16_t *w16, const uint16_t *x16, int64_t n_in,
                     int64_t n_rows, int64_t n_tok, float *y, int64_t ldy, struct fl_err *err)
{
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = flc_blas.gemm_ex(cu->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n_rows, (int)n_tok,
                                    (int)n_in, &one, w16, CUDA_R_16F, (int)n_in, x16, CUDA_R_16F,
                                    (int)n_in, &zero, y, CUDA_R_32F, (int)ldy,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS ? 0 : flc_blas_err(err, s, "cublasGemmEx");
}

int fl_cuda_matmul_gemm(struct fl_cuda *cu, const void *d_w, uint32_t w_type, int64_t n_in,
                        int64_t n_out, const float *d_x, int64_t n_tok, float *d_y,
                        struct fl_err *err)
{
    int rc = check_matrix(w_type, n_in, n_out, n_tok, err);
    if (rc)
        return rc;
    if (n_in > INT32_MAX / 2 || n_out > INT32_MAX / 2 || n_tok > INT32_MAX / 2)
        return fl_err_set(err, -EINVAL, "cuda: matrix too large for cuBLAS's int sizes");
    int64_t rows = (int64_t)(GEMM_TILE_BYTES / ((size_t)n_in * 2));
    if (rows < 1)
        rows = 1;
    if (rows > n_out)
        rows = n_out;
    const size_t x_bytes = ((size_t)(n_in * n_tok) * 2 + 255) & ~(size_t)255;
    void *scratch;
    if ((rc = flc_scratch(cu, x_bytes + (size_t)(rows * n_in) * 2, &scratch, err)))
        return rc;
    uint16_t *x16 = scratch, *w16 = (uint16_t *)((char *)scratch + x_bytes);
    if ((rc = launched(err, flc_launch_f32_to_f16(cu->stream, d_x, x16, n_in * n_tok), "f16 x")))
        return rc;
    const size_t row_bytes = fl_row_size(w_type, n_in);
    for (int64_t r0 = 0; r0 < n_out && !rc; r0 += rows) {
        const int64_t n = n_out - r0 < rows ? n_out - r0 : rows;
        rc = launched(err, flc_launch_dequant_f16(cu->stream, (const char *)d_w + r0 * row_bytes,
                                                  w_type, n_in, n, w16), "dequantize");
        if (!rc) /* the next tile's dequantize queues after this GEMM: stream order */
            rc = gemm_tile(cu, w16, x16, n_in, n, n_tok, d_y + r0, n_out, err);
    }
    return rc;
}

int fl_cuda_matmul(struct fl_cuda *cu, const void *d_w, uint32_t w_type, int64_t n_in,
                   int64_t n_out, const float *d_x, int64_t n_tok, float *d_y, int min_batch,
                   struct fl_err *err)
{
    if (n_tok >= min_batch)
        return fl_cuda_matmul_gemm(cu, d_w, w_type, n_in, n_out, d_x, n_tok, d_y, err);
    return fl_cuda_matvec(cu, d_w, w_type, n_in, n_out, d_x, n_tok, d_y, err);
}

int fl_cuda_f32_to_f16(struct fl_cuda *cu, const float *d_x, uint16_t *d_y, int64_t n,
                       struct fl_err *err)
{
    if (n <= 0)
        return n == 0 ? 0 : fl_err_set(err, -EINVAL, "cuda: f32_to_f16 of %lld values", (long long)n);
    return launched(err, flc_launch_f32_to_f16(cu->stream, d_x, d_y, n), "f32_to_f16");
}

int fl_cuda_rmsnorm(struct fl_cuda *cu, float *d_y, const float *d_x, const float *d_w,
                    int64_t n, int64_t n_rows, int64_t stride, float eps, struct fl_err *err)
{
    if (n <= 0 || n_rows <= 0 || n_rows > INT32_MAX || stride < n)
        return fl_err_set(err, -EINVAL, "cuda: bad rmsnorm shape");
    return launched(err, flc_launch_rmsnorm(cu->stream, d_y, d_x, d_w, n, n_rows, stride, eps),
                    "rmsnorm");
}

int fl_cuda_matvec_group(struct fl_cuda *cu, const void *const *d_w, uint32_t w_type,
                         int64_t n_in, int64_t n_out, const float *const *d_x,
                         float *const *d_y, int n, struct fl_err *err)
{
    if (n < 1 || n > FL_CUDA_GROUP_MAX)
        return fl_err_set(err, -EINVAL, "cuda: a group of %d products", n);
    int rc = check_matrix(w_type, n_in, n_out, 1, err);
    if (rc)
        return rc;
    flc_mv_group g = { .n = n };
    for (int j = 0; j < n; j++) {
        g.w[j] = d_w[j];
        g.x[j] = d_x[j];
        g.y[j] = d_y[j];
    }
    return launched(err, flc_launch_matvec_group(cu->stream, &g, w_type, n_in, n_out),
                    "matvec group");
}

int fl_cuda_add(struct fl_cuda *cu, float *d_y, const float *d_x, int64_t n, struct fl_err *err)
{
    if (n <= 0)
        return n == 0 ? 0 : fl_err_set(err, -EINVAL, "cuda: add of %lld values", (long long)n);
    return launched(err, flc_launch_add(cu->stream, d_y, d_x, n), "add");
}

int fl_cuda_swiglu(struct fl_cuda *cu, float *d_g, const float *d_u, int64_t n,
                   struct fl_err *err)
{
    if (n <= 0)
        return n == 0 ? 0 : fl_err_set(err, -EINVAL, "cuda: swiglu of %lld values", (long long)n);
    return launched(err, flc_launch_swiglu(cu->stream, d_g, d_u, n), "swiglu");
}

int fl_cuda_swiglu_oai(struct fl_cuda *cu, float *d_g, const float *d_u, int64_t n, float alpha,
                       float limit, struct fl_err *err)
{
    if (n <= 0)
        return n == 0 ? 0 : fl_err_set(err, -EINVAL, "cuda: swiglu_oai of %lld values", (long long)n);
    return launched(err, flc_launch_swiglu_oai(cu->stream, d_g, d_u, n, alpha, limit),
                    "swiglu_oai");
}

int fl_cuda_add_rows(struct fl_cuda *cu, float *d_y, const float *d_b, int64_t n, int64_t n_rows,
                     int64_t stride, struct fl_err *err)
{
    if (n < 0 || n_rows < 0 || stride < n)
        return fl_err_set(err, -EINVAL, "cuda: bad add_rows shape");
    if (n == 0 || n_rows == 0)
        return 0;
    return launched(err, flc_launch_add_rows(cu->stream, d_y, d_b, n, n_rows, stride), "add_rows");
}

int fl_cuda_copy_2d(struct fl_cuda *cu, float *d_dst, int64_t dst_stride, const float *d_src,
                    int64_t src_stride, int64_t width, int64_t n_rows, struct fl_err *err)
{
    if (width < 0 || n_rows < 0 || dst_stride < width || src_stride < width)
        return fl_err_set(err, -EINVAL, "cuda: bad copy_2d shape");
    if (width == 0 || n_rows == 0)
        return 0;
    const size_t f = sizeof(float);
    return launched(err, cudaMemcpy2DAsync(d_dst, (size_t)dst_stride * f, d_src,
                                           (size_t)src_stride * f, (size_t)width * f,
                                           (size_t)n_rows, cudaMemcpyDeviceToDevice, cu->stream),
                    "copy_2d");
}

int fl_cuda_rope(struct fl_cuda *cu, float *d_x, int64_t n_tok, int64_t stride, int n_head,
                 int64_t head_dim, int n_rot, enum fl_cuda_rope_mode mode, const float *d_cs,
                 struct fl_err *err)
{
    if (n_tok <= 0 || n_head <= 0 || n_rot <= 0 || n_rot % 2 || n_rot > head_dim ||
        stride < n_head * head_dim || (mode != FL_CUDA_ROPE_NORM && mode != FL_CUDA_ROPE_NEOX))
        return fl_err_set(err, -EINVAL, "cuda: bad rope arguments");
    return launched(err, flc_launch_rope(cu->stream, d_x, n_tok, stride, n_head, head_dim, n_rot,
                                         mode == FL_CUDA_ROPE_NEOX, d_cs), "rope");
}

int fl_cuda_route(struct fl_cuda *cu, const float *d_logits, int64_t n_tok,
                  const struct fl_cuda_route *r, int32_t *d_ids, float *d_weights,
                  struct fl_err *err)
{
    if (n_tok <= 0 || n_tok > INT32_MAX || r->n_expert <= 0 || r->n_expert > 4096 || r->k <= 0 ||
        r->k > 64 || r->k > r->n_expert)
        return fl_err_set(err, -EINVAL, "cuda: bad routing shape (%d experts, k %d)",
                          r->n_expert, r->k);
    if (r->gating < FL_CUDA_GATING_SOFTMAX || r->gating > FL_CUDA_GATING_SOFTMAX_WEIGHT)
        return fl_err_set(err, -EINVAL, "cuda: unknown gating function %d", (int)r->gating);
    return launched(err, flc_launch_route(cu->stream, d_logits, n_tok, r, d_ids, d_weights),
                    "route");
}

int fl_cuda_attention(struct fl_cuda *cu, const float *d_q, int64_t q_stride, int n_tok,
                      int pos0, const uint16_t *d_k, const uint16_t *d_v,
                      const struct fl_cuda_attn *p, float *d_out, int64_t out_stride,
                      struct fl_err *err)
{
    if (n_tok <= 0 || pos0 < 0 || p->n_head <= 0 || p->n_head_kv <= 0 ||
        p->n_head % p->n_head_kv || p->dk <= 0 || p->dv <= 0 || p->dv > 1024 || p->dk > 2048 ||
        q_stride < p->n_head * p->dk || out_stride < p->n_head * p->dv ||
        p->k_off + (p->n_head_kv - 1) * p->k_stride + p->dk > p->k_row ||
        p->v_off + (p->n_head_kv - 1) * p->v_stride + p->dv > p->v_row)
        return fl_err_set(err, -EINVAL, "cuda: bad attention shape");
    return launched(err, flc_launch_attention(cu->stream, d_q, q_stride, n_tok, pos0, d_k, d_v, p,
                                              d_out, out_stride), "attention");
}

int fl_cuda_copy_rows(struct fl_cuda *cu, float *d_dst, const float *d_src, int64_t width,
                      const int32_t *d_src_rows, const int32_t *d_dst_rows, int64_t n,
                      struct fl_err *err)
{
    if (width <= 0 || n < 0)
        return fl_err_set(err, -EINVAL, "cuda: bad copy_rows shape");
    if (n == 0)
        return 0;
    return launched(err, flc_launch_copy_rows(cu->stream, d_dst, d_src, width, d_src_rows,
                                              d_dst_rows, n), "copy_rows");
}

int fl_cuda_moe_combine(struct fl_cuda *cu, float *d_out, const float *d_y, const float *d_w,
                        int64_t n_tok, int k, int64_t width, struct fl_err *err)
{
    if (n_tok <= 0 || k <= 0 || width <= 0)
        return fl_err_set(err, -EINVAL, "cuda: bad moe_combine shape");
    return launched(err, flc_launch_combine(cu->stream, d_out, d_y, d_w, n_tok, k, width),
                    "moe_combine");
}

int fl_cuda_sigmoid_gate(struct fl_cuda *cu, float *d_y, const float *d_g, int64_t width,
                         int64_t n_rows, bool per_row, struct fl_err *err)
{
    if (width < 0 || n_rows < 0)
        return fl_err_set(err, -EINVAL, "cuda: bad sigmoid_gate shape");
    if (width == 0 || n_rows == 0)
        return 0;
    return launched(err, flc_launch_sigmoid_gate(cu->stream, d_y, d_g, width, n_rows, per_row),
                    "sigmoid_gate");
}

int fl_cuda_ssm_conv(struct fl_cuda *cu, const float *d_x, const float *d_w, float *d_state,
                     float *d_out, int64_t n_tok, int64_t width, int k, bool reset,
                     struct fl_err *err)
{
    if (n_tok < 1 || width < 1 || k < 2 || k > 16)
        return fl_err_set(err, -EINVAL, "cuda: ssm_conv of %lld x %lld, kernel %d",
                          (long long)n_tok, (long long)width, k);
    return launched(err, flc_launch_ssm_conv(cu->stream, d_x, d_w, d_state, d_out, n_tok, width,
                                             k, reset), "ssm_conv");
}

int fl_cuda_delta_net(struct fl_cuda *cu, const struct fl_cuda_delta_net *p, const float *d_qkv,
                      const float *d_alpha, const float *d_beta, float *d_state, float *d_out,
                      int64_t n_tok, bool reset, struct fl_err *err)
{
    if (n_tok < 1 || p->d < 1 || p->d > 1024 || p->n_k_head < 1 || p->n_v_head < 1)
        return fl_err_set(err, -EINVAL, "cuda: delta_net of %d x %d heads of %d",
                          p->n_v_head, p->n_k_head, p->d);
    const struct flc_delta_net k = { .n_k_head = p->n_k_head, .n_v_head = p->n_v_head, .d = p->d,
                                     .k_grouped = p->k_grouped,
                                     .dt_bias = p->d_dt_bias, .a = p->d_a, .eps = p->eps };
    return launched(err, flc_launch_delta_net(cu->stream, &k, d_qkv, d_alpha, d_beta, d_state,
                                              d_out, n_tok, reset), "delta_net");
}
