/* model-repack.c: eng_model_repack, the load-time rebuild of matmul
 * weights in the CPU kernels' faster layouts (backend/cpu/repack.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/cpu/repack.h"
#include "backend/cpu/threadpool.h"
#include "base/host-memory.h"
#include "backend/cpu/cpu-backend.h"
#include "model/model.h"
#include "gguf/tensor-names.h"
#include "gguf/tensor-types.h"

/* Tensors that only products read: block projections, the routed experts'
 * gate/up/down stacks and the output matrix. Left out on purpose:
 * token_embd (row lookups, and the output matrix when tied), routers,
 * norms, biases, fused gate_up experts (sliced by rows). */
static bool matmul_only(const char *name)
{
    if (!fl_tensor_is_weight(name))
        return false;
    const enum fl_tensor_role r = fl_tensor_role(name);
    const int part = fl_tensor_expert_part(name, NULL);
    return r == FL_TENSOR_PROJECTION || r == FL_TENSOR_OUTPUT ||
           part == FL_EXPERT_GATE || part == FL_EXPERT_UP || part == FL_EXPERT_DOWN;
}

struct repack_job {
    const struct eng_tensor *t;
    void *dst;
    uint32_t layout;
    int64_t n_groups; /* of 8 rows, over all of the tensor's matrices */
};

static void repack_run(void *arg, int ith, int nth)
{
    const struct repack_job *j = arg;
    int64_t g0, g1;
    fl_split_range(j->n_groups, ith, nth, &g0, &g1);
    if (g1 <= g0)
        return;
    const int64_t n_in = j->t->ne[0];
    const size_t src_row = fl_row_size(j->t->type, n_in);
    const size_t dst_row = fl_row_size(j->layout, n_in);
    (void)fl_repack(j->t->type, j->t->data + (size_t)(8 * g0) * src_row,
                    (char *)j->dst + (size_t)(8 * g0) * dst_row, n_in, 8 * (g1 - g0));
}

/* The layout a tensor would be rebuilt in, or -1 (see eng_model_repack). */
static int target_layout(const struct eng_tensor *t, bool (*want)(void *, const struct eng_tensor *),
                         void *ctx)
{
    const int layout = fl_repack_layout(t->type, t->ne[0], t->ne[1]);
    if (layout < 0 || !matmul_only(t->name) || (want && !want(ctx, t)))
        return -1;
    return layout;
}

static size_t repacked_bytes(const struct eng_tensor *t, int layout)
{
    /* rows of all matrices together: experts and heads are stacked rows */
    const size_t b = fl_repack_size((uint32_t)layout, t->ne[0], t->ne[1] * t->ne[2] * t->ne[3]);
    return (b + 63) & ~(size_t)63;
}

/* All copies live in one mapping, reserved up front and filled tensor by
 * tensor (memory is taken as it is written), in huge pages as the pager's
 * RAM tier is: a decode streams every weight once per token, and with 4 KiB
 * pages the page walks show. One mapping rather than one per tensor: each
 * tensor's last huge page would otherwise be mostly waste (168 tensors of
 * a 4 GiB model: +280 MiB peak RSS with per-tensor buffers). */
#define HUGE_PAGE ((size_t)2 << 20)

int64_t eng_model_repack(struct eng_model *m, struct fl_pool *pool,
                         bool (*want)(void *ctx, const struct eng_tensor *t),
                         void (*done)(void *ctx, const struct eng_tensor *t, size_t done_bytes,
                                      size_t total_bytes),
                         void *ctx)
{
    if (m->repack_arena)
        return 0;
    size_t total = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const int layout = target_layout(&m->tensors[i], want, ctx);
        if (layout >= 0)
            total += repacked_bytes(&m->tensors[i], layout);
    }
    if (total == 0)
        return 0;
    const size_t wanted = total;
    total = (total + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    void *arena = mmap(NULL, total, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (arena == MAP_FAILED)
        return 0; /* everything keeps the file layout */
    (void)madvise(arena, total, MADV_HUGEPAGE); /* advice only */
    m->repack_arena = arena;
    m->repack_arena_size = total;
    size_t used = 0;
    int64_t n_done = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        struct eng_tensor *t = &m->tensors[i];
        const int layout = target_layout(t, want, ctx);
        if (layout < 0)
            continue;
        const size_t bytes = repacked_bytes(t, layout);
        /* The copy exists beside the region's until done() frees that: a
         * tensor that would leave less than its own size free keeps the
         * file layout (an optimisation must not invite the OOM killer). */
        const uint64_t avail = fl_mem_available();
        if (avail && avail < 2 * (uint64_t)bytes)
            continue;
        void *dst = (char *)arena + used;
        used += bytes;
        struct repack_job j = { .t = t, .dst = dst, .layout = (uint32_t)layout,
                                .n_groups = t->ne[1] * t->ne[2] * t->ne[3] / 8 };
        fl_pool_run(pool, repack_run, &j);
        if (done)
            done(ctx, t, used, wanted);
        t->data = dst;
        t->type = (uint32_t)layout;
        n_done++;
    }
    return n_done;
}
