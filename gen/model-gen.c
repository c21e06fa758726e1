/* model-gen.c: shapes, size fitting and the parallel, deterministic writer
 * of synthetic MoE models. */
#include "gen/model-gen.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "gen/gen-internal.h"
#include "gguf/tensor-types.h"

#define GEN_DEFAULT_SKEW 0.3 /* llama.cpp: top-8 of 128 experts get ~35% of selections */
#define GEN_DEFAULT_SIZE (1ull << 30) /* when neither --size nor --layers is given */
#define GEN_MAX_LAYERS 96             /* when fitting; --layers may ask for more */
#define GEN_PREF_LAYERS 24            /* fitting picks the widest model this deep */
#define GEN_MAX_EXPERTS 4096
#define GEN_MAX_FILE (1ull << 50)
#define GEN_STREAM_LAG (64ull << 20) /* page cache the writer may fill */

static const char *const arch_names[GEN_ARCH_COUNT] = {
    [GEN_ARCH_QWEN3MOE] = "qwen3moe",
    [GEN_ARCH_LLAMA] = "llama",
    [GEN_ARCH_DEEPSEEK2] = "deepseek2",
    [GEN_ARCH_GPT_OSS] = "gpt-oss",
    [GEN_ARCH_GLM4MOE] = "glm4moe",
    [GEN_ARCH_MINIMAX_M2] = "minimax-m2",
    [GEN_ARCH_QWEN35MOE] = "qwen35moe",
    [GEN_ARCH_QWEN3NEXT] = "qwen3next",
    [GEN_ARCH_DEEPSEEK32] = "deepseek32",
    [GEN_ARCH_GLM_DSA] = "glm-dsa",
    [GEN_ARCH_KIMI_LINEAR] = "kimi-linear",
    [GEN_ARCH_KIMI_K3] = "kimi-k3",
    [GEN_ARCH_MINIMAX_M3] = "minimax-m3",
};

const char *gen_arch_name(enum gen_arch a)
{
    return (unsigned)a < GEN_ARCH_COUNT ? arch_names[a] : "?";
}

const char *gen_arch_names(void)
{
    static char names[256];
    if (!names[0])
        for (int a = 0; a < GEN_ARCH_COUNT; a++)
            snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", a ? ", " : "",
                     arch_names[a]);
    return names;
}

int gen_arch_by_name(const char *name)
{
    for (int a = 0; a < GEN_ARCH_COUNT; a++)
        if (!strcmp(name, arch_names[a]))
            return a;
    if (!strcmp(name, "mixtral"))
        return GEN_ARCH_LLAMA;
    return -1;
}

/* --- the plan: every tensor with its type, shape and recipe ------------------ */

int gen_plan_add(struct gen_plan *plan, const struct gen_tensor *t)
{
    if (plan->n == plan->cap) {
        int64_t cap = plan->cap ? 2 * plan->cap : 256;
        struct gen_tensor *nt = realloc(plan->t, (size_t)cap * sizeof(*nt));
        if (!nt)
            return -ENOMEM;
        plan->t = nt;
        plan->cap = cap;
    }
    plan->t[plan->n++] = *t;
    return 0;
}

static void plan_free(struct gen_plan *plan)
{
    free(plan->t);
    free(plan->offsets);
    memset(plan, 0, sizeof(*plan));
}

static int plan_build(const struct gen_params *p, struct gen_plan *plan, bool offsets)
{
    memset(plan, 0, sizeof(*plan));
    plan->p = p;
    plan->v_dim = (int64_t)(gen_mix(p->seed, 0x76) % (uint64_t)p->n_embd);
    /* v holds as much of the embedding's energy as all other coordinates
     * together; after the layers' writes (about half that again) and the
     * RMSNorm its coordinate is about sqrt(n_embd / 2.5) */
    plan->v_mag = sqrtf((float)p->n_embd);
    plan->v_norm = sqrtf((float)p->n_embd / 2.5f);
    if (offsets) {
        /* one layer more: glm4moe's nextn block has a router too */
        plan->offsets = malloc((size_t)((p->n_layer + 1) * p->n_expert) * sizeof(float));
        if (!plan->offsets)
            return -ENOMEM;
        for (int64_t il = 0; il <= p->n_layer; il++)
            gen_layer_offsets(p, il, plan->offsets + il * p->n_expert);
    }
    int rc = gen_arch_tensors(plan);
    if (rc)
        plan_free(plan);
    return rc;
}

