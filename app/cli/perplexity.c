/* perplexity.c: `faultline perplexity` — llama-perplexity's measure of a
 * model on a text (tools/perplexity in llama.cpp):
 *
 *   the text, tokenized with add_special, is cut into chunks of -c tokens
 *   (the first of each replaced by BOS where the vocabulary adds one); each
 *   chunk runs from an empty context, and every token of its second half
 *   but the first is scored by the negative log-likelihood the logits
 *   before it give it: PPL = exp(mean NLL), +/- from the NLLs' spread.
 *
 * As llama.cpp, n_batch / n_ctx chunks run at once, each its own sequence
 * in one forward call: a paged model's expert reads serve all of them (the
 * reason this is an overnight job worth a disk tier). Only the scored
 * half's logits rows are computed and held. The output is llama-perplexity's:
 * "[1]12.3456,[2]..." on stdout and "Final estimate: PPL = X +/- Y".
 *
 * Its KL-divergence too: --kl-divergence-base FILE saves every scored row's
 * log-probabilities (record/kld-base.h, llama.cpp's format), and a later run
 * with --kl-divergence on another model (a quantization) reads the text's
 * tokens from that file and compares its rows with them (kl-divergence.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli/commands.h"
#include "app/cli/engine-args.h"
#include "app/cli/hellaswag.h"
#include "app/cli/interrupt.h"
#include "app/cli/kl-divergence.h"
#include "app/cli/multiple-choice.h"
#include "app/cli/session-flags.h"
#include "app/cli/winogrande.h"
#include "app/session.h"
#include "base/clock.h"
#include "base/out-file.h"
#include "model/arch.h"
#include "text/logprob.h"
#include "text/tokenizer.h"

#define PPL_MAX_SEQ 64 /* chunks at once */

struct ppl_opts {
    struct eng_session_params sp;
    const char *prompt, *prompt_file;
    int n_chunks;  /* --chunks: at most this many; -1 all */
    int out_type;  /* --ppl-output-type: 0 "[i]ppl,", 1 a table */
    const char *base_path; /* --kl-divergence-base: written, or read with --kl-divergence */
    bool kld;
    bool hellaswag;        /* --hellaswag: -f is HellaSwag's tasks */
    int hs_tasks;          /* --hellaswag-tasks */
    bool winogrande;       /* --winogrande: -f is Winogrande's CSV */
    int wg_tasks;          /* --winogrande-tasks; 0: all */
    bool mc;               /* --multiple-choice: -f is its binary file */
    int mc_tasks;          /* --multiple-choice-tasks; 0: all */
};

/* The run: chunk length, sequences at once, the scored rows. */
struct ppl_run {
    struct eng_session *s;
    const int32_t *tokens;
    int n_ctx, n_seq, n_batch, first, n_vocab;
    int32_t bos;
    float *logits;   /* [n_seq][n_ctx - first][n_vocab] */
    int32_t *ids;    /* [n_batch] */
    double nll, nll2;
    int count;
    FILE *base_out;            /* writing a base: its rows go here */
    struct fl_kld_base *base;  /* --kl-divergence: the base read */
    struct kld_report *kld;
    uint16_t *base_rows;       /* one chunk's rows of the base */
};

