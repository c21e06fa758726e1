/* devmem-emu.c: the emulated device's memory (emu.h): the table of
 * allocations, device memory that the host cannot touch, and the windows
 * an emulated operation opens on it.
 *
 * Why: code written without a GPU most often breaks by reading a device
 * pointer on the host, or by a kernel running a row past its buffer. A
 * real GPU reports the first as a crash somewhere later and often misses
 * the second; here the host read faults where it happens (device pages are
 * PROT_NONE outside ops), and every op checks the exact byte range it
 * touches against the allocation that holds its pointer. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/cuda/emu/emu.h"

struct flemu_alloc {
    uintptr_t lo, hi;            /* the bytes handed out */
    void *map;                   /* device: the mapping, guard pages included */
    size_t map_len;
    size_t counted;              /* bytes of device memory it uses */
    enum flemu_kind kind;
};

static struct {
    pthread_mutex_t lock;        /* the table, the accounting and every op */
    pthread_once_t once;
    struct flemu_alloc *a;       /* sorted by lo, never overlapping */
    size_t n, cap;
    size_t used, total, page;
} T = { .lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT };

/* FL_CUDA_EMU_MEM: bytes, with an optional K, M or G suffix. */
static size_t parse_size(const char *s, size_t dflt)
{
    if (!s || !*s)
        return dflt;
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 10);
    const char *u = "KMGkmg", *k = *end ? strchr(u, *end) : NULL;
    const int shift = k ? 10 * (int)(1 + (k - u) % 3) : 0;
    if (k)
        end++;
    if (end == s || *end || errno || (shift && v >> (64 - shift))) {
        fprintf(stderr, "faultline CUDA emulator: FL_CUDA_EMU_MEM=%s is not a size; using %zu\n",
                s, dflt);
        return dflt;
    }
    return (size_t)v << shift;
}

/* FL_CUDA_EMU_FAIL_OP=N: the Nth kernel or copy fails as a faulting kernel
 * does (cudaErrorLaunchFailure) and the context stays failed, every later
 * call returning that error, as a real device's sticky error: the tests of
 * an error in the middle of a run. 0: never. */
static long fail_at, n_ops;
static _Atomic int sticky;

static void init(void)
{
    T.page = (size_t)sysconf(_SC_PAGESIZE);
    T.total = parse_size(getenv("FL_CUDA_EMU_MEM"), (size_t)4 << 30);
    const char *f = getenv("FL_CUDA_EMU_FAIL_OP");
    fail_at = f ? strtol(f, NULL, 10) : 0;
}

cudaError_t flemu_sticky(void)
{
    return (cudaError_t)atomic_load(&sticky);
}

/* The entry with the greatest lo below `below` (NULL if none). */
static struct flemu_alloc *last_before(uintptr_t below)
{
    size_t lo = 0, hi = T.n;
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (T.a[mid].lo < below)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? &T.a[lo - 1] : NULL;
}

/* The entry holding address p. */
static struct flemu_alloc *find(uintptr_t p)
{
    struct flemu_alloc *a = last_before(p + 1);
    return a && p < a->hi ? a : NULL;
}

/* The entry overlapping [lo, hi): entries never overlap, so only the last
 * one starting below hi can. */
static struct flemu_alloc *overlap(uintptr_t lo, uintptr_t hi)
{
    struct flemu_alloc *a = last_before(hi);
    return a && a->hi > lo ? a : NULL;
}

static cudaError_t insert(const struct flemu_alloc *e)
{
    if (overlap(e->lo, e->hi)) {
        /* heap memory handed out again while still registered: the caller
         * freed page-locked memory without cudaHostUnregister */
        fprintf(stderr, "faultline CUDA emulator: new memory %p (%zu bytes) overlaps a live "
                "entry (freed while registered?)\n", (void *)e->lo, (size_t)(e->hi - e->lo));
        return cudaErrorHostMemoryAlreadyRegistered;
    }
    if (T.n == T.cap) {
        const size_t cap = T.cap ? 2 * T.cap : 64;
        struct flemu_alloc *a = realloc(T.a, cap * sizeof(*a));
        if (!a)
            return cudaErrorMemoryAllocation;
        T.a = a;
        T.cap = cap;
    }
    struct flemu_alloc *at = last_before(e->lo);
    const size_t i = at ? (size_t)(at - T.a) + 1 : 0;
    memmove(&T.a[i + 1], &T.a[i], (T.n - i) * sizeof(*T.a));
    T.a[i] = *e;
    T.n++;
    return cudaSuccess;
}

