/* test-speculate: speculative decoding, without a draft model
 * (app/speculate.h) and with one (app/draft-model.h), changes no bit of an
 * answer.
 *
 * First the draft itself: histories written out by hand, with the draft
 * llama.cpp's ngram-simple rule gives them (the latest earlier occurrence
 * of the last n tokens, the tokens after it, at least n and at most m of
 * them, never a match at position 0, a history longer than n + m + 1).
 *
 * Then the scheduler: on six tests/data models (attention with sliding
 * windows and sinks, MLA, Q4_K, a quantized KV cache), resident, and three
 * of them also paged under the smallest budget and on the device when there
 * is one (the emulated one in its build): four requests (greedy, sampling
 * with a seed, one with a stop string, one in JSON mode with
 * log-probabilities) on 2 sequences, first without speculation and then
 * with drafts of every length up to the limit, and with a draft model (the
 * model itself, its F16 sibling). Every logits row, token and text must be the same bytes,
 * drafts must have been fed and kept, and every KV cell must be free after.
 * A recurrent model (Qwen3.5, Qwen3-Next) takes a rejected draft back by
 * its state before the span and the kept positions fed again (as a draft
 * model, by its state after the history); on the device it refuses
 * speculation (-ENOTSUP) and decodes as before.
 * FL_SPEC_MODELS=a,b limits the models. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/draft-model.h"
#include "app/scheduler.h"
#include "app/speculate.h"
#include "backend/cuda/gpu.h"
#include "tests/check.h"
#include "text/tokenizer.h"

/* --- the draft ------------------------------------------------------------------ */

static void check_draft(const char *what, const int32_t *a, int na, const int32_t *b, int nb,
                        int n, int m, int max, const int32_t *want, int n_want)
{
    struct eng_spec_params p = ENG_SPEC_PARAMS_DEFAULT;
    p.type = ENG_SPEC_NGRAM_SIMPLE, p.size_n = n, p.size_m = m;
    int32_t out[64];
    const int got = eng_spec_draft(&p, a, na, b, nb, out, max);
    CHECK(got == n_want, "%s: a draft of %d tokens, want %d", what, got, n_want);
    for (int i = 0; i < got && i < n_want; i++)
        CHECK(out[i] == want[i], "%s: draft[%d] = %d, want %d", what, i, out[i], want[i]);
}

