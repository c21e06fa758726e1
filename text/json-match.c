/* json-match.c: reading an answer against a compiled schema, one byte at a
 * time (json-schema.h): a pushdown automaton per reading, the schema's node
 * in each open frame. */
#include <stddef.h>
#include <string.h>

#include "text/json-schema-impl.h"

/* What an open frame is, and what its fields hold:
 *   K_VALUE  a value of node is due (whitespace first is fine)
 *   K_OBJ    phase: P_*; count: the next declared property it may hold;
 *            cur: the node of the value after the key just read
 *   K_KEY    a key of object node: mask: the declared names it may still
 *            be; pos: bytes read (the opening quote too); phase: 1 while it
 *            may be an additional (free) key; esc: its escape state; cur:
 *            its UTF-8 state
 *   K_ARR    phase: P_*; count: items begun
 *   K_STR    esc: escape state; count: characters; pos: UTF-8 state
 *   K_NUM    phase: N_*; count: digits of the current part
 *   K_LIT    mask: the texts it may still be (phase 0: node's enum values,
 *            1: true / false / null); pos: bytes read */
enum { K_VALUE, K_OBJ, K_KEY, K_ARR, K_STR, K_NUM, K_LIT };
enum { P_OPEN, P_COLON, P_AFTER, P_NEXT };
enum { N_START, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };
/* escape state in strings and keys (esc): bits 0-7 0 plain, 1 after '\', 2..5
 * the \u's hex digits; bits 8-23 the digits read; E_DUE: a \u high surrogate
 * was read, its low half must follow at once */
enum { E_PLAIN = 0, E_ESCAPE = 1, E_HEX = 2, E_HEX_LAST = 5 };
#define E_DUE (1u << 24)

#define MAX_DIGITS SCH_MAX_DIGITS /* per part of a number, as llama.cpp's grammar */
#define MAX_SPLIT 64  /* branches tried per reading and byte (anyOf in anyOf …): beyond, dropped */

static const char *const words[3] = { "true", "false", "null" };

enum { DEAD, ALIVE, SPLIT, REFEED };