/* Device memory: its own mapping with a PROT_NONE page on each side, the
 * start placed so that the end lies within 256 bytes of the trailing
 * guard (starts keep cudaMalloc's 256-byte alignment). Filled with 0xff
 * bytes (NaN as F32 and F16) so reads of never-written memory show. */
static cudaError_t map_device(size_t bytes, struct flemu_alloc *e)
{
    const size_t pg = T.page, data = (bytes + pg - 1) / pg * pg;
    char *m = mmap(NULL, data + 2 * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED)
        return cudaErrorMemoryAllocation;
    char *p = m + pg + ((data - bytes) & ~(size_t)255);
    if (mprotect(m + pg, data, PROT_READ | PROT_WRITE)) {
        munmap(m, data + 2 * pg);
        return cudaErrorMemoryAllocation;
    }
    memset(p, 0xff, bytes);
    mprotect(m + pg, data, PROT_NONE);
    *e = (struct flemu_alloc){ .lo = (uintptr_t)p, .hi = (uintptr_t)p + bytes, .map = m,
                               .map_len = data + 2 * pg, .counted = (bytes + 255) & ~(size_t)255,
                               .kind = FLEMU_DEVICE };
    return cudaSuccess;
}

static cudaError_t alloc_locked(enum flemu_kind kind, size_t bytes, void **out)
{
    struct flemu_alloc e;
    if (kind == FLEMU_DEVICE) {
        if (T.used >= T.total || bytes > T.total - T.used)
            return cudaErrorMemoryAllocation; /* what the device would say */
        cudaError_t r = map_device(bytes, &e);
        if (r != cudaSuccess)
            return r;
    } else {
        void *p = NULL;
        if (posix_memalign(&p, T.page, bytes))
            return cudaErrorMemoryAllocation;
        /* managed pages would live on the device: they count, never fail */
        e = (struct flemu_alloc){ .lo = (uintptr_t)p, .hi = (uintptr_t)p + bytes,
                                  .counted = kind == FLEMU_MANAGED ? bytes : 0, .kind = kind };
    }
    cudaError_t r = insert(&e);
    if (r != cudaSuccess) {
        if (kind == FLEMU_DEVICE)
            munmap(e.map, e.map_len);
        else
            free((void *)e.lo);
        return r;
    }
    T.used += e.counted;
    *out = (void *)e.lo;
    return cudaSuccess;
}

cudaError_t flemu_alloc(enum flemu_kind kind, size_t bytes, void **out)
{
    pthread_once(&T.once, init);
    if (!out || kind == FLEMU_REGISTERED)
        return cudaErrorInvalidValue;
    *out = NULL;
    if (bytes == 0)
        return cudaSuccess; /* as the runtime: a NULL pointer, nothing to free */
    pthread_mutex_lock(&T.lock);
    cudaError_t r = alloc_locked(kind, bytes, out);
    pthread_mutex_unlock(&T.lock);
    return r;
}