static void test_drafts(void)
{
    /* history 1 2 3 4 5 6 7 1 2 | 3: key (2 3) ends with the sampled 3; its
     * latest earlier start is index 1, followed by 4 5 6 7 1 2 3 */
    const int32_t h[] = { 1, 2, 3, 4, 5, 6, 7, 1, 2, 3 };
    const int32_t after[] = { 4, 5, 6, 7, 1 };
    check_draft("n 2 m 5", h, 10, NULL, 0, 2, 5, 64, after, 5);
    /* split anywhere between prompt and generated tokens: the same */
    check_draft("split 4", h, 4, h + 4, 6, 2, 5, 64, after, 5);
    check_draft("split 9", h, 9, h + 9, 1, 2, 5, 64, after, 5);
    check_draft("all generated", NULL, 0, h, 10, 2, 5, 64, after, 5);
    /* the caller's limit cuts it */
    check_draft("max 3", h, 10, NULL, 0, 2, 5, 3, after, 3);
    /* m larger than what follows: up to the sampled token's position (the
     * history without it ends at index 12: 4 5 6 7 1 2 after the key at 5) */
    const int32_t g[] = { 10, 11, 12, 13, 1, 2, 3, 4, 5, 6, 7, 1, 2, 3 };
    check_draft("m 8: 6 follow", g, 14, NULL, 0, 2, 8, 64, (const int32_t[]){ 4, 5, 6, 7, 1, 2 }, 6);
    /* too short a history: 10 tokens <= n + m + 2 */
    check_draft("n 2 m 7: too short", h, 10, NULL, 0, 2, 7, 64, NULL, 0);
    /* the key's only earlier occurrence is at position 0: none */
    const int32_t z[] = { 9, 8, 1, 2, 3, 4, 5, 6, 9, 8 };
    check_draft("match at 0 only", z, 10, NULL, 0, 2, 3, 64, NULL, 0);
    /* the latest occurrence wins: 5 6 appears at 1 and at 5 */
    const int32_t l[] = { 0, 5, 6, 1, 2, 5, 6, 3, 4, 7, 8, 9, 5, 6 };
    check_draft("latest", l, 14, NULL, 0, 2, 4, 64, (const int32_t[]){ 3, 4, 7, 8 }, 4);
    /* fewer than n tokens after the match: none (n 3, m 5; key 7 8 9 at 6,
     * the history before the sampled token ends at index 11: 2 after) */
    const int32_t f[] = { 0, 1, 2, 3, 4, 5, 7, 8, 9, 4, 4, 7, 8, 9 };
    check_draft("fewer than n after", f, 12, f + 12, 0, 3, 5, 64, NULL, 0);
    check_draft("no key", (const int32_t[]){ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 }, 11, NULL, 0, 2, 3,
                64, NULL, 0);
    const struct eng_spec_params none = ENG_SPEC_PARAMS_DEFAULT;
    int32_t out[8];
    CHECK(eng_spec_draft(&none, h, 10, NULL, 0, out, 8) == 0, "type none drafts nothing");
    CHECK(eng_spec_type_parse("ngram-simple") == ENG_SPEC_NGRAM_SIMPLE &&
          eng_spec_type_parse("none") == ENG_SPEC_NONE && eng_spec_type_parse("ngram-mod") < 0,
          "type names");
}

/* --- the scheduler ----------------------------------------------------------------- */

#define N_REQ 4
#define MAX_ROWS 96

static const char *const prompts[N_REQ] = {
    "the cat sat on the mat, the cat sat on the mat, the cat sat on the",
    "Once upon a time, in a land far away, there lived a",
    "def f(x):\n    return x + 1\n\ndef g(x):\n    return",
    "a list: [1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2",
};
static const int max_tokens[N_REQ] = { 56, 40, 48, 40 };

struct rec {
    int n_rows, n_tokens, n_drafted, n_accepted, n_lp;
    float lp[MAX_ROWS];
    float *rows[MAX_ROWS];
    int32_t tokens[MAX_ROWS];
    char text[2048];
    enum eng_finish finish;
    bool done;
};

static void on_logits(void *ctx, void *user, int pos, const float *row, int n_vocab)
{
    (void)ctx, (void)pos;
    struct rec *r = user;
    if (r->n_rows == MAX_ROWS)
        return;
    r->rows[r->n_rows] = malloc(sizeof(float) * (size_t)n_vocab);
    memcpy(r->rows[r->n_rows++], row, sizeof(float) * (size_t)n_vocab);
}

static void on_done(void *ctx, void *user, const struct eng_req_result *res)
{
    (void)ctx;
    struct rec *r = user;
    snprintf(r->text, sizeof(r->text), "%s", res->text);
    r->finish = res->finish;
    r->n_tokens = res->n_tokens < MAX_ROWS ? res->n_tokens : MAX_ROWS;
    memcpy(r->tokens, res->tokens, sizeof(int32_t) * (size_t)r->n_tokens);
    r->n_lp = res->n_logprobs < MAX_ROWS ? res->n_logprobs : MAX_ROWS;
    for (int i = 0; i < r->n_lp; i++)
        r->lp[i] = res->logprobs[i].token.logprob;
    r->n_drafted = res->n_drafted;
    r->n_accepted = res->n_accepted;
    r->done = true;
}

static void rec_free(struct rec *r)
{
    for (int i = 0; i < r->n_rows; i++)
        free(r->rows[i]);
    memset(r, 0, sizeof(*r));
}

