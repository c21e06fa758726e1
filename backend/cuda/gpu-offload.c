/* gpu-offload.c: the CUDA backend inside the forward pass (gpu-offload.h).
 *
 * The first half (flag names, the offload rule, discovery) is plain C that
 * every build has and tests without a device. The second half runs only
 * with FL_HAVE_CUDA; a build without it has no device, so eng_gpu_open
 * says -ENODEV and nothing else is ever reached. */
#include "backend/cuda/gpu-offload.h"
#include "backend/cuda/gpu-impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch2-ops.h"
#include "backend/cuda/cuda-backend.h"
#include "backend/cuda/expert-cache.h"
#include "gguf/gguf.h"
#include "gguf/tensor-types.h"
#include "base/units.h"
#include "plan/placement.h"

static const char *const mode_names[] = { "none", "copy", "unified", "cpu" };

int eng_gpu_experts_parse(const char *v, enum eng_gpu_experts *out)
{
    for (int i = ENG_GPU_EXPERTS_COPY; v && i <= ENG_GPU_EXPERTS_CPU; i++)
        if (!strcmp(v, mode_names[i])) {
            *out = (enum eng_gpu_experts)i;
            return 0;
        }
    return -EINVAL;
}

const char *eng_gpu_experts_name(enum eng_gpu_experts m)
{
    return (unsigned)m <= ENG_GPU_EXPERTS_CPU ? mode_names[m] : "?";
}

enum eng_gpu_where eng_gpu_decide(enum eng_gpu_experts mode, bool kernels_ok, bool in_vram,
                                  bool have_cache, int64_t n_tok, int min_batch)
{
    if (!kernels_ok)
        return ENG_GPU_RUN_CPU;
    if (in_vram)
        return ENG_GPU_RUN_VRAM;
    if (!have_cache || mode == ENG_GPU_EXPERTS_NONE)
        return ENG_GPU_RUN_CPU;
    /* llama.cpp's offload rule: a big enough batch pays for the copies */
    if (n_tok >= (min_batch > 0 ? min_batch : ENG_GPU_MIN_BATCH_DEFAULT))
        return ENG_GPU_RUN_CACHE;
    return mode == ENG_GPU_EXPERTS_CPU ? ENG_GPU_RUN_CPU : ENG_GPU_RUN_CACHE;
}

bool eng_gpu_detect(uint64_t *vram_free, const char **why)
{
    *vram_free = 0;
#ifndef FL_HAVE_CUDA
    *why = "built without CUDA";
    return false;
#else
    struct fl_cuda_info info;
    if (fl_cuda_available() < 1 || fl_cuda_device_info(0, &info, NULL)) {
        *why = "no CUDA device";
        return false;
    }
    *why = NULL;
    *vram_free = info.free_bytes;
    return true;
#endif
}

#ifndef FL_HAVE_CUDA

int eng_gpu_open(const struct eng_model *m, const struct gguf_file *g,
                 const struct placement_plan *plan, const struct eng_gpu_options *o,
                 struct eng_gpu **out, struct fl_err *err)
{
    (void)m, (void)g, (void)plan, (void)o, (void)out;
    return fl_err_set(err, -ENODEV, "no GPU: faultline was built without CUDA");
}

/* Nothing below can be reached: no eng_gpu exists in this build. */
void eng_gpu_close(struct eng_gpu *gpu) { (void)gpu; }

bool eng_gpu_matmul(struct eng_ctx *c, const struct eng_tensor *w, int expert, const float *x,
                    int64_t n_tok, float *y)
{
    (void)c, (void)w, (void)expert, (void)x, (void)n_tok, (void)y;
    return false;
}

int eng_gpu_moe(struct eng_ctx *c, int layer, const float *x, int64_t n_tok,
                const struct eng_expert_lists *L, const float *weights, int64_t k,
                const struct eng_moe *e, float *out, struct fl_err *err)
{
    (void)c, (void)layer, (void)x, (void)n_tok, (void)L, (void)weights, (void)k, (void)e;
    (void)out, (void)err;
    return 0;
}

int eng_gpu_error(const struct eng_gpu *gpu, struct fl_err *err)
{
    (void)gpu, (void)err;
    return 0;
}

void eng_gpu_print_stats(const struct eng_gpu *gpu, FILE *out) { (void)gpu, (void)out; }

uint64_t eng_gpu_ops(const struct eng_gpu *gpu)
{
    (void)gpu;
    return 0;
}

uint64_t eng_gpu_passes(const struct eng_gpu *gpu)
{
    (void)gpu;
    return 0;
}

uint64_t eng_gpu_moe_on_cpu(const struct eng_gpu *gpu)
{
    (void)gpu;
    return 0;
}

bool eng_gpu_holds_expert(void *gpu, int layer, int expert)
{
    (void)gpu, (void)layer, (void)expert;
    return false;
}

