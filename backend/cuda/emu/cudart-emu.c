/* cudart-emu.c: the CUDA runtime calls faultline's C sources make, defined
 * on the host for the emulated device (emu.h; FAULTLINE_CUDA_EMU builds
 * only). One device, "faultline CUDA emulator (host)", compute capability
 * 9.0, concurrent managed access; none when CUDA_VISIBLE_DEVICES hides
 * device 0 (the test harness hides devices from CPU tests that way).
 * Kernels and most copies run at once, in order. A copy from page-locked
 * host memory (cudaMallocHost, cudaHostRegister) to the device is truly
 * asynchronous on a GPU, so here it is deferred, with whatever its stream
 * queues behind it (host functions), until something waits for it: its
 * stream's next kernel or synchronous copy, a cudaStreamSynchronize, an
 * event recorded after it being waited on or synchronized, or a free. So a
 * kernel that reads a slot without waiting for the slot's fill reads the
 * old bytes, and a staging buffer refilled before its copy ran sends the
 * new bytes: the ordering bugs a synchronous emulator would hide. Host
 * functions may not call CUDA (as on a GPU).
 * Errors follow the runtime: each failing call sets the thread's last
 * error, which cudaGetLastError returns and clears. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/emu/emu.h"

/* Handles: heap objects with a tag; a destroyed one is freed, so its later
 * use is a use-after-free ASan reports, and one never destroyed a leak. */
#define STREAM_TAG 0x5354524du
#define EVENT_TAG 0x45564e54u

/* Work a stream holds back: a copy from page-locked memory, or a host
 * function queued behind one. */
struct deferred {
    void *dst;
    const void *src;
    size_t dpitch, spitch, width, height;
    cudaHostFn_t fn;  /* non-NULL: a host function, not a copy */
    void *arg;
};
struct CUstream_st {
    uint32_t tag;
    struct deferred *q;
    size_t head, tail, cap;  /* q[head..tail) not run yet */
};
struct CUevent_st {
    uint32_t tag;
    cudaStream_t s;          /* where it was last recorded (a created stream), or NULL */
    size_t seq;              /* that stream's tail then: the work it waits for */
};

static _Thread_local cudaError_t last_error;
static _Thread_local bool in_host_fn, flushing;

/* The created streams, for flushes that wait for everything (frees). */
#define MAX_STREAMS 64
static cudaStream_t live[MAX_STREAMS];
static int n_live;
static void flush_all(void);

cudaError_t flemu_fail(cudaError_t e)
{
    if (e != cudaSuccess)
        last_error = e;
    return e;
}

/* Device 0 exists unless CUDA_VISIBLE_DEVICES is set and does not start
 * with it (empty, "-1", "1", a UUID: as the runtime, read once). */
static int device_count(void)
{
    static int n = -1;
    if (__atomic_load_n(&n, __ATOMIC_ACQUIRE) < 0) {
        const char *v = getenv("CUDA_VISIBLE_DEVICES");
        v = v ? v + strspn(v, " ") : NULL;
        const int c = !v || (v[0] == '0' && (v[1] == '\0' || v[1] == ',' || v[1] == ' '));
        __atomic_store_n(&n, c, __ATOMIC_RELEASE);
    }
    return n;
}

/* What every call checks; the calls that give something back (frees,
 * destroys, unregisters) stop here, so that after an injected sticky error
 * the process still releases what it holds, as the driver does at exit. */
