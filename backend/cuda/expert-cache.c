/* expert-cache.c: the device half of the VRAM expert cache (see
 * expert-cache.h): slot memory, the copy stream, staging, events, probes
 * and copy-latency statistics. Plain C over the CUDA runtime API. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/cuda-impl.h"
#include "backend/cuda/cuda-probes.h"
#include "backend/cuda/expert-cache.h"

struct fl_cuda_xcache {
    struct fl_cuda *cu;
    enum fl_cuda_xmode mode;
    size_t slot_bytes;
    int n_slots;
    struct fl_xlru *lru;
    char *arena;                 /* n_slots * slot_bytes, device or managed */
    cudaStream_t copy;
    cudaEvent_t *ready, *used;   /* per slot */
    void **stage;                /* copy mode: pinned staging buffers */
    cudaEvent_t *stage_ev;       /* last copy out of each staging buffer */
    int n_stage, next_stage;
    /* updated by host callbacks on a CUDA thread: atomics */
    uint64_t copies, copy_bytes, copy_ns_total, copy_ns_max;
};

/* What a fill's completion callback needs; freed by the callback. */
struct fill_note {
    struct fl_cuda_xcache *x;
    int layer, expert, n;
    struct fl_cuda_xrange r[FL_CUDA_XRANGES_MAX];
    size_t total;
    uint64_t t0;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void destroy_events(cudaEvent_t *ev, int n)
{
    for (int i = 0; ev && i < n; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    free(ev);
}

static int make_events(cudaEvent_t **out, int n, struct fl_err *err)
{
    cudaEvent_t *ev = calloc((size_t)n, sizeof(*ev));
    if (!ev)
        return fl_err_set(err, -ENOMEM, "cuda: out of memory");
    *out = ev;
    for (int i = 0; i < n; i++) {
        cudaError_t e = cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming);
        if (e != cudaSuccess)
            return flc_err(err, e, "cudaEventCreate");
    }
    return 0;
}

void fl_cuda_xcache_destroy(struct fl_cuda_xcache *x)
{
    if (!x)
        return;
    if (x->copy) {
        cudaStreamSynchronize(x->copy);
        cudaStreamDestroy(x->copy);
    }
    for (int i = 0; x->stage && i < x->n_stage; i++)
        cudaFreeHost(x->stage[i]);
    free(x->stage);
    destroy_events(x->stage_ev, x->n_stage);
    destroy_events(x->ready, x->n_slots);
    destroy_events(x->used, x->n_slots);
    cudaFree(x->arena);
    fl_xlru_destroy(x->lru);
    free(x);
}

static int alloc_slots(struct fl_cuda_xcache *x, struct fl_err *err)
{
    const size_t bytes = (size_t)x->n_slots * x->slot_bytes;
    if (x->mode == FL_CUDA_XCOPY) {
        cudaError_t e = cudaMalloc((void **)&x->arena, bytes);
        return e == cudaSuccess ? 0 : flc_err(err, e, "allocating expert slots");
    }
    cudaError_t e = cudaMallocManaged((void **)&x->arena, bytes, cudaMemAttachGlobal);
    if (e != cudaSuccess)
        return flc_err(err, e, "allocating managed expert slots");
    /* keep the GPU's mapping when pages move to the host and back */
    const struct cudaMemLocation dev = {cudaMemLocationTypeDevice, x->cu->dev};
    e = cudaMemAdvise(x->arena, bytes, cudaMemAdviseSetAccessedBy, dev);
    return e == cudaSuccess ? 0 : flc_err(err, e, "cudaMemAdvise");
}

static int alloc_staging(struct fl_cuda_xcache *x, int n, struct fl_err *err)
{
    x->stage = calloc((size_t)n, sizeof(void *));
    if (!x->stage)
        return fl_err_set(err, -ENOMEM, "cuda: out of memory");
    x->n_stage = n;
    for (int i = 0; i < n; i++) {
        cudaError_t e = cudaMallocHost(&x->stage[i], x->slot_bytes);
        if (e != cudaSuccess)
            return flc_err(err, e, "allocating pinned staging");
    }
    return make_events(&x->stage_ev, n, err);
}

static int size_cache(struct fl_cuda_xcache *x, const struct fl_cuda_xcache_opts *o,
                      struct fl_err *err)
{
    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess)
        return flc_err(err, e, "cudaMemGetInfo");
    int64_t n = fl_xlru_slots_for_budget(o->budget, free_b, o->reserve, o->slot_bytes);
    if (n > (int64_t)o->n_layer * o->n_expert)
        n = (int64_t)o->n_layer * o->n_expert;
    if (n < 1)
        return fl_err_set(err, -ENOMEM,
                          "cuda: no expert slot of %zu bytes fits (budget %zu, free %zu, reserve %zu)",
                          o->slot_bytes, o->budget, free_b, o->reserve);
    x->n_slots = (int)n;
    return 0;
}

