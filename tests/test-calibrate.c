/* test-calibrate: the calibration pass behind `--cache pinned-hot
 * --calibrate PROMPTS` (app/calibrate.h).
 *  - eng_calibrate's per-(layer, expert) counts equal the router's choices
 *    this test counts itself, over the same tokens in windows of the
 *    context size each from position 0 (a context smaller than the text,
 *    so several windows run); the session is left at position 0;
 *  - through the CLI: a calibrated paged run works and says so; every
 *    misuse (no pinned-hot, two profiles, no profile, a missing or empty
 *    prompt file) is one line and a non-zero exit;
 *  - `bench --seed`: a profiling run for pinned-hot:STATS.json decodes other
 *    random tokens than the measured runs (the same seed: the same experts
 *    used, another seed: other ones). */
#include "app/calibrate.h"
#include "app/session.h"
#include "model/arch.h"
#include "text/tokenizer.h"
#include "record/stats-json.h"
#include "pager/policy.h"
#include "tests/test-paged-util.h"

#define MODEL "tests/data/qwen3moe-tiny-Q8_0.gguf"
#define N_CTX 24
#define TEXT "The lighthouse keeper wrote every evening: wind from the west, three ships, " \
    "one of them late. Numbers 12, 345 and 6789 filled the margins, with a list of " \
    "repairs that never seemed to end.\n"

struct counts {
    int n_expert;
    uint64_t c[64][256];
    int64_t total;
};

static void count(void *ctx, int layer, const struct eng_batch *b, int k, const int32_t *ids,
                  const float *weights)
{
    (void)weights;
    struct counts *c = ctx;
    for (int i = 0; i < b->n_tok * k; i++) {
        c->c[layer][ids[i]]++;
        c->total++;
    }
}

/* The router's choices over TEXT, counted here: tokenized as prompts are,
 * evaluated in windows of N_CTX tokens from position 0. */
static int64_t expected_counts(struct eng_session *s, struct counts *want)
{
    int32_t ids[512];
    int n = fl_tokenize(eng_session_tokenizer(s), TEXT, strlen(TEXT), true, false, ids, 512);
    CHECK(n > 2 * N_CTX, "the text should need several windows (%d tokens)", n);
    struct eng_routing_sink sink = { want, count };
    eng_session_set_routing(s, &sink);
    float *logits = malloc(sizeof(float) * (size_t)eng_session_model(s)->hp.n_vocab);
    struct fl_err err = { { 0 } };
    for (int at = 0; at < n; at += N_CTX) {
        eng_session_reset(s);
        int len = n - at < N_CTX ? n - at : N_CTX;
        CHECK(eng_session_eval(s, ids + at, len, false, logits, &err) == 0, "eval: %s", err.msg);
    }
    eng_session_set_routing(s, NULL);
    eng_session_reset(s);
    free(logits);
    return n;
}

static void test_counts(const char *text_path)
{
    struct eng_session_params p;
    eng_session_params_init(&p);
    p.model_path = MODEL;
    p.n_ctx = N_CTX;
    p.n_threads = 1;
    struct eng_session *s = NULL;
    struct fl_err err = { { 0 } };
    CHECK(eng_session_open(&p, &s, &err) == 0, "open: %s", err.msg);
    if (!s)
        return;
    const struct eng_hparams *hp = &eng_session_model(s)->hp;
    CHECK(hp->n_layer <= 64 && hp->n_expert <= 256, "the test's table is too small");
    static struct counts want;
    int64_t n_tok = expected_counts(s, &want);
    struct pager_hot_unit *got = NULL;
    int n = 0;
    int64_t got_tok = 0;
    CHECK(eng_calibrate(s, text_path, NULL, &got, &n, &got_tok, &err) == 0, "calibrate: %s", err.msg);
    CHECK(got_tok == n_tok, "calibrate: %lld tokens, the text has %lld", (long long)got_tok,
          (long long)n_tok);
    CHECK(eng_session_n_past(s) == 0, "calibrate left the session at %d", eng_session_n_past(s));
    int nonzero = 0, wrong = 0;
    uint64_t sum = 0;
    for (int l = 0; l < (int)hp->n_layer; l++)
        for (int e = 0; e < (int)hp->n_expert; e++)
            nonzero += want.c[l][e] > 0;
    for (int i = 0; i < n; i++) {
        const struct pager_hot_unit *u = &got[i];
        sum += u->count;
        if (u->layer < 0 || u->layer >= (int)hp->n_layer || u->expert < 0 ||
            u->expert >= (int)hp->n_expert || want.c[u->layer][u->expert] != u->count)
            wrong++;
    }
    CHECK(n == nonzero && wrong == 0 && sum == (uint64_t)want.total,
          "calibrate: %d experts (want %d), %d with the wrong count, %llu choices (want %lld)", n,
          nonzero, wrong, (unsigned long long)sum, (long long)want.total);
    printf("counts: %lld tokens in windows of %d, %d experts, %llu router choices, %s\n",
           (long long)n_tok, N_CTX, n, (unsigned long long)sum,
           wrong || n != nonzero ? "DIFFERENT" : "all equal");
    free(got);
    eng_session_close(s);
}

