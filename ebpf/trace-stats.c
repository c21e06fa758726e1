/* trace-stats.c: the aggregate of a trace and its text tables.
 *
 * Counters and histograms live in one open-addressing hash per kind of
 * value, keyed like the BPF maps, so the live side can copy map entries in
 * as they are and a saved trace can be read back into the same shape. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/trace-stats.h"

struct tr_tab {
    size_t cap, n, vsize;
    unsigned char *used;
    struct fl_tr_key *keys;
    unsigned char *vals;
};

struct tr_stats {
    struct tr_tab counts, hists;
    uint64_t globals[FL_TG_N];
    struct tr_stall stalls[TR_TOP_STALLS];
    int n_stalls;
    struct tr_thread threads[TR_MAX_THREADS];
    int n_threads;
    struct tr_meta meta;
};

static uint64_t key_hash(const struct fl_tr_key *k)
{
    uint64_t h = (uint64_t)(uint32_t)k->layer * 0x9e3779b97f4a7c15ull;
    h ^= ((uint64_t)(uint32_t)k->expert << 16 | (uint64_t)k->kind << 8 | k->metric) *
         0xc2b2ae3d27d4eb4full;
    return h ^ (h >> 29);
}

static bool key_eq(const struct fl_tr_key *a, const struct fl_tr_key *b)
{
    return a->layer == b->layer && a->expert == b->expert && a->kind == b->kind &&
           a->metric == b->metric;
}

static int tab_init(struct tr_tab *t, size_t cap, size_t vsize)
{
    t->cap = cap;
    t->n = 0;
    t->vsize = vsize;
    t->used = calloc(cap, 1);
    t->keys = calloc(cap, sizeof(*t->keys));
    t->vals = calloc(cap, vsize);
    return t->used && t->keys && t->vals ? 0 : -ENOMEM;
}

static void tab_free(struct tr_tab *t)
{
    free(t->used);
    free(t->keys);
    free(t->vals);
    memset(t, 0, sizeof(*t));
}

static void *tab_get(struct tr_tab *t, const struct fl_tr_key *key);

/* Doubles the table, re-inserting every entry. */
static int tab_grow(struct tr_tab *t)
{
    struct tr_tab nt;
    if (tab_init(&nt, t->cap * 2, t->vsize) < 0) {
        tab_free(&nt);
        return -ENOMEM;
    }
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->used[i])
            continue;
        void *v = tab_get(&nt, &t->keys[i]);
        memcpy(v, t->vals + i * t->vsize, t->vsize);
    }
    tab_free(t);
    *t = nt;
    return 0;
}

/* The value for key, inserted zeroed when absent; NULL without memory. */
static void *tab_get(struct tr_tab *t, const struct fl_tr_key *key)
{
    if ((t->n + 1) * 4 > t->cap * 3 && tab_grow(t) < 0)
        return NULL;
    size_t i = key_hash(key) & (t->cap - 1);
    while (t->used[i] && !key_eq(&t->keys[i], key))
        i = (i + 1) & (t->cap - 1);
    if (!t->used[i]) {
        t->used[i] = 1;
        t->keys[i] = (struct fl_tr_key){ key->layer, key->expert, key->kind, key->metric, { 0 } };
        t->n++;
    }
    return t->vals + i * t->vsize;
}

static bool tab_next(const struct tr_tab *t, size_t *it, struct fl_tr_key *key, const void **v)
{
    while (*it < t->cap && !t->used[*it])
        (*it)++;
    if (*it >= t->cap)
        return false;
    *key = t->keys[*it];
    *v = t->vals + *it * t->vsize;
    (*it)++;
    return true;
}

struct tr_stats *tr_stats_new(void)
{
    struct tr_stats *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    if (tab_init(&s->counts, 256, sizeof(struct fl_tr_counts)) < 0 ||
        tab_init(&s->hists, 256, sizeof(struct fl_tr_hist)) < 0) {
        tr_stats_free(s);
        return NULL;
    }
    return s;
}

void tr_stats_free(struct tr_stats *s)
{
    if (!s)
        return;
    tab_free(&s->counts);
    tab_free(&s->hists);
    free(s);
}

static int tab_copy(struct tr_tab *dst, const struct tr_tab *src)
{
    struct tr_tab nt;
    if (tab_init(&nt, src->cap, src->vsize) < 0) {
        tab_free(&nt);
        return -ENOMEM;
    }
    memcpy(nt.used, src->used, src->cap);
    memcpy(nt.keys, src->keys, src->cap * sizeof(*src->keys));
    memcpy(nt.vals, src->vals, src->cap * src->vsize);
    nt.n = src->n;
    tab_free(dst);
    *dst = nt;
    return 0;
}

