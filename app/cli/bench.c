/* bench.c: `faultline bench` — prompt processing (ppN) and generation (tgN)
 * speed, measured and printed the way llama-bench does so the two tables
 * can be put side by side: random token ids (BOS first when the file adds
 * one), a warmup run, the KV cache cleared before each repetition, t/s as
 * mean ± sample standard deviation over the repetitions.
 *
 * With -npp/-ntg/-npl it is llama-batched-bench instead: B sequences read
 * a PP-token prompt each (n_batch tokens per forward call), then generate
 * TG tokens together (one token of each per call), for every combination,
 * printed in that tool's table. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli/commands.h"
#include "app/cli/engine-args.h"
#include "backend/cpu/cpu.h"
#include "gguf/gguf.h"
#include "app/cli/session-flags.h"
#include "app/session.h"
#include "gguf/tensor-types.h"
#include "text/tokenizer.h"
#include "base/clock.h"
#include "base/units.h"
#include "pager/pager.h"
#include "app/predict.h"
#include "model/arch.h"
#include "model/kv-cache.h"

#define BENCH_MAX_LIST 16

/* -npp 128,256: a comma list of counts */
struct bench_list {
    int v[BENCH_MAX_LIST];
    int n;
};

struct bench_opts {
    struct eng_session_params sp;
    int n_prompt, n_gen, reps;
    struct bench_list npp, ntg, npl; /* any given: the batched mode */
    int seed;                  /* --seed: the random token ids' stream */
    uint64_t disk_bw;          /* --disk-bw: bytes/s, for the I/O bound column */
};

/* The paging columns of one test: counters around its timed repetitions. */
struct paging_rows {
    char test[64][32]; /* the first 64 (batched: two per case) */
    struct fl_paging_row row[64];
    int n;
};

static int usage(FILE *out)
{
    fprintf(out, "usage: faultline bench -m MODEL [-p 512] [-n 128] [-t T] [-b 512] [-r 5] [--disk-bw SIZE]\n"
                 "                       [--seed 1234]\n"
                 "Prints llama-bench's table: pp<P> (one batch of P tokens) and tg<N> (N single-\n"
                 "token decodes), t/s as mean ± sd over R repetitions. -p 0 or -n 0 skips a test.\n"
                 "With experts paged from disk a second table gives, per test, the cache hit rate,\n"
                 "prediction precision/recall, bytes read and stall time per token, and the I/O\n"
                 "bound (--disk-bw: the disk's read bandwidth in bytes/s, e.g. 3G). Token ids are\n"
                 "random, the same in every run unless --seed changes them (a profiling run for\n"
                 "--cache pinned-hot:STATS.json should not see the measured tokens).\n"
                 "\n"
                 "       faultline bench -m MODEL -npp 128,256 -ntg 32 -npl 1,16,64 [-c CELLS] ...\n"
                 "llama-batched-bench's table: for each prompt length PP, generation length TG\n"
                 "and B sequences, B prompts of PP tokens (-b tokens per forward call), then TG\n"
                 "steps of one token per sequence. -c: the KV cells all sequences share (default:\n"
                 "enough for the largest case; cases that do not fit are skipped).\n");
    eng_session_print_usage(out);
    return out == stdout ? 0 : 2;
}

/* "1,16,64" into l; every value in [lo, 1 << 20] */
static bool parse_list(const char *flag, const char *v, int lo, struct bench_list *l)
{
    l->n = 0;
    for (const char *p = v; p && *p;) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < lo || x > (1 << 20) || (*end && *end != ',') ||
            l->n == BENCH_MAX_LIST) {
            fprintf(stderr, "faultline bench: %s wants up to %d comma-separated counts >= %d, "
                            "not '%s'\n", flag, BENCH_MAX_LIST, lo, v);
            return false;
        }
        l->v[l->n++] = (int)x;
        p = *end ? end + 1 : end;
    }
    if (!l->n)
        fprintf(stderr, "faultline bench: %s needs a value\n", flag);
    return l->n > 0;
}

