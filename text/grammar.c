/* grammar.c: reading an answer against a grammar program (grammar.h), as
 * llama.cpp's grammar sampler reads it: a reading is a stack of elements
 * still to match, its top always a character set or a token once expanded
 * (a rule's reference on top is replaced by each of its alternatives). */
#include <string.h>

#include "text/grammar-impl.h"

#define MAX_EXPAND 1024 /* references expanded in a row without reading */
#define MAX_WORK 1024   /* references expanded for one step (all its readings) */
#define SEEN 512        /* readings an expansion remembers having expanded */
#define SEEN_FROM 16    /* ... once it has done this many (most never do) */
#define SCRATCH (FL_GRAMMAR_MAX_CELLS + MAX_EXPAND + 1) /* a reading as it is expanded */

static bool seq_end(const struct fl_grammar *g, uint32_t i)
{
    return g->el[i].type == G_END || g->el[i].type == G_ALT;
}

static bool is_set(enum g_type t)
{
    return t == G_CHAR || t == G_CHAR_NOT || t == G_ANY;
}

static uint32_t stack_start(const struct fl_grammar_state *m, uint32_t i)
{
    return i ? m->end[i - 1] : 0;
}

static uint32_t used(const struct fl_grammar_state *m)
{
    return m->n ? m->end[m->n - 1] : 0;
}

