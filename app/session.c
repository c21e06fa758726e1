/* session.c: model + KV cache + tokenizer + threads, glued for the CLI. */
#include "app/session.h"

#include "app/scheduler.h" /* ENG_SCHED_PLP_CHUNK: the rows the scheduler holds */
#include "base/out-file.h"

#include "app/calibrate.h"
#include "app/check-tensors.h"
#include "record/stats-json.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/cpu/cpu-backend.h"
#include "backend/cpu/cpu.h"
#include "backend/cpu/threadpool.h"
#include "backend/cuda/gpu.h"
#include "gguf/gguf.h"
#include "gguf/param-count.h"
#include "gguf/tensor-types.h"
#include "model/kv-cache.h"
#include "text/tokenizer.h"
#include "base/clock.h"
#include "base/units.h"
#include "pager/pager.h"
#include "pager/policy.h"
#include "plan/pager-layout.h"

struct eng_session {
    struct gguf_file *gguf;
    bool checked_tensors;        /* --check-tensors was asked (a draft model is checked too) */
    const uint8_t *base;         /* the pager's region */
    struct pager *pager;
    struct placement_plan *plan;
    struct eng_expert_source experts;
    struct fl_predictor *pred;   /* --prefetch: the engine's expert source over the pager */
    struct fl_predict_config predict;
    struct fl_numa *numa;
    bool stats;
    const char *stats_json;
    struct fl_out stats_out;     /* --stats-json's claim, from open to the report */
    struct fl_progress progress; /* the opening's long steps */
    size_t repacked, repack_total; /* bytes, for the progress report */
    int (*interrupted)(void);
    struct eng_model *model;
    struct eng_kv *kv;
    struct fl_tokenizer *tok;
    struct fl_pool *pool;
    struct eng_arena *arena;
    struct eng_ctx ctx;
    int n_batch, n_past;
    int n_seq, n_held; /* running sequences, then held prefixes (kv ids) */
    bool have_gpu;               /* a CUDA device was found (the plan may use the gpu tier) */
    uint64_t gpu_dropped;        /* bytes of host copies given back: only the GPU reads them */
    struct eng_session_params params; /* as opened (a later memory check's words and budget) */
};

/* --- the weights region ------------------------------------------------------
 * The pager maps the whole file as one region (offset in memory = offset in
 * file), reads the RAM tier up front and pages the disk tier (experts, by
 * default when the file does not fit the budget) under the RAM budget. */

static enum pager_tier plan_tier(void *ctx, int64_t tensor_index)
{
    /* gpu-tier tensors are host-resident too until the CUDA backend takes them */
    return placement_tier(ctx, tensor_index) == PL_TIER_DISK ? PAGER_TIER_DISK : PAGER_TIER_RAM;
}

/* A SIGBUS inside the region means the pager failed (read error, truncated
 * file, dead handler) and poisoned the page rather than hand out zeros: say
 * why in one line and exit, instead of dumping core. */
static struct pager *sigbus_pager;

static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
    (void)uctx;
    struct pager *p = sigbus_pager;
    const uint8_t *a = si->si_addr;
    if (p && a >= pager_base(p) && a < pager_base(p) + pager_size(p)) {
        struct fl_err e = { "weights region: the pager failed" };
        pager_error(p, &e);
        static const char prefix[] = "faultline: ";
        if (write(2, prefix, sizeof(prefix) - 1) < 0 || write(2, e.msg, strlen(e.msg)) < 0 ||
            write(2, "\n", 1) < 0)
            _exit(1);
        _exit(1);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void watch_sigbus(struct pager *p)
{
    struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO };
    sigemptyset(&sa.sa_mask);
    sigbus_pager = p;
    sigaction(SIGBUS, &sa, NULL);
}

/* The pager's staging buffers and threads go where the weights region goes:
 * the compute threads' node(s), so a read lands in local memory and the
 * install copies node-local. */
static void place_pager_memory(void *numa, void *addr, size_t len)
{
    (void)fl_numa_place(numa, addr, len);
}

static void bind_pager_thread(void *numa)
{
    (void)fl_numa_bind_thread(numa, 0, 1);
}

/* Without a device every GPU request falls back to the CPU, said in one
 * line: the plan's gpu -> ram warning, and the GPU flags that go unused. */
static void warn_no_gpu(const struct eng_session *s, const struct eng_session_params *p,
                        const char *why)
{
    const char *w = placement_warning(s->plan);
    const bool flags = !s->have_gpu && (p->gpu_flags || p->placement.vram_budget);
    if (!w && !flags)
        return;
    if (!w)
        fprintf(stderr, "faultline: no GPU (%s): --gpu-experts, --offload-min-batch and "
                "--vram-budget have no effect; running on the CPU\n", why);
    else if (flags)
        fprintf(stderr, "faultline: %s (%s); --gpu-experts, --offload-min-batch and "
                "--vram-budget have no effect\n", w, why);
    else
        fprintf(stderr, "faultline: %s%s%s%s\n", w, why ? " (" : "", why ? why : "", why ? ")" : "");
}

/* Past a cgroup's limit the kernel kills the process without a word, and a
 * budget below one layer's experts cannot page: refused now. Past
 * MemAvailable, swap or reclaim may still carry it: a warning. */
