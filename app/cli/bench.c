/* bench.c: `faultline bench` — prompt processing (ppN) and generation (tgN)
 * speed, measured and printed the way llama-bench does so the two tables
 * can be put side by side: random token ids (BOS first when the file adds
 * one), a warmup run, the KV cache cleared before each repetition, t/s as
 * mean ± sample standard deviation over the repetitions; every combination
 * of the -b/-ub/-fa/-t lists, in llama-bench's order (bench-args.c), each
 * row in the format -o asks for (bench-output.c).
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
#include <time.h>

#include "app/cli/bench.h"
#include "app/cli/commands.h"
#include "backend/cpu/cpu.h"
#include "gguf/gguf.h"
#include "gguf/param-count.h"
#include "app/session.h"
#include "text/tokenizer.h"
#include "base/clock.h"
#include "pager/pager.h"
#include "app/predict.h"
#include "model/arch.h"
#include "model/kv-cache.h"

/* The paging columns of one test: counters around its timed repetitions. */
struct paging_rows {
    char test[64][32]; /* the first 64 (batched: two per case) */
    struct fl_paging_row row[64];
    int n;
};

static int32_t first_token(struct eng_session *s, int32_t n_vocab)
{
    const struct fl_tokenizer *tok = eng_session_tokenizer(s);
    if (fl_tokenizer_add_bos(tok) && fl_token_bos(tok) >= 0)
        return fl_token_bos(tok);
    return rand() % n_vocab;
}

/* One measured run from an empty cache, after `depth` untimed tokens
 * (llama-bench's -d); returns seconds or < 0. */
static double run_once(struct eng_session *s, bool prompt, int n, int depth, float *logits,
                       struct fl_err *err)
{
    const int32_t nv = (int32_t)eng_session_model(s)->hp.n_vocab;
    const int total = depth + n;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(total > 0 ? total : 1));
    if (!ids)
        return fl_err_set(err, -ENOMEM, "out of memory");
    for (int i = 0; i < total; i++)
        ids[i] = i == 0 ? first_token(s, nv) : rand() % nv;
    eng_session_reset(s);
    int rc = depth ? eng_session_eval(s, ids, depth, false, logits, err) : 0;
    const int32_t *test = ids + depth;
    double t0 = fl_clock_s();
    if (!rc && prompt)
        rc = eng_session_eval(s, test, n, false, logits, err);
    for (int i = 0; !prompt && !rc && i < n; i++)
        rc = eng_session_eval(s, &test[i], 1, false, logits, err);
    double t = fl_clock_s() - t0;
    free(ids);
    return rc ? rc : t;
}

/* llama.cpp's names of general.file_type (llama_ftype_name), for the types
 * faultline reads */
static const char *ftype_name(const struct gguf_file *g)
{
    static const char *names[] = {
        [0] = "all F32",        [1] = "F16",           [2] = "Q4_0",
        [3] = "Q4_1",           [7] = "Q8_0",          [8] = "Q5_0",
        [9] = "Q5_1",           [10] = "Q2_K - Medium", [11] = "Q3_K - Small",
        [12] = "Q3_K - Medium", [13] = "Q3_K - Large", [14] = "Q4_K - Small",
        [15] = "Q4_K - Medium", [16] = "Q5_K - Small", [17] = "Q5_K - Medium",
        [18] = "Q6_K",          [21] = "Q2_K - Small", [25] = "IQ4_NL - 4.5 bpw",
        [30] = "IQ4_XS - 4.25 bpw", [32] = "BF16",     [38] = "MXFP4 MoE",
    };
    int64_t ft;
    if (gguf_get_int(g, "general.file_type", &ft) == 0 && ft >= 0 &&
        ft < (int64_t)(sizeof(names) / sizeof(names[0])) && names[ft])
        return names[ft];
    return "unknown";
}

/* What every row says about the model: llama-bench's model_type is
 * "ARCH SIZE FTYPE", size and params are every tensor's bytes and elements
 * (gguf/param-count.h, the one count). */
