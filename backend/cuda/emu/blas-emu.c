/* blas-emu.c: cuBLAS for the emulated device (emu.h), in place of
 * cuda-blas.c: the table flc_blas holds host functions, and GemmEx does the
 * one product cuda-ops.c asks for (the prefill GEMM: C = A^T B with F16 A
 * and B, F32 C, F32 compute, alpha 1, beta 0, column-major), summing in
 * float. Anything else is CUBLAS_STATUS_NOT_SUPPORTED, so a new use shows
 * up as a failing test rather than a wrong number. */
#include <stdlib.h>

#include "backend/cuda/cuda-impl.h"
#include "backend/cuda/emu/emu.h"
#include "gguf/tensor-types.h"

#define HANDLE_TAG 0x424c4153u
struct cublasContext {
    uint32_t tag;
    cudaStream_t stream;
};

struct flc_blas_api flc_blas;

static bool handle_ok(cublasHandle_t h) { return h && h->tag == HANDLE_TAG; }

static cublasStatus_t flemu_blas_create(cublasHandle_t *h)
{
    if (flemu_enter() != cudaSuccess)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!(*h = calloc(1, sizeof(**h))))
        return CUBLAS_STATUS_ALLOC_FAILED;
    (*h)->tag = HANDLE_TAG;
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t flemu_blas_destroy(cublasHandle_t h)
{
    if (!handle_ok(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->tag = 0;
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t flemu_blas_set_stream(cublasHandle_t h, cudaStream_t s)
{
    if (!handle_ok(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

static const char *flemu_blas_status_string(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

/* The one configuration cuda-ops.c's gemm_tile uses. */
static bool supported(cublasOperation_t ta, cublasOperation_t tb, const void *alpha,
                      cudaDataType at, cudaDataType bt, const void *beta, cudaDataType ct,
                      cublasComputeType_t compute)
{
    return ta == CUBLAS_OP_T && tb == CUBLAS_OP_N && at == CUDA_R_16F && bt == CUDA_R_16F &&
           ct == CUDA_R_32F && compute == CUBLAS_COMPUTE_32F && *(const float *)alpha == 1.0f &&
           *(const float *)beta == 0.0f;
}

/* C[i + j*ldc] = sum_l A[l + i*lda] * B[l + j*ldb], i < m, j < n, l < k. */
static cublasStatus_t flemu_gemm_ex(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                    int m, int n, int k, const void *alpha, const void *a,
                                    cudaDataType at, int lda, const void *b, cudaDataType bt,
                                    int ldb, const void *beta, void *c, cudaDataType ct, int ldc,
                                    cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    (void)algo;
    if (!handle_ok(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m <= 0 || n <= 0 || k <= 0 || lda < k || ldb < k || ldc < m)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!supported(ta, tb, alpha, at, bt, beta, ct, compute))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const uint16_t *A = a, *B = b;
    const float *f16 = flemu_f16_table();
    /* B's columns and one row of A converted once, not once per product:
     * each sum still runs over l in order */
    float *C = c, *cols = malloc(sizeof(float) * (size_t)k * (size_t)n),
          *row = malloc(sizeof(float) * (size_t)k);
    if (!cols || !row) {
        free(cols);
        free(row);
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    struct flemu_op op;
    flemu_begin(&op, "cublasGemmEx", h->stream);
    flemu_dev(&op, A, sizeof(uint16_t) * ((size_t)(m - 1) * (size_t)lda + (size_t)k), "A");
    flemu_dev(&op, B, sizeof(uint16_t) * ((size_t)(n - 1) * (size_t)ldb + (size_t)k), "B");
    flemu_dev(&op, C, sizeof(float) * ((size_t)(n - 1) * (size_t)ldc + (size_t)m), "C");
    for (int j = 0; op.err == cudaSuccess && j < n; j++)
        for (int l = 0; l < k; l++)
            cols[(size_t)j * (size_t)k + l] = f16[B[l + (size_t)j * (size_t)ldb]];
    for (int i = 0; op.err == cudaSuccess && i < m; i++) {
        for (int l = 0; l < k; l++)
            row[l] = f16[A[l + (size_t)i * (size_t)lda]];
        for (int j = 0; j < n; j++) {
            const float *col = cols + (size_t)j * (size_t)k;
            float acc = 0.0f;
            for (int l = 0; l < k; l++)
                acc += row[l] * col[l];
            C[i + (size_t)j * (size_t)ldc] = acc;
        }
    }
    free(cols);
    free(row);
    const cudaError_t e = flemu_end(&op);
    return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

int flc_blas_load(struct fl_err *err)
{
    (void)err;
    flc_blas = (struct flc_blas_api){
        .loaded = true,
        .create = flemu_blas_create,
        .destroy = flemu_blas_destroy,
        .set_stream = flemu_blas_set_stream,
        .gemm_ex = flemu_gemm_ex,
        .status_string = flemu_blas_status_string,
    };
    return 0;
}
