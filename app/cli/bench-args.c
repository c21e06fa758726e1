/* bench-args.c: `faultline bench`'s command line, as llama-bench's: comma
 * lists and ranges for the counts, a flag given twice adds to its list,
 * -o for the output format, -fa accepted. */
#include "app/cli/bench.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli/engine-args.h"
#include "app/cli/session-flags.h"
#include "base/units.h"

static int usage(FILE *out)
{
    fprintf(out,
        "usage: faultline bench -m MODEL [-p 512] [-n 128] [-d 0] [-t T] [-b 2048] [-ub 512]\n"
        "                       [-fa auto] [-r 5] [-o md|csv|json|jsonl] [--disk-bw SIZE]\n"
        "                       [--seed 1234]\n"
        "llama-bench's table: pp<P> (a prompt of P tokens) and tg<N> (N single-token\n"
        "decodes), t/s as mean ± sample sd over R repetitions after a warmup run.\n"
        "-p, -n, -t, -b, -ub and -fa take lists as llama-bench does: 64,128, ranges\n"
        "16-64*2 or 1-4+1, or the flag again; every combination of -b, -ub, -fa and -t\n"
        "(in that order, -t innermost) runs every -p and then every -n, one row each;\n"
        "a 0 in -p or -n is skipped; -d D (a list too) runs each test after D untimed\n"
        "tokens in the cache (\"pp512 @ d4096\"). A prompt goes to the engine -ub tokens (at most -b)\n"
        "per forward call. -fa on|off|auto (1|0|-1): faultline's attention is exact\n"
        "either way, so it changes nothing; the fa column shows it. -o: llama-bench's\n"
        "md table (default), or csv, json, jsonl with its field names (model_size in\n"
        "bytes, model_n_params, avg_ts, stddev_ts, samples_ns, ...) plus\n"
        "model_n_params_active. The model column names the size as llama.cpp does\n"
        "(30B.A3B), or from the file's parameter counts (total.Aactive for a MoE).\n"
        "With experts paged from disk a second table gives, per test, the cache hit rate,\n"
        "prediction precision/recall, bytes read and stall time per token, and the I/O\n"
        "bound (--disk-bw: the disk's read bandwidth in bytes/s, e.g. 3G); on stderr\n"
        "when -o is not md. Token ids are random, the same in every run unless --seed\n"
        "changes them (a profiling run for --cache pinned-hot:STATS.json should not see\n"
        "the measured tokens).\n"
        "\n"
        "       faultline bench -m MODEL -npp 128,256 -ntg 32 -npl 1,16,64 [-c CELLS] ...\n"
        "llama-batched-bench's table: for each prompt length PP, generation length TG\n"
        "and B sequences, B prompts of PP tokens (-b tokens per forward call), then TG\n"
        "steps of one token per sequence. -c: the KV cells all sequences share (default:\n"
        "enough for the largest case; cases that do not fit are skipped). One -t, -b, -ub.\n"
        "\n"
        "Long forms: --n-prompt --n-gen --n-depth --threads --batch-size --ubatch-size --flash-attn\n"
        "--repetitions --output. Exit status: 0 done, 1 a runtime error, 2 a command-line\n"
        "mistake.\n");
    eng_session_print_usage(out);
    return out == stdout ? 0 : 2;
}

/* A whole number at *p (digits only), advancing *p. */
static bool read_count(const char **p, long *out)
{
    if (!isdigit((unsigned char)**p))
        return false;
    char *end;
    errno = 0;
    *out = strtol(*p, &end, 10);
    *p = end;
    return !errno;
}

/* One element: N, FIRST-LAST, FIRST-LAST+STEP or FIRST-LAST*MULT, appended to l. */
static bool parse_range(const char **p, int lo, struct bench_list *l)
{
    long first, last, step = 1;
    char op = '+';
    if (!read_count(p, &first))
        return false;
    last = first;
    if (**p == '-') {
        ++*p;
        if (!read_count(p, &last))
            return false;
        if (**p == '+' || **p == '*') {
            op = *(*p)++;
            if (!read_count(p, &step))
                return false;
        }
    }
    for (long x = first; x <= last;) {
        if (x < lo || x > (1 << 20) || l->n == BENCH_MAX_LIST)
            return false;
        l->v[l->n++] = (int)x;
        const long next = op == '+' ? x + step : x * step;
        if (next <= x) /* a step that goes nowhere */
            return false;
        x = next;
    }
    return true;
}