static void model_info(struct eng_session *s, const char *path, struct bench_model *m)
{
    const struct gguf_file *g = eng_session_gguf(s);
    struct gguf_param_count c;
    char label[64];
    gguf_param_count(g, &c);
    *m = (struct bench_model){ .filename = path, .size = c.n_bytes, .n_params = c.n_params,
                               .n_active = c.n_active,
                               .backend = eng_session_gpu(s) ? "CUDA" : "CPU" };
    snprintf(m->type, sizeof(m->type), "%s %s %s", eng_session_model(s)->hp.arch,
             gguf_size_label(&c, label, sizeof(label)), ftype_name(g));
    bench_cpu_info(m->cpu_info, sizeof(m->cpu_info));
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

static void paging_print(FILE *out, const struct paging_rows *rows)
{
    if (!rows->n)
        return;
    fprintf(out, "\n| %-10s | %8s | %11s | %8s | %10s | %14s | %14s |\n", "test", "hit %",
            "precision %", "recall %", "MiB/token", "stall ms/token", "I/O bound t/s");
    fprintf(out, "| ---------- | -------: | ----------: | -------: | ---------: | -------------: "
                 "| -------------: |\n");
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
        fprintf(out, "| %-10s | %8s | %11s | %8s | %10.2f | %14.2f | %14s |\n", rows->test[i],
                hit, prec, rec, r->mib_per_token, r->stall_ms_per_token, bound);
    }
}

/* --- llama-bench's mode ------------------------------------------------------- */

/* What the tests of one run share. */
struct bench_run {
    struct eng_session *s;
    const struct bench_opts *o;
    struct bench_printer *out;
    float *logits;
    struct paging_rows *rows;
    uint64_t *samples_ns; /* o->reps */
    int default_threads;  /* the session's, for an empty -t */
};

/* One combination of the outer lists. */
struct bench_case {
    int batch, ubatch, fa, threads;
};

/* RFC 3339 in UTC, as llama-bench's test_time */
static void test_time(char *buf, size_t cap)
{
    const time_t now = time(NULL);
    struct tm tm;
    if (!gmtime_r(&now, &tm) || !strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, cap, "%s", "");
}

/* A warmup run (the whole prompt, or one token), then the timed repetitions. */
static int bench_test(struct bench_run *r, const struct bench_case *c, bool prompt, int n,
                      int depth, struct fl_err *err)
{
    struct bench_result res = { .n_prompt = prompt ? n : 0, .n_gen = prompt ? 0 : n,
                                .n_depth = depth,
                                .n_batch = c->batch, .n_ubatch = c->ubatch,
                                .n_threads = eng_session_n_threads(r->s), .flash_attn = c->fa,
                                .type_k = eng_kv_type_k(eng_session_kv(r->s)),
                                .type_v = eng_kv_type_v(eng_session_kv(r->s)),
                                .reps = r->o->reps, .samples_ns = r->samples_ns };
    test_time(res.test_time, sizeof(res.test_time));
    if (run_once(r->s, prompt, prompt ? n : 1, depth, r->logits, err) < 0)
        return -1;
    struct pager_totals t0;
    struct fl_predict_stats s0;
    paging_snapshot(r->s, &t0, &s0);
    for (int i = 0; i < r->o->reps; i++) {
        const double t = run_once(r->s, prompt, n, depth, r->logits, err);
        if (t < 0)
            return -1;
        r->samples_ns[i] = t > 1e-9 ? (uint64_t)llround(t * 1e9) : 1;
    }
    int rc = bench_out_row(r->out, &res, err);
    char test[32];
    snprintf(test, sizeof(test), "%s%d", prompt ? "pp" : "tg", n);
    if (depth)
        snprintf(test + strlen(test), sizeof(test) - strlen(test), "@d%d", depth);
    if (r->o->threads.n > 1) /* which row of the table the paging row is */
        snprintf(test + strlen(test), sizeof(test) - strlen(test), " t%d", res.n_threads);
    if (!rc && eng_session_paged(r->s))
        paging_record(r->s, r->o, test, (uint64_t)n * (uint64_t)r->o->reps, &t0, &s0, r->rows);
    return rc;
}

/* Case k of the outer lists, -t varying fastest, then -fa, -ub, -b. */
static struct bench_case case_of(const struct bench_opts *o, int k)
{
    struct bench_case c;
    const int nt = o->threads.n ? o->threads.n : 1;
    c.threads = o->threads.n ? o->threads.v[k % nt] : 0;
    k /= nt;
    c.fa = o->fa.v[k % o->fa.n];
    k /= o->fa.n;
    c.ubatch = o->ubatch.v[k % o->ubatch.n];
    k /= o->ubatch.n;
    c.batch = o->batch.v[k];
    return c;
}