static cudaError_t enter_release(void)
{
    if (in_host_fn) {
        fprintf(stderr, "faultline CUDA emulator: a CUDA call from a cudaLaunchHostFunc "
                "callback (not permitted)\n");
        return cudaErrorNotPermitted;
    }
    return device_count() ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t flemu_enter(void)
{
    const cudaError_t e = enter_release();
    return e != cudaSuccess ? e : flemu_sticky();
}

#define ENTER()                                \
    do {                                       \
        const cudaError_t enter_ = flemu_enter(); \
        if (enter_ != cudaSuccess)             \
            return flemu_fail(enter_);         \
    } while (0)

#define ENTER_RELEASE()                              \
    do {                                             \
        const cudaError_t enter_ = enter_release();  \
        if (enter_ != cudaSuccess)                   \
            return flemu_fail(enter_);               \
    } while (0)

bool flemu_stream_ok(cudaStream_t s)
{
    return !s || s == cudaStreamLegacy || s == cudaStreamPerThread || s->tag == STREAM_TAG;
}

static bool event_ok(cudaEvent_t e) { return e && e->tag == EVENT_TAG; }

/* --- errors -------------------------------------------------------------------- */

cudaError_t CUDARTAPI cudaGetLastError(void)
{
    const cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

#define FLEMU_ERRORS(X)                                                                        \
    X(cudaSuccess, "no error")                                                                 \
    X(cudaErrorInvalidValue, "invalid argument")                                               \
    X(cudaErrorMemoryAllocation, "out of memory")                                              \
    X(cudaErrorInvalidPitchValue, "invalid pitch argument")                                    \
    X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy")                    \
    X(cudaErrorNoDevice, "no CUDA-capable device is detected")                                 \
    X(cudaErrorInvalidDevice, "invalid device ordinal")                                        \
    X(cudaErrorInvalidResourceHandle, "invalid resource handle")                               \
    X(cudaErrorIllegalAddress, "an illegal memory access was encountered")                     \
    X(cudaErrorLaunchFailure, "unspecified launch failure")                                    \
    X(cudaErrorLaunchOutOfResources, "too many resources requested for launch")                \
    X(cudaErrorHostMemoryAlreadyRegistered,                                                    \
      "part or all of the requested memory range is already mapped")                           \
    X(cudaErrorHostMemoryNotRegistered,                                                        \
      "pointer does not correspond to a registered memory region")                             \
    X(cudaErrorNotPermitted, "operation not permitted")                                        \
    X(cudaErrorNotSupported, "operation not supported")                                        \
    X(cudaErrorUnknown, "unknown error")

const char *CUDARTAPI cudaGetErrorName(cudaError_t e)
{
    switch (e) {
#define NAME(c, s) case c: return #c;
    FLEMU_ERRORS(NAME)
#undef NAME
    default: return "unrecognized error code";
    }
}

const char *CUDARTAPI cudaGetErrorString(cudaError_t e)
{
    switch (e) {
#define TEXT(c, s) case c: return s;
    FLEMU_ERRORS(TEXT)
#undef TEXT
    default: return "unrecognized error code";
    }
}

/* --- the device ------------------------------------------------------------------ */

cudaError_t CUDARTAPI cudaGetDeviceCount(int *count)
{
    *count = device_count();
    return *count ? cudaSuccess : flemu_fail(cudaErrorNoDevice);
}

cudaError_t CUDARTAPI cudaGetDevice(int *device)
{
    ENTER();
    *device = 0;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaSetDevice(int device)
{
    ENTER();
    return device == 0 ? cudaSuccess : flemu_fail(cudaErrorInvalidDevice);
}

/* The header may rename this (cudaGetDeviceProperties_v2): defined under
 * the name it declares. */
cudaError_t CUDARTAPI cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    ENTER();
    if (device != 0)
        return flemu_fail(cudaErrorInvalidDevice);
    size_t free_b, total;
    flemu_mem_info(&free_b, &total);
    memset(prop, 0, sizeof(*prop));
    snprintf(prop->name, sizeof(prop->name), "faultline CUDA emulator (host)");
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 1;
    prop->totalGlobalMem = total;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->managedMemory = 1;
    prop->concurrentManagedAccess = 1;
    prop->unifiedAddressing = 1;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    ENTER();
    if (device != 0)
        return flemu_fail(cudaErrorInvalidDevice);
    switch (attr) {
    case cudaDevAttrConcurrentManagedAccess: *value = 1; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = 1; return cudaSuccess;
    default: return flemu_fail(cudaErrorNotSupported); /* not modelled */
    }
}

cudaError_t CUDARTAPI cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    ENTER();
    flemu_mem_info(free_bytes, total);
    return cudaSuccess;
}

/* --- memory ---------------------------------------------------------------------- */

cudaError_t CUDARTAPI cudaMalloc(void **p, size_t bytes)
{
    ENTER();
    return flemu_fail(flemu_alloc(FLEMU_DEVICE, bytes, p));
}

cudaError_t CUDARTAPI cudaFree(void *p)
{
    ENTER_RELEASE();
    flush_all(); /* frees synchronize the device */
    return p ? flemu_fail(flemu_free(FLEMU_DEVICE, p)) : cudaSuccess;
}

cudaError_t CUDARTAPI cudaMallocHost(void **p, size_t bytes)
{
    ENTER();
    return flemu_fail(flemu_alloc(FLEMU_PINNED, bytes, p));
}

cudaError_t CUDARTAPI cudaFreeHost(void *p)
{
    ENTER_RELEASE();
    flush_all(); /* frees synchronize the device */
    return p ? flemu_fail(flemu_free(FLEMU_PINNED, p)) : cudaSuccess;
}

cudaError_t CUDARTAPI cudaMallocManaged(void **p, size_t bytes, unsigned int flags)
{
    ENTER();
    if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost)
        return flemu_fail(cudaErrorInvalidValue);
    return flemu_fail(flemu_alloc(FLEMU_MANAGED, bytes, p));
}

