/* test-cpu-pool: the thread pool runs a job once on every thread, waits
 * for all of them, survives idle periods (workers asleep on the futex) and
 * back-to-back runs (workers spinning), and the range helpers cover every
 * index exactly once. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/threadpool.h"
#include "tests/check.h"

#define N_ITEMS 10007

struct job {
    atomic_int calls[8];
    int nth_seen[8];
    int hits[N_ITEMS];   /* written without atomics: the split must be disjoint */
    struct fl_chunks chunks;
    int use_chunks;
};

static void work(void *arg, int ith, int nth)
{
    struct job *j = arg;
    atomic_fetch_add(&j->calls[ith], 1);
    j->nth_seen[ith] = nth;
    int64_t b, e;
    if (j->use_chunks) {
        while (fl_chunks_next(&j->chunks, &b, &e))
            for (int64_t i = b; i < e; i++)
                j->hits[i]++;
    } else {
        fl_split_range(N_ITEMS, ith, nth, &b, &e);
        for (int64_t i = b; i < e; i++)
            j->hits[i]++;
    }
}

static void run_checked(struct fl_pool *pool, int n, int use_chunks, const char *what)
{
    static struct job j;
    memset(&j, 0, sizeof(j));
    j.use_chunks = use_chunks;
    fl_chunks_init(&j.chunks, N_ITEMS, 97);
    fl_pool_run(pool, work, &j);
    int ok = 1;
    for (int i = 0; i < 8; i++)
        ok &= atomic_load(&j.calls[i]) == (i < n) && (i >= n || j.nth_seen[i] == n);
    CHECK(ok, "%s: each of %d threads must run the job exactly once", what, n);
    int cover = 1;
    for (int i = 0; i < N_ITEMS; i++)
        cover &= j.hits[i] == 1;
    CHECK(cover, "%s: items not covered exactly once", what);
}

int main(void)
{
    CHECK(fl_pool_create(0) == NULL, "0 threads accepted");
    run_checked(NULL, 1, 0, "NULL pool");
    CHECK(fl_pool_size(NULL) == 1, "NULL pool size");
    for (int n = 1; n <= 5; n++) {
        struct fl_pool *pool = fl_pool_create(n);
        CHECK(pool && fl_pool_size(pool) == n, "create %d", n);
        if (!pool)
            continue;
        for (int rep = 0; rep < 200; rep++)     /* back to back: the spinning path */
            run_checked(pool, n, rep & 1, "back-to-back");
        for (int rep = 0; rep < 3; rep++) {      /* idle: the futex path */
            nanosleep(&(struct timespec){ 0, 30 * 1000 * 1000 }, NULL);
            run_checked(pool, n, rep & 1, "after idle");
        }
        /* an idle pool sleeps: little CPU over 200 ms */
        clock_t c0 = clock();
        nanosleep(&(struct timespec){ 0, 200 * 1000 * 1000 }, NULL);
        double busy = (double)(clock() - c0) / CLOCKS_PER_SEC;
        CHECK(busy < 0.05, "%d idle threads used %.3f s of CPU in 0.2 s", n, busy);
        fl_pool_destroy(pool);
        printf("  %d threads: 206 runs, split and chunks exact, idle CPU %.3f s\n", n, busy);
    }
    fl_pool_destroy(NULL);
    int64_t b, e, total = 0;
    for (int i = 0; i < 7; i++) {
        fl_split_range(5, i, 7, &b, &e);
        total += e - b;
        CHECK(e - b <= 1, "split of 5 over 7");
    }
    CHECK(total == 5, "split covers 5");
    return check_summary("test-cpu-pool");
}