static int usage(void)
{
    fprintf(stderr,
            "usage: faultline perplexity -m MODEL -f FILE [-c 512] [-b 2048] [--chunks N]\n"
            "                            [--ppl-output-type 0|1] [--kl-divergence-base BASE]\n"
            "                            [-t T] [options]\n"
            "       faultline perplexity -m MODEL --kl-divergence-base BASE --kl-divergence\n"
            "       faultline perplexity -m MODEL -f hellaswag_val_full.txt --hellaswag\n"
            "                            [--hellaswag-tasks 400]\n"
            "       faultline perplexity -m MODEL -f winogrande-debiased-eval.csv --winogrande\n"
            "                            [--winogrande-tasks N]\n"
            "       faultline perplexity -m MODEL -f mmlu-validation.bin --multiple-choice\n"
            "                            [--multiple-choice-tasks N]\n"
            "llama-perplexity's measure: FILE's tokens cut into chunks of -c, each from an\n"
            "empty context (BOS first where the model adds one), the second half of each\n"
            "scored by its negative log-likelihood; prints the running perplexity per chunk\n"
            "and 'Final estimate: PPL = X +/- Y'. -b / -c chunks run at once (one forward\n"
            "call, their expert reads shared). Needs at least 2 x -c tokens.\n"
            "--kl-divergence-base BASE (or --save-all-logits): also saves the scored rows'\n"
            "log-probabilities to BASE, in llama-perplexity's format. With --kl-divergence:\n"
            "runs the text BASE holds (its tokens and -c) through MODEL and prints\n"
            "llama-perplexity's KL-divergence of MODEL from the base model, per chunk and\n"
            "with percentiles (100 tokens or more); BASE may come from either tool.\n"
            "--hellaswag: FILE is llama.cpp's HellaSwag data (6 lines a task); prints the\n"
            "running acc_norm over --hellaswag-tasks tasks drawn as llama.cpp draws them.\n"
            "--winogrande: FILE is llama.cpp's Winogrande CSV; prints each task's scores and\n"
            "the final score over all tasks or --winogrande-tasks drawn as llama.cpp does.\n"
            "--multiple-choice: FILE is llama.cpp's binary multiple-choice set (ARC, MMLU,\n"
            "TruthfulQA); prints the running accuracy, the final one and random chance.\n"
            "Exit status: 0 done, 1 runtime error, 2 command-line mistake, 130 after Ctrl-C.\n");
    eng_session_print_usage(stderr);
    return 2;
}

static int parse(int argc, char **argv, struct ppl_opts *o)
{
    *o = (struct ppl_opts){ .n_chunks = -1, .hs_tasks = 400 };
    eng_session_params_init(&o->sp);
    struct eng_compat compat = { 0 };
    const struct eng_common_args common = { &o->sp, &o->prompt, &o->prompt_file, true, &compat };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage() & 0;
        else if (!strcmp(a, "--chunks"))
            ok = eng_arg_int("perplexity", argc, argv, &i, -1, 1 << 30, &o->n_chunks);
        else if (!strcmp(a, "--ppl-output-type"))
            ok = eng_arg_int("perplexity", argc, argv, &i, 0, 1, &o->out_type);
        else if (!strcmp(a, "--kl-divergence-base") || !strcmp(a, "--save-all-logits"))
            ok = eng_arg_str("perplexity", argc, argv, &i, &o->base_path);
        else if (!strcmp(a, "--kl-divergence"))
            o->kld = true;
        else if (!strcmp(a, "--hellaswag"))
            o->hellaswag = true;
        else if (!strcmp(a, "--hellaswag-tasks"))
            ok = eng_arg_int("perplexity", argc, argv, &i, 1, 1 << 30, &o->hs_tasks);
        else if (!strcmp(a, "--winogrande"))
            o->winogrande = true;
        else if (!strcmp(a, "--winogrande-tasks"))
            ok = eng_arg_int("perplexity", argc, argv, &i, 0, 1 << 30, &o->wg_tasks);
        else if (!strcmp(a, "--multiple-choice"))
            o->mc = true;
        else if (!strcmp(a, "--multiple-choice-tasks"))
            ok = eng_arg_int("perplexity", argc, argv, &i, 0, 1 << 30, &o->mc_tasks);
        else
            ok = eng_arg_last("perplexity", argc, argv, &i, &common) > 0;
        if (!ok)
            return 2;
    }
    if (o->hellaswag + o->winogrande + o->mc + (o->kld || o->base_path) > 1) {
        fprintf(stderr, "faultline perplexity: --hellaswag, --winogrande, --multiple-choice or the "
                "KL-divergence: one at a time\n");
        return 2;
    }
    if (o->kld && !o->base_path) {
        fprintf(stderr, "faultline perplexity: --kl-divergence needs --kl-divergence-base BASE "
                "(the base model's log-probabilities)\n");
        return 2;
    }
    if (!o->sp.model_path || (o->prompt && o->prompt_file) ||
        (!o->kld && !o->prompt && !o->prompt_file)) {
        fprintf(stderr, "faultline perplexity: -m and one of -f/-p are required\n");
        return usage();
    }
    if (o->kld && (o->prompt || o->prompt_file))
        fprintf(stderr, "faultline perplexity: note: --kl-divergence runs the text %s holds; "
                "-f/-p are not read\n", o->base_path);
    eng_args_finish("perplexity", &common);
    /* llama.cpp decodes -b tokens (n_seq chunks) as -ub-sized pieces; a paged
     * model reads its experts per forward call, so without -ub one call
     * takes all of -b */
    if (!compat.ubatch)
        o->sp.n_batch = compat.batch ? compat.batch : 2048;
    return -1;
}

