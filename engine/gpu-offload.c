/* gpu-offload.c: the CUDA backend inside the forward pass (gpu-offload.h).
 *
 * The first half (flag names, the offload rule, discovery) is plain C that
 * every build has and tests without a device. The second half runs only
 * with FL_HAVE_CUDA; a build without it has no device, so eng_gpu_open
 * says -ENODEV and nothing else is ever reached. */
#include "engine/gpu-offload.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda-backend.h"
#include "engine/cuda/expert-cache.h"
#include "engine/gguf.h"
#include "engine/tensor-types.h"
#include "engine/units.h"
#include "pager/placement.h"

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

#else /* FL_HAVE_CUDA */

/* Batches of at least this many tokens take the cuBLAS path, smaller ones
 * the matvec kernels (one weight pass per token). */
#define GEMM_MIN_TOK 32
/* VRAM left to cuBLAS, the GEMM's dequantized tiles and the activations
 * when the expert cache is sized. */
#define VRAM_RESERVE ((size_t)768 << 20)

/* Device buffers for activations, grown on demand, one per role. */
enum { B_X, B_Y, B_XG, B_G, B_U, B_D, B_SLOTS, B_W, B_TOK, B_SLOT, B_OUT, B_COUNT };

struct dbuf {
    void *p;
    size_t cap;
};

struct eng_gpu {
    struct fl_cuda *cu;
    const struct eng_model *m;
    struct eng_gpu_options o;
    void **d_tensor;            /* [m->n_tensors]: device copy, NULL on the host */
    uint64_t up_bytes, up_limit; /* uploaded; --vram-budget, or free VRAM less the reserve */
    int64_t n_up, n_kept;       /* gpu-tier matrices uploaded / left on the host */
    struct fl_cuda_xcache *xc;  /* host experts; NULL: none, or no slot fits */
    size_t slot_bytes;
    struct dbuf buf[B_COUNT];
    int failed;
    struct fl_err err;
    uint64_t n_matmul, n_moe_vram, n_moe_cache, n_moe_cpu, n_expert_runs;
};

static int dbuf_get(struct eng_gpu *g, int which, size_t bytes, void **out, struct fl_err *err)
{
    struct dbuf *b = &g->buf[which];
    if (b->cap < bytes) {
        /* cudaFree waits for the kernels still reading the old buffer */
        fl_cuda_free(g->cu, b->p);
        b->p = NULL;
        b->cap = 0;
        size_t want = bytes + bytes / 2 + 256;
        int rc = fl_cuda_malloc(g->cu, &b->p, want, err);
        if (rc)
            return rc;
        b->cap = want;
    }
    *out = b->p;
    return 0;
}

/* The GPU is not used again after its first error; eng_gpu_error says it. */
static int fail(struct eng_gpu *g, int rc, const struct fl_err *err)
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

static void *device_of(const struct eng_gpu *g, const struct eng_tensor *w)
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
 * budget; norms and other vectors are read on the CPU and stay there. */