cudaError_t flemu_free(enum flemu_kind kind, void *p)
{
    pthread_once(&T.once, init);
    pthread_mutex_lock(&T.lock);
    struct flemu_alloc *a = find((uintptr_t)p);
    /* cudaFree frees managed memory too */
    const bool ok = a && a->lo == (uintptr_t)p &&
        (a->kind == kind || (kind == FLEMU_DEVICE && a->kind == FLEMU_MANAGED));
    if (ok) {
        const struct flemu_alloc e = *a;
        memmove(a, a + 1, (size_t)(&T.a[T.n] - (a + 1)) * sizeof(*a));
        T.n--;
        T.used -= e.counted;
        if (e.kind == FLEMU_DEVICE)
            munmap(e.map, e.map_len);
        else if (e.kind != FLEMU_REGISTERED)
            free(p);
    }
    pthread_mutex_unlock(&T.lock);
    if (!ok) /* callers rarely check a free: say it here */
        fprintf(stderr, "faultline CUDA emulator: %s of %p, which is no such allocation\n",
                kind == FLEMU_DEVICE ? "cudaFree" : kind == FLEMU_PINNED ? "cudaFreeHost"
                                                                         : "cudaHostUnregister", p);
    return ok ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t flemu_register(void *p, size_t bytes)
{
    pthread_once(&T.once, init);
    if (!p || !bytes)
        return cudaErrorInvalidValue;
    const uintptr_t pg = T.page, lo = (uintptr_t)p & ~(pg - 1);
    const uintptr_t hi = ((uintptr_t)p + bytes + pg - 1) & ~(pg - 1);
    pthread_mutex_lock(&T.lock);
    /* pages are what gets locked: sharing one with a registered range is a
     * second registration of it (backend/cuda/gpu-offload.c merges its spans) */
    const struct flemu_alloc *o = overlap(lo, hi);
    cudaError_t r = cudaErrorHostMemoryAlreadyRegistered;
    if (!o) {
        const struct flemu_alloc e = { .lo = (uintptr_t)p, .hi = (uintptr_t)p + bytes,
                                       .kind = FLEMU_REGISTERED };
        r = insert(&e);
    } else if (o->kind == FLEMU_DEVICE) {
        r = cudaErrorInvalidValue;
    }
    pthread_mutex_unlock(&T.lock);
    return r;
}

bool flemu_is_locked_host(const void *p, size_t bytes)
{
    pthread_mutex_lock(&T.lock);
    const struct flemu_alloc *a = find((uintptr_t)p);
    const bool ok = a && (a->kind == FLEMU_PINNED || a->kind == FLEMU_REGISTERED) &&
                    (uintptr_t)p + bytes <= a->hi;
    pthread_mutex_unlock(&T.lock);
    return ok;
}

bool flemu_is_managed(const void *p, size_t bytes)
{
    pthread_mutex_lock(&T.lock);
    const struct flemu_alloc *a = find((uintptr_t)p);
    const bool ok = a && a->kind == FLEMU_MANAGED && (uintptr_t)p + bytes <= a->hi;
    pthread_mutex_unlock(&T.lock);
    return ok;
}

void flemu_mem_info(size_t *free_bytes, size_t *total_bytes)
{
    pthread_once(&T.once, init);
    pthread_mutex_lock(&T.lock);
    *free_bytes = T.used < T.total ? T.total - T.used : 0;
    *total_bytes = T.total;
    pthread_mutex_unlock(&T.lock);
}

/* --- operations ---------------------------------------------------------------- */

static void op_error(struct flemu_op *op, cudaError_t e, const char *arg, const void *p,
                     size_t bytes, const char *why)
{
    fprintf(stderr, "faultline CUDA emulator: %s: %s = %p (%zu bytes) %s\n", op->what, arg, p,
            bytes, why);
    if (op->err == cudaSuccess)
        op->err = e;
}

void flemu_begin(struct flemu_op *op, const char *what, cudaStream_t s)
{
    pthread_once(&T.once, init);
    flemu_stream_flush(s); /* in order: what the stream deferred runs first */
    op->what = what;
    op->n = 0;
    op->err = flemu_enter();
    if (op->err == cudaSuccess && !flemu_stream_ok(s))
        op->err = cudaErrorInvalidResourceHandle;
    pthread_mutex_lock(&T.lock);
    if (op->err == cudaSuccess && fail_at > 0 && ++n_ops == fail_at) {
        atomic_store(&sticky, cudaErrorLaunchFailure);
        op->err = cudaErrorLaunchFailure;
    }
}

/* Makes the pages of [lo, hi) of a device allocation accessible until flemu_end. */
static void open_range(struct flemu_op *op, uintptr_t lo, uintptr_t hi)
{
    const uintptr_t pg = T.page, a = lo & ~(pg - 1), b = (hi + pg - 1) & ~(pg - 1);
    if (op->n == FLEMU_OP_RANGES) {
        op_error(op, cudaErrorLaunchOutOfResources, "(ranges)", (void *)lo, hi - lo,
                 "one range too many for the emulator (FLEMU_OP_RANGES)");
        return;
    }
    if (mprotect((void *)a, b - a, PROT_READ | PROT_WRITE)) {
        op_error(op, cudaErrorUnknown, "(mprotect)", (void *)lo, hi - lo, strerror(errno));
        return;
    }
    op->open[op->n].p = (void *)a;
    op->open[op->n++].len = b - a;
}

/* The allocation an op's device argument points into, or NULL (error set). */
static const struct flemu_alloc *dev_alloc(struct flemu_op *op, const void *p, size_t bytes,
                                           const char *arg)
{
    const struct flemu_alloc *a = find((uintptr_t)p);
    if (!a)
        op_error(op, cudaErrorInvalidValue, arg, p, bytes, "is not device memory");
    else if (a->kind != FLEMU_DEVICE && a->kind != FLEMU_MANAGED)
        op_error(op, cudaErrorInvalidValue, arg, p, bytes,
                 "is host memory (pinned or registered), not device memory");
    return a && (a->kind == FLEMU_DEVICE || a->kind == FLEMU_MANAGED) ? a : NULL;
}

void *flemu_dev(struct flemu_op *op, const void *p, size_t bytes, const char *arg)
{
    if (bytes == 0 || op->err != cudaSuccess)
        return (void *)p;
    const struct flemu_alloc *a = dev_alloc(op, p, bytes, arg);
    if (a && flemu_within(op, (struct flemu_span){ a->lo, a->hi }, p, bytes, arg) &&
        a->kind == FLEMU_DEVICE)
        open_range(op, (uintptr_t)p, (uintptr_t)p + bytes);
    return (void *)p;
}

struct flemu_span flemu_dev_span(struct flemu_op *op, const void *p, const char *arg)
{
    const struct flemu_alloc *a = op->err == cudaSuccess ? dev_alloc(op, p, 1, arg) : NULL;
    return a ? (struct flemu_span){ a->lo, a->hi } : (struct flemu_span){ 0, 0 };
}

bool flemu_within(struct flemu_op *op, struct flemu_span s, const void *p, size_t bytes,
                  const char *arg)
{
    const uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
    if (op->err != cudaSuccess)
        return false;
    if (lo >= s.lo && hi >= lo && hi <= s.hi)
        return true;
    char why[160];
    snprintf(why, sizeof(why), "leaves its allocation [%p, %p): %s by %zu bytes", (void *)s.lo,
             (void *)s.hi, lo < s.lo ? "starts before it" : "overruns it",
             lo < s.lo ? (size_t)(s.lo - lo) : (size_t)(hi - s.hi));
    op_error(op, cudaErrorIllegalAddress, arg, p, bytes, why);
    return false;
}

void *flemu_host(struct flemu_op *op, const void *p, size_t bytes, const char *arg)
{
    if (bytes == 0 || op->err != cudaSuccess)
        return (void *)p;
    const struct flemu_alloc *a = overlap((uintptr_t)p, (uintptr_t)p + bytes);
    if (!p || (a && a->kind == FLEMU_DEVICE))
        op_error(op, cudaErrorInvalidValue, arg, p, bytes,
                 p ? "is device memory where host memory belongs" : "is NULL");
    return (void *)p;
}

cudaError_t flemu_end(struct flemu_op *op)
{
    for (int i = 0; i < op->n; i++)
        if (mprotect(op->open[i].p, op->open[i].len, PROT_NONE)) {
            /* a device page left readable would hide host accesses: stop */
            fprintf(stderr, "faultline CUDA emulator: mprotect: %s\n", strerror(errno));
            abort();
        }
    op->n = 0;
    pthread_mutex_unlock(&T.lock);
    return flemu_fail(op->err);
}

cudaError_t flemu_launched(struct flemu_op *op)
{
    flemu_end(op);
    return cudaGetLastError();
}
