/* predict.c: the expert predictors and their precision/recall (predict.h). */
#include "app/predict.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/tensor-types.h"
#include "model/expert-source.h"
#include "model/model.h"
#include "pager/pager.h"

#define MAX_DEPTH 8
#define MAX_WINDOW 64

struct fl_predictor {
    struct fl_predict_config cfg;
    struct pager *pager;
    int n_layers, n_expert, n_used;
    bool *moe;                /* [n_layers] block has a router */
    uint8_t *pend;            /* [n_layers][n_expert] predicted, not yet scored */
    int *pend_n;              /* [n_layers] */
    /* history: a ring of the last `window` choices per layer */
    uint8_t *hist;            /* [n_layers][window][n_expert] */
    int *hist_head, *hist_len;
    /* lookahead */
    const struct eng_router **router; /* [n_layers]: F32 [n_embd, n_expert] routers, or NULL */
    const float **norm;       /* [n_layers] the norm before each router, or NULL */
    int64_t n_embd;
    int32_t *staged;          /* [depth][n_expert] experts predicted by the last hidden() */
    int staged_n[MAX_DEPTH], staged_layer[MAX_DEPTH];
    int hidden_layer;         /* layer the staged predictions come from, or -1 */
    float *xs, *logits;       /* [n_embd], [n_expert] */
    int32_t *tmp;             /* [n_expert] */
    uint32_t *uses;           /* [n_layers][n_expert] tokens that chose each expert at its
                                 layer's last routing: counted at its acquire */
    struct fl_predict_stats st;
};

void fl_predict_config_init(struct fl_predict_config *c)
{
    /* lookahead:1 won the grid at a 25 % cap (docs/prefetch.md) */
    *c = (struct fl_predict_config){ .kind = FL_PREDICT_LOOKAHEAD, .depth = 1, .window = 8 };
}

static int parse_count(const char *v, int lo, int hi, int *out)
{
    char *e;
    long n = strtol(v, &e, 10);
    if (e == v || *e || n < lo || n > hi)
        return -EINVAL;
    *out = (int)n;
    return 0;
}

int fl_predict_parse(const char *s, struct fl_predict_config *out, struct fl_err *err)
{
    fl_predict_config_init(out);
    const char *arg = s ? strchr(s, ':') : NULL;
    size_t len = s ? (arg ? (size_t)(arg - s) : strlen(s)) : 0;
    int rc = 0;
    if (s && len == 4 && !strncmp(s, "none", 4) && !arg)
        out->kind = FL_PREDICT_NONE;
    else if (s && len == 6 && !strncmp(s, "router", 6) && !arg)
        out->kind = FL_PREDICT_ROUTER;
    else if (s && len == 9 && !strncmp(s, "lookahead", 9)) {
        out->kind = FL_PREDICT_LOOKAHEAD;
        rc = arg ? parse_count(arg + 1, 1, MAX_DEPTH, &out->depth) : 0;
    } else if (s && len == 7 && !strncmp(s, "history", 7)) {
        out->kind = FL_PREDICT_HISTORY;
        rc = arg ? parse_count(arg + 1, 1, MAX_WINDOW, &out->window) : 0;
    } else
        rc = -EINVAL;
    if (rc)
        return fl_err_set(err, -EINVAL, "--prefetch: expected none, router, lookahead[:1..%d] "
                          "or history[:1..%d], got '%s'", MAX_DEPTH, MAX_WINDOW, s ? s : "");
    return 0;
}

const char *fl_predict_name(const struct fl_predict_config *c, char *buf, size_t n)
{
    static const char *names[] = { "none", "router", "lookahead", "history" };
    if (c->kind == FL_PREDICT_LOOKAHEAD)
        snprintf(buf, n, "lookahead:%d", c->depth);
    else if (c->kind == FL_PREDICT_HISTORY)
        snprintf(buf, n, "history:%d", c->window);
    else
        snprintf(buf, n, "%s", names[c->kind]);
    return buf;
}

/* --- set-up ------------------------------------------------------------------ */

/* Router (and norm) weights of every MoE layer, for lookahead. A layer
 * whose router is not an F32 [n_embd, n_expert] matrix is not predicted
 * (lookahead is the default: it must not refuse a model). */
