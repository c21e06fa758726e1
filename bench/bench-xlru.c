/* bench-xlru.c: the expert caches' policies replayed on routing traces,
 * beside Belady's MIN on the same requests (not a test).
 *
 * Hits and misses follow from a cache's bookkeeping and the order of its
 * acquires alone, so they are measured here, on the CPU, from FLRT files
 * that `faultline eval --routing-out` wrote. A step is one token of each
 * sequence: with -s N the traces are taken N at a time and stepped together
 * as the engine's batch steps them (per step, per layer, the union of the
 * sequences' chosen experts, acquired once, in ascending id with the
 * resident ones first: model/moe-route.c). Replayed:
 *   - the VRAM cache (backend/cuda/expert-lru.h): LRU, lfu-decay at
 *     half-lives of 8, 32 and 128 tokens, and lfu-next (its default); a
 *     layer's slots held together;
 *   - the RAM cache (pager/sim.h, the pager's own policy code): lru,
 *     lfu-decay, lfu-step, and pinned-hot with the profile of the -t traces
 *     (every token's choices counted, as --calibrate does), counting a use
 *     per acquire; lfu-step again and lfu-next counting a use per token
 *     that chose the expert, as the engine tells the pager
 *     (pager_acquire_uses);
 *   - the popularity reference (pager/belady.h): the trace's own most
 *     requested experts held from the start, what knowing each expert's
 *     popularity but not the order of requests gives;
 *   - Belady's MIN (pager/belady.h) with the same capacity: slots =
 *     experts of one size, so the RAM budget is slots x expert bytes.
 * Hit % = 100 * (1 - reads / acquires), every replay from an empty cache
 * (pinned-hot's warm-start reads count); the mean over the replays (each
 * trace alone, or each group of N).
 *   bench-xlru [-s N] [-t TUNE.flrt]... [-p PCT]... [-c SLOTS]... [-g] TRACE.flrt...
 * -p: cache sizes in % of all experts (default 15 25 50); -c: in experts;
 * -g: the lfu-step grid (half-life x window x clock) for tuning, RAM cache
 * only. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/expert-lru.h"
#include "pager/belady.h"
#include "pager/sim.h"
#include "record/flref.h"

#define MAX_FILES 256
#define MAX_SIZES 16

/* One replay's requests: groups (a layer of a step) of ascending experts. */
struct stream {
    int n_layers, n_expert, k;
    size_t n_groups, n_req;
    int32_t *layer;   /* [n_groups] */
    size_t *start;    /* [n_groups + 1] into expert */
    int32_t *expert;  /* [n_req] */
    int32_t *uses;    /* [n_req]: how many of the sequences chose it */
};

struct opts {
    int seqs, n_tune, n_meas, n_pct, n_slots, grid;
    const char *tune[MAX_FILES], *meas[MAX_FILES];
    double pct[MAX_SIZES];
    int slots[MAX_SIZES];
};

static void stream_free(struct stream *s)
{
    free(s->layer);
    free(s->start);
    free(s->expert);
    free(s->uses);
}

/* The union of r[0..n)'s choices at (step t, layer l), ascending, into out;
 * returns its size. A trace shorter than t is done and adds nothing. */
static int step_union(const struct flref_routing *r, int n, int t, int l, int n_expert,
                      int32_t *seen, int32_t *out, int32_t *uses)
{
    memset(seen, 0, (size_t)n_expert * sizeof(*seen));
    for (int s = 0; s < n; s++) {
        if (t >= r[s].n_pos)
            continue;
        const int32_t *ids = r[s].ids + ((size_t)t * r[s].n_layers + l) * r[s].k;
        for (int j = 0; j < r[s].k; j++)
            if (ids[j] >= 0 && ids[j] < n_expert)
                seen[ids[j]]++;
    }
    int m = 0;
    for (int e = 0; e < n_expert; e++)
        if (seen[e]) {
            uses[m] = seen[e];
            out[m++] = e;
        }
    return m;
}