/* llama.cpp's sizes: -c is a chunk (512 by default), a forward call of -b
 * (2048; with -ub, min(-b, -ub)) holds n_seq = b / c of them, and the KV
 * cache n_seq chunks. */
static int plan(struct ppl_opts *o, int *n_ctx, int *n_seq)
{
    *n_ctx = o->sp.n_ctx > 0 ? o->sp.n_ctx : 512;
    const int n_batch = o->sp.n_batch > 0 ? o->sp.n_batch : 2048;
    if (n_batch >= *n_ctx && n_batch % *n_ctx) {
        fprintf(stderr, "faultline perplexity: -b %d is no multiple of -c %d (llama.cpp's rule: "
                "whole chunks per batch)\n", n_batch, *n_ctx);
        return 2;
    }
    *n_seq = n_batch / *n_ctx > 1 ? n_batch / *n_ctx : 1;
    if (*n_seq > PPL_MAX_SEQ) /* a wider batch gains nothing more: the experts are all read */
        *n_seq = PPL_MAX_SEQ;
    o->sp.n_seq = *n_seq;
    o->sp.n_ctx = *n_seq * *n_ctx;
    o->sp.n_batch = n_batch < o->sp.n_ctx ? n_batch : o->sp.n_ctx;
    o->sp.no_prompt_cache = true; /* nothing is held between chunks */
    return 0;
}

/* NLL of each scored token of one chunk (rows: positions first .. n_ctx-2):
 * the row's log-sum-exp less the next token's logit. */
static void score(struct ppl_run *r, const float *rows, const int32_t *chunk)
{
    for (int i = 0; i < r->n_ctx - 1 - r->first; i++) {
        const float *l = rows + (size_t)i * r->n_vocab;
        const double nll = fl_logsumexp(l, r->n_vocab) - l[chunk[r->first + i + 1]];
        r->nll += nll;
        r->nll2 += nll * nll;
    }
    r->count += r->n_ctx - 1 - r->first;
}

/* Chunks c0 .. c0+n-1, each in its sequence, in forward calls of at most
 * n_batch tokens (one, unless a chunk is longer than a batch). */
static int run_chunks(struct ppl_run *r, int c0, int n, struct fl_err *err)
{
    struct eng_span spans[PPL_MAX_SEQ];
    int rows = 0, rc = 0;
    for (int q = 0; q < n; q++)
        eng_session_seq_free(r->s, q);
    for (int pos = 0; !rc && pos < r->n_ctx; pos += r->n_batch) {
        const int len = r->n_ctx - pos < r->n_batch ? r->n_ctx - pos : r->n_batch;
        for (int q = 0; q < n; q++) {
            const int32_t *chunk = r->tokens + (size_t)(c0 + q) * r->n_ctx;
            memcpy(r->ids + q * len, chunk + pos, sizeof(int32_t) * (size_t)len);
            if (pos == 0 && r->bos >= 0)
                r->ids[q * len] = r->bos;
            spans[q] = (struct eng_span){ .seq = q, .pos0 = pos, .n_tok = len,
                                          .all_rows = pos + len > r->first,
                                          .first_row = r->first > pos ? r->first - pos : 0 };
        }
        const struct eng_batch b = { .tokens = r->ids, .n_tok = n * len, .spans = spans,
                                     .n_spans = n,
                                     .logits = r->logits + (size_t)rows * r->n_vocab };
        rc = eng_session_forward(r->s, &b, err);
        rows += pos + len > r->first ? len - (r->first > pos ? r->first - pos : 0) : 0;
        if (!rc && cli_interrupted())
            rc = fl_err_set(err, -EINTR, "interrupted");
    }
    return rc;
}