/* FNV-1a over n cells, from h. */
static uint64_t hash_cells(uint64_t h, const uint16_t *c, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

/* Adds a reading to out unless it is there already or out is full. */
static void add(struct fl_grammar_state *out, const uint16_t *s, uint32_t len)
{
    for (uint32_t i = 0; i < out->n; i++) {
        const uint32_t a = stack_start(out, i);
        if (out->end[i] - a == len && !memcmp(out->cell + a, s, sizeof(*s) * len))
            return;
    }
    const uint32_t at = used(out);
    if (out->n == FL_GRAMMAR_MAX_STACKS || at + len > FL_GRAMMAR_MAX_CELLS)
        return; /* dropped: the grammar narrows (grammar.h) */
    memcpy(out->cell + at, s, sizeof(*s) * len);
    out->end[out->n++] = (uint16_t)(at + len);
}

/* One expansion: where readings go, the references it may still expand,
 * and the partial readings it has expanded already. A grammar such as
 * `x x x ...` with `x ::= |` has exponentially many ways to one reading;
 * each partial reading is expanded once (by a hash of it: a collision only
 * drops a reading), and past the budget the rest are dropped. */
struct grow {
    const struct fl_grammar *g;
    struct fl_grammar_state *out;
    uint32_t budget, work;
    bool seen_on;
    uint64_t seen[SEEN];
};

static void grow_init(struct grow *w, const struct fl_grammar *g, struct fl_grammar_state *out)
{
    w->g = g;
    w->out = out;
    w->budget = MAX_WORK;
    w->work = 0;
    w->seen_on = false;
}

/* Whether s[0, len) was expanded already in this expansion (it is marked
 * so now). */
static bool seen_before(struct grow *w, const uint16_t *s, uint32_t len)
{
    if (++w->work < SEEN_FROM)
        return false;
    if (!w->seen_on) {
        memset(w->seen, 0, sizeof(w->seen));
        w->seen_on = true;
    }
    const uint64_t h = hash_cells(1469598103934665603ull ^ len, s, len) | 1; /* 0: empty slot */
    for (uint32_t k = 0, at = (uint32_t)(h >> 40) % SEEN; k < SEEN; k++, at = (at + 1) % SEEN) {
        if (w->seen[at] == h)
            return true;
        if (!w->seen[at]) {
            w->seen[at] = h;
            return false;
        }
    }
    return false; /* full: the budget bounds the rest */
}

static void expand(struct grow *w, uint16_t *s, uint32_t len, uint32_t depth);

/* Each alternative of rule r pushed on s[0..len) in turn (s has room for
 * SCRATCH cells; s[len] is overwritten). */
static void expand_rule(struct grow *w, uint16_t *s, uint32_t len, uint32_t r, uint32_t depth)
{
    if (len + 1 > SCRATCH || depth > MAX_EXPAND || !w->budget)
        return; /* dropped */
    w->budget--;
    const struct fl_grammar *g = w->g;
    for (uint32_t alt = g->rule[r];; alt++) {
        if (seq_end(g, alt)) {
            expand(w, s, len, depth + 1);
        } else {
            s[len] = (uint16_t)alt;
            expand(w, s, len + 1, depth + 1);
        }
        while (!seq_end(g, alt))
            alt++;
        if (g->el[alt].type == G_END)
            return;
    }
}

/* The reading s[0..len) with every reference on top expanded, into w->out.
 * Works in place: what it writes at s[len - 1] and past it is put back
 * before it returns, so a caller's s[0..len) is as it was. */
static void expand(struct grow *w, uint16_t *s, uint32_t len, uint32_t depth)
{
    if (seen_before(w, s, len))
        return;
    if (!len || w->g->el[s[len - 1]].type != G_REF) {
        add(w->out, s, len);
        return;
    }
    const uint16_t top = s[len - 1];
    uint32_t n = len - 1;
    if (!seq_end(w->g, top + 1u)) /* where the reading goes on once the rule is read */
        s[n++] = (uint16_t)(top + 1u);
    expand_rule(w, s, n, w->g->el[top].value, depth);
    s[len - 1] = top;
}

/* s[0..len) with its top matched and replaced by what follows it. */
/* One step's expansions share w (its budget and what it has seen: two
 * readings that reach the same partial reading expand it once). */
static void advance(struct grow *w, const uint16_t *s, uint32_t len, uint32_t next)
{
    uint16_t scratch[SCRATCH];
    memcpy(scratch, s, sizeof(*s) * (len - 1));
    uint32_t n = len - 1;
    if (!seq_end(w->g, next))
        scratch[n++] = (uint16_t)next;
    expand(w, scratch, n, 0);
}

static void clear(struct fl_grammar_state *m)
{
    m->n = 0;
    m->partial = 0;
    m->remain = 0;
    m->length = 0;
}

void fl_grammar_init(const struct fl_grammar *g, struct fl_grammar_state *m)
{
    uint16_t scratch[SCRATCH];
    clear(m);
    struct grow w;
    grow_init(&w, g, m);
    expand_rule(&w, scratch, 0, g->root, 0);
}

void fl_grammar_copy(struct fl_grammar_state *dst, const struct fl_grammar_state *src)
{
    dst->partial = src->partial;
    dst->remain = src->remain;
    dst->length = src->length;
    dst->n = src->n;
    memcpy(dst->end, src->end, sizeof(*src->end) * src->n);
    memcpy(dst->cell, src->cell, sizeof(*src->cell) * used(src));
}

/* Whether the set at i holds a code point of [lo, hi] (*next: the element
 * after the set). A code point read whole is lo == hi. */
static bool set_meets(const struct fl_grammar *g, uint32_t i, uint32_t lo, uint32_t hi,
                      uint32_t *next)
{
    if (g->el[i].type == G_ANY) {
        *next = i + 1;
        return true;
    }
    const bool negated = g->el[i].type == G_CHAR_NOT;
    const uint32_t first = i;
    bool meets = false;
    do {
        const uint32_t a = g->el[i].value;
        const uint32_t b = g->el[i + 1].type == G_RNG_UPPER ? g->el[++i].value : a;
        meets = meets || (a <= hi && lo <= b);
        i++;
    } while (g->el[i].type == G_CHAR_ALT);
    *next = i;
    if (!negated)
        return meets;
    /* negated: a point of [lo, hi] that no member covers; each pass moves x
     * past one member, so as many passes as members settle it */
    uint32_t x = lo;
    for (uint32_t pass = first; pass < i && x <= hi; pass++)
        for (uint32_t k = first; k < i; k++) {
            const uint32_t a = g->el[k].value;
            const uint32_t b = g->el[k + 1].type == G_RNG_UPPER ? g->el[++k].value : a;
            if (a <= x && x <= b)
                x = b + 1;
        }
    return x <= hi;
}

/* A whole code point read by every reading whose set holds it. */
static bool take_code_point(const struct fl_grammar *g, const struct fl_grammar_state *in,
                            uint32_t cp, struct fl_grammar_state *out, uint64_t *work)
{
    clear(out);
    struct grow w; /* seen[] is cleared only when an expansion needs it */
    grow_init(&w, g, out);
    for (uint32_t i = 0; i < in->n; i++) {
        const uint32_t a = stack_start(in, i), len = in->end[i] - a;
        uint32_t next;
        if (len && is_set(g->el[in->cell[a + len - 1]].type) &&
            set_meets(g, in->cell[a + len - 1], cp, cp, &next))
            advance(&w, in->cell + a, len, next);
    }
    if (work)
        *work += w.work;
    return out->n > 0;
}

/* The code points a character begun with bits, remain continuation bytes
 * to come of length in all, can still be: UTF-8's, so no overlong form
 * (a code point written longer than it needs) and nothing past U+10FFFF.
 * false when there are none. */
static bool char_range(uint32_t bits, uint8_t remain, uint8_t length, uint32_t *lo, uint32_t *hi)
{
    static const uint32_t least[4] = { 0, 0x80, 0x800, 0x10000 };
    *lo = bits << (6 * remain);
    *hi = *lo | ((1u << (6 * remain)) - 1);
    if (*lo < least[length])
        *lo = least[length];
    if (*hi > 0x10FFFF)
        *hi = 0x10FFFF;
    return *lo <= *hi && !(*lo >= 0xD800 && *hi <= 0xDFFF); /* not all UTF-16 surrogates */
}

/* The readings whose set holds a code point the character begun can be. */
static bool keep_partial(const struct fl_grammar *g, const struct fl_grammar_state *in,
                         uint32_t bits, uint8_t remain, uint8_t length,
                         struct fl_grammar_state *out)
{
    uint32_t lo, hi;
    clear(out);
    if (!char_range(bits, remain, length, &lo, &hi))
        return false;
    for (uint32_t i = 0; i < in->n; i++) {
        const uint32_t a = stack_start(in, i), len = in->end[i] - a;
        uint32_t next;
        if (len && is_set(g->el[in->cell[a + len - 1]].type) &&
            set_meets(g, in->cell[a + len - 1], lo, hi, &next))
            add(out, in->cell + a, len);
    }
    out->partial = bits;
    out->remain = remain;
    out->length = length;
    return out->n > 0;
}

bool fl_grammar_step(const struct fl_grammar *g, const struct fl_grammar_state *in, uint8_t c,
                     struct fl_grammar_state *out)
{
    return fl_grammar_step_work(g, in, c, out, NULL);
}

bool fl_grammar_step_work(const struct fl_grammar *g, const struct fl_grammar_state *in, uint8_t c,
                          struct fl_grammar_state *out, uint64_t *work)
{
    if (work)
        *work += 1 + in->n; /* the readings looked at */
    if (!in->remain) {
        if (c < 0x80)
            return take_code_point(g, in, c, out, work);
        const int n = (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : 0;
        return n && keep_partial(g, in, c & (0x3Fu >> n), (uint8_t)n, (uint8_t)n, out);
    }
    if ((c & 0xC0) != 0x80)
        return false;
    const uint32_t bits = in->partial << 6 | (c & 0x3Fu);
    if (in->remain > 1)
        return keep_partial(g, in, bits, (uint8_t)(in->remain - 1), in->length, out);
    uint32_t lo, hi;
    return char_range(bits, 0, in->length, &lo, &hi) && (bits < 0xD800 || bits > 0xDFFF) &&
           take_code_point(g, in, bits, out, work);
}

bool fl_grammar_feed(const struct fl_grammar *g, struct fl_grammar_state *m, const char *bytes,
                     size_t n, struct fl_grammar_state *scratch)
{
    const struct fl_grammar_state *cur = m;
    for (size_t i = 0; i < n; i++) {
        struct fl_grammar_state *next = &scratch[i & 1];
        if (!fl_grammar_step(g, cur, (uint8_t)bytes[i], next))
            return false;
        cur = next;
    }
    if (cur != m)
        fl_grammar_copy(m, cur);
    return true;
}

bool fl_grammar_take_token(const struct fl_grammar *g, const struct fl_grammar_state *in,
                           int32_t id, struct fl_grammar_state *out)
{
    clear(out);
    struct grow w;
    grow_init(&w, g, out);
    for (uint32_t i = 0; !in->remain && i < in->n; i++) {
        const uint32_t a = stack_start(in, i), len = in->end[i] - a;
        const struct g_el *top = len ? &g->el[in->cell[a + len - 1]] : NULL;
        if (top && ((top->type == G_TOKEN && (int32_t)top->value == id) ||
                    (top->type == G_TOKEN_NOT && (int32_t)top->value != id)))
            advance(&w, in->cell + a, len, in->cell[a + len - 1] + 1u);
    }
    return out->n > 0;
}

void fl_grammar_tokens_next(const struct fl_grammar *g, const struct fl_grammar_state *m,
                            void (*allow)(void *ctx, int32_t id, bool except), void *ctx)
{
    for (uint32_t i = 0; !m->remain && i < m->n; i++) {
        const uint32_t a = stack_start(m, i), len = m->end[i] - a;
        const struct g_el *top = len ? &g->el[m->cell[a + len - 1]] : NULL;
        if (top && (top->type == G_TOKEN || top->type == G_TOKEN_NOT))
            allow(ctx, (int32_t)top->value, top->type == G_TOKEN_NOT);
    }
}

bool fl_grammar_merge(struct fl_grammar_state *dst, const struct fl_grammar_state *src)
{
    if (dst->remain || src->remain)
        return false;
    for (uint32_t i = 0; i < src->n; i++)
        add(dst, src->cell + stack_start(src, i), src->end[i] - stack_start(src, i));
    return true;
}

bool fl_grammar_same(const struct fl_grammar_state *a, const struct fl_grammar_state *b)
{
    return a->n == b->n && a->remain == b->remain && a->length == b->length &&
           a->partial == b->partial && !memcmp(a->end, b->end, sizeof(*a->end) * a->n) &&
           !memcmp(a->cell, b->cell, sizeof(*a->cell) * used(a));
}

uint64_t fl_grammar_hash(const struct fl_grammar_state *m)
{
    const uint64_t h = 1469598103934665603ull ^ ((uint64_t)m->partial << 16 |
                                                (uint64_t)m->remain << 8 | m->length);
    return hash_cells(hash_cells(h, m->end, m->n), m->cell, used(m));
}

bool fl_grammar_may_end(const struct fl_grammar_state *m)
{
    for (uint32_t i = 0; !m->remain && i < m->n; i++)
        if (m->end[i] == stack_start(m, i))
            return true;
    return false;
}

bool fl_grammar_done(const struct fl_grammar_state *m)
{
    return !m->remain && m->n == 1 && m->end[0] == 0;
}
