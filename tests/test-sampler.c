/* test-sampler.c: the sampler's filters on hand-made distributions.
 *
 * Most cases use logits ln(1), ln(2), ln(3), ln(4): probabilities
 * 0.1, 0.2, 0.3, 0.4, so every expected survivor set and probability below
 * is worked out by hand in the comments. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "text/logprob.h"
#include "text/sampler.h"
#include "tests/check.h"

static struct fl_sampler_params plain(void)
{
    /* every filter off, temperature 1, the default order (n_order 0) */
    return (struct fl_sampler_params){ .temperature = 1.0f, .top_k = 0, .top_p = 1.0f,
                                       .min_p = 0.0f, .typical_p = 1.0f, .repeat_penalty = 1.0f,
                                       .penalty_last_n = 0, .seed = 42 };
}

static struct fl_sampler *make(const struct fl_sampler_params *p, int32_t n_vocab)
{
    struct fl_sampler *s = NULL;
    int rc = fl_sampler_new(p, n_vocab, NULL, &s);
    CHECK(rc == 0 && s, "fl_sampler_new: %d", rc);
    return s;
}

static const float w1234[4] = { 0.0f, 0.69314718f, 1.09861229f, 1.38629436f }; /* ln 1..4 */

/* Checks the survivors: ids in order and their probabilities. */
static void expect(struct fl_sampler *s, const float *logits, int n, const int32_t *ids,
                   const double *ps, const char *what)
{
    struct fl_candidate c[16];
    int got = fl_sampler_candidates(s, logits, c, 16);
    CHECK(got == n, "%s: %d survivors, want %d", what, got, n);
    for (int i = 0; i < n && i < got; i++) {
        CHECK(c[i].id == ids[i], "%s: survivor %d is %d, want %d", what, i, c[i].id, ids[i]);
        CHECK(fabs(c[i].p - ps[i]) < 1e-5, "%s: p[%d] = %.6f, want %.6f", what, i, c[i].p, ps[i]);
    }
    printf("  %s: %d survivors ok\n", what, got);
}