/* Every case: every prompt length, then every generation length. */
static int bench_cases(struct bench_run *r, struct fl_err *err)
{
    const struct bench_opts *o = r->o;
    const int n_cases = (o->threads.n ? o->threads.n : 1) * o->fa.n * o->ubatch.n * o->batch.n;
    int rc = 0;
    for (int k = 0; !rc && k < n_cases; k++) {
        const struct bench_case c = case_of(o, k);
        /* llama.cpp hands a call -b tokens and computes them -ub at a time */
        eng_session_set_batch(r->s, c.batch < c.ubatch ? c.batch : c.ubatch);
        rc = eng_session_set_threads(r->s, c.threads ? c.threads : r->default_threads, err);
        for (int d = 0; !rc && d < o->depth.n; d++) {
            const int depth = o->depth.v[d];
            for (int i = 0; !rc && i < o->n_prompt.n; i++)
                rc = o->n_prompt.v[i] ? bench_test(r, &c, true, o->n_prompt.v[i], depth, err) : 0;
            for (int i = 0; !rc && i < o->n_gen.n; i++)
                rc = o->n_gen.v[i] ? bench_test(r, &c, false, o->n_gen.v[i], depth, err) : 0;
        }
    }
    return rc;
}

static int bench_tests(struct eng_session *s, const struct bench_opts *o, float *logits,
                       struct paging_rows *rows, struct fl_err *err)
{
    struct bench_model model;
    model_info(s, o->sp.model_path, &model);
    const struct eng_kv *kv = eng_session_kv(s);
    struct bench_printer out = { .format = o->format, .model = &model,
                                 .col_batch = o->col_batch, .col_ubatch = o->col_ubatch,
                                 .col_fa = o->col_fa,
                                 .col_type_k = eng_kv_type_k(kv) != FL_TYPE_F16,
                                 .col_type_v = eng_kv_type_v(kv) != FL_TYPE_F16 };
    struct bench_run r = { .s = s, .o = o, .out = &out, .logits = logits, .rows = rows,
                           .samples_ns = calloc((size_t)o->reps, sizeof(uint64_t)),
                           .default_threads = eng_session_n_threads(s) };
    int rc = r.samples_ns ? bench_out_begin(&out, err)
                          : fl_err_set(err, -ENOMEM, "out of memory");
    if (!rc) {
        rc = bench_cases(&r, err);
        /* json: the rows measured before a failure still make a whole document */
        struct fl_err end_err = { { 0 } };
        const int end = bench_out_end(&out, rc ? &end_err : err);
        rc = rc ? rc : end;
    }
    bench_out_free(&out);
    free(r.samples_ns);
    return rc;
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

/* The largest of a list (0 when empty). */
static int list_max(const struct bench_list *l)
{
    int m = 0;
    for (int i = 0; i < l->n; i++)
        m = l->v[i] > m ? l->v[i] : m;
    return m;
}

int cli_bench(int argc, char **argv)
{
    struct bench_opts o;
    int rc = bench_parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    struct fl_err err = { { 0 } };
    struct eng_session *s = NULL;
    struct paging_rows rows = { .n = 0 };
    const bool batched = o.npl.n > 0;
    if (batched)
        batched_size(&o);
    else { /* a test needs its own tokens' cells: ppN has no tg, tgN no pp */
        const int p = list_max(&o.n_prompt), n = list_max(&o.n_gen);
        o.sp.n_ctx = list_max(&o.depth) + (p > n ? p : n > 0 ? n : 1);
    }
    rc = eng_session_open(&o.sp, &s, &err);
    float *logits = NULL;
    /* batched: a row per sequence at most (one per span asking) */
    if (!rc && !(logits = malloc(sizeof(float) * (size_t)eng_session_model(s)->hp.n_vocab *
                                 (size_t)eng_session_n_seq(s))))
        rc = fl_err_set(&err, -ENOMEM, "out of memory");
    if (!rc) {
        srand((unsigned)o.seed);
        fprintf(stderr, "faultline bench: CPU features %s\n", fl_cpu_features());
        if (o.col_fa)
            fprintf(stderr, "faultline bench: -fa changes nothing: faultline's attention is "
                            "exact either way\n");
        rc = batched ? bench_batched(s, &o, logits, &rows, &err)
                     : bench_tests(s, &o, logits, &rows, &err);
    }
    if (!rc) /* csv and json keep stdout to themselves */
        paging_print(o.format == BENCH_MD ? stdout : stderr, &rows);
    if (!rc)
        rc = eng_session_report(s, &err);
    if (rc && err.msg[0])
        fprintf(stderr, "faultline bench: %s\n", err.msg);
    free(logits);
    eng_session_close(s);
    return rc ? 1 : 0;
}