static int check_opts(struct fl_cuda *cu, const struct fl_cuda_xcache_opts *o, struct fl_err *err)
{
    if (o->slot_bytes == 0 || o->n_layer < 1 || o->n_expert < 1 || o->n_staging < 0 ||
        (o->mode != FL_CUDA_XCOPY && o->mode != FL_CUDA_XUNIFIED))
        return fl_err_set(err, -EINVAL, "cuda: bad expert cache options");
    if (o->mode == FL_CUDA_XUNIFIED) {
        int managed = 0;
        cudaError_t e = cudaDeviceGetAttribute(&managed, cudaDevAttrConcurrentManagedAccess, cu->dev);
        if (e != cudaSuccess)
            return flc_err(err, e, "cudaDeviceGetAttribute");
        if (!managed)
            return fl_err_set(err, -ENOTSUP,
                              "cuda: --gpu-experts unified needs concurrent managed access (use copy)");
    }
    return 0;
}

int fl_cuda_xcache_create(struct fl_cuda *cu, const struct fl_cuda_xcache_opts *o,
                          struct fl_cuda_xcache **out, struct fl_err *err)
{
    int rc = check_opts(cu, o, err);
    if (rc)
        return rc;
    struct fl_cuda_xcache *x = calloc(1, sizeof(*x));
    if (!x)
        return fl_err_set(err, -ENOMEM, "cuda: out of memory");
    x->cu = cu;
    x->mode = o->mode;
    x->slot_bytes = o->slot_bytes;
    cudaError_t e = cudaSetDevice(cu->dev);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&x->copy, cudaStreamNonBlocking);
    rc = e != cudaSuccess ? flc_err(err, e, "creating the copy stream") : size_cache(x, o, err);
    if (!rc && fl_xlru_create(x->n_slots, o->n_layer, o->n_expert, &x->lru))
        rc = fl_err_set(err, -ENOMEM, "cuda: out of memory");
    if (!rc && o->lfu_next_used > 0 && fl_xlru_set_lfu_next(x->lru, o->lfu_next_used))
        rc = fl_err_set(err, -ENOMEM, "cuda: out of memory");
    if (!rc)
        rc = alloc_slots(x, err);
    if (!rc)
        rc = make_events(&x->ready, x->n_slots, err);
    if (!rc)
        rc = make_events(&x->used, x->n_slots, err);
    if (!rc && x->mode == FL_CUDA_XCOPY)
        rc = alloc_staging(x, o->n_staging ? o->n_staging : 4, err);
    if (rc) {
        fl_cuda_xcache_destroy(x);
        return rc;
    }
    *out = x;
    return 0;
}

int fl_cuda_xcache_slots(const struct fl_cuda_xcache *x) { return x->n_slots; }

static void atomic_max(uint64_t *p, uint64_t v)
{
    uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v > cur && !__atomic_compare_exchange_n(p, &cur, v, false, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED))
        ;
}

/* Runs on a CUDA thread once the fill's transfer is done; no CUDA calls. */
static void CUDART_CB fill_done(void *arg)
{
    struct fill_note *n = arg;
    struct fl_cuda_xcache *x = n->x;
    const uint64_t dt = now_ns() - n->t0;
    for (int i = 0; i < n->n; i++)
        FL_PROBE_COPY_END(n->layer, n->expert, n->r[i].kind, n->r[i].bytes, n->r[i].offset);
    __atomic_fetch_add(&x->copies, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&x->copy_bytes, n->total, __ATOMIC_RELAXED);
    __atomic_fetch_add(&x->copy_ns_total, dt, __ATOMIC_RELAXED);
    atomic_max(&x->copy_ns_max, dt);
    free(n);
}

static bool all_pinned(const struct fill_note *n)
{
    for (int r = 0; r < n->n; r++)
        if (!n->r[r].pinned)
            return false;
    return true;
}

/* Host bytes -> slot, copy mode, page-locked ranges: the copy engine reads
 * them where they are. */
static cudaError_t fill_direct(struct fl_cuda_xcache *x, int slot, const struct fill_note *n)
{
    char *dst = x->arena + (size_t)slot * x->slot_bytes;
    cudaError_t e = cudaStreamWaitEvent(x->copy, x->used[slot], 0);
    for (int r = 0; r < n->n && e == cudaSuccess; r++) {
        e = cudaMemcpyAsync(dst, n->r[r].host, n->r[r].bytes, cudaMemcpyHostToDevice, x->copy);
        dst += n->r[r].bytes;
    }
    return e;
}