enum mode { CPU, CPU_PAGED, GPU_VRAM, N_MODES };
static const char *const mode_names[N_MODES] = { "cpu", "cpu-paged", "gpu-vram" };

static int open_session(const char *path, enum mode mode, enum fl_type kv, uint64_t budget,
                        struct eng_session **s, struct fl_err *err)
{
    struct eng_session_params p;
    eng_session_params_init(&p);
    p.model_path = path;
    p.n_ctx = 512;
    p.n_batch = 64;
    p.n_seq = 2;
    p.n_threads = 2;
    p.cache_type_k = p.cache_type_v = kv;
    p.placement.disk_moe = mode == CPU_PAGED;
    p.placement.last_all_moe = PL_TIER_DISK;
    p.placement.ram_budget = budget;
    p.gpu_experts = ENG_GPU_EXPERTS_NONE;
    p.placement.n_gpu_layers = 0;
    if (mode == GPU_VRAM) {
        p.placement.n_gpu_layers = -1;
        p.gpu_experts = ENG_GPU_EXPERTS_COPY;
        p.pager_mode = 2; /* explicit: no userfaultfd rights needed */
        p.placement.overrides[0] = "exps=gpu";
        p.placement.n_overrides = 1;
    }
    return eng_session_open(&p, s, err);
}

/* The three requests on one scheduler with spec; the drafts fed in all. */
static int run(struct eng_session *s, const struct eng_spec_params *spec, struct rec *out,
               const char *label)
{
    const struct eng_sched_hooks hooks = { .done = on_done, .logits = on_logits };
    struct eng_sched *q;
    struct fl_err err;
    CHECK(eng_sched_create(s, &hooks, &q, &err) == 0, "%s: sched: %s", label, err.msg);
    const int set = eng_sched_set_spec(q, spec, &err);
    CHECK(set == 0 || set == -ENOTSUP, "%s: set_spec: %s", label, err.msg);
    const struct fl_tokenizer *tok = eng_session_tokenizer(s);
    for (int i = 0; i < N_REQ; i++) {
        int32_t *ids = NULL;
        const int n = fl_tokenize_alloc(tok, prompts[i], strlen(prompts[i]), true, false, &ids);
        const char *stop[] = { "mat, the" };
        /* request 3: JSON mode (masked rows) with each token's log-probability */
        struct eng_req req = { .prompt = ids, .n_prompt = n, .max_tokens = max_tokens[i],
                               .user = &out[i], .ignore_eos = true, .stop = stop,
                               .n_stop = i == 2 ? 1 : 0, .json_object = i == 3,
                               .logprobs = i == 3, .top_logprobs = i == 3 ? 3 : 0 };
        fl_sampler_defaults(&req.sampling, 77 + i);
        if (i != 1)
            req.sampling.temperature = 0; /* greedy; request 1 samples with its seed */
        CHECK(n > 0 && eng_sched_submit(q, &req, &err) >= 0, "%s: submit %d", label, i);
        free(ids);
    }
    int rc;
    while ((rc = eng_sched_step(q, &err)) > 0)
        ;
    CHECK(rc == 0, "%s: step: %s", label, rc ? err.msg : "");
    struct eng_sched_stats st;
    eng_sched_get_stats(q, &st);
    eng_sched_free(q);
    CHECK(st.accepted <= st.drafted, "%s: %llu kept of %llu drafted", label,
          (unsigned long long)st.accepted, (unsigned long long)st.drafted);
    return set == 0 ? (int)st.drafted : -1;
}

