/* flref.c: FLRF/FLRT reading and writing. The files are small (a few MB at
 * most), so a reader loads the whole file and checks its exact size before
 * trusting any count in it. */
#include "record/flref.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/whole-file.h"

#define FLREF_MAX_FILE ((size_t)1 << 31)

/* The whole file, or one line saying why not. */
static int slurp(const char *path, unsigned char **buf, size_t *len, struct fl_err *err)
{
    char *b = NULL;
    int rc = fl_read_whole_file(path, FLREF_MAX_FILE, &b, len);
    if (rc)
        return fl_err_set(err, rc, "%s: %s", path,
                          rc == -EFBIG ? "larger than any FLRF/FLRT file" : strerror(-rc));
    *buf = (unsigned char *)b;
    return 0;
}

static int32_t rd_i32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

/* Copies n 4-byte little-endian values (x86 is little-endian; the on-disk
 * order is the in-memory order). */
static void *copy4(const unsigned char *p, int64_t n)
{
    void *d = malloc(n > 0 ? (size_t)n * 4 : 1);
    if (d && n > 0)
        memcpy(d, p, (size_t)n * 4);
    return d;
}

static int check_header(const char *path, const unsigned char *b, size_t len, const char *magic,
                        struct fl_err *err)
{
    if (len < 20 || memcmp(b, magic, 4) != 0)
        return fl_err_set(err, -EINVAL, "%s: not a %s file", path, magic);
    if (rd_i32(b + 4) != 1)
        return fl_err_set(err, -EINVAL, "%s: %s version %d is not supported", path, magic,
                          rd_i32(b + 4));
    return 0;
}

int flref_logits_read(const char *path, struct flref_logits *out, struct fl_err *err)
{
    memset(out, 0, sizeof(*out));
    unsigned char *b = NULL;
    size_t len;
    int rc = slurp(path, &b, &len, err);
    if (rc)
        return rc;
    rc = check_header(path, b, len, "FLRF", err);
    const int64_t nt = rc ? 0 : rd_i32(b + 8), nv = rc ? 0 : rd_i32(b + 12);
    if (!rc && (nt < 0 || nv < 1 || nt > (1 << 24) || nv > (1 << 24) ||
                (uint64_t)(20 + 4 * nt + 4 * nt * nv) > len))
        rc = fl_err_set(err, -EINVAL, "%s: bad sizes (n_tokens %lld, n_vocab %lld)", path,
                        (long long)nt, (long long)nv);
    const size_t gen_at = rc ? 0 : (size_t)(16 + 4 * nt + 4 * nt * nv); /* nt, nv unchecked when rc */
    const int64_t ng = rc ? 0 : rd_i32(b + gen_at);
    if (!rc && (ng < 0 || gen_at + 4 + 4 * (uint64_t)ng != len))
        rc = fl_err_set(err, -EINVAL, "%s: size %zu does not match its header", path, len);
    if (!rc) {
        out->n_tokens = (int32_t)nt;
        out->n_vocab = (int32_t)nv;
        out->n_gen = (int32_t)ng;
        out->tokens = copy4(b + 16, nt);
        out->logits = copy4(b + 16 + 4 * nt, nt * nv);
        out->gen = copy4(b + gen_at + 4, ng);
        if (!out->tokens || !out->logits || !out->gen)
            rc = fl_err_set(err, -ENOMEM, "%s: out of memory", path);
    }
    free(b);
    if (rc)
        flref_logits_free(out);
    return rc;
}

int flref_routing_read(const char *path, struct flref_routing *out, struct fl_err *err)
{
    memset(out, 0, sizeof(*out));
    unsigned char *b = NULL;
    size_t len;
    int rc = slurp(path, &b, &len, err);
    if (rc)
        return rc;
    rc = check_header(path, b, len, "FLRT", err);
    const int64_t np = rc ? 0 : rd_i32(b + 8), nl = rc ? 0 : rd_i32(b + 12), k = rc ? 0 : rd_i32(b + 16);
    /* k >= 1: with k = 0 a few bytes could declare 2^24 x 4096 empty
     * (position, layer) sets, and every comparison would walk them all */
    if (!rc && (np < 0 || nl < 0 || k < 1 || np > (1 << 24) || nl > 4096 || k > 4096 ||
                (uint64_t)(20 + 4 * nl + 8 * np * nl * k) != len))
        rc = fl_err_set(err, -EINVAL, "%s: size %zu does not match its header", path, len);
    if (!rc) {
        out->n_pos = (int32_t)np;
        out->n_layers = (int32_t)nl;
        out->k = (int32_t)k;
        out->layer_idx = copy4(b + 20, nl);
        out->ids = copy4(b + 20 + 4 * nl, np * nl * k);
        out->weights = copy4(b + 20 + 4 * nl + 4 * np * nl * k, np * nl * k);
        if (!out->layer_idx || !out->ids || !out->weights)
            rc = fl_err_set(err, -ENOMEM, "%s: out of memory", path);
    }
    free(b);
    if (rc)
        flref_routing_free(out);
    return rc;
}