static int parse(int argc, char **argv, struct bench_opts *o)
{
    *o = (struct bench_opts){ .n_prompt = 512, .n_gen = 128, .reps = 5, .seed = 1234 };
    eng_session_params_init(&o->sp);
    /* -p is bench's prompt length and the context is sized from -p and -n */
    const struct eng_common_args common = { &o->sp, NULL, NULL, true, NULL };
    int taken;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage(stdout);
        else if (!strcmp(a, "-p"))
            ok = eng_arg_int("bench", argc, argv, &i, 0, 1 << 20, &o->n_prompt);
        else if (!strcmp(a, "-n"))
            ok = eng_arg_int("bench", argc, argv, &i, 0, 1 << 20, &o->n_gen);
        else if (!strcmp(a, "-npp") || !strcmp(a, "-ntg") || !strcmp(a, "-npl")) {
            const char *v = NULL;
            struct bench_list *l = a[2] == 'p' && a[3] == 'p' ? &o->npp
                                   : a[2] == 't'              ? &o->ntg
                                                              : &o->npl;
            ok = eng_arg_str("bench", argc, argv, &i, &v) &&
                 parse_list(a, v, l == &o->ntg ? 0 : 1, l); /* TG 0: prompts only */
        }
        else if (!strcmp(a, "-pps")) {
            fprintf(stderr, "faultline bench: -pps (one prompt shared by all sequences) is not "
                            "supported: each sequence has its own cells; leave it out\n");
            ok = false;
        }
        else if (!strcmp(a, "-r"))
            ok = eng_arg_int("bench", argc, argv, &i, 1, 1000, &o->reps);
        else if (!strcmp(a, "--seed"))
            ok = eng_arg_int("bench", argc, argv, &i, 0, 2147483647, &o->seed);
        else if (!strcmp(a, "--disk-bw")) {
            const char *v = NULL;
            ok = eng_arg_str("bench", argc, argv, &i, &v) && fl_parse_size(v, &o->disk_bw) == 0;
            if (!ok && v)
                fprintf(stderr, "faultline bench: --disk-bw wants a size such as 3G, not '%s'\n", v);
        }
        else if ((taken = eng_arg_common("bench", argc, argv, &i, &common)) != 0)
            ok = taken > 0;
        else {
            fprintf(stderr, "faultline bench: unknown option '%s'\n", a);
            ok = false;
        }
        if (!ok)
            return 2;
    }
    if (!o->sp.model_path) {
        fprintf(stderr, "faultline bench: -m MODEL is required\n");
        return usage(stderr);
    }
    const bool batched = o->npp.n || o->ntg.n || o->npl.n;
    if (batched && !(o->npp.n && o->ntg.n && o->npl.n)) {
        fprintf(stderr, "faultline bench: the batched mode wants all of -npp, -ntg and -npl\n");
        return 2;
    }
    if (!batched && o->sp.n_ctx) {
        fprintf(stderr, "faultline bench: -c sizes the batched mode's cells (-npp/-ntg/-npl); "
                        "pp/tg tests size their own context\n");
        return 2;
    }
    if (!batched && !o->n_prompt && !o->n_gen) {
        fprintf(stderr, "faultline bench: nothing to measure (-p 0 -n 0)\n");
        return 2;
    }
    return -1;
}

static int32_t first_token(struct eng_session *s, int32_t n_vocab)
{
    const struct fl_tokenizer *tok = eng_session_tokenizer(s);
    if (fl_tokenizer_add_bos(tok) && fl_token_bos(tok) >= 0)
        return fl_token_bos(tok);
    return rand() % n_vocab;
}

/* One measured run from an empty cache; returns seconds or < 0. */
static double run_once(struct eng_session *s, bool prompt, int n, float *logits,
                       struct fl_err *err)
{
    const int32_t nv = (int32_t)eng_session_model(s)->hp.n_vocab;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    if (!ids)
        return fl_err_set(err, -ENOMEM, "out of memory");
    for (int i = 0; i < n; i++)
        ids[i] = i == 0 ? first_token(s, nv) : rand() % nv;
    eng_session_reset(s);
    double t0 = fl_clock_s();
    int rc = 0;
    if (prompt)
        rc = eng_session_eval(s, ids, n, false, logits, err);
    for (int i = 0; !prompt && !rc && i < n; i++)
        rc = eng_session_eval(s, &ids[i], 1, false, logits, err);
    double t = fl_clock_s() - t0;
    free(ids);
    return rc ? rc : t;
}

