/* test-batch-invariance: a request's logits are bit-identical whether it
 * runs alone or with others (app/scheduler.h, model/arch.h).
 *
 * For every tests/data model, resident and with its experts paged under the
 * smallest budget: five requests of different lengths (a 150-token prompt
 * takes chunks of 64, 64 and 22, so both attention paths and chunking run)
 * first each alone, then together on 4 sequences with staggered starts, one
 * of them waiting in the queue, one cancelled mid-way and one sampling with
 * a seed. Every logits row of every request must match its lone run byte
 * for byte, the sampled texts too, and the KV cells must all be free after.
 * With a device (the emulated one in its build) the same on the device:
 * the whole pass there with the experts in VRAM or paged through the VRAM
 * expert cache, and the CPU's pass with products sent there.
 * Prompts that start as an earlier one did then read its whole chunks from
 * the prompt cache and must give the same rows as with an empty cache.
 * Some models again with a quantized KV cache (-ctk/-ctv: every query on
 * the one-chunk kernel, the pass on the host where the cache is), and one
 * with its F16 cache kept in RAM beside the device (-nkvo).
 * Embedding requests (every row of a prompt, and its mean, last and first
 * row) give the lone rows' bits beside each other, in one step, and beside
 * two generating requests, in every mode (test-embeddings checks prompts
 * of many chunks against llama.cpp's vectors).
 * FL_BATCH_MODELS=a,b limits the models (tests/data names). An argument
 * `host` runs the resident and paged modes only, `device` the device's
 * (exit 77 without one), `device-even` / `device-odd` the device's on every
 * other model: ctest runs host and the two device halves side by side. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/scheduler.h"
#include "backend/cuda/gpu.h"
#include "tests/check.h"
#include "text/json-schema.h"
#include "text/tokenizer.h"

#define N_REQ 5
#define MAX_ROWS 16
#define N_CTX 512
#define TIGHT_CTX 48 /* three blocks: two growing requests cannot both fit */
#define TIGHT_GEN 40

static const char *const prompts[N_REQ] = {
    "The cat sat",
    "Once upon a time, in a land far away, there lived a",
    /* about 150 tokens: three chunks of n_batch 64 */
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
    "age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the "
    "season of Light, it was the season of Darkness, it was the spring of hope, it was the winter "
    "of despair, we had everything before us, we had nothing before us, we were all going direct "
    "to Heaven, we were all going direct the other way - in short, the period was so far like the "
    "present period, that some of its noisiest authorities insisted on its being received, for "
    "good or for evil, in the superlative degree of comparison only.",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "Question: what is the capital of France?\nAnswer: The capital of France is",
};
static const int max_tokens[N_REQ] = { 6, 12, 4, 7, 6 };

struct rec {
    int id, n_rows, n_vocab;
    float *rows[MAX_ROWS];
    int pos[MAX_ROWS];
    char text[512];
    enum eng_finish finish;
    bool done;
    struct fl_token_logprob lp[MAX_ROWS]; /* requests 0 and 3 ask for logprobs */
    float *embd;                          /* an embedding request's rows */
    size_t n_embd;                        /* ... their floats */
    int n_lp, n_tokens, n_cached;
    int32_t tokens[MAX_ROWS];
};

static void on_logits(void *ctx, void *user, int pos, const float *row, int n_vocab)
{
    (void)ctx;
    struct rec *r = user;
    if (r->n_rows == MAX_ROWS)
        return;
    r->rows[r->n_rows] = malloc(sizeof(float) * (size_t)n_vocab);
    memcpy(r->rows[r->n_rows], row, sizeof(float) * (size_t)n_vocab);
    r->pos[r->n_rows++] = pos;
    r->n_vocab = n_vocab;
}

static void on_restart(void *ctx, void *user)
{
    (void)ctx;
    struct rec *r = user;
    for (int i = 0; i < r->n_rows; i++)
        free(r->rows[i]);
    r->n_rows = 0;
}

static void on_done(void *ctx, void *user, const struct eng_req_result *res)
{
    (void)ctx;
    struct rec *r = user;
    snprintf(r->text, sizeof(r->text), "%s", res->text);
    r->finish = res->finish;
    r->n_lp = res->n_logprobs < MAX_ROWS ? res->n_logprobs : MAX_ROWS;
    if (res->logprobs)
        memcpy(r->lp, res->logprobs, sizeof(r->lp[0]) * (size_t)r->n_lp);
    r->n_cached = res->n_cached;
    r->n_tokens = res->n_tokens < MAX_ROWS ? res->n_tokens : MAX_ROWS;
    if (r->n_tokens > 0) /* a request cancelled before its first token has none */
        memcpy(r->tokens, res->tokens, sizeof(int32_t) * (size_t)r->n_tokens);
    r->n_embd = res->embd ? (size_t)res->n_embd_rows * (size_t)res->n_embd : 0;
    if (r->n_embd) {
        r->embd = malloc(sizeof(float) * r->n_embd);
        memcpy(r->embd, res->embd, sizeof(float) * r->n_embd);
    }
    r->done = true;
}