int tr_stats_copy(struct tr_stats *dst, const struct tr_stats *src)
{
    if (tab_copy(&dst->counts, &src->counts) < 0 || tab_copy(&dst->hists, &src->hists) < 0)
        return -ENOMEM;
    memcpy(dst->globals, src->globals, sizeof(src->globals));
    memcpy(dst->stalls, src->stalls, sizeof(src->stalls));
    dst->n_stalls = src->n_stalls;
    memcpy(dst->threads, src->threads, sizeof(src->threads));
    dst->n_threads = src->n_threads;
    dst->meta = src->meta;
    return 0;
}

struct fl_tr_counts *tr_stats_counts(struct tr_stats *s, int32_t layer, int32_t expert, uint8_t kind)
{
    struct fl_tr_key k = { layer, expert, kind, 0, { 0 } };
    return tab_get(&s->counts, &k);
}

struct fl_tr_hist *tr_stats_hist(struct tr_stats *s, const struct fl_tr_key *key)
{
    return tab_get(&s->hists, key);
}

uint64_t *tr_stats_globals(struct tr_stats *s) { return s->globals; }
struct tr_meta *tr_stats_meta(struct tr_stats *s) { return &s->meta; }

bool tr_stats_next_counts(const struct tr_stats *s, size_t *it, struct fl_tr_key *key,
                          const struct fl_tr_counts **c)
{
    return tab_next(&s->counts, it, key, (const void **)c);
}

bool tr_stats_next_hist(const struct tr_stats *s, size_t *it, struct fl_tr_key *key,
                        const struct fl_tr_hist **h)
{
    return tab_next(&s->hists, it, key, (const void **)h);
}

int tr_stats_n_stalls(const struct tr_stats *s, const struct tr_stall **v)
{
    *v = s->stalls;
    return s->n_stalls;
}

int tr_stats_n_threads(const struct tr_stats *s, const struct tr_thread **v)
{
    *v = s->threads;
    return s->n_threads;
}

/* Keeps the TR_TOP_STALLS longest, longest first (insertion into a short array). */
void tr_stats_add_stall(struct tr_stats *s, const struct tr_stall *st)
{
    int n = s->n_stalls, i = n;
    if (n == TR_TOP_STALLS && s->stalls[n - 1].dur_ns >= st->dur_ns)
        return;
    if (n < TR_TOP_STALLS)
        s->n_stalls++;
    else
        i = n - 1;
    while (i > 0 && s->stalls[i - 1].dur_ns < st->dur_ns) {
        s->stalls[i] = s->stalls[i - 1];
        i--;
    }
    s->stalls[i] = *st;
}

struct tr_thread *tr_stats_thread(struct tr_stats *s, uint32_t tid)
{
    for (int i = 0; i < s->n_threads; i++)
        if (s->threads[i].tid == tid)
            return &s->threads[i];
    if (s->n_threads == TR_MAX_THREADS)
        return NULL;
    struct tr_thread *t = &s->threads[s->n_threads++];
    memset(t, 0, sizeof(*t));
    t->tid = tid;
    return t;
}

/* stall_tid: the thread that waited (from a matching page fault), or 0. */
void tr_stats_event(struct tr_stats *s, const struct fl_tr_event *ev, uint32_t stall_tid)
{
    struct tr_thread *t = tr_stats_thread(s, ev->tid);
    if (t)
        t->events++;
    if (ev->type == FL_TR_PAGE_FAULT && t)
        t->page_faults++;
    if (ev->type != FL_TR_FAULT_END && ev->type != FL_TR_ACQUIRED)
        return;
    /* An acquire's probe fires on the thread that waited; a fault's end on
     * the pager's, so its waiter comes from the matching page fault. */
    bool acq = ev->type == FL_TR_ACQUIRED;
    uint32_t who = !acq && stall_tid ? stall_tid : ev->tid;
    struct tr_thread *w = tr_stats_thread(s, who);
    if (w)
        w->stall_ns += ev->dur_ns;
    struct tr_stall st = { ev->ts_ns - ev->dur_ns, ev->dur_ns, ev->offset, who,
                           ev->layer, ev->expert, ev->kind,
                           acq ? TR_STALL_ACQUIRE : TR_STALL_FAULT };
    tr_stats_add_stall(s, &st);
}