static void print_chunk(const struct ppl_run *r, const struct ppl_opts *o, int chunk)
{
    if (o->out_type == 0) {
        printf("[%d]%.4lf,", chunk + 1, exp(r->nll / r->count));
    } else {
        const double av = r->nll / r->count;
        double av2 = r->nll2 / r->count - av * av;
        if (av2 > 0)
            av2 = sqrt(av2 / (r->count - 1));
        printf("%8d  %.4lf  %4lf  %4lf\n", chunk * r->n_ctx, exp(r->nll / r->count), av, av2);
    }
    fflush(stdout);
}

/* A base's rows for the chunk just scored, in llama-perplexity's format. */
static int write_base_rows(struct ppl_run *r, const float *rows, struct fl_err *err)
{
    const int n_rows = r->n_ctx - 1 - r->first;
    const size_t len = fl_kld_row_len(r->n_vocab);
    for (int i = 0; i < n_rows; i++)
        fl_kld_encode_row(rows + (size_t)i * r->n_vocab, r->n_vocab, r->base_rows + i * len);
    if (fwrite(r->base_rows, sizeof(uint16_t) * len, (size_t)n_rows, r->base_out) != (size_t)n_rows)
        return fl_err_set(err, -EIO, "cannot write the base file: %s", strerror(errno));
    return 0;
}

/* One chunk's scored rows: into the running figures, the base written or
 * compared with, the chunk's line printed. */
static int chunk_done(struct ppl_run *r, const struct ppl_opts *o, int chunk, const float *rows,
                      struct fl_err *err)
{
    const int32_t *tokens = r->tokens + (size_t)chunk * r->n_ctx;
    if (r->kld) {
        int rc = fl_kld_base_read_chunk(r->base, r->base_rows, err);
        if (rc)
            return rc;
        if (chunk == 0)
            kld_print_header(stdout);
        kld_report_chunk(r->kld, rows, r->base_rows, r->n_ctx - 1 - r->first, r->n_vocab,
                         tokens + r->first + 1);
        kld_print_chunk(r->kld, chunk, stdout);
        return 0;
    }
    score(r, rows, tokens);
    print_chunk(r, o, chunk);
    return r->base_out ? write_base_rows(r, rows, err) : 0;
}

static int final_estimate(struct ppl_run *r, struct fl_err *err)
{
    if (r->kld) {
        if (kld_print_final(r->kld, stdout))
            fprintf(stderr, "faultline perplexity: %lld tokens scored, too few for the "
                    "statistics (100 or more)\n", (long long)r->kld->s.count);
        return 0;
    }
    printf("\n");
    const double nll = r->nll / r->count, ppl = exp(nll);
    const double var = r->nll2 / r->count - nll * nll;
    if (!(var > 0))
        return fl_err_set(err, -EDOM, "the log-probabilities have no spread (negative variance)");
    printf("Final estimate: PPL = %.4lf +/- %.5lf\n", ppl, sqrt(var / (r->count - 1)) * ppl);
    fflush(stdout); /* before --stats' lines on stderr */
    return 0;
}

static int measure(struct ppl_run *r, const struct ppl_opts *o, int n_chunk, struct fl_err *err)
{
    int rc = 0;
    for (int i = 0; !rc && i < n_chunk; i += r->n_seq) {
        const int n = n_chunk - i < r->n_seq ? n_chunk - i : r->n_seq;
        const double t0 = fl_clock_s();
        rc = run_chunks(r, i, n, err);
        if (!rc && i == 0) {
            const double t = fl_clock_s() - t0;
            fprintf(stderr, "perplexity: %.2f seconds per pass - ETA %.2f minutes\n", t,
                    t * ((n_chunk + r->n_seq - 1) / r->n_seq) / 60.0);
        }
        for (int q = 0; !rc && q < n; q++)
            rc = chunk_done(r, o, i + q,
                            r->logits + (size_t)q * (r->n_ctx - r->first) * r->n_vocab, err);
    }
    if (rc) {
        printf("\n");
        return rc;
    }
    return final_estimate(r, err);
}

/* --kl-divergence: the base file first (a bad one is refused before the
 * model loads); its chunk length is the run's. */