static int stream_build(const struct flref_routing *r, int n, int n_expert, struct stream *s)
{
    int steps = 0;
    for (int i = 0; i < n; i++)
        steps = r[i].n_pos > steps ? r[i].n_pos : steps;
    *s = (struct stream){ .n_layers = r[0].n_layers, .n_expert = n_expert, .k = r[0].k };
    const size_t ng = (size_t)steps * (size_t)s->n_layers;
    s->layer = malloc(ng * sizeof(int32_t));
    s->start = malloc((ng + 1) * sizeof(size_t));
    s->expert = malloc(ng * (size_t)n_expert * sizeof(int32_t));
    s->uses = malloc(ng * (size_t)n_expert * sizeof(int32_t));
    int32_t *seen = malloc((size_t)n_expert * sizeof(int32_t));
    if (!s->layer || !s->start || !s->expert || !s->uses || !seen) {
        free(seen);
        return -ENOMEM;
    }
    s->start[0] = 0;
    for (int t = 0; t < steps; t++)
        for (int l = 0; l < s->n_layers; l++) {
            const int m = step_union(r, n, t, l, n_expert, seen, s->expert + s->n_req,
                                     s->uses + s->n_req);
            s->layer[s->n_groups] = l;
            s->n_req += (size_t)m;
            s->start[++s->n_groups] = s->n_req;
        }
    free(seen);
    return 0;
}

/* VRAM cache hit rate (half_life_tokens 0: LRU, < 0: lfu-next, each
 * acquire counting the tokens that chose the expert, as gpu-moe.c passes
 * them): per group, hits then misses held (hold_layer's order), then all
 * released. */
static double replay_vram(const struct stream *s, int n_slots, double half_life_tokens)
{
    struct fl_xlru *c;
    if (fl_xlru_create(n_slots, s->n_layers, s->n_expert, &c))
        return NAN;
    if ((half_life_tokens > 0 && fl_xlru_set_lfu(c, half_life_tokens * s->n_layers * s->k)) ||
        (half_life_tokens < 0 && fl_xlru_set_lfu_next(c, s->k))) {
        fl_xlru_destroy(c);
        return NAN;
    }
    int *held = malloc((size_t)s->n_expert * sizeof(int));
    for (size_t g = 0; held && g < s->n_groups; g++) {
        const int32_t *e = s->expert + s->start[g];
        const int m = (int)(s->start[g + 1] - s->start[g]), l = s->layer[g];
        int n = 0;
        for (int hit = 1; hit >= 0; hit--)
            for (int j = 0; j < m; j++) {
                struct fl_xlru_res res;
                if ((fl_xlru_lookup(c, l, e[j]) >= 0) == hit &&
                    fl_xlru_acquire_uses(c, l, e[j], (uint32_t)s->uses[s->start[g] + (size_t)j],
                                         &res) == 0)
                    held[n++] = res.slot;
            }
        for (int j = 0; j < n; j++)
            fl_xlru_release(c, held[j]);
    }
    free(held);
    const struct fl_xlru_stats st = fl_xlru_stats(c);
    fl_xlru_destroy(c);
    return s->n_req && held ? (double)st.hits / (double)s->n_req : NAN;
}

/* RAM cache hit rate through the pager's policy code; by_tokens: a use
 * per token that chose the expert, not per acquire. */
static double replay_ram(const struct stream *s, struct pager_sim_config cfg, int n_slots,
                         bool by_tokens)
{
    struct pager_sim *ps;
    cfg.n_layers = s->n_layers;
    cfg.n_expert = s->n_expert;
    cfg.n_used = s->k;
    cfg.unit_bytes = 1; /* every expert one size: the budget in experts */
    cfg.budget = (uint64_t)n_slots;
    if (pager_sim_create(&cfg, &ps))
        return NAN;
    for (size_t g = 0; g < s->n_groups; g++)
        pager_sim_layer_uses(ps, s->layer[g], s->expert + s->start[g],
                             by_tokens ? s->uses + s->start[g] : NULL,
                             (int)(s->start[g + 1] - s->start[g]));
    const struct pager_sim_stats st = pager_sim_stats(ps);
    pager_sim_destroy(ps);
    return st.acquires ? 1.0 - (double)st.loads / (double)st.acquires : NAN;
}