static bool is_ws(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_digit(uint8_t c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(uint8_t c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static void copy_alt(struct fl_schema_alt *dst, const struct fl_schema_alt *src)
{
    memcpy(dst, src, offsetof(struct fl_schema_alt, f) + src->depth * sizeof(src->f[0]));
}

static int push(struct fl_schema_alt *a, uint8_t kind, uint16_t node)
{
    if (a->depth == FL_SCHEMA_MAX_DEPTH)
        return DEAD;
    a->f[a->depth++] = (struct fl_schema_frame){ .kind = kind, .node = node };
    return ALIVE;
}

/* Whitespace between tokens, as llama.cpp's JSON grammars allow it: none,
 * one space, or one or two newlines and up to FL_SCHEMA_MAX_INDENT spaces
 * and tabs. a->ws: 0 none yet, 1 after the space, 2 and 3 after one and two
 * newlines, 3 + k after k spaces or tabs. */
static int ws(struct fl_schema_alt *a, uint8_t c)
{
    if (a->ws == 0 && (c == ' ' || c == '\n'))
        a->ws = c == ' ' ? 1 : 2;
    else if (a->ws == 2 && c == '\n')
        a->ws = 3;
    else if (a->ws >= 2 && (c == ' ' || c == '\t') && a->ws < 3 + FL_SCHEMA_MAX_INDENT)
        a->ws = a->ws < 3 ? 4 : a->ws + 1;
    else
        return DEAD;
    return ALIVE;
}

/* The first byte of a value of a node without alternatives. */
static int begin_value(const struct sch_node *n, struct fl_schema_frame *t, uint8_t c)
{
    if (n->n_lit) {
        *t = (struct fl_schema_frame){ .kind = K_LIT, .node = t->node,
                                       .mask = n->n_lit == 64 ? ~0ull : (1ull << n->n_lit) - 1 };
        return REFEED;
    }
    const uint8_t ty = n->types;
    const uint16_t node = t->node;
    if (c == '{' && (ty & SCH_OBJ))
        *t = (struct fl_schema_frame){ .kind = K_OBJ, .node = node, .phase = P_OPEN };
    else if (c == '[' && (ty & SCH_ARR))
        *t = (struct fl_schema_frame){ .kind = K_ARR, .node = node, .phase = P_OPEN };
    else if (c == '"' && (ty & SCH_STR))
        *t = (struct fl_schema_frame){ .kind = K_STR, .node = node };
    else if ((c == '-' || is_digit(c)) && (ty & (SCH_INT | SCH_NUM)))
        *t = (struct fl_schema_frame){ .kind = K_NUM, .node = node, .phase = N_START };
    else if (((c == 't' || c == 'f') && (ty & SCH_BOOL)) || (c == 'n' && (ty & SCH_NULL)))
        *t = (struct fl_schema_frame){ .kind = K_LIT, .node = node, .phase = 1,
                                       .mask = ((ty & SCH_BOOL) ? 3u : 0u) |
                                               ((ty & SCH_NULL) ? 4u : 0u) };
    else
        return DEAD;
    return t->kind == K_NUM || t->kind == K_LIT ? REFEED : ALIVE;
}

static const char *lit_text(const struct fl_schema *s, const struct fl_schema_frame *t, int k,
                            size_t *len)
{
    const char *x = t->phase ? words[k] : s->lits[s->nodes[t->node].lit + k].text;
    *len = t->phase ? strlen(x) : s->lits[s->nodes[t->node].lit + k].len;
    return x;
}

static int literal_byte(const struct fl_schema *s, struct fl_schema_alt *a,
                        struct fl_schema_frame *t, uint8_t c)
{
    uint64_t next = 0, complete = 0;
    for (uint64_t m = t->mask; m; m &= m - 1) {
        const int k = __builtin_ctzll(m);
        size_t len;
        const char *x = lit_text(s, t, k, &len);
        if (t->pos < len && (uint8_t)x[t->pos] == c)
            next |= 1ull << k;
        complete |= (uint64_t)(t->pos == len) << k;
    }
    if (!next) { /* the text may have ended before this byte (a number) */
        if (!complete)
            return DEAD;
        a->depth--;
        return REFEED;
    }
    t->mask = next;
    t->pos++;
    bool all_done = true;
    for (uint64_t m = next; m && all_done; m &= m - 1) {
        size_t len;
        lit_text(s, t, __builtin_ctzll(m), &len);
        all_done = len == t->pos;
    }
    if (all_done)
        a->depth--;
    return ALIVE;
}

/* A number may end here: a whole number, and within an integer's bounds
 * (cur). */
static bool number_accepts(const struct fl_schema_frame *t)
{
    const uint8_t p = t->phase;
    return t->cur && (p == N_ZERO || p == N_INT || p == N_FRAC || p == N_EXP);
}

static bool bounded(const struct sch_node *n)
{
    return n->min_int != INT64_MIN || n->max_int != INT64_MAX;
}

/* Whether an integer in node n's bounds starts with the text so far: a
 * sign (neg) and d digits of magnitude m (d = 0: the sign alone). The
 * values it can still become are m followed by k more digits, up to
 * SCH_MAX_DIGITS in all ("0" takes none). */
static bool integer_reachable(const struct sch_node *n, bool neg, int64_t m, unsigned d)
{
    if (d == 0) /* "-": any negative integer of up to 16 digits */
        return n->min_int <= -1 && n->max_int > -10000000000000000;
    int64_t scale = 1;
    for (unsigned k = 0; d + k <= SCH_MAX_DIGITS && (k == 0 || m); k++, scale *= 10) {
        const int64_t lo = m * scale, hi = m * scale + scale - 1;
        const int64_t a = neg ? -hi : lo, b = neg ? -lo : hi;
        if (a <= n->max_int && b >= n->min_int)
            return true;
    }
    return false;
}

/* After a byte of an integer with bounds: refused when no value in them
 * starts so; cur says whether the text is one now. */
static int integer_check(const struct sch_node *n, struct fl_schema_frame *t)
{
    const bool neg = t->pos;
    const unsigned d = t->phase == N_MINUS ? 0 : t->count;
    const int64_t m = (int64_t)t->mask, v = neg ? -m : m;
    if (!integer_reachable(n, neg, m, d))
        return DEAD;
    t->cur = d && v >= n->min_int && v <= n->max_int;
    return ALIVE;
}

/* The number's next state on c, or 0xff (N_START is never a next state). */
static uint8_t number_next(const struct sch_node *n, struct fl_schema_frame *t, uint8_t c)
{
    const bool real = n->types & SCH_NUM;
    const bool digit = is_digit(c), e = real && (c == 'e' || c == 'E');
    switch (t->phase) {
    case N_START:
    case N_MINUS:
        if (c == '-' && t->phase == N_START)
            return N_MINUS;
        return c == '0' ? N_ZERO : digit ? N_INT : 0xff;
    case N_INT:
    case N_ZERO:
        if (digit && t->phase == N_INT)
            return t->count < MAX_DIGITS ? N_INT : 0xff;
        return real && c == '.' ? N_DOT : e ? N_E : 0xff;
    case N_DOT:
        return digit ? N_FRAC : 0xff;
    case N_FRAC:
        return digit ? (t->count < MAX_DIGITS ? N_FRAC : 0xff) : e ? N_E : 0xff;
    case N_E:
        return c == '+' || c == '-' ? N_ESIGN : digit ? N_EXP : 0xff;
    case N_ESIGN:
        return digit ? N_EXP : 0xff;
    default: /* N_EXP */
        return digit && t->count < MAX_DIGITS ? N_EXP : 0xff;
    }
}

static int number_byte(const struct sch_node *n, struct fl_schema_alt *a,
                       struct fl_schema_frame *t, uint8_t c)
{
    const uint8_t next = number_next(n, t, c);
    if (next == 0xff) {
        if (!number_accepts(t))
            return DEAD;
        a->depth--; /* the byte after a number is read by what holds it */
        return REFEED;
    }
    t->count = next == t->phase ? t->count + 1 : is_digit(c);
    t->phase = next;
    if (next == N_MINUS)
        t->pos = 1; /* negative */
    if (next == N_ZERO || next == N_INT) /* the integer part's magnitude */
        t->mask = t->mask * 10 + (uint64_t)(c - '0');
    if (bounded(n))
        return integer_check(n, t);
    t->cur = 1;
    return ALIVE;
}

static unsigned hex_value(uint8_t c)
{
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* A byte after '\' or of a \u escape (*e: esc). false: not JSON, or a
 * \u escape the answer's readers refuse (jansson among them): \u0000, a
 * lone surrogate half. A high half's low half must follow at once, and the
 * pair is one character; each digit is checked as soon as it can fail. */
static bool escape_byte(uint32_t *e, uint8_t c)
{
    const uint32_t phase = *e & 0xff, due = *e & E_DUE;
    if (phase == E_ESCAPE) {
        *e = c == 'u' ? due | E_HEX : E_PLAIN;
        return c == 'u' || (!due && c && strchr("\"\\/bfnrt", c));
    }
    if (!is_hex(c))
        return false;
    const unsigned at = phase - E_HEX, v = ((*e >> 8) & 0xfff) << 4 | hex_value(c);
    if ((at == 0 && due && v != 0xd) || (at == 1 && (v >= 0xdc && v <= 0xdf) != (due != 0)))
        return false;
    if (at < 3) {
        *e = due | v << 8 | (phase + 1);
        return true;
    }
    *e = v >= 0xd800 && v <= 0xdbff ? E_DUE : E_PLAIN;
    return v != 0;
}

/* A byte of a string's text outside escapes, against UTF-8 (RFC 3629: no
 * overlong forms, surrogates or code points past U+10FFFF), so that the
 * answer needs no repair that would change its length. *u: the
 * continuation bytes still due (bits 0-1) and the range the next one must
 * be in (bits 2-4: 80-BF, A0-BF after E0, 80-9F after ED, 90-BF after F0,
 * 80-8F after F4). */
static bool utf8_byte(uint16_t *u, uint8_t c)
{
    static const uint8_t lo[5] = { 0x80, 0xa0, 0x80, 0x90, 0x80 };
    static const uint8_t hi[5] = { 0xbf, 0xbf, 0x9f, 0xbf, 0x8f };
    const unsigned due = *u & 3, range = *u >> 2;
    if (due) {
        *u = (uint16_t)(due - 1);
        return range < 5 && c >= lo[range] && c <= hi[range];
    }
    if (c < 0x80)
        return true;
    if (c >= 0xc2 && c <= 0xdf)
        *u = 1;
    else if (c >= 0xe0 && c <= 0xef)
        *u = (uint16_t)(2 | (c == 0xe0 ? 1 : c == 0xed ? 2 : 0) << 2);
    else if (c >= 0xf0 && c <= 0xf4)
        *u = (uint16_t)(3 | (c == 0xf0 ? 3 : c == 0xf4 ? 4 : 0) << 2);
    else
        return false;
    return true;
}

static int string_byte(const struct sch_node *n, struct fl_schema_alt *a,
                       struct fl_schema_frame *t, uint8_t c)
{
    if (t->esc & 0xff)
        return escape_byte(&t->esc, c) ? ALIVE : DEAD;
    const bool due = t->esc & E_DUE; /* the low half of a pair: no character of its own */
    const bool starts = !(t->pos & 3) && !due; /* a character starts */
    if (c < 0x20 || (due && c != '\\') || !utf8_byte(&t->pos, c))
        return DEAD;
    if (c == '"') {
        if (t->count < n->min_len)
            return DEAD;
        a->depth--;
        return ALIVE;
    }
    if (starts) {
        if (t->count >= n->max_len)
            return DEAD;
        t->count += t->count < UINT32_MAX;
    }
    if (c == '\\')
        t->esc = (t->esc & E_DUE) | E_ESCAPE;
    return ALIVE;
}

/* Declared properties a key of object frame t may name: [*lo, *hi] (empty
 * when *lo > *hi); whether an additional one may come instead. */
static bool key_range(const struct sch_node *n, const struct fl_schema_frame *t, int *lo, int *hi)
{
    *lo = (int)t->count;
    *hi = t->count < n->n_req ? (int)t->count : (int)n->n_prop - 1;
    return n->addl != SCH_NONE && t->count >= n->n_req;
}

static uint64_t bits(int lo, int hi)
{
    uint64_t m = 0;
    for (int k = lo; k <= hi; k++)
        m |= 1ull << k;
    return m;
}

/* '"' after '{' or ',': a key begins. */
static int open_key(const struct sch_node *n, struct fl_schema_alt *a, struct fl_schema_frame *t)
{
    int lo, hi;
    const bool free_key = key_range(n, t, &lo, &hi);
    /* a free key is matched against every declared name: one of them in it
     * is that property (or out of its place), never an additional one */
    const uint64_t mask = free_key ? bits(0, (int)n->n_prop - 1) : bits(lo, hi);
    if (!free_key && !mask)
        return DEAD;
    if (push(a, K_KEY, t->node) == DEAD)
        return DEAD;
    a->f[a->depth - 1].mask = mask;
    a->f[a->depth - 1].pos = 1;
    a->f[a->depth - 1].phase = free_key;
    return ALIVE;
}

static int key_byte(const struct fl_schema *s, struct fl_schema_alt *a,
                    struct fl_schema_frame *t, uint8_t c)
{
    const struct sch_node *n = &s->nodes[t->node];
    uint64_t next = 0, complete = 0;
    for (uint64_t m = t->mask; m; m &= m - 1) {
        const int k = __builtin_ctzll(m);
        const struct sch_prop *p = &s->props[n->prop + k];
        if (t->pos < p->len && (uint8_t)p->key[t->pos] == c) {
            next |= 1ull << k;
            complete |= (uint64_t)(t->pos + 1 == p->len) << k;
        }
    }
    bool free_key = t->phase, closing = false;
    if (free_key && (t->esc & 0xff))
        free_key = escape_byte(&t->esc, c);
    else if (free_key && (c < 0x20 || (c == '\\' && n->n_prop) || !utf8_byte(&t->cur, c) ||
                          ((t->esc & E_DUE) && c != '\\')))
        free_key = false; /* no escapes beside declared names: "\u0061" could be "a" */
    else if (free_key && c == '\\')
        t->esc = (t->esc & E_DUE) | E_ESCAPE;
    else
        closing = free_key && c == '"';
    struct fl_schema_frame *obj = &a->f[a->depth - 2];
    if (complete || closing) {
        int lo, hi;
        key_range(n, obj, &lo, &hi);
        const int k = complete ? __builtin_ctzll(complete) : -1;
        if (k >= 0 && (k < lo || k > hi))
            return DEAD; /* a declared name out of its place, or again */
        obj->cur = k >= 0 ? s->props[n->prop + k].node : n->addl;
        obj->count = k >= 0 ? (uint32_t)k + 1 : obj->count;
        obj->phase = P_COLON;
        a->depth--;
        return ALIVE;
    }
    if (!next && !free_key)
        return DEAD;
    t->mask = next;
    t->phase = free_key;
    t->pos += t->pos < UINT16_MAX;
    return ALIVE;
}

static int object_byte(const struct sch_node *n, struct fl_schema_alt *a,
                       struct fl_schema_frame *t, uint8_t c)
{
    if (is_ws(c))
        return ws(a, c);
    const bool more = t->count < n->n_prop || n->addl != SCH_NONE;
    switch (t->phase) {
    case P_COLON:
        t->phase = P_AFTER;
        return c == ':' ? push(a, K_VALUE, t->cur) : DEAD;
    case P_AFTER:
        if (c == ',' && more) {
            t->phase = P_NEXT;
            return ALIVE;
        }
        break;
    default: /* P_OPEN, P_NEXT: a key (or, after '{', the end) */
        if (c == '"')
            return open_key(n, a, t);
        if (t->phase == P_NEXT)
            return DEAD;
        break;
    }
    if (c != '}' || t->count < n->n_req)
        return DEAD;
    a->depth--;
    return ALIVE;
}

static int array_byte(const struct sch_node *n, struct fl_schema_alt *a,
                      struct fl_schema_frame *t, uint8_t c)
{
    if (is_ws(c))
        return ws(a, c);
    if (t->phase == P_AFTER && c == ',') {
        t->phase = P_NEXT;
        return t->count < n->max_items ? ALIVE : DEAD;
    }
    if (c == ']' && t->phase != P_NEXT) {
        if (t->count < n->min_items)
            return DEAD;
        a->depth--;
        return ALIVE;
    }
    if (t->phase == P_AFTER || (t->phase == P_OPEN && !n->max_items))
        return DEAD;
    t->count++;
    t->phase = P_AFTER;
    return push(a, K_VALUE, n->items) == ALIVE ? REFEED : DEAD;
}

static void run(const struct fl_schema *s, const struct fl_schema_alt *in, uint8_t c,
                struct fl_schema_state *out, int *budget);

/* A value of a node with alternatives: each reads the byte. */
static int split(const struct fl_schema *s, const struct fl_schema_alt *a, uint8_t c,
                 struct fl_schema_state *out, int *budget)
{
    struct fl_schema_alt orig, tmp;
    copy_alt(&orig, a); /* a is out's next slot, which the branches write */
    const struct sch_node *n = &s->nodes[orig.f[orig.depth - 1].node];
    for (uint32_t i = 0; i < n->n_alt && out->n < FL_SCHEMA_MAX_ALTS && *budget > 0; i++) {
        --*budget;
        copy_alt(&tmp, &orig);
        tmp.f[tmp.depth - 1].node = s->alts[n->alt + i];
        run(s, &tmp, c, out, budget);
    }
    return SPLIT;
}

/* Reads c in reading a (which is out's next slot). */
static int advance(const struct fl_schema *s, struct fl_schema_alt *a, uint8_t c,
                   struct fl_schema_state *out, int *budget)
{
    if (!is_ws(c))
        a->ws = 0;
    for (;;) { /* REFEED: a frame ended or changed before the byte was read */
        if (!a->depth)
            return is_ws(c) ? ws(a, c) : DEAD;
        struct fl_schema_frame *t = &a->f[a->depth - 1];
        const struct sch_node *n = &s->nodes[t->node];
        int r;
        switch (t->kind) {
        case K_VALUE:
            if (is_ws(c))
                return a->started ? ws(a, c) : DEAD;
            if (n->n_alt)
                return split(s, a, c, out, budget);
            a->started = true;
            r = begin_value(n, t, c);
            break;
        case K_OBJ:
            r = object_byte(n, a, t, c);
            break;
        case K_KEY:
            r = key_byte(s, a, t, c);
            break;
        case K_ARR:
            r = array_byte(n, a, t, c);
            break;
        case K_STR:
            r = string_byte(n, a, t, c);
            break;
        case K_NUM:
            r = number_byte(n, a, t, c);
            break;
        default:
            r = literal_byte(s, a, t, c);
            break;
        }
        if (r != REFEED)
            return r;
    }
}

static void run(const struct fl_schema *s, const struct fl_schema_alt *in, uint8_t c,
                struct fl_schema_state *out, int *budget)
{
    if (out->n >= FL_SCHEMA_MAX_ALTS)
        return;
    struct fl_schema_alt *a = &out->alt[out->n];
    copy_alt(a, in);
    if (advance(s, a, c, out, budget) == ALIVE)
        out->n++;
}

bool fl_schema_step(const struct fl_schema *s, const struct fl_schema_state *in, uint8_t c,
                    struct fl_schema_state *out)
{
    out->n = 0;
    for (int i = 0; i < in->n; i++) {
        int budget = MAX_SPLIT;
        run(s, &in->alt[i], c, out, &budget);
    }
    return out->n > 0;
}

static void copy_state(struct fl_schema_state *dst, const struct fl_schema_state *src)
{
    dst->n = src->n;
    for (int i = 0; i < src->n; i++)
        copy_alt(&dst->alt[i], &src->alt[i]);
}

/* The empty answer to a value of node. */
static void init_at(uint16_t node, struct fl_schema_state *m)
{
    memset(m, 0, sizeof(*m));
    m->n = 1;
    m->alt[0].depth = 1;
    m->alt[0].f[0] = (struct fl_schema_frame){ .kind = K_VALUE, .node = node };
}

void fl_schema_init(const struct fl_schema *s, struct fl_schema_state *m)
{
    init_at(s->root, m);
}

bool sch_accepts(const struct fl_schema *s, uint16_t node, const char *text, size_t n)
{
    struct fl_schema_state m;
    init_at(node, &m);
    return fl_schema_feed(s, &m, text, n) && (fl_schema_done(&m) || fl_schema_may_end(&m));
}

bool fl_schema_feed(const struct fl_schema *s, struct fl_schema_state *m, const char *bytes,
                    size_t n)
{
    struct fl_schema_state buf[2];
    const struct fl_schema_state *cur = m;
    for (size_t i = 0; i < n; i++) {
        struct fl_schema_state *next = &buf[i & 1];
        if (!fl_schema_step(s, cur, (uint8_t)bytes[i], next))
            return false;
        cur = next;
    }
    if (cur != m)
        copy_state(m, cur);
    return true;
}

bool fl_schema_done(const struct fl_schema_state *m)
{
    for (int i = 0; i < m->n; i++)
        if (m->alt[i].depth)
            return false;
    return m->n > 0;
}

bool fl_schema_may_end(const struct fl_schema_state *m)
{
    for (int i = 0; i < m->n; i++) {
        const struct fl_schema_alt *a = &m->alt[i];
        const struct fl_schema_frame *t = &a->f[0];
        if (!a->depth || (a->depth == 1 && t->kind == K_NUM && number_accepts(t)))
            return true;
    }
    return false;
}

bool fl_schema_in_free_string(const struct fl_schema *s, const struct fl_schema_state *m)
{
    for (int i = 0; i < m->n; i++) {
        const struct fl_schema_alt *a = &m->alt[i];
        const struct fl_schema_frame *t = &a->f[a->depth ? a->depth - 1 : 0];
        const bool str = t->kind == K_STR && !t->esc && !t->pos &&
                         s->nodes[t->node].max_len == UINT32_MAX;
        const bool key = t->kind == K_KEY && t->phase && !t->esc && !t->mask &&
                         !t->cur;
        if (!a->depth || !(str || key))
            return false;
    }
    return m->n > 0;
}

bool fl_schema_same(const struct fl_schema_state *a, const struct fl_schema_state *b)
{
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++) {
        const struct fl_schema_alt *x = &a->alt[i], *y = &b->alt[i];
        if (x->depth != y->depth || x->ws != y->ws || x->started != y->started)
            return false;
        for (int d = 0; d < x->depth; d++) {
            const struct fl_schema_frame *p = &x->f[d], *q = &y->f[d];
            if (p->mask != q->mask || p->count != q->count || p->esc != q->esc ||
                p->node != q->node ||
                p->pos != q->pos || p->cur != q->cur || p->kind != q->kind ||
                p->phase != q->phase)
                return false;
        }
    }
    return true;
}