/* "64,128" or "16-64*2" appended to l; every value in [lo, 2^20]. */
static bool parse_list(const char *flag, const char *v, int lo, struct bench_list *l)
{
    const char *p = v;
    bool ok = true;
    while (ok) {
        ok = parse_range(&p, lo, l) && (*p == ',' || !*p);
        if (!ok || !*p++)
            break;
    }
    if (!ok)
        fprintf(stderr, "faultline bench: %s wants counts >= %d separated by commas, or ranges "
                        "such as 16-64*2 or 1-4+1 (at most %d values), not '%s'\n",
                flag, lo, BENCH_MAX_LIST, v);
    return ok;
}

/* -fa on|off|auto, and the other words llama.cpp takes, as a list */
static bool parse_fa(const char *v, struct bench_list *l)
{
    static const struct { const char *word; int value; } words[] = {
        { "on", 1 },  { "enabled", 1 },  { "true", 1 },  { "1", 1 },    { "off", 0 },
        { "disabled", 0 }, { "false", 0 }, { "0", 0 }, { "auto", -1 }, { "-1", -1 },
    };
    for (const char *p = v;;) {
        const size_t len = strcspn(p, ",");
        size_t i = 0;
        while (i < sizeof(words) / sizeof(words[0]) &&
               (strlen(words[i].word) != len || strncmp(words[i].word, p, len)))
            i++;
        if (i == sizeof(words) / sizeof(words[0]) || l->n == BENCH_MAX_LIST) {
            fprintf(stderr, "faultline bench: -fa wants on, off or auto (1, 0, -1), or a "
                            "comma list of them, not '%s'\n", v);
            return false;
        }
        l->v[l->n++] = words[i].value;
        if (!p[len])
            return true;
        p += len + 1;
    }
}


/* The list flag at argv[*i], if it is one: 1 taken, 0 not one, -1 bad. */
static int parse_list_flag(int argc, char **argv, int *i, struct bench_opts *o)
{
    const char *a = argv[*i], *v = NULL;
    static const struct { const char *flag, *alt; size_t off; int lo; } lists[] = {
        { "-p", "--n-prompt", offsetof(struct bench_opts, n_prompt), 0 },
        { "-n", "--n-gen", offsetof(struct bench_opts, n_gen), 0 },
        { "-d", "--n-depth", offsetof(struct bench_opts, depth), 0 },
        { "-t", "--threads", offsetof(struct bench_opts, threads), 1 },
        { "-b", "--batch-size", offsetof(struct bench_opts, batch), 1 },
        { "-ub", "--ubatch-size", offsetof(struct bench_opts, ubatch), 1 },
        { "-npp", NULL, offsetof(struct bench_opts, npp), 1 },
        { "-ntg", NULL, offsetof(struct bench_opts, ntg), 0 }, /* TG 0: prompts only */
        { "-npl", NULL, offsetof(struct bench_opts, npl), 1 },
    };
    if (eng_arg_is(a, "-fa", "--flash-attn"))
        return eng_arg_str("bench", argc, argv, i, &v) && parse_fa(v, &o->fa) ? 1 : -1;
    for (size_t k = 0; k < sizeof(lists) / sizeof(lists[0]); k++) {
        if (!eng_arg_is(a, lists[k].flag, lists[k].alt))
            continue;
        struct bench_list *l = (struct bench_list *)((char *)o + lists[k].off);
        return eng_arg_str("bench", argc, argv, i, &v) && parse_list(a, v, lists[k].lo, l) ? 1
                                                                                          : -1;
    }
    return 0;
}

/* bench's own single-valued flags: 1 taken, 0 not one, -1 bad. */
static int parse_own_flag(int argc, char **argv, int *i, struct bench_opts *o)
{
    const char *a = argv[*i], *v = NULL;
    bool ok;
    if (eng_arg_is(a, "-r", "--repetitions"))
        ok = eng_arg_int("bench", argc, argv, i, 1, 1000, &o->reps);
    else if (!strcmp(a, "--seed"))
        ok = eng_arg_int("bench", argc, argv, i, 0, 2147483647, &o->seed);
    else if (eng_arg_is(a, "-o", "--output")) {
        ok = eng_arg_str("bench", argc, argv, i, &v) && bench_format_parse(v, &o->format);
        if (!ok && v)
            fprintf(stderr, "faultline bench: -o wants md, csv, json or jsonl, not '%s'%s\n", v,
                    strcmp(v, "sql") ? "" : " (llama-bench's sql is not written)");
    } else if (!strcmp(a, "--disk-bw")) {
        ok = eng_arg_str("bench", argc, argv, i, &v) && fl_parse_size(v, &o->disk_bw) == 0;
        if (!ok && v)
            fprintf(stderr, "faultline bench: --disk-bw wants a size such as 3G, not '%s'\n", v);
    } else if (eng_arg_is(a, "-ngl", "--n-gpu-layers") && *i + 1 < argc &&
               strchr(argv[*i + 1], ',')) {
        fprintf(stderr, "faultline bench: %s takes one value per run, not the list '%s': run "
                        "faultline bench once per value\n", a, argv[*i + 1]);
        ok = false;
    } else if (!strcmp(a, "-pps")) {
        fprintf(stderr, "faultline bench: -pps (one prompt shared by all sequences) is not "
                        "supported: each sequence has its own cells; leave it out\n");
        ok = false;
    } else
        return 0;
    return ok ? 1 : -1;
}