static void rec_free(struct rec *r)
{
    for (int i = 0; i < r->n_rows; i++)
        free(r->rows[i]);
    free(r->embd);
    memset(r, 0, sizeof(*r));
}

struct run {
    struct eng_session *s;
    int32_t *ids[N_REQ];
    int n_ids[N_REQ];
};

static int submit(struct eng_sched *q, struct run *ru, int i, struct rec *r)
{
    struct eng_req req = { .prompt = ru->ids[i], .n_prompt = ru->n_ids[i],
                           .max_tokens = max_tokens[i], .user = r,
                           .logprobs = i == 0 || i == 3, .top_logprobs = i == 3 ? 5 : 0,
                           .json_object = i == 4 /* JSON mode: masked rows, the same alone */ };
    fl_sampler_defaults(&req.sampling, 1234);
    if (i != 3)
        req.sampling.temperature = 0; /* greedy; request 3 samples with its seed */
    struct fl_err err;
    r->id = eng_sched_submit(q, &req, &err);
    CHECK(r->id >= 0, "submit: %s", err.msg);
    return r->id;
}

static const struct eng_sched_hooks hooks = { .done = on_done, .logits = on_logits,
                                              .restart = on_restart };

static void run_alone(struct run *ru, struct rec *alone)
{
    for (int i = 0; i < N_REQ; i++) {
        struct eng_sched *q;
        struct fl_err err;
        CHECK(eng_sched_create(ru->s, &hooks, &q, &err) == 0, "sched: %s", err.msg);
        submit(q, ru, i, &alone[i]);
        int rc;
        while ((rc = eng_sched_step(q, &err)) > 0)
            ;
        CHECK(rc == 0 && alone[i].done, "request %d alone: %s", i, rc ? err.msg : "not done");
        eng_sched_free(q);
    }
}

/* All together: 0 and 1 at once, 2 after two steps, 3 and 4 after three
 * (4 waits for a sequence), 1 cancelled after four. Returns the restarts
 * (a full cache). */
static uint64_t run_together(struct run *ru, struct rec *mixed)
{
    struct eng_sched *q;
    struct fl_err err;
    CHECK(eng_sched_create(ru->s, &hooks, &q, &err) == 0, "sched: %s", err.msg);
    submit(q, ru, 0, &mixed[0]);
    submit(q, ru, 1, &mixed[1]);
    int rc = 1, max_running = 0;
    for (int step = 0; rc > 0; step++) {
        if (step == 2)
            submit(q, ru, 2, &mixed[2]);
        if (step == 3) {
            submit(q, ru, 3, &mixed[3]);
            submit(q, ru, 4, &mixed[4]);
        }
        if (step == 4)
            eng_sched_cancel(q, mixed[1].id);
        rc = eng_sched_step(q, &err);
        max_running = eng_sched_running(q) > max_running ? eng_sched_running(q) : max_running;
        if (step < 4 && rc == 0)
            rc = 1; /* more is coming */
    }
    CHECK(rc == 0, "together: %s", err.msg);
    CHECK(max_running == 4, "4 sequences should have run at once (%d did)", max_running);
    struct eng_sched_stats st;
    eng_sched_get_stats(q, &st);
    eng_sched_free(q);
    return st.restarts;
}

/* --- embeddings ------------------------------------------------------------ */
#define N_EMBD 4
#define EMBD_TOK 14 /* request 2's first 14 tokens: the four requests' chunks share a step */
static const enum eng_pooling embd_pool[N_EMBD] = { ENG_POOL_NONE, ENG_POOL_MEAN, ENG_POOL_LAST,
                                                    ENG_POOL_CLS };

static void submit_embd(struct eng_sched *q, struct run *ru, int k, struct rec *r)
{
    struct eng_req req = { .prompt = ru->ids[2], .n_prompt = EMBD_TOK, .embed = true,
                           .pooling = embd_pool[k], .user = r };
    fl_sampler_defaults(&req.sampling, 1);
    struct fl_err err;
    r->id = eng_sched_submit(q, &req, &err);
    CHECK(r->id >= 0, "submit an embedding: %s", err.msg);
}

static void drain(struct eng_sched *q, const char *label)
{
    struct fl_err err;
    int rc;
    while ((rc = eng_sched_step(q, &err)) > 0)
        ;
    CHECK(rc == 0, "%s: %s", label, err.msg);
}

/* Every token's row of one prompt alone; then the four poolings of it at
 * once, with requests 0 and 3 generating beside them: the rows the same
 * bits, and the pooled vectors the lone rows' mean (summed in double, in
 * position order, as the scheduler sums), last and first, bit for bit. */
