/* model-repack.c: eng_model_repack, the load-time rebuild of matmul
 * weights in the CPU kernels' faster layouts (engine/cpu/repack.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/cpu/repack.h"
#include "engine/cpu/threadpool.h"
#include "engine/host-memory.h"
#include "engine/model.h"
#include "engine/tensor-types.h"

/* Tensors that only eng_matmul / fl_matmul_rows read (by name suffix).
 * Left out on purpose: token_embd (row lookups, and the output matrix when
 * tied), routers, norms, biases, fused gate_up experts (sliced by rows). */
static const char *const k_matmul_only[] = {
    "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
    "attn_q_a.weight", "attn_q_b.weight", "attn_kv_a_mqa.weight", "attn_k_b.weight",
    "attn_v_b.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",
    "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight",
    "ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight",
};

static bool matmul_only(const char *name)
{
    if (strcmp(name, "output.weight") == 0)
        return true;
    const size_t n = strlen(name);
    for (size_t i = 0; i < sizeof(k_matmul_only) / sizeof(k_matmul_only[0]); i++) {
        const size_t k = strlen(k_matmul_only[i]);
        if (n > k && name[n - k - 1] == '.' && strcmp(name + n - k, k_matmul_only[i]) == 0)
            return true;
    }
    return false;
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

/* Huge pages, as the pager gives its RAM tier: a decode streams every
 * weight once per token, and with 4 KiB pages the page walks show. */
#define HUGE_PAGE ((size_t)2 << 20)
static void *alloc_weights(size_t bytes)
{
    const size_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 64;
    void *p = aligned_alloc(align, (bytes + align - 1) / align * align);
    if (p && align == HUGE_PAGE)
        (void)madvise(p, (bytes + align - 1) / align * align, MADV_HUGEPAGE); /* advice only */
    return p;
}

int64_t eng_model_repack(struct eng_model *m, struct fl_pool *pool,
                         bool (*want)(void *ctx, const struct eng_tensor *t),
                         void (*done)(void *ctx, const struct eng_tensor *t), void *ctx)
{
    int64_t n_done = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        struct eng_tensor *t = &m->tensors[i];
        /* rows of all matrices together: experts and heads are stacked rows */
        const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
        const int layout = fl_repack_layout(t->type, t->ne[0], t->ne[1]);
        if (layout < 0 || t->repacked || !matmul_only(t->name) || (want && !want(ctx, t)))
            continue;
        const size_t bytes = fl_repack_size((uint32_t)layout, t->ne[0], rows);
        /* The copy exists beside the region's until done() frees that: a
         * tensor that would leave less than its own size free keeps the
         * file layout (an optimisation must not invite the OOM killer). */
        const uint64_t avail = fl_mem_available();
        if (avail && avail < 2 * (uint64_t)bytes)
            continue;
        void *dst = alloc_weights(bytes);
        if (!dst)
            continue;
        struct repack_job j = { .t = t, .dst = dst, .layout = (uint32_t)layout, .n_groups = rows / 8 };
        fl_pool_run(pool, repack_run, &j);
        if (done)
            done(ctx, t);
        t->repacked = dst;
        t->data = dst;
        t->type = (uint32_t)layout;
        n_done++;
    }
    return n_done;
}