static int refuse_misfit(enum placement_misfit m, const char *path, const char *why,
                         struct fl_err *err)
{
    if (m == PL_BUDGET_BELOW_MIN || m == PL_OVER_CGROUP)
        return fl_err_set(err, -ENOMEM, "%s: %s", path, why);
    if (m == PL_OVER_RAM)
        fprintf(stderr, "faultline: warning: %s\n", why);
    return 0;
}

static int open_region(struct eng_session *s, const struct eng_session_params *p,
                       struct fl_err *err)
{
    struct placement_host host;
    placement_host_detect(&host);
    const char *no_gpu = NULL;
    host.have_gpu = s->have_gpu = eng_gpu_detect(&host.vram_available, &no_gpu);
    int rc = placement_plan_build(s->gguf, &p->placement, &host, &s->plan, err);
    if (rc)
        return rc;
    const char *why = NULL;
    uint64_t budget = placement_ram_budget(s->plan), min = placement_min_budget(s->plan);
    const enum placement_misfit misfit = placement_misfit(s->plan, &why);
    if ((rc = refuse_misfit(misfit, p->model_path, why, err)))
        return rc;
    warn_no_gpu(s, p, no_gpu);
    struct pager_config cfg;
    pager_config_init(&cfg);
    cfg.ram_budget = budget > min ? budget : min;
    cfg.mode = (enum pager_mode)p->pager_mode;
    cfg.cache = (enum pager_cache)p->cache;
    cfg.progress = p->progress;
    if (fl_numa_active(s->numa)) {
        cfg.place_memory = place_pager_memory;
        cfg.bind_thread = bind_pager_thread;
        cfg.place_ctx = s->numa;
    }
    struct pager_hot_unit *hot = NULL;
    if (p->hot_profile &&
        (rc = eng_hot_profile_load(p->hot_profile, &hot, &cfg.n_hot, err)))
        return rc;
    cfg.hot = hot;
    struct pager_layout layout;
    rc = placement_pager_layout(s->gguf, plan_tier, s->plan, &layout, err);
    if (!rc)
        rc = pager_open(p->model_path, &layout, &cfg, &s->pager, err);
    placement_pager_layout_free(&layout);
    free(hot);
    if (rc)
        return rc;
    s->base = pager_base(s->pager);
    if (pager_uses_uffd(s->pager))
        watch_sigbus(s->pager);
    /* resident and paged-in pages land on the compute threads' node(s) */
    if ((rc = fl_numa_place(s->numa, (void *)s->base, pager_size(s->pager))))
        return fl_err_set(err, rc, "numa: cannot place the weights region: %s", strerror(-rc));
    return 0;
}

/* Each worker thread binds itself to its node (a no-op unless --numa is on
 * and the machine has several nodes). */
static void bind_worker(void *arg, int ith, int nth)
{
    fl_numa_bind_thread(arg, ith, nth);
}

/* Physical cores this process may run on: distinct (package, core) pairs of
 * the CPUs in its affinity mask; all of them when topology is unreadable. */
static int physical_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 1;
    int n_cpu = CPU_COUNT(&set), n_core = 0;
    long seen[CPU_SETSIZE];
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &set))
            continue;
        char path[128];
        long pkg = 0, core = -1;
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        FILE *f = fopen(path, "r");
        if (!f || fscanf(f, "%ld", &core) != 1)
            core = -1;
        if (f)
            fclose(f);
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
        if ((f = fopen(path, "r"))) {
            if (fscanf(f, "%ld", &pkg) != 1)
                pkg = 0;
            fclose(f);
        }
        if (core < 0)
            return n_cpu > 0 ? n_cpu : 1;
        long id = pkg * 1000000 + core;
        int dup = 0;
        for (int i = 0; i < n_core && !dup; i++)
            dup = seen[i] == id;
        if (!dup)
            seen[n_core++] = id;
    }
    return n_core > 0 ? n_core : 1;
}

/* A matrix only the GPU reads now: its pages of the region go back (a
 * stray host read then faults instead of seeing zeros). */
static void host_copy_unused(void *ctx, const struct eng_tensor *t)
{
    struct eng_session *s = ctx;
    if (pager_drop_range(s->pager, t->offset, t->nbytes) == 0)
        s->gpu_dropped += t->nbytes;
}

/* The GPU context, when there is a device and something for it to do:
 * gpu-tier tensors, or experts --gpu-experts may bring over. */
