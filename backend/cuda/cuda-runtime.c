/* cuda-runtime.c: device discovery, the context, memory and error mapping.
 * Plain C over the CUDA runtime API: only kernels need nvcc. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda-impl.h"

int flc_err(struct fl_err *err, cudaError_t e, const char *what)
{
    int code;
    switch (e) {
    case cudaErrorMemoryAllocation: code = -ENOMEM; break;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice: code = -ENODEV; break;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidConfiguration: code = -EINVAL; break;
    default: code = -EIO; break;
    }
    /* The runtime also keeps e as the thread's last error, and the kernel
     * launchers return cudaGetLastError(): left there, a refused cudaMalloc
     * (which callers may survive) would fail the next, unrelated launch.
     * Reported here, so cleared (a sticky error stays: the runtime repeats it). */
    cudaGetLastError();
    return fl_err_set(err, code, "cuda: %s: %s (%s)", what, cudaGetErrorString(e),
                      cudaGetErrorName(e));
}

int flc_blas_err(struct fl_err *err, cublasStatus_t s, const char *what)
{
    const int code = s == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM
                   : s == CUBLAS_STATUS_INVALID_VALUE ? -EINVAL : -EIO;
    return fl_err_set(err, code, "cublas: %s: %s", what,
                      flc_blas.status_string ? flc_blas.status_string(s) : "?");
}

int fl_cuda_available(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* the failure is the answer; do not leave it sticky */
        return 0;
    }
    return n;
}

static int check_dev(int dev, struct fl_err *err)
{
    const int n = fl_cuda_available();
    if (dev < 0 || dev >= n)
        return fl_err_set(err, -ENODEV, "cuda: no device %d (%d found)", dev, n);
    return 0;
}

int fl_cuda_device_info(int dev, struct fl_cuda_info *out, struct fl_err *err)
{
    int rc = check_dev(dev, err);
    if (rc)
        return rc;
    struct cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, dev);
    if (e != cudaSuccess)
        return flc_err(err, e, "cudaGetDeviceProperties");
    memset(out, 0, sizeof(*out));
    snprintf(out->name, sizeof(out->name), "%.*s", (int)sizeof(out->name) - 1, prop.name);
    out->cc_major = prop.major;
    out->cc_minor = prop.minor;
    out->n_sm = prop.multiProcessorCount;
    out->managed = prop.concurrentManagedAccess != 0;
    int cur = 0;
    if ((e = cudaGetDevice(&cur)) != cudaSuccess || (e = cudaSetDevice(dev)) != cudaSuccess)
        return flc_err(err, e, "cudaSetDevice");
    e = cudaMemGetInfo(&out->free_bytes, &out->total_bytes);
    cudaSetDevice(cur);
    return e == cudaSuccess ? 0 : flc_err(err, e, "cudaMemGetInfo");
}

int fl_cuda_open(int dev, struct fl_cuda **out, struct fl_err *err)
{
    int rc = check_dev(dev, err);
    if (rc)
        return rc;
    struct fl_cuda *cu = calloc(1, sizeof(*cu));
    if (!cu)
        return fl_err_set(err, -ENOMEM, "cuda: out of memory");
    cu->dev = dev;
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&cu->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        free(cu);
        return flc_err(err, e, "opening the device");
    }
    if ((rc = flc_blas_load(err))) {
        fl_cuda_close(cu);
        return rc;
    }
    cublasStatus_t s = flc_blas.create(&cu->blas);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = flc_blas.set_stream(cu->blas, cu->stream);
    if (s != CUBLAS_STATUS_SUCCESS) {
        rc = flc_blas_err(err, s, "cublasCreate");
        fl_cuda_close(cu);
        return rc;
    }
    *out = cu;
    return 0;
}

void fl_cuda_close(struct fl_cuda *cu)
{
    if (!cu)
        return;
    cudaSetDevice(cu->dev);
    if (cu->stream)
        cudaStreamSynchronize(cu->stream);
    if (cu->blas)
        flc_blas.destroy(cu->blas);
    cudaFree(cu->scratch);
    if (cu->stream)
        cudaStreamDestroy(cu->stream);
    free(cu);
}

int fl_cuda_sync(struct fl_cuda *cu, struct fl_err *err)
{
    cudaError_t e = cudaStreamSynchronize(cu->stream);
    return e == cudaSuccess ? 0 : flc_err(err, e, "running kernels");
}

int fl_cuda_device(const struct fl_cuda *cu) { return cu->dev; }
void *fl_cuda_stream(struct fl_cuda *cu) { return cu->stream; }

int flc_scratch(struct fl_cuda *cu, size_t bytes, void **out, struct fl_err *err)
{
    if (bytes > cu->scratch_size) {
        /* queued kernels may still read the old area */
        int rc = fl_cuda_sync(cu, err);
        if (rc)
            return rc;
        cudaFree(cu->scratch);
        cu->scratch = NULL;
        cu->scratch_size = 0;
        cudaError_t e = cudaMalloc(&cu->scratch, bytes);
        if (e != cudaSuccess)
            return flc_err(err, e, "allocating scratch");
        cu->scratch_size = bytes;
    }
    *out = cu->scratch;
    return 0;
}

int fl_cuda_malloc(struct fl_cuda *cu, void **d_out, size_t bytes, struct fl_err *err)
{
    (void)cu;
    cudaError_t e = cudaMalloc(d_out, bytes ? bytes : 1);
    return e == cudaSuccess ? 0 : flc_err(err, e, "cudaMalloc");
}

void fl_cuda_free(struct fl_cuda *cu, void *d)
{
    (void)cu;
    cudaFree(d);
}

int fl_cuda_upload(struct fl_cuda *cu, void *d_dst, const void *src, size_t bytes,
                   struct fl_err *err)
{
    cudaError_t e = cudaMemcpyAsync(d_dst, src, bytes, cudaMemcpyHostToDevice, cu->stream);
    /* src may be pageable and reused as soon as we return */
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cu->stream);
    return e == cudaSuccess ? 0 : flc_err(err, e, "upload");
}

int fl_cuda_download(struct fl_cuda *cu, void *dst, const void *d_src, size_t bytes,
                     struct fl_err *err)
{
    cudaError_t e = cudaMemcpyAsync(dst, d_src, bytes, cudaMemcpyDeviceToHost, cu->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cu->stream);
    return e == cudaSuccess ? 0 : flc_err(err, e, "download");
}

int fl_cuda_host_alloc(void **out, size_t bytes, struct fl_err *err)
{
    cudaError_t e = cudaMallocHost(out, bytes ? bytes : 1);
    return e == cudaSuccess ? 0 : flc_err(err, e, "cudaMallocHost");
}

void fl_cuda_host_free(void *p) { cudaFreeHost(p); }

int fl_cuda_host_register(void *p, size_t bytes, struct fl_err *err)
{
    cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
    if (e == cudaSuccess)
        return 0;
    cudaGetLastError(); /* a refusal is an answer, not a sticky error */
    return flc_err(err, e, "cudaHostRegister");
}

void fl_cuda_host_unregister(void *p) { cudaHostUnregister(p); }
