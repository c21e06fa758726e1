/* embed.c: `faultline embed` — llama.cpp's llama-embedding: the embeddings
 * of prompts (-p TEXT or -f FILE, cut at --embd-separator, a line each by
 * default), run together through the scheduler (app/scheduler.h) as the
 * server's and batch's embeddings are, and printed as llama-embedding
 * prints them: by default each vector (the first 16 values when there are
 * several prompts; with --pooling none each token's first and last three)
 * and the prompts' cosine similarities; --embd-output-format array, json,
 * json+ (with the similarities) or raw (a line of values per vector). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/embeddings.h"
#include "app/cli/commands.h"
#include "app/cli/engine-args.h"
#include "app/cli/session-flags.h"
#include "app/scheduler.h"
#include "base/clock.h"
#include "base/whole-file.h"
#include "serve/engine-request.h"
#include "text/tokenizer.h"

struct embed_opts {
    struct eng_session_params sp;
    const char *prompt, *file, *sep, *format;
    int pooling, norm;
    bool escape;
};

/* One prompt: its text, and its vectors once done. */
struct embed_item {
    const char *text;
    float *v;                     /* [rows][n_embd], scaled */
    int rows, n_tokens;
    char error[256];
};

static int usage(FILE *out)
{
    fprintf(out,
            "usage: faultline embed -m MODEL (-p TEXT | -f FILE) [--embd-separator SEP]\n"
            "                       [--pooling last|mean|cls|none] [--embd-normalize 2]\n"
            "                       [--embd-output-format array|json|json+|raw] [-np 4] [--no-escape]\n"
            "llama-embedding's command: the embeddings of the prompts (the text cut at SEP, \"\\n\"\n"
            "by default), the final norm's output pooled by --pooling (default: the model's\n"
            "pooling_type, else last) and scaled by --embd-normalize (2: unit length; -1: none;\n"
            "0: the largest magnitude to 32760), printed as llama-embedding prints them, with the\n"
            "prompts' cosine similarities. -np prompts run at once. -p's escapes (\\n, \\t, ...) are\n"
            "read unless --no-escape. The server's /v1/embeddings and batch's lines give the same\n"
            "vectors (docs/serve.md).\n");
    eng_session_print_usage(out);
    return out == stdout ? 0 : 2;
}

static int parse(int argc, char **argv, struct embed_opts *o)
{
    *o = (struct embed_opts){ .sep = "\n", .format = "", .pooling = -1,
                              .norm = API_EMBD_NORM_DEFAULT, .escape = true };
    eng_session_params_init(&o->sp);
    o->sp.n_seq = 4;
    struct eng_compat compat = { 0 };
    const struct eng_common_args common = { &o->sp, NULL, NULL, true, &compat };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int taken;
        bool ok = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage(stdout);
        if (eng_arg_is(a, "-p", "--prompt"))
            ok = eng_arg_str("embed", argc, argv, &i, &o->prompt);
        else if (eng_arg_is(a, "-f", "--file"))
            ok = eng_arg_str("embed", argc, argv, &i, &o->file);
        else if (!strcmp(a, "--embd-separator"))
            ok = eng_arg_str("embed", argc, argv, &i, &o->sep);
        else if (!strcmp(a, "--embd-output-format"))
            ok = eng_arg_str("embed", argc, argv, &i, &o->format);
        else if (eng_arg_is(a, "-np", "--parallel"))
            ok = eng_arg_int("embed", argc, argv, &i, 1, ENG_SESSION_MAX_SEQ, &o->sp.n_seq);
        else if (eng_arg_is(a, "-e", "--escape") || !strcmp(a, "--no-escape"))
            o->escape = a[2] != 'n';
        else if ((taken = eng_arg_embd("embed", argc, argv, &i, &o->pooling, &o->norm)) != 0)
            ok = taken > 0;
        else
            ok = eng_arg_last("embed", argc, argv, &i, &common) > 0;
        if (!ok)
            return 2;
    }
    if (!o->sp.model_path || !o->prompt == !o->file) {
        fprintf(stderr, "faultline embed: -m and one of -p or -f are required\n");
        return usage(stderr);
    }
    static const char *const formats[] = { "", "array", "json", "json+", "raw" };
    bool known = false;
    for (size_t k = 0; k < sizeof(formats) / sizeof(formats[0]); k++)
        known |= !strcmp(o->format, formats[k]);
    if (!known || !o->sep[0]) {
        fprintf(stderr, "faultline embed: %s\n", !o->sep[0] ? "--embd-separator cannot be empty"
                        : "--embd-output-format is array, json, json+ or raw (or empty)");
        return 2;
    }
    eng_args_finish("embed", &common);
    return -1;
}