static int open_gpu(struct eng_session *s, const struct eng_session_params *p,
                    struct fl_err *err)
{
    const bool experts = s->model->hp.n_expert > 0 && p->gpu_experts != ENG_GPU_EXPERTS_NONE;
    if (!s->have_gpu || (!placement_tier_bytes(s->plan, PL_TIER_GPU) && !experts))
        return 0;
    /* the device keeps an F16 cache only, and its whole pass lacks some
     * attention kinds (the arch says which): attention stays on the host
     * then, the weights the device holds multiply there */
    const char *host_only = s->model->hp.attention_host_only;
    const bool kv_on_host = p->no_kv_offload || eng_kv_type_k(s->kv) != FL_TYPE_F16 ||
                            eng_kv_type_v(s->kv) != FL_TYPE_F16 || host_only;
    const struct eng_gpu_options o = {
        .experts = (enum eng_gpu_experts)p->gpu_experts, .min_batch = p->offload_min_batch,
        .vram_budget = p->placement.vram_budget, .log = stderr, .kv_on_host = kv_on_host,
        .kv_bytes = kv_on_host ? 0 : eng_kv_bytes(s->kv) + eng_kv_rs_bytes(s->kv), /* recurrent state too */
        .verbose = p->placement.verbose, .lru_cache = p->cache == PAGER_CACHE_LRU,
        .host_copy_unused = host_copy_unused, .host_copy_ctx = s,
        .batch_invariant = p->n_seq > 1, /* a request's bits never depend on its neighbours */
    };
    int rc = eng_gpu_open(s->model, s->gguf, s->plan, &o, &s->ctx.gpu, err);
    if (!rc && s->ctx.gpu)
        s->ctx.pick = eng_gpu_pick; /* each pass: on the device, or the CPU's with offloads */
    if (!rc && s->ctx.gpu && host_only)
        fprintf(stderr, "faultline: %s runs on the CPU: the KV cache stays in RAM; the GPU "
                        "multiplies the weights it holds\n", host_only);
    /* experts the VRAM cache holds are not read ahead from disk: the GPU
     * will not touch their host bytes */
    if (!rc && s->ctx.gpu && s->pager)
        pager_set_held_elsewhere(s->pager, eng_gpu_holds_expert, s->ctx.gpu);
    return rc;
}

/* Weights the pager keeps in RAM and no GPU reads are rebuilt in the CPU
 * kernels' faster layouts (backend/cpu/repack.h); the region's copy of
 * their bytes is then given back. */
static bool repack_wanted(void *ctx, const struct eng_tensor *t)
{
    const struct eng_session *s = ctx;
    return placement_tier(s->plan, t->index) != PL_TIER_DISK;
}

static const char repack_step[] = "repacking for the CPU kernels";

static void repack_done(void *ctx, const struct eng_tensor *t, size_t done, size_t total)
{
    struct eng_session *s = ctx;
    s->repacked = done;
    s->repack_total = total;
    (void)pager_drop_range(s->pager, t->offset, t->nbytes); /* kept if it cannot */
    fl_progress_report(&s->progress, repack_step, "B", done, total, false);
}

static void repack_weights(struct eng_session *s, const struct eng_session_params *p)
{
    if (s->ctx.gpu || p->no_repack)
        return; /* the GPU uploads and copies the file layout */
    const int64_t n = eng_model_repack(s->model, s->pool, repack_wanted, repack_done, s);
    if (n > 0)
        fl_progress_report(&s->progress, repack_step, "B", s->repacked, s->repack_total, true);
    if (n > 0 && p->placement.verbose)
        fprintf(stderr, "faultline: %lld RAM-tier tensor(s) repacked for the CPU kernels\n",
                (long long)n);
}

/* The auto budget the plan lowered, given to the pager before anything is
 * paged; pinned-hot's experts chosen again within it. */
static int lower_budget(struct eng_session *s, const struct eng_session_params *p,
                        struct fl_err *err)
{
    const uint64_t budget = placement_ram_budget(s->plan);
    int rc = pager_set_budget(s->pager, budget);
    if (rc)
        return fl_err_set(err, rc, "%s: cannot lower the RAM budget", p->model_path);
    if (p->placement.verbose) {
        char a[32];
        fprintf(stderr, "faultline: auto RAM budget lowered to %s for the KV cache and scratch\n",
                fl_format_size(budget, a, sizeof(a)));
    }
    if (!p->hot_profile || p->cache != PAGER_CACHE_PINNED_HOT)
        return 0;
    struct pager_hot_unit *hot = NULL;
    int n = 0;
    if ((rc = eng_hot_profile_load(p->hot_profile, &hot, &n, err)))
        return rc;
    rc = pager_set_hot(s->pager, hot, n);
    free(hot);
    if (rc < 0)
        return fl_err_set(err, rc, "--hot-profile: %s", strerror(-rc));
    (void)pager_set_budget(s->pager, budget); /* the experts no longer hot go now */
    return 0;
}

/* The KV cache grows as its cells are written and the pass's scratch with
 * the tokens of a step and the positions they read: either past a memory
 * cgroup's limit would get the process killed deep into a long context, so
 * both are checked now, at their largest: n_seq decodes beside a -b chunk
 * of a prompt reading the whole context (a GPU keeps its cache in VRAM).
 * *scratch: that bound (0 with a GPU), for the arena to reserve: counted,
 * the scratch must not grow past it. */
/* The tokens of the largest step: n_seq decodes beside a -b chunk of a
 * prompt. */
static int largest_step(const struct eng_session *s, int n_ctx)
{
    return s->n_seq + (s->n_batch < n_ctx ? s->n_batch : n_ctx);
}

/* The scratch of the largest step reading the whole context. */
static uint64_t step_scratch(const struct eng_session *s, int n_ctx, int n_threads)
{
    const int n_tok = largest_step(s, n_ctx);
    return eng_cpu_scratch_bound(s->model, n_tok, n_ctx, n_tok, n_threads);
}

/* The scheduler's logits rows (one per sequence and a prompt_logprobs
 * chunk's) and a constrained answer's (the masked row, a row of zeros and a
 * scratch row): host memory beside the cache and the scratch. */
