/* cuda-blas.c: cuBLAS, loaded on first use.
 *
 * Linking libcublas directly makes every faultline process (and every
 * test) map and relocate ~700 MB of cuBLAS/cuBLASLt at start-up, about half
 * a second each time, GPU or not. Only the prefill GEMM needs it, so it is
 * dlopen'ed when a context is opened and its five entry points are called
 * through this table. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "backend/cuda/cuda-impl.h"

struct flc_blas_api flc_blas;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[256];

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p && !load_error[0])
        snprintf(load_error, sizeof(load_error), "%s has no %s", FLC_CUBLAS_SONAME, name);
    return p;
}

static void load(void)
{
    /* the soname first (ld.so.cache, LD_LIBRARY_PATH), then the toolkit's
     * directory as found at build time */
    void *lib = dlopen(FLC_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        lib = dlopen(FLC_CUBLAS_DIR "/" FLC_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(load_error, sizeof(load_error), "%s", dlerror());
        return;
    }
    flc_blas.create = (cublasStatus_t (*)(cublasHandle_t *))sym(lib, "cublasCreate_v2");
    flc_blas.destroy = (cublasStatus_t (*)(cublasHandle_t))sym(lib, "cublasDestroy_v2");
    flc_blas.set_stream = (cublasStatus_t (*)(cublasHandle_t, cudaStream_t))sym(lib, "cublasSetStream_v2");
    flc_blas.gemm_ex = (flc_gemm_ex_fn)sym(lib, "cublasGemmEx");
    flc_blas.status_string = (const char *(*)(cublasStatus_t))sym(lib, "cublasGetStatusString");
    if (load_error[0])
        return; /* keeps lib loaded: harmless, and dlclose races nothing here */
    flc_blas.loaded = true;
}

int flc_blas_load(struct fl_err *err)
{
    pthread_once(&once, load);
    if (!flc_blas.loaded)
        return fl_err_set(err, -ENOENT, "cuda: cannot load cuBLAS: %s", load_error);
    return 0;
}