static void compare(const char *label, const struct rec *a, const struct rec *b)
{
    for (int i = 0; i < N_REQ; i++) {
        CHECK(a[i].done && b[i].done, "%s: request %d did not end", label, i);
        CHECK(a[i].finish == b[i].finish && !strcmp(a[i].text, b[i].text),
              "%s: request %d's text differs:\n  %s\n  %s", label, i, a[i].text, b[i].text);
        CHECK(a[i].n_tokens == b[i].n_tokens &&
                  !memcmp(a[i].tokens, b[i].tokens, sizeof(int32_t) * (size_t)a[i].n_tokens),
              "%s: request %d's tokens differ", label, i);
        CHECK(a[i].n_rows == b[i].n_rows, "%s: request %d: %d rows against %d", label, i,
              b[i].n_rows, a[i].n_rows);
        CHECK(a[i].n_lp == b[i].n_lp && !memcmp(a[i].lp, b[i].lp, sizeof(float) * (size_t)a[i].n_lp),
              "%s: request %d's log-probabilities differ", label, i);
    }
}

static void test_model(const char *dir, const char *name, enum mode mode, enum fl_type kv)
{
    char path[1024], label[160];
    snprintf(path, sizeof(path), "%s/tests/data/%s.gguf", dir, name);
    snprintf(label, sizeof(label), "%s %s%s", name, mode_names[mode], kv ? " kv q8_0" : "");
    struct eng_session *s;
    struct fl_err err;
    uint64_t budget = 0;
    if (mode == CPU_PAGED) { /* the smallest budget the file allows */
        if (open_session(path, CPU_PAGED, kv, 0, &s, &err)) {
            CHECK(0, "%s: open: %s", label, err.msg);
            return;
        }
        budget = eng_session_min_budget(s);
        eng_session_close(s);
    }
    if (open_session(path, mode, kv, budget, &s, &err)) {
        CHECK(0, "%s: open: %s", label, err.msg);
        return;
    }
    const int n_vocab = (int)eng_session_model(s)->hp.n_vocab;
    const int cells = eng_session_cells_free(s);
    struct rec plain[N_REQ] = { 0 }, spec[N_REQ] = { 0 };
    const struct eng_spec_params off = ENG_SPEC_PARAMS_DEFAULT;
    run(s, &off, plain, label);
    /* n 1: many drafts, most rejected; n 2 with the longest drafts; the
     * model as its own draft model (llama.cpp's 3 tokens, and 8 after
     * ngram-simple's); its F16 sibling as the draft model where there is one */
    struct eng_spec_params kinds[5];
    for (int k = 0; k < 5; k++)
        kinds[k] = off;
    kinds[0].type = kinds[1].type = kinds[3].type = ENG_SPEC_NGRAM_SIMPLE;
    kinds[0].size_n = 1, kinds[0].size_m = 8;
    kinds[1].size_n = kinds[3].size_n = 2;
    kinds[2].draft.model = kinds[3].draft.model = path;
    kinds[3].draft.n_max = 8;
    char sibling[1024];
    snprintf(sibling, sizeof(sibling), "%s", path);
    char *q8 = strstr(sibling, "-Q8_0.gguf");
    if (q8)
        memcpy(q8, "-F16.gguf", sizeof("-F16.gguf"));
    kinds[4].draft.model = sibling;
    const size_t n_kinds = q8 && !access(sibling, R_OK) ? 5 : 4;
    int drafted = 0, kept = 0;
    for (size_t k = 0; k < n_kinds; k++) {
        const int d = run(s, &kinds[k], spec, label);
        if (d < 0) /* refused: a recurrent model's state in VRAM */
            CHECK(eng_session_recurrent(s) && mode == GPU_VRAM, "%s: speculation refused", label);
        else
            drafted += d;
        int kind_kept = 0;
        for (int i = 0; i < N_REQ; i++) {
            kind_kept += spec[i].n_accepted;
            for (int r = 0; r < spec[i].n_rows && r < plain[i].n_rows; r++)
                CHECK(!memcmp(spec[i].rows[r], plain[i].rows[r], sizeof(float) * (size_t)n_vocab),
                      "%s: request %d row %d differs (kind %zu)", label, i, r, k);
        }
        kept += kind_kept;
        /* the model drafting for itself: its greedy requests keep most drafts */
        if (k == 2 && d >= 0)
            CHECK(d > 0 && kind_kept > d / 2, "%s: its own draft model: %d drafted, %d kept", label,
                  d, kind_kept);
        if (k >= 2 && d >= 0)
            printf("%s: draft model %s: %d draft tokens, %d kept\n", label,
                   k == 4 ? "F16 sibling" : k == 3 ? "itself, after ngram-simple" : "itself", d,
                   kind_kept);
        compare(label, plain, spec);
        for (int i = 0; i < N_REQ; i++)
            rec_free(&spec[i]);
        if (d < 0) /* refused: the other kinds would be refused the same way */
            break;
    }
    if (!eng_session_recurrent(s) || mode != GPU_VRAM)
        CHECK(drafted > 0 && kept > 0, "%s: %d draft tokens, %d kept: the path did not run",
              label, drafted, kept);
    CHECK(eng_session_cells_free(s) == cells, "%s: %d of %d cells free after", label,
          eng_session_cells_free(s), cells);
    printf("%s: %d draft tokens, %d kept\n", label, drafted, kept);
    for (int i = 0; i < N_REQ; i++)
        rec_free(&plain[i]);
    eng_session_close(s);
}