static int write_all(const char *path, const void *const *parts, const size_t *sizes, int n,
                     struct fl_err *err)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return fl_err_set(err, -errno, "%s: %s", path, strerror(errno));
    int ok = 1;
    for (int i = 0; i < n; i++)
        ok = ok && (sizes[i] == 0 || fwrite(parts[i], 1, sizes[i], f) == sizes[i]);
    ok = (fclose(f) == 0) && ok;
    return ok ? 0 : fl_err_set(err, -EIO, "%s: write error", path);
}

int flref_logits_write(const char *path, const struct flref_logits *r, struct fl_err *err)
{
    const uint32_t version = 1;
    const void *parts[] = { "FLRF", &version, &r->n_tokens, &r->n_vocab, r->tokens, r->logits,
                            &r->n_gen, r->gen };
    const size_t sizes[] = { 4, 4, 4, 4, 4 * (size_t)r->n_tokens,
                             4 * (size_t)r->n_tokens * (size_t)r->n_vocab, 4, 4 * (size_t)r->n_gen };
    return write_all(path, parts, sizes, 8, err);
}

int flref_routing_write(const char *path, const struct flref_routing *r, struct fl_err *err)
{
    const uint32_t version = 1;
    const size_t n = (size_t)r->n_pos * (size_t)r->n_layers * (size_t)r->k;
    const void *parts[] = { "FLRT", &version, &r->n_pos, &r->n_layers, &r->k, r->layer_idx, r->ids,
                            r->weights };
    const size_t sizes[] = { 4, 4, 4, 4, 4, 4 * (size_t)r->n_layers, 4 * n, 4 * n };
    return write_all(path, parts, sizes, 8, err);
}

void flref_logits_free(struct flref_logits *r)
{
    free(r->tokens);
    free(r->logits);
    free(r->gen);
    memset(r, 0, sizeof(*r));
}

void flref_routing_free(struct flref_routing *r)
{
    free(r->layer_idx);
    free(r->ids);
    free(r->weights);
    memset(r, 0, sizeof(*r));
}

