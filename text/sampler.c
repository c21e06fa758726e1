/* sampler.c: see sampler.h. The filters follow llama.cpp's llama-sampler.cpp
 * (penalties, top_k, top_p, min_p, temp, dist) in its default chain order. */
#include "text/sampler.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct fl_sampler {
    struct fl_sampler_params p;
    int32_t n_vocab;
    int32_t *count;        /* occurrences of each id in the history window */
    int32_t *ring;         /* the last penalty_last_n accepted ids */
    int32_t ring_n, ring_head;
    struct fl_candidate *cand;
    uint64_t rng[4];
};

/* ---- PRNG: xoshiro256** seeded by splitmix64 ---------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t next_u64(struct fl_sampler *s)
{
    uint64_t *r = s->rng;
    uint64_t result = rotl(r[1] * 5, 7) * 9, t = r[1] << 17;
    r[2] ^= r[0];
    r[3] ^= r[1];
    r[1] ^= r[2];
    r[0] ^= r[3];
    r[2] ^= t;
    r[3] = rotl(r[3], 45);
    return result;
}

double fl_sampler_uniform(struct fl_sampler *s)
{
    return (double)(next_u64(s) >> 11) * 0x1.0p-53;
}

/* ---- life cycle --------------------------------------------------------- */

void fl_sampler_defaults(struct fl_sampler_params *p, uint64_t seed)
{
    *p = (struct fl_sampler_params){ .temperature = 0.8f, .top_k = 40, .top_p = 0.95f,
                                     .min_p = 0.05f, .repeat_penalty = 1.0f,
                                     .penalty_last_n = 64, .seed = seed };
}

static bool params_ok(const struct fl_sampler_params *p)
{
    return !isnan(p->temperature) && !isnan(p->top_p) && !isnan(p->min_p) && p->min_p <= 1.0f &&
           isfinite(p->repeat_penalty) && p->repeat_penalty > 0.0f &&
           isfinite(p->frequency_penalty) && isfinite(p->presence_penalty) &&
           p->penalty_last_n >= 0;
}

void fl_sampler_reset(struct fl_sampler *s, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
    s->p.seed = seed;
    if (s->count)
        memset(s->count, 0, (size_t)s->n_vocab * sizeof(*s->count));
    s->ring_n = s->ring_head = 0;
}

int fl_sampler_new(const struct fl_sampler_params *p, int32_t n_vocab, struct fl_sampler **out)
{
    *out = NULL;
    if (!p || n_vocab < 1 || !params_ok(p))
        return -EINVAL;
    struct fl_sampler *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->cand = malloc((size_t)n_vocab * sizeof(*s->cand));
    if (p->penalty_last_n > 0) {
        s->count = calloc((size_t)n_vocab, sizeof(*s->count));
        s->ring = malloc((size_t)p->penalty_last_n * sizeof(*s->ring));
    }
    if (!s->cand || (p->penalty_last_n > 0 && (!s->count || !s->ring))) {
        fl_sampler_free(s);
        return -ENOMEM;
    }
    fl_sampler_reset(s, p->seed);
    *out = s;
    return 0;
}

void fl_sampler_free(struct fl_sampler *s)
{
    if (!s)
        return;
    free(s->count);
    free(s->ring);
    free(s->cand);
    free(s);
}

void fl_sampler_accept(struct fl_sampler *s, int32_t id)
{
    if (!s->ring || id < 0 || id >= s->n_vocab)
        return;
    int32_t cap = s->p.penalty_last_n;
    if (s->ring_n == cap) {
        s->count[s->ring[s->ring_head]]--; /* the oldest leaves the window */
    } else {
        s->ring_n++;
    }
    s->ring[s->ring_head] = id;
    s->ring_head = (s->ring_head + 1) % cap;
    s->count[id]++;
}

/* ---- filters ------------------------------------------------------------ */

/* llama.cpp's penalties: a repeated token's logit is divided by the repeat
 * penalty when positive and multiplied when not, then lowered by the
 * frequency penalty per occurrence and the presence penalty once. */
static float penalised(const struct fl_sampler *s, int32_t id, float logit)
{
    if (!s->count || s->count[id] == 0)
        return logit;
    int32_t c = s->count[id];
    logit = logit <= 0.0f ? logit * s->p.repeat_penalty : logit / s->p.repeat_penalty;
    return logit - (float)c * s->p.frequency_penalty - s->p.presence_penalty;
}