/* `faultline run` with flags; the exit status, stderr in err_path. */
static int run(const char *cli, char **flags, const char *err_path)
{
    char *argv[32] = { (char *)cli, "run", "-m", MODEL, "-p", "Once upon a time", "-n", "4",
                       "--disk-moe" };
    int n = 9;
    for (int i = 0; flags[i] && n < 31; i++)
        argv[n++] = flags[i];
    argv[n] = NULL;
    return t_run_cmd(argv, NULL, err_path, 60).status;
}

static void expect_error(const char *cli, char **flags, const char *err_path, const char *what)
{
    int st = run(cli, flags, err_path);
    char *msg = check_read_file(err_path, NULL);
    int lines = 0;
    for (const char *c = msg; c && *c; c++)
        lines += *c == '\n';
    CHECK(st > 0 && st < 128 && msg && strstr(msg, what) && lines == 1,
          "%s %s: exit %d, '%s' (want one line with '%s')", flags[0], flags[1], st,
          msg ? msg : "", what);
    free(msg);
}

static void test_cli(const char *cli, const char *dir, const char *text_path)
{
    char err[512], empty[512], missing[512];
    snprintf(err, sizeof(err), "%s/stderr", dir);
    snprintf(empty, sizeof(empty), "%s/empty.txt", dir);
    snprintf(missing, sizeof(missing), "%s/missing.txt", dir);
    FILE *f = fopen(empty, "w");
    if (f)
        fclose(f);
    char *ok[] = { "--ram-budget", "300K", "--cache", "pinned-hot", "--calibrate",
                   (char *)text_path, NULL };
    int st = run(cli, ok, err);
    char *msg = check_read_file(err, NULL);
    CHECK(st == 0 && msg && strstr(msg, "calibrated on"), "calibrated run: exit %d: %s", st,
          msg ? msg : "");
    free(msg);
    char *no_pinned[] = { "--calibrate", (char *)text_path, NULL };
    expect_error(cli, no_pinned, err, "add --cache pinned-hot");
    char *two[] = { "--cache", "pinned-hot:x.json", "--calibrate", (char *)text_path, NULL };
    expect_error(cli, two, err, "give one profile");
    char *none[] = { "--cache", "pinned-hot", NULL };
    expect_error(cli, none, err, "needs a profile");
    char *gone[] = { "--cache", "pinned-hot", "--calibrate", missing, NULL };
    expect_error(cli, gone, err, missing);
    char *blank[] = { "--cache", "pinned-hot", "--calibrate", empty, NULL };
    expect_error(cli, blank, err, "no text");
    printf("cli: a calibrated run, and 5 misuses each one line\n");
}

/* A bench run's per-expert heat (pager/policy.h's reading of its
 * --stats-json: acquires + faults, which the routing alone decides; the
 * paging counters themselves depend on read timing) as sorted text. */
static char *bench_heat(const char *cli, const char *dir, const char *seed)
{
    char json[512];
    snprintf(json, sizeof(json), "%s/bench-%s.json", dir, seed);
    char *argv[] = { (char *)cli, "bench", "-m", MODEL, "-p", "0", "-n", "6", "-r", "1",
                     "--disk-moe", "--ram-budget", "300K", "--seed", (char *)seed,
                     "--stats-json", json, NULL };
    struct pager_hot_unit *h = NULL;
    int n = 0;
    struct fl_err err = { { 0 } };
    if (t_run_cmd(argv, NULL, NULL, 60).status != 0 || eng_hot_profile_load(json, &h, &n, &err))
        return NULL;
    char *text = calloc((size_t)n + 1, 48);
    size_t len = 0;
    /* Units come in the pager's (layer, expert) order. A unit read ahead but never used
     * (count 0) is left out: whether a prefetch found room under the budget depends on
     * timing, while the uses themselves depend on the seed alone. */
    for (int i = 0; text && i < n; i++)
        if (h[i].count)
            len += (size_t)sprintf(text + len, "%d.%d:%llu ", h[i].layer, h[i].expert,
                                   (unsigned long long)h[i].count);
    free(h);
    return text;
}

static void test_bench_seed(const char *cli, const char *dir)
{
    char *a = bench_heat(cli, dir, "1234"), *b = bench_heat(cli, dir, "1234");
    char *c = bench_heat(cli, dir, "7");
    CHECK(a && b && c, "bench --seed runs failed");
    if (a && b && c) {
        CHECK(!strcmp(a, b), "bench: the same seed used other experts:\n%s\n%s", a, b);
        CHECK(strcmp(a, c), "bench: --seed 7 used exactly the experts of the default seed");
        printf("bench --seed: same seed, same expert uses; another seed, other ones\n");
    }
    free(a);
    free(b);
    free(c);
}

int main(void)
{
    t_chdir_source();
    const char *cli = t_cli();
    char dir[] = "/tmp/test-calibrate-XXXXXX", text[600];
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(text, sizeof(text), "%s/prompts.txt", dir);
    FILE *f = fopen(text, "w");
    CHECK(f && fputs(TEXT, f) >= 0 && fclose(f) == 0, "cannot write %s", text);
    test_counts(text);
    test_cli(cli, dir, text);
    test_bench_seed(cli, dir);
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
    return check_summary("test-calibrate");
}