/* An empty list takes llama-bench's default; whether md shows its column. */
static bool list_default(struct bench_list *l, int def)
{
    if (!l->n)
        l->v[l->n++] = def;
    return l->n > 1 || l->v[0] != def;
}

static bool all_zero(const struct bench_list *l)
{
    for (int i = 0; i < l->n; i++)
        if (l->v[i])
            return false;
    return true;
}

/* The batched mode takes llama-batched-bench's single values. */
static int check_batched(struct bench_opts *o)
{
    if (!(o->npp.n && o->ntg.n && o->npl.n)) {
        fprintf(stderr, "faultline bench: the batched mode wants all of -npp, -ntg and -npl\n");
        return 2;
    }
    if (o->threads.n > 1 || o->batch.n > 1 || o->ubatch.n > 1 || o->fa.n > 1 ||
        o->n_prompt.n || o->n_gen.n || o->depth.n || o->format != BENCH_MD) {
        fprintf(stderr, "faultline bench: the batched mode (-npp/-ntg/-npl) takes one -t, -b, "
                        "-ub and -fa, no -p/-n/-d, and prints llama-batched-bench's table (no -o)\n");
        return 2;
    }
    if (o->threads.n)
        o->sp.n_threads = o->threads.v[0];
    const int b = o->batch.n ? o->batch.v[0] : 0, ub = o->ubatch.n ? o->ubatch.v[0] : 0;
    o->sp.n_batch = b && ub ? (b < ub ? b : ub) : b ? b : ub; /* 0: the session's default */
    return -1;
}

static int check(struct bench_opts *o)
{
    if (!o->sp.model_path) {
        fprintf(stderr, "faultline bench: -m MODEL is required (--help: the options)\n");
        return 2;
    }
    if (o->npp.n || o->ntg.n || o->npl.n)
        return check_batched(o);
    if (o->sp.n_ctx) {
        fprintf(stderr, "faultline bench: -c sizes the batched mode's cells (-npp/-ntg/-npl); "
                        "pp/tg tests size their own context\n");
        return 2;
    }
    list_default(&o->n_prompt, BENCH_DEF_PROMPT);
    list_default(&o->n_gen, BENCH_DEF_GEN);
    list_default(&o->depth, 0);
    o->col_batch = list_default(&o->batch, BENCH_DEF_BATCH);
    o->col_ubatch = list_default(&o->ubatch, BENCH_DEF_UBATCH);
    o->col_fa = list_default(&o->fa, BENCH_DEF_FA);
    if (all_zero(&o->n_prompt) && all_zero(&o->n_gen)) {
        fprintf(stderr, "faultline bench: nothing to measure (-p 0 -n 0)\n");
        return 2;
    }
    if (o->threads.n)
        o->sp.n_threads = o->threads.v[0];
    return -1;
}

int bench_parse(int argc, char **argv, struct bench_opts *o)
{
    *o = (struct bench_opts){ .reps = 5, .seed = 1234, .format = BENCH_MD };
    eng_session_params_init(&o->sp);
    /* -p is bench's prompt length and the context is sized from -p and -n */
    struct eng_compat compat = { 0 }; /* --mlock, --no-mmap, -tb: notes */
    const struct eng_common_args common = { &o->sp, NULL, NULL, true, &compat };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (eng_arg_is(a, "-h", "--help"))
            return usage(stdout);
        int taken = parse_list_flag(argc, argv, &i, o);
        if (!taken)
            taken = parse_own_flag(argc, argv, &i, o);
        if (!taken)
            taken = eng_arg_common("bench", argc, argv, &i, &common);
        if (!taken) {
            fprintf(stderr, "faultline bench: unknown option '%s' (--help: the options)\n", a);
            return 2;
        }
        if (taken < 0)
            return 2;
    }
    eng_args_finish("bench", &common);
    return check(o);
}
