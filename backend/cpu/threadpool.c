/* threadpool.c: workers wait on a generation counter; the caller bumps it to
 * start a job and waits for a pending counter to reach zero. Both waits spin
 * first (jobs come back to back during a forward pass) and then sleep on a
 * futex. Sleepers are counted so the fast path makes no system call. */
#include "backend/cpu/threadpool.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ~50-100 us of pause instructions: longer than the gap between the ops of
 * one forward pass, far shorter than any human-visible idle time. */
#define FL_POOL_SPIN 4096

struct fl_pool {
    int n;
    pthread_t *threads;
    fl_pool_fn fn;
    void *arg;
    _Alignas(64) atomic_uint gen;      /* bumped once per job */
    atomic_int stop;
    atomic_int n_sleeping;             /* workers blocked in futex_wait(gen) */
    _Alignas(64) atomic_uint pending;  /* workers still running this job */
    atomic_int caller_sleeping;
};

struct fl_worker_arg {
    struct fl_pool *pool;
    int ith;
};

static void futex_wait(atomic_uint *addr, unsigned val)
{
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(atomic_uint *addr, int n)
{
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Waits until *addr != val; returns the new value. */
static unsigned wait_change(atomic_uint *addr, unsigned val, atomic_int *sleepers)
{
    for (int i = 0; i < FL_POOL_SPIN; i++) {
        unsigned v = atomic_load_explicit(addr, memory_order_acquire);
        if (v != val)
            return v;
        cpu_relax();
    }
    for (;;) {
        atomic_fetch_add(sleepers, 1);
        unsigned v = atomic_load(addr);
        if (v == val)
            futex_wait(addr, val);
        atomic_fetch_sub(sleepers, 1);
        v = atomic_load_explicit(addr, memory_order_acquire);
        if (v != val)
            return v;
    }
}

static void *worker_main(void *p)
{
    struct fl_worker_arg *wa = p;
    struct fl_pool *pool = wa->pool;
    int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        seen = wait_change(&pool->gen, seen, &pool->n_sleeping);
        if (atomic_load(&pool->stop))
            return NULL;
        pool->fn(pool->arg, ith, pool->n);
        if (atomic_fetch_sub(&pool->pending, 1) == 1 &&
            atomic_load(&pool->caller_sleeping))
            futex_wake(&pool->pending, 1);
    }
}

static void stop_workers(struct fl_pool *pool, int n_started)
{
    atomic_store(&pool->stop, 1);
    atomic_fetch_add(&pool->gen, 1);
    futex_wake(&pool->gen, INT_MAX);
    for (int i = 0; i < n_started; i++)
        pthread_join(pool->threads[i], NULL);
}

struct fl_pool *fl_pool_create(int n_threads)
{
    if (n_threads < 1) {
        errno = EINVAL;
        return NULL;
    }
    struct fl_pool *pool = calloc(1, sizeof(*pool));
    if (!pool)
        return NULL;
    pool->n = n_threads;
    pool->threads = calloc((size_t)n_threads, sizeof(pthread_t));
    if (!pool->threads) {
        free(pool);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        struct fl_worker_arg *wa = malloc(sizeof(*wa));
        int rc = ENOMEM;
        if (wa) {
            wa->pool = pool;
            wa->ith = i;
            rc = pthread_create(&pool->threads[i - 1], NULL, worker_main, wa);
        }
        if (rc != 0) {
            free(wa); /* not handed over: the thread was never created */
            stop_workers(pool, i - 1);
            free(pool->threads);
            free(pool);
            errno = rc;
            return NULL;
        }
    }
    return pool;
}

void fl_pool_destroy(struct fl_pool *pool)
{
    if (!pool)
        return;
    stop_workers(pool, pool->n - 1);
    free(pool->threads);
    free(pool);
}

int fl_pool_size(const struct fl_pool *pool)
{
    return pool ? pool->n : 1;
}

void fl_pool_run(struct fl_pool *pool, fl_pool_fn fn, void *arg)
{
    if (!pool || pool->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->arg = arg;
    atomic_store(&pool->pending, (unsigned)(pool->n - 1));
    atomic_fetch_add(&pool->gen, 1); /* seq_cst: pairs with the sleeper count */
    if (atomic_load(&pool->n_sleeping) > 0)
        futex_wake(&pool->gen, INT_MAX);
    fn(arg, 0, pool->n);
    unsigned p;
    for (int i = 0; i < FL_POOL_SPIN; i++) {
        if (atomic_load_explicit(&pool->pending, memory_order_acquire) == 0)
            return;
        cpu_relax();
    }
    atomic_store(&pool->caller_sleeping, 1);
    while ((p = atomic_load(&pool->pending)) != 0)
        futex_wait(&pool->pending, p);
    atomic_store(&pool->caller_sleeping, 0);
}

void fl_split_range(int64_t n, int ith, int nth, int64_t *begin, int64_t *end)
{
    int64_t per = n / nth, extra = n % nth;
    *begin = ith * per + (ith < extra ? ith : extra);
    *end = *begin + per + (ith < extra ? 1 : 0);
}

void fl_chunks_init(struct fl_chunks *c, int64_t n, int64_t chunk)
{
    atomic_store_explicit((_Atomic int64_t *)&c->next, 0, memory_order_relaxed);
    c->n = n;
    c->chunk = chunk > 0 ? chunk : 1;
}

_Bool fl_chunks_next(struct fl_chunks *c, int64_t *begin, int64_t *end)
{
    int64_t b = atomic_fetch_add_explicit((_Atomic int64_t *)&c->next, c->chunk,
                                          memory_order_relaxed);
    if (b >= c->n)
        return 0;
    *begin = b;
    *end = b + c->chunk < c->n ? b + c->chunk : c->n;
    return 1;
}