/* The prompts: text cut at sep, in place (items point into it). */
static int split(char *text, const char *sep, struct embed_item **out)
{
    int n = 1;
    for (const char *p = strstr(text, sep); p; p = strstr(p + strlen(sep), sep))
        n++;
    struct embed_item *it = calloc((size_t)n, sizeof(*it));
    if (!it)
        return -ENOMEM;
    char *p = text;
    for (int i = 0; i < n; i++) {
        char *end = i + 1 < n ? strstr(p, sep) : NULL;
        if (end)
            *end = '\0';
        it[i].text = p;
        p = end ? end + strlen(sep) : p;
    }
    *out = it;
    return n;
}

struct embed_run {
    struct embed_item *items;
    int n_embd, norm;
    enum eng_pooling pool;
};

static void on_done(void *ctx, void *user, const struct eng_req_result *r)
{
    struct embed_run *run = ctx;
    struct embed_item *it = user;
    const size_t e = (size_t)r->n_embd;
    if (!r->embd || !(it->v = malloc(sizeof(float) * e * (size_t)r->n_embd_rows))) {
        snprintf(it->error, sizeof(it->error), "%s", r->error ? r->error : "out of memory");
        return;
    }
    it->rows = r->n_embd_rows;
    it->n_tokens = r->n_prompt;
    for (int k = 0; k < it->rows; k++) /* llama-embedding scales every row, a token's too */
        api_embd_normalize(r->embd + (size_t)k * e, it->v + (size_t)k * e, r->n_embd, run->norm);
}

/* Each prompt's tokens, submitted; then steps until all are done. */
static int embed_all(struct eng_session *s, struct embed_run *run, int n, struct fl_err *err)
{
    struct eng_sched *q = NULL;
    const struct eng_sched_hooks hooks = { .ctx = run, .done = on_done };
    int rc = eng_sched_create(s, &hooks, &q, err);
    for (int i = 0; !rc && i < n; i++) {
        const struct api_embd_input in = { .text = run->items[i].text,
                                           .len = strlen(run->items[i].text) };
        char why[160];
        int32_t *ids = NULL;
        const int t = srv_embd_tokens(eng_session_tokenizer(s), &in, eng_session_n_ctx(s), &ids,
                                      why, sizeof(why));
        struct eng_req req = { .prompt = ids, .n_prompt = t, .embed = true, .pooling = run->pool,
                               .user = &run->items[i] };
        fl_sampler_defaults(&req.sampling, 0); /* nothing is sampled; the request wants valid ones */
        if (t < 0)
            rc = fl_err_set(err, -EINVAL, "prompt %d: %s", i, why);
        else if (eng_sched_submit(q, &req, err) < 0)
            rc = -EINVAL;
        free(ids);
    }
    int step = 0;
    while (!rc && (step = eng_sched_step(q, err)) > 0)
        ;
    rc = rc ? rc : step;
    for (int i = 0; !rc && i < n; i++)
        if (!run->items[i].v)
            rc = fl_err_set(err, -EIO, "prompt %d: %s", i, run->items[i].error);
    eng_sched_free(q);
    return rc;
}

/* common_embd_similarity_cos's rule: sums in double; two zero vectors are alike. */
static float cosine(const float *a, const float *b, int n)
{
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++)
        ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    if (aa == 0 || bb == 0)
        return aa == 0 && bb == 0 ? 1.0f : 0.0f;
    return (float)(ab / (sqrt(aa) * sqrt(bb)));
}

/* The vectors in order: rows of every prompt (with --pooling none, every token's). */
static const float *row_of(const struct embed_run *run, int n, int j)
{
    for (int i = 0; i < n; j -= run->items[i++].rows)
        if (j < run->items[i].rows)
            return run->items[i].v + (size_t)j * (size_t)run->n_embd;
    return NULL;
}

static void print_values(const float *v, int from, int to, int norm, const char *sep_fmt)
{
    for (int i = from; i < to; i++)
        printf(norm == 0 ? "%6.0f " : sep_fmt, v[i]);
}