/* set_spec refuses, in one line naming why, and the scheduler runs on
 * without drafts. */
static void refused(struct eng_session *s, const struct eng_spec_params *p, int want,
                    const char *needle)
{
    const struct eng_sched_hooks hooks = { .done = on_done };
    struct eng_sched *q;
    struct fl_err err = { 0 };
    if (eng_sched_create(s, &hooks, &q, &err)) {
        CHECK(0, "sched: %s", err.msg);
        return;
    }
    const int rc = eng_sched_set_spec(q, p, &err);
    CHECK(rc == want && strstr(err.msg, needle) && !strchr(err.msg, '\n'),
          "draft model %s: %d '%s', want %d naming '%s'", p->draft.model ? p->draft.model : "-",
          rc, err.msg, want, needle);
    eng_sched_free(q);
}

static void test_refusals(const char *dir)
{
    char path[1024], other[1024];
    snprintf(path, sizeof(path), "%s/tests/data/qwen3moe-tiny-Q8_0.gguf", dir);
    snprintf(other, sizeof(other), "%s/tests/data/mixtral-tiny-Q4_K_M.gguf", dir); /* SPM */
    struct eng_session *s;
    struct fl_err err;
    if (open_session(path, CPU, 0, 0, &s, &err)) {
        CHECK(0, "open: %s", err.msg);
        return;
    }
    struct eng_spec_params p = ENG_SPEC_PARAMS_DEFAULT;
    p.draft.named = true;
    refused(s, &p, -EINVAL, "needs a draft model");
    p.draft.named = false;
    p.draft.model = other;
    refused(s, &p, -EINVAL, "vocabulary");
    p.draft.model = "/nonexistent/draft.gguf";
    refused(s, &p, -ENOENT, "/nonexistent/draft.gguf");
    p.draft.model = path;
    p.draft.n_max = ENG_SPEC_DRAFT_MAX + 1;
    refused(s, &p, -EINVAL, "--spec-draft-n-max");
    p.draft.n_max = 3, p.draft.n_min = 4;
    refused(s, &p, -EINVAL, "--spec-draft-n-min");
    eng_session_close(s);
}

/* The drafter alone: a 200-token history read 64 tokens a call drafts
 * nothing until all but its last 16 are read, then llama.cpp's 3 tokens; a history that
 * leaves the read one part way (a rejected draft, a rewound chat) drafts
 * again at once from the common start. */
