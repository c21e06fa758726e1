/* moe-route.c: expert routing and the per-expert lists (model/moe-route.h). */
#include "model/moe-route.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void eng_softmax(float *x, int64_t n)
{
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += (double)x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++)
        x[i] *= inv;
}

/* Indices of the k largest scores, descending; ties go to the lower id
 * (a stable selection). k is small, so insertion into a sorted list. */
static void top_k(const float *score, int64_t n, int64_t k, int32_t *ids)
{
    int64_t have = 0;
    for (int64_t e = 0; e < n; e++) {
        if (have == k && !(score[e] > score[ids[k - 1]]))
            continue;
        int64_t pos = have < k ? have : k - 1; /* when full, the last one drops out */
        while (pos > 0 && score[ids[pos - 1]] < score[e]) {
            ids[pos] = ids[pos - 1];
            pos--;
        }
        ids[pos] = (int32_t)e;
        if (have < k)
            have++;
    }
}

static void gate(float *v, int64_t n, enum eng_gating g)
{
    if (g == ENG_GATING_SOFTMAX)
        eng_softmax(v, n);
    else if (g == ENG_GATING_SIGMOID)
        for (int64_t e = 0; e < n; e++)
            v[e] = 1.0f / (1.0f + expf(-v[e]));
}

/* One token; bias NULL or [n_expert], added to the gated logits for the
 * choice only. */
static void route_one(float *logits, const struct eng_route *r, const float *bias, float *sel,
                      int32_t *ids, float *w)
{
    const int64_t n = r->n_expert, k = r->k;
    gate(logits, n, r->gating);
    const float *score = logits;
    if (bias) {
        for (int64_t e = 0; e < n; e++)
            sel[e] = logits[e] + bias[e];
        score = sel;
    }
    top_k(score, n, k, ids);
    for (int64_t j = 0; j < k; j++)
        w[j] = logits[ids[j]];
    if (r->gating == ENG_GATING_SOFTMAX_WEIGHT)
        eng_softmax(w, k);
    if (r->norm) {
        double sum = 0.0;
        for (int64_t j = 0; j < k; j++)
            sum += (double)w[j];
        float s = (float)sum;
        if (!(s >= 6.103515625e-5f))
            s = 6.103515625e-5f;
        for (int64_t j = 0; j < k; j++)
            w[j] = w[j] / s;
    }
    if (r->scale != 0.0f && r->scale != 1.0f)
        for (int64_t j = 0; j < k; j++)
            w[j] *= r->scale;
}

/* Group-limited choice: the groups not allowed become -inf entries of the
 * token's selection bias (mask + the file's bias). */
static void group_bias(const float *logits, const struct eng_route *r, const float *sel_bias,
                       float *sel, float *bias)
{
    const int64_t n = r->n_expert;
    /* selection score = gating output + bias, as the router computes it */
    memcpy(sel, logits, sizeof(float) * (size_t)n);
    gate(sel, n, r->gating);
    for (int64_t i = 0; i < n && sel_bias; i++)
        sel[i] += sel_bias[i];
    eng_moe_group_mask(sel, (int)n, r->n_groups, r->n_group_used, bias);
    for (int64_t i = 0; i < n && sel_bias; i++)
        bias[i] += sel_bias[i];
}

void eng_moe_route(float *logits, int64_t n_tok, const struct eng_route *r, int32_t *ids,
                   float *weights)
{
    const float *sel_bias = r->sel_bias ? (const float *)r->sel_bias->data : NULL;
    const bool groups = r->n_groups > 1;
    float *sel = malloc(sizeof(float) * (size_t)r->n_expert * (groups ? 2 : 1));
    if (!sel)
        abort();
    float *bias = groups ? sel + r->n_expert : NULL;
    for (int64_t t = 0; t < n_tok; t++) {
        float *lt = logits + t * r->n_expert;
        if (groups)
            group_bias(lt, r, sel_bias, sel, bias);
        route_one(lt, r, groups ? bias : sel_bias, sel, ids + t * r->k, weights + t * r->k);
    }
    free(sel);
}