/* llama-embedding's plain output. */
static void print_plain(const struct embed_run *run, int n, int count)
{
    const int e = run->n_embd;
    printf("\n");
    for (int j = 0; j < count; j++) {
        const float *v = row_of(run, n, j);
        printf("embedding %d: ", j);
        if (run->pool == ENG_POOL_NONE) {
            print_values(v, 0, e < 3 ? e : 3, run->norm, "%9.6f ");
            printf(" ... ");
            print_values(v, e - 3 > 0 ? e - 3 : 0, e, run->norm, "%9.6f ");
        } else {
            print_values(v, 0, n > 1 && e > 16 ? 16 : e, run->norm, "%9.6f ");
        }
        printf("\n");
    }
    if (run->pool == ENG_POOL_NONE || n < 2)
        return;
    printf("\ncosine similarity matrix:\n\n");
    for (int i = 0; i < n; i++)
        printf("%6.6s ", run->items[i].text);
    printf("\n");
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++)
            printf("%6.2f ", cosine(row_of(run, n, i), row_of(run, n, j), e));
        printf("%1.10s\n", run->items[i].text);
    }
}

/* array, json, json+ (llama-embedding's layout) and raw. */
static void print_formatted(const struct embed_run *run, int n, int count, const char *fmt)
{
    const char *num = run->norm == 0 ? "%1.0f" : "%1.7f";
    const int e = run->n_embd;
    if (!strcmp(fmt, "raw")) {
        for (int j = 0; j < count; j++) {
            const float *v = row_of(run, n, j);
            for (int i = 0; i < e; i++) {
                printf(num, v[i]);
                printf(i + 1 < e ? " " : "\n");
            }
        }
        return;
    }
    const bool obj = strcmp(fmt, "array") != 0;
    printf(obj ? "{\n  \"object\": \"list\",\n  \"data\": [\n" : "[");
    for (int j = 0; j < count; j++) {
        const float *v = row_of(run, n, j);
        if (obj)
            printf("    {\n      \"object\": \"embedding\",\n      \"index\": %d,\n      \"embedding\": ", j);
        printf("[");
        for (int i = 0; i < e; i++) {
            printf(num, v[i]);
            printf(i + 1 < e ? "," : "");
        }
        printf(obj ? "]\n    }" : "]");
        printf(j + 1 < count ? (obj ? ",\n" : ",") : "");
    }
    printf(obj ? "\n  ]" : "]\n");
    if (!strcmp(fmt, "json+") && count > 1) {
        printf(",\n  \"cosineSimilarity\": [\n");
        for (int i = 0; i < count; i++) {
            printf("    [");
            for (int j = 0; j < count; j++)
                printf("%6.2f%s", cosine(row_of(run, n, i), row_of(run, n, j), e), j + 1 < count ? ", " : "");
            printf(" ]%s", i + 1 < count ? ",\n" : "");
        }
        printf("\n  ]");
    }
    if (obj)
        printf("\n}\n");
}

static int embed_main(struct embed_opts *o, char *text, struct fl_err *err)
{
    struct embed_item *items = NULL;
    const int n = split(text, o->sep, &items);
    if (n < 0)
        return fl_err_set(err, n, "out of memory");
    struct eng_session *s = NULL;
    const double t0 = fl_clock_s();
    int rc = eng_session_open(&o->sp, &s, err);
    struct embed_run run = { .items = items, .norm = o->norm };
    if (!rc) {
        run.n_embd = (int)eng_session_model(s)->hp.n_embd;
        run.pool = srv_embd_pooling(s, o->pooling);
        rc = embed_all(s, &run, n, err);
    }
    int count = 0, tokens = 0;
    for (int i = 0; !rc && i < n; i++)
        count += items[i].rows, tokens += items[i].n_tokens;
    if (!rc && !o->format[0])
        print_plain(&run, n, count);
    else if (!rc)
        print_formatted(&run, n, count, o->format);
    if (!rc)
        fprintf(stderr, "embed: %d prompts, %d tokens, pooling %s, in %.2f s\n", n, tokens,
                eng_pooling_name(run.pool), fl_clock_s() - t0);
    for (int i = 0; i < n; i++)
        free(items[i].v);
    free(items);
    eng_session_close(s);
    return rc;
}

int cli_embed(int argc, char **argv)
{
    struct embed_opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    char *text = NULL;
    size_t len = 0;
    if (o.file) {
        rc = fl_read_whole_file(o.file, (size_t)1 << 28, &text, &len);
        if (rc) {
            fprintf(stderr, "faultline embed: %s: %s\n", o.file, strerror(-rc));
            return 1;
        }
    } else if ((text = strdup(o.prompt)) != NULL && o.escape) {
        eng_process_escapes(text);
    }
    if (!text || (len && memchr(text, '\0', len))) {
        fprintf(stderr, "faultline embed: %s\n", text ? "the file holds a NUL byte" : "out of memory");
        free(text);
        return 1;
    }
    struct fl_err err = { "" };
    rc = embed_main(&o, text, &err);
    free(text);
    if (rc)
        fprintf(stderr, "faultline embed: %s\n", err.msg);
    return rc ? 1 : 0;
}