/* draw order: higher logit first, equal logits lower id first */
static bool cand_before(const struct fl_candidate *a, const struct fl_candidate *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static void test_greedy(void)
{
    struct fl_sampler_params p = plain();
    p.temperature = 0.0f;
    struct fl_sampler *s = make(&p, 4);
    const float tie[4] = { 1.0f, 3.0f, 3.0f, 2.0f };
    CHECK(fl_sampler_sample(s, tie) == 1, "greedy tie goes to the lowest id (1)");
    const float tie0[4] = { 5.0f, -1.0f, 5.0f, 5.0f };
    CHECK(fl_sampler_sample(s, tie0) == 0, "greedy tie at id 0");
    const float last[4] = { -INFINITY, NAN, 0.5f, 7.0f };
    CHECK(fl_sampler_sample(s, last) == 3, "greedy skips NaN/-inf, picks 3");
    const float none[4] = { -INFINITY, -INFINITY, NAN, -INFINITY };
    CHECK(fl_sampler_sample(s, none) == -EINVAL, "no finite logit is -EINVAL");
    expect(s, tie, 1, (int32_t[]){ 1 }, (double[]){ 1.0 }, "greedy candidates");
    fl_sampler_free(s);
}

static void test_filters(void)
{
    struct fl_sampler_params p = plain();
    struct fl_sampler *s = make(&p, 4);
    /* no filter: all four, 0.4 0.3 0.2 0.1 in draw order */
    expect(s, w1234, 4, (int32_t[]){ 3, 2, 1, 0 }, (double[]){ 0.4, 0.3, 0.2, 0.1 }, "no filter");
    fl_sampler_free(s);

    p = plain();
    p.top_k = 2; /* keeps 0.4 and 0.3 -> 4/7, 3/7 */
    s = make(&p, 4);
    expect(s, w1234, 2, (int32_t[]){ 3, 2 }, (double[]){ 4.0 / 7, 3.0 / 7 }, "top-k 2");
    fl_sampler_free(s);

    p = plain();
    p.top_p = 0.6f; /* 0.4 < 0.6, 0.4 + 0.3 = 0.7 >= 0.6: two survive */
    s = make(&p, 4);
    expect(s, w1234, 2, (int32_t[]){ 3, 2 }, (double[]){ 4.0 / 7, 3.0 / 7 }, "top-p 0.6");
    fl_sampler_free(s);

    p = plain();
    p.top_p = 0.75f; /* 0.7 < 0.75, 0.9 >= 0.75: three survive -> 4/9 3/9 2/9 */
    s = make(&p, 4);
    expect(s, w1234, 3, (int32_t[]){ 3, 2, 1 }, (double[]){ 4.0 / 9, 3.0 / 9, 2.0 / 9 },
           "top-p 0.75");
    fl_sampler_free(s);

    p = plain();
    p.min_p = 0.6f; /* threshold 0.6 * 0.4 = 0.24: 0.4 and 0.3 survive */
    s = make(&p, 4);
    expect(s, w1234, 2, (int32_t[]){ 3, 2 }, (double[]){ 4.0 / 7, 3.0 / 7 }, "min-p 0.6");
    fl_sampler_free(s);

    p = plain();
    p.min_p = 0.4f; /* threshold 0.16: 0.4, 0.3, 0.2 survive */
    s = make(&p, 4);
    expect(s, w1234, 3, (int32_t[]){ 3, 2, 1 }, (double[]){ 4.0 / 9, 3.0 / 9, 2.0 / 9 },
           "min-p 0.4");
    fl_sampler_free(s);

    p = plain();
    p.temperature = 2.0f; /* p ~ w^(1/2): 2, sqrt3, sqrt2, 1 over their sum */
    s = make(&p, 4);
    double z = 2.0 + sqrt(3.0) + sqrt(2.0) + 1.0;
    expect(s, w1234, 4, (int32_t[]){ 3, 2, 1, 0 },
           (double[]){ 2.0 / z, sqrt(3.0) / z, sqrt(2.0) / z, 1.0 / z }, "temperature 2");
    fl_sampler_free(s);

    p = plain();
    p.top_k = 3;     /* 0.4 0.3 0.2 -> 4/9 3/9 2/9 */
    p.top_p = 0.7f;  /* on those: 4/9 < 0.7, 7/9 >= 0.7 -> two */
    p.temperature = 0.5f; /* p ~ w^2 over {4, 3}: 16/25, 9/25 */
    s = make(&p, 4);
    expect(s, w1234, 2, (int32_t[]){ 3, 2 }, (double[]){ 16.0 / 25, 9.0 / 25 },
           "top-k 3 + top-p 0.7 + temperature 0.5");
    fl_sampler_free(s);
}

static void test_penalties(void)
{
    struct fl_sampler_params p = plain();
    p.temperature = 0.0f;
    p.repeat_penalty = 2.0f;
    p.penalty_last_n = 8;
    struct fl_sampler *s = make(&p, 4);
    const float l[4] = { 2.0f, -2.0f, 1.0f, 0.5f };
    fl_sampler_accept(s, 0);
    fl_sampler_accept(s, 1);
    /* id 0: 2 / 2 = 1 (ties id 2 at 1 -> lowest id 0); id 1: -2 * 2 = -4 */
    CHECK(fl_sampler_sample(s, l) == 0, "repeat penalty 2: tie 0/2 -> 0");
    fl_sampler_free(s);

    p.repeat_penalty = 2.5f; /* id 0: 2 / 2.5 = 0.8 < 1 -> id 2 wins */
    s = make(&p, 4);
    fl_sampler_accept(s, 0);
    CHECK(fl_sampler_sample(s, l) == 2, "repeat penalty 2.5 -> 2");
    fl_sampler_free(s);

    p = plain();
    p.penalty_last_n = 8;
    p.repeat_penalty = 2.0f;
    s = make(&p, 4);
    fl_sampler_accept(s, 1);
    /* logits become 2, -4, 1, 0.5 */
    double e[4] = { exp(2.0), exp(-4.0), exp(1.0), exp(0.5) }, z = e[0] + e[1] + e[2] + e[3];
    expect(s, l, 4, (int32_t[]){ 0, 2, 3, 1 }, (double[]){ e[0] / z, e[2] / z, e[3] / z, e[1] / z },
           "repeat penalty on a negative logit");
    fl_sampler_free(s);

    p = plain();
    p.temperature = 0.0f;
    p.penalty_last_n = 8;
    p.frequency_penalty = 0.25f;
    p.presence_penalty = 0.5f;
    s = make(&p, 4);
    fl_sampler_accept(s, 0);
    fl_sampler_accept(s, 0);
    fl_sampler_accept(s, 0);
    fl_sampler_accept(s, 0);
    /* id 0: 2 - 4 * 0.25 - 0.5 = 0.5 < 1 (id 2) */
    CHECK(fl_sampler_sample(s, l) == 2, "frequency + presence penalty -> 2");
    fl_sampler_free(s);

    p = plain();
    p.temperature = 0.0f;
    p.repeat_penalty = 4.0f;
    p.penalty_last_n = 2;
    s = make(&p, 4);
    fl_sampler_accept(s, 0);
    fl_sampler_accept(s, 3);
    fl_sampler_accept(s, 2);
    /* window {3, 2}: id 0 is back to 2 and wins */
    CHECK(fl_sampler_sample(s, l) == 0, "penalty window forgets old tokens");
    fl_sampler_reset(s, 1);
    fl_sampler_accept(s, 0);
    CHECK(fl_sampler_sample(s, l) == 2, "after reset, one penalty on 0 -> 2");
    fl_sampler_free(s);

    /* DRY on with a wider window: one history serves both, and the
     * penalties still see only their last 2 tokens */
    p.dry_multiplier = 0.8f;
    p.dry_base = 1.75f;
    p.dry_allowed_length = 2;
    p.dry_penalty_last_n = 16;
    p.frequency_penalty = 0.3f; /* counts matter: 14 zeros in DRY's window would sink id 0 */
    s = make(&p, 4);
    for (int i = 0; i < 20; i++)
        fl_sampler_accept(s, 0);
    fl_sampler_accept(s, 3);
    fl_sampler_accept(s, 2);
    /* window {3, 2}; "... 0 0 3 2" has no earlier "2": DRY penalises nothing */
    CHECK(fl_sampler_sample(s, l) == 0, "penalty window of 2 beside DRY's 16");
    fl_sampler_accept(s, 0);
    /* window {2, 0}: id 0 2 / 4 - 0.3 = 0.2, id 2 1 / 4 - 0.3, id 3 (out of it) 0.5 */
    CHECK(fl_sampler_sample(s, l) == 3, "penalties on {2, 0} -> 3");
    fl_sampler_free(s);
}

static void test_determinism(void)
{
    struct fl_sampler_params p = plain();
    p.seed = 1234;
    struct fl_sampler *a = make(&p, 4), *b = make(&p, 4);
    p.seed = 1235;
    struct fl_sampler *c = make(&p, 4);
    int32_t first[200];
    int same_ab = 0, same_ac = 0;
    for (int i = 0; i < 200; i++) {
        first[i] = fl_sampler_sample(a, w1234);
        same_ab += first[i] == fl_sampler_sample(b, w1234);
        same_ac += first[i] == fl_sampler_sample(c, w1234);
    }
    CHECK(same_ab == 200, "same seed, same draws (%d/200)", same_ab);
    CHECK(same_ac < 150, "another seed, other draws (%d/200 equal)", same_ac);
    fl_sampler_reset(a, 1234);
    int again = 0;
    for (int i = 0; i < 200; i++)
        again += first[i] == fl_sampler_sample(a, w1234);
    CHECK(again == 200, "reset to the seed repeats the draws (%d/200)", again);
    printf("  determinism: %d/200 equal for the same seed, %d/200 for another\n", same_ab,
           same_ac);
    fl_sampler_free(a);
    fl_sampler_free(b);
    fl_sampler_free(c);
}

static void test_distribution(void)
{
    struct fl_sampler_params p = plain();
    struct fl_sampler *s = make(&p, 4);
    const int n = 40000;
    int hist[4] = { 0 };
    for (int i = 0; i < n; i++) {
        int32_t id = fl_sampler_sample(s, w1234);
        CHECK(id >= 0 && id < 4, "draw %d out of range", id);
        if (id >= 0 && id < 4)
            hist[id]++;
    }
    /* sd of a frequency: sqrt(p(1-p)/n) <= 0.0025; allow 5 sd */
    for (int i = 0; i < 4; i++) {
        double f = (double)hist[i] / n, want = 0.1 * (i + 1);
        CHECK(fabs(f - want) < 0.0125, "id %d drawn %.4f of the time, want %.1f", i, f, want);
    }
    printf("  distribution: %.4f %.4f %.4f %.4f (want 0.1 0.2 0.3 0.4)\n", (double)hist[0] / n,
           (double)hist[1] / n, (double)hist[2] / n, (double)hist[3] / n);
    fl_sampler_free(s);

    p.top_k = 2;
    s = make(&p, 4);
    int low = 0, three = 0;
    for (int i = 0; i < n; i++) {
        int32_t id = fl_sampler_sample(s, w1234);
        low += id < 2;
        three += id == 3;
    }
    CHECK(low == 0, "top-k 2 drew a filtered token %d times", low);
    CHECK(fabs((double)three / n - 4.0 / 7) < 0.0125, "top-k 2: id 3 %.4f, want 4/7",
          (double)three / n);
    fl_sampler_free(s);

    /* uniform() stays in [0, 1) and averages 1/2 */
    s = make(&p, 4);
    double sum = 0;
    for (int i = 0; i < n; i++) {
        double u = fl_sampler_uniform(s);
        CHECK(u >= 0.0 && u < 1.0, "uniform %f out of [0,1)", u);
        sum += u;
    }
    CHECK(fabs(sum / n - 0.5) < 0.01, "uniform mean %f", sum / n);
    fl_sampler_free(s);
}

static void test_large_vocab(void)
{
    /* top-k over a big vocabulary picks the k largest, in order */
    enum { N = 50000 };
    float *l = malloc(N * sizeof(*l));
    for (int i = 0; i < N; i++)
        l[i] = (float)((i * 7919) % N) / N; /* a permutation of 0..N-1, scaled */
    struct fl_sampler_params p = plain();
    p.top_k = 5;
    struct fl_sampler *s = make(&p, N);
    struct fl_candidate c[5];
    int n = fl_sampler_candidates(s, l, c, 5);
    CHECK(n == 5, "top-k 5 of %d: %d", N, n);
    for (int i = 0; i < n; i++)
        CHECK(l[c[i].id] == (float)(N - 1 - i) / N, "top-k rank %d has logit %f", i, l[c[i].id]);
    CHECK(fl_sampler_candidates(s, l, c, 4) == -ENOSPC, "too small an output is -ENOSPC");
    fl_sampler_free(s);
    free(l);
}

/* ---- typical ------------------------------------------------------------ */

static void test_typical_by_hand(void)
{
    /* p = 0.1 0.2 0.3 0.4: H = 1.27985; |-ln p - H| = 1.0227 0.3296 0.0759 0.3635,
     * so the rank is id 2, 1, 3, 0 with cumulative mass 0.3, 0.5, 0.9, 1 */
    struct fl_sampler_params p = plain();
    p.typical_p = 0.25f; /* 0.3 > 0.25: id 2 alone */
    struct fl_sampler *s = make(&p, 4);
    expect(s, w1234, 1, (int32_t[]){ 2 }, (double[]){ 1.0 }, "typical 0.25");
    fl_sampler_free(s);

    p.typical_p = 0.45f; /* 0.5 > 0.45: ids 2 and 1, the likeliest (3) is dropped */
    s = make(&p, 4);
    expect(s, w1234, 2, (int32_t[]){ 2, 1 }, (double[]){ 0.6, 0.4 }, "typical 0.45");
    fl_sampler_free(s);

    p.typical_p = 0.55f; /* 0.9 > 0.55: ids 2, 1, 3, in draw order 3 2 1 */
    s = make(&p, 4);
    expect(s, w1234, 3, (int32_t[]){ 3, 2, 1 }, (double[]){ 4.0 / 9, 3.0 / 9, 2.0 / 9 },
           "typical 0.55");
    fl_sampler_free(s);

    p.typical_p = 0.25f;
    p.min_keep = 3; /* mass is enough after one, but three are kept */
    s = make(&p, 4);
    expect(s, w1234, 3, (int32_t[]){ 3, 2, 1 }, (double[]){ 4.0 / 9, 3.0 / 9, 2.0 / 9 },
           "typical 0.25, min-keep 3");
    fl_sampler_free(s);

    p.typical_p = 1.0f; /* off, min_keep or not */
    s = make(&p, 4);
    expect(s, w1234, 4, (int32_t[]){ 3, 2, 1, 0 }, (double[]){ 0.4, 0.3, 0.2, 0.1 }, "typical 1");
    fl_sampler_free(s);
}

static uint64_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 33;
}