int32_t flref_argmax(const float *logits, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

/* log-sum-exp in double, for log-softmax. */
static double log_sum_exp(const float *x, int32_t n)
{
    double max = x[0], s = 0.0;
    for (int32_t i = 1; i < n; i++)
        max = x[i] > max ? x[i] : max;
    for (int32_t i = 0; i < n; i++)
        s += exp((double)x[i] - max);
    return max + log(s);
}

double flref_kl(const float *p_logits, const float *q_logits, int32_t n)
{
    const double lp = log_sum_exp(p_logits, n), lq = log_sum_exp(q_logits, n);
    double kl = 0.0;
    for (int32_t i = 0; i < n; i++) {
        const double a = (double)p_logits[i] - lp, b = (double)q_logits[i] - lq;
        kl += exp(a) * (a - b);
    }
    return kl > 0.0 ? kl : 0.0;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void compare_positions(const struct flref_logits *ref, const struct flref_logits *ours,
                              struct flref_cmp *c)
{
    const int32_t nv = ref->n_vocab;
    double sum_abs = 0.0, sum_kl = 0.0;
    for (int p = 0; p < c->n_pos; p++) {
        const float *a = ref->logits + (int64_t)p * nv, *b = ours->logits + (int64_t)p * nv;
        double m = 0.0;
        for (int32_t i = 0; i < nv; i++) {
            const double d = fabs((double)a[i] - (double)b[i]);
            m = d > m ? d : m;
            sum_abs += d;
        }
        c->pos_max_abs[p] = m;
        c->pos_kl[p] = flref_kl(a, b, nv);
        c->pos_top1[p] = flref_argmax(a, nv) == flref_argmax(b, nv);
        c->max_abs = m > c->max_abs ? m : c->max_abs;
        c->max_kl = c->pos_kl[p] > c->max_kl ? c->pos_kl[p] : c->max_kl;
        sum_kl += c->pos_kl[p];
        c->top1_agree += c->pos_top1[p];
    }
    if (c->n_pos > 0) {
        c->mean_abs = sum_abs / ((double)c->n_pos * nv);
        c->mean_kl = sum_kl / c->n_pos;
        double *s = malloc(sizeof(double) * (size_t)c->n_pos);
        if (s) {
            memcpy(s, c->pos_kl, sizeof(double) * (size_t)c->n_pos);
            qsort(s, (size_t)c->n_pos, sizeof(double), cmp_double);
            c->median_kl = c->n_pos % 2 ? s[c->n_pos / 2]
                                        : 0.5 * (s[c->n_pos / 2 - 1] + s[c->n_pos / 2]);
            free(s);
        }
    }
}

/* Is the first greedy difference (at generated index j) a near-tie? At j = 0
 * REF's own logits decide (its two best within near_tie). Later, only OURS
 * may have logits there (eval --all-logits); REF's gap < near_tie implies
 * ours < near_tie + 2*max|delta| seen over the prompt, so that is the test. */
static bool near_tie_at(const struct flref_logits *ref, const struct flref_logits *ours,
                        const struct flref_cmp *c, int j, double near_tie)
{
    const int32_t nv = ref->n_vocab;
    const float *row;
    double tol = near_tie;
    if (j == 0) {
        row = ref->logits + (int64_t)(ref->n_tokens - 1) * nv;
    } else {
        const int at = ref->n_tokens - 1 + j;
        if (at >= ours->n_tokens)
            return false;
        for (int i = 0; i < j; i++) /* ours' extra rows must follow the shared tokens */
            if (ours->tokens[ref->n_tokens + i] != ref->gen[i])
                return false;
        row = ours->logits + (int64_t)at * nv;
        tol = near_tie + 2.0 * c->max_abs;
    }
    const int32_t a = flref_argmax(row, nv);
    double second = -INFINITY;
    for (int32_t i = 0; i < nv; i++)
        if (i != a && row[i] > second)
            second = row[i];
    return (double)row[a] - second < tol;
}

int flref_compare(const struct flref_logits *ref, const struct flref_logits *ours, double near_tie,
                  struct flref_cmp *c, struct fl_err *err)
{
    memset(c, 0, sizeof(*c));
    if (ref->n_vocab != ours->n_vocab)
        return fl_err_set(err, -EINVAL, "vocab sizes differ (%d vs %d)", ref->n_vocab, ours->n_vocab);
    if (ours->n_tokens < ref->n_tokens || ref->n_tokens < 1)
        return fl_err_set(err, -EINVAL, "prompt lengths differ (%d vs %d)", ref->n_tokens,
                          ours->n_tokens);
    for (int i = 0; i < ref->n_tokens; i++)
        if (ref->tokens[i] != ours->tokens[i])
            return fl_err_set(err, -EINVAL, "prompt ids differ at position %d (%d vs %d)", i,
                              ref->tokens[i], ours->tokens[i]);
    c->n_pos = ref->n_tokens;
    c->pos_max_abs = calloc((size_t)c->n_pos, sizeof(double));
    c->pos_kl = calloc((size_t)c->n_pos, sizeof(double));
    c->pos_top1 = calloc((size_t)c->n_pos, sizeof(int));
    if (!c->pos_max_abs || !c->pos_kl || !c->pos_top1) {
        flref_cmp_free(c);
        return fl_err_set(err, -ENOMEM, "out of memory");
    }
    compare_positions(ref, ours, c);
    c->n_gen = ref->n_gen < ours->n_gen ? ref->n_gen : ours->n_gen;
    while (c->gen_same < c->n_gen && ref->gen[c->gen_same] == ours->gen[c->gen_same])
        c->gen_same++;
    if (c->gen_same < c->n_gen)
        c->gen_near_tie = near_tie_at(ref, ours, c, c->gen_same, near_tie);
    c->gen_ok = c->gen_same == c->n_gen || c->gen_near_tie;
    return 0;
}

void flref_cmp_free(struct flref_cmp *c)
{
    free(c->pos_max_abs);
    free(c->pos_kl);
    free(c->pos_top1);
    memset(c, 0, sizeof(*c));
}

static bool same_set(const int32_t *a, const int32_t *b, int k)
{
    for (int i = 0; i < k; i++) {
        bool found = false;
        for (int j = 0; j < k && !found; j++)
            found = a[i] == b[j];
        if (!found)
            return false;
    }
    return true;
}

int flref_routing_diff(const struct flref_routing *ref, const struct flref_routing *ours,
                       int max_pos, flref_diff_fn fn, void *arg, struct fl_err *err)
{
    if (ref->k != ours->k || ref->n_layers != ours->n_layers)
        return fl_err_set(err, -EINVAL, "routing shapes differ (k %d/%d, layers %d/%d)", ref->k,
                          ours->k, ref->n_layers, ours->n_layers);
    for (int l = 0; l < ref->n_layers; l++)
        if (ref->layer_idx[l] != ours->layer_idx[l])
            return fl_err_set(err, -EINVAL, "MoE layer lists differ");
    int n_pos = ref->n_pos < ours->n_pos ? ref->n_pos : ours->n_pos;
    if (max_pos >= 0 && max_pos < n_pos)
        n_pos = max_pos;
    const int k = ref->k, nl = ref->n_layers;
    int n_diff = 0;
    for (int p = 0; p < n_pos; p++) {
        for (int l = 0; l < nl; l++) {
            const int32_t *a = ref->ids + ((int64_t)p * nl + l) * k;
            const int32_t *b = ours->ids + ((int64_t)p * nl + l) * k;
            if (!same_set(a, b, k)) {
                n_diff++;
                if (fn)
                    fn(arg, p, ref->layer_idx[l], a, b, k);
            }
        }
    }
    return n_diff;
}