/* Declares metadata and tensors on w, in file order. */
static int lay_out(const struct gen_plan *plan, struct gguf_writer *w)
{
    int rc = gen_arch_metadata(plan->p, w);
    for (int64_t i = 0; !rc && i < plan->n; i++) {
        const struct gen_tensor *t = &plan->t[i];
        int64_t idx = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne);
        rc = idx < 0 ? (int)idx : 0;
    }
    return rc;
}

uint64_t gen_file_size(const struct gen_params *p)
{
    struct gen_plan plan;
    struct gguf_writer *w = NULL;
    uint64_t size = 0;
    if (plan_build(p, &plan, false))
        return 0;
    if (!gguf_writer_open(NULL, &w, NULL) && !lay_out(&plan, w))
        size = gguf_writer_file_size(w);
    gguf_writer_close(w);
    plan_free(&plan);
    return size;
}

/* --- resolving and fitting the shape ------------------------------------------- */

static bool type_supported(uint32_t t)
{
    return t == FL_TYPE_F16 || t == FL_TYPE_Q8_0 || t == FL_TYPE_Q4_K || t == FL_TYPE_MXFP4;
}

static int64_t min_layers(const struct gen_params *p)
{
    return 2 + (gen_arch_has_dense(p->arch) ? p->n_layer_dense : 0);
}

/* Size is affine in the layer count (past the dense ones) and in the
 * expert count, so two probes give the count that lands on the target. */
static int64_t fit_count(const struct gen_params *base, bool layers, int64_t x0, uint64_t target)
{
    struct gen_params q = *base;
    int64_t *f = layers ? &q.n_layer : &q.n_expert;
    *f = x0;
    double b0 = (double)gen_file_size(&q);
    *f = x0 + 1;
    double b1 = (double)gen_file_size(&q);
    if (b1 <= b0)
        return x0;
    return x0 + (int64_t)llround(((double)target - b0) / (b1 - b0));
}