/* The typical set of one row worked out plainly, in double: softmax,
 * entropy, rank by |-ln p - H| (ties by larger p, then lower id: draw
 * order), take the rank's prefix until its mass exceeds tp and it holds
 * min_keep. keep[id] says who survives. Returns false when the cut is too
 * close to call (mass within 1e-4 of tp, or scores within 1e-4 around it):
 * there float and double may honestly disagree. */
static bool typical_reference(const float *l, int n, double tp, int min_keep, bool *keep)
{
    double pr[64], score[64], max = -INFINITY, z = 0, h = 0;
    int rank[64];
    for (int i = 0; i < n; i++)
        max = l[i] > max ? l[i] : max;
    for (int i = 0; i < n; i++)
        z += pr[i] = exp(l[i] - max);
    for (int i = 0; i < n; i++) {
        pr[i] /= z;
        h -= pr[i] * log(pr[i]);
    }
    for (int i = 0; i < n; i++) {
        score[i] = fabs(-log(pr[i]) - h);
        rank[i] = i;
        keep[i] = false;
    }
    for (int i = 1; i < n; i++) /* insertion sort: n is small */
        for (int j = i; j > 0; j--) {
            int a = rank[j - 1], b = rank[j];
            bool later = score[a] > score[b] ||
                         (score[a] == score[b] && (pr[a] < pr[b] || (pr[a] == pr[b] && a > b)));
            if (!later)
                break;
            rank[j - 1] = b;
            rank[j] = a;
        }
    double cum = 0;
    for (int i = 0; i < n; i++) {
        keep[rank[i]] = true;
        cum += pr[rank[i]];
        bool near_tie = i + 1 < n && fabs(score[rank[i + 1]] - score[rank[i]]) < 1e-4;
        if (fabs(cum - tp) < 1e-4 || near_tie)
            return false;
        if (cum > tp && i + 1 >= min_keep)
            break;
    }
    return true;
}