static uint64_t logits_rows(const struct eng_session *s)
{
    return (uint64_t)(s->n_seq + ENG_SCHED_PLP_CHUNK + 3) * (uint64_t)s->model->hp.n_vocab *
           sizeof(float);
}

/* beside: host bytes another part of the process takes (a draft model). */
static int check_memory_fits(struct eng_session *s, const struct eng_session_params *p,
                             int n_threads, uint64_t beside, uint64_t *scratch_out,
                             struct fl_err *err)
{
    *scratch_out = 0;
    if (s->have_gpu)
        return 0; /* its cache and activations are in VRAM */
    const int n_ctx = eng_kv_n_cells(s->kv);
    const int n_tok = largest_step(s, n_ctx);
    const uint64_t kv = eng_kv_bytes(s->kv) + eng_kv_rs_bytes(s->kv) + logits_rows(s);
    const uint64_t scratch = step_scratch(s, n_ctx, n_threads), all = kv + scratch + beside;
    *scratch_out = scratch;
    if (!placement_fits(s->plan, NULL))
        return 0; /* the plan's own misfit was said in open_region */
    char what[260], why[480], a[32], b[32], c[64] = "", d[32];
    if (beside)
        snprintf(c, sizeof(c), " and the draft model (%s)", fl_format_size(beside, d, sizeof(d)));
    snprintf(what, sizeof(what), "the KV cache of %d cells and the logits rows (%s) and the "
             "scratch of a %d-token step (%s)%s", n_ctx, fl_format_size(kv, a, sizeof(a)), n_tok,
             fl_format_size(scratch, b, sizeof(b)), c);
    enum placement_misfit m = placement_misfit_with(s->plan, all, what, why, sizeof(why));
    if (m != PL_FITS && placement_fit_auto_budget(s->plan, all)) {
        int rc = lower_budget(s, p, err);
        if (rc)
            return rc;
        m = placement_misfit_with(s->plan, all, what, why, sizeof(why));
    }
    return refuse_misfit(m, p->model_path, why, err);
}

int eng_session_fit_beside(struct eng_session *s, uint64_t bytes, struct fl_err *err)
{
    uint64_t scratch;
    return check_memory_fits(s, &s->params, s->ctx.n_threads, bytes, &scratch, err);
}

uint64_t eng_session_host_need(const struct eng_session *s)
{
    const int n_ctx = eng_kv_n_cells(s->kv);
    const uint64_t budget = eng_session_paged(s) ? placement_ram_budget(s->plan) : 0;
    return placement_tier_bytes(s->plan, PL_TIER_RAM) + budget + eng_kv_bytes(s->kv) +
           eng_kv_rs_bytes(s->kv) + logits_rows(s) + step_scratch(s, n_ctx, s->ctx.n_threads);
}

/* Host memory a cache of n_ctx cells of `cell` bytes takes with the
 * logits rows and the largest step's scratch. */
static uint64_t ctx_need(const struct eng_session *s, uint64_t cell, int n_ctx, int n_threads)
{
    return logits_rows(s) + cell * (uint64_t)n_ctx + step_scratch(s, n_ctx, n_threads);
}

/* The context without -c (or with -c 0), as llama.cpp's -c 0 and -fit give
 * it: the model's trained length, cut to what the memory beside the
 * placement plan holds with llama.cpp's 1 GiB margin (-fitt), in steps of
 * 256, never under 4096 (or the trained length when shorter). The plan
 * comes first: an auto expert budget already took its share of the memory,
 * so a paged model keeps its cache and gets the floor unless memory is
 * left (--ram-budget, or -c, chooses otherwise); at the floor,
 * check_memory_fits lowers an auto budget or says what does not fit, as
 * for any -c. With a GPU the cache lives in VRAM, which this does not
 * size: the floor. cell: the cache's bytes per cell. */
static int default_ctx(const struct eng_session *s, uint64_t cell, int n_threads)
{
    const int64_t train = s->model->hp.n_ctx_train;
    const int most = train < ENG_SESSION_MAX_CTX ? (int)train : ENG_SESSION_MAX_CTX;
    const int floor = most < ENG_SESSION_CTX_FLOOR ? most : ENG_SESSION_CTX_FLOOR;
    const uint64_t room = placement_ram_room(s->plan), margin = (uint64_t)1 << 30;
    if (s->have_gpu || room == UINT64_MAX || room <= margin)
        return floor;
    if (ctx_need(s, cell, most, n_threads) <= room - margin)
        return most;
    /* the largest multiple of 256 that fits, by bisection (the need grows
     * with the length): lo * 256 fits or is under the floor, hi * 256 does
     * not fit */
    int lo = floor / 256, hi = most / 256;
    while (hi - lo > 1) {
        const int mid = lo + (hi - lo) / 2;
        if (ctx_need(s, cell, mid * 256, n_threads) <= room - margin)
            lo = mid;
        else
            hi = mid;
    }
    return lo * 256 > floor ? lo * 256 : floor;
}