static void test_embeddings(struct run *ru, const char *label)
{
    struct rec alone = { 0 }, mixed[N_EMBD + 2] = { 0 };
    struct eng_sched *q;
    struct fl_err err;
    const size_t e = (size_t)eng_session_model(ru->s)->hp.n_embd;
    CHECK(eng_sched_create(ru->s, &hooks, &q, &err) == 0, "sched: %s", err.msg);
    submit_embd(q, ru, 0, &alone);
    drain(q, label);
    eng_sched_free(q);
    CHECK(eng_sched_create(ru->s, &hooks, &q, &err) == 0, "sched: %s", err.msg);
    for (int k = 0; k < N_EMBD; k++)
        submit_embd(q, ru, k, &mixed[k]);
    submit(q, ru, 0, &mixed[N_EMBD]);
    submit(q, ru, 3, &mixed[N_EMBD + 1]);
    drain(q, label);
    eng_sched_free(q);
    bool finite = alone.done && alone.finish == ENG_FINISH_STOP && alone.n_embd == e * EMBD_TOK;
    for (size_t v = 0; finite && v < alone.n_embd; v++)
        finite = isfinite(alone.embd[v]) != 0;
    CHECK(finite, "%s: the rows alone: finish %d, %zu floats (want %zu), or not finite", label,
          alone.finish, alone.n_embd, e * EMBD_TOK);
    CHECK(finite && mixed[0].n_embd == alone.n_embd &&
              !memcmp(mixed[0].embd, alone.embd, sizeof(float) * alone.n_embd),
          "%s: the rows differ beside other requests", label);
    for (int k = 1; finite && k < N_EMBD; k++)
        CHECK(mixed[k].done && mixed[k].n_embd == e, "%s: %s pooling: %zu floats", label,
              eng_pooling_name(embd_pool[k]), mixed[k].n_embd);
    const float *rows = alone.embd;
    for (size_t v = 0; finite && v < e && mixed[3].n_embd == e; v++) {
        double sum = 0;
        for (int t = 0; t < EMBD_TOK; t++)
            sum += rows[(size_t)t * e + v];
        const float mean = (float)(sum / EMBD_TOK);
        const float *last = &rows[(size_t)(EMBD_TOK - 1) * e + v];
        CHECK(!memcmp(&mixed[1].embd[v], &mean, sizeof(float)) &&
                  !memcmp(&mixed[2].embd[v], last, sizeof(float)) &&
                  !memcmp(&mixed[3].embd[v], &rows[v], sizeof(float)),
              "%s: value %zu beside other requests: mean %g last %g cls %g, the lone rows' %g %g %g",
              label, v, mixed[1].embd[v], mixed[2].embd[v], mixed[3].embd[v], mean, *last, rows[v]);
    }
    CHECK(mixed[N_EMBD].done && mixed[N_EMBD + 1].done, "%s: requests beside the embeddings", label);
    rec_free(&alone);
    for (int k = 0; k < N_EMBD + 2; k++)
        rec_free(&mixed[k]);
}

/* Request i's logprobs against the test's own log-softmax of its rows (row
 * k is the one token k was drawn from): long double sums, a sort of its own. */
static void check_logprobs(const char *label, int i, const struct rec *a)
{
    const bool want = i == 0 || i == 3;
    CHECK(want ? a->n_lp == a->n_tokens && a->n_lp > 0 : a->n_lp == 0,
          "%s: request %d: %d logprobs for %d tokens", label, i, a->n_lp, a->n_tokens);
    for (int k = 0; k < a->n_lp && k < a->n_rows; k++) {
        const float *row = a->rows[k];
        long double max = row[0], sum = 0;
        for (int v = 1; v < a->n_vocab; v++)
            max = row[v] > max ? row[v] : max;
        for (int v = 0; v < a->n_vocab; v++)
            sum += expl((long double)row[v] - max);
        const long double lse = max + logl(sum);
        const struct fl_token_logprob *e = &a->lp[k];
        CHECK(e->token.id == a->tokens[k] &&
                  fabsl((long double)e->token.logprob - (row[e->token.id] - lse)) < 1e-5L,
              "%s: request %d token %d: logprob %g of id %d, the test's %Lg", label, i, k,
              e->token.logprob, e->token.id, (long double)row[a->tokens[k]] - lse);
        CHECK(e->n_top == (i == 3 ? 5 : 0), "%s: request %d: %d top", label, i, e->n_top);
        for (int t = 0; t < e->n_top; t++) { /* rank t: exactly t tokens rank before it */
            const int32_t id = e->top[t].id;
            int ahead = 0;
            for (int v = 0; v < a->n_vocab; v++)
                ahead += row[v] > row[id] || (row[v] == row[id] && v < id);
            CHECK(ahead == t && fabsl((long double)e->top[t].logprob - (row[id] - lse)) < 1e-5L,
                  "%s: request %d token %d: top %d is id %d with %d ahead", label, i, k, t, id,
                  ahead);
        }
    }
}

/* Bit for bit, the entries' meaningful fields (not padding, not top[] past n_top). */
static bool same_logprobs(const struct fl_token_logprob *x, const struct fl_token_logprob *y, int n)
{
    for (int k = 0; k < n; k++) {
        if (x[k].token.id != y[k].token.id || x[k].n_top != y[k].n_top ||
            memcmp(&x[k].token.logprob, &y[k].token.logprob, sizeof(float)) ||
            x[k].text_start != y[k].text_start || x[k].text_end != y[k].text_end)
            return false;
        for (int t = 0; t < x[k].n_top; t++)
            if (x[k].top[t].id != y[k].top[t].id ||
                memcmp(&x[k].top[t].logprob, &y[k].top[t].logprob, sizeof(float)))
                return false;
    }
    return true;
}

