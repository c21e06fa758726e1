/* gpu-moe.c: a MoE layer's experts on the device — in VRAM, or host experts
 * through the VRAM expert cache — and where eng_gpu_decide sends them. */
#include "backend/cuda/gpu-impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/tensor-types.h"

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
    if (e->act.act != ENG_ACT_SWIGLU && e->act.act != ENG_ACT_SWIGLU_OAI)
        return false;
    const int64_t n_ff = e->gate->ne[1];
    if (e->up->ne[1] != n_ff || e->down->ne[0] != n_ff || e->up->ne[0] != e->gate->ne[0] ||
        e->gate->n_dims != 3 || e->up->n_dims != 3 || e->down->n_dims != 3)
        return false;
    if (!bias_ok(e->gate_b, e->gate) || !bias_ok(e->up_b, e->up) || !bias_ok(e->down_b, e->down))
        return false;
    return gpu_kernel_shape_ok(e->gate->type, e->gate->ne[0]) &&
           gpu_kernel_shape_ok(e->up->type, e->up->ne[0]) &&
           gpu_kernel_shape_ok(e->down->type, e->down->ne[0]) && gpu_expert_bytes(e->gate) % 16 == 0 &&
           gpu_expert_bytes(e->up) % 16 == 0 && gpu_expert_bytes(e->down) % 16 == 0;
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
    const int32_t *tok_span; /* the batch's span of each token, NULL: unknown */
    int32_t *row_span;       /* [pairs] host scratch: the spans of an expert's rows */
};

/* An expert's rows are its tokens in token order, so a span's rows are
 * adjacent: the products choose by each span's share (gpu_matmul_rows). */
static const int32_t *expert_row_spans(struct gpu_moe *s, int64_t at, int64_t n)
{
    if (!s->tok_span || !s->row_span)
        return NULL;
    for (int64_t i = 0; i < n; i++)
        s->row_span[i] = s->tok_span[s->L->tok[at + i]];
    return s->row_span;
}

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
    int rc = gpu_dbuf(g, B_XG, f * (size_t)(n_tok * s->n_in), (void **)&s->d_xg, err);
    if (!rc) /* pairs rows: a group's experts each have their own */
        rc = gpu_dbuf(g, B_G, f * pairs * (size_t)s->n_ff, (void **)&s->d_g, err);
    if (!rc)
        rc = gpu_dbuf(g, B_U, f * pairs * (size_t)s->n_ff, (void **)&s->d_u, err);
    if (!rc)
        rc = gpu_dbuf(g, B_D, f * (size_t)(n_tok * s->n_embd), (void **)&s->d_d, err);
    if (!rc)
        rc = gpu_dbuf(g, B_SLOTS, f * pairs * (size_t)s->n_embd, (void **)&s->d_slots, err);
    if (!rc)
        rc = gpu_dbuf(g, B_TOK, sizeof(int32_t) * pairs, (void **)&s->d_tok, err);
    if (!rc)
        rc = gpu_dbuf(g, B_SLOT, sizeof(int32_t) * pairs, (void **)&s->d_slot, err);
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
            set_role(&x, i, (const uint8_t *)gpu_device_of(s->g, t[i]) + ex * gpu_expert_bytes(t[i]));
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
            base += gpu_expert_bytes(t[i]);
        }
    return x;
}

/* The experts' activation: SwiGLU, or gpt-oss's SwiGLU-OAI. */
static int activate(const struct gpu_moe *s, float *d_g, const float *d_u, int64_t n,
                    struct fl_err *err)
{
    if (s->e->act.act == ENG_ACT_SWIGLU_OAI)
        return fl_cuda_swiglu_oai(s->g->cu, d_g, d_u, n, s->e->act.alpha, s->e->act.limit, err);
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
    const int32_t *rs = expert_row_spans(s, at, n);
    int rc = lists_up(s, err);
    if (!rc)
        rc = fl_cuda_copy_rows(g->cu, s->d_xg, s->d_x, s->n_in, s->d_tok + at, NULL, n, err);
    if (!rc)
        rc = gpu_matmul_rows(g, x->w[0], e->gate->type, s->n_in, s->n_ff, s->d_xg, n, s->d_g, rs,
                             err);
    if (!rc)
        rc = add_bias(s, s->d_g, x->b[0], s->n_ff, n, err);
    if (!rc)
        rc = gpu_matmul_rows(g, x->w[1], e->up->type, s->n_in, s->n_ff, s->d_xg, n, s->d_u, rs,
                             err);
    if (!rc)
        rc = add_bias(s, s->d_u, x->b[1], s->n_ff, n, err);
    if (!rc)
        rc = activate(s, s->d_g, s->d_u, n * s->n_ff, err);
    if (!rc)
        rc = gpu_matmul_rows(g, x->w[2], e->down->type, s->n_ff, s->n_embd, s->d_g, n, s->d_d,
                             rs, err);
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
        const size_t bytes = gpu_expert_bytes(t[i]);
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
                       int ex, int64_t n_tok, const struct xranges *r, void **d,
                       struct fl_err *err)
{
    const bool read = src && !locked(r) && !fl_cuda_xcache_cached(s->g->xc, layer, ex);
    int rc = read ? src->acquire(src->ctx, layer, ex) : 0;
    if (rc < 0)
        return fl_err_set(err, rc, "layer %d expert %d: reading its weights failed: %s", layer,
                          ex, strerror(-rc));
    /* the step's tokens for this expert: lfu-next counts a use per token */
    const uint32_t uses = n_tok < 1 ? 1 : n_tok > UINT32_MAX ? UINT32_MAX : (uint32_t)n_tok;
    rc = fl_cuda_xcache_hold_uses(s->g->xc, layer, ex, uses, r->r, r->n, d, err);
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
    int rc = hold_expert(s, src, layer, ex, n, &r, &d, err);
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
            int rc = hold_expert(s, src, layer, (int)ex, L->start[ex + 1] - L->start[ex], &r,
                                 &d[ex], err);
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
            *bytes += gpu_expert_bytes(t[i]);
        }
    return all;
}

static enum eng_gpu_where decide(const struct eng_gpu *g, const struct eng_moe *e, int64_t n_tok)
{
    size_t bytes;
    const bool in_vram = experts_in_vram(g, e, &bytes);
    const bool fits = g->xc && bytes <= g->slot_bytes;
    /* with several sequences the batch's size may not decide (gpu.h) */
    const int64_t n = g->o.batch_invariant ? 0 : n_tok;
    return g->failed ? ENG_GPU_RUN_CPU
        : eng_gpu_decide(g->o.experts, experts_supported(e), in_vram, fits, n, g->o.min_batch);
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
                         .n_embd = e->down->ne[1], .d_x = (float *)d_x, .d_w = (float *)d_w,
                         .tok_span = gpu_row_spans(c, n_tok) };
    if (s.tok_span)
        s.row_span = eng_scratch(c, sizeof(int32_t) * (size_t)(n_tok * k));
    int rc = moe_buffers(&s, n_tok, k, L, err);
    if (rc)
        return gpu_fail(g, rc, err);
    return moe_run(&s, c, layer, where, n_tok, L, k, d_out, err);
}

int gpu_moe_host(struct eng_ctx *c, int layer, const float *x, int64_t n_tok,
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
    int rc = gpu_dbuf(g, B_X, f * nx, (void **)&d_x, err);
    if (!rc)
        rc = gpu_dbuf(g, B_W, f * pairs, (void **)&d_w, err);
    if (!rc)
        rc = gpu_dbuf(g, B_OUT, f * n_out, (void **)&d_out, err);
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