static int find_routers(struct fl_predictor *pr, const struct eng_model *m, struct fl_err *err)
{
    for (int l = 0; l < pr->n_layers; l++) {
        const struct eng_router *r = eng_model_router(m, l);
        if (!r || r->w->type != FL_TYPE_F32 || r->w->ne[1] != pr->n_expert ||
            (pr->n_embd && r->w->ne[0] != pr->n_embd))
            continue;
        pr->n_embd = r->w->ne[0];
        pr->router[l] = r;
        if (r->norm && r->norm->type == FL_TYPE_F32 && r->norm->ne[0] == r->w->ne[0])
            pr->norm[l] = (const float *)r->norm->data;
    }
    if (!pr->n_embd)
        return 0; /* nothing to look ahead with: the router's prefetch only */
    pr->xs = malloc(sizeof(float) * (size_t)pr->n_embd);
    return pr->xs ? 0 : fl_err_set(err, -ENOMEM, "out of memory");
}

static int alloc_all(struct fl_predictor *pr)
{
    size_t L = (size_t)pr->n_layers, E = (size_t)pr->n_expert;
    size_t W = pr->cfg.kind == FL_PREDICT_HISTORY ? (size_t)pr->cfg.window : 0;
    pr->moe = calloc(L, sizeof(bool));
    pr->pend = calloc(L * E, 1);
    pr->pend_n = calloc(L, sizeof(int));
    pr->hist = calloc(L * (W ? W : 1) * E, 1);
    pr->hist_head = calloc(L, sizeof(int));
    pr->hist_len = calloc(L, sizeof(int));
    pr->router = calloc(L, sizeof(*pr->router));
    pr->norm = calloc(L, sizeof(float *));
    pr->staged = calloc(MAX_DEPTH * E, sizeof(int32_t));
    pr->logits = calloc(E, sizeof(float));
    pr->tmp = calloc(E, sizeof(int32_t));
    pr->uses = calloc(L * E, sizeof(uint32_t));
    return pr->moe && pr->pend && pr->pend_n && pr->hist && pr->hist_head && pr->hist_len &&
                   pr->router && pr->norm && pr->staged && pr->logits && pr->tmp && pr->uses
               ? 0 : -ENOMEM;
}

int fl_predictor_create(const struct fl_predict_config *cfg, struct pager *pager,
                        const struct eng_model *m, int n_layers, int n_expert, int n_used,
                        struct fl_predictor **out, struct fl_err *err)
{
    *out = NULL;
    if (n_layers <= 0 || n_expert <= 0 || n_used <= 0 || n_used > n_expert)
        return fl_err_set(err, -EINVAL, "predictor: bad layer/expert counts");
    struct fl_predictor *pr = calloc(1, sizeof(*pr));
    if (!pr)
        return fl_err_set(err, -ENOMEM, "out of memory");
    pr->cfg = *cfg;
    pr->pager = pager;
    pr->n_layers = n_layers;
    pr->n_expert = n_expert;
    pr->n_used = n_used;
    pr->hidden_layer = -1;
    int rc = alloc_all(pr) ? fl_err_set(err, -ENOMEM, "out of memory") : 0;
    for (int l = 0; rc == 0 && l < n_layers; l++)
        pr->moe[l] = !m || eng_model_router(m, l) != NULL;
    if (rc == 0 && cfg->kind == FL_PREDICT_LOOKAHEAD)
        rc = m ? find_routers(pr, m, err)
               : fl_err_set(err, -EINVAL, "--prefetch lookahead needs the model");
    if (rc) {
        fl_predictor_free(pr);
        return rc;
    }
    *out = pr;
    return 0;
}

void fl_predictor_free(struct fl_predictor *pr)
{
    if (!pr)
        return;
    free(pr->moe);
    free(pr->pend);
    free(pr->pend_n);
    free(pr->hist);
    free(pr->hist_head);
    free(pr->hist_len);
    free(pr->router);
    free(pr->norm);
    free(pr->staged);
    free(pr->xs);
    free(pr->logits);
    free(pr->tmp);
    free(pr->uses);
    free(pr);
}