static int64_t clamp64(int64_t x, int64_t lo, int64_t hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

/* The widest model (of the architecture's family, scaled by width) that
 * still has GEN_PREF_LAYERS layers within the target. */
static void pick_width(struct gen_params *p, uint64_t target)
{
    static const int64_t widths[] = { 8192, 4096, 2048, 1024, 512, 256 };
    size_t n = sizeof(widths) / sizeof(widths[0]);
    for (size_t i = 0; i < n; i++) {
        struct gen_params q = *p;
        gen_arch_defaults(&q, widths[i]);
        if (!q.n_layer)
            q.n_layer = GEN_PREF_LAYERS;
        if (gen_file_size(&q) <= target || i + 1 == n) {
            gen_arch_defaults(p, widths[i]);
            return;
        }
    }
}

static int fit(struct gen_params *p, struct fl_err *err)
{
    bool free_l = !p->n_layer, free_e = !p->n_expert;
    uint64_t target = p->target_size;
    if (!free_l && !free_e)
        return fl_err_set(err, -EINVAL, "--size needs --layers or --experts left free");
    pick_width(p, target);
    int64_t lmin = min_layers(p);
    if (free_l) {
        int64_t l = clamp64(fit_count(p, true, lmin, target), lmin, GEN_MAX_LAYERS);
        if (gen_arch_is_mla(p->arch) && !gen_arch_is_kimi(p->arch) && (l == 26 || l == 27))
            l = l == 26 ? 25 : 28; /* see gen_arch_check */
        p->n_layer = l;
    }
    /* the layer count alone lands within half a layer; the expert count
     * fine-tunes only when that is not close enough (or layers are fixed),
     * so most models keep the architecture's usual expert count */
    if (free_e) {
        double miss = fabs((double)gen_file_size(p) - (double)target) / (double)target;
        if (!free_l || miss > 0.03) {
            int64_t k = p->n_expert_used;
            p->n_expert = clamp64(fit_count(p, false, k, target), k, GEN_MAX_EXPERTS);
        }
    }
    double got = (double)gen_file_size(p);
    if (fabs(got - (double)target) > 0.1 * (double)target)
        return fl_err_set(err, -EINVAL, "cannot reach --size %llu with these options "
                          "(closest: %.0f bytes)", (unsigned long long)target, got);
    return 0;
}

/* Every shape field within bounds that keep all sizes far from overflow
 * and the plan small; free (0) fields pass while free_ok. */
static int check_ranges(const struct gen_params *p, bool free_ok, struct fl_err *err)
{
    const struct { const char *opt; int64_t v, max; bool common; } f[] = {
        { "--n-embd", p->n_embd, 1 << 16, true }, { "--layers", p->n_layer, 4096, true },
        { "--experts", p->n_expert, GEN_MAX_EXPERTS, true },
        { "--top-k", p->n_expert_used, GEN_MAX_EXPERTS, true },
        { "--expert-ff", p->n_ff_exp, 1 << 18, true }, { "--heads", p->n_head, 1024, true },
        { "--heads-kv", p->n_head_kv, 1024, false }, { "--head-dim", p->head_dim, 1024, false },
        { "--rope-dims", p->n_rot, 1024, false },
        { "--ff", p->n_ff, 1 << 18, false }, { "--shared-experts", p->n_expert_shared, 64, false },
        { "--dense-layers", p->n_layer_dense, 4096, false },
        { "q_lora_rank", p->q_lora_rank, 1 << 16, false },
        { "kv_lora_rank", p->kv_lora_rank, 1 << 16, false },
        { "qk_nope", p->qk_nope, 1024, false }, { "qk_rope", p->qk_rope, 1024, false },
        { "v_head", p->v_head, 1024, false },
        { "--expert-latent", p->expert_latent, 1 << 16, false },
        { "--res-block", p->res_block, 4096, false },
        { "--indexer-block", p->msa_block, 1 << 16, false },
        { "--indexer-local", p->msa_local, 1 << 16, false },
        { "--ssm-state", p->ssm_d_state, 1024, false },
        { "--ssm-groups", p->ssm_n_k_head, 1024, false },
        { "--ssm-heads", p->ssm_n_v_head, 1024, false },
    };
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        bool may_be_0 = free_ok || !f[i].common;
        if (f[i].v < (may_be_0 ? 0 : 1) || f[i].v > f[i].max)
            return fl_err_set(err, -EINVAL, "%s %lld is out of range (1..%lld)", f[i].opt,
                              (long long)f[i].v, (long long)f[i].max);
    }
    return 0;
}

int gen_resolve(struct gen_params *p, struct fl_err *err)
{
    if ((unsigned)p->arch >= GEN_ARCH_COUNT)
        return fl_err_set(err, -EINVAL, "unknown architecture");
    if (!type_supported(p->type))
        return fl_err_set(err, -EINVAL, "type %s is not supported "
                          "(use F16, Q8_0, Q4_K or MXFP4)", fl_type_name(p->type));
    if (!p->n_threads)
        p->n_threads = 2;
    if (p->skew < 0)
        p->skew = GEN_DEFAULT_SKEW;
    if (!p->target_size && !p->n_layer)
        p->target_size = GEN_DEFAULT_SIZE;
    int rc = check_ranges(p, true, err);
    if (!rc)
        rc = gen_vocab_check(p, err);
    if (rc)
        return rc;
    if (p->target_size)
        rc = fit(p, err);
    else
        gen_arch_defaults(p, gen_arch_base_width(p->arch));
    if (!rc)
        rc = check_ranges(p, false, err);
    if (!rc)
        rc = gen_arch_check(p, err);
    if (!rc) {
        /* nothing inside may overflow or exceed any plausible disk */
        double approx = (double)p->n_layer * (double)p->n_expert * 3.0 *
                        (double)p->n_embd * (double)p->n_ff_exp * 2.0;
        if (approx > (double)GEN_MAX_FILE || gen_file_size(p) == 0)
            return fl_err_set(err, -EINVAL, "the requested model is too large");
    }
    return rc;
}

