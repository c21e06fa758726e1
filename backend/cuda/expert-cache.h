/* expert-cache.h: experts in VRAM for `--gpu-experts copy|unified`.
 *
 * A cache of equal slots, each big enough for one expert (its gate, up and
 * down slices packed back to back), sized by a VRAM budget but never above
 * what cudaMemGetInfo reports free. Slot choice is backend/cuda/expert-lru.h
 * (LRU, or lfu-decay); this file moves the bytes:
 *
 *   copy     slots in cudaMalloc'd VRAM. A miss copies the expert's host
 *            bytes (made resident by the pager: reading them may fault them
 *            in) into a pinned staging buffer, then cudaMemcpyAsync on a
 *            copy stream, so the transfer overlaps kernels of experts that
 *            are already present. Ranges marked `pinned` (page-locked and
 *            never evicted: RAM-tier experts) skip the staging copy: the
 *            copy engine reads them in place, and acquire returns at once.
 *   unified  slots in managed memory (cudaMallocManaged). A miss writes the
 *            bytes from the host and cudaMemPrefetchAsync migrates them to
 *            the device on the copy stream.
 *
 * Ordering is by events, never by device-wide syncs: each slot records a
 * `ready` event after its fill (the compute stream waits on it in acquire,
 * so kernels queued after acquire see the bytes) and a `used` event on the
 * compute stream at release (a later refill of the slot waits on it, so a
 * kernel never reads half-overwritten weights). Only the kernels of the
 * experts a layer needs wait, and only for their own copies.
 *
 * Router-driven prefetch: fl_cuda_xcache_prefetch() queues the fills of
 * the experts the router chose for an upcoming layer without pinning them.
 *
 * Every fill fires the copy_begin / copy_end USDT probes (one pair per
 * range) and adds its latency (queueing included: enqueue to completion,
 * measured by a host callback on the copy stream) to the statistics. */
#ifndef FL_CUDA_EXPERT_CACHE_H
#define FL_CUDA_EXPERT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cuda/cuda-backend.h"
#include "backend/cuda/expert-lru.h"

#ifdef FL_HAVE_CUDA

enum fl_cuda_xmode { FL_CUDA_XCOPY = 0, FL_CUDA_XUNIFIED = 1 };

struct fl_cuda_xcache_opts {
    enum fl_cuda_xmode mode;
    size_t slot_bytes;           /* one expert, all its ranges */
    size_t budget;               /* VRAM for slots (--vram-budget's share) */
    size_t reserve;              /* free memory left alone for everything else */
    int n_layer, n_expert;
    int n_staging;               /* copy mode's pinned staging buffers; 0: 4 */
    int lfu_next_used;           /* > 0: eviction by lfu-next (expert-lru.h), the model's
                                  * experts per token; 0: LRU */
};

/* One contiguous piece of an expert in host memory (a GGUF tensor slice),
 * packed into the slot in the order given. offset/kind label the probes:
 * the file offset and enum pager_kind (1 gate, 2 up, 3 down, 4 gate_up). */
struct fl_cuda_xrange {
    const void *host;
    size_t bytes;
    uint64_t offset;
    int kind;
    bool pinned;   /* registered host memory that stays put until the copy is done */
};
#define FL_CUDA_XRANGES_MAX 6

struct fl_cuda_xcache;

/* -ENOMEM when not one slot fits; -ENOTSUP for unified mode on a device
 * without concurrent managed access. */
int fl_cuda_xcache_create(struct fl_cuda *cu, const struct fl_cuda_xcache_opts *o,
                          struct fl_cuda_xcache **out, struct fl_err *err);
/* Waits for queued copies; callers first finish using the slots. */
void fl_cuda_xcache_destroy(struct fl_cuda_xcache *x);
int fl_cuda_xcache_slots(const struct fl_cuda_xcache *x);

/* Device address of (layer, expert)'s slot, filled from `r` on a miss;
 * the slot stays pinned until release and the compute stream waits for
 * its fill. -EBUSY when every slot is pinned, -EINVAL when the ranges do
 * not fit a slot, a CUDA error's code otherwise. */
int fl_cuda_xcache_acquire(struct fl_cuda_xcache *x, int layer, int expert,
                           const struct fl_cuda_xrange *r, int n_ranges, void **d_out,
                           struct fl_err *err);
/* acquire in two steps, so that a layer can queue all its copies before
 * its first kernel: hold pins the slot (queueing its fill on a miss) and
 * gives its address without ordering the compute stream; ready makes the
 * compute stream wait for that fill (call it before queueing the kernels
 * that read the slot). acquire = hold + ready. */
int fl_cuda_xcache_hold(struct fl_cuda_xcache *x, int layer, int expert,
                        const struct fl_cuda_xrange *r, int n_ranges, void **d_out,
                        struct fl_err *err);
/* hold, the expert serving `uses` tokens of the step (lfu-next counts them;
 * hold counts 1; prefetch 0). */
int fl_cuda_xcache_hold_uses(struct fl_cuda_xcache *x, int layer, int expert, uint32_t uses,
                             const struct fl_cuda_xrange *r, int n_ranges, void **d_out,
                             struct fl_err *err);
int fl_cuda_xcache_ready(struct fl_cuda_xcache *x, int layer, int expert, struct fl_err *err);
/* Whether (layer, expert) holds a slot now (filled or being filled), so an
 * acquire would not read its host bytes; changes nothing. */
bool fl_cuda_xcache_cached(const struct fl_cuda_xcache *x, int layer, int expert);
/* After the kernels that read the slot are queued on the compute stream. */
int fl_cuda_xcache_release(struct fl_cuda_xcache *x, int layer, int expert, struct fl_err *err);
/* Queues the fill of (layer, expert) if it is absent; no pin is kept. A
 * full cache (-EBUSY) is not an error here: prefetch is a hint. */
int fl_cuda_xcache_prefetch(struct fl_cuda_xcache *x, int layer, int expert,
                            const struct fl_cuda_xrange *r, int n_ranges, struct fl_err *err);

/* Waits until every queued fill has landed and been counted. */
int fl_cuda_xcache_sync(struct fl_cuda_xcache *x, struct fl_err *err);

struct fl_cuda_xcache_stats {
    struct fl_xlru_stats lru;
    uint64_t copies, copy_bytes;      /* completed fills */
    uint64_t copy_ns_total, copy_ns_max;
};
/* Completed copies only; after fl_cuda_xcache_sync, all of them. */
struct fl_cuda_xcache_stats fl_cuda_xcache_stats(const struct fl_cuda_xcache *x);

#endif /* FL_HAVE_CUDA */
#endif