static void test_typical_random(void)
{
    enum { N = 48, ROWS = 400 };
    uint64_t x = 7;
    float l[N];
    bool keep[N];
    int checked = 0, skipped = 0;
    for (int row = 0; row < ROWS; row++) {
        int n = 2 + (int)(lcg(&x) % (N - 1));
        float spread = 0.5f + (float)(lcg(&x) % 100) / 10.0f;
        for (int i = 0; i < n; i++)
            l[i] = spread * ((float)(lcg(&x) % 20001) / 10000.0f - 1.0f);
        struct fl_sampler_params p = plain();
        p.typical_p = (float)(lcg(&x) % 1000) / 1000.0f;
        p.min_keep = (int32_t)(lcg(&x) % 4) == 0 ? (int32_t)(lcg(&x) % 6) : 0;
        if (!typical_reference(l, n, p.typical_p, p.min_keep, keep)) {
            skipped++;
            continue;
        }
        struct fl_sampler *s = make(&p, n);
        struct fl_candidate c[N];
        int got = fl_sampler_candidates(s, l, c, N), want = 0;
        for (int i = 0; i < n; i++)
            want += keep[i];
        CHECK(got == want, "row %d: %d typical survivors, want %d", row, got, want);
        for (int i = 0; i < got; i++) {
            bool ok = c[i].id >= 0 && c[i].id < n && keep[c[i].id];
            CHECK(ok, "row %d: %d survived", row, c[i].id);
            CHECK(i == 0 || cand_before(&c[i - 1], &c[i]), "row %d: not in draw order", row);
        }
        fl_sampler_free(s);
        checked++;
    }
    CHECK(checked > ROWS * 9 / 10, "only %d of %d rows clear of the cut", checked, ROWS);
    printf("  typical against the plain computation: %d rows agree (%d too close to call)\n",
           checked, skipped);
}

/* ---- the order ---------------------------------------------------------- */