/* MIN, or with popularity the popularity reference (pager/belady.h). */
static double replay_reference(const struct stream *s, int n_slots, bool popularity)
{
    int32_t *keys = malloc((s->n_req + 1) * sizeof(int32_t));
    int32_t *group = malloc((s->n_req + 1) * sizeof(int32_t));
    int64_t loads = -ENOMEM;
    if (keys && group) {
        for (size_t g = 0; g < s->n_groups; g++)
            for (size_t i = s->start[g]; i < s->start[g + 1]; i++) {
                keys[i] = s->layer[g] * s->n_expert + s->expert[i];
                group[i] = (int32_t)g;
            }
        loads = (popularity ? fl_static_top_loads : fl_belady_loads)(
            keys, group, s->n_req, s->n_layers * s->n_expert, n_slots);
    }
    free(keys);
    free(group);
    return loads >= 0 && s->n_req ? 1.0 - (double)loads / (double)s->n_req : NAN;
}

enum col_kind { COL_VRAM, COL_RAM, COL_STATIC, COL_MIN };

struct col {
    const char *name;
    enum col_kind kind;
    double half_life;        /* tokens; VRAM 0: LRU, < 0: lfu-next; RAM 0: the policy's own */
    enum pager_cache cache;  /* RAM */
    double window;           /* RAM lfu-step; < 0: its own */
    int clock;               /* RAM: pager_sim_config's */
    bool by_tokens;          /* RAM: a use per token that chose it */
};

static const struct col cols[] = {
    { "VRAM LRU", COL_VRAM, 0, 0, -1, 0, false },
    { "VRAM lfu-decay 8", COL_VRAM, 8, 0, -1, 0, false },
    { "VRAM lfu-decay 32", COL_VRAM, 32, 0, -1, 0, false },
    { "VRAM lfu-decay 128", COL_VRAM, 128, 0, -1, 0, false },
    { "VRAM lfu-next", COL_VRAM, -1, 0, -1, 0, true },
    { "RAM lru", COL_RAM, 0, PAGER_CACHE_LRU, -1, 0, false },
    { "RAM lfu-decay", COL_RAM, 0, PAGER_CACHE_LFU_DECAY, -1, 0, false },
    { "RAM pinned-hot", COL_RAM, 0, PAGER_CACHE_PINNED_HOT, -1, 0, false },
    { "RAM lfu-step", COL_RAM, 0, PAGER_CACHE_LFU_STEP, -1, 0, false },
    { "RAM lfu-step by tokens", COL_RAM, 0, PAGER_CACHE_LFU_STEP, -1, 0, true },
    { "RAM lfu-next", COL_RAM, 0, PAGER_CACHE_LFU_NEXT, -1, 0, true },
    { "popularity reference", COL_STATIC, 0, 0, -1, 0, false },
    { "Belady MIN", COL_MIN, 0, 0, -1, 0, false },
};
#define N_COLS (sizeof(cols) / sizeof(cols[0]))

struct profile {
    struct pager_hot_unit *hot;
    int n;
};

static double replay(const struct stream *s, const struct col *c, int slots,
                     const struct profile *pf)
{
    if (c->kind == COL_VRAM)
        return replay_vram(s, slots, c->half_life);
    if (c->kind == COL_MIN || c->kind == COL_STATIC)
        return replay_reference(s, slots, c->kind == COL_STATIC);
    if (c->cache == PAGER_CACHE_PINNED_HOT && !pf->n)
        return NAN; /* no -t traces: no profile */
    struct pager_sim_config cfg = { .cache = c->cache, .half_life_tokens = c->half_life,
                                    .window_frac = c->window, .clock = c->clock,
                                    .hot = pf->hot, .n_hot = pf->n };
    return replay_ram(s, cfg, slots, c->by_tokens);
}

