/* test-predict: the predictors' precision/recall arithmetic (app/predict.h).
 *   - --prefetch parsing, good and bad values;
 *   - a hand-made routing trace whose counts are worked out below;
 *   - every recorded reference trace (the .flrt files in tests/data/ref whose MoE layers
 *     are blocks 0..n-1): history:1 predicts "the previous token's experts of
 *     the same layer", so its hits must equal the overlaps this test counts
 *     itself from the file;
 *   - lookahead:1 on a real model's router weights: fed a hidden state, its
 *     prediction for the next layer must equal the top-k this test computes
 *     with its own matrix-vector product. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record/flref.h"
#include "gguf/gguf.h"
#include "app/predict.h"
#include "model/model.h"
#define CHECK_OUT stderr
#include "tests/check.h"

static struct fl_predictor *make(const char *spec, const struct eng_model *m, int n_layers,
                                 int n_expert, int k)
{
    struct fl_predict_config c;
    struct fl_err err = { { 0 } };
    struct fl_predictor *pr = NULL;
    if (fl_predict_parse(spec, &c, &err) ||
        fl_predictor_create(&c, NULL, m, n_layers, n_expert, k, &pr, &err))
        fprintf(stderr, "%s: %s\n", spec, err.msg);
    return pr;
}

static void test_parse(void)
{
    static const char *good[] = { "none", "router", "lookahead", "lookahead:3", "history",
                                  "history:16" };
    static const char *bad[] = { "", "route", "lookahead:0", "lookahead:9", "lookahead:x",
                                 "history:0", "none:1", "router:2", "history:" };
    struct fl_predict_config c;
    struct fl_err err = { { 0 } };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        CHECK(fl_predict_parse(good[i], &c, &err) == 0, "'%s' rejected: %s", good[i], err.msg);
    CHECK(fl_predict_parse("lookahead:3", &c, &err) == 0 && c.kind == FL_PREDICT_LOOKAHEAD &&
          c.depth == 3, "lookahead:3 parsed wrong");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(fl_predict_parse(bad[i], &c, &err) == -EINVAL && strstr(err.msg, "--prefetch"),
              "'%s' accepted", bad[i]);
    CHECK(fl_predict_parse(NULL, &c, &err) == -EINVAL, "NULL accepted");
    printf("parse: %zu good and %zu bad values\n", sizeof(good) / sizeof(good[0]),
           sizeof(bad) / sizeof(bad[0]));
}

/* 2 layers, 8 experts, top-2, history:1. Each routing is predicted by the
 * previous token's choice in that layer:
 *   t1 L0 {0,2} vs {0,1}: 1 hit   t1 L1 {2,4} vs {2,3}: 1 hit
 *   t2 L0 {1,2} vs {0,2}: 1 hit   t2 L1 {5,6} vs {2,4}: 0 hits
 * so 4 routings scored, 8 predicted, 3 hits, 8 chosen: 37.5 % / 37.5 %. */
static void test_hand_trace(void)
{
    static const int32_t tr[3][2][2] = { { { 0, 1 }, { 2, 3 } }, { { 0, 2 }, { 2, 4 } },
                                         { { 1, 2 }, { 5, 6 } } };
    struct fl_predictor *pr = make("history:1", NULL, 2, 8, 2);
    CHECK(pr, "history:1 not created");
    if (!pr)
        return;
    for (int t = 0; t < 3; t++)
        for (int l = 0; l < 2; l++)
            CHECK(fl_predictor_route(pr, l, tr[t][l], 2) == 0, "route failed");
    struct fl_predict_stats st;
    fl_predictor_stats(pr, &st);
    CHECK(st.scored == 4 && st.predicted == 8 && st.hits == 3 && st.chosen == 8,
          "hand trace: scored %llu predicted %llu hits %llu chosen %llu, want 4 8 3 8",
          (unsigned long long)st.scored, (unsigned long long)st.predicted,
          (unsigned long long)st.hits, (unsigned long long)st.chosen);
    CHECK(fabs(fl_predict_precision(&st) - 0.375) < 1e-12 &&
          fabs(fl_predict_recall(&st) - 0.375) < 1e-12, "precision/recall not 3/8");
    fl_predictor_free(pr);
    printf("hand trace: precision %.3f recall %.3f (want 0.375 0.375)\n",
           fl_predict_precision(&st), fl_predict_recall(&st));
}