static struct fl_sampler_params ordered(const char *names)
{
    struct fl_sampler_params p = plain();
    struct fl_err err = { "" };
    int rc = fl_sampler_parse_order(names, &p, &err);
    CHECK(rc == 0, "parse '%s': %d %s", names, rc, err.msg);
    return p;
}

static void test_order_effects(void)
{
    /* min_p 0.2 keeps logits >= max + ln 0.2 = max - 1.609 */
    const float l[4] = { 0.0f, -1.0f, -2.0f, -3.0f };
    struct fl_sampler_params p = ordered("min_p;temperature");
    p.min_p = 0.2f;
    p.temperature = 2.0f; /* min_p first: {0, -1}, then halved: 1 : e^-0.5 */
    struct fl_sampler *s = make(&p, 4);
    double e = exp(-0.5);
    expect(s, l, 2, (int32_t[]){ 0, 1 }, (double[]){ 1 / (1 + e), e / (1 + e) },
           "min_p before temperature");
    fl_sampler_free(s);

    p = ordered("temperature;min_p"); /* halved first: 0 -0.5 -1 -1.5, all >= -1.609 */
    p.min_p = 0.2f;
    p.temperature = 2.0f;
    s = make(&p, 4);
    double z = 1 + e + exp(-1.0) + exp(-1.5);
    expect(s, l, 4, (int32_t[]){ 0, 1, 2, 3 },
           (double[]){ 1 / z, e / z, exp(-1.0) / z, exp(-1.5) / z }, "temperature before min_p");
    fl_sampler_free(s);

    /* penalties before top_k choose among penalised logits, after it among raw ones */
    const float r[4] = { 3.0f, 2.0f, 1.0f, 0.0f };
    p = ordered("penalties;top_k");
    p.top_k = 2;
    p.repeat_penalty = 4.0f; /* id 0: 3 / 4 = 0.75 */
    p.penalty_last_n = 4;
    s = make(&p, 4);
    fl_sampler_accept(s, 0);
    double a = exp(2.0), b = exp(1.0);
    expect(s, r, 2, (int32_t[]){ 1, 2 }, (double[]){ a / (a + b), b / (a + b) },
           "penalties before top_k");
    fl_sampler_free(s);
    p = ordered("top_k;penalties");
    p.top_k = 2;
    p.repeat_penalty = 4.0f;
    p.penalty_last_n = 4;
    s = make(&p, 4);
    fl_sampler_accept(s, 0);
    b = exp(0.75);
    expect(s, r, 2, (int32_t[]){ 1, 0 }, (double[]){ a / (a + b), b / (a + b) },
           "top_k before penalties");
    fl_sampler_free(s);
}

static void test_order_greedy(void)
{
    /* temperature 0 keeps the best of what reaches it: typical 0.25 first
     * leaves id 2 (see test_typical_by_hand), typical after leaves id 3 */
    struct fl_sampler_params p = ordered("typ_p;temperature");
    p.typical_p = 0.25f;
    p.temperature = 0.0f;
    struct fl_sampler *s = make(&p, 4);
    CHECK(fl_sampler_sample(s, w1234) == 2, "typical then greedy -> 2");
    fl_sampler_free(s);
    p = ordered("temperature;typ_p");
    p.typical_p = 0.25f;
    p.temperature = 0.0f;
    s = make(&p, 4);
    CHECK(fl_sampler_sample(s, w1234) == 3, "greedy then typical -> 3");
    fl_sampler_free(s);

    /* as in llama.cpp, an order without temperature does not use it */
    p = ordered("top_k");
    p.temperature = 0.0f;
    s = make(&p, 4);
    expect(s, w1234, 4, (int32_t[]){ 3, 2, 1, 0 }, (double[]){ 0.4, 0.3, 0.2, 0.1 },
           "no temperature step");
    fl_sampler_free(s);
}

static void test_min_keep(void)
{
    struct fl_sampler_params p = plain();
    p.top_p = 0.3f; /* 0.4 >= 0.3: id 3 alone; min-keep 3 keeps three */
    p.min_keep = 3;
    struct fl_sampler *s = make(&p, 4);
    expect(s, w1234, 3, (int32_t[]){ 3, 2, 1 }, (double[]){ 4.0 / 9, 3.0 / 9, 2.0 / 9 },
           "top-p 0.3, min-keep 3");
    fl_sampler_free(s);
    p = plain();
    p.min_p = 0.9f; /* only 0.4 is >= 0.36; min-keep 2 keeps two */
    p.min_keep = 2;
    s = make(&p, 4);
    expect(s, w1234, 2, (int32_t[]){ 3, 2 }, (double[]){ 4.0 / 7, 3.0 / 7 },
           "min-p 0.9, min-keep 2");
    fl_sampler_free(s);
}