static int open_parts(struct eng_session *s, const struct eng_session_params *p,
                      struct fl_err *err)
{
    int rc = gguf_open_overridden(p->model_path, p->kv_overrides, p->n_kv_overrides, &s->gguf,
                                  err);
    if (rc)
        return rc;
    if (p->check_tensors) {
        const double t0 = fl_clock_s();
        uint64_t bytes;
        if ((rc = eng_check_tensors(s->gguf, &bytes, err)))
            return rc;
        if (p->placement.verbose)
            fprintf(stderr, "faultline: --check-tensors: %lld tensors, %.2f GiB, no NaN or "
                    "infinity (%.1f s)\n", (long long)gguf_n_tensors(s->gguf),
                    bytes / 1073741824.0, fl_clock_s() - t0);
    }
    if ((rc = open_region(s, p, err)))
        return rc;
    if ((rc = eng_model_load(s->gguf, s->base, &p->rope, &s->model, err)))
        return rc;
    if ((rc = fl_tokenizer_load(s->gguf, &s->tok, err)))
        return rc == -ENOENT ? fl_err_set(err, -EINVAL, "%s: the file has no tokenizer", p->model_path)
                             : rc;
    if (fl_tokenizer_warning(s->tok))
        fprintf(stderr, "faultline: %s\n", fl_tokenizer_warning(s->tok));
    s->checked_tensors = p->check_tensors;
    s->n_seq = p->n_seq > 0 ? p->n_seq : 1;
    /* held prefixes: a few beyond the running sequences' own, so that
     * several conversations stay cached; they only hold cells no request
     * needs (the scheduler gives them back first). A recurrent model's
     * entry also holds a copy of the state (MiBs a sequence): fewer */
    s->n_held = p->no_prompt_cache ? 0 : s->model->rs_conv_dim ? s->n_seq + 2 : 2 * s->n_seq + 6;
    const enum fl_type tk = p->cache_type_k ? p->cache_type_k : FL_TYPE_F16;
    const enum fl_type tv = p->cache_type_v ? p->cache_type_v : FL_TYPE_F16;
    const int nt = p->n_threads > 0 ? p->n_threads : physical_cores();
    const int n_ctx = p->n_ctx > 0 ? p->n_ctx : default_ctx(s, eng_kv_cell_bytes(s->model, tk, tv), nt);
    if (p->n_ctx <= 0 && p->placement.verbose)
        fprintf(stderr, "faultline: context %d cells (the model was trained on %lld; -c for "
                "another)\n", n_ctx, (long long)s->model->hp.n_ctx_train);
    if ((rc = eng_kv_create(s->model, n_ctx, s->n_seq + s->n_held, tk, tv, &s->kv, err)))
        return rc;
    uint64_t scratch;
    if ((rc = check_memory_fits(s, p, nt, 0, &scratch, err)))
        return rc;
    if (!(s->pool = fl_pool_create(nt)))
        return fl_err_set(err, -errno, "cannot start %d threads: %s", nt, strerror(errno));
    if (fl_numa_active(s->numa))
        fl_pool_run(s->pool, bind_worker, s->numa);
    if (eng_arena_create(&s->arena) ||
        (scratch && eng_arena_reserve(s->arena, (size_t)scratch)))
        return fl_err_set(err, -ENOMEM, "out of memory");
    s->ctx = (struct eng_ctx){ .m = s->model, .pool = s->pool, .n_threads = nt, .kv = s->kv,
                               .arena = s->arena, .cpu = &eng_cpu_backend };
    /* paged experts reach the pass through the predictor, which reads
     * ahead what it expects (a model without experts pages no unit: its
     * disk tier is read in 2 MiB chunks by faults or up front). A disk
     * tier of nextn blocks alone (min budget 0) is never read: no
     * predictor guesses for it. */
    const struct eng_hparams *hp = &s->model->hp;
    if (placement_min_budget(s->plan) > 0 && hp->n_expert > 0) {
        if ((rc = fl_predictor_create(&p->predict, s->pager, s->model, (int)hp->n_layer,
                                      (int)hp->n_expert, (int)hp->n_expert_used, &s->pred, err)))
            return rc;
        fl_predictor_source(s->pred, &s->experts);
        s->ctx.experts = &s->experts;
    }
    if ((rc = open_gpu(s, p, err)))
        return rc;
    repack_weights(s, p);
    return 0;
}

/* pinned-hot needs exactly one profile: a stats file or a calibration pass. */
static int check_cache_params(const struct eng_session_params *p, struct fl_err *err)
{
    bool pinned = p->cache == PAGER_CACHE_PINNED_HOT;
    if (p->calibrate && !pinned)
        return fl_err_set(err, -EINVAL, "--calibrate makes the profile of --cache pinned-hot; "
                          "add --cache pinned-hot");
    if (p->calibrate && p->hot_profile)
        return fl_err_set(err, -EINVAL, "--cache pinned-hot:%s and --calibrate %s: give one "
                          "profile", p->hot_profile, p->calibrate);
    if (pinned && !p->calibrate && !p->hot_profile)
        return fl_err_set(err, -EINVAL, "--cache pinned-hot needs a profile: "
                          "pinned-hot:STATS.json or --calibrate PROMPTS.txt");
    return 0;
}

/* The calibration pass (app/calibrate.h) picks the hot experts; the
 * statistics then start from zero, so --stats describes the run itself. */