static void compare(const char *label, const struct rec *alone, const struct rec *mixed)
{
    for (int i = 0; i < N_REQ; i++) {
        const struct rec *a = &alone[i], *m = &mixed[i];
        CHECK(m->done, "%s: request %d never ended", label, i);
        if (i == 1) { /* cancelled: what it got must still match */
            CHECK(m->finish == ENG_FINISH_CANCELLED, "%s: request 1 not cancelled", label);
            CHECK(m->n_rows <= a->n_rows, "%s: cancelled request got more rows", label);
        } else {
            CHECK(m->n_rows == a->n_rows && m->finish == a->finish && !strcmp(m->text, a->text),
                  "%s: request %d: %d rows, finish %d, \"%s\" alone vs %d, %d, \"%s\" batched",
                  label, i, a->n_rows, a->finish, a->text, m->n_rows, m->finish, m->text);
        }
        if (i != 1)
            CHECK(m->n_lp == a->n_lp && same_logprobs(m->lp, a->lp, a->n_lp),
                  "%s: request %d: logprobs differ batched", label, i);
        const int n = m->n_rows < a->n_rows ? m->n_rows : a->n_rows;
        for (int j = 0; j < n; j++)
            CHECK(m->pos[j] == a->pos[j] &&
                      !memcmp(m->rows[j], a->rows[j], sizeof(float) * (size_t)a->n_vocab),
                  "%s: request %d row %d (position %d) differs batched", label, i, j, a->pos[j]);
    }
}

/* Where a session runs: the CPU (resident, or experts paged under the
 * smallest budget), and with a device (the emulated one in its build)
 * the pass on the device with the experts in VRAM, the same with host
 * experts paged through the VRAM expert cache, and the CPU's pass with the
 * last block's and the head's products on the device (--gpu-experts cpu). */
enum mode { CPU, CPU_PAGED, GPU_VRAM, GPU_CACHE_PAGED, GPU_OFFLOAD, N_MODES };
static const char *const mode_names[N_MODES] = { "", " paged", " gpu", " gpu cache paged",
                                                 " cpu+gpu" };

/* The KV cache's types for the models run now (-ctk/-ctv; 0: F16), and
 * -nkvo (the cache kept in RAM with a device). */
static enum fl_type cache_k, cache_v;
static bool no_kv_offload;

static bool paged(enum mode m)
{
    return m == CPU_PAGED || m == GPU_CACHE_PAGED;
}

static int open_session(const char *path, enum mode mode, uint64_t budget, int n_ctx,
                        struct eng_session **s, struct fl_err *err)
{
    struct eng_session_params p;
    eng_session_params_init(&p);
    p.model_path = path;
    p.n_ctx = n_ctx;
    p.n_batch = 64;
    p.n_seq = 4;
    p.n_threads = 2;
    p.cache_type_k = cache_k;
    p.cache_type_v = cache_v;
    p.no_kv_offload = no_kv_offload;
    p.placement.disk_moe = paged(mode);
    p.placement.last_all_moe = PL_TIER_DISK;
    p.placement.ram_budget = budget;
    p.gpu_experts = ENG_GPU_EXPERTS_NONE;
    p.placement.n_gpu_layers = 0;
    if (mode == GPU_VRAM || mode == GPU_CACHE_PAGED) {
        p.placement.n_gpu_layers = -1;
        p.gpu_experts = ENG_GPU_EXPERTS_COPY;
        p.pager_mode = 2; /* explicit: no userfaultfd rights needed */
    }
    if (mode == GPU_VRAM) {
        p.placement.overrides[0] = "exps=gpu";
        p.placement.n_overrides = 1;
    }
    if (mode == GPU_OFFLOAD) { /* the head and the last block: never the whole pass */
        p.placement.n_gpu_layers = 2;
        p.gpu_experts = ENG_GPU_EXPERTS_CPU;
    }
    return eng_session_open(&p, s, err);
}

/* The device took part: passes on it, or products sent there. */
static void check_on_device(struct eng_session *s, enum mode mode, const char *label)
{
    if (mode < GPU_VRAM)
        return;
    const struct eng_gpu *g = eng_session_gpu(s);
    CHECK(g && eng_gpu_ops(g) > 0, "%s: nothing ran on the device", label);
    /* the device keeps an F16 cache only, and has no lightning indexer nor
     * per-channel delta rule (hp.attention_host_only) */
    if (cache_k || cache_v || no_kv_offload || eng_session_model(s)->hp.attention_host_only)
        CHECK(eng_gpu_passes(g) == 0, "%s: a pass ran on the device with the cache on the host",
              label);
    else
        CHECK(mode == GPU_OFFLOAD || eng_gpu_passes(g) > 0, "%s: no pass on the device", label);
}

/* A full cache: requests 0 and 1, each run to TIGHT_GEN tokens (or the
 * context), in a cache that holds only one of them whole; the younger
 * starts over when the cache runs out and must still give its lone rows. */