/* The default order, however it is spelled, draws what n_order 0 draws. */
static void test_default_order(void)
{
    struct fl_sampler_params d, z, named, seq;
    fl_sampler_defaults(&d, 5);
    z = d;
    z.n_order = 0;
    named = d;
    seq = d;
    struct fl_err err = { "" };
    CHECK(fl_sampler_parse_order(FL_SAMPLER_DEFAULT_ORDER, &named, &err) == 0, "%s", err.msg);
    CHECK(fl_sampler_parse_seq(FL_SAMPLER_DEFAULT_SEQ, &seq, &err) == 0, "%s", err.msg);
    CHECK(named.n_order == d.n_order && seq.n_order == d.n_order &&
              !memcmp(named.order, d.order, sizeof(d.order)) &&
              !memcmp(seq.order, d.order, sizeof(d.order)),
          "the default order's spellings differ from fl_sampler_defaults");
    for (int32_t i = 0; i < d.n_order; i++)
        CHECK(fl_sampler_type_name(d.order[i]) != NULL, "entry %d has no name", (int)i);
    CHECK(!strcmp(fl_sampler_type_name(FL_SAMPLER_TYPICAL_P), "typ_p") &&
              fl_sampler_type_name(0) == NULL,
          "names");
    enum { N = 64 };
    float l[N];
    uint64_t x = 11;
    for (int i = 0; i < N; i++)
        l[i] = (float)(lcg(&x) % 1000) / 200.0f;
    struct fl_sampler *a = make(&d, N), *b = make(&z, N);
    int same = 0;
    for (int i = 0; i < 500; i++)
        same += fl_sampler_sample(a, l) == fl_sampler_sample(b, l);
    CHECK(same == 500, "n_order 0 and the written default drew differently (%d/500)", same);
    fl_sampler_free(a);
    fl_sampler_free(b);
}

/* err says what, in one line that names the entry */
static void expect_refused(const char *names, bool seq, const char *says)
{
    struct fl_sampler_params p = plain();
    struct fl_err err = { "" };
    int rc = seq ? fl_sampler_parse_seq(names, &p, &err) : fl_sampler_parse_order(names, &p, &err);
    CHECK(rc == -EINVAL, "'%s' gave %d", names, rc);
    CHECK(strstr(err.msg, says) && !strchr(err.msg, '\n'), "'%s' said \"%s\", want \"%s\"",
          names, err.msg, says);
    CHECK(p.n_order == 0, "'%s' changed the order on error", names);
}

static void test_parse(void)
{
    struct fl_sampler_params p = ordered("Top-K; NUCLEUS ;typ;temp;minp;penalties;topk");
    const enum fl_sampler_type want[] = { FL_SAMPLER_TOP_K,       FL_SAMPLER_TOP_P,
                                          FL_SAMPLER_TYPICAL_P,   FL_SAMPLER_TEMPERATURE,
                                          FL_SAMPLER_MIN_P,       FL_SAMPLER_PENALTIES,
                                          FL_SAMPLER_TOP_K };
    CHECK(p.n_order == 7 && !memcmp(p.order, want, sizeof(want)), "aliases: %d entries",
          (int)p.n_order);
    p = ordered("typ-p;typp;typ_p;top-p;topp;min-p;min_p;temperature");
    CHECK(p.n_order == 8 && p.order[2] == FL_SAMPLER_TYPICAL_P && p.order[4] == FL_SAMPLER_TOP_P &&
              p.order[6] == FL_SAMPLER_MIN_P,
          "more aliases");
    struct fl_err err = { "" };
    CHECK(fl_sampler_parse_seq("kyt", &p, &err) == 0 && p.n_order == 3 &&
              p.order[0] == FL_SAMPLER_TOP_K && p.order[1] == FL_SAMPLER_TYPICAL_P &&
              p.order[2] == FL_SAMPLER_TEMPERATURE,
          "letters kyt: %s", err.msg);

    expect_refused("top_k;foo", false, "unknown sampler 'foo'");
    p = ordered("DRY;top-n-sigma;topnsigma;xtc;top_n_sigma");
    CHECK(p.n_order == 5 && p.order[0] == FL_SAMPLER_DRY && p.order[1] == FL_SAMPLER_TOP_N_SIGMA &&
              p.order[2] == FL_SAMPLER_TOP_N_SIGMA && p.order[3] == FL_SAMPLER_XTC,
          "dry, top_n_sigma, xtc names");
    CHECK(fl_sampler_parse_seq("dsx", &p, &err) == 0 && p.n_order == 3 &&
              p.order[0] == FL_SAMPLER_DRY && p.order[1] == FL_SAMPLER_TOP_N_SIGMA &&
              p.order[2] == FL_SAMPLER_XTC,
          "letters dsx: %s", err.msg);
    expect_refused("mirostat", false, "--mirostat 1 or 2 replaces the chain");
    expect_refused("infill", false, "sampler 'infill' is not implemented");
    expect_refused("adaptive-p", false, "sampler 'adaptive-p' is not implemented");
    expect_refused("top_k;;min_p", false, "sampler 2 of the order is empty");
    expect_refused("top_k;", false, "sampler 2 of the order is empty");
    expect_refused("", false, "sampler 1 of the order is empty");
    expect_refused("top\nk", false, "unknown sampler 'top?k'");
    expect_refused("k;k;k;k;k;k;k;k;k;k;k;k;k;k;k;k;k", false, "unknown sampler 'k'");
    expect_refused("topk;topk;topk;topk;topk;topk;topk;topk;topk;topk;topk;topk;topk;topk;topk;"
                   "topk;topk",
                   false, "more than 16 samplers");
    expect_refused("kq", true, "unknown sampler letter 'q'");
    expect_refused("K", true, "unknown sampler letter 'K'");
    expect_refused("eki", true, "sampler 'i' (infill) is not implemented");
    expect_refused("a", true, "sampler 'a' (adaptive_p) is not implemented");
    expect_refused("", true, "the sampler sequence is empty");
    expect_refused("kkkkkkkkkkkkkkkkk", true, "more than 16 samplers");
    /* a server request's order: samplers faultline lacks are left out */
    CHECK(fl_sampler_parse_order_lenient("infill;top_k;adaptive_p;temperature", &p, &err) == 0 &&
              p.n_order == 2 && p.order[0] == FL_SAMPLER_TOP_K &&
              p.order[1] == FL_SAMPLER_TEMPERATURE,
          "lenient names: %s", err.msg);
    CHECK(fl_sampler_parse_seq_lenient("edkypmxtia", &p, &err) == 0 && p.n_order == 8 &&
              p.order[0] == FL_SAMPLER_PENALTIES && p.order[7] == FL_SAMPLER_TEMPERATURE,
          "lenient letters: %s", err.msg);
    p.n_order = 0;
    CHECK(fl_sampler_parse_order_lenient("infill;adaptive-p", &p, &err) == -EINVAL &&
              strstr(err.msg, "no sampler faultline runs") && p.n_order == 0,
          "lenient, nothing left: '%s'", err.msg);
    CHECK(fl_sampler_parse_seq_lenient("dq", &p, &err) == -EINVAL &&
              strstr(err.msg, "unknown sampler letter 'q'"),
          "lenient still refuses unknown letters: '%s'", err.msg);
    printf("  parse: aliases, letters, %d refusals and lenient orders ok\n", 18);
}