/* Sum of the two largest of n >= 2 values. */
static float top2_sum(const float *v, int n)
{
    int a = v[1] > v[0] ? 1 : 0, b = 1 - a;
    for (int i = 2; i < n; i++) {
        if (v[i] > v[a]) {
            b = a;
            a = i;
        } else if (v[i] > v[b]) {
            b = i;
        }
    }
    return v[a] + v[b];
}

void eng_moe_group_mask(const float *sel, int n_expert, int n_groups, int n_used, float *mask)
{
    const int per = n_expert / n_groups;
    float score[256];
    bool chosen[256] = { false };
    for (int g = 0; g < n_groups && g < 256; g++)
        score[g] = top2_sum(sel + g * per, per);
    /* the n_used best groups, ties to the lower index */
    for (int j = 0; j < n_used; j++) {
        int best = -1;
        for (int g = 0; g < n_groups && g < 256; g++)
            if (!chosen[g] && (best < 0 || score[g] > score[best]))
                best = g;
        if (best >= 0)
            chosen[best] = true;
    }
    for (int e = 0; e < n_expert; e++)
        mask[e] = e / per < 256 && chosen[e / per] ? 0.0f : -INFINITY;
}

static void build_lists(struct eng_ctx *c, const int32_t *ids, int64_t n_tok, int64_t k,
                        int64_t n_expert, struct eng_expert_lists *L)
{
    L->n_expert = n_expert;
    L->count = eng_scratch(c, sizeof(int32_t) * (size_t)n_expert);
    L->start = eng_scratch(c, sizeof(int32_t) * (size_t)(n_expert + 1));
    L->tok = eng_scratch(c, sizeof(int32_t) * (size_t)(n_tok * k));
    L->slot = eng_scratch(c, sizeof(int32_t) * (size_t)(n_tok * k));
    L->order = eng_scratch(c, sizeof(int32_t) * (size_t)n_expert);
    memset(L->count, 0, sizeof(int32_t) * (size_t)n_expert);
    for (int64_t i = 0; i < n_tok * k; i++)
        L->count[ids[i]]++;
    L->start[0] = 0;
    for (int64_t e = 0; e < n_expert; e++)
        L->start[e + 1] = L->start[e] + L->count[e];
    int32_t *fill = L->order; /* reused as a cursor before the order is built */
    memcpy(fill, L->start, sizeof(int32_t) * (size_t)n_expert);
    for (int64_t i = 0; i < n_tok * k; i++) {
        const int32_t e = ids[i], at = fill[e]++;
        L->tok[at] = (int32_t)(i / k);
        L->slot[at] = (int32_t)i;
    }
    L->n_order = 0;
    for (int64_t e = 0; e < n_expert; e++)
        if (L->count[e])
            L->order[L->n_order++] = (int32_t)e;
}

void eng_moe_resident_first(const struct eng_expert_source *src, int layer,
                            struct eng_expert_lists *L)
{
    if (!src || !src->resident)
        return;
    int front = 0;
    for (int i = 0; i < L->n_order; i++) {
        if (src->resident(src->ctx, layer, L->order[i])) {
            int32_t e = L->order[i];
            memmove(L->order + front + 1, L->order + front, sizeof(int32_t) * (size_t)(i - front));
            L->order[front++] = e;
        }
    }
}

int eng_moe_begin(struct eng_ctx *c, int layer, const struct eng_batch *b, const float *x,
                  const int32_t *ids, const float *weights, int64_t k, int64_t n_expert,
                  struct eng_expert_lists *L, struct fl_err *err)
{
    const int64_t n_tok = b->n_tok;
    if (c->routing)
        c->routing->record(c->routing->ctx, layer, b, (int)k, ids, weights);
    build_lists(c, ids, n_tok, k, n_expert, L);
    const struct eng_expert_source *src = c->experts;
    if (src && src->hidden)
        src->hidden(src->ctx, layer, x, n_tok);
    if (src && src->prefetch) {
        int32_t *uses = eng_scratch(c, sizeof(int32_t) * (size_t)(L->n_order ? L->n_order : 1));
        for (int i = 0; i < L->n_order; i++)
            uses[i] = L->count[L->order[i]];
        int rc = src->prefetch(src->ctx, layer, L->order, uses, L->n_order);
        if (rc < 0)
            return fl_err_set(err, rc, "layer %d: prefetching experts failed: %s", layer,
                              strerror(-rc));
    }
    return 0;
}