static void model_desc(struct eng_session *s, char *buf, size_t cap)
{
    const struct eng_model *m = eng_session_model(s);
    const char *ft = "?";
    int64_t file_type;
    static const char *names[] = { [0] = "all F32", [1] = "F16", [2] = "Q4_0", [3] = "Q4_1",
                                   [7] = "Q8_0", [8] = "Q5_0", [9] = "Q5_1", [10] = "Q2_K - Medium",
                                   [12] = "Q3_K - Medium", [14] = "Q4_K - Small",
                                   [15] = "Q4_K - Medium", [16] = "Q5_K - Small",
                                   [17] = "Q5_K - Medium", [18] = "Q6_K", [25] = "IQ4_NL",
                                   [30] = "IQ4_XS", [32] = "BF16", [38] = "MXFP4 MoE" };
    if (gguf_get_int(eng_session_gguf(s), "general.file_type", &file_type) == 0 && file_type >= 0 &&
        file_type < (int64_t)(sizeof(names) / sizeof(names[0])) && names[file_type])
        ft = names[file_type];
    /* llama-bench names the size class ("8x7B") only for models it knows */
    snprintf(buf, cap, "%s ?B %s", m->hp.arch, ft);
}

static void print_row(struct eng_session *s, const char *test, const double *ts, int reps)
{
    double mean = 0, var = 0;
    for (int i = 0; i < reps; i++)
        mean += ts[i] / reps;
    for (int i = 0; i < reps; i++)
        var += (ts[i] - mean) * (ts[i] - mean);
    const double sd = reps > 1 ? sqrt(var / (reps - 1)) : 0.0;
    char model[64], size[32], params[32], tps[64];
    model_desc(s, model, sizeof(model));
    const struct eng_model *m = eng_session_model(s);
    double bytes = 0, np = (double)eng_session_n_params(s);
    for (int64_t i = 0; i < m->n_tensors; i++) /* tensor bytes, as llama-bench's size */
        bytes += (double)m->tensors[i].nbytes;
    if (bytes < 1024.0 * 1024 * 1024)
        snprintf(size, sizeof(size), "%.2f MiB", bytes / 1024 / 1024);
    else
        snprintf(size, sizeof(size), "%.2f GiB", bytes / 1024 / 1024 / 1024);
    if (np < 1e9)
        snprintf(params, sizeof(params), "%.2f M", np / 1e6);
    else
        snprintf(params, sizeof(params), "%.2f B", np / 1e9);
    snprintf(tps, sizeof(tps), "%.2f ± %.2f", mean, sd);
    printf("| %-30s | %10s | %10s | %-10s | %7d | %15s | %21s |\n", model, size, params,
           eng_session_gpu(s) ? "CUDA" : "CPU",
           eng_session_n_threads(s), test, tps);
    fflush(stdout);
}

static void paging_snapshot(struct eng_session *s, struct pager_totals *t,
                            struct fl_predict_stats *st)
{
    memset(st, 0, sizeof(*st));
    pager_stats_totals(eng_session_pager(s), t);
    if (eng_session_predictor(s))
        fl_predictor_stats(eng_session_predictor(s), st);
}

static void paging_record(struct eng_session *s, const struct bench_opts *o, const char *test,
                          uint64_t tokens, const struct pager_totals *t0,
                          const struct fl_predict_stats *s0, struct paging_rows *rows)
{
    struct pager_totals t1, d;
    struct fl_predict_stats s1, ds;
    paging_snapshot(s, &t1, &s1);
    d = (struct pager_totals){ .bytes_read = t1.bytes_read - t0->bytes_read,
                               .stall_ns = t1.stall_ns - t0->stall_ns };
    ds = (struct fl_predict_stats){ .scored = s1.scored - s0->scored,
                                    .predicted = s1.predicted - s0->predicted,
                                    .hits = s1.hits - s0->hits, .chosen = s1.chosen - s0->chosen,
                                    .routed = s1.routed - s0->routed, .ready = s1.ready - s0->ready };
    if (rows->n >= (int)(sizeof(rows->row) / sizeof(rows->row[0])))
        return;
    snprintf(rows->test[rows->n], sizeof(rows->test[0]), "%s", test);
    fl_paging_row_of(&d, &ds, tokens, (double)o->disk_bw, &rows->row[rows->n]);
    rows->n++;
}