/* --- predicting ----------------------------------------------------------------- */

/* The d-th MoE layer after `layer` (d >= 1); wrap: past the last block comes
 * the next token's first. -1 when there is none. */
static int next_moe(const struct fl_predictor *pr, int layer, int d, bool wrap)
{
    for (int step = 1, l = layer; step <= pr->n_layers; step++) {
        l++;
        if (l == pr->n_layers) {
            if (!wrap)
                return -1;
            l = 0;
        }
        if (pr->moe[l] && --d == 0)
            return l;
    }
    return -1;
}

/* The k best scores (> 0), descending; ties to the lower id. Returns how many. */
static int top_k(const float *score, int n, int k, int32_t *ids)
{
    int have = 0;
    for (int e = 0; e < n; e++) {
        if (!(score[e] > 0.0f) || (have == k && !(score[e] > score[ids[k - 1]])))
            continue;
        int pos = have < k ? have : k - 1;
        while (pos > 0 && score[ids[pos - 1]] < score[e]) {
            ids[pos] = ids[pos - 1];
            pos--;
        }
        ids[pos] = e;
        if (have < k)
            have++;
    }
    return have;
}

/* history: score = sum over the last W choices of (W - age), age 0 = newest. */
static int predict_history(struct fl_predictor *pr, int t, int32_t *ids)
{
    const int W = pr->cfg.window, E = pr->n_expert;
    float *score = pr->logits;
    memset(score, 0, sizeof(float) * (size_t)E);
    for (int age = 0; age < pr->hist_len[t]; age++) {
        int slot = (pr->hist_head[t] - 1 - age + W) % W;
        const uint8_t *set = pr->hist + ((size_t)t * (size_t)W + (size_t)slot) * (size_t)E;
        for (int e = 0; e < E; e++)
            if (set[e])
                score[e] += (float)(W - age);
    }
    return top_k(score, E, pr->n_used, ids);
}

static void remember(struct fl_predictor *pr, int layer, const int32_t *experts, int n)
{
    const int W = pr->cfg.window, E = pr->n_expert;
    uint8_t *set = pr->hist + ((size_t)layer * (size_t)W + (size_t)pr->hist_head[layer]) * (size_t)E;
    memset(set, 0, (size_t)E);
    for (int i = 0; i < n; i++)
        if (experts[i] >= 0 && experts[i] < E)
            set[experts[i]] = 1;
    pr->hist_head[layer] = (pr->hist_head[layer] + 1) % W;
    if (pr->hist_len[layer] < W)
        pr->hist_len[layer]++;
}

/* lookahead: layer t's router on token x, its norm swapped for t's. */
static int lookahead_token(struct fl_predictor *pr, int from, int t, const float *x, int32_t *ids)
{
    const int64_t D = pr->n_embd;
    const float *a = pr->norm[from], *b = pr->norm[t];
    for (int64_t i = 0; i < D; i++)
        pr->xs[i] = a && b && a[i] != 0.0f ? x[i] / a[i] * b[i] : x[i];
    eng_router_logits(pr->router[t], pr->xs, pr->logits);
    /* top-k on shifted logits: monotonic gating keeps the same choice */
    float lo = pr->logits[0];
    for (int e = 1; e < pr->n_expert; e++)
        lo = pr->logits[e] < lo ? pr->logits[e] : lo;
    for (int e = 0; e < pr->n_expert; e++)
        pr->logits[e] = pr->logits[e] - lo + 1.0f;
    return top_k(pr->logits, pr->n_expert, pr->n_used, ids);
}

/* Forgets staged predictions that no routing followed (a failed forward). */
static void unstage(struct fl_predictor *pr)
{
    for (int d = 0; pr->hidden_layer >= 0 && d < pr->cfg.depth; d++) {
        uint8_t *p = pr->pend + (size_t)pr->staged_layer[d] * (size_t)pr->n_expert;
        for (int i = 0; pr->staged_layer[d] >= 0 && i < pr->staged_n[d]; i++)
            if (p[pr->staged[(size_t)d * (size_t)pr->n_expert + (size_t)i]] == 2)
                p[pr->staged[(size_t)d * (size_t)pr->n_expert + (size_t)i]] = 0;
    }
    pr->hidden_layer = -1;
}