static int overlap(const int32_t *a, const int32_t *b, int k)
{
    int n = 0;
    for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++)
            n += a[i] == b[j];
    return n;
}

/* history:1 over a recorded trace, one token at a time, against the
 * overlaps of consecutive positions counted here. */
static int test_trace(const char *path)
{
    struct flref_routing r = { 0 };
    struct fl_err err = { { 0 } };
    if (flref_routing_read(path, &r, &err)) {
        CHECK(0, "%s", err.msg);
        return 0;
    }
    int contiguous = 1, max_id = 0;
    for (int l = 0; l < r.n_layers; l++)
        contiguous &= r.layer_idx[l] == l;
    for (int64_t i = 0; i < (int64_t)r.n_pos * r.n_layers * r.k; i++)
        max_id = r.ids[i] > max_id ? r.ids[i] : max_id;
    if (!contiguous || r.n_pos < 2) { /* a dense lead layer: not this check's shape */
        flref_routing_free(&r);
        return 0;
    }
    struct fl_predictor *pr = make("history:1", NULL, r.n_layers, max_id + 1, r.k);
    uint64_t hits = 0, scored = 0;
    for (int p = 0; pr && p < r.n_pos; p++)
        for (int l = 0; l < r.n_layers; l++) {
            const int32_t *cur = r.ids + ((int64_t)p * r.n_layers + l) * r.k;
            CHECK(fl_predictor_route(pr, l, cur, r.k) == 0, "route failed");
            if (p > 0) {
                hits += (uint64_t)overlap(cur - (int64_t)r.n_layers * r.k, cur, r.k);
                scored++;
            }
        }
    struct fl_predict_stats st = { 0 };
    if (pr)
        fl_predictor_stats(pr, &st);
    CHECK(st.scored == scored && st.hits == hits && st.predicted == scored * (uint64_t)r.k &&
          st.chosen == scored * (uint64_t)r.k,
          "%s: predictor scored %llu hits %llu predicted %llu chosen %llu; counted %llu %llu",
          path, (unsigned long long)st.scored, (unsigned long long)st.hits,
          (unsigned long long)st.predicted, (unsigned long long)st.chosen,
          (unsigned long long)scored, (unsigned long long)hits);
    printf("%s: previous-token reuse: %llu/%llu hits, precision %.1f%% recall %.1f%%\n", path,
           (unsigned long long)st.hits, (unsigned long long)st.predicted,
           100.0 * fl_predict_precision(&st), 100.0 * fl_predict_recall(&st));
    fl_predictor_free(pr);
    flref_routing_free(&r);
    return 1;
}

static void test_traces(void)
{
    DIR *d = opendir("tests/data/ref");
    int n = 0;
    struct dirent *e;
    char path[512];
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".flrt"))
            continue;
        snprintf(path, sizeof(path), "tests/data/ref/%s", e->d_name);
        n += test_trace(path);
    }
    if (d)
        closedir(d);
    CHECK(n >= 6, "only %d recorded traces checked", n);
}

/* Top-k of W x (W: [n][dim] rows), ties to the lower id. */
static void ref_topk(const float *w, const float *x, int64_t dim, int n, int k, int32_t *ids)
{
    double s[256];
    for (int e = 0; e < n; e++) {
        s[e] = 0;
        for (int64_t i = 0; i < dim; i++)
            s[e] += (double)w[e * dim + i] * x[i];
    }
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < n; e++) {
            bool used = false;
            for (int q = 0; q < j; q++)
                used |= ids[q] == e;
            if (!used && (best < 0 || s[e] > s[best]))
                best = e;
        }
        ids[j] = best;
    }
}