/* Bookkeeping only: no page is touched or locked. */
cudaError_t CUDARTAPI cudaHostRegister(void *p, size_t bytes, unsigned int flags)
{
    (void)flags;
    ENTER();
    return flemu_fail(flemu_register(p, bytes));
}

cudaError_t CUDARTAPI cudaHostUnregister(void *p)
{
    ENTER_RELEASE();
    flush_all(); /* frees synchronize the device */
    return flemu_free(FLEMU_REGISTERED, p) == cudaSuccess
               ? cudaSuccess : flemu_fail(cudaErrorHostMemoryNotRegistered);
}

static bool location_ok(struct cudaMemLocation l)
{
    return (l.type == cudaMemLocationTypeDevice && l.id == 0) || l.type == cudaMemLocationTypeHost;
}

static bool created(cudaStream_t s)
{
    for (int i = 0; s && i < n_live; i++)
        if (live[i] == s)
            return true;
    return false;
}

static cudaError_t copy_now(const char *what, void *dst, size_t dpitch, const void *src,
                            size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind,
                            cudaStream_t stream);

static void run_deferred(cudaStream_t s, const struct deferred *d)
{
    if (d->fn) {
        in_host_fn = true;
        d->fn(d->arg);
        in_host_fn = false;
    } else {
        copy_now("cudaMemcpyAsync (deferred)", d->dst, d->dpitch, d->src, d->spitch, d->width,
                 d->height, cudaMemcpyHostToDevice, s);
    }
}

/* Runs s's deferred work up to (not including) position upto. */
static void flush_to(cudaStream_t s, size_t upto)
{
    if (flushing || !created(s))
        return;
    flushing = true; /* what runs here does not flush again */
    while (s->head < upto && s->head < s->tail)
        run_deferred(s, &s->q[s->head++]);
    flushing = false;
}

void flemu_stream_flush(cudaStream_t s)
{
    if (created(s))
        flush_to(s, s->tail);
}

/* Frees synchronize the device, as the runtime's do. */
static void flush_all(void)
{
    for (int i = 0; i < n_live; i++)
        flemu_stream_flush(live[i]);
}

static cudaError_t defer(cudaStream_t s, struct deferred d)
{
    if (s->tail == s->cap) {
        const size_t cap = s->cap ? 2 * s->cap : 16;
        struct deferred *q = realloc(s->q, cap * sizeof(*q));
        if (!q)
            return flemu_fail(cudaErrorMemoryAllocation);
        s->q = q;
        s->cap = cap;
    }
    s->q[s->tail++] = d;
    return cudaSuccess;
}

/* Managed memory never moves here: advice and prefetches are checked only. */
cudaError_t CUDARTAPI cudaMemAdvise(const void *p, size_t count, enum cudaMemoryAdvise advice,
                                    struct cudaMemLocation location)
{
    (void)advice;
    ENTER();
    return flemu_is_managed(p, count) && location_ok(location)
               ? cudaSuccess : flemu_fail(cudaErrorInvalidValue);
}

cudaError_t CUDARTAPI cudaMemPrefetchAsync(const void *p, size_t count,
                                           struct cudaMemLocation location, unsigned int flags,
                                           cudaStream_t stream)
{
    ENTER();
    if (!flemu_stream_ok(stream))
        return flemu_fail(cudaErrorInvalidResourceHandle);
    return flemu_is_managed(p, count) && location_ok(location) && flags == 0
               ? cudaSuccess : flemu_fail(cudaErrorInvalidValue);
}

/* Rows of a copy of `kind` checked on both sides, then copied. */
static cudaError_t copy_now(const char *what, void *dst, size_t dpitch, const void *src,
                            size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    if (width > dpitch || width > spitch)
        return flemu_fail(cudaErrorInvalidPitchValue);
    if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToHost &&
        kind != cudaMemcpyDeviceToDevice)
        return flemu_fail(cudaErrorInvalidMemcpyDirection); /* the others are not used */
    if (width == 0 || height == 0)
        return flemu_fail(flemu_stream_ok(stream) ? cudaSuccess : cudaErrorInvalidResourceHandle);
    const size_t dext = (height - 1) * dpitch + width, sext = (height - 1) * spitch + width;
    struct flemu_op op;
    flemu_begin(&op, what, stream);
    if (kind == cudaMemcpyHostToDevice)
        flemu_dev(&op, dst, dext, "dst"), flemu_host(&op, src, sext, "src");
    else if (kind == cudaMemcpyDeviceToHost)
        flemu_host(&op, dst, dext, "dst"), flemu_dev(&op, src, sext, "src");
    else
        flemu_dev(&op, dst, dext, "dst"), flemu_dev(&op, src, sext, "src");
    for (size_t r = 0; op.err == cudaSuccess && r < height; r++)
        memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return flemu_end(&op);
}