void fl_predictor_hidden(struct fl_predictor *pr, int layer, const float *x, int64_t n_tok)
{
    if (pr->cfg.kind != FL_PREDICT_LOOKAHEAD || !pr->n_embd || layer < 0 ||
        layer >= pr->n_layers)
        return;
    const int E = pr->n_expert;
    unstage(pr);
    pr->hidden_layer = layer;
    for (int d = 0; d < pr->cfg.depth; d++) {
        int t = next_moe(pr, layer, d + 1, false);
        pr->staged_layer[d] = t;
        pr->staged_n[d] = 0;
        if (t < 0 || !pr->router[t])
            continue;
        uint8_t *seen = pr->pend + (size_t)t * (size_t)E; /* dedup against what is pending */
        int32_t *out = pr->staged + (size_t)d * (size_t)E;
        /* Once every expert is pending or staged no token can add one; the
         * rest of a prefill's hundreds of router products would only keep
         * the compute threads waiting. */
        int covered = 0;
        for (int e = 0; e < E; e++)
            covered += seen[e] != 0;
        for (int64_t k = 0; k < n_tok && covered < E; k++) {
            int n = lookahead_token(pr, layer, t, x + k * pr->n_embd, pr->tmp);
            for (int i = 0; i < n; i++)
                if (!seen[pr->tmp[i]]) {
                    seen[pr->tmp[i]] = 2; /* staged; becomes pending in route */
                    out[pr->staged_n[d]++] = pr->tmp[i];
                    covered++;
                }
        }
    }
}

/* Marks ids as predicted for layer t and prefetches them. */
static int predict_for(struct fl_predictor *pr, int t, const int32_t *ids, int n)
{
    uint8_t *p = pr->pend + (size_t)t * (size_t)pr->n_expert;
    for (int i = 0; i < n; i++) {
        if (p[ids[i]] != 1)
            pr->pend_n[t]++;
        p[ids[i]] = 1;
    }
    return pr->pager && n ? pager_prefetch_guess(pr->pager, t, ids, n) : 0;
}

static void score(struct fl_predictor *pr, int layer, const int32_t *experts, int n)
{
    uint8_t *p = pr->pend + (size_t)layer * (size_t)pr->n_expert;
    if (pr->pend_n[layer] > 0) {
        pr->st.scored++;
        pr->st.predicted += (uint64_t)pr->pend_n[layer];
        pr->st.chosen += (uint64_t)n;
        for (int i = 0; i < n; i++)
            if (experts[i] >= 0 && experts[i] < pr->n_expert && p[experts[i]] == 1)
                pr->st.hits++;
    }
    memset(p, 0, (size_t)pr->n_expert);
    pr->pend_n[layer] = 0;
}

int fl_predictor_route(struct fl_predictor *pr, int layer, const int32_t *experts, int n)
{
    if (layer < 0 || layer >= pr->n_layers)
        return pr->pager && pr->cfg.kind != FL_PREDICT_NONE
                   ? pager_prefetch(pr->pager, layer, experts, n) : 0;
    score(pr, layer, experts, n);
    for (int i = 0; pr->pager && i < n; i++)
        pr->st.ready += pager_resident(pr->pager, layer, experts[i]);
    pr->st.routed += pr->pager ? (uint64_t)n : 0;
    if (pr->cfg.kind == FL_PREDICT_NONE)
        return 0;
    int rc = 0;
    if (pr->pager) {
        pager_prefetch_cancel(pr->pager);
        rc = pager_prefetch(pr->pager, layer, experts, n);
        pager_prefetch_settle(pr->pager, layer);
    }
    if (pr->cfg.kind == FL_PREDICT_HISTORY) {
        remember(pr, layer, experts, n);
        int t = next_moe(pr, layer, 1, true);
        if (t >= 0 && rc == 0)
            rc = predict_for(pr, t, pr->tmp, predict_history(pr, t, pr->tmp));
    } else if (pr->cfg.kind == FL_PREDICT_LOOKAHEAD && pr->hidden_layer == layer) {
        for (int d = 0; d < pr->cfg.depth && rc == 0; d++)
            if (pr->staged_layer[d] >= 0)
                rc = predict_for(pr, pr->staged_layer[d],
                                 pr->staged + (size_t)d * (size_t)pr->n_expert, pr->staged_n[d]);
        pr->hidden_layer = -1;
    }
    return rc;
}