static void paging_print(const struct paging_rows *rows)
{
    if (!rows->n)
        return;
    printf("\n| %-10s | %8s | %11s | %8s | %10s | %14s | %14s |\n", "test", "hit %", "precision %",
           "recall %", "MiB/token", "stall ms/token", "I/O bound t/s");
    printf("| ---------- | -------: | ----------: | -------: | ---------: | -------------: | -------------: |\n");
    for (int i = 0; i < rows->n; i++) {
        const struct fl_paging_row *r = &rows->row[i];
        char hit[16] = "-", prec[16] = "-", rec[16] = "-", bound[16] = "-";
        if (r->hit_pct >= 0)
            snprintf(hit, sizeof(hit), "%.1f", r->hit_pct);
        if (r->precision_pct >= 0)
            snprintf(prec, sizeof(prec), "%.1f", r->precision_pct);
        if (r->recall_pct >= 0)
            snprintf(rec, sizeof(rec), "%.1f", r->recall_pct);
        if (r->io_bound_tps > 0)
            snprintf(bound, sizeof(bound), "%.2f", r->io_bound_tps);
        printf("| %-10s | %8s | %11s | %8s | %10.2f | %14.2f | %14s |\n", rows->test[i], hit, prec,
               rec, r->mib_per_token, r->stall_ms_per_token, bound);
    }
}

static int bench_test(struct eng_session *s, const struct bench_opts *o, bool prompt,
                      float *logits, struct paging_rows *rows, struct fl_err *err)
{
    const int n = prompt ? o->n_prompt : o->n_gen;
    if (run_once(s, prompt, prompt ? n : 1, logits, err) < 0) /* warmup */
        return -1;
    double *ts = calloc((size_t)o->reps, sizeof(double));
    if (!ts)
        return fl_err_set(err, -ENOMEM, "out of memory");
    struct pager_totals t0;
    struct fl_predict_stats s0;
    paging_snapshot(s, &t0, &s0);
    for (int r = 0; r < o->reps; r++) {
        double t = run_once(s, prompt, n, logits, err);
        if (t < 0) {
            free(ts);
            return -1;
        }
        ts[r] = n / t;
    }
    char test[32];
    snprintf(test, sizeof(test), "%s%d", prompt ? "pp" : "tg", n);
    print_row(s, test, ts, o->reps);
    if (eng_session_paged(s))
        paging_record(s, o, test, (uint64_t)n * (uint64_t)o->reps, &t0, &s0, rows);
    free(ts);
    return 0;
}

/* --- llama-batched-bench's mode --------------------------------------------------- */

/* Cells a case needs: each sequence's cells come in whole KV blocks. */
static int batched_cells(int pp, int tg, int pl)
{
    const int per = (pp + tg + ENG_KV_BLOCK - 1) / ENG_KV_BLOCK * ENG_KV_BLOCK;
    return per * pl;
}

/* pl prompts of pp random tokens, at most n_batch tokens per forward call
 * (a prompt may continue in the next call), the last of each with logits. */
static int batched_prefill(struct eng_session *s, int pp, int pl, float *logits,
                           struct fl_err *err)
{
    const int nb = eng_session_n_batch(s), nv = (int)eng_session_model(s)->hp.n_vocab;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)nb);
    struct eng_span *spans = malloc(sizeof(*spans) * (size_t)(pl < nb ? pl + 1 : nb + 1));
    int rc = ids && spans ? 0 : fl_err_set(err, -ENOMEM, "out of memory");
    int seq = 0, pos = 0;
    while (!rc && seq < pl) {
        int n = 0, ns = 0;
        while (seq < pl && n < nb) {
            const int take = pp - pos < nb - n ? pp - pos : nb - n;
            for (int i = 0; i < take; i++)
                ids[n + i] = pos + i == 0 ? first_token(s, nv) : rand() % nv;
            spans[ns++] = (struct eng_span){ .seq = seq, .pos0 = pos, .n_tok = take,
                                             .logits = pos + take == pp };
            n += take;
            pos += take;
            if (pos == pp)
                seq++, pos = 0;
        }
        const struct eng_batch b = { .tokens = ids, .n_tok = n, .spans = spans, .n_spans = ns,
                                     .logits = logits };
        rc = eng_session_forward(s, &b, err);
    }
    free(ids);
    free(spans);
    return rc;
}

