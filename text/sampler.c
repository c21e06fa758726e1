/* sampler.c: see sampler.h. The filters follow llama.cpp's llama-sampler.cpp
 * (penalties, dry (dry.c), top_n_sigma, top_k, typical, top_p, min_p, xtc,
 * temp_ext, dist, mirostat), run in the order the parameters give (names
 * and letters: sampler-order.c). */
#include "text/sampler.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "text/dry.h"
#include "text/token-ring.h"

struct fl_sampler {
    struct fl_sampler_params p;
    int32_t n_vocab;
    int32_t *count;        /* occurrences of each id in the penalties' window */
    struct fl_token_ring hist; /* the accepted ids, as many as the widest window */
    struct fl_candidate *cand;
    float *bias;           /* [n_vocab] added to the logits (logit_bias); NULL: none */
    struct typ_rank *rank; /* typical's scratch, when typical is on */
    enum fl_sampler_type order[FL_SAMPLER_MAX_ORDER];
    int32_t n_order;
    bool greedy_fast;      /* the chain reduces to an argmax (see chain_is_argmax) */
    bool pen_first;        /* ... of the penalised logits */
    struct fl_dry *dry;    /* NULL: DRY is off */
    float mu;              /* mirostat's surprise bound, 2 tau at a reset */
    uint64_t rng[4];
};

/* How far s->cand is ordered: steps that cut a prefix need DESCENDING
 * (non-increasing logits); SORTED is cand_cmp's order exactly, which a
 * temperature step can loosen to DESCENDING (x / t can make two logits
 * equal without reordering their ids). */
enum order_state { UNSORTED, DESCENDING, SORTED };