/* Host bytes -> slot, copy mode: through a pinned staging buffer. */
static cudaError_t fill_copy(struct fl_cuda_xcache *x, int slot, const struct fill_note *n)
{
    if (all_pinned(n))
        return fill_direct(x, slot, n);
    char *dst = x->arena + (size_t)slot * x->slot_bytes;
    const int i = x->next_stage;
    x->next_stage = (i + 1) % x->n_stage;
    cudaError_t e = cudaEventSynchronize(x->stage_ev[i]); /* its last copy has left it */
    if (e != cudaSuccess)
        return e;
    size_t at = 0;
    for (int r = 0; r < n->n; r++) {
        memcpy((char *)x->stage[i] + at, n->r[r].host, n->r[r].bytes);
        at += n->r[r].bytes;
    }
    e = cudaStreamWaitEvent(x->copy, x->used[slot], 0); /* kernels still reading the slot */
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(dst, x->stage[i], at, cudaMemcpyHostToDevice, x->copy);
    if (e == cudaSuccess)
        e = cudaEventRecord(x->stage_ev[i], x->copy);
    return e;
}

/* Host bytes -> slot, unified mode: host writes, then migrate to the GPU. */
static cudaError_t fill_unified(struct fl_cuda_xcache *x, int slot, const struct fill_note *n)
{
    char *dst = x->arena + (size_t)slot * x->slot_bytes;
    /* the host may touch the pages only once the GPU is done with them */
    cudaError_t e = cudaEventSynchronize(x->used[slot]);
    if (e == cudaSuccess)
        e = cudaEventSynchronize(x->ready[slot]);
    if (e != cudaSuccess)
        return e;
    size_t at = 0;
    for (int r = 0; r < n->n; r++) {
        memcpy(dst + at, n->r[r].host, n->r[r].bytes);
        at += n->r[r].bytes;
    }
    const struct cudaMemLocation dev = {cudaMemLocationTypeDevice, x->cu->dev};
    return cudaMemPrefetchAsync(dst, at, dev, 0, x->copy);
}

static int fill(struct fl_cuda_xcache *x, int slot, int layer, int expert,
                const struct fl_cuda_xrange *r, int n_ranges, size_t total, struct fl_err *err)
{
    struct fill_note *n = malloc(sizeof(*n));
    if (!n)
        return fl_err_set(err, -ENOMEM, "cuda: out of memory");
    *n = (struct fill_note){.x = x, .layer = layer, .expert = expert, .n = n_ranges,
                            .total = total, .t0 = now_ns()};
    memcpy(n->r, r, sizeof(*r) * (size_t)n_ranges);
    for (int i = 0; i < n_ranges; i++)
        FL_PROBE_COPY_BEGIN(layer, expert, r[i].kind, r[i].bytes, r[i].offset);
    cudaError_t e = x->mode == FL_CUDA_XCOPY ? fill_copy(x, slot, n) : fill_unified(x, slot, n);
    if (e == cudaSuccess)
        e = cudaEventRecord(x->ready[slot], x->copy);
    if (e == cudaSuccess)
        e = cudaLaunchHostFunc(x->copy, fill_done, n);
    if (e != cudaSuccess) {
        free(n);
        return flc_err(err, e, "copying an expert to the GPU");
    }
    return 0;
}

static int check_ranges(const struct fl_cuda_xcache *x, const struct fl_cuda_xrange *r, int n,
                        size_t *total, struct fl_err *err)
{
    if (n < 1 || n > FL_CUDA_XRANGES_MAX)
        return fl_err_set(err, -EINVAL, "cuda: an expert of %d ranges", n);
    *total = 0;
    for (int i = 0; i < n; i++)
        *total += r[i].bytes;
    if (*total > x->slot_bytes)
        return fl_err_set(err, -EINVAL, "cuda: expert of %zu bytes, slots of %zu", *total,
                          x->slot_bytes);
    return 0;
}

/* Pins (layer, expert)'s slot, filling it on a miss. */
static int get_slot(struct fl_cuda_xcache *x, int layer, int expert, uint32_t uses,
                    const struct fl_cuda_xrange *r, int n_ranges, struct fl_err *err)
{
    size_t total = 0;
    int rc = check_ranges(x, r, n_ranges, &total, err);
    if (rc)
        return rc;
    struct fl_xlru_res res;
    if ((rc = fl_xlru_acquire_uses(x->lru, layer, expert, uses, &res)) < 0)
        return fl_err_set(err, rc, rc == -EBUSY ? "cuda: all %d expert slots are in use"
                                                : "cuda: expert key out of range (%d slots)",
                          x->n_slots);
    if (!res.hit && (rc = fill(x, res.slot, layer, expert, r, n_ranges, total, err))) {
        fl_xlru_invalidate(x->lru, res.slot);
        return rc;
    }
    return res.slot;
}