static void test_bad_params(void)
{
    struct fl_sampler *s = NULL;
    struct fl_sampler_params p = plain();
    CHECK(fl_sampler_new(&p, 0, NULL, &s) == -EINVAL, "n_vocab 0 is -EINVAL");
    p.repeat_penalty = 0.0f;
    CHECK(fl_sampler_new(&p, 4, NULL, &s) == -EINVAL, "repeat penalty 0 is -EINVAL");
    p = plain();
    p.temperature = NAN;
    CHECK(fl_sampler_new(&p, 4, NULL, &s) == -EINVAL, "NaN temperature is -EINVAL");
    p = plain();
    p.typical_p = NAN;
    CHECK(fl_sampler_new(&p, 4, NULL, &s) == -EINVAL, "NaN typical is -EINVAL");
    p = plain();
    p.min_keep = -1;
    CHECK(fl_sampler_new(&p, 4, NULL, &s) == -EINVAL, "min-keep -1 is -EINVAL");
    p = plain();
    p.n_order = FL_SAMPLER_MAX_ORDER + 1;
    CHECK(fl_sampler_new(&p, 4, NULL, &s) == -EINVAL, "an order too long is -EINVAL");
    p.n_order = 1; /* order[0] is 0: no sampler */
    CHECK(fl_sampler_new(&p, 4, NULL, &s) == -EINVAL, "a zeroed order entry is -EINVAL");
    p.order[0] = (enum fl_sampler_type)(FL_SAMPLER_XTC + 1);
    CHECK(fl_sampler_new(&p, 4, NULL, &s) == -EINVAL, "an unknown order entry is -EINVAL");
    p = plain();
    p.mirostat = 3;
    CHECK(fl_sampler_new(&p, 4, NULL, &s) == -EINVAL, "mirostat 3 is -EINVAL");
    p = plain();
    p.top_n_sigma = NAN;
    CHECK(fl_sampler_new(&p, 4, NULL, &s) == -EINVAL, "NaN top-n-sigma is -EINVAL");
    fl_sampler_defaults(&p, 7);
    p.dry_multiplier = 0.8f; /* breakers, but no vocabulary to spell them */
    CHECK(fl_sampler_new(&p, 4, NULL, &s) == -EINVAL, "DRY breakers without a tokenizer");
    p.n_dry_breakers = 0;
    CHECK(fl_sampler_new(&p, 4, NULL, &s) == 0, "DRY without breakers needs no tokenizer");
    fl_sampler_free(s);
    fl_sampler_defaults(&p, 7);
    CHECK(fl_sampler_new(&p, 4, NULL, &s) == 0, "defaults are valid");
    fl_sampler_free(s);
}

/* text/logprob.h: log-sum-exp and the top tokens, on rows worked by hand. */
static void test_logprobs(void)
{
    const float row[] = { 0.0f, logf(3.0f), -INFINITY, 2.0f, 2.0f };
    CHECK(isnan(fl_logsumexp(row, 5)), "a non-finite logit: NaN");
    CHECK(fabs(fl_logsumexp(row, 2) - log(4.0)) < 1e-7, "log(e^0 + e^log 3) = log 4: %.9f",
          fl_logsumexp(row, 2));
    const float r2[] = { 1.0f, 3.0f, 2.0f, 3.0f, -1.0f };
    const double lse = fl_logsumexp(r2, 5);
    double p = 0;
    for (int i = 0; i < 5; i++)
        p += exp(r2[i] - lse);
    CHECK(fabs(p - 1) < 1e-12, "probabilities sum to 1: %.15f", p);
    struct fl_logprob top[FL_MAX_TOP_LOGPROBS];
    int n = fl_top_logprobs(r2, 5, lse, 3, top);
    CHECK(n == 3 && top[0].id == 1 && top[1].id == 3 && top[2].id == 2,
          "top 3: the larger logit first, ties by the lower id: %d %d %d", top[0].id, top[1].id,
          top[2].id);
    CHECK(top[0].logprob == (float)(3.0 - lse) && top[2].logprob == (float)(2.0 - lse),
          "logprob = logit - lse");
    CHECK(fl_top_logprobs(r2, 5, lse, 50, top) == 5 && top[4].id == 4, "k > n: all, in order");
    CHECK(fl_top_logprobs(r2, 5, lse, 0, top) == 0, "k = 0: none");
}