static uint64_t test_tight(const char *path, enum mode mode, uint64_t budget, struct run *big,
                           const char *label)
{
    struct run ru = *big;
    struct fl_err err;
    if (open_session(path, mode, budget, TIGHT_CTX, &ru.s, &err)) {
        CHECK(0, "%s: %s", label, err.msg);
        return 0;
    }
    struct rec alone[2] = { 0 }, both[2] = { 0 };
    struct eng_sched *q;
    uint64_t restarts = 0;
    for (int pass = 0; pass < 3; pass++) { /* 0 alone, 1 alone, both */
        CHECK(eng_sched_create(ru.s, &hooks, &q, &err) == 0, "sched: %s", err.msg);
        for (int i = 0; i < 2; i++) {
            if (pass < 2 && pass != i)
                continue;
            struct eng_req req = { .prompt = ru.ids[i], .n_prompt = ru.n_ids[i],
                                   .max_tokens = TIGHT_GEN, .ignore_eos = true,
                                   .user = pass < 2 ? &alone[i] : &both[i] };
            fl_sampler_defaults(&req.sampling, 99 + (uint64_t)i);
            CHECK(eng_sched_submit(q, &req, &err) >= 0, "submit: %s", err.msg);
        }
        int rc;
        while ((rc = eng_sched_step(q, &err)) > 0)
            ;
        CHECK(rc == 0, "%s tight: %s", label, err.msg);
        struct eng_sched_stats st;
        eng_sched_get_stats(q, &st);
        restarts = st.restarts;
        eng_sched_free(q);
    }
    CHECK(restarts > 0, "%s: a %d-cell cache should have made a request start over", label,
          TIGHT_CTX);
    for (int i = 0; i < 2; i++) {
        CHECK(both[i].done && both[i].n_rows == alone[i].n_rows &&
                  !strcmp(both[i].text, alone[i].text),
              "%s tight: request %d: %d rows \"%s\" alone vs %d \"%s\"", label, i,
              alone[i].n_rows, alone[i].text, both[i].n_rows, both[i].text);
        for (int j = 0; j < both[i].n_rows && j < alone[i].n_rows; j++)
            CHECK(!memcmp(both[i].rows[j], alone[i].rows[j], sizeof(float) * (size_t)alone[i].n_vocab),
                  "%s tight: request %d row %d differs", label, i, j);
        rec_free(&alone[i]);
        rec_free(&both[i]);
    }
    eng_session_close(ru.s);
    return restarts;
}

/* --- the prompt cache --------------------------------------------------------
 * Prompts that start with request 2's (150 tokens or more: chunks of 64):
 * its first 140 tokens then request 4's, its first 100 then request 0's,
 * and all of it then request 3's. Run after request 2 (the first two from
 * the cache entry it left) and beside a second run of it (the third from
 * its running sequence, after its second chunk), each must give the rows
 * it gives alone with an empty cache, having read 128, 64 and 128 cached
 * positions. A recurrent model's entries are read whole or not at all
 * (its state is at an entry's end) and a running sequence lends nothing:
 * a prompt reads request 2's whole units E only if it holds all of them,
 * and the third, admitted before request 2's second run kept its entry,
 * reads nothing. */
#define N_PFX 3
struct pfx {
    int32_t *ids[N_PFX];
    int n[N_PFX], want[N_PFX];
};

/* Request 2's entry: its whole units. */
static int entry_len(const struct run *ru)
{
    return ru->n_ids[2] / 64 * 64;
}

/* What a prompt of n tokens whose first `common` are request 2's reads
 * from the entry request 2 left. */
static int reads(const struct run *ru, int common, int n)
{
    const int e = entry_len(ru), c = common < n - 1 ? common : n - 1;
    if (eng_session_n_held(ru->s) == 0)
        return 0;
    if (eng_session_recurrent(ru->s))
        return c >= e ? e : 0;
    return (c < e ? c : e) / 64 * 64;
}

static void make_prefixed(const struct run *ru, struct pfx *p)
{
    static const int head[N_PFX] = { 140, 100, -1 }, tail[N_PFX] = { 4, 0, 3 };
    for (int k = 0; k < N_PFX; k++) {
        const int h = head[k] < 0 ? ru->n_ids[2] : head[k], t = tail[k];
        p->n[k] = h + ru->n_ids[t] - 1; /* the tail's own BOS left out */
        p->ids[k] = malloc(sizeof(int32_t) * (size_t)p->n[k]);
        memcpy(p->ids[k], ru->ids[2], sizeof(int32_t) * (size_t)h);
        memcpy(p->ids[k] + h, ru->ids[t] + 1, sizeof(int32_t) * (size_t)(ru->n_ids[t] - 1));
        /* request 2's whole chunks: from its entry, or its running copy's
         * (the third waits for them; a recurrent one lends nothing) */
        p->want[k] = k == 2 && eng_session_recurrent(ru->s) ? 0 : reads(ru, h, p->n[k]);
    }
}