/* pinned-hot's profile: every token's choice in the tuning traces. */
static int make_profile(const struct flref_routing *r, int n, int n_expert, struct profile *pf)
{
    const int nl = n ? r[0].n_layers : 0;
    pf->n = nl * n_expert;
    pf->hot = calloc((size_t)pf->n + 1, sizeof(*pf->hot));
    if (!pf->hot)
        return -ENOMEM;
    for (int i = 0; i < pf->n; i++)
        pf->hot[i] = (struct pager_hot_unit){ i / n_expert, i % n_expert, 0 };
    for (int t = 0; t < n; t++)
        for (size_t i = 0; i < (size_t)r[t].n_pos * r[t].n_layers * r[t].k; i++) {
            const int l = (int)(i / (size_t)r[t].k % (size_t)r[t].n_layers), e = r[t].ids[i];
            if (l < nl && e >= 0 && e < n_expert)
                pf->hot[l * n_expert + e].count++;
        }
    return 0;
}

static int sizes(const struct opts *o, int keys, int k, int *out)
{
    int n = 0;
    for (int i = 0; i < o->n_pct; i++)
        out[n++] = (int)(o->pct[i] / 100.0 * keys);
    for (int i = 0; i < o->n_slots; i++)
        out[n++] = o->slots[i];
    for (int i = 0; i < n; i++)
        out[i] = out[i] < k ? k : out[i];
    return n;
}

static void print_table(const struct stream *st, int n_st, const struct opts *o,
                        const struct profile *pf)
{
    const int keys = st[0].n_layers * st[0].n_expert;
    int sz[2 * MAX_SIZES];
    const int n_sz = sizes(o, keys, st[0].k, sz);
    printf("| cache | slots |");
    for (size_t c = 0; c < N_COLS; c++)
        printf(" %s |", cols[c].name);
    printf("\n|---:|---:|");
    for (size_t c = 0; c < N_COLS; c++)
        printf("---:|");
    printf("\n");
    for (int i = 0; i < n_sz; i++) {
        printf("| %5.1f %% | %5d |", 100.0 * sz[i] / keys, sz[i]);
        for (size_t c = 0; c < N_COLS; c++) {
            double sum = 0;
            int ok = 0;
            for (int s = 0; s < n_st; s++) {
                const double h = replay(&st[s], &cols[c], sz[i], pf);
                sum += isnan(h) ? 0 : h;
                ok += !isnan(h);
            }
            if (ok == n_st)
                printf(" %5.1f |", 100.0 * sum / n_st);
            else
                printf(" - |");
        }
        printf("\n");
    }
}

/* -g: lfu-step over half-life x window x clock (window 0 with the acquire
 * clock is lfu-decay with that half-life), RAM cache, to choose its
 * constants on tuning traces. */
static void print_grid(const struct stream *st, int n_st, const struct opts *o)
{
    static const double hl[] = { 8, 16, 32, 64, 128, 256, 1e9 };
    static const double win[] = { 0, 0.05, 0.1, 0.2 };
    const int keys = st[0].n_layers * st[0].n_expert;
    int sz[2 * MAX_SIZES];
    const int n_sz = sizes(o, keys, st[0].k, sz);
    for (int i = 0; i < n_sz; i++) {
        printf("\nlfu-step, RAM, %.1f %% (%d experts): rows half-life (tokens), columns window "
               "and clock\n| half-life |", 100.0 * sz[i] / keys, sz[i]);
        for (int c = 2; c >= 1; c--)
            for (size_t w = 0; w < sizeof(win) / sizeof(win[0]); w++)
                printf(" %.2f %s |", win[w], c == 1 ? "steps" : "acquires");
        printf("\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (size_t h = 0; h < sizeof(hl) / sizeof(hl[0]); h++) {
            printf("| %9.0f |", hl[h]);
            for (int c = 2; c >= 1; c--)
                for (size_t w = 0; w < sizeof(win) / sizeof(win[0]); w++) {
                    const struct col cl = { "", COL_RAM, hl[h], PAGER_CACHE_LFU_STEP, win[w], c, false };
                    double sum = 0;
                    for (int s = 0; s < n_st; s++)
                        sum += replay(&st[s], &cl, sz[i], &(struct profile){ 0 });
                    printf(" %5.1f |", 100.0 * sum / n_st);
                }
            printf("\n");
        }
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: bench-xlru [-s SEQS] [-t TUNE.flrt]... [-p PCT]... [-c SLOTS]... "
                    "[-g] TRACE.flrt...\n");
    return 2;
}