static void test_lookahead(const char *model)
{
    struct gguf_file *g = NULL;
    struct fl_err err = { { 0 } };
    if (gguf_open(model, &g, &err)) {
        CHECK(0, "%s", err.msg);
        return;
    }
    uint64_t size = gguf_file_size(g);
    uint8_t *base = malloc(size);
    FILE *f = fopen(model, "rb");
    CHECK(base && f && fread(base, 1, size, f) == size, "%s: cannot read", model);
    if (f)
        fclose(f);
    const struct gguf_tensor *r1 = gguf_find_tensor(g, "blk.1.ffn_gate_inp.weight");
    const struct gguf_tensor *n0 = gguf_find_tensor(g, "blk.0.ffn_norm.weight");
    const struct gguf_tensor *n1 = gguf_find_tensor(g, "blk.1.ffn_norm.weight");
    CHECK(r1 && n0 && n1, "%s: no router/norm weights", model);
    int64_t dim = r1 ? r1->ne[0] : 0;
    int n_exp = r1 ? (int)r1->ne[1] : 0, k = 2;
    struct eng_model *m = NULL;
    CHECK(eng_model_load(g, base, NULL, &m, &err) == 0, "%s: %s", model, err.msg);
    struct fl_predictor *pr = r1 && m ? make("lookahead:1", m, 2, n_exp, k) : NULL;
    CHECK(pr || !r1, "lookahead:1 not created");
    float *x = malloc(sizeof(float) * (size_t)dim * 2), *xs = malloc(sizeof(float) * (size_t)dim);
    int32_t want[2][8], none[1] = { 0 };
    uint64_t rng = 12345;
    for (int tok = 0; pr && tok < 2; tok++) {
        const float *w0 = (const float *)(base + n0->offset), *w1 = (const float *)(base + n1->offset);
        for (int64_t i = 0; i < dim; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            x[tok * dim + i] = (float)((double)(rng >> 40) / (double)(1ull << 24) - 0.5);
            xs[i] = w0[i] != 0.0f ? x[tok * dim + i] / w0[i] * w1[i] : x[tok * dim + i];
        }
        ref_topk((const float *)(base + r1->offset), xs, dim, n_exp, k, want[tok]);
    }
    if (pr) {
        /* one batch of two tokens: the prediction is the union of their top-k */
        fl_predictor_hidden(pr, 0, x, 2);
        CHECK(fl_predictor_route(pr, 0, none, 1) == 0, "route failed");
        CHECK(fl_predictor_route(pr, 1, want[0], k) == 0, "route failed");
        struct fl_predict_stats st;
        fl_predictor_stats(pr, &st);
        int uni = k + k - overlap(want[0], want[1], k);
        CHECK(st.scored == 1 && st.hits == (uint64_t)k && st.predicted == (uint64_t)uni &&
              st.chosen == (uint64_t)k, "lookahead: scored %llu hits %llu predicted %llu, want "
              "1 %d %d", (unsigned long long)st.scored, (unsigned long long)st.hits,
              (unsigned long long)st.predicted, k, uni);
        printf("%s: lookahead:1 predicted layer 1's experts from layer 0's input: %llu of %llu\n",
               model, (unsigned long long)st.hits, (unsigned long long)st.predicted);
    }
    fl_predictor_free(pr);
    eng_model_free(m);
    free(x);
    free(xs);
    free(base);
    gguf_close(g);
}

int main(void)
{
    const char *src = getenv("FL_SOURCE_DIR");
    if (src && chdir(src) != 0)
        perror(src);
    test_parse();
    test_hand_trace();
    test_traces();
    test_lookahead("tests/data/qwen3moe-tiny-F16.gguf");
    return check_summary("test-predict");
}
