/* cuda-impl.h: what the backend's C and CUDA files share (not an interface
 * for the rest of faultline). The .cu files hold kernels and their launch
 * wrappers only; the context, memory and error handling are plain C. */
#ifndef FL_CUDA_IMPL_H
#define FL_CUDA_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cuBLAS entry points, dlopen'ed by flc_blas_load (cuda-blas.c). */
typedef cublasStatus_t (*flc_gemm_ex_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                         int, int, int, const void *, const void *, cudaDataType,
                                         int, const void *, cudaDataType, int, const void *,
                                         void *, cudaDataType, int, cublasComputeType_t,
                                         cublasGemmAlgo_t);
struct flc_blas_api {
    bool loaded;
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    flc_gemm_ex_fn gemm_ex;
    const char *(*status_string)(cublasStatus_t);
};
extern struct flc_blas_api flc_blas;
/* Loads cuBLAS once; -ENOENT with the reason when it cannot. */
int flc_blas_load(struct fl_err *err);

struct fl_cuda {
    int dev;
    cudaStream_t stream;
    cublasHandle_t blas;
    void *scratch;          /* grows on demand (only after a stream sync) */
    size_t scratch_size;
};

/* One line naming the CUDA error and what was being done; returns the
 * negative errno it maps to (-ENOMEM for allocation failures, -ENODEV for a
 * missing device or driver, -EINVAL for bad arguments, -EIO otherwise). */
int flc_err(struct fl_err *err, cudaError_t e, const char *what);
int flc_blas_err(struct fl_err *err, cublasStatus_t s, const char *what);
/* Device scratch of at least `bytes`, valid until the next call. */
int flc_scratch(struct fl_cuda *cu, size_t bytes, void **out, struct fl_err *err);

/* Kernel launchers (in the .cu files). Arguments are checked by the C
 * callers; these return the launch's cudaError_t. */
cudaError_t flc_launch_matvec(cudaStream_t s, const void *w, uint32_t type, int64_t n_in,
                              int64_t n_out, const float *x, int64_t n_tok, float *y);
cudaError_t flc_launch_dequant_f16(cudaStream_t s, const void *w, uint32_t type, int64_t n_in,
                                   int64_t n_rows, uint16_t *dst);
/* A group of one-token products, passed to the kernel by value. */
typedef struct {
    const void *w[FL_CUDA_GROUP_MAX];
    const float *x[FL_CUDA_GROUP_MAX];
    float *y[FL_CUDA_GROUP_MAX];
    int n;
} flc_mv_group;
cudaError_t flc_launch_matvec_group(cudaStream_t s, const flc_mv_group *g, uint32_t type,
                                    int64_t n_in, int64_t n_out);
cudaError_t flc_launch_f32_to_f16(cudaStream_t s, const float *x, uint16_t *y, int64_t n);
cudaError_t flc_launch_rmsnorm(cudaStream_t s, float *y, const float *x, const float *w,
                               int64_t n, int64_t n_rows, int64_t stride, float eps);
cudaError_t flc_launch_swiglu(cudaStream_t s, float *g, const float *u, int64_t n);
cudaError_t flc_launch_add(cudaStream_t s, float *y, const float *x, int64_t n);
cudaError_t flc_launch_swiglu_oai(cudaStream_t s, float *g, const float *u, int64_t n,
                                  float alpha, float limit);
cudaError_t flc_launch_add_rows(cudaStream_t s, float *y, const float *b, int64_t n,
                                int64_t n_rows, int64_t stride);
cudaError_t flc_launch_rope(cudaStream_t s, float *x, int64_t n_tok, int64_t stride, int n_head,
                            int64_t head_dim, int n_rot, int neox, const float *cs);
cudaError_t flc_launch_route(cudaStream_t s, const float *logits, int64_t n_tok,
                             const struct fl_cuda_route *r, int32_t *ids, float *weights);
cudaError_t flc_launch_attention(cudaStream_t s, const float *q, int64_t q_stride, int n_tok,
                                 int pos0, const uint16_t *k, const uint16_t *v,
                                 const struct fl_cuda_attn *p, float *out, int64_t out_stride);

cudaError_t flc_launch_copy_rows(cudaStream_t s, float *dst, const float *src, int64_t width,
                                 const int32_t *src_rows, const int32_t *dst_rows, int64_t n);
cudaError_t flc_launch_combine(cudaStream_t s, float *out, const float *y, const float *w,
                               int64_t n_tok, int k, int64_t width);

/* Gated DeltaNet over one sequence's span (fl_cuda_delta_net). */
struct flc_delta_net {
    int n_k_head, n_v_head, d, k_grouped;
    const float *dt_bias, *a; /* device, [n_v_head] */
    float eps;
};
cudaError_t flc_launch_sigmoid_gate(cudaStream_t s, float *y, const float *g, int64_t width,
                                    int64_t n_rows, int per_row);
cudaError_t flc_launch_ssm_conv(cudaStream_t s, const float *x, const float *w, float *state,
                                float *out, int64_t n_tok, int64_t width, int k, int reset);
cudaError_t flc_launch_delta_net(cudaStream_t s, const struct flc_delta_net *p, const float *qkv,
                                 const float *alpha, const float *beta, float *state, float *out,
                                 int64_t n_tok, int reset);

/* The GPU's block decoders run on the host over one row of n_in values
 * (for tests without a device). 0, or -1 for an unsupported type. */
int flc_host_decode_row(const void *w, uint32_t type, int64_t n_in, float *out);

#ifdef __cplusplus
}
#endif
#endif