/* A copy from page-locked host memory on a created stream is checked now
 * (without running what the stream deferred) and deferred; the rest run. */
static cudaError_t copy_2d(const char *what, void *dst, size_t dpitch, const void *src,
                           size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind,
                           cudaStream_t stream)
{
    const size_t sext = height ? (height - 1) * spitch + width : 0;
    if (kind != cudaMemcpyHostToDevice || !created(stream) || !width || !height ||
        !flemu_is_locked_host(src, sext))
        return copy_now(what, dst, dpitch, src, spitch, width, height, kind, stream);
    const bool was = flushing;
    flushing = true;
    struct flemu_op op; /* the checks copy_now makes, nothing copied */
    flemu_begin(&op, what, stream);
    if (width > dpitch || width > spitch)
        op.err = cudaErrorInvalidPitchValue;
    flemu_dev(&op, dst, (height - 1) * dpitch + width, "dst");
    flemu_host(&op, src, sext, "src");
    cudaError_t e = flemu_end(&op);
    flushing = was;
    if (e != cudaSuccess)
        return e;
    return defer(stream, (struct deferred){ .dst = dst, .src = src, .dpitch = dpitch,
                                            .spitch = spitch, .width = width, .height = height });
}

cudaError_t CUDARTAPI cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                      enum cudaMemcpyKind kind, cudaStream_t stream)
{
    ENTER();
    return copy_2d("cudaMemcpyAsync", dst, count, src, count, count, 1, kind, stream);
}

cudaError_t CUDARTAPI cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                                        size_t width, size_t height, enum cudaMemcpyKind kind,
                                        cudaStream_t stream)
{
    ENTER();
    return copy_2d("cudaMemcpy2DAsync", dst, dpitch, src, spitch, width, height, kind, stream);
}

/* --- streams, events, host functions ------------------------------------------------ */

cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    (void)flags;
    ENTER();
    if (n_live == MAX_STREAMS || !(*s = calloc(1, sizeof(**s))))
        return flemu_fail(cudaErrorMemoryAllocation);
    (*s)->tag = STREAM_TAG;
    live[n_live++] = *s;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t s)
{
    ENTER_RELEASE();
    if (!s || !flemu_stream_ok(s) || s == cudaStreamLegacy || s == cudaStreamPerThread)
        return flemu_fail(cudaErrorInvalidResourceHandle);
    flemu_stream_flush(s); /* its queued work completes first */
    for (int i = 0; i < n_live; i++)
        if (live[i] == s)
            live[i] = live[--n_live];
    s->tag = 0;
    free(s->q);
    free(s);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t s)
{
    ENTER();
    if (!flemu_stream_ok(s))
        return flemu_fail(cudaErrorInvalidResourceHandle);
    flemu_stream_flush(s);
    return flemu_sticky() ? flemu_fail(flemu_sticky()) : cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    (void)flags;
    ENTER();
    if (!flemu_stream_ok(s) || !event_ok(e))
        return flemu_fail(cudaErrorInvalidResourceHandle);
    if (e->s) /* s's later work sees everything before the record */
        flush_to(e->s, e->seq);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    (void)flags;
    ENTER();
    if (!(*e = calloc(1, sizeof(**e))))
        return flemu_fail(cudaErrorMemoryAllocation);
    (*e)->tag = EVENT_TAG;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t e)
{
    ENTER_RELEASE();
    if (!event_ok(e))
        return flemu_fail(cudaErrorInvalidResourceHandle);
    e->tag = 0;
    free(e);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    ENTER();
    if (!event_ok(e) || !flemu_stream_ok(s))
        return flemu_fail(cudaErrorInvalidResourceHandle);
    e->s = created(s) ? s : NULL;
    e->seq = e->s ? s->tail : 0;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t e)
{
    ENTER();
    if (!event_ok(e))
        return flemu_fail(cudaErrorInvalidResourceHandle);
    if (e->s)
        flush_to(e->s, e->seq);
    return cudaSuccess;
}

/* Runs fn after what its stream deferred: queued behind it, or at once. */
cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *arg)
{
    ENTER();
    if (!flemu_stream_ok(s) || !fn)
        return flemu_fail(fn ? cudaErrorInvalidResourceHandle : cudaErrorInvalidValue);
    if (created(s) && s->head < s->tail)
        return defer(s, (struct deferred){ .fn = fn, .arg = arg });
    in_host_fn = true;
    fn(arg);
    in_host_fn = false;
    return cudaSuccess;
}