void fl_predictor_stats(const struct fl_predictor *pr, struct fl_predict_stats *st)
{
    *st = pr->st;
}

void fl_predictor_stats_reset(struct fl_predictor *pr)
{
    memset(&pr->st, 0, sizeof(pr->st));
}

double fl_predict_precision(const struct fl_predict_stats *st)
{
    return st->predicted ? (double)st->hits / (double)st->predicted : -1.0;
}

double fl_predict_recall(const struct fl_predict_stats *st)
{
    return st->chosen ? (double)st->hits / (double)st->chosen : -1.0;
}

void fl_paging_row_of(const struct pager_totals *t, const struct fl_predict_stats *st,
                      uint64_t tokens, double disk_bps, struct fl_paging_row *out)
{
    double n = tokens ? (double)tokens : 1.0, per_tok = (double)t->bytes_read / n;
    out->hit_pct = st->routed ? 100.0 * (double)st->ready / (double)st->routed : -1.0;
    out->precision_pct = st->predicted ? 100.0 * fl_predict_precision(st) : -1.0;
    out->recall_pct = st->chosen ? 100.0 * fl_predict_recall(st) : -1.0;
    out->mib_per_token = per_tok / 1048576.0;
    out->stall_ms_per_token = (double)t->stall_ns / 1e6 / n;
    out->io_bound_tps = disk_bps > 0 && per_tok > 0 ? disk_bps / per_tok : 0.0;
}

void fl_paging_row(struct pager *p, const struct fl_predictor *pr, uint64_t tokens,
                   double disk_bps, struct fl_paging_row *out)
{
    struct pager_totals t;
    struct fl_predict_stats st = { 0 };
    pager_stats_totals(p, &t);
    if (pr)
        fl_predictor_stats(pr, &st);
    fl_paging_row_of(&t, &st, tokens, disk_bps, out);
}

/* --- the engine's expert source -------------------------------------------------- */

static int src_prefetch(void *ctx, int layer, const int32_t *experts, const int32_t *uses,
                        int n)
{
    struct fl_predictor *pr = ctx;
    if (layer >= 0 && layer < pr->n_layers)
        for (int i = 0; i < n; i++)
            if (experts[i] >= 0 && experts[i] < pr->n_expert)
                pr->uses[(size_t)layer * (size_t)pr->n_expert + (size_t)experts[i]] =
                    uses && uses[i] > 0 ? (uint32_t)uses[i] : 1;
    return fl_predictor_route(ctx, layer, experts, n);
}

static void src_hidden(void *ctx, int layer, const float *x, int64_t n_tok)
{
    fl_predictor_hidden(ctx, layer, x, n_tok);
}

static int src_acquire(void *ctx, int layer, int expert)
{
    struct fl_predictor *pr = ctx;
    uint32_t uses = 1;
    if (layer >= 0 && layer < pr->n_layers && expert >= 0 && expert < pr->n_expert) {
        uint32_t *u = &pr->uses[(size_t)layer * (size_t)pr->n_expert + (size_t)expert];
        uses = *u ? *u : 1;
        *u = 0; /* a second acquire of the step (the VRAM cache's fill) counts once */
    }
    return pager_acquire_uses(pr->pager, layer, expert, uses);
}

static void src_release(void *ctx, int layer, int expert)
{
    pager_release(((struct fl_predictor *)ctx)->pager, layer, expert);
}

static bool src_resident(void *ctx, int layer, int expert)
{
    return pager_resident(((struct fl_predictor *)ctx)->pager, layer, expert);
}

void fl_predictor_source(struct fl_predictor *pr, struct eng_expert_source *src)
{
    src->ctx = pr;
    src->prefetch = src_prefetch;
    src->acquire = src_acquire;
    src->release = src_release;
    src->resident = src_resident;
    src->hidden = src_hidden;
    src->max_pinned = pager_max_pinned(pr->pager); /* the pager's limit, unchanged by prediction */
}