/* --- derived views ------------------------------------------------------------ */

void tr_hist_merge(struct fl_tr_hist *dst, const struct fl_tr_hist *src)
{
    for (int k = 0; k < FL_TR_SLOTS; k++)
        dst->slots[k] += src->slots[k];
    dst->count += src->count;
    dst->sum_ns += src->sum_ns;
}

uint64_t tr_hist_quantile(const struct fl_tr_hist *h, double q)
{
    uint64_t total = 0, seen = 0;
    for (int k = 0; k < FL_TR_SLOTS; k++)
        total += h->slots[k];
    if (!total)
        return 0;
    uint64_t want = (uint64_t)(q * (double)total + 0.999999);
    if (want == 0)
        want = 1;
    for (int k = 0; k < FL_TR_SLOTS; k++) {
        seen += h->slots[k];
        if (seen >= want)
            return 2ull << k;
    }
    return 2ull << (FL_TR_SLOTS - 1);
}

void tr_counts_add(struct fl_tr_counts *d, const struct fl_tr_counts *c)
{
    uint64_t *dv = (uint64_t *)d;
    const uint64_t *cv = (const uint64_t *)c;
    for (size_t i = 0; i < sizeof(*c) / sizeof(uint64_t); i++)
        dv[i] += cv[i];
}

static int unit_cmp(const void *a, const void *b)
{
    const struct tr_unit *x = a, *y = b;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return x->expert < y->expert ? -1 : x->expert > y->expert;
}

static struct tr_unit *unit_find(struct tr_unit *v, int n, int32_t layer, int32_t expert)
{
    for (int i = n - 1; i >= 0; i--)
        if (v[i].layer == layer && v[i].expert == expert)
            return &v[i];
    return NULL;
}

/* Units are few (layers x experts at most), so a linear find per entry is
 * kept simple; entries arrive clustered by unit. */
int tr_stats_units(const struct tr_stats *s, struct tr_unit **out)
{
    int n = 0, cap = 64;
    struct tr_unit *v = malloc(sizeof(*v) * (size_t)cap);
    size_t it = 0;
    struct fl_tr_key k;
    const void *val;
    for (int pass = 0; v && pass < 2; pass++) {
        const struct tr_tab *t = pass ? &s->hists : &s->counts;
        it = 0;
        while (tab_next(t, &it, &k, &val)) {
            if (pass && k.metric == FL_TM_URING)
                continue;
            struct tr_unit *u = unit_find(v, n, k.layer, k.expert);
            if (!u) {
                if (n == cap) {
                    struct tr_unit *nv = realloc(v, sizeof(*v) * (size_t)(cap *= 2));
                    if (!nv) {
                        free(v);
                        return -ENOMEM;
                    }
                    v = nv;
                }
                u = &v[n++];
                memset(u, 0, sizeof(*u));
                u->layer = k.layer;
                u->expert = k.expert;
            }
            if (!pass)
                tr_counts_add(&u->c, val);
            else
                tr_hist_merge(k.metric == FL_TM_STALL ? &u->stall
                              : k.metric == FL_TM_READ ? &u->read
                              : k.metric == FL_TM_ACQUIRE ? &u->acquire : &u->copy, val);
        }
    }
    if (!v)
        return -ENOMEM;
    qsort(v, (size_t)n, sizeof(*v), unit_cmp);
    *out = v;
    return n;
}

void tr_stats_metric_hist(const struct tr_stats *s, int metric, struct fl_tr_hist *out)
{
    memset(out, 0, sizeof(*out));
    size_t it = 0;
    struct fl_tr_key k;
    const struct fl_tr_hist *h;
    while (tr_stats_next_hist(s, &it, &k, &h))
        if (k.metric == metric)
            tr_hist_merge(out, h);
}

const char *tr_metric_name(int metric)
{
    static const char *n[] = { "stall", "read", "copy", "io_uring", "acquire" };
    return metric >= 0 && metric < FL_TM_N ? n[metric] : "?";
}

const char *tr_stall_src_name(int src)
{
    return src == TR_STALL_ACQUIRE ? "acquire" : "fault";
}

const char *tr_kind_name(int kind)
{
    static const char *n[] = { "other", "gate", "up", "down", "gate_up" };
    return kind >= 0 && kind < 5 ? n[kind] : "?";
}