static void submit_ids(struct eng_sched *q, const int32_t *ids, int n, struct rec *r)
{
    struct eng_req req = { .prompt = ids, .n_prompt = n, .max_tokens = 5, .user = r,
                           .logprobs = true };
    fl_sampler_defaults(&req.sampling, 77);
    struct fl_err err;
    r->id = eng_sched_submit(q, &req, &err);
    CHECK(r->id >= 0, "submit: %s", err.msg);
}


/* got, run with the prompt cache, against its lone run: the cached
 * positions it read, its text, logprobs and every logits row. */
static void check_as_alone(const char *label, const char *what, const struct rec *got,
                           int want_cached, const struct rec *alone)
{
    CHECK(got->done && got->n_cached == want_cached, "%s: %s read %d cached positions, not %d",
          label, what, got->n_cached, want_cached);
    CHECK(got->n_rows == alone->n_rows && !strcmp(got->text, alone->text) &&
              got->n_lp == alone->n_lp && same_logprobs(got->lp, alone->lp, alone->n_lp),
          "%s: %s: \"%s\" alone, \"%s\" from the cache", label, what, alone->text, got->text);
    for (int j = 0; j < got->n_rows && j < alone->n_rows; j++)
        CHECK(!memcmp(got->rows[j], alone->rows[j], sizeof(float) * (size_t)alone->n_vocab),
              "%s: %s: row %d differs from the cache", label, what, j);
}

/* Request 2 and prefixed prompt 0 started together: the second waits for
 * the first's chunks; with cancel, the first is cancelled after its first
 * chunk, and the second reads that chunk from the entry it left. */
static void test_started_together(struct run *ru, const struct pfx *p, const struct rec *alone0,
                                  bool cancel, const char *label)
{
    const bool held = eng_session_n_held(ru->s) > 0;
    struct rec both[2] = { 0 };
    struct eng_sched *q;
    struct fl_err err;
    CHECK(eng_sched_create(ru->s, &hooks, &q, &err) == 0, "sched: %s", err.msg);
    submit_ids(q, ru->ids[2], ru->n_ids[2], &both[0]);
    submit_ids(q, p->ids[0], p->n[0], &both[1]);
    if (cancel) {
        CHECK(eng_sched_step(q, &err) == 1, "%s: %s", label, err.msg);
        eng_sched_cancel(q, both[0].id);
    }
    drain(q, label);
    eng_sched_free(q);
    CHECK(!cancel || both[0].finish == ENG_FINISH_CANCELLED, "%s: the lender was not cancelled",
          label);
    check_as_alone(label, cancel ? "lender cancelled" : "started together", &both[1],
                   !held || eng_session_recurrent(ru->s) ? 0 : cancel ? 64 : p->want[0], alone0);
    rec_free(&both[0]);
    rec_free(&both[1]);
}

/* A prompt that needs the cells the entry holds, behind one that reads the
 * entry: it waits (the entry gives nothing back while read, and stays),
 * then the entry goes and it runs; the reader answers as alone. q holds
 * request 2's entry. */
static void test_waiting_for_cells(struct run *ru, struct eng_sched *q, const struct pfx *p,
                                   const struct rec *alone2, const char *label)
{
    const bool held = eng_session_n_held(ru->s) > 0;
    struct rec big = { 0 }, reader = { 0 };
    struct fl_err err;
    struct eng_sched_stats st;
    eng_sched_get_stats(q, &st);
    const int entries = st.cache_entries;
    const int n_big = N_CTX - 40;
    int32_t *ids = malloc(sizeof(int32_t) * n_big);
    for (int i = 0; i < n_big; i++)
        ids[i] = ru->ids[3][i % ru->n_ids[3]];
    submit_ids(q, p->ids[2], p->n[2], &reader);
    submit_ids(q, ids, n_big, &big);
    CHECK(eng_sched_step(q, &err) == 1, "%s: %s", label, err.msg);
    eng_sched_get_stats(q, &st);
    CHECK(eng_sched_queued(q) == 1 && st.cache_entries == entries && (entries > 0) == held &&
              st.cache_evicted == 0,
          "%s: a prompt waiting for cells dropped %llu entries (%d left, %d queued)", label,
          (unsigned long long)st.cache_evicted, st.cache_entries, eng_sched_queued(q));
    drain(q, label);
    eng_sched_get_stats(q, &st);
    CHECK(big.done && big.finish != ENG_FINISH_ERROR && (st.cache_evicted > 0) == held,
          "%s: a long prompt behind cached prefixes: finish %d, %llu entries evicted", label,
          big.finish, (unsigned long long)st.cache_evicted);
    check_as_alone(label, "the entry's reader", &reader,
                   reads(ru, ru->n_ids[2], p->n[2]), alone2);
    rec_free(&big);
    rec_free(&reader);
    free(ids);
}