int fl_cuda_xcache_hold(struct fl_cuda_xcache *x, int layer, int expert,
                        const struct fl_cuda_xrange *r, int n_ranges, void **d_out,
                        struct fl_err *err)
{
    return fl_cuda_xcache_hold_uses(x, layer, expert, 1, r, n_ranges, d_out, err);
}

int fl_cuda_xcache_hold_uses(struct fl_cuda_xcache *x, int layer, int expert, uint32_t uses,
                             const struct fl_cuda_xrange *r, int n_ranges, void **d_out,
                             struct fl_err *err)
{
    const int slot = get_slot(x, layer, expert, uses, r, n_ranges, err);
    if (slot < 0)
        return slot;
    *d_out = x->arena + (size_t)slot * x->slot_bytes;
    return 0;
}

int fl_cuda_xcache_ready(struct fl_cuda_xcache *x, int layer, int expert, struct fl_err *err)
{
    const int slot = fl_xlru_lookup(x->lru, layer, expert);
    if (slot < 0 || fl_xlru_pins(x->lru, slot) == 0)
        return fl_err_set(err, -EINVAL, "cuda: expert %d/%d is not held", layer, expert);
    cudaError_t e = cudaStreamWaitEvent(x->cu->stream, x->ready[slot], 0);
    return e == cudaSuccess ? 0 : flc_err(err, e, "waiting for an expert copy");
}

int fl_cuda_xcache_acquire(struct fl_cuda_xcache *x, int layer, int expert,
                           const struct fl_cuda_xrange *r, int n_ranges, void **d_out,
                           struct fl_err *err)
{
    int rc = fl_cuda_xcache_hold(x, layer, expert, r, n_ranges, d_out, err);
    if (rc)
        return rc;
    if ((rc = fl_cuda_xcache_ready(x, layer, expert, err)))
        fl_xlru_release(x->lru, fl_xlru_lookup(x->lru, layer, expert));
    return rc;
}

bool fl_cuda_xcache_cached(const struct fl_cuda_xcache *x, int layer, int expert)
{
    return fl_xlru_lookup(x->lru, layer, expert) >= 0;
}

int fl_cuda_xcache_release(struct fl_cuda_xcache *x, int layer, int expert, struct fl_err *err)
{
    const int slot = fl_xlru_lookup(x->lru, layer, expert);
    if (slot < 0 || fl_xlru_pins(x->lru, slot) == 0)
        return fl_err_set(err, -EINVAL, "cuda: release of expert %d/%d that is not held", layer,
                          expert);
    cudaError_t e = cudaEventRecord(x->used[slot], x->cu->stream);
    fl_xlru_release(x->lru, slot);
    return e == cudaSuccess ? 0 : flc_err(err, e, "recording an expert's use");
}

int fl_cuda_xcache_prefetch(struct fl_cuda_xcache *x, int layer, int expert,
                            const struct fl_cuda_xrange *r, int n_ranges, struct fl_err *err)
{
    const int slot = get_slot(x, layer, expert, 0, r, n_ranges, err); /* a fill, not a use */
    if (slot == -EBUSY)
        return 0;
    if (slot < 0)
        return slot;
    fl_xlru_release(x->lru, slot);
    return 0;
}

int fl_cuda_xcache_sync(struct fl_cuda_xcache *x, struct fl_err *err)
{
    cudaError_t e = cudaStreamSynchronize(x->copy);
    return e == cudaSuccess ? 0 : flc_err(err, e, "waiting for expert copies");
}

struct fl_cuda_xcache_stats fl_cuda_xcache_stats(const struct fl_cuda_xcache *x)
{
    struct fl_cuda_xcache_stats s = {.lru = fl_xlru_stats(x->lru)};
    s.copies = __atomic_load_n(&x->copies, __ATOMIC_RELAXED);
    s.copy_bytes = __atomic_load_n(&x->copy_bytes, __ATOMIC_RELAXED);
    s.copy_ns_total = __atomic_load_n(&x->copy_ns_total, __ATOMIC_RELAXED);
    s.copy_ns_max = __atomic_load_n(&x->copy_ns_max, __ATOMIC_RELAXED);
    return s;
}