/* Draw order: higher logit first; equal logits, lower id first. */
static int cand_cmp(const void *a, const void *b)
{
    const struct fl_candidate *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Moves the k best candidates (by cand_cmp) to the front, sorted: a
 * min-heap of size k over all n, so a 150k vocabulary costs n log k. */
static void top_k_sorted(struct fl_candidate *c, int32_t n, int32_t k)
{
    if (k >= n) {
        qsort(c, (size_t)n, sizeof(*c), cand_cmp);
        return;
    }
    /* heap root = the worst of the k kept so far */
    for (int32_t i = 0; i < n; i++) {
        if (i >= k && cand_cmp(&c[i], &c[0]) >= 0)
            continue;
        int32_t pos = i < k ? i : 0;
        struct fl_candidate x = c[i];
        if (i >= k) {
            c[i] = c[0];
            /* sift x down from the root */
            for (;;) {
                int32_t l = 2 * pos + 1, w = pos;
                struct fl_candidate *wv = &x;
                if (l < k && cand_cmp(&c[l], wv) > 0) {
                    w = l;
                    wv = &c[l];
                }
                if (l + 1 < k && cand_cmp(&c[l + 1], wv) > 0)
                    w = l + 1;
                if (w == pos)
                    break;
                c[pos] = c[w];
                pos = w;
            }
            c[pos] = x;
        } else {
            /* sift x up */
            while (pos > 0 && cand_cmp(&x, &c[(pos - 1) / 2]) > 0) {
                c[pos] = c[(pos - 1) / 2];
                pos = (pos - 1) / 2;
            }
            c[pos] = x;
        }
    }
    qsort(c, (size_t)k, sizeof(*c), cand_cmp);
}

static void softmax(struct fl_candidate *c, int32_t n)
{
    float max = c[0].logit, sum = 0.0f; /* c is sorted: c[0] is the largest */
    for (int32_t i = 0; i < n; i++) {
        c[i].p = expf(c[i].logit - max);
        sum += c[i].p;
    }
    for (int32_t i = 0; i < n; i++)
        c[i].p /= sum;
}

/* Keeps the smallest prefix whose probability reaches p. */
static int32_t top_p(struct fl_candidate *c, int32_t n, float p)
{
    if (p >= 1.0f)
        return n;
    softmax(c, n);
    float cum = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        cum += c[i].p;
        if (cum >= p)
            return i + 1;
    }
    return n;
}

/* Keeps candidates whose probability is at least p times the best one's. */
static int32_t min_p(const struct fl_candidate *c, int32_t n, float p)
{
    if (p <= 0.0f)
        return n;
    float min_logit = c[0].logit + logf(p);
    int32_t i = 1;
    while (i < n && c[i].logit >= min_logit)
        i++;
    return i;
}

/* Penalties, then every filter. Returns the survivors at s->cand[0..n). */
static int32_t filter(struct fl_sampler *s, const float *logits)
{
    int32_t n = 0;
    for (int32_t id = 0; id < s->n_vocab; id++) {
        float l = penalised(s, id, logits[id]);
        if (!isnan(l) && l != -INFINITY)
            s->cand[n++] = (struct fl_candidate){ id, l, 0.0f };
    }
    if (n == 0)
        return 0;
    if (s->p.temperature <= 0.0f) {
        top_k_sorted(s->cand, n, 1); /* greedy: ties go to the lowest id */
        s->cand[0].p = 1.0f;
        return 1;
    }
    int32_t k = s->p.top_k > 0 && s->p.top_k < n ? s->p.top_k : n;
    top_k_sorted(s->cand, n, k);
    n = top_p(s->cand, k, s->p.top_p);
    n = min_p(s->cand, n, s->p.min_p);
    for (int32_t i = 0; i < n; i++)
        s->cand[i].logit /= s->p.temperature;
    softmax(s->cand, n);
    return n;
}

int fl_sampler_candidates(struct fl_sampler *s, const float *logits, struct fl_candidate *out,
                          int max)
{
    if (!s || !logits || max < 0 || (!out && max))
        return -EINVAL;
    int32_t n = filter(s, logits);
    if (n == 0)
        return -EINVAL;
    if (n > max)
        return out ? -ENOSPC : n;
    memcpy(out, s->cand, (size_t)n * sizeof(*out));
    return n;
}

int32_t fl_sampler_sample(struct fl_sampler *s, const float *logits)
{
    if (!s || !logits)
        return -EINVAL;
    int32_t n = filter(s, logits);
    if (n == 0)
        return -EINVAL;
    if (n == 1)
        return s->cand[0].id;
    double u = fl_sampler_uniform(s), cum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        cum += s->cand[i].p;
        if (u < cum)
            return s->cand[i].id;
    }
    return s->cand[n - 1].id; /* rounding left u above the last sum */
}