static int test_prefix(struct run *ru, const char *label)
{
    struct pfx p;
    const bool held = eng_session_n_held(ru->s) > 0;
    make_prefixed(ru, &p);
    struct rec alone[N_PFX] = { 0 }, cached[N_PFX] = { 0 }, first[2] = { 0 };
    struct eng_sched *q;
    struct fl_err err;
    for (int k = 0; k < N_PFX; k++) { /* alone: a scheduler of its own, an empty cache */
        CHECK(eng_sched_create(ru->s, &hooks, &q, &err) == 0, "sched: %s", err.msg);
        submit_ids(q, p.ids[k], p.n[k], &alone[k]);
        drain(q, label);
        eng_sched_free(q);
        CHECK(alone[k].n_cached == 0, "%s: nothing is cached alone", label);
    }
    CHECK(eng_sched_create(ru->s, &hooks, &q, &err) == 0, "sched: %s", err.msg);
    submit_ids(q, ru->ids[2], ru->n_ids[2], &first[0]);
    drain(q, label);
    submit_ids(q, p.ids[0], p.n[0], &cached[0]); /* both from the entry request 2 left */
    submit_ids(q, p.ids[1], p.n[1], &cached[1]);
    submit_ids(q, ru->ids[2], ru->n_ids[2], &first[1]);
    drain(q, label);
    struct eng_sched_stats st;
    eng_sched_get_stats(q, &st);
    CHECK(st.prompt_cached == (uint64_t)(p.want[0] + p.want[1] +
                                         reads(ru, ru->n_ids[2], ru->n_ids[2])) &&
              (st.cache_entries > 0) == held,
          "%s: %llu positions read from the cache, %d entries", label,
          (unsigned long long)st.prompt_cached, st.cache_entries);
    const int reused = (int)st.prompt_cached;
    test_waiting_for_cells(ru, q, &p, &alone[2], label);
    eng_sched_free(q);
    CHECK(eng_sched_create(ru->s, &hooks, &q, &err) == 0, "sched: %s", err.msg);
    submit_ids(q, ru->ids[2], ru->n_ids[2], &first[1]);
    for (int step = 0; step < 2; step++) /* its first two chunks */
        CHECK(eng_sched_step(q, &err) == 1, "%s: %s", label, err.msg);
    submit_ids(q, p.ids[2], p.n[2], &cached[2]); /* waits for the running one's chunks */
    drain(q, label);
    eng_sched_free(q);
    test_started_together(ru, &p, &alone[0], false, label);
    test_started_together(ru, &p, &alone[0], true, label);
    for (int k = 0; k < N_PFX; k++) {
        char what[32];
        snprintf(what, sizeof(what), "prefixed prompt %d", k);
        check_as_alone(label, what, &cached[k], p.want[k], &alone[k]);
    }
    for (int k = 0; k < N_PFX; k++) {
        rec_free(&alone[k]);
        rec_free(&cached[k]);
        free(p.ids[k]);
    }
    rec_free(&first[0]);
    rec_free(&first[1]);
    return reused + p.want[2];
}

static void test_model(const char *dir, const char *name, enum mode mode)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/tests/data/%s.gguf", dir, name);
    struct run ru = { 0 };
    struct fl_err err;
    uint64_t budget = 0;
    if (paged(mode)) { /* the smallest budget the file allows */
        if (open_session(path, CPU_PAGED, 0, N_CTX, &ru.s, &err)) {
            CHECK(0, "%s: %s", name, err.msg);
            return;
        }
        budget = eng_session_min_budget(ru.s);
        eng_session_close(ru.s);
    }
    if (open_session(path, mode, budget, N_CTX, &ru.s, &err)) {
        CHECK(0, "%s%s: %s", name, mode_names[mode], err.msg);
        return;
    }
    for (int i = 0; i < N_REQ; i++) {
        const struct fl_tokenizer *tok = eng_session_tokenizer(ru.s);
        ru.n_ids[i] = fl_tokenize_alloc(tok, prompts[i], strlen(prompts[i]), true, false, &ru.ids[i]);
        CHECK(ru.n_ids[i] > 0, "%s: tokenize", name);
    }
    CHECK(ru.n_ids[2] > 140, "%s: prompt 2 should take three chunks (%d tokens)", name, ru.n_ids[2]);
    struct rec alone[N_REQ] = { 0 }, mixed[N_REQ] = { 0 };
    const int cells = eng_session_cells_free(ru.s);
    run_alone(&ru, alone);
    run_together(&ru, mixed);
    char label[160];
    snprintf(label, sizeof(label), "%s%s%s%s%s%s", name, mode_names[mode],
             no_kv_offload ? " -nkvo" : "", cache_k ? " k " : "",
             cache_k ? fl_type_name(cache_k) : "", cache_v ? " v " : "");
    if (cache_v)
        snprintf(label + strlen(label), sizeof(label) - strlen(label), "%s", fl_type_name(cache_v));
    compare(label, alone, mixed);
    for (int i = 0; i < N_REQ; i++)
        if (i != 1)
            check_logprobs(label, i, &alone[i]);
    struct fl_schema *obj; /* request 4's answer is the start of a JSON object */
    struct fl_schema_state jp;
    CHECK(!fl_schema_any_object(&obj), "out of memory");
    fl_schema_init(obj, &jp);
    CHECK(fl_schema_feed(obj, &jp, alone[4].text, strlen(alone[4].text)) && alone[4].text[0],
          "%s: JSON mode's answer \"%s\" is not an object's start", label, alone[4].text);
    fl_schema_free(obj);
    check_on_device(ru.s, mode, label);
    CHECK(eng_session_cells_free(ru.s) == cells, "%s: %d KV cells free after, %d before", label,
          eng_session_cells_free(ru.s), cells);
    const int reused = test_prefix(&ru, label);
    CHECK(eng_session_cells_free(ru.s) == cells, "%s: %d KV cells free after the prompt cache, "
          "%d before", label, eng_session_cells_free(ru.s), cells);
    test_embeddings(&ru, label);
    CHECK(eng_session_cells_free(ru.s) == cells, "%s: %d KV cells free after the embeddings, "
          "%d before", label, eng_session_cells_free(ru.s), cells);
    const uint64_t restarts = test_tight(path, mode, budget, &ru, label);
    printf("%-36s 5 requests alone = batched (4 sequences, queue, cancel): %d+%d+%d+%d+%d rows; "
           "4 embeddings; full cache: %llu restarts; prompt cache: %d positions reused\n", label, alone[0].n_rows,
           alone[1].n_rows, alone[2].n_rows, alone[3].n_rows, alone[4].n_rows,
           (unsigned long long)restarts, reused);
    for (int i = 0; i < N_REQ; i++) {
        rec_free(&alone[i]);
        rec_free(&mixed[i]);
        free(ru.ids[i]);
    }
    eng_session_close(ru.s);
}

