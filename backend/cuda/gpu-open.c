/* gpu-open.c: the GPU backend's device, uploads, expert cache, page-locked
 * host experts and counters (backend/cuda/gpu.h). */
#include "backend/cuda/gpu-impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/units.h"
#include "gguf/gguf.h"
#include "gguf/tensor-names.h"
#include "gguf/tensor-types.h"
#include "plan/placement.h"

bool eng_gpu_detect(uint64_t *vram_free, const char **why)
{
    *vram_free = 0;
    struct fl_cuda_info info;
    if (fl_cuda_available() < 1 || fl_cuda_device_info(0, &info, NULL)) {
        *why = "no CUDA device";
        return false;
    }
    *why = NULL;
    *vram_free = info.free_bytes;
    return true;
}

/* VRAM left to cuBLAS, the GEMM's dequantized tiles and the activations
 * when the expert cache is sized. */
#define VRAM_RESERVE ((size_t)768 << 20)

int gpu_dbuf(struct eng_gpu *g, int which, size_t bytes, void **out, struct fl_err *err)
{
    struct dbuf *b = &g->buf[which];
    if (b->cap < bytes) {
        /* queued kernels may still read the old buffer */
        int rc = b->p ? fl_cuda_sync(g->cu, err) : 0;
        if (rc)
            return rc;
        fl_cuda_free(g->cu, b->p);
        b->p = NULL;
        b->cap = 0;
        size_t want = bytes + bytes / 2 + 256;
        rc = fl_cuda_malloc(g->cu, &b->p, want, err);
        if (rc)
            return rc;
        b->cap = want;
    }
    *out = b->p;
    return 0;
}

/* The GPU is not used again after its first error; eng_gpu_error says it. */
int gpu_fail(struct eng_gpu *g, int rc, const struct fl_err *err)
{
    if (!g->failed) {
        g->failed = rc;
        g->err = *err;
    }
    return rc;
}

bool gpu_kernel_shape_ok(uint32_t type, int64_t n_in)
{
    if (!fl_cuda_type_supported(type))
        return false;
    const int64_t blk = fl_type_traits(type)->blck_size < 32 ? 32 : fl_type_traits(type)->blck_size;
    return n_in > 0 && n_in % blk == 0;
}

size_t gpu_expert_bytes(const struct eng_tensor *t)
{
    return (size_t)(t->nbytes / (uint64_t)t->ne[t->n_dims - 1]);
}

void *gpu_device_of(const struct eng_gpu *g, const struct eng_tensor *w)
{
    const struct eng_model *m = g->m;
    const uintptr_t a = (uintptr_t)w, lo = (uintptr_t)m->tensors;
    if (a < lo || a >= (uintptr_t)(m->tensors + m->n_tensors) || (a - lo) % sizeof(*w))
        return NULL; /* a view an architecture built itself: not uploaded */
    return g->d_tensor[(a - lo) / sizeof(*w)];
}

static int upload_one(struct eng_gpu *g, const struct eng_tensor *t, struct fl_err *err)
{
    void *d = NULL;
    int rc = fl_cuda_malloc(g->cu, &d, t->nbytes, err);
    if (!rc)
        rc = fl_cuda_upload(g->cu, d, t->data, t->nbytes, err);
    if (rc) {
        fl_cuda_free(g->cu, d);
        char why[sizeof(err->msg)];
        memcpy(why, err->msg, sizeof(why)); /* err is the destination too */
        return fl_err_set(err, rc, "uploading %s to the GPU: %s", t->name, why);
    }
    g->d_tensor[t - g->m->tensors] = d;
    g->up_bytes += t->nbytes;
    g->n_up++;
    return 0;
}

/* Every gpu-tier matrix the kernels take goes to VRAM once, within the
 * budget, and so do the F32 vectors (norms) and F32 tables no product
 * reads (Gated DeltaNet's conv kernel, [d_conv][width]) the device pass
 * reads; a product of such a table would fail the kernels' shape check. */