static int upload_tier(struct eng_gpu *g, const struct gguf_file *gf,
                       const struct placement_plan *plan, struct fl_err *err)
{
    for (int64_t i = 0; i < gguf_n_tensors(gf); i++) {
        if (placement_tier(plan, i) != PL_TIER_GPU)
            continue;
        const struct eng_tensor *t = eng_model_find(g->m, gguf_tensor(gf, i)->name);
        if (!t || t->n_dims < 2)
            continue;
        bool fits = g->up_bytes + t->nbytes <= g->up_limit;
        if (!kernel_shape_ok(t->type, t->ne[0]) || !fits) {
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

/* One expert's bytes across the layer's expert tensors that stay on the
 * host, the largest over the layers: the cache's slot size. */
static size_t host_slot_bytes(const struct eng_gpu *g)
{
    const struct eng_model *m = g->m;
    const int64_t n_layer = m->hp.n_layer;
    size_t best = 0;
    size_t *per = calloc((size_t)(n_layer > 0 ? n_layer : 1), sizeof(size_t));
    if (!per)
        return 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const struct eng_tensor *t = &m->tensors[i];
        const int il = placement_layer_of(t->name);
        if (t->n_dims != 3 || il < 0 || il >= n_layer || g->d_tensor[i] ||
            !placement_is_expert(t->name) || t->ne[2] < 1)
            continue;
        per[il] += (size_t)(t->nbytes / (uint64_t)t->ne[2]);
        if (per[il] > best)
            best = per[il];
    }
    free(per);
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
    if (g->o.vram_budget)
        budget = g->o.vram_budget > g->up_bytes ? (size_t)(g->o.vram_budget - g->up_bytes) : 0;
    struct fl_cuda_xcache_opts xo = {
        .mode = unified ? FL_CUDA_XUNIFIED : FL_CUDA_XCOPY, .slot_bytes = g->slot_bytes,
        .budget = budget, .reserve = VRAM_RESERVE, .n_layer = (int)hp->n_layer,
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
    if (!rc && o->vram_budget)
        g->up_limit = o->vram_budget;
    else if (!rc && info.free_bytes > VRAM_RESERVE)
        g->up_limit = info.free_bytes - VRAM_RESERVE;
    if (!rc && !(g->d_tensor = calloc((size_t)(m->n_tensors ? m->n_tensors : 1), sizeof(void *))))
        rc = fl_err_set(err, -ENOMEM, "out of memory");
    if (!rc)
        rc = upload_tier(g, gf, plan, err);
    if (!rc)
        rc = make_cache(g, err);
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
    fl_cuda_xcache_destroy(g->xc);
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
    return fl_cuda_matmul(g->cu, d_w, type, n_in, n_out, d_x, n_tok, d_y, GEMM_MIN_TOK, err);
}

bool eng_gpu_matmul(struct eng_ctx *c, const struct eng_tensor *w, int expert, const float *x,
                    int64_t n_tok, float *y)
{
    struct eng_gpu *g = c->gpu;
    const uint8_t *d_w = g->failed ? NULL : device_of(g, w);
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
        fail(g, rc, &err);
        return false; /* the CPU computes it; the forward pass then reports the error */
    }
    g->n_matmul++;
    return true;
}

/* --- MoE -------------------------------------------------------------------------- */

static size_t slice_bytes(const struct eng_tensor *t)
{
    return (size_t)t->ne[1] * fl_row_size(t->type, t->ne[0]);
}

/* The kernels cover plain SwiGLU experts without biases whose slices keep
 * the 16-byte alignment the block loads expect (gpt-oss's SwiGLU-OAI with
 * biases stays on the CPU). */
static bool experts_supported(const struct eng_moe *e)
{
    if (e->gate_b || e->up_b || e->down_b || (e->act && e->act != eng_act_swiglu))
        return false;
    const int64_t n_ff = e->gate->ne[1];
    if (e->up->ne[1] != n_ff || e->down->ne[0] != n_ff || e->up->ne[0] != e->gate->ne[0] ||
        e->gate->n_dims != 3 || e->up->n_dims != 3 || e->down->n_dims != 3)
        return false;
    return kernel_shape_ok(e->gate->type, e->gate->ne[0]) &&
           kernel_shape_ok(e->up->type, e->up->ne[0]) &&
           kernel_shape_ok(e->down->type, e->down->ne[0]) && slice_bytes(e->gate) % 16 == 0 &&
           slice_bytes(e->up) % 16 == 0 && slice_bytes(e->down) % 16 == 0;
}

/* Device buffers of one MoE call. */
struct gpu_moe {
    struct eng_gpu *g;
    const struct eng_moe *e;
    int64_t n_in, n_ff, n_embd;
    float *d_x, *d_xg, *d_g, *d_u, *d_d, *d_slots, *d_w;
    int32_t *d_tok, *d_slot;
};

static int moe_buffers(struct gpu_moe *s, const float *x, const float *weights, int64_t n_tok,
                       int64_t k, const struct eng_expert_lists *L, struct fl_err *err)
{
    struct eng_gpu *g = s->g;
    const size_t f = sizeof(float), pairs = (size_t)(n_tok * k);
    int rc = dbuf_get(g, B_X, f * (size_t)(n_tok * s->n_in), (void **)&s->d_x, err);
    if (!rc)
        rc = dbuf_get(g, B_XG, f * (size_t)(n_tok * s->n_in), (void **)&s->d_xg, err);
    if (!rc)
        rc = dbuf_get(g, B_G, f * (size_t)(n_tok * s->n_ff), (void **)&s->d_g, err);
    if (!rc)
        rc = dbuf_get(g, B_U, f * (size_t)(n_tok * s->n_ff), (void **)&s->d_u, err);
    if (!rc)
        rc = dbuf_get(g, B_D, f * (size_t)(n_tok * s->n_embd), (void **)&s->d_d, err);
    if (!rc)
        rc = dbuf_get(g, B_SLOTS, f * pairs * (size_t)s->n_embd, (void **)&s->d_slots, err);
    if (!rc)
        rc = dbuf_get(g, B_W, f * pairs, (void **)&s->d_w, err);
    if (!rc)
        rc = dbuf_get(g, B_TOK, sizeof(int32_t) * pairs, (void **)&s->d_tok, err);
    if (!rc)
        rc = dbuf_get(g, B_SLOT, sizeof(int32_t) * pairs, (void **)&s->d_slot, err);
    if (!rc)
        rc = fl_cuda_upload(g->cu, s->d_x, x, f * (size_t)(n_tok * s->n_in), err);
    if (!rc)
        rc = fl_cuda_upload(g->cu, s->d_w, weights, f * pairs, err);
    if (!rc)
        rc = fl_cuda_upload(g->cu, s->d_tok, L->tok, sizeof(int32_t) * pairs, err);
    if (!rc)
        rc = fl_cuda_upload(g->cu, s->d_slot, L->slot, sizeof(int32_t) * pairs, err);
    return rc;
}

/* gate/up/act/down of one expert over its n routed rows (list entries
 * from `at`), outputs scattered to their slots; queued on the stream. */
static int run_expert(struct gpu_moe *s, const uint8_t *d_gate, const uint8_t *d_up,
                      const uint8_t *d_down, int64_t at, int64_t n, struct fl_err *err)
{
    struct eng_gpu *g = s->g;
    const struct eng_moe *e = s->e;
    int rc = fl_cuda_copy_rows(g->cu, s->d_xg, s->d_x, s->n_in, s->d_tok + at, NULL, n, err);
    if (!rc)
        rc = gpu_matmul(g, d_gate, e->gate->type, s->n_in, s->n_ff, s->d_xg, n, s->d_g, err);
    if (!rc)
        rc = gpu_matmul(g, d_up, e->up->type, s->n_in, s->n_ff, s->d_xg, n, s->d_u, err);
    if (!rc)
        rc = fl_cuda_swiglu(g->cu, s->d_g, s->d_u, n * s->n_ff, err);
    if (!rc)
        rc = gpu_matmul(g, d_down, e->down->type, s->n_ff, s->n_embd, s->d_g, n, s->d_d, err);
    if (!rc)
        rc = fl_cuda_copy_rows(g->cu, s->d_slots, s->d_d, s->n_embd, NULL, s->d_slot + at, n, err);
    if (!rc)
        g->n_expert_runs++;
    return rc;
}

static const uint8_t *host_slice(const struct eng_tensor *t, int ex)
{
    return t->data + (size_t)ex * slice_bytes(t);
}

/* A host expert through the VRAM cache: the expert source makes its bytes
 * resident only on a cache miss (a hit reads nothing on the host), and is
 * released as soon as the bytes are staged (the cache copies them out
 * before acquire returns). */
static int cached_expert(struct gpu_moe *s, const struct eng_expert_source *src, int layer,
                         int ex, int64_t at, int64_t n, struct fl_err *err)
{
    struct eng_gpu *g = s->g;
    const struct eng_moe *e = s->e;
    const struct eng_tensor *t[3] = { e->gate, e->up, e->down };
    struct fl_cuda_xrange r[3];
    for (int i = 0; i < 3; i++)
        r[i] = (struct fl_cuda_xrange){ .host = host_slice(t[i], ex), .bytes = slice_bytes(t[i]),
                                        .offset = t[i]->offset + (uint64_t)ex * slice_bytes(t[i]),
                                        .kind = i + 1 };
    const bool read = src && !fl_cuda_xcache_cached(g->xc, layer, ex);
    int rc = read ? src->acquire(src->ctx, layer, ex) : 0;
    if (rc < 0)
        return fl_err_set(err, rc, "layer %d expert %d: reading its weights failed: %s", layer,
                          ex, strerror(-rc));
    void *d = NULL;
    rc = fl_cuda_xcache_acquire(g->xc, layer, ex, r, 3, &d, err);
    if (read)
        src->release(src->ctx, layer, ex);
    if (rc)
        return fail(g, rc, err);
    const uint8_t *base = d;
    rc = run_expert(s, base, base + r[0].bytes, base + r[0].bytes + r[1].bytes, at, n, err);
    struct fl_err e2;
    int rc2 = fl_cuda_xcache_release(g->xc, layer, ex, &e2);
    if (!rc && rc2) {
        *err = e2;
        rc = rc2;
    }
    return rc ? fail(g, rc, err) : 0;
}

static int run_layer(struct gpu_moe *s, struct eng_ctx *c, int layer, bool in_vram,
                     const struct eng_expert_lists *L, int64_t n_expert, struct fl_err *err)
{
    const struct eng_moe *e = s->e;
    int rc = 0;
    for (int64_t ex = 0; ex < n_expert && !rc; ex++) {
        const int64_t at = L->start[ex], n = L->start[ex + 1] - at;
        if (!n)
            continue;
        if (in_vram) {
            const uint8_t *dg = device_of(s->g, e->gate), *du = device_of(s->g, e->up),
                          *dd = device_of(s->g, e->down);
            rc = run_expert(s, dg + ex * slice_bytes(e->gate), du + ex * slice_bytes(e->up),
                            dd + ex * slice_bytes(e->down), at, n, err);
            if (rc)
                fail(s->g, rc, err);
        } else {
            rc = cached_expert(s, c->experts, layer, (int)ex, at, n, err);
        }
    }
    return rc;
}

int eng_gpu_moe(struct eng_ctx *c, int layer, const float *x, int64_t n_tok,
                const struct eng_expert_lists *L, const float *weights, int64_t k,
                const struct eng_moe *e, float *out, struct fl_err *err)
{
    struct eng_gpu *g = c->gpu;
    if (g->failed)
        return 0;
    const bool in_vram = device_of(g, e->gate) && device_of(g, e->up) && device_of(g, e->down);
    const enum eng_gpu_where where =
        eng_gpu_decide(g->o.experts, experts_supported(e), in_vram,
                       g->xc && slice_bytes(e->gate) + slice_bytes(e->up) + slice_bytes(e->down) <=
                                    g->slot_bytes,
                       n_tok, g->o.min_batch);
    if (where == ENG_GPU_RUN_CPU) {
        g->n_moe_cpu++;
        return 0;
    }
    const int64_t n_expert = e->gate->ne[2];
    struct gpu_moe s = { .g = g, .e = e, .n_in = e->gate->ne[0], .n_ff = e->gate->ne[1],
                         .n_embd = e->down->ne[1] };
    int rc = moe_buffers(&s, x, weights, n_tok, k, L, err);
    if (rc)
        return fail(g, rc, err);
    if ((rc = run_layer(&s, c, layer, where == ENG_GPU_RUN_VRAM, L, n_expert, err)))
        return rc;
    /* the weighted sum of the k slots, in slot order as the CPU path */
    float *d_out = NULL;
    rc = dbuf_get(g, B_OUT, sizeof(float) * (size_t)(n_tok * s.n_embd), (void **)&d_out, err);
    if (!rc)
        rc = fl_cuda_moe_combine(g->cu, d_out, s.d_slots, s.d_w, n_tok, (int)k, s.n_embd, err);
    if (!rc)
        rc = fl_cuda_download(g->cu, out, d_out, sizeof(float) * (size_t)(n_tok * s.n_embd), err);
    if (rc)
        return fail(g, rc, err);
    if (where == ENG_GPU_RUN_VRAM)
        g->n_moe_vram++;
    else
        g->n_moe_cache++;
    return 1;
}

uint64_t eng_gpu_ops(const struct eng_gpu *g)
{
    return g ? g->n_matmul + g->n_moe_vram + g->n_moe_cache : 0;
}

void eng_gpu_print_stats(const struct eng_gpu *g, FILE *out)
{
    char a[32], b[32];
    fprintf(out, "gpu: %lld matrices (%s) in VRAM, %lld gpu-tier matrices on the host; "
            "%llu matmuls on the GPU; MoE layers: %llu in VRAM, %llu through the expert cache, "
            "%llu on the CPU (--gpu-experts %s, --offload-min-batch %d)\n",
            (long long)g->n_up, fl_format_size(g->up_bytes, a, sizeof(a)), (long long)g->n_kept,
            (unsigned long long)g->n_matmul, (unsigned long long)g->n_moe_vram,
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
}

#endif /* FL_HAVE_CUDA */