/* logit_bias: added before the chain; -inf bans; ids outside refused. */
static void test_logit_bias(void)
{
    const float row[] = { 1.0f, 3.0f, 2.0f, 0.5f };
    struct fl_sampler_params p;
    fl_sampler_defaults(&p, 1);
    p.temperature = 0;
    struct fl_sampler *s = NULL;
    CHECK(fl_sampler_new(&p, 4, NULL, &s) == 0, "greedy sampler");
    CHECK(fl_sampler_sample(s, row) == 1, "argmax without a bias");
    const struct fl_logit_bias ban[] = { { 1, -INFINITY } }, lift[] = { { 3, 2.6f } };
    CHECK(fl_sampler_set_bias(s, ban, 1) == 0 && fl_sampler_sample(s, row) == 2, "1 banned: 2");
    CHECK(fl_sampler_set_bias(s, lift, 1) == 0 && fl_sampler_sample(s, row) == 3,
          "3 lifted to 3.1 over 3.0 (and the earlier ban replaced)");
    const struct fl_logit_bias out[] = { { 4, 1.0f } }, nan_bias[] = { { 0, NAN } };
    CHECK(fl_sampler_set_bias(s, out, 1) == -EINVAL && fl_sampler_set_bias(s, nan_bias, 1) == -EINVAL,
          "an id outside the vocabulary, a NaN bias: refused");
    CHECK(fl_sampler_sample(s, row) == 3, "a refused set keeps the biases before");
    CHECK(fl_sampler_set_bias(s, NULL, 0) == 0 && fl_sampler_sample(s, row) == 1, "cleared");
    fl_sampler_free(s);
    /* the full chain (temperature 1, top-k 2): the banned token never drawn */
    p.temperature = 1.0f;
    p.top_k = 2;
    CHECK(fl_sampler_new(&p, 4, NULL, &s) == 0, "sampler");
    const struct fl_logit_bias ban2[] = { { 1, -INFINITY }, { 2, -INFINITY } };
    CHECK(fl_sampler_set_bias(s, ban2, 2) == 0, "two bans");
    int seen[4] = { 0 };
    for (int i = 0; i < 400; i++)
        seen[fl_sampler_sample(s, row)]++;
    CHECK(!seen[1] && !seen[2] && seen[0] && seen[3], "draws only 0 and 3: %d %d %d %d", seen[0],
          seen[1], seen[2], seen[3]);
    fl_sampler_free(s);
}

/* Mirostat 2's mu follows the drawn token: over p = .1 .2 .3 .4 with tau 1,
 * mu starts at 2 and keeps surprises (-log2 p) 1.32 and 1.74: ids 3 and 2,
 * .571 / .429 once renormalised. With eta 5, drawing id 3 (surprise 0.807)
 * raises mu to 2.965, which then keeps id 1 (2.32) too: 3 candidates;
 * drawing id 2 (1.222) lowers it to 0.889: only id 3 (at least one). */
static void test_mirostat_mu(void)
{
    int seen[2] = { 0, 0 };
    for (uint64_t seed = 1; seed <= 40; seed++) {
        struct fl_sampler_params p = plain();
        p.mirostat = 2;
        p.mirostat_tau = 1.0f;
        p.mirostat_eta = 5.0f;
        p.seed = seed;
        struct fl_sampler *s = make(&p, 4);
        struct fl_candidate c[4];
        CHECK(fl_sampler_candidates(s, w1234, c, 4) == 2 && c[0].id == 3 && c[1].id == 2,
              "mirostat 2 at mu 2: ids 3, 2");
        int32_t id = fl_sampler_sample(s, w1234);
        int n = fl_sampler_candidates(s, w1234, c, 4);
        CHECK(id == 3 || id == 2, "drew %d", (int)id);
        CHECK(n == (id == 3 ? 3 : 1), "after drawing %d: %d candidates", (int)id, n);
        seen[id == 3]++;
        fl_sampler_reset(s, seed); /* mu back at 2 tau */
        CHECK(fl_sampler_candidates(s, w1234, c, 4) == 2, "reset: mu 2 again");
        fl_sampler_free(s);
    }
    CHECK(seen[0] && seen[1], "40 seeds drew both ids (%d, %d)", seen[0], seen[1]);
    printf("  mirostat 2: mu after each draw ok\n");
}

int main(void)
{
    printf("sampler\n");
    test_logit_bias();
    test_logprobs();
    test_greedy();
    test_filters();
    test_penalties();
    test_determinism();
    test_distribution();
    test_large_vocab();
    test_typical_by_hand();
    test_typical_random();
    test_order_effects();
    test_order_greedy();
    test_min_keep();
    test_default_order();
    test_parse();
    test_bad_params();
    test_mirostat_mu();
    return check_summary("test-sampler");
}