static int upload_tier(struct eng_gpu *g, const struct gguf_file *gf,
                       const struct placement_plan *plan, struct fl_err *err)
{
    for (int64_t i = 0; i < gguf_n_tensors(gf); i++) {
        if (placement_tier(plan, i) != PL_TIER_GPU)
            continue;
        const struct eng_tensor *t = eng_model_find(g->m, gguf_tensor(gf, i)->name);
        const bool vec = t && t->type == FL_TYPE_F32 &&
                         (t->n_dims == 1 || (t->n_dims == 2 && !gpu_kernel_shape_ok(t->type, t->ne[0])));
        if (!t || (t->n_dims < 2 && !vec))
            continue;
        bool fits = g->up_bytes + t->nbytes <= g->up_limit;
        if ((!vec && !gpu_kernel_shape_ok(t->type, t->ne[0])) || !fits) {
            g->n_kept++;
            if (g->o.verbose && g->o.log)
                fprintf(g->o.log, "faultline: gpu: %s (%s) stays on the host: %s\n", t->name,
                        fl_type_name(t->type), fits ? "no kernel for it" : "over the VRAM budget");
            continue;
        }
        int rc = upload_one(g, t, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* One expert's bytes across the layer's expert tensors (matrices and
 * biases: a slot packs them all), the largest over the layers with experts
 * on the host: the cache's slot size. */
static size_t host_slot_bytes(const struct eng_gpu *g)
{
    const struct eng_model *m = g->m;
    const int64_t n_layer = m->hp.n_layer;
    size_t best = 0;
    size_t *per = calloc((size_t)(n_layer > 0 ? n_layer : 1), sizeof(size_t));
    bool *host = calloc((size_t)(n_layer > 0 ? n_layer : 1), sizeof(bool));
    for (int64_t i = 0; per && host && i < m->n_tensors; i++) {
        const struct eng_tensor *t = &m->tensors[i];
        const int il = fl_tensor_block(t->name);
        if ((t->n_dims != 3 && t->n_dims != 2) || il < 0 || il >= n_layer ||
            !fl_tensor_is_expert(t->name) || t->ne[t->n_dims - 1] < 1)
            continue;
        per[il] += gpu_expert_bytes(t);
        host[il] = host[il] || (t->n_dims == 3 && !g->d_tensor[i]);
    }
    for (int64_t il = 0; per && host && il < n_layer; il++)
        if (host[il] && per[il] > best)
            best = per[il];
    free(per);
    free(host);
    /* slots lie back to back: keep each one's start aligned for the kernels */
    return (best + 255) & ~(size_t)255;
}

static int make_cache(struct eng_gpu *g, struct fl_err *err)
{
    const struct eng_hparams *hp = &g->m->hp;
    g->slot_bytes = host_slot_bytes(g);
    if (g->o.experts == ENG_GPU_EXPERTS_NONE || hp->n_expert < 1 || !g->slot_bytes)
        return 0;
    const bool unified = g->o.experts == ENG_GPU_EXPERTS_UNIFIED;
    size_t budget = SIZE_MAX; /* the cache caps itself at what is free */
    const uint64_t used = g->up_bytes + g->o.kv_bytes;
    if (g->o.vram_budget)
        budget = g->o.vram_budget > used ? (size_t)(g->o.vram_budget - used) : 0;
    /* lfu-next as the pager's (pager/policy.h): replayed on routing traces
     * it keeps its hits when many sequences step together, where lfu-decay
     * on a clock of acquires falls to LRU's 0 % (docs/prefetch.md) */
    const int lfu_next_used =
        g->o.lru_cache ? 0 : (int)(hp->n_expert_used > 0 ? hp->n_expert_used : 1);
    struct fl_cuda_xcache_opts xo = {
        .mode = unified ? FL_CUDA_XUNIFIED : FL_CUDA_XCOPY, .slot_bytes = g->slot_bytes,
        .lfu_next_used = lfu_next_used,
        .budget = budget, .reserve = VRAM_RESERVE + (size_t)g->o.kv_bytes,
        .n_layer = (int)hp->n_layer,
        .n_expert = (int)hp->n_expert,
    };
    struct fl_err e2;
    int rc = fl_cuda_xcache_create(g->cu, &xo, &g->xc, &e2);
    if (rc == -ENOMEM && !unified) {
        /* no slot fits: host experts are computed on the CPU, said once */
        if (g->o.log)
            fprintf(g->o.log, "faultline: gpu: %s; experts on host tiers run on the CPU\n", e2.msg);
        return 0;
    }
    return rc ? fl_err_set(err, rc, "%s", e2.msg) : 0;
}

struct page_span {
    uintptr_t a, b;
};

static int by_start(const void *x, const void *y)
{
    const struct page_span *p = x, *q = y;
    return p->a < q->a ? -1 : p->a > q->a;
}

static bool pinnable(const struct eng_gpu *g, const struct placement_plan *plan, int64_t i)
{
    const struct eng_tensor *t = &g->m->tensors[i];
    return (t->n_dims == 3 || t->n_dims == 2) && !g->d_tensor[i] && fl_tensor_is_expert(t->name) &&
           placement_tier(plan, t->index) == PL_TIER_RAM;
}

/* The host experts the pager keeps resident (RAM tier) are page-locked
 * where they lie, so a cache miss is one DMA from them instead of a CPU
 * copy into staging and a DMA (the CPU copy was most of a miss's time).
 * Disk-tier experts come and go with the pager's budget: they keep the
 * staging path. Neighbouring tensors share pages, so their spans are
 * merged before registering. A refusal (no rights, too little lockable
 * memory) is not an error: the staging path serves every expert then. */
static void pin_ram_experts(struct eng_gpu *g, const struct placement_plan *plan)
{
    const struct eng_model *m = g->m;
    const uintptr_t pg = 4096;
    const size_t n_t = (size_t)(m->n_tensors ? m->n_tensors : 1);
    struct page_span *sp = calloc(n_t, sizeof(*sp));
    g->t_pinned = calloc(n_t, sizeof(bool));
    g->pins = calloc(n_t, sizeof(void *));
    if (!sp || !g->t_pinned || !g->pins) {
        free(sp);
        return;
    }
    int n = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const struct eng_tensor *t = &m->tensors[i];
        if (pinnable(g, plan, i))
            sp[n++] = (struct page_span){ (uintptr_t)t->data & ~(pg - 1),
                                          ((uintptr_t)t->data + t->nbytes + pg - 1) & ~(pg - 1) };
    }
    qsort(sp, (size_t)n, sizeof(*sp), by_start);
    int k = 0;
    for (int i = 0; i < n; i++) /* merge overlapping and touching spans */
        if (k && sp[i].a <= sp[k - 1].b)
            sp[k - 1].b = sp[i].b > sp[k - 1].b ? sp[i].b : sp[k - 1].b;
        else
            sp[k++] = sp[i];
    struct fl_err err;
    for (int i = 0; i < k; i++) {
        if (fl_cuda_host_register((void *)sp[i].a, sp[i].b - sp[i].a, &err)) {
            if (g->o.log)
                fprintf(g->o.log, "faultline: gpu: RAM-tier experts not page-locked (%s); "
                        "their copies go through staging\n", err.msg);
            break;
        }
        g->pins[g->n_pins++] = (void *)sp[i].a;
        g->pinned_bytes += sp[i].b - sp[i].a;
    }
    for (int64_t i = 0; i < m->n_tensors; i++) { /* tensors wholly inside a registered span */
        if (!pinnable(g, plan, i))
            continue;
        const uintptr_t a = (uintptr_t)m->tensors[i].data, b = a + m->tensors[i].nbytes;
        for (int j = 0; j < g->n_pins; j++)
            g->t_pinned[i] |= a >= sp[j].a && b <= sp[j].b;
    }
    free(sp);
}

/* Every tensor the pass reads is in VRAM, save the experts (they reach the
 * GPU through the expert cache, or run on the CPU), the embedding (its rows
 * are taken on the host) and the output matrix (the head runs on the host
 * when it stayed there): the pass can run on the device. */
static bool trunk_in_vram(const struct eng_gpu *g)
{
    const struct eng_model *m = g->m;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const struct eng_tensor *t = &m->tensors[i];
        if (t->in_pass && !g->d_tensor[i] && t != m->embd && t != m->output &&
            !fl_tensor_is_expert(t->name))
            return false;
    }
    return true;
}

int eng_gpu_open(const struct eng_model *m, const struct gguf_file *gf,
                 const struct placement_plan *plan, const struct eng_gpu_options *o,
                 struct eng_gpu **out, struct fl_err *err)
{
    if (fl_cuda_available() < 1)
        return fl_err_set(err, -ENODEV, "no GPU: no CUDA device");
    struct eng_gpu *g = calloc(1, sizeof(*g));
    if (!g)
        return fl_err_set(err, -ENOMEM, "out of memory");
    g->m = m;
    g->o = *o;
    if (g->o.min_batch <= 0)
        g->o.min_batch = ENG_GPU_MIN_BATCH_DEFAULT;
    int rc = fl_cuda_open(o->device, &g->cu, err);
    struct fl_cuda_info info;
    if (!rc)
        rc = fl_cuda_device_info(o->device, &info, err);
    /* what does not fit stays on the host rather than failing the session */
    /* the device pass's KV cache comes out of the budget (or of what is free) */
    const uint64_t keep = VRAM_RESERVE + o->kv_bytes;
    if (!rc && o->vram_budget)
        g->up_limit = o->vram_budget > o->kv_bytes ? o->vram_budget - o->kv_bytes : 0;
    else if (!rc && info.free_bytes > keep)
        g->up_limit = info.free_bytes - keep;
    if (!rc && !(g->d_tensor = calloc((size_t)(m->n_tensors ? m->n_tensors : 1), sizeof(void *))))
        rc = fl_err_set(err, -ENOMEM, "out of memory");
    if (!rc)
        rc = upload_tier(g, gf, plan, err);
    if (!rc)
        rc = make_cache(g, err);
    if (!rc && g->xc && g->o.experts != ENG_GPU_EXPERTS_UNIFIED)
        pin_ram_experts(g, plan);
    if (!rc) {
        g->trunk_in_vram = trunk_in_vram(g);
        gpu_offload_init(g);
    }
    if (rc) {
        eng_gpu_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

void eng_gpu_close(struct eng_gpu *g)
{
    if (!g)
        return;
    fl_cuda_xcache_destroy(g->xc); /* waits for the copies out of pinned ranges */
    gpu_pass_free(g);
    for (int i = 0; i < g->n_pins; i++)
        fl_cuda_host_unregister(g->pins[i]);
    free(g->pins);
    free(g->t_pinned);
    for (int i = 0; i < B_COUNT; i++)
        fl_cuda_free(g->cu, g->buf[i].p);
    for (int64_t i = 0; g->d_tensor && i < g->m->n_tensors; i++)
        fl_cuda_free(g->cu, g->d_tensor[i]);
    free(g->d_tensor);
    fl_cuda_close(g->cu);
    free(g);
}

int eng_gpu_error(const struct eng_gpu *g, struct fl_err *err)
{
    if (!g || !g->failed)
        return 0;
    if (err)
        *err = g->err;
    return g->failed;
}

uint64_t eng_gpu_passes(const struct eng_gpu *g)
{
    return g ? g->n_pass : 0;
}

uint64_t eng_gpu_moe_on_cpu(const struct eng_gpu *g)
{
    return g ? g->n_moe_cpu : 0;
}

bool eng_gpu_holds_expert(void *gpu, int layer, int expert)
{
    const struct eng_gpu *g = gpu;
    return g && g->xc && g->o.experts != ENG_GPU_EXPERTS_CPU && !g->failed &&
           fl_cuda_xcache_cached(g->xc, layer, expert);
}

uint64_t eng_gpu_ops(const struct eng_gpu *g)
{
    return g ? g->n_pass + g->n_matmul + g->n_moe_vram + g->n_moe_cache : 0;
}