/* --- writing ---------------------------------------------------------------------- */

struct wstate {
    const struct gen_plan *plan;
    struct gguf_writer *w;
    pthread_mutex_t lock;
    int64_t next_t, next_row; /* next chunk to hand out */
    size_t buf_bytes, scratch_floats;
    _Atomic uint64_t done;
    _Atomic int running;
    _Atomic int failed;
    int rc;
    struct fl_err err;
};

/* Hands out the next chunk: tensor ti, rows [row0, row0 + n). */
static bool next_chunk(struct wstate *s, int64_t *ti, int64_t *row0, int64_t *n)
{
    bool ok = false;
    pthread_mutex_lock(&s->lock);
    while (s->next_t < s->plan->n && !atomic_load(&s->failed)) {
        const struct gen_tensor *t = &s->plan->t[s->next_t];
        int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
        if (s->next_row >= rows) {
            s->next_t++;
            s->next_row = 0;
            continue;
        }
        int64_t per = gen_chunk_rows(t);
        *ti = s->next_t;
        *row0 = s->next_row;
        *n = rows - *row0 < per ? rows - *row0 : per;
        s->next_row += *n;
        ok = true;
        break;
    }
    pthread_mutex_unlock(&s->lock);
    return ok;
}

static void *worker(void *arg)
{
    struct wstate *s = arg;
    void *buf = malloc(s->buf_bytes);
    float *scratch = malloc(s->scratch_floats * sizeof(float));
    int64_t ti, row0, n;
    struct fl_err err;
    int rc = buf && scratch ? 0 : -ENOMEM;
    if (rc)
        fl_err_set(&err, rc, "out of memory");
    while (!rc && next_chunk(s, &ti, &row0, &n)) {
        const struct gen_tensor *t = &s->plan->t[ti];
        size_t rb = fl_row_size(t->type, t->ne[0]);
        /* the stream depends on where the chunk is, never on who writes it */
        uint64_t key = gen_mix(gen_mix(s->plan->p->seed, (uint64_t)ti), (uint64_t)row0);
        gen_synth_rows(s->plan, t, row0, n, key, buf, scratch);
        rc = gguf_writer_write(s->w, ti, (uint64_t)row0 * rb, buf, (size_t)n * rb, &err);
        atomic_fetch_add(&s->done, (uint64_t)n * rb);
    }
    if (rc) {
        pthread_mutex_lock(&s->lock);
        if (!s->rc) {
            s->rc = rc;
            s->err = err;
        }
        pthread_mutex_unlock(&s->lock);
        atomic_store(&s->failed, 1);
    }
    free(buf);
    free(scratch);
    atomic_fetch_sub(&s->running, 1);
    return NULL;
}

static void size_buffers(struct wstate *s)
{
    for (int64_t i = 0; i < s->plan->n; i++) {
        const struct gen_tensor *t = &s->plan->t[i];
        int64_t rows = gen_chunk_rows(t);
        size_t b = (size_t)rows * fl_row_size(t->type, t->ne[0]);
        size_t f = t->init == GEN_INIT_MATRIX ? 0 : (size_t)(rows * t->ne[0]);
        if (b > s->buf_bytes)
            s->buf_bytes = b;
        if (f > s->scratch_floats)
            s->scratch_floats = f;
    }
    if (!s->scratch_floats)
        s->scratch_floats = 1;
}