struct typ_rank {
    float score; /* |-log p - H| */
    int32_t pos; /* index in s->cand */
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

static const enum fl_sampler_type default_order[] = {
    FL_SAMPLER_PENALTIES, FL_SAMPLER_DRY,   FL_SAMPLER_TOP_N_SIGMA,
    FL_SAMPLER_TOP_K,     FL_SAMPLER_TYPICAL_P, FL_SAMPLER_TOP_P,
    FL_SAMPLER_MIN_P,     FL_SAMPLER_XTC,   FL_SAMPLER_TEMPERATURE,
};
#define N_DEFAULT_ORDER ((int32_t)(sizeof(default_order) / sizeof(default_order[0])))

void fl_sampler_defaults(struct fl_sampler_params *p, uint64_t seed)
{
    *p = (struct fl_sampler_params){ .temperature = 0.8f, .top_k = 40, .top_p = 0.95f,
                                     .min_p = 0.05f, .typical_p = 1.0f, .repeat_penalty = 1.0f,
                                     .penalty_last_n = 64, .dry_base = 1.75f,
                                     .dry_allowed_length = 2, .dry_penalty_last_n = 64,
                                     .dry_breakers = { "\n", ":", "\"", "*" },
                                     .n_dry_breakers = 4, .top_n_sigma = -1.0f,
                                     .xtc_threshold = 0.1f, .dynatemp_exponent = 1.0f,
                                     .mirostat_tau = 5.0f, .mirostat_eta = 0.1f,
                                     .seed = seed, .n_order = N_DEFAULT_ORDER };
    memcpy(p->order, default_order, sizeof(default_order));
}

static bool order_ok(const struct fl_sampler_params *p)
{
    if (p->n_order < 0 || p->n_order > FL_SAMPLER_MAX_ORDER)
        return false;
    for (int32_t i = 0; i < p->n_order; i++)
        if (p->order[i] < FL_SAMPLER_PENALTIES || p->order[i] > FL_SAMPLER_XTC)
            return false;
    return true;
}

static bool xtc_on(const struct fl_sampler_params *p)
{
    return p->xtc_probability > 0.0f && p->xtc_threshold <= 0.5f;
}

static bool params_ok(const struct fl_sampler_params *p)
{
    return !isnan(p->temperature) && !isnan(p->top_p) && !isnan(p->min_p) && p->min_p <= 1.0f &&
           !isnan(p->typical_p) && p->min_keep >= 0 &&
           isfinite(p->repeat_penalty) && p->repeat_penalty > 0.0f &&
           isfinite(p->frequency_penalty) && isfinite(p->presence_penalty) &&
           p->penalty_last_n >= 0 && !isnan(p->top_n_sigma) && !isnan(p->xtc_probability) &&
           !isnan(p->xtc_threshold) && !isnan(p->dynatemp_range) &&
           !isnan(p->dynatemp_exponent) && p->mirostat >= 0 && p->mirostat <= 2 &&
           (!p->mirostat || (isfinite(p->mirostat_tau) && isfinite(p->mirostat_eta))) &&
           order_ok(p);
}

/* Whether the chain comes down to an argmax, so a greedy sampler need not
 * sort a whole vocabulary: temperature <= 0 keeps only the best candidate,
 * and before it top_k, top_p and min_p always keep the best; only an active
 * typical step can drop it, and the penalties change what is best. */
static bool chain_is_argmax(struct fl_sampler *s)
{
    const struct fl_sampler_params *p = &s->p;
    if (p->temperature > 0.0f || p->dynatemp_range > 0.0f || p->mirostat)
        return false;
    for (int32_t i = 0; i < s->n_order; i++) {
        if (s->order[i] == FL_SAMPLER_TEMPERATURE)
            return true;
        if (s->order[i] == FL_SAMPLER_PENALTIES)
            s->pen_first = true;
        if ((s->order[i] == FL_SAMPLER_TYPICAL_P && p->typical_p < 1.0f) ||
            (s->order[i] == FL_SAMPLER_DRY && s->dry) ||
            (s->order[i] == FL_SAMPLER_XTC && xtc_on(p)))
            return false;
    }
    return false; /* no temperature step: llama.cpp draws at temperature 1 */
}

void fl_sampler_reset(struct fl_sampler *s, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
    s->p.seed = seed;
    if (s->count)
        memset(s->count, 0, (size_t)s->n_vocab * sizeof(*s->count));
    fl_token_ring_clear(&s->hist);
    s->mu = 2.0f * s->p.mirostat_tau;
}

static void set_order(struct fl_sampler *s, const struct fl_sampler_params *p)
{
    s->n_order = p->n_order ? p->n_order : N_DEFAULT_ORDER;
    memcpy(s->order, p->n_order ? p->order : default_order,
           (size_t)s->n_order * sizeof(*s->order));
    s->greedy_fast = chain_is_argmax(s);
}

int fl_sampler_new(const struct fl_sampler_params *p, int32_t n_vocab,
                   const struct fl_tokenizer *tok, struct fl_sampler **out)
{
    *out = NULL;
    if (!p || n_vocab < 1 || !params_ok(p))
        return -EINVAL;
    struct fl_sampler *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->p = *p;
    s->n_vocab = n_vocab;
    /* a window past what any context holds looks at every token either way:
     * a request's 2^31 need not reserve its memory */
    const int32_t last_n = p->penalty_last_n < FL_SAMPLER_MAX_WINDOW ? p->penalty_last_n
                                                                    : FL_SAMPLER_MAX_WINDOW;
    s->p.penalty_last_n = last_n;
    if (p->dry_penalty_last_n > FL_SAMPLER_MAX_WINDOW)
        s->p.dry_penalty_last_n = FL_SAMPLER_MAX_WINDOW;
    int rc = p->mirostat ? 0 : fl_dry_new(&s->p, tok, &s->dry);
    /* the strings are the caller's: the sampler keeps the tokens they make
     * (its DRY step holds its own reference to a shared table) */
    memset(s->p.dry_breakers, 0, sizeof(s->p.dry_breakers));
    s->p.dry_table = NULL;
    if (rc) {
        free(s);
        return rc;
    }
    set_order(s, p);
    s->cand = malloc((size_t)n_vocab * sizeof(*s->cand));
    if (last_n > 0)
        s->count = calloc((size_t)n_vocab, sizeof(*s->count));
    const int32_t dry_n = s->dry ? s->p.dry_penalty_last_n : 0;
    rc = fl_token_ring_init(&s->hist, last_n > dry_n ? last_n : dry_n);
    if (p->typical_p < 1.0f)
        s->rank = malloc((size_t)n_vocab * sizeof(*s->rank));
    if (rc || !s->cand || (last_n > 0 && !s->count) || (p->typical_p < 1.0f && !s->rank)) {
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
    fl_token_ring_free(&s->hist);
    free(s->cand);
    free(s->bias);
    free(s->rank);
    fl_dry_free(s->dry);
    free(s);
}

int fl_sampler_set_bias(struct fl_sampler *s, const struct fl_logit_bias *v, int n)
{
    for (int i = 0; i < n; i++)
        if (v[i].id < 0 || v[i].id >= s->n_vocab || isnan(v[i].bias))
            return -EINVAL;
    free(s->bias);
    s->bias = NULL;
    if (n <= 0)
        return 0;
    if (!(s->bias = calloc((size_t)s->n_vocab, sizeof(float))))
        return -ENOMEM;
    for (int i = 0; i < n; i++) /* a token given twice: the last bias */
        s->bias[v[i].id] = v[i].bias;
    return 0;
}

void fl_sampler_accept(struct fl_sampler *s, int32_t id)
{
    if (id < 0 || id >= s->n_vocab)
        return;
    const int32_t last_n = s->p.penalty_last_n;
    if (s->count && s->hist.n >= last_n) /* the oldest leaves the penalties' window */
        s->count[fl_token_ring_latest(&s->hist, last_n - 1)]--;
    fl_token_ring_push(&s->hist, id);
    if (s->count)
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

/* Keeps the smallest prefix whose probability reaches p, and at least
 * min_keep candidates (*cut: whether it did reach p). c is DESCENDING. */
static int32_t top_p(struct fl_candidate *c, int32_t n, float p, int32_t min_keep, bool *cut)
{
    *cut = false;
    if (p >= 1.0f)
        return n;
    softmax(c, n);
    float cum = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        cum += c[i].p;
        if (cum >= p && i + 1 >= min_keep) {
            *cut = true;
            return i + 1;
        }
    }
    return n;
}

/* Keeps candidates whose probability is at least p times the best one's,
 * and at least min_keep. c is DESCENDING. */
static int32_t min_p(const struct fl_candidate *c, int32_t n, float p, int32_t min_keep)
{
    if (p <= 0.0f)
        return n;
    float min_logit = c[0].logit + logf(p);
    int32_t i = 1;
    while (i < n && (c[i].logit >= min_logit || i < min_keep))
        i++;
    return i;
}

/* Typical's ranking: the least surprising first; equal scores keep draw
 * order, where llama.cpp's std::sort leaves them in no defined order. NaN
 * (from a NaN probability) sorts last, so the order stays total for qsort. */
static int rank_cmp(const void *a, const void *b)
{
    const struct typ_rank *x = a, *y = b;
    if (x->score != y->score && !isnan(x->score) && !isnan(y->score))
        return x->score < y->score ? -1 : 1;
    if (isnan(x->score) != isnan(y->score))
        return isnan(x->score) ? 1 : -1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static int pos_cmp(const void *a, const void *b)
{
    const struct typ_rank *x = a, *y = b;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* llama.cpp's locally typical sampling: with H the entropy of the
 * candidates' distribution, rank them by |-ln p - H| and keep the fewest of
 * the best ranked whose probabilities sum to more than typical_p (and at
 * least min_keep). The survivors keep their draw order, so c stays as
 * sorted as it was; llama.cpp leaves them in rank order, which only its
 * draw sees. A probability that underflowed to 0 adds nothing to H
 * (0 ln 0 = 0, where llama.cpp's sum would turn NaN) and ranks last. */
static int32_t typical(struct fl_sampler *s, int32_t n)
{
    struct fl_candidate *c = s->cand;
    struct typ_rank *r = s->rank;
    softmax(c, n);
    float h = 0.0f;
    for (int32_t i = 0; i < n; i++)
        if (c[i].p > 0.0f)
            h += -c[i].p * logf(c[i].p);
    for (int32_t i = 0; i < n; i++)
        r[i] = (struct typ_rank){ fabsf(-logf(c[i].p) - h), i };
    qsort(r, (size_t)n, sizeof(*r), rank_cmp);
    float cum = 0.0f;
    int32_t keep = n;
    for (int32_t i = 0; i < n; i++) {
        cum += c[r[i].pos].p;
        if (cum > s->p.typical_p && i + 1 >= s->p.min_keep) {
            keep = i + 1;
            break;
        }
    }
    if (keep == n)
        return n;
    /* in place: ascending positions, so each read is at or after its write */
    qsort(r, (size_t)keep, sizeof(*r), pos_cmp);
    for (int32_t i = 0; i < keep; i++)
        c[i] = c[r[i].pos];
    return keep;
}

/* ---- the chain ---------------------------------------------------------- */

struct chain {
    int32_t n;           /* survivors at s->cand[0..n) */
    enum order_state st;
    /* candidates llama.cpp would still hold at -inf (top_n_sigma and a zero
     * temperature mask instead of removing): its XTC and dynamic
     * temperature count them */
    int32_t masked;
};

static void ensure_descending(struct fl_sampler *s, struct chain *ch)
{
    if (ch->st != UNSORTED)
        return;
    top_k_sorted(s->cand, ch->n, ch->n);
    ch->st = SORTED;
}

/* A logit the penalties push to -inf (or NaN) leaves, as one that came in
 * that way never entered. */
static void step_penalties(struct fl_sampler *s, struct chain *ch)
{
    if (!s->count)
        return;
    int32_t m = 0;
    for (int32_t i = 0; i < ch->n; i++) {
        float l = penalised(s, s->cand[i].id, s->cand[i].logit);
        if (!isnan(l) && l != -INFINITY) {
            s->cand[m] = s->cand[i];
            s->cand[m++].logit = l;
        }
    }
    ch->n = m;
    ch->st = UNSORTED;
}

static void step_top_k(struct fl_sampler *s, struct chain *ch)
{
    int32_t k = s->p.top_k;
    if (k > 0) /* llama.cpp's k of them may include masked ones */
        ch->masked = k >= ch->n + ch->masked ? ch->masked : k > ch->n ? k - ch->n : 0;
    if (k <= 0 || k >= ch->n) {
        ensure_descending(s, ch);
    } else if (ch->st == SORTED) {
        ch->n = k; /* already cand_cmp's order: the prefix is the heap's answer */
    } else {
        top_k_sorted(s->cand, ch->n, k);
        ch->n = k;
        ch->st = SORTED;
    }
}

/* t <= 0 keeps only the best (llama.cpp sets the others to -inf, which
 * nothing after it can draw). Dividing by t > 0 keeps the order but may
 * make unequal logits equal. */
static void apply_temperature(struct fl_sampler *s, struct chain *ch, float t)
{
    if (t <= 0.0f) {
        if (ch->st != SORTED)
            top_k_sorted(s->cand, ch->n, 1);
        ch->masked += ch->n - 1;
        ch->n = 1;
        ch->st = SORTED;
        return;
    }
    for (int32_t i = 0; i < ch->n; i++)
        s->cand[i].logit /= t;
    if (ch->st == SORTED)
        ch->st = DESCENDING;
}

/* llama.cpp's temp_ext: with a range, the temperature moves within
 * [t - range, t + range] (not below 0) with the candidates' entropy over
 * its largest possible value, to the power of the exponent. */
static void step_temperature(struct fl_sampler *s, struct chain *ch)
{
    const struct fl_sampler_params *p = &s->p;
    if (p->dynatemp_range <= 0.0f) {
        apply_temperature(s, ch, p->temperature);
        return;
    }
    const int32_t size = ch->n + ch->masked;
    if (size <= 1)
        return;
    const float max_entropy = -logf(1.0f / (float)size);
    ensure_descending(s, ch);
    softmax(s->cand, ch->n);
    float h = 0.0f;
    for (int32_t i = 0; i < ch->n; i++)
        if (s->cand[i].p > 0.0f)
            h -= s->cand[i].p * logf(s->cand[i].p);
    const float lo = fmaxf(0.0f, p->temperature - p->dynatemp_range);
    const float hi = p->temperature + p->dynatemp_range;
    apply_temperature(s, ch, lo + (hi - lo) * powf(h / max_entropy, p->dynatemp_exponent));
}

/* llama.cpp's top-n-sigma: masks logits more than n standard deviations
 * (of the finite ones) below the best. */
static void step_top_n_sigma(struct fl_sampler *s, struct chain *ch)
{
    const float n_sigma = s->p.top_n_sigma;
    struct fl_candidate *c = s->cand;
    if (n_sigma <= 0.0f || ch->n + ch->masked <= 1)
        return;
    float max = c[0].logit, sum = 0.0f;
    for (int32_t i = 0; i < ch->n; i++) {
        max = fmaxf(max, c[i].logit);
        sum += c[i].logit;
    }
    const float mean = sum / (float)ch->n;
    float acc = 0.0f;
    for (int32_t i = 0; i < ch->n; i++) /* squared in double, as llama.cpp's pow */
        acc = (float)((double)acc + pow((double)(c[i].logit - mean), 2.0));
    const float bound = max - n_sigma * sqrtf(acc / (float)ch->n);
    int32_t m = 0;
    for (int32_t i = 0; i < ch->n; i++)
        if (!(c[i].logit < bound))
            c[m++] = c[i];
    ch->masked += ch->n - m;
    ch->n = m;
}

/* llama.cpp's XTC: with the given chance, removes every candidate at or
 * above the threshold but the least likely of them, when at least
 * min_keep remain. */
static void step_xtc(struct fl_sampler *s, struct chain *ch)
{
    const struct fl_sampler_params *p = &s->p;
    if (!xtc_on(p) || ch->n + ch->masked < 2)
        return;
    if ((float)fl_sampler_uniform(s) > p->xtc_probability)
        return;
    ensure_descending(s, ch);
    softmax(s->cand, ch->n);
    int32_t last = 0;
    while (last + 1 < ch->n && s->cand[last + 1].p >= p->xtc_threshold)
        last++;
    if (last == 0 || s->cand[0].p < p->xtc_threshold ||
        ch->n + ch->masked - last < p->min_keep)
        return;
    memmove(s->cand, s->cand + last, sizeof(*s->cand) * (size_t)(ch->n - last));
    ch->n -= last;
}

static void step_dry(struct fl_sampler *s, struct chain *ch)
{
    if (!s->dry)
        return;
    fl_dry_apply(s->dry, &s->hist, s->cand, ch->n);
    int32_t m = 0; /* a penalty that reached -inf removes the candidate */
    for (int32_t i = 0; i < ch->n; i++)
        if (!isnan(s->cand[i].logit) && s->cand[i].logit != -INFINITY)
            s->cand[m++] = s->cand[i];
    ch->masked += ch->n - m;
    ch->n = m;
    ch->st = UNSORTED;
}

static void run_step(struct fl_sampler *s, enum fl_sampler_type t, struct chain *ch)
{
    const struct fl_sampler_params *p = &s->p;
    switch (t) {
    case FL_SAMPLER_PENALTIES: step_penalties(s, ch); break;
    case FL_SAMPLER_TOP_K: step_top_k(s, ch); break;
    case FL_SAMPLER_TEMPERATURE: step_temperature(s, ch); break;
    case FL_SAMPLER_DRY: step_dry(s, ch); break;
    case FL_SAMPLER_TOP_N_SIGMA: step_top_n_sigma(s, ch); break;
    case FL_SAMPLER_XTC: step_xtc(s, ch); break;
    case FL_SAMPLER_TYPICAL_P:
        if (p->typical_p < 1.0f) {
            ensure_descending(s, ch);
            ch->n = typical(s, ch->n);
            ch->masked = 0; /* ranked last, never kept */
        }
        break;
    case FL_SAMPLER_TOP_P:
        if (p->top_p < 1.0f) {
            bool cut;
            ensure_descending(s, ch);
            ch->n = top_p(s->cand, ch->n, p->top_p, p->min_keep, &cut);
            ch->masked = cut ? 0 : ch->masked;
        }
        break;
    case FL_SAMPLER_MIN_P:
        if (p->min_p > 0.0f) {
            ensure_descending(s, ch);
            ch->n = min_p(s->cand, ch->n, p->min_p, p->min_keep);
            ch->masked = 0;
        }
        break;
    }
}

/* Every logit that is neither NaN nor -inf, penalised when pen says. */
static int32_t gather(struct fl_sampler *s, const float *logits, bool pen)
{
    int32_t n = 0;
    for (int32_t id = 0; id < s->n_vocab; id++) {
        const float x = s->bias ? logits[id] + s->bias[id] : logits[id];
        float l = pen ? penalised(s, id, x) : x;
        if (!isnan(l) && l != -INFINITY)
            s->cand[n++] = (struct fl_candidate){ id, l, 0.0f };
    }
    return n;
}

/* Mirostat's truncation (llama.cpp's, after Basu et al.): v1 estimates the
 * Zipf exponent from the top 100 probabilities and keeps the k tokens
 * whose expected surprise meets mu; v2 keeps the tokens whose surprise
 * (-log2 p) is at most mu, at least one. c is sorted, with probabilities. */
static int32_t mirostat_keep(const struct fl_sampler *s, const struct fl_candidate *c, int32_t n)
{
    if (s->p.mirostat == 2) {
        int32_t k = 0;
        while (k < n && !(-log2f(c[k].p) > s->mu))
            k++;
        return k ? k : 1;
    }
    float sum_tb = 0.0f, sum_tt = 0.0f;
    for (int32_t i = 0; i < 99 && i < n - 1; i++) {
        const float t = logf((float)(i + 2) / (float)(i + 1));
        sum_tb += t * logf(c[i].p / c[i + 1].p);
        sum_tt += t * t;
    }
    const float s_hat = sum_tb / sum_tt, eps = s_hat - 1;
    const float k = powf((eps * powf(2, s->mu)) / (1 - powf((float)s->n_vocab, -eps)), 1 / s_hat);
    /* llama.cpp's int(k): what is not a number in int range ends at 1 */
    const int32_t ki = k >= 1.0f && k < 2147483648.0f ? (int32_t)k : 1;
    return ki < n ? ki : n;
}

/* llama.cpp's mirostat chain: the temperature, then mirostat (the draw
 * updates mu: fl_sampler_sample). */
static int32_t filter_mirostat(struct fl_sampler *s, const float *logits)
{
    struct chain ch = { gather(s, logits, false), UNSORTED, 0 };
    if (ch.n == 0)
        return 0;
    apply_temperature(s, &ch, s->p.temperature);
    ensure_descending(s, &ch);
    softmax(s->cand, ch.n);
    ch.n = mirostat_keep(s, s->cand, ch.n);
    softmax(s->cand, ch.n);
    return ch.n;
}

/* Runs the chain. Returns the survivors at s->cand[0..n), with their
 * probabilities, in draw order. */
static int32_t filter(struct fl_sampler *s, const float *logits)
{
    if (s->p.mirostat)
        return filter_mirostat(s, logits);
    if (s->greedy_fast) {
        int32_t n = gather(s, logits, s->pen_first);
        if (n == 0)
            return 0;
        top_k_sorted(s->cand, n, 1); /* ties go to the lowest id */
        s->cand[0].p = 1.0f;
        return 1;
    }
    struct chain ch = { gather(s, logits, false), UNSORTED, 0 };
    for (int32_t i = 0; i < s->n_order && ch.n > 0; i++)
        run_step(s, s->order[i], &ch);
    if (ch.n == 0)
        return 0;
    ensure_descending(s, &ch);
    softmax(s->cand, ch.n);
    return ch.n;
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
    int32_t i = 0;
    if (n > 1) {
        double u = fl_sampler_uniform(s), cum = 0.0;
        for (i = 0; i < n - 1; i++) { /* rounding may leave u above the last sum */
            cum += s->cand[i].p;
            if (u < cum)
                break;
        }
    }
    if (s->p.mirostat) /* mu follows the surprise of what was drawn */
        s->mu -= s->p.mirostat_eta * (-log2f(s->cand[i].p) - s->p.mirostat_tau);
    return s->cand[i].id;
}