#else /* FL_HAVE_CUDA */

/* VRAM left to cuBLAS, the GEMM's dequantized tiles and the activations
 * when the expert cache is sized. */
#define VRAM_RESERVE ((size_t)768 << 20)

static int dbuf_get(struct eng_gpu *g, int which, size_t bytes, void **out, struct fl_err *err)
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

/* Widths the kernels take: a whole number of 32-value units and blocks. */
static bool kernel_shape_ok(uint32_t type, int64_t n_in)
{
    if (!fl_cuda_type_supported(type))
        return false;
    const int64_t blk = fl_type_traits(type)->blck_size < 32 ? 32 : fl_type_traits(type)->blck_size;
    return n_in > 0 && n_in % blk == 0;
}

/* One expert's share of an expert tensor: a 2-D slice of a 3-D matrix, or
 * one row of a 2-D bias [n_out, n_expert]. */
static size_t expert_bytes(const struct eng_tensor *t)
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
 * budget, and so do the F32 vectors (norms) the device pass reads. */
static int upload_tier(struct eng_gpu *g, const struct gguf_file *gf,
                       const struct placement_plan *plan, struct fl_err *err)
{
    for (int64_t i = 0; i < gguf_n_tensors(gf); i++) {
        if (placement_tier(plan, i) != PL_TIER_GPU)
            continue;
        const struct eng_tensor *t = eng_model_find(g->m, gguf_tensor(gf, i)->name);
        const bool vec = t && t->n_dims == 1 && t->type == FL_TYPE_F32;
        if (!t || (t->n_dims < 2 && !vec))
            continue;
        bool fits = g->up_bytes + t->nbytes <= g->up_limit;
        if ((!vec && !kernel_shape_ok(t->type, t->ne[0])) || !fits) {
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
        const int il = placement_layer_of(t->name);
        if ((t->n_dims != 3 && t->n_dims != 2) || il < 0 || il >= n_layer ||
            !placement_is_expert(t->name) || t->ne[t->n_dims - 1] < 1)
            continue;
        per[il] += expert_bytes(t);
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
    /* lfu-decay as the pager's (pager/policy.c): a use's weight halves every
     * 8 tokens' worth of acquires. Replayed on a routing trace it hits
     * 70 % where LRU hits 52 % with a quarter of the experts (docs/cuda.md) */
    const double half_life = g->o.lru_cache ? 0.0
        : 8.0 * (double)hp->n_layer * (double)(hp->n_expert_used > 0 ? hp->n_expert_used : 1);
    struct fl_cuda_xcache_opts xo = {
        .mode = unified ? FL_CUDA_XUNIFIED : FL_CUDA_XCOPY, .slot_bytes = g->slot_bytes,
        .lfu_half_life = half_life,
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
    return (t->n_dims == 3 || t->n_dims == 2) && !g->d_tensor[i] && placement_is_expert(t->name) &&
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
    gpu_forward_free(g);
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

static int gpu_matmul(struct eng_gpu *g, const void *d_w, uint32_t type, int64_t n_in,
                      int64_t n_out, const float *d_x, int64_t n_tok, float *d_y,
                      struct fl_err *err)
{
    return fl_cuda_matmul(g->cu, d_w, type, n_in, n_out, d_x, n_tok, d_y, GPU_GEMM_MIN_TOK, err);
}

bool eng_gpu_matmul(struct eng_ctx *c, const struct eng_tensor *w, int expert, const float *x,
                    int64_t n_tok, float *y)
{
    struct eng_gpu *g = c->gpu;
    const uint8_t *d_w = g->failed ? NULL : gpu_device_of(g, w);
    if (!d_w)
        return false;
    const int64_t n_in = w->ne[0], n_out = w->ne[1];
    if (expert >= 0)
        d_w += (size_t)expert * (size_t)n_out * fl_row_size(w->type, n_in);
    struct fl_err err;
    void *d_x, *d_y;
    int rc = dbuf_get(g, B_X, sizeof(float) * (size_t)(n_tok * n_in), &d_x, &err);
    if (!rc)
        rc = dbuf_get(g, B_Y, sizeof(float) * (size_t)(n_tok * n_out), &d_y, &err);
    if (!rc)
        rc = fl_cuda_upload(g->cu, d_x, x, sizeof(float) * (size_t)(n_tok * n_in), &err);
    if (!rc)
        rc = gpu_matmul(g, d_w, w->type, n_in, n_out, d_x, n_tok, d_y, &err);
    if (!rc)
        rc = fl_cuda_download(g->cu, y, d_y, sizeof(float) * (size_t)(n_tok * n_out), &err);
    if (rc) {
        gpu_fail(g, rc, &err);
        return false; /* the CPU computes it; the forward pass then reports the error */
    }
    g->n_matmul++;
    return true;
}

/* --- MoE -------------------------------------------------------------------------- */

/* Each bias NULL, or F32 [n_out, n_expert]: added on the device. */
static bool bias_ok(const struct eng_tensor *b, const struct eng_tensor *w)
{
    return !b || (b->type == FL_TYPE_F32 && b->n_dims == 2 && b->ne[0] == w->ne[1] &&
                  b->ne[1] == w->ne[2] && (b->ne[0] * 4) % 16 == 0);
}

/* The kernels cover SwiGLU and gpt-oss's SwiGLU-OAI experts, with or
 * without biases, whose slices keep the 16-byte alignment the block loads
 * expect. */
static bool experts_supported(const struct eng_moe *e)
{
    if (e->act && e->act != eng_act_swiglu && e->act != arch2_act_swiglu_oai)
        return false;
    const int64_t n_ff = e->gate->ne[1];
    if (e->up->ne[1] != n_ff || e->down->ne[0] != n_ff || e->up->ne[0] != e->gate->ne[0] ||
        e->gate->n_dims != 3 || e->up->n_dims != 3 || e->down->n_dims != 3)
        return false;
    if (!bias_ok(e->gate_b, e->gate) || !bias_ok(e->up_b, e->up) || !bias_ok(e->down_b, e->down))
        return false;
    return kernel_shape_ok(e->gate->type, e->gate->ne[0]) &&
           kernel_shape_ok(e->up->type, e->up->ne[0]) &&
           kernel_shape_ok(e->down->type, e->down->ne[0]) && expert_bytes(e->gate) % 16 == 0 &&
           expert_bytes(e->up) % 16 == 0 && expert_bytes(e->down) % 16 == 0;
}

/* Device buffers of one MoE call. */
struct gpu_moe {
    struct eng_gpu *g;
    const struct eng_moe *e;
    const struct eng_expert_lists *L;
    int64_t n_in, n_ff, n_embd, n_tok, pairs;
    float *d_x, *d_xg, *d_g, *d_u, *d_d, *d_slots, *d_w;
    int32_t *d_tok, *d_slot;
    bool lists_up;   /* d_tok/d_slot hold L's pairs (only the one-by-one path reads them) */
};

/* A decode step (one token: one pair per expert) with few enough experts
 * runs them as groups: four launches for all, instead of six per expert. */
static bool grouped(const struct gpu_moe *s)
{
    return s->n_tok == 1 && s->L->n_order <= FL_CUDA_GROUP_MAX;
}

/* The layer's working buffers; its input and routing weights are already
 * on the device (s->d_x, s->d_w). */
static int moe_buffers(struct gpu_moe *s, int64_t n_tok, int64_t k,
                       const struct eng_expert_lists *L, struct fl_err *err)
{
    struct eng_gpu *g = s->g;
    const size_t f = sizeof(float), pairs = (size_t)(n_tok * k);
    int rc = dbuf_get(g, B_XG, f * (size_t)(n_tok * s->n_in), (void **)&s->d_xg, err);
    if (!rc) /* pairs rows: a group's experts each have their own */
        rc = dbuf_get(g, B_G, f * pairs * (size_t)s->n_ff, (void **)&s->d_g, err);
    if (!rc)
        rc = dbuf_get(g, B_U, f * pairs * (size_t)s->n_ff, (void **)&s->d_u, err);
    if (!rc)
        rc = dbuf_get(g, B_D, f * (size_t)(n_tok * s->n_embd), (void **)&s->d_d, err);
    if (!rc)
        rc = dbuf_get(g, B_SLOTS, f * pairs * (size_t)s->n_embd, (void **)&s->d_slots, err);
    if (!rc)
        rc = dbuf_get(g, B_TOK, sizeof(int32_t) * pairs, (void **)&s->d_tok, err);
    if (!rc)
        rc = dbuf_get(g, B_SLOT, sizeof(int32_t) * pairs, (void **)&s->d_slot, err);
    s->L = L;
    s->n_tok = n_tok;
    s->pairs = (int64_t)pairs;
    return rc;
}

static int lists_up(struct gpu_moe *s, struct fl_err *err)
{
    const size_t bytes = sizeof(int32_t) * (size_t)s->pairs;
    int rc = s->lists_up ? 0 : fl_cuda_upload(s->g->cu, s->d_tok, s->L->tok, bytes, err);
    if (!rc && !s->lists_up)
        rc = fl_cuda_upload(s->g->cu, s->d_slot, s->L->slot, bytes, err);
    s->lists_up = !rc;
    return rc;
}

/* One expert on the device: gate, up and down matrices, and their biases
 * (NULL: none). */
struct xdev {
    const uint8_t *w[3];
    const float *b[3];
};

/* The expert tensors in the order a cache slot packs them: gate, up, down,
 * gate bias, up bias, down bias (NULL entries are skipped). */
static void expert_roles(const struct eng_moe *e, const struct eng_tensor *t[6])
{
    t[0] = e->gate, t[1] = e->up, t[2] = e->down;
    t[3] = e->gate_b, t[4] = e->up_b, t[5] = e->down_b;
}

static void set_role(struct xdev *x, int role, const uint8_t *d)
{
    if (role < 3)
        x->w[role] = d;
    else
        x->b[role - 3] = (const float *)d;
}

/* Expert ex of tensors that live in VRAM. */
static struct xdev vram_expert(const struct gpu_moe *s, int64_t ex)
{
    const struct eng_tensor *t[6];
    struct xdev x = { 0 };
    expert_roles(s->e, t);
    for (int i = 0; i < 6; i++)
        if (t[i])
            set_role(&x, i, (const uint8_t *)gpu_device_of(s->g, t[i]) + ex * expert_bytes(t[i]));
    return x;
}

/* The expert packed in a cache slot at `base`. */
static struct xdev slot_expert(const struct gpu_moe *s, const uint8_t *base)
{
    const struct eng_tensor *t[6];
    struct xdev x = { 0 };
    expert_roles(s->e, t);
    for (int i = 0; i < 6; i++)
        if (t[i]) {
            set_role(&x, i, base);
            base += expert_bytes(t[i]);
        }
    return x;
}

/* The experts' activation: SwiGLU, or gpt-oss's SwiGLU-OAI. */
static int activate(const struct gpu_moe *s, float *d_g, const float *d_u, int64_t n,
                    struct fl_err *err)
{
    if (s->e->act == arch2_act_swiglu_oai) {
        const struct arch2_oai_act *a = s->e->act_arg;
        return fl_cuda_swiglu_oai(s->g->cu, d_g, d_u, n, a->alpha, a->limit, err);
    }
    return fl_cuda_swiglu(s->g->cu, d_g, d_u, n, err);
}

/* y (n rows of width) += bias, when there is one. */
static int add_bias(const struct gpu_moe *s, float *d_y, const float *d_b, int64_t width,
                    int64_t n, struct fl_err *err)
{
    return d_b ? fl_cuda_add_rows(s->g->cu, d_y, d_b, width, n, width, err) : 0;
}

/* gate/up/act/down of one expert over its n routed rows (list entries
 * from `at`), outputs scattered to their slots; queued on the stream. */
static int run_expert(struct gpu_moe *s, const struct xdev *x, int64_t at, int64_t n,
                      struct fl_err *err)
{
    struct eng_gpu *g = s->g;
    const struct eng_moe *e = s->e;
    int rc = lists_up(s, err);
    if (!rc)
        rc = fl_cuda_copy_rows(g->cu, s->d_xg, s->d_x, s->n_in, s->d_tok + at, NULL, n, err);
    if (!rc)
        rc = gpu_matmul(g, x->w[0], e->gate->type, s->n_in, s->n_ff, s->d_xg, n, s->d_g, err);
    if (!rc)
        rc = add_bias(s, s->d_g, x->b[0], s->n_ff, n, err);
    if (!rc)
        rc = gpu_matmul(g, x->w[1], e->up->type, s->n_in, s->n_ff, s->d_xg, n, s->d_u, err);
    if (!rc)
        rc = add_bias(s, s->d_u, x->b[1], s->n_ff, n, err);
    if (!rc)
        rc = activate(s, s->d_g, s->d_u, n * s->n_ff, err);
    if (!rc)
        rc = gpu_matmul(g, x->w[2], e->down->type, s->n_ff, s->n_embd, s->d_g, n, s->d_d, err);
    if (!rc)
        rc = add_bias(s, s->d_d, x->b[2], s->n_embd, n, err);
    if (!rc)
        rc = fl_cuda_copy_rows(g->cu, s->d_slots, s->d_d, s->n_embd, NULL, s->d_slot + at, n, err);
    if (!rc)
        g->n_expert_runs++;
    return rc;
}

/* Each product's bias (one row) onto its output, where the experts have one. */
static int add_group_bias(const struct gpu_moe *s, int n, const struct xdev *x, int role,
                          float *const *y, int64_t width, struct fl_err *err)
{
    int rc = 0;
    for (int j = 0; j < n && !rc; j++)
        rc = add_bias(s, y[j], x[j].b[role], width, 1, err);
    return rc;
}

/* The n experts ex[j] of a decode step, x[j] on the device: all gates in
 * one launch, all ups, one activation, all downs, each writing its token's
 * slot (biases, where there are some, one launch per expert and matrix). */
static int run_group(struct gpu_moe *s, int n, const int32_t *ex, const struct xdev *xd,
                     struct fl_err *err)
{
    struct eng_gpu *g = s->g;
    const struct eng_moe *e = s->e;
    /* zeroed: the compiler cannot see that n >= 1 */
    const void *wg[FL_CUDA_GROUP_MAX] = { 0 }, *wu[FL_CUDA_GROUP_MAX] = { 0 };
    const void *wd[FL_CUDA_GROUP_MAX] = { 0 };
    const float *x[FL_CUDA_GROUP_MAX] = { 0 }, *h[FL_CUDA_GROUP_MAX] = { 0 };
    float *yg[FL_CUDA_GROUP_MAX] = { 0 }, *yu[FL_CUDA_GROUP_MAX] = { 0 };
    float *yd[FL_CUDA_GROUP_MAX] = { 0 };
    for (int j = 0; j < n; j++) {
        wg[j] = xd[j].w[0], wu[j] = xd[j].w[1], wd[j] = xd[j].w[2];
        x[j] = s->d_x;
        h[j] = yg[j] = s->d_g + j * s->n_ff;
        yu[j] = s->d_u + j * s->n_ff;
        yd[j] = s->d_slots + (int64_t)s->L->slot[s->L->start[ex[j]]] * s->n_embd;
    }
    int rc = fl_cuda_matvec_group(g->cu, wg, e->gate->type, s->n_in, s->n_ff, x, yg, n, err);
    if (!rc)
        rc = add_group_bias(s, n, xd, 0, yg, s->n_ff, err);
    if (!rc)
        rc = fl_cuda_matvec_group(g->cu, wu, e->up->type, s->n_in, s->n_ff, x, yu, n, err);
    if (!rc)
        rc = add_group_bias(s, n, xd, 1, yu, s->n_ff, err);
    if (!rc)
        rc = activate(s, s->d_g, s->d_u, n * s->n_ff, err);
    if (!rc)
        rc = fl_cuda_matvec_group(g->cu, wd, e->down->type, s->n_ff, s->n_embd, h, yd, n, err);
    if (!rc)
        rc = add_group_bias(s, n, xd, 2, yd, s->n_embd, err);
    if (!rc)
        g->n_expert_runs += (uint64_t)n;
    return rc;
}

static bool tensor_pinned(const struct eng_gpu *g, const struct eng_tensor *t)
{
    const struct eng_model *m = g->m;
    return g->t_pinned && t >= m->tensors && t < m->tensors + m->n_tensors &&
           g->t_pinned[t - m->tensors];
}

/* An expert's host slices as the cache packs them (slot_expert's order). */
struct xranges {
    struct fl_cuda_xrange r[6];
    int n;
};

static struct xranges expert_ranges(const struct gpu_moe *s, int ex)
{
    const struct eng_tensor *t[6];
    struct xranges x = { .n = 0 };
    expert_roles(s->e, t);
    for (int i = 0; i < 6; i++) {
        if (!t[i])
            continue;
        const size_t bytes = expert_bytes(t[i]);
        x.r[x.n++] = (struct fl_cuda_xrange){
            .host = t[i]->data + (size_t)ex * bytes, .bytes = bytes,
            .offset = t[i]->offset + (uint64_t)ex * bytes, .kind = i % 3 + 1,
            .pinned = tensor_pinned(s->g, t[i]) };
    }
    return x;
}

/* Runs an expert whose slot is held (its copy ordered before the kernels),
 * then lets the slot go. */
static int run_slot(struct gpu_moe *s, int layer, int ex, const uint8_t *base, int64_t at,
                    int64_t n, struct fl_err *err)
{
    const struct xdev x = slot_expert(s, base);
    int rc = run_expert(s, &x, at, n, err);
    struct fl_err e2;
    int rc2 = fl_cuda_xcache_release(s->g->xc, layer, ex, &e2);
    if (!rc && rc2) {
        *err = e2;
        rc = rc2;
    }
    return rc ? gpu_fail(s->g, rc, err) : 0;
}

/* Every range of the expert page-locked: a miss needs no host work. */
static bool locked(const struct xranges *x)
{
    for (int i = 0; i < x->n; i++)
        if (!x->r[i].pinned)
            return false;
    return true;
}

/* Pins (layer, ex)'s slot, queuing its fill on a miss. Only a miss of an
 * expert that is not wholly page-locked reads host bytes: the expert
 * source makes them resident for the fill and lets go of them at once
 * (they are staged before hold returns). */
static int hold_expert(struct gpu_moe *s, const struct eng_expert_source *src, int layer,
                       int ex, const struct xranges *r, void **d, struct fl_err *err)
{
    const bool read = src && !locked(r) && !fl_cuda_xcache_cached(s->g->xc, layer, ex);
    int rc = read ? src->acquire(src->ctx, layer, ex) : 0;
    if (rc < 0)
        return fl_err_set(err, rc, "layer %d expert %d: reading its weights failed: %s", layer,
                          ex, strerror(-rc));
    rc = fl_cuda_xcache_hold(s->g->xc, layer, ex, r->r, r->n, d, err);
    if (read)
        src->release(src->ctx, layer, ex);
    return rc;
}

/* Runs a held expert once its fill is in, then lets its slot go. */
static int run_held(struct gpu_moe *s, int layer, int ex, const uint8_t *d, int64_t at,
                    int64_t n, struct fl_err *err)
{
    int rc = fl_cuda_xcache_ready(s->g->xc, layer, ex, err);
    if (!rc)
        return run_slot(s, layer, ex, d, at, n, err);
    fl_cuda_xcache_release(s->g->xc, layer, ex, NULL);
    return gpu_fail(s->g, rc, err);
}

/* A host expert through the VRAM cache, on its own. */
static int cached_expert(struct gpu_moe *s, const struct eng_expert_source *src, int layer,
                         int ex, int64_t at, int64_t n, struct fl_err *err)
{
    const struct xranges r = expert_ranges(s, ex);
    void *d = NULL;
    int rc = hold_expert(s, src, layer, ex, &r, &d, err);
    return rc ? gpu_fail(s->g, rc, err) : run_held(s, layer, ex, d, at, n, err);
}

/* The layer's routed host experts through the cache. Slots that need no
 * host work (hits, and misses of page-locked experts, whose fill only
 * queues a DMA) are held first, so every transfer is queued before the
 * first kernel; then the hits run while the copy stream brings the
 * misses, which run last, each after its own copy. What could not be held
 * (every slot pinned, or pager-backed experts) goes one by one. */
enum { HOLD_NONE, HOLD_HIT, HOLD_MISS };

/* all: also the misses the expert source must read (a group needs every
 * expert held); else only hits and page-locked misses. */
static int hold_layer(struct gpu_moe *s, const struct eng_expert_source *src, int layer,
                      bool all, int64_t n_expert, void **d, int8_t *how, struct fl_err *err)
{
    const struct eng_expert_lists *L = s->L;
    for (int want = HOLD_HIT; want <= HOLD_MISS; want++)
        for (int64_t ex = 0; ex < n_expert; ex++) {
            if (L->start[ex + 1] == L->start[ex] || how[ex] != HOLD_NONE)
                continue;
            const struct xranges r = expert_ranges(s, (int)ex);
            const bool hit = fl_cuda_xcache_cached(s->g->xc, layer, (int)ex);
            if ((want == HOLD_HIT) != hit || (!hit && !locked(&r) && !all))
                continue;
            int rc = hold_expert(s, src, layer, (int)ex, &r, &d[ex], err);
            if (rc == -EBUSY)
                return 0;
            if (rc)
                return rc;
            how[ex] = (int8_t)want;
        }
    return 0;
}

/* Every routed expert held: one group, after all their copies. */
static int run_held_group(struct gpu_moe *s, int layer, void **d, int8_t *how,
                          struct fl_err *err)
{
    const struct eng_expert_lists *L = s->L;
    int rc = 0;
    /* the hits' group first: its kernels wait for no copy, so they run
     * while the copy stream brings the misses, whose group follows */
    for (int want = HOLD_HIT; want <= HOLD_MISS && !rc; want++) {
        struct xdev x[FL_CUDA_GROUP_MAX];
        int32_t ids[FL_CUDA_GROUP_MAX];
        int n = 0;
        for (int j = 0; j < L->n_order && !rc; j++) {
            const int ex = L->order[j];
            if (how[ex] != want)
                continue;
            ids[n] = ex;
            x[n++] = slot_expert(s, d[ex]);
            rc = fl_cuda_xcache_ready(s->g->xc, layer, ex, err);
        }
        if (!rc && n)
            rc = run_group(s, n, ids, x, err);
    }
    for (int j = 0; j < L->n_order; j++) { /* after the kernels that read the slots */
        const int ex = L->order[j];
        how[ex] = HOLD_NONE;
        struct fl_err e2;
        int rc2 = fl_cuda_xcache_release(s->g->xc, layer, ex, &e2);
        if (!rc && rc2)
            *err = e2, rc = rc2;
    }
    return rc;
}

static int run_cached_layer(struct gpu_moe *s, struct eng_ctx *c, int layer,
                            const struct eng_expert_lists *L, int64_t n_expert, struct fl_err *err)
{
    struct eng_gpu *g = s->g;
    void **d = calloc((size_t)n_expert, sizeof(void *));
    int8_t *how = calloc((size_t)n_expert, 1);
    const bool group = grouped(s);
    int rc = d && how ? hold_layer(s, c->experts, layer, group, n_expert, d, how, err)
                      : fl_err_set(err, -ENOMEM, "out of memory");
    int held = 0;
    for (int j = 0; how && j < L->n_order; j++)
        held += how[L->order[j]] != HOLD_NONE;
    if (!rc && group && held == L->n_order)
        rc = run_held_group(s, layer, d, how, err);
    for (int run = HOLD_HIT; run <= HOLD_MISS; run++)
        for (int64_t ex = 0; ex < n_expert && !rc; ex++) {
            if (how[ex] != run)
                continue;
            const int64_t at = L->start[ex];
            how[ex] = HOLD_NONE; /* run_held releases it, failing or not */
            rc = run_held(s, layer, (int)ex, d[ex], at, L->start[ex + 1] - at, err);
        }
    for (int64_t ex = 0; ex < n_expert && !rc; ex++) {
        const int64_t at = L->start[ex], n = L->start[ex + 1] - at;
        if (n && !d[ex])
            rc = cached_expert(s, c->experts, layer, (int)ex, at, n, err);
    }
    for (int64_t ex = 0; how && ex < n_expert; ex++) /* after an error: what is still held */
        if (how[ex] != HOLD_NONE)
            fl_cuda_xcache_release(g->xc, layer, (int)ex, NULL);
    free(d);
    free(how);
    return rc ? gpu_fail(g, rc, err) : 0;
}

static int run_layer(struct gpu_moe *s, struct eng_ctx *c, int layer, bool in_vram,
                     const struct eng_expert_lists *L, int64_t n_expert, struct fl_err *err)
{
    if (!in_vram)
        return run_cached_layer(s, c, layer, L, n_expert, err);
    if (grouped(s)) {
        struct xdev x[FL_CUDA_GROUP_MAX];
        for (int j = 0; j < L->n_order; j++)
            x[j] = vram_expert(s, L->order[j]);
        int rc = run_group(s, L->n_order, L->order, x, err);
        return rc ? gpu_fail(s->g, rc, err) : 0;
    }
    for (int64_t ex = 0; ex < n_expert; ex++) {
        const int64_t at = L->start[ex], n = L->start[ex + 1] - at;
        if (!n)
            continue;
        const struct xdev x = vram_expert(s, ex);
        int rc = run_expert(s, &x, at, n, err);
        if (rc)
            return gpu_fail(s->g, rc, err);
    }
    return 0;
}

/* Every expert tensor (biases too) in VRAM; *bytes: one expert's share of
 * them all (what a cache slot must hold). */
static bool experts_in_vram(const struct eng_gpu *g, const struct eng_moe *e, size_t *bytes)
{
    const struct eng_tensor *t[6];
    expert_roles(e, t);
    bool all = true;
    *bytes = 0;
    for (int i = 0; i < 6; i++)
        if (t[i]) {
            all = all && gpu_device_of(g, t[i]);
            *bytes += expert_bytes(t[i]);
        }
    return all;
}

static enum eng_gpu_where decide(const struct eng_gpu *g, const struct eng_moe *e, int64_t n_tok)
{
    size_t bytes;
    const bool in_vram = experts_in_vram(g, e, &bytes);
    const bool fits = g->xc && bytes <= g->slot_bytes;
    return g->failed ? ENG_GPU_RUN_CPU
        : eng_gpu_decide(g->o.experts, experts_supported(e), in_vram, fits, n_tok, g->o.min_batch);
}

bool gpu_moe_on_cpu(const struct eng_gpu *g, const struct eng_moe *e, int64_t n_tok)
{
    return decide(g, e, n_tok) == ENG_GPU_RUN_CPU;
}

static enum eng_gpu_where moe_where(struct eng_gpu *g, const struct eng_moe *e, int64_t n_tok)
{
    const enum eng_gpu_where where = decide(g, e, n_tok);
    if (where == ENG_GPU_RUN_CPU)
        g->n_moe_cpu++;
    return where;
}

/* The experts, then the weighted sum of the k slots into d_out, in slot
 * order as the CPU path. */
static int moe_run(struct gpu_moe *s, struct eng_ctx *c, int layer, enum eng_gpu_where where,
                   int64_t n_tok, const struct eng_expert_lists *L, int64_t k, float *d_out,
                   struct fl_err *err)
{
    struct eng_gpu *g = s->g;
    int rc = run_layer(s, c, layer, where == ENG_GPU_RUN_VRAM, L, s->e->gate->ne[2], err);
    if (rc)
        return rc;
    rc = fl_cuda_moe_combine(g->cu, d_out, s->d_slots, s->d_w, n_tok, (int)k, s->n_embd, err);
    if (rc)
        return gpu_fail(g, rc, err);
    if (where == ENG_GPU_RUN_VRAM)
        g->n_moe_vram++;
    else
        g->n_moe_cache++;
    return 0;
}

/* The layer's experts and their sum on the device, where says how. */
static int moe_device(struct eng_ctx *c, int layer, enum eng_gpu_where where, const float *d_x,
                      int64_t n_tok, const struct eng_expert_lists *L, const float *d_w,
                      int64_t k, const struct eng_moe *e, float *d_out, struct fl_err *err)
{
    struct eng_gpu *g = c->gpu;
    struct gpu_moe s = { .g = g, .e = e, .n_in = e->gate->ne[0], .n_ff = e->gate->ne[1],
                         .n_embd = e->down->ne[1], .d_x = (float *)d_x, .d_w = (float *)d_w };
    int rc = moe_buffers(&s, n_tok, k, L, err);
    if (rc)
        return gpu_fail(g, rc, err);
    return moe_run(&s, c, layer, where, n_tok, L, k, d_out, err);
}

int eng_gpu_moe(struct eng_ctx *c, int layer, const float *x, int64_t n_tok,
                const struct eng_expert_lists *L, const float *weights, int64_t k,
                const struct eng_moe *e, float *out, struct fl_err *err)
{
    struct eng_gpu *g = c->gpu;
    const enum eng_gpu_where where = moe_where(g, e, n_tok);
    if (where == ENG_GPU_RUN_CPU)
        return 0;
    const size_t f = sizeof(float), nx = (size_t)(n_tok * e->gate->ne[0]);
    const size_t pairs = (size_t)(n_tok * k), n_out = (size_t)(n_tok * e->down->ne[1]);
    float *d_x = NULL, *d_w = NULL, *d_out = NULL;
    int rc = dbuf_get(g, B_X, f * nx, (void **)&d_x, err);
    if (!rc)
        rc = dbuf_get(g, B_W, f * pairs, (void **)&d_w, err);
    if (!rc)
        rc = dbuf_get(g, B_OUT, f * n_out, (void **)&d_out, err);
    if (!rc)
        rc = fl_cuda_upload(g->cu, d_x, x, f * nx, err);
    if (!rc)
        rc = fl_cuda_upload(g->cu, d_w, weights, f * pairs, err);
    if (rc)
        return gpu_fail(g, rc, err);
    if ((rc = moe_device(c, layer, where, d_x, n_tok, L, d_w, k, e, d_out, err)))
        return rc;
    rc = fl_cuda_download(g->cu, out, d_out, f * n_out, err);
    return rc ? gpu_fail(g, rc, err) : 1;
}

int gpu_moe_device(struct eng_ctx *c, int layer, const float *d_x, int64_t n_tok,
                   const struct eng_expert_lists *L, const float *d_w, int64_t k,
                   const struct eng_moe *e, float *d_out, struct fl_err *err)
{
    const enum eng_gpu_where where = moe_where(c->gpu, e, n_tok);
    if (where == ENG_GPU_RUN_CPU)
        return 0;
    int rc = moe_device(c, layer, where, d_x, n_tok, L, d_w, k, e, d_out, err);
    return rc ? rc : 1;
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

void eng_gpu_print_stats(const struct eng_gpu *g, FILE *out)
{
    char a[32], b[32];
    fprintf(out, "gpu: %lld matrices (%s) in VRAM, %lld gpu-tier matrices on the host; "
            "%llu passes wholly on the GPU, %llu matmuls offloaded; MoE layers: %llu in VRAM, "
            "%llu through the expert cache, %llu on the CPU (--gpu-experts %s, "
            "--offload-min-batch %d)\n",
            (long long)g->n_up, fl_format_size(g->up_bytes, a, sizeof(a)), (long long)g->n_kept,
            (unsigned long long)g->n_pass, (unsigned long long)g->n_matmul, (unsigned long long)g->n_moe_vram,
            (unsigned long long)g->n_moe_cache, (unsigned long long)g->n_moe_cpu,
            eng_gpu_experts_name(g->o.experts), g->o.min_batch);
    if (!g->xc)
        return;
    fl_cuda_xcache_sync(g->xc, NULL); /* count the copies still in flight */
    const struct fl_cuda_xcache_stats st = fl_cuda_xcache_stats(g->xc);
    const double n = st.copies ? (double)st.copies : 1.0;
    fprintf(out, "gpu expert cache (%s): %d slots of %s; %llu hits, %llu misses, %llu evictions; "
            "%llu host->GPU expert copies, %s, per expert %.1f us mean, %.1f us max "
            "(host read included)\n",
            g->o.experts == ENG_GPU_EXPERTS_UNIFIED ? "unified" : "copy",
            fl_cuda_xcache_slots(g->xc), fl_format_size(g->slot_bytes, b, sizeof(b)),
            (unsigned long long)st.lru.hits, (unsigned long long)st.lru.misses,
            (unsigned long long)st.lru.evictions, (unsigned long long)st.copies,
            fl_format_size(st.copy_bytes, a, sizeof(a)), (double)st.copy_ns_total / n / 1e3,
            (double)st.copy_ns_max / 1e3);
    fprintf(out, "gpu host experts page-locked for direct copies: %s in %d ranges\n",
            fl_format_size(g->pinned_bytes, a, sizeof(a)), g->n_pins);
}

#endif /* FL_HAVE_CUDA */