/* tg steps of one random token per sequence, every one with logits. */
static int batched_generate(struct eng_session *s, int pp, int tg, int pl, float *logits,
                            struct fl_err *err)
{
    const int nv = (int)eng_session_model(s)->hp.n_vocab;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)pl);
    struct eng_span *spans = malloc(sizeof(*spans) * (size_t)pl);
    int rc = ids && spans ? 0 : fl_err_set(err, -ENOMEM, "out of memory");
    for (int t = 0; !rc && t < tg; t++) {
        for (int j = 0; j < pl; j++) {
            ids[j] = rand() % nv;
            spans[j] = (struct eng_span){ .seq = j, .pos0 = pp + t, .n_tok = 1, .logits = true };
        }
        const struct eng_batch b = { .tokens = ids, .n_tok = pl, .spans = spans, .n_spans = pl,
                                     .logits = logits };
        rc = eng_session_forward(s, &b, err);
    }
    free(ids);
    free(spans);
    return rc;
}

static void batched_free(struct eng_session *s, int pl)
{
    for (int j = 0; j < pl; j++)
        eng_session_seq_free(s, j);
}

/* One case; 1 when it does not fit the cells (skipped, said), else 0 / -errno. */
static int batched_case(struct eng_session *s, const struct bench_opts *o, int pp, int tg, int pl,
                        float *logits, struct paging_rows *rows, struct fl_err *err)
{
    int rc = 0;
    for (int j = 0; !rc && j < pl; j++)
        rc = eng_session_seq_reserve(s, j, pp + tg, err);
    if (rc == -ENOSPC) {
        batched_free(s, pl);
        fprintf(stderr, "faultline bench: PP %d TG %d B %d needs %d cells of the %d there are "
                        "(-c); skipped\n", pp, tg, pl, batched_cells(pp, tg, pl),
                eng_session_n_ctx(s));
        return 1;
    }
    struct pager_totals t0;
    struct fl_predict_stats s0;
    paging_snapshot(s, &t0, &s0);
    const double t_start = fl_clock_s();
    if (!rc)
        rc = batched_prefill(s, pp, pl, logits, err);
    const double t_pp = fl_clock_s() - t_start;
    char test[32];
    snprintf(test, sizeof(test), "pp%d B%d", pp, pl);
    if (!rc && eng_session_paged(s))
        paging_record(s, o, test, (uint64_t)pp * (uint64_t)pl, &t0, &s0, rows);
    paging_snapshot(s, &t0, &s0);
    const double t_mid = fl_clock_s();
    if (!rc)
        rc = batched_generate(s, pp, tg, pl, logits, err);
    const double t_tg = fl_clock_s() - t_mid;
    snprintf(test, sizeof(test), "tg%d B%d", tg, pl);
    if (!rc && eng_session_paged(s) && tg)
        paging_record(s, o, test, (uint64_t)tg * (uint64_t)pl, &t0, &s0, rows);
    batched_free(s, pl);
    if (rc)
        return rc;
    const int n_kv = pl * (pp + tg);
    printf("|%6d | %6d | %4d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n", pp, tg,
           pl, n_kv, t_pp, t_pp > 0 ? pl * pp / t_pp : 0, t_tg, t_tg > 0 ? pl * tg / t_tg : 0,
           t_pp + t_tg, t_pp + t_tg > 0 ? n_kv / (t_pp + t_tg) : 0);
    fflush(stdout);
    return 0;
}