static int parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){ .seqs = 1 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-g")) {
            o->grid = 1;
            continue;
        }
        if (a[0] != '-') {
            if (o->n_meas == MAX_FILES)
                return -1;
            o->meas[o->n_meas++] = a;
            continue;
        }
        if (!v)
            return -1;
        i++;
        if (!strcmp(a, "-s") && (o->seqs = atoi(v)) >= 1)
            continue;
        if (!strcmp(a, "-t") && o->n_tune < MAX_FILES)
            o->tune[o->n_tune++] = v;
        else if (!strcmp(a, "-p") && o->n_pct < MAX_SIZES && atof(v) > 0)
            o->pct[o->n_pct++] = atof(v);
        else if (!strcmp(a, "-c") && o->n_slots < MAX_SIZES && atoi(v) > 0)
            o->slots[o->n_slots++] = atoi(v);
        else
            return -1;
    }
    if (!o->n_pct && !o->n_slots) {
        static const double def[] = { 15, 25, 50 };
        for (o->n_pct = 0; o->n_pct < 3; o->n_pct++)
            o->pct[o->n_pct] = def[o->n_pct];
    }
    return o->n_meas >= o->seqs ? 0 : -1;
}

/* Reads files[0..n) into r; they must agree on layers and k. */
static int read_all(const char *const *files, int n, struct flref_routing *r, int *n_expert)
{
    struct fl_err err;
    for (int i = 0; i < n; i++) {
        if (flref_routing_read(files[i], &r[i], &err)) {
            fprintf(stderr, "bench-xlru: %s\n", err.msg);
            return -1;
        }
        if (r[i].n_layers != r[0].n_layers || r[i].k != r[0].k || r[i].k < 1) {
            fprintf(stderr, "bench-xlru: %s: another model's trace\n", files[i]);
            return -1;
        }
        for (size_t j = 0; j < (size_t)r[i].n_pos * r[i].n_layers * r[i].k; j++)
            *n_expert = r[i].ids[j] + 1 > *n_expert ? r[i].ids[j] + 1 : *n_expert;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o;
    if (parse(argc, argv, &o))
        return usage();
    static struct flref_routing tr[MAX_FILES], mr[MAX_FILES];
    static struct stream st[MAX_FILES];
    int n_expert = 0, rc = 1;
    struct profile pf = { 0 };
    const int n_st = o.n_meas / o.seqs; /* leftovers that make no full group are unused */
    if (read_all(o.meas, o.n_meas, mr, &n_expert) || read_all(o.tune, o.n_tune, tr, &n_expert))
        goto out;
    if (o.n_tune && (tr[0].n_layers != mr[0].n_layers || tr[0].k != mr[0].k)) {
        fprintf(stderr, "bench-xlru: tuning and measured traces of different models\n");
        goto out;
    }
    if (o.n_tune && make_profile(tr, o.n_tune, n_expert, &pf))
        goto out;
    for (int s = 0; s < n_st; s++)
        if (stream_build(mr + s * o.seqs, o.seqs, n_expert, &st[s]))
            goto out;
    size_t req = 0, groups = 0;
    for (int s = 0; s < n_st; s++)
        req += st[s].n_req, groups += st[s].n_groups;
    printf("%d trace(s), %d MoE layers, top-%d of %d experts (%d keys); %d sequence(s) stepped "
           "together, %d replay(s), %.1f acquires per layer step; pinned-hot profile: %d "
           "tuning trace(s)\n", o.n_meas, mr[0].n_layers, mr[0].k, n_expert,
           mr[0].n_layers * n_expert, o.seqs, n_st,
           (double)req / (double)groups, o.n_tune);
    if (o.grid)
        print_grid(st, n_st, &o);
    else
        print_table(st, n_st, &o, &pf);
    rc = 0;
out:
    for (int s = 0; s < n_st; s++)
        stream_free(&st[s]);
    for (int i = 0; i < o.n_meas; i++)
        flref_routing_free(&mr[i]);
    for (int i = 0; i < o.n_tune; i++)
        flref_routing_free(&tr[i]);
    free(pf.hot);
    return rc;
}