static int open_base(struct ppl_opts *o, struct fl_kld_base *base, struct fl_err *err)
{
    int rc = fl_kld_base_open(o->base_path, base, err);
    if (rc)
        return rc;
    if (o->sp.n_ctx > 0 && (uint32_t)o->sp.n_ctx != base->n_ctx)
        fprintf(stderr, "faultline perplexity: note: %s was computed with chunks of %u tokens; "
                "-c %d is not used\n", o->base_path, base->n_ctx, o->sp.n_ctx);
    o->sp.n_ctx = (int)base->n_ctx;
    return 0;
}

/* The text's tokens and chunks (from the base file under --kl-divergence).
 * Returns the chunk count, or a negative errno with err set. */
static int load_tokens(struct ppl_run *r, const char *text, size_t len, int32_t **tokens,
                       struct fl_err *err)
{
    if (r->base) {
        if (r->base->n_vocab != r->n_vocab)
            return fl_err_set(err, -EINVAL, "%s: a vocabulary of %d tokens; the model's has %d",
                              r->base->path, r->base->n_vocab, r->n_vocab);
        r->tokens = r->base->tokens;
        return r->base->n_chunk;
    }
    int n_tok = eng_tokenize_prompt(eng_session_tokenizer(r->s), text, len, false, tokens);
    if (n_tok < 0)
        return n_tok; /* said */
    if (n_tok < 2 * r->n_ctx)
        return fl_err_set(err, -EINVAL, "the text is %d tokens; perplexity with a context of %d "
                          "needs at least %d", n_tok, r->n_ctx, 2 * r->n_ctx);
    r->tokens = *tokens;
    return n_tok / r->n_ctx;
}

/* The buffers of a run: logits rows of n_seq chunks, a batch's ids, a
 * chunk of base rows and the KL-divergence report when a base is used. */
static int alloc_run(struct ppl_run *r, int n_chunk, bool saving, struct fl_err *err)
{
    const size_t n_rows = (size_t)(r->n_ctx - r->first);
    r->logits = malloc(sizeof(float) * (size_t)r->n_seq * n_rows * r->n_vocab);
    r->ids = malloc(sizeof(int32_t) * (size_t)r->n_batch);
    bool ok = r->logits && r->ids;
    if (ok && (saving || r->kld))
        ok = (r->base_rows = malloc(sizeof(uint16_t) * n_rows * fl_kld_row_len(r->n_vocab)));
    if (ok && r->kld)
        ok = !kld_report_init(r->kld, (size_t)n_chunk * (n_rows - 1));
    return ok ? 0 : fl_err_set(err, -ENOMEM, "out of memory for %d x %zu logits rows",
                               r->n_seq, n_rows);
}

/* The session and the text are ready: writes the base's header (when
 * saving one), then measures. */
static int ppl_measure(struct ppl_run *r, const struct ppl_opts *o, const struct fl_out *out,
                       int n_chunk, struct fl_err *err)
{
    int rc = alloc_run(r, n_chunk, out->tmp[0], err);
    if (!rc && out->tmp[0]) {
        r->base_out = fopen(out->tmp, "wb");
        rc = r->base_out ? fl_kld_base_write_header(r->base_out, (uint32_t)r->n_ctx, r->n_vocab,
                                                    n_chunk, r->tokens, err)
                         : fl_err_set(err, -errno, "%s: %s", out->tmp, strerror(errno));
    }
    if (!rc) {
        fprintf(stderr, "perplexity: %s over %d chunks, n_ctx=%d, batch_size=%d, n_seq=%d\n",
                r->kld ? "computing the KL-divergence" : "calculating perplexity", n_chunk,
                r->n_ctx, r->n_batch, r->n_seq);
        rc = measure(r, o, n_chunk, err);
    }
    if (r->base_out && fclose(r->base_out) && !rc)
        rc = fl_err_set(err, -EIO, "%s: %s", out->path, strerror(errno));
    r->base_out = NULL;
    return rc;
}