static int calibrate(struct eng_session *s, const char *path, struct fl_err *err)
{
    if (!eng_session_paged(s)) {
        fprintf(stderr, "faultline: nothing is paged from disk; --calibrate skipped\n");
        return 0;
    }
    struct pager_hot_unit *hot = NULL;
    int n = 0;
    int64_t n_tok = 0;
    int rc = eng_calibrate(s, path, &s->progress, &hot, &n, &n_tok, err);
    if (rc)
        return rc;
    int chosen = pager_set_hot(s->pager, hot, n);
    free(hot);
    if (chosen < 0)
        return fl_err_set(err, chosen, "--calibrate: %s", strerror(-chosen));
    fprintf(stderr, "faultline: calibrated on %s: %lld tokens, %d of %d routed experts kept "
            "resident\n", path, (long long)n_tok, chosen, n);
    pager_stats_reset(s->pager);
    if (s->pred)
        fl_predictor_stats_reset(s->pred);
    return 0;
}

int eng_session_open(const struct eng_session_params *p, struct eng_session **out,
                     struct fl_err *err)
{
    if (!p->model_path)
        return fl_err_set(err, -EINVAL, "no model file given (-m FILE)");
    if (p->n_ctx < 0 || p->n_batch < 0 || p->n_threads < 0 || p->n_threads > 1024)
        return fl_err_set(err, -EINVAL, "bad context/batch/thread count");
    if (p->n_seq < 0 || p->n_seq > ENG_SESSION_MAX_SEQ)
        return fl_err_set(err, -EINVAL, "%d parallel sequences: 1 to %d are possible", p->n_seq,
                          ENG_SESSION_MAX_SEQ);
    fl_types_init();
    struct eng_session *s = calloc(1, sizeof(*s));
    if (!s)
        return fl_err_set(err, -ENOMEM, "out of memory");
    s->n_batch = p->n_batch > 0 ? p->n_batch : 512;
    s->params = *p;
    s->stats = p->stats;
    s->stats_json = p->stats_json;
    s->stats_out = (struct fl_out)FL_OUT_NONE;
    s->progress = p->progress;
    s->interrupted = p->interrupted;
    s->predict = p->predict;
    const char *inputs[] = { p->model_path, p->hot_profile, p->calibrate };
    int rc = check_cache_params(p, err);
    if (!rc && p->stats_json) /* a path that cannot be written fails before the work */
        rc = fl_out_begin(&s->stats_out, p->stats_json, inputs, 3, p->force, err);
    if (!rc)
        rc = fl_numa_init(p->numa, p->placement.verbose, stderr, &s->numa, err);
    if (!rc)
        rc = open_parts(s, p, err);
    if (!rc && p->calibrate)
        rc = calibrate(s, p->calibrate, err);
    if (rc) {
        eng_session_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

uint64_t eng_session_host_released(const struct eng_session *s)
{
    return s->gpu_dropped;
}

void eng_session_close(struct eng_session *s)
{
    if (!s)
        return;
    fl_pool_destroy(s->pool);
    if (s->pager)
        pager_set_held_elsewhere(s->pager, NULL, NULL);
    eng_gpu_close(s->ctx.gpu);
    eng_arena_destroy(s->arena);
    eng_kv_destroy(s->kv);
    fl_tokenizer_free(s->tok);
    eng_model_free(s->model);
    fl_predictor_free(s->pred);
    fl_out_abort(&s->stats_out); /* reported already, or no statistics to keep */
    if (sigbus_pager == s->pager)
        sigbus_pager = NULL;
    pager_close(s->pager);
    placement_plan_free(s->plan);
    fl_numa_free(s->numa);
    gguf_close(s->gguf);
    free(s);
}

const struct eng_model *eng_session_model(const struct eng_session *s) { return s->model; }
const struct fl_tokenizer *eng_session_tokenizer(const struct eng_session *s) { return s->tok; }
const struct gguf_file *eng_session_gguf(const struct eng_session *s) { return s->gguf; }
int eng_session_n_ctx(const struct eng_session *s) { return eng_kv_n_ctx(s->kv); }
int eng_session_n_past(const struct eng_session *s) { return s->n_past; }
int eng_session_n_threads(const struct eng_session *s) { return s->ctx.n_threads; }
uint64_t eng_session_file_size(const struct eng_session *s) { return gguf_file_size(s->gguf); }

const char *const *eng_session_kv_overrides(const struct eng_session *s, int *n)
{
    *n = s->params.n_kv_overrides;
    return s->params.kv_overrides;
}
int eng_session_n_seq(const struct eng_session *s) { return s->n_seq; }
int eng_session_n_held(const struct eng_session *s) { return s->n_held; }
uint64_t eng_session_min_budget(const struct eng_session *s)
{
    return placement_min_budget(s->plan);
}
int eng_session_n_batch(const struct eng_session *s) { return s->n_batch; }
bool eng_session_checked_tensors(const struct eng_session *s) { return s->checked_tensors; }

size_t eng_session_scratch_high_water(const struct eng_session *s)
{
    return eng_arena_high_water(s->arena);
}

size_t eng_session_scratch_held(const struct eng_session *s)
{
    return eng_arena_held(s->arena);
}
int eng_session_cells_free(const struct eng_session *s) { return eng_kv_cells_free(s->kv); }
const struct eng_kv *eng_session_kv(const struct eng_session *s) { return s->kv; }

void eng_session_reset(struct eng_session *s)
{
    s->n_past = 0;
    eng_kv_seq_truncate(s->kv, 0, 0);
}

int eng_session_rewind(struct eng_session *s, int n_past)
{
    if (n_past < 0 || n_past > s->n_past)
        return -EINVAL;
    /* a recurrent state goes back only where eng_session_rs_restore put it */
    if (n_past < s->n_past && s->model->rs_conv_dim && eng_kv_rs_pos(s->kv, 0) != n_past)
        return -ENOTSUP;
    /* sequence 0 of a single-sequence run shares no block: it keeps them all */
    eng_kv_seq_truncate(s->kv, 0, n_past);
    s->n_past = n_past;
    return 0;
}

int eng_session_seq_load(struct eng_session *s, int seq, int n_file, int n_keep, eng_kv_io_fn get,
                         void *arg, struct fl_err *err)
{
    if (s->ctx.gpu)
        return fl_err_set(err, -ENOTSUP, "with a GPU the KV cache is in VRAM: prompt states "
                          "are not read there");
    if (seq == 0)
        eng_session_reset(s);
    else
        eng_kv_seq_truncate(s->kv, seq, 0);
    int rc = eng_kv_seq_reserve(s->kv, seq, n_keep, err);
    if (!rc && (rc = eng_kv_seq_load(s->kv, seq, n_file, n_keep, get, arg)))
        fl_err_set(err, rc, "reading a prompt state: %s", strerror(-rc));
    if (rc) {
        eng_kv_seq_truncate(s->kv, seq, 0);
        return rc;
    }
    if (seq == 0)
        s->n_past = n_keep;
    return 0;
}

int eng_session_seq_reserve(struct eng_session *s, int seq, int n_pos, struct fl_err *err)
{
    return eng_kv_seq_reserve(s->kv, seq, n_pos, err);
}

void eng_session_seq_free(struct eng_session *s, int seq)
{
    eng_kv_seq_truncate(s->kv, seq, 0);
}

void eng_session_seq_truncate(struct eng_session *s, int seq, int n_pos)
{
    eng_kv_seq_truncate(s->kv, seq, n_pos);
}

int eng_session_seq_share(struct eng_session *s, int dst, int src, int n_pos, struct fl_err *err)
{
    if (eng_kv_recurrent(s->kv) && n_pos > 0 && eng_kv_rs_pos(s->kv, src) != n_pos)
        return fl_err_set(err, -EINVAL, "sequence %d's recurrent state covers %d positions, not "
                          "the %d shared", src, eng_kv_rs_pos(s->kv, src), n_pos);
    int rc = eng_kv_seq_share(s->kv, dst, src, n_pos, err);
    if (!rc && n_pos > 0 && eng_kv_recurrent(s->kv)) { /* the state at n_pos too */
        eng_kv_rs_copy(s->kv, dst, src);
        if (s->ctx.gpu)
            eng_gpu_rs_copy(s->ctx.gpu, dst, src);
    }
    return rc;
}

bool eng_session_recurrent(const struct eng_session *s)
{
    return eng_kv_recurrent(s->kv);
}

size_t eng_session_rs_seq_floats(const struct eng_session *s)
{
    return (size_t)(eng_kv_rs_bytes(s->kv) / sizeof(float) / (uint64_t)eng_kv_n_seq(s->kv));
}

int eng_session_rs_save(struct eng_session *s, int seq, float *buf)
{
    if (s->ctx.gpu)
        return -ENOTSUP;
    eng_kv_rs_save(s->kv, seq, buf);
    return 0;
}

int eng_session_rs_restore(struct eng_session *s, int seq, const float *buf, int n_pos)
{
    if (s->ctx.gpu)
        return -ENOTSUP;
    eng_kv_rs_restore(s->kv, seq, buf, n_pos);
    return 0;
}

int eng_session_seq_owned(const struct eng_session *s, int seq)
{
    return eng_kv_seq_owned(s->kv, seq);
}

int eng_session_seq_lacks(const struct eng_session *s, int seq, int n_pos)
{
    return eng_kv_seq_lacks(s->kv, seq, n_pos);
}

int64_t eng_session_n_params(const struct eng_session *s)
{
    struct gguf_param_count c;
    gguf_param_count(s->gguf, &c);
    return (int64_t)c.n_params;
}

int eng_session_set_threads(struct eng_session *s, int n, struct fl_err *err)
{
    if (n == s->ctx.n_threads)
        return 0;
    if (n < 1 || n > 1024)
        return fl_err_set(err, -EINVAL, "%d threads: 1 to 1024 are possible", n);
    /* the new pool is whole before the old one goes: a failure keeps the session usable */
    struct fl_pool *pool = fl_pool_create(n);
    if (!pool)
        return fl_err_set(err, -errno, "cannot start %d threads: %s", n, strerror(errno));
    if (fl_numa_active(s->numa))
        fl_pool_run(pool, bind_worker, s->numa);
    fl_pool_destroy(s->pool);
    s->pool = s->ctx.pool = pool;
    s->ctx.n_threads = n;
    return 0;
}

void eng_session_set_batch(struct eng_session *s, int n_batch)
{
    if (n_batch > 0)
        s->n_batch = n_batch;
}

void eng_session_set_experts(struct eng_session *s, const struct eng_expert_source *src)
{
    s->ctx.experts = src;
}

void eng_session_set_routing(struct eng_session *s, const struct eng_routing_sink *sink)
{
    s->ctx.routing = sink;
}

int eng_session_forward(struct eng_session *s, const struct eng_batch *b, struct fl_err *err)
{
    int rc = eng_forward(&s->ctx, b, err);
    if (rc && s->pager)
        pager_error(s->pager, err); /* when it failed, it names the tensor and offset */
    return rc;
}

int eng_session_eval(struct eng_session *s, const int32_t *tokens, int n, bool all_logits,
                     float *logits, struct fl_err *err)
{
    if (n < 1)
        return fl_err_set(err, -EINVAL, "nothing to evaluate");
    if (n > eng_kv_n_ctx(s->kv) - s->n_past)
        return fl_err_set(err, -ENOSPC, "%d tokens at position %d do not fit the context of %d",
                          n, s->n_past, eng_kv_n_ctx(s->kv));
    const int64_t n_vocab = s->model->hp.n_vocab;
    for (int done = 0; done < n;) {
        if (done && s->interrupted && s->interrupted())
            return fl_err_set(err, -EINTR, "interrupted");
        const int chunk = n - done < s->n_batch ? n - done : s->n_batch;
        float *rows = all_logits ? logits + (int64_t)done * n_vocab : logits;
        struct eng_batch b = { .tokens = tokens + done, .n_tok = chunk, .pos0 = s->n_past + done,
                               .all_logits = all_logits, .logits = rows };
        /* without all_logits each chunk overwrites the one row: the last wins */
        int rc = eng_session_forward(s, &b, err);
        if (rc)
            return rc;
        done += chunk;
    }
    s->n_past += n;
    return 0;
}

/* --- options and statistics --------------------------------------------------- */

void eng_session_params_init(struct eng_session_params *p)
{
    memset(p, 0, sizeof(*p));
    placement_options_init(&p->placement);
    p->pager_mode = PAGER_MODE_AUTO;
    p->numa = FL_NUMA_OFF;
    fl_predict_config_init(&p->predict);
    /* won the held-apart replays, one sequence and 16 together (docs/prefetch.md) */
    p->cache = PAGER_CACHE_LFU_NEXT;
    p->gpu_experts = ENG_GPU_EXPERTS_COPY;
}

struct pager *eng_session_pager(const struct eng_session *s)
{
    return s->pager;
}

bool eng_session_paged(const struct eng_session *s)
{
    return placement_tier_bytes(s->plan, PL_TIER_DISK) > 0;
}

struct eng_gpu *eng_session_gpu(const struct eng_session *s)
{
    return s->ctx.gpu;
}

struct fl_predictor *eng_session_predictor(const struct eng_session *s)
{
    return s->pred;
}

/* One line of prediction quality under --stats (docs/prefetch.md). */
static void print_predict(const struct fl_predictor *pr, const struct fl_predict_config *c,
                          FILE *out)
{
    struct fl_predict_stats st;
    char name[32];
    fl_predictor_stats(pr, &st);
    fprintf(out, "  prefetch %s: %.1f%% of routed experts resident when chosen",
            fl_predict_name(c, name, sizeof(name)),
            st.routed ? 100.0 * (double)st.ready / (double)st.routed : 0.0);
    if (st.scored)
        fprintf(out, "; %llu routings predicted, precision %.1f%%, recall %.1f%%",
                (unsigned long long)st.scored, 100.0 * fl_predict_precision(&st),
                100.0 * fl_predict_recall(&st));
    fputc('\n', out);
}

int eng_session_report(struct eng_session *s, struct fl_err *err)
{
    if (s->stats || s->stats_json)
        pager_settle(s->pager, 1000); /* a late stall, not an error: report what is counted */
    if (s->stats) {
        pager_stats_print(s->pager, stderr);
        if (s->pred)
            print_predict(s->pred, &s->predict, stderr);
        if (s->ctx.gpu)
            eng_gpu_print_stats(s->ctx.gpu, stderr);
        if (s->gpu_dropped) {
            char b[32];
            fprintf(stderr, "gpu: host copies of VRAM-only weights given back: %s\n",
                    fl_format_size(s->gpu_dropped, b, sizeof(b)));
        }
    }
    if (!s->stats_json)
        return 0;
    FILE *f = fopen(s->stats_out.tmp, "w");
    if (!f)
        return fl_err_set(err, -errno, "%s: %s", s->stats_json, strerror(errno));
    struct fl_predict_stats st;
    char name[32];
    struct eng_stats_prediction pred = { 0 };
    if (s->pred) {
        fl_predictor_stats(s->pred, &st);
        pred = (struct eng_stats_prediction){ fl_predict_name(&s->predict, name, sizeof(name)),
                                              st.routed, st.ready, st.scored, st.predicted,
                                              st.hits, st.chosen, fl_predict_precision(&st),
                                              fl_predict_recall(&st) };
    }
    int rc = eng_stats_json_write(f, s->pager, s->pred ? &pred : NULL);
    if (fclose(f) && !rc)
        rc = -errno;
    if (rc)
        return fl_err_set(err, rc, "%s: cannot write the statistics", s->stats_json);
    return fl_out_commit(&s->stats_out, err);
}
