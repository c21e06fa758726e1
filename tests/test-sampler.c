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

#include "text/sampler.h"
#include "tests/check.h"

static struct fl_sampler_params plain(void)
{
    /* every filter off, temperature 1 */
    return (struct fl_sampler_params){ .temperature = 1.0f, .top_k = 0, .top_p = 1.0f,
                                       .min_p = 0.0f, .repeat_penalty = 1.0f,
                                       .penalty_last_n = 0, .seed = 42 };
}

static struct fl_sampler *make(const struct fl_sampler_params *p, int32_t n_vocab)
{
    struct fl_sampler *s = NULL;
    int rc = fl_sampler_new(p, n_vocab, &s);
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

static void test_bad_params(void)
{
    struct fl_sampler *s = NULL;
    struct fl_sampler_params p = plain();
    CHECK(fl_sampler_new(&p, 0, &s) == -EINVAL, "n_vocab 0 is -EINVAL");
    p.repeat_penalty = 0.0f;
    CHECK(fl_sampler_new(&p, 4, &s) == -EINVAL, "repeat penalty 0 is -EINVAL");
    p = plain();
    p.temperature = NAN;
    CHECK(fl_sampler_new(&p, 4, &s) == -EINVAL, "NaN temperature is -EINVAL");
    fl_sampler_defaults(&p, 7);
    CHECK(fl_sampler_new(&p, 4, &s) == 0, "defaults are valid");
    fl_sampler_free(s);
}

int main(void)
{
    printf("sampler\n");
    test_greedy();
    test_filters();
    test_penalties();
    test_determinism();
    test_distribution();
    test_large_vocab();
    test_bad_params();
    return check_summary("test-sampler");
}
