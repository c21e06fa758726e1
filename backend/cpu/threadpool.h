/* threadpool.h: a fixed set of worker threads that run one parallel job at a
 * time, plus helpers to split work between them.
 *
 * fl_pool_run(pool, fn, arg) calls fn(arg, ith, nth) once on every thread
 * (ith = 0..nth-1; the calling thread is ith 0) and returns when all calls
 * have returned, so the end of a run is a full barrier: everything a worker
 * wrote is visible to the caller afterwards. Workers spin briefly after a
 * job (the next op of a forward pass usually follows within microseconds)
 * and then sleep on a futex, so an idle pool costs no CPU.
 *
 * A pool is driven by one thread at a time; runs do not nest (a job must
 * not call fl_pool_run on its own pool). A NULL pool is valid everywhere
 * and means "run on the calling thread only" (nth = 1). */
#ifndef FL_CPU_THREADPOOL_H
#define FL_CPU_THREADPOOL_H

#include <stdint.h>

struct fl_pool;

typedef void (*fl_pool_fn)(void *arg, int ith, int nth);

/* n_threads >= 1 counts the caller; n_threads - 1 workers are started.
 * Returns NULL (errno set) when a thread cannot be created. */
struct fl_pool *fl_pool_create(int n_threads);
void fl_pool_destroy(struct fl_pool *pool);      /* NULL is a no-op */
int fl_pool_size(const struct fl_pool *pool);    /* 1 for NULL */
void fl_pool_run(struct fl_pool *pool, fl_pool_fn fn, void *arg);

/* Static split of [0, n) into nth nearly equal contiguous ranges; thread
 * ith gets [*begin, *end). */
void fl_split_range(int64_t n, int ith, int nth, int64_t *begin, int64_t *end);

/* Dynamic split: a shared counter handed out in chunks. Reset it before the
 * run (fl_chunks_init), then every thread loops on fl_chunks_next until it
 * returns false. Which thread computes a chunk varies between runs, so a
 * job that must be deterministic has to compute each output the same way
 * whoever runs it (matmul does). */
struct fl_chunks {
    _Alignas(64) int64_t next; /* accessed atomically */
    int64_t n, chunk;
};
void fl_chunks_init(struct fl_chunks *c, int64_t n, int64_t chunk);
_Bool fl_chunks_next(struct fl_chunks *c, int64_t *begin, int64_t *end);

#endif