static int bench_batched(struct eng_session *s, const struct bench_opts *o, float *logits,
                         struct paging_rows *rows, struct fl_err *err)
{
    printf("main: n_kv_max = %d, n_batch = %d, n_seq_max = %d, n_threads = %d, backend = %s\n\n",
           eng_session_n_ctx(s), eng_session_n_batch(s), eng_session_n_seq(s),
           eng_session_n_threads(s), eng_session_gpu(s) ? "CUDA" : "CPU");
    printf("|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |"
           "      T s |    S t/s |\n");
    printf("|-------|--------|------|--------|----------|----------|----------|----------|"
           "----------|----------|\n");
    /* warmup, as llama-batched-bench: one short prompt, one step */
    int rc = eng_session_seq_reserve(s, 0, 17, err);
    if (!rc)
        rc = batched_prefill(s, 16, 1, logits, err);
    if (!rc)
        rc = batched_generate(s, 16, 1, 1, logits, err);
    batched_free(s, 1);
    for (int a = 0; !rc && a < o->npp.n; a++)
        for (int b = 0; !rc && b < o->ntg.n; b++)
            for (int c = 0; !rc && c < o->npl.n; c++) {
                rc = batched_case(s, o, o->npp.v[a], o->ntg.v[b], o->npl.v[c], logits, rows,
                                  err);
                rc = rc > 0 ? 0 : rc;
            }
    return rc;
}

/* The session's cells and sequences for the batched mode: the user's -c,
 * or enough for the largest case. */
static void batched_size(struct bench_opts *o)
{
    int cells = 0, seqs = 1;
    for (int a = 0; a < o->npp.n; a++)
        for (int b = 0; b < o->ntg.n; b++)
            for (int c = 0; c < o->npl.n; c++) {
                const int n = batched_cells(o->npp.v[a], o->ntg.v[b], o->npl.v[c]);
                cells = n > cells ? n : cells;
            }
    for (int c = 0; c < o->npl.n; c++)
        seqs = o->npl.v[c] > seqs ? o->npl.v[c] : seqs;
    if (!o->sp.n_ctx)
        o->sp.n_ctx = cells > 17 ? cells : 32;
    o->sp.n_seq = seqs;
}

int cli_bench(int argc, char **argv)
{
    struct bench_opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    struct fl_err err = { { 0 } };
    struct eng_session *s = NULL;
    struct paging_rows rows = { .n = 0 };
    const bool batched = o.npl.n > 0;
    if (batched)
        batched_size(&o);
    else
        o.sp.n_ctx = o.n_prompt + o.n_gen > 0 ? o.n_prompt + o.n_gen : 1;
    rc = eng_session_open(&o.sp, &s, &err);
    float *logits = NULL;
    /* batched: a row per sequence at most (one per span asking) */
    if (!rc && !(logits = malloc(sizeof(float) * (size_t)eng_session_model(s)->hp.n_vocab *
                                 (size_t)eng_session_n_seq(s))))
        rc = fl_err_set(&err, -ENOMEM, "out of memory");
    if (!rc)
        srand((unsigned)o.seed);
    if (!rc && batched) {
        fprintf(stderr, "faultline bench: CPU features %s\n", fl_cpu_features());
        rc = bench_batched(s, &o, logits, &rows, &err);
    } else if (!rc) {
        fprintf(stderr, "faultline bench: CPU features %s\n", fl_cpu_features());
        printf("| %-30s | %10s | %10s | %-10s | %7s | %15s | %20s |\n", "model", "size", "params",
               "backend", "threads", "test", "t/s");
        printf("| %s | %s: | %s: | %s | %s: | %s: | %s: |\n", "------------------------------",
               "---------", "---------", "----------", "------", "--------------",
               "-------------------");
    }
    if (!rc && !batched && o.n_prompt)
        rc = bench_test(s, &o, true, logits, &rows, &err);
    if (!rc && !batched && o.n_gen)
        rc = bench_test(s, &o, false, logits, &rows, &err);
    if (!rc)
        paging_print(&rows);
    if (!rc)
        rc = eng_session_report(s, &err);
    if (rc && err.msg[0])
        fprintf(stderr, "faultline bench: %s\n", err.msg);
    free(logits);
    eng_session_close(s);
    return rc ? 1 : 0;
}
