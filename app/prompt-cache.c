/* prompt-cache.c: held prompt prefixes (prompt-cache.h). A handful of
 * entries, searched whole: a few dozen prompts compared token by token is
 * nothing beside one forward pass. */
#include "app/prompt-cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/kv-cache.h"

struct pc_entry {
    int seq;          /* the held sequence id */
    int32_t *tokens;  /* [n]; NULL when the entry is free */
    int n;
    uint64_t used;    /* clock of the last match or keep */
    int from;         /* the running sequence that kept it last (its slot), -1: none */
};

struct eng_pcache {
    struct eng_session *s;
    struct pc_entry *e;
    int n_entries, unit;
    bool whole;       /* a recurrent model's entries: read whole or not at all */
    uint64_t clock;
    struct eng_pcache_stats st;
};

static int gcd(int a, int b)
{
    while (b) {
        const int t = a % b;
        a = b, b = t;
    }
    return a;
}

int eng_pcache_create(struct eng_session *s, struct eng_pcache **out, struct fl_err *err)
{
    struct eng_pcache *pc = calloc(1, sizeof(*pc));
    const int n = eng_session_n_held(s), first = eng_session_n_seq(s);
    if (!pc || (n > 0 && !(pc->e = calloc((size_t)n, sizeof(*pc->e))))) {
        free(pc);
        return fl_err_set(err, -ENOMEM, "out of memory for the prompt cache");
    }
    pc->s = s;
    pc->n_entries = n;
    pc->whole = eng_session_recurrent(s);
    const int b = eng_session_n_batch(s);
    pc->unit = b / gcd(b, ENG_KV_BLOCK) * ENG_KV_BLOCK;
    for (int i = 0; i < n; i++)
        pc->e[i].seq = first + i, pc->e[i].from = -1;
    *out = pc;
    return 0;
}

static void drop(struct eng_pcache *pc, struct pc_entry *e)
{
    eng_session_seq_free(pc->s, e->seq);
    free(e->tokens);
    e->tokens = NULL;
    pc->st.entries--;
    pc->st.tokens -= e->n;
    e->n = 0;
}

void eng_pcache_free(struct eng_pcache *pc)
{
    if (!pc)
        return;
    for (int i = 0; i < pc->n_entries; i++)
        if (pc->e[i].tokens)
            drop(pc, &pc->e[i]);
    free(pc->e);
    free(pc);
}

int eng_pcache_reusable(const struct eng_pcache *pc, int n_done)
{
    return n_done / pc->unit * pc->unit;
}

int eng_pcache_usable(const struct eng_pcache *pc, const int32_t *have, int n_have,
                      const int32_t *prompt, int n)
{
    const int most = n_have < n - 1 ? n_have : n - 1;
    int common = 0;
    while (common < most && have[common] == prompt[common])
        common++;
    if (pc->whole) /* the state at n_have, or nothing */
        return common == n_have ? eng_pcache_reusable(pc, common) : 0;
    return eng_pcache_reusable(pc, common);
}

bool eng_pcache_whole(const struct eng_pcache *pc)
{
    return pc->whole;
}

int eng_pcache_match(struct eng_pcache *pc, const int32_t *prompt, int n, int *seq)
{
    struct pc_entry *best = NULL;
    int best_n = 0;
    for (int i = 0; i < pc->n_entries; i++) {
        struct pc_entry *e = &pc->e[i];
        const int u = e->tokens ? eng_pcache_usable(pc, e->tokens, e->n, prompt, n) : 0;
        if (u > best_n)
            best = e, best_n = u;
    }
    *seq = best ? best->seq : -1;
    return best_n;
}

void eng_pcache_used(struct eng_pcache *pc, int seq)
{
    const int i = seq - (pc->n_entries ? pc->e[0].seq : 0);
    if (i >= 0 && i < pc->n_entries && pc->e[i].tokens)
        pc->e[i].used = ++pc->clock;
}

/* The least recently used entry; with freeing, only among those whose
 * dropping gives cells back (an entry a running request reads frees none). */
static struct pc_entry *lru(struct eng_pcache *pc, bool freeing)
{
    struct pc_entry *v = NULL;
    for (int i = 0; i < pc->n_entries; i++) {
        struct pc_entry *e = &pc->e[i];
        if (e->tokens && (!v || e->used < v->used) &&
            (!freeing || eng_session_seq_owned(pc->s, e->seq) > 0))
            v = e;
    }
    return v;
}

bool eng_pcache_evict(struct eng_pcache *pc)
{
    struct pc_entry *v = lru(pc, true);
    if (v) {
        drop(pc, v);
        pc->st.evicted++;
    }
    return v != NULL;
}

int eng_pcache_owned(const struct eng_pcache *pc)
{
    int n = 0;
    for (int i = 0; i < pc->n_entries; i++)
        n += pc->e[i].tokens ? eng_session_seq_owned(pc->s, pc->e[i].seq) : 0;
    return n;
}