static int run_workers(struct wstate *s, int n_threads, gen_progress_fn progress, void *ctx)
{
    pthread_t tid[64];
    int n = 0;
    uint64_t total = 0;
    for (int64_t i = 0; i < s->plan->n; i++)
        total += gguf_writer_tensor_nbytes(s->w, i);
    if (n_threads > 64)
        n_threads = 64;
    atomic_store(&s->running, n_threads);
    for (; n < n_threads; n++)
        if (pthread_create(&tid[n], NULL, worker, s)) {
            atomic_fetch_sub(&s->running, n_threads - n);
            break;
        }
    if (!n) {
        s->rc = fl_err_set(&s->err, -EAGAIN, "cannot start a thread");
        return s->rc;
    }
    while (atomic_load(&s->running) > 0) {
        struct timespec ts = { 0, 100 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        if (progress)
            progress(ctx, atomic_load(&s->done), total);
    }
    for (int i = 0; i < n; i++)
        pthread_join(tid[i], NULL);
    if (progress && !s->rc)
        progress(ctx, total, total);
    return s->rc;
}

/* Refuses a file that cannot fit on its filesystem, before writing any. */
static int check_space(const char *path, uint64_t size, struct fl_err *err)
{
    struct statvfs vfs;
    if (statvfs(path, &vfs))
        return 0; /* unknown: let the writes tell */
    uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    if (size > avail)
        return fl_err_set(err, -ENOSPC, "%s needs %llu bytes, its filesystem has %llu free",
                          path, (unsigned long long)size, (unsigned long long)avail);
    return 0;
}

int gen_write(const struct gen_params *p, const char *path, gen_progress_fn progress,
              void *ctx, struct fl_err *err)
{
    struct gen_plan plan;
    struct wstate s = { .lock = PTHREAD_MUTEX_INITIALIZER };
    int rc = plan_build(p, &plan, true);
    if (rc)
        return fl_err_set(err, rc, "out of memory");
    rc = gguf_writer_open(path, &s.w, err);
    if (rc) {
        plan_free(&plan);
        return rc;
    }
    s.plan = &plan;
    rc = lay_out(&plan, s.w);
    if (rc) {
        fl_err_set(err, rc, "cannot lay out %s: %s", path, strerror(-rc));
    } else if ((rc = check_space(path, gguf_writer_file_size(s.w), err))) {
        /* message set */
    } else {
        size_buffers(&s);
        gguf_writer_set_stream_lag(s.w, GEN_STREAM_LAG);
        rc = run_workers(&s, p->n_threads, progress, ctx);
        if (rc && err)
            *err = s.err;
        if (!rc)
            rc = gguf_writer_finish(s.w, err);
    }
    gguf_writer_close(s.w);
    plan_free(&plan);
    if (rc)
        unlink(path);
    return rc;
}

/* --- skew ------------------------------------------------------------------------- */

double gen_router_top8_share(const struct gen_params *p, int64_t il, int n_tokens)
{
    int64_t ne = p->n_expert, k = p->n_expert_used;
    if (ne <= 8)
        return 1.0;
    float *off = malloc((size_t)ne * sizeof(float));
    double *logit = malloc((size_t)ne * sizeof(double));
    uint64_t *count = calloc((size_t)ne, sizeof(uint64_t));
    double share = -1;
    if (off && logit && count) {
        gen_layer_offsets(p, il, off);
        uint64_t st = gen_mix(p->seed, 0x5ca1ab1eull + (uint64_t)il);
        /* the router's random rows see the rest of the normalised stream:
         * logit noise around the planted offsets. Its std, 0.6, is
         * calibrated on llama.cpp's own routing of generated qwen3moe
         * models over English text: llama.cpp comes out ~5 points higher */
        const double noise = 0.6;
        for (int t = 0; t < n_tokens; t++) {
            for (int64_t e = 0; e < ne; e++) {
                uint64_t a = gen_mix(st, (uint64_t)(t * ne + e)), b = gen_mix(a, 1);
                double u = ((double)(a >> 11) + 0.5) / 9007199254740992.0;
                double v = ((double)(b >> 11) + 0.5) / 9007199254740992.0;
                logit[e] = off[e] + noise * sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
            }
            for (int64_t j = 0; j < k; j++) { /* k passes of argmax */
                int64_t best = 0;
                for (int64_t e = 1; e < ne; e++)
                    if (logit[e] > logit[best])
                        best = e;
                count[best]++;
                logit[best] = -INFINITY;
            }
        }
        uint64_t top = 0;
        for (int j = 0; j < 8; j++) {
            int64_t best = 0;
            for (int64_t e = 1; e < ne; e++)
                if (count[e] > count[best])
                    best = e;
            top += count[best];
            count[best] = 0;
        }
        share = (double)top / ((double)n_tokens * (double)k);
    }
    free(off);
    free(logit);
    free(count);
    return share;
}