/* --hellaswag, --winogrande or --multiple-choice: the data file's tasks. */
static int run_tasks(struct ppl_opts *o, const char *text, size_t len, char *file_text,
                     struct fl_err *err)
{
    char *copy = file_text ? file_text : strndup(text, len); /* the lines are cut in place */
    cli_interrupt_graceful();
    o->sp.interrupted = cli_interrupted;
    int rc = !copy ? fl_err_set(err, -ENOMEM, "out of memory")
             : o->hellaswag ? ppl_hellaswag(&o->sp, copy, len, o->hs_tasks, err)
             : o->winogrande ? ppl_winogrande(&o->sp, copy, len, o->wg_tasks, err)
                             : ppl_multiple_choice(&o->sp, (const uint8_t *)copy, len, o->mc_tasks,
                                                   err);
    free(copy);
    return rc == -EINTR ? cli_interrupt_status(cli_interrupted()) : rc ? 1 : 0;
}

static int ppl_main(struct ppl_opts *o, struct fl_err *err)
{
    struct fl_kld_base base = { 0 };
    struct kld_report kld = { 0 };
    struct fl_out out = FL_OUT_NONE;
    size_t len = 0;
    char *file_text = NULL;
    const char *text = o->kld ? "" : eng_prompt_text(o->prompt, o->prompt_file, &file_text, &len);
    if (!text)
        return 1; /* said */
    if (o->hellaswag || o->winogrande || o->mc)
        return run_tasks(o, text, len, file_text, err);
    int rc = o->kld ? open_base(o, &base, err) : 0, n_ctx = 0, n_seq = 0;
    if (!rc && plan(o, &n_ctx, &n_seq)) {
        fl_kld_base_close(&base);
        free(file_text);
        return 2; /* said */
    }
    const char *inputs[] = { o->sp.model_path, o->prompt_file };
    if (!rc && o->base_path && !o->kld)
        rc = fl_out_begin(&out, o->base_path, inputs, 2, false, err);
    struct ppl_run r = { .n_ctx = n_ctx, .n_seq = n_seq, .first = n_ctx / 2, .bos = -1,
                         .base = o->kld ? &base : NULL, .kld = o->kld ? &kld : NULL };
    int32_t *tokens = NULL;
    cli_interrupt_graceful();
    o->sp.interrupted = cli_interrupted;
    if (!rc)
        rc = eng_session_open(&o->sp, &r.s, err);
    if (!rc) {
        eng_args_check_ctx("perplexity", &o->sp, eng_session_model(r.s));
        const struct fl_tokenizer *tok = eng_session_tokenizer(r.s);
        r.bos = fl_tokenizer_add_bos(tok) ? fl_token_bos(tok) : -1;
        r.n_vocab = (int)eng_session_model(r.s)->hp.n_vocab;
        r.n_batch = eng_session_n_batch(r.s);
        if (fl_tokenizer_add_eos(tok))
            rc = fl_err_set(err, -EINVAL, "the vocabulary adds EOS to every text: no perplexity "
                            "(as llama.cpp)");
    }
    int n_chunk = rc ? 0 : load_tokens(&r, text, len, &tokens, err);
    rc = rc ? rc : n_chunk < 0 ? n_chunk : 0;
    if (o->n_chunks >= 0 && o->n_chunks < n_chunk)
        n_chunk = o->n_chunks;
    if (!rc && n_chunk == 0)
        rc = fl_err_set(err, -EINVAL, "--chunks 0: nothing to measure");
    if (!rc)
        rc = ppl_measure(&r, o, &out, n_chunk, err);
    if (!rc)
        rc = fl_out_commit(&out, err);
    fl_out_abort(&out);
    if (!rc)
        rc = eng_session_report(r.s, err);
    free(r.logits);
    free(r.ids);
    free(r.base_rows);
    free(tokens);
    free(file_text);
    kld_report_free(&kld);
    fl_kld_base_close(&base);
    eng_session_close(r.s);
    return rc == -EINTR ? cli_interrupt_status(cli_interrupted()) : rc ? 1 : 0;
}

int cli_perplexity(int argc, char **argv)
{
    struct ppl_opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    struct fl_err err = { { 0 } };
    rc = ppl_main(&o, &err);
    if (rc && err.msg[0])
        fprintf(stderr, "faultline perplexity: %s\n", err.msg);
    return rc;
}