static void test_drafter(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/tests/data/qwen3moe-tiny-Q8_0.gguf", dir);
    struct eng_session *s;
    struct eng_drafter *d = NULL;
    struct fl_err err;
    if (open_session(path, CPU, 0, 0, &s, &err)) {
        CHECK(0, "open: %s", err.msg);
        return;
    }
    struct eng_spec_params p = ENG_SPEC_PARAMS_DEFAULT;
    p.draft.model = path;
    if (eng_drafter_open(s, &p.draft, &d, &err)) {
        CHECK(0, "drafter: %s", err.msg);
        eng_session_close(s);
        return;
    }
    int32_t hist[200], out[ENG_SPEC_DRAFT_MAX];
    for (int i = 0; i < 200; i++)
        hist[i] = (int32_t)((i * 37 + 11) % 1000);
    int calls = 0, n = 0;
    while (n == 0 && calls < 10) {
        struct eng_draft_job j = { .seq = 1, .a = hist, .na = 200, .max = 8, .out = out };
        CHECK(eng_drafter_draft(d, &j, 1, 64, &err) == 0, "draft: %s", err.msg);
        n = j.n, calls++;
    }
    CHECK(calls == 3 && n == 3, "a 200-token history at 64 a call: a draft of %d after %d calls "
          "(want 3 after 3: 184 tokens read first, the last 16 with the draft)", n, calls);
    for (int i = 0; i < n; i++)
        CHECK(out[i] >= 0 && out[i] < 1025, "draft token %d: %d", i, out[i]);
    hist[120] ^= 1; /* the history differs from position 120 on: 79 tokens to read again */
    struct eng_draft_job j = { .seq = 1, .a = hist, .na = 200, .max = 2, .out = out };
    CHECK(eng_drafter_draft(d, &j, 1, 80, &err) == 0 && j.n == 2,
          "a changed history: a draft of %d (want 2 at once)", j.n);
    eng_drafter_forget(d, 1);
    j = (struct eng_draft_job){ .seq = 1, .a = hist, .na = 200, .max = 2, .out = out };
    CHECK(eng_drafter_draft(d, &j, 1, 80, &err) == 0 && j.n == 0,
          "forgotten: a draft of %d before the history is read again", j.n);
    eng_drafter_close(d);
    eng_session_close(s);
}

int main(void)
{
    test_drafts();
    const char *dir = getenv("FL_SOURCE_DIR") ? getenv("FL_SOURCE_DIR") : ".";
    const char *only = getenv("FL_SPEC_MODELS");
    test_refusals(dir);
    test_drafter(dir);
    /* all: every mode, else the CPU's alone (the sanitizer build runs this
     * beside test-batch-invariance: the device and paged modes, the
     * costliest there, on the models whose passes differ most) */
    static const struct { const char *model; enum fl_type kv; bool all; } models[] = {
        { "qwen3moe-tiny-Q8_0", 0, true },    { "gpt-oss-tiny-MXFP4", 0, true },
        { "deepseek2-tiny-F16", 0, true },    { "mixtral-tiny-Q4_K_M", 0, false },
        { "glm4moe-tiny-Q8_0", 0, false },    { "minimax-m2-tiny-Q8_0", 0, false },
        { "qwen3moe-tiny-Q8_0", FL_TYPE_Q8_0, false }, { "qwen35moe-tiny-Q8_0", 0, true },
        { "qwen3next-tiny-F16", 0, false },   { "glm-dsa-tiny-F16", 0, false },
        { "kimi-linear-tiny-F16", 0, false }, { "kimi-k3-tiny-F16", 0, false },
        { "minimax-m3-tiny-F16", 0, false },
    };
    uint64_t vram;
    const char *why;
    const bool device = eng_gpu_detect(&vram, &why);
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
        if (only && !strstr(only, models[i].model))
            continue;
        for (int m = CPU; m < N_MODES; m++)
            if ((m < GPU_VRAM || device) && (m == CPU || models[i].all))
                test_model(dir, models[i].model, (enum mode)m, models[i].kv);
    }
    if (!device)
        printf("device mode not run: %s\n", why);
    return check_summary("test-speculate");
}