/* Whether e's tokens start tokens[0 .. n-1] (e is then redundant) or the
 * other way round (the new prefix is). */
static bool starts(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na <= nb && !memcmp(a, b, sizeof(int32_t) * (size_t)na);
}

static void held(struct eng_pcache *pc, struct pc_entry *e, int from, const int32_t *tokens,
                 int n);

/* An empty entry to fill: the first free one, else the least recently used
 * dropped (n_entries > 0). */
static struct pc_entry *take_entry(struct eng_pcache *pc)
{
    for (int i = 0; i < pc->n_entries; i++)
        if (!pc->e[i].tokens)
            return &pc->e[i];
    struct pc_entry *v = lru(pc, false);
    drop(pc, v);
    pc->st.evicted++;
    return v;
}

void eng_pcache_keep(struct eng_pcache *pc, int seq, const int32_t *tokens, int n)
{
    if (n <= 0 || pc->n_entries == 0)
        return;
    for (int i = 0; i < pc->n_entries; i++) {
        struct pc_entry *e = &pc->e[i];
        if (e->tokens && starts(tokens, n, e->tokens, e->n) && (!pc->whole || e->n == n)) {
            e->used = ++pc->clock; /* held already */
            e->from = seq;
            return;
        }
    }
    struct pc_entry *slot = take_entry(pc);
    struct fl_err err;
    if (!(slot->tokens = malloc(sizeof(int32_t) * (size_t)n)))
        return;
    if (eng_session_seq_share(pc->s, slot->seq, seq, n, &err)) {
        free(slot->tokens); /* cannot happen with whole units of a running sequence */
        slot->tokens = NULL;
        return;
    }
    held(pc, slot, seq, tokens, n);
}

/* Entry e (its cells filled) holds tokens[0, n) for the sequence `from`;
 * entries that hold a shorter start of them go (e's cells hold theirs). */
static void held(struct eng_pcache *pc, struct pc_entry *e, int from, const int32_t *tokens,
                 int n)
{
    memcpy(e->tokens, tokens, sizeof(int32_t) * (size_t)n);
    e->n = n;
    e->used = ++pc->clock;
    e->from = from;
    pc->st.entries++;
    pc->st.tokens += n;
    for (int i = 0; i < pc->n_entries && !pc->whole; i++) {
        struct pc_entry *o = &pc->e[i];
        if (o != e && o->tokens && starts(o->tokens, o->n, tokens, n))
            drop(pc, o);
    }
}

/* --- slots ---------------------------------------------------------------------------- */

static struct pc_entry *newest_from(const struct eng_pcache *pc, int from)
{
    struct pc_entry *v = NULL;
    for (int i = 0; i < pc->n_entries; i++) {
        struct pc_entry *e = &pc->e[i];
        if (e->tokens && e->from == from && (!v || e->used > v->used))
            v = e;
    }
    return v;
}

int eng_pcache_of(const struct eng_pcache *pc, int from, int *seq, const int32_t **tokens)
{
    const struct pc_entry *e = newest_from(pc, from);
    *seq = e ? e->seq : -1;
    *tokens = e ? e->tokens : NULL;
    return e ? e->n : 0;
}

int eng_pcache_forget(struct eng_pcache *pc, int from)
{
    int n = 0;
    for (struct pc_entry *e; (e = newest_from(pc, from));) {
        n += e->n;
        drop(pc, e);
    }
    return n;
}

int eng_pcache_put(struct eng_pcache *pc, int from, const int32_t *tokens, int n,
                   eng_pcache_fill_fn fill, void *arg, struct fl_err *err)
{
    if (pc->n_entries == 0)
        return fl_err_set(err, -ENOTSUP, "the prompt cache is off (--no-cache-prompt)");
    if (n <= 0 || eng_pcache_reusable(pc, n) != n)
        return fl_err_set(err, -EINVAL, "%d positions are not whole units of %d (-b)", n,
                          pc->unit);
    struct pc_entry *slot = take_entry(pc);
    /* room for its cells: held prefixes go, least recently used first */
    while (eng_session_seq_lacks(pc->s, slot->seq, n) > 0 && eng_pcache_evict(pc))
        ;
    if (!(slot->tokens = malloc(sizeof(int32_t) * (size_t)n)))
        return fl_err_set(err, -ENOMEM, "out of memory");
    int rc = fill(arg, slot->seq, err);
    if (rc) {
        free(slot->tokens);
        slot->tokens = NULL;
        eng_session_seq_free(pc->s, slot->seq);
        return rc;
    }
    held(pc, slot, from, tokens, n);
    return 0;
}

void eng_pcache_get_stats(const struct eng_pcache *pc, struct eng_pcache_stats *out)
{
    *out = pc->st;
}