int main(int argc, char **argv)
{
    const char *part = argc > 1 ? argv[1] : "";
    const bool host = strncmp(part, "device", 6) != 0, on_device = strcmp(part, "host") != 0;
    /* device-even / device-odd: the models of that parity (index in each list) */
    const int parity = !strcmp(part, "device-even") ? 0 : !strcmp(part, "device-odd") ? 1 : -1;
    const char *dir = getenv("FL_SOURCE_DIR") ? getenv("FL_SOURCE_DIR") : ".";
    const char *only = getenv("FL_BATCH_MODELS");
    static const char *const models[] = { "qwen3moe-tiny-F16", "qwen3moe-tiny-Q8_0",
                                          "mixtral-tiny-Q4_K_M", "deepseek2-tiny-F16",
                                          "gpt-oss-tiny-MXFP4", "glm4moe-tiny-F16",
                                          "glm4moe-tiny-Q8_0", "minimax-m2-tiny-F16",
                                          "minimax-m2-tiny-Q8_0", "qwen35moe-tiny-F16",
                                          "qwen35moe-tiny-Q8_0", "qwen3next-tiny-F16",
                                          "qwen3next-tiny-Q8_0", "qwen3next-ssm-in-tiny-F16",
                                          "deepseek32-tiny-F16", "glm-dsa-tiny-F16",
                                          "kimi-linear-tiny-F16", "kimi-k3-tiny-F16",
                                          "minimax-m3-tiny-F16" };
    uint64_t vram;
    const char *why;
    const bool found = eng_gpu_detect(&vram, &why), device = found && on_device;
    if (!host && !device) {
        printf("device modes not run: %s\n", why);
        return 77;
    }
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
        if (only && !strstr(only, models[i]))
            continue;
        for (int m = CPU; m < N_MODES; m++)
            if (m < GPU_VRAM ? host : device && (parity < 0 || (int)(i % 2) == parity))
                test_model(dir, models[i], (enum mode)m);
    }
    /* quantized caches: a plain model, sliding windows and sinks, a hybrid
     * one (recurrent layers beside attention), K and V of different types,
     * a latent cache with sparse attention's keys beside it; and an F16
     * cache kept in RAM beside a device (-nkvo) */
    static const struct { const char *model; enum fl_type k, v; bool nkvo; } host_kv[] = {
        { "qwen3moe-tiny-Q8_0", FL_TYPE_Q8_0, FL_TYPE_Q8_0, false },
        { "gpt-oss-tiny-MXFP4", FL_TYPE_Q8_0, FL_TYPE_Q8_0, false },
        { "qwen35moe-tiny-Q8_0", FL_TYPE_Q8_0, FL_TYPE_Q8_0, false },
        { "mixtral-tiny-Q4_K_M", FL_TYPE_Q4_0, FL_TYPE_F16, false },
        { "qwen3moe-tiny-F16", 0, 0, true },
        { "deepseek32-tiny-F16", FL_TYPE_Q8_0, FL_TYPE_Q8_0, false },
    };
    for (size_t i = 0; i < sizeof(host_kv) / sizeof(host_kv[0]); i++) {
        if (only && !strstr(only, host_kv[i].model))
            continue;
        cache_k = host_kv[i].k, cache_v = host_kv[i].v, no_kv_offload = host_kv[i].nkvo;
        for (int m = no_kv_offload ? GPU_VRAM : CPU; m < N_MODES; m++)
            if (m < GPU_VRAM ? host
                             : device && m != GPU_CACHE_PAGED && (parity < 0 || (int)(i % 2) == parity))
                test_model(dir, host_kv[i].model, (enum mode)m);
    }
    if (on_device && !found)
        printf("device modes not run: %s\n", why);
    return check_summary("test-batch-invariance");
}
