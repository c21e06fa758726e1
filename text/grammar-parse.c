/* grammar-parse.c: GBNF text into a grammar program (grammar.h says the
 * syntax; grammar-impl.h the program). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "text/grammar-impl.h"
#include "text/tokenizer.h"

#define MAX_NESTING 64 /* groups inside groups */

struct rule_buf {
    struct g_el *p;
    uint32_t n, cap;
    bool defined;
};

struct symbol {
    const char *name; /* in the text; NULL for a rule the reader made */
    uint32_t len, origin; /* origin: the named rule it was made for */
};

struct reader {
    const char *text; /* NUL-terminated copy */
    const struct fl_tokenizer *tok;
    struct rule_buf *rules;
    struct symbol *sym;
    uint32_t n_rules, cap_rules, n_el, nesting;
    uint32_t *by_name, name_cap; /* named rules' ids + 1 by a hash of the name (0: empty) */
    uint32_t n_named;
    struct fl_err *err;
    int rc;
};

/* Records the first error, placed at pos; NULL so callers return it. */
static const char *fail(struct reader *r, const char *pos, const char *what)
{
    if (r->rc)
        return NULL;
    if (!pos) {
        r->rc = fl_err_set(r->err, -ENOMEM, "grammar: out of memory");
        return NULL;
    }
    int line = 1, col = 1;
    for (const char *c = r->text; c < pos; c++)
        if (*c == '\n')
            line++, col = 1;
        else
            col++;
    r->rc = fl_err_set(r->err, -EINVAL, "grammar: line %d, column %d: %s", line, col, what);
    return NULL;
}

static bool push(struct reader *r, struct rule_buf *b, enum g_type t, uint32_t v)
{
    if (r->n_el >= FL_GRAMMAR_MAX_ELEMENTS) {
        r->rc = fl_err_set(r->err, -EINVAL, "grammar: more than %d elements once repetitions are "
                           "written out", FL_GRAMMAR_MAX_ELEMENTS);
        return false;
    }
    if (b->n == b->cap) {
        const uint32_t cap = b->cap ? 2 * b->cap : 16;
        struct g_el *p = realloc(b->p, sizeof(*p) * cap);
        if (!p)
            return fail(r, NULL, ""), false;
        b->p = p, b->cap = cap;
    }
    b->p[b->n++] = (struct g_el){ .type = t, .value = v };
    r->n_el++;
    return true;
}

/* A new rule id: named (found or added) when name is given, else made. */
static uint32_t name_hash(const char *name, uint32_t len)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)name[i]) * 16777619u;
    return h;
}

/* The slot of name in the index: its rule's, or the empty one it would
 * take. */
static uint32_t *name_slot(struct reader *r, const char *name, uint32_t len)
{
    for (uint32_t at = name_hash(name, len) & (r->name_cap - 1);; at = (at + 1) & (r->name_cap - 1)) {
        const uint32_t id = r->by_name[at];
        if (!id || (r->sym[id - 1].len == len && !memcmp(r->sym[id - 1].name, name, len)))
            return &r->by_name[at];
    }
}

/* Room for one more name in the index (kept at most half full). */
static bool index_room(struct reader *r)
{
    if (2 * (r->n_named + 1) <= r->name_cap)
        return true;
    const uint32_t cap = r->name_cap ? 2 * r->name_cap : 64;
    uint32_t *old = r->by_name, old_cap = r->name_cap;
    if (!(r->by_name = calloc(cap, sizeof(uint32_t)))) {
        r->by_name = old;
        return false;
    }
    r->name_cap = cap;
    for (uint32_t k = 0; k < old_cap; k++)
        if (old[k])
            *name_slot(r, r->sym[old[k] - 1].name, r->sym[old[k] - 1].len) = old[k];
    free(old);
    return true;
}

static int64_t symbol(struct reader *r, const char *name, uint32_t len, uint32_t origin)
{
    if (name && !index_room(r))
        return fail(r, NULL, ""), -1;
    uint32_t *slot = name ? name_slot(r, name, len) : NULL;
    if (slot && *slot)
        return *slot - 1;
    if (r->n_rules == r->cap_rules) {
        const uint32_t cap = r->cap_rules ? 2 * r->cap_rules : 32;
        struct rule_buf *rb = realloc(r->rules, sizeof(*rb) * cap);
        if (rb)
            r->rules = rb;
        struct symbol *s = rb ? realloc(r->sym, sizeof(*s) * cap) : NULL;
        if (!s)
            return fail(r, NULL, ""), -1;
        r->sym = s, r->cap_rules = cap;
    }
    const uint32_t id = r->n_rules++;
    r->rules[id] = (struct rule_buf){ 0 };
    r->sym[id] = (struct symbol){ name, len, name ? id : origin };
    if (slot) {
        *slot = id + 1;
        r->n_named++;
    }
    return id;
}

static bool word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

static const char *space(const char *p, bool newline_ok)
{
    while (*p == ' ' || *p == '\t' || *p == '#' || (newline_ok && (*p == '\r' || *p == '\n')))
        if (*p == '#')
            while (*p && *p != '\r' && *p != '\n')
                p++;
        else
            p++;
    return p;
}

static const char *hex(struct reader *r, const char *p, int digits, uint32_t *cp)
{
    uint32_t v = 0;
    for (int i = 0; i < digits; i++, p++) {
        const char c = *p;
        const int d = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
        if (d < 0)
            return fail(r, p, "expecting a hex digit");
        v = v << 4 | (uint32_t)d;
    }
    if (v > 0x10FFFF)
        return fail(r, p, "a code point past U+10FFFF");
    *cp = v;
    return p;
}

/* One character of a literal or a set: an escape or one UTF-8 character. */
static const char *character(struct reader *r, const char *p, uint32_t *cp)
{
    if (*p == '\\') {
        switch (p[1]) {
        case 'x': return hex(r, p + 2, 2, cp);
        case 'u': return hex(r, p + 2, 4, cp);
        case 'U': return hex(r, p + 2, 8, cp);
        case 't': *cp = '\t'; return p + 2;
        case 'r': *cp = '\r'; return p + 2;
        case 'n': *cp = '\n'; return p + 2;
        case '\\': case '"': case '[': case ']': *cp = (uint8_t)p[1]; return p + 2;
        default: return fail(r, p, "unknown escape");
        }
    }
    const uint8_t c = (uint8_t)*p;
    const int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2
                : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (!c)
        return fail(r, p, "unexpected end of the grammar");
    if (n < 0)
        return fail(r, p, "invalid UTF-8");
    uint32_t v = n ? c & (0x3Fu >> n) : c;
    for (int i = 1; i <= n; i++) {
        if (((uint8_t)p[i] & 0xC0) != 0x80)
            return fail(r, p, "invalid UTF-8");
        v = v << 6 | ((uint8_t)p[i] & 0x3F);
    }
    *cp = v;
    return p + n + 1;
}

static const char *integer(struct reader *r, const char *p, uint64_t *v)
{
    if (*p < '0' || *p > '9')
        return fail(r, p, "expecting an integer");
    for (*v = 0; *p >= '0' && *p <= '9'; p++)
        if ((*v = *v * 10 + (uint64_t)(*p - '0')) > 1000000000)
            return fail(r, p, "an integer too large");
    return p;
}

/* <[id]> or <text>: one token of the vocabulary (*id). */
static const char *token(struct reader *r, const char *p, uint32_t *id)
{
    const char *start = p;
    if (!r->tok)
        return fail(r, p, "a token needs a model's vocabulary");
    if (*p != '<')
        return fail(r, p, "expecting '<'");
    int64_t v = -1;
    if (p[1] == '[') {
        uint64_t u;
        if (!(p = integer(r, p + 2, &u)))
            return NULL;
        if (p[0] != ']' || p[1] != '>')
            return fail(r, p, "expecting ']>'");
        v = (int64_t)u;
        p += 2;
    } else {
        while (*p && *p != '>')
            p++;
        if (*p++ != '>')
            return fail(r, start, "expecting '>' to close the token");
        int32_t one[2];
        const int n = fl_tokenize(r->tok, start, (size_t)(p - start), false, true, one, 2);
        v = n == 1 ? one[0] : -1;
        if (n != 1)
            return fail(r, start, "not one token of the model's vocabulary");
    }
    if (v >= fl_n_vocab(r->tok))
        return fail(r, start, "a token id outside the vocabulary");
    *id = (uint32_t)v;
    return p;
}

static const char *alternates(struct reader *r, const char *p, uint32_t rule, bool nested);

/* S{min,max} (max UINT64_MAX: no bound) on the symbol b->p[from..]: S min
 * times, then rules S' ::= S S' | (unbounded) or the max - min nested
 * optional copies, as llama.cpp rewrites them. */
static bool repeat(struct reader *r, struct rule_buf *b, uint32_t from, uint64_t min,
                   uint64_t max, uint32_t origin)
{
    const bool unbounded = max == UINT64_MAX;
    const uint32_t len = b->n - from;
    struct g_el *sym = malloc(sizeof(*sym) * (len ? len : 1));
    if (!sym)
        return fail(r, NULL, ""), false;
    memcpy(sym, b->p + from, sizeof(*sym) * len);
    if (!min) {
        r->n_el -= len;
        b->n = from;
    }
    bool ok = true;
    for (uint64_t i = 1; ok && i < min; i++)
        for (uint32_t k = 0; ok && k < len; k++)
            ok = push(r, b, sym[k].type, sym[k].value);
    const uint64_t n_opt = unbounded ? 1 : max - min;
    int64_t last = -1;
    for (uint64_t i = 0; ok && i < n_opt; i++) {
        const int64_t id = symbol(r, NULL, 0, origin);
        ok = id >= 0;
        for (uint32_t k = 0; ok && k < len; k++)
            ok = push(r, &r->rules[id], sym[k].type, sym[k].value);
        if (ok && (i > 0 || unbounded))
            ok = push(r, &r->rules[id], G_REF, (uint32_t)(unbounded ? id : last));
        ok = ok && push(r, &r->rules[id], G_ALT, 0) && push(r, &r->rules[id], G_END, 0);
        if (ok)
            r->rules[id].defined = true;
        last = id;
    }
    if (ok && n_opt)
        ok = push(r, b, G_REF, (uint32_t)last);
    free(sym);
    return ok;
}

/* {m}, {m,}, {m,n} or {,n} after '{'. */
static const char *braces(struct reader *r, const char *p, bool nested, uint64_t *min,
                          uint64_t *max)
{
    *min = 0, *max = UINT64_MAX;
    p = space(p, nested);
    if (*p != ',' && !(p = integer(r, p, min)))
        return NULL;
    p = space(p, nested);
    if (*p == '}')
        *max = *min;
    else if (*p == ',') {
        p = space(p + 1, nested);
        if (*p != '}' && !(p = integer(r, p, max)))
            return NULL;
        p = space(p, nested);
    }
    if (*p != '}')
        return fail(r, p, "expecting '}'");
    if (*min > FL_GRAMMAR_MAX_REPEAT || (*max != UINT64_MAX && *max > FL_GRAMMAR_MAX_REPEAT))
        return fail(r, p, "a repetition count over 2000");
    if (*max < *min)
        return fail(r, p, "a repetition's maximum below its minimum");
    return space(p + 1, nested);
}

/* A set's members after '[' (and '^'). */
static const char *set(struct reader *r, const char *p, struct rule_buf *b, enum g_type first)
{
    const uint32_t start = b->n;
    while (*p != ']') {
        uint32_t lo, hi;
        if (!*p)
            return fail(r, p, "unexpected end of the grammar in a set");
        if (!(p = character(r, p, &lo)) ||
            !push(r, b, b->n > start ? G_CHAR_ALT : first, lo))
            return NULL;
        if (p[0] == '-' && p[1] != ']') {
            if (!(p = character(r, p + 1, &hi)) || !push(r, b, G_RNG_UPPER, hi))
                return NULL;
        }
    }
    if (b->n == start) /* [] matches nothing; [^] anything */
        return first == G_CHAR_NOT ? (push(r, b, G_ANY, 0) ? p + 1 : NULL)
                                   : fail(r, p, "an empty set matches nothing");
    return p + 1;
}

/* One symbol at p into b (its elements start at *from). */
static const char *symbol_at(struct reader *r, const char *p, uint32_t rule, struct rule_buf *b,
                             uint32_t *from)
{
    *from = b->n;
    uint32_t v;
    if (*p == '"') {
        for (p++; *p != '"';) {
            if (!*p)
                return fail(r, p, "unexpected end of the grammar in a literal");
            if (!(p = character(r, p, &v)) || !push(r, b, G_CHAR, v))
                return NULL;
        }
        return p + 1;
    }
    if (*p == '[')
        return p[1] == '^' ? set(r, p + 2, b, G_CHAR_NOT) : set(r, p + 1, b, G_CHAR);
    if (*p == '<' || *p == '!') {
        const enum g_type t = *p == '!' ? G_TOKEN_NOT : G_TOKEN;
        if (!(p = token(r, p + (t == G_TOKEN_NOT), &v)))
            return NULL;
        return push(r, b, t, v) ? p : NULL;
    }
    if (*p == '.')
        return push(r, b, G_ANY, 0) ? p + 1 : NULL;
    if (*p == '(') {
        if (++r->nesting > MAX_NESTING)
            return fail(r, p, "groups nested more than 64 deep");
        const int64_t id = symbol(r, NULL, 0, r->sym[rule].origin);
        if (id < 0 || !(p = alternates(r, space(p + 1, true), (uint32_t)id, true)))
            return NULL;
        r->nesting--;
        if (*p != ')')
            return fail(r, p, "expecting ')'");
        return push(r, b, G_REF, (uint32_t)id) ? p + 1 : NULL;
    }
    const char *end = p;
    while (word_char(*end))
        end++;
    if (end == p)
        return p; /* not a symbol: the sequence ends here */
    const int64_t id = symbol(r, p, (uint32_t)(end - p), 0);
    return id >= 0 && push(r, b, G_REF, (uint32_t)id) ? end : NULL;
}

static const char *sequence(struct reader *r, const char *p, uint32_t rule, struct rule_buf *b,
                            bool nested)
{
    uint32_t from = UINT32_MAX; /* where the last symbol starts: what a repetition repeats */
    while (*p) {
        uint64_t min, max;
        if (*p == '*' || *p == '+' || *p == '?') {
            min = *p == '+', max = *p == '?' ? 1 : UINT64_MAX;
            p = space(p + 1, nested);
        } else if (*p == '{') {
            if (!(p = braces(r, p + 1, nested, &min, &max)))
                return NULL;
        } else {
            const char *q = symbol_at(r, p, rule, b, &from);
            if (!q || q == p)
                return q;
            p = space(q, nested);
            continue;
        }
        if (from == UINT32_MAX || from == b->n)
            return fail(r, p, "a repetition with nothing before it");
        if (!repeat(r, b, from, min, max, r->sym[rule].origin))
            return NULL;
        /* `from` stays: x{2}* repeats x{2}, as llama.cpp reads it */
    }
    return p;
}

static const char *alternates(struct reader *r, const char *p, uint32_t rule, bool nested)
{
    struct rule_buf b = { 0 };
    p = sequence(r, p, rule, &b, nested);
    while (p && *p == '|') {
        if (!push(r, &b, G_ALT, 0))
            p = NULL;
        else
            p = sequence(r, space(p + 1, true), rule, &b, nested);
    }
    if (!p || !push(r, &b, G_END, 0)) {
        free(b.p);
        return NULL;
    }
    r->rules[rule] = b;
    r->rules[rule].defined = true;
    return p;
}

static const char *rule_at(struct reader *r, const char *p)
{
    const char *end = p;
    while (word_char(*end))
        end++;
    if (end == p)
        return fail(r, p, "expecting a rule's name");
    const int64_t id = symbol(r, p, (uint32_t)(end - p), 0);
    if (id < 0)
        return NULL;
    if (r->rules[id].defined)
        return fail(r, p, "a rule defined twice");
    const char *q = space(end, false);
    if (strncmp(q, "::=", 3))
        return fail(r, q, "expecting '::='");
    if (!(q = alternates(r, space(q + 3, true), (uint32_t)id, false)))
        return NULL;
    if (*q == '\r' || *q == '\n')
        q += q[0] == '\r' && q[1] == '\n' ? 2 : 1;
    else if (*q)
        return fail(r, q, "expecting the end of the line");
    return space(q, true);
}

/* --- checks and the program ------------------------------------------------- */

/* Which rules can match the empty text. An alternative is nullable once
 * every element of it is a reference to a nullable rule: each counts down
 * its references as the rules they name are found nullable, so the work is
 * linear in the grammar's size (a hostile chain of rules costs no more).
 * 0 or -ENOMEM. */
static int find_nullable(const struct reader *r, bool *nullable)
{
    uint32_t n_alt = 0, n_occ = 0;
    for (uint32_t id = 0; id < r->n_rules; id++)
        for (uint32_t k = 0; k < r->rules[id].n; k++) {
            n_alt += r->rules[id].p[k].type == G_ALT || r->rules[id].p[k].type == G_END;
            n_occ += r->rules[id].p[k].type == G_REF;
        }
    uint32_t *alt_rule = malloc(sizeof(uint32_t) * (n_alt + 1));
    int32_t *left = malloc(sizeof(int32_t) * (n_alt + 1));
    uint32_t *first = calloc((size_t)r->n_rules + 1, sizeof(uint32_t));
    uint32_t *occ = malloc(sizeof(uint32_t) * (n_occ + 1));
    uint32_t *queue = malloc(sizeof(uint32_t) * (r->n_rules + 1));
    int rc = alt_rule && left && first && occ && queue ? 0 : -ENOMEM;
    for (int pass = 0; !rc && pass < 2; pass++) { /* count each rule's references, then list them */
        uint32_t a = 0;
        left[0] = 0;
        for (uint32_t id = 0; id < r->n_rules; id++)
            for (uint32_t k = 0; k < r->rules[id].n; k++) {
                const struct g_el *e = &r->rules[id].p[k];
                if (e->type == G_ALT || e->type == G_END) {
                    alt_rule[a++] = id;
                    left[a < n_alt + 1 ? a : n_alt] = 0;
                } else if (e->type != G_REF) {
                    left[a] = -1; /* reads something: never nullable */
                } else if (left[a] >= 0) {
                    left[a]++;
                    if (pass)
                        occ[--first[e->value]] = a;
                    else
                        first[e->value]++;
                }
            }
        /* counts -> where each list ends; the second pass fills each list
         * from its end, leaving first[id] where it starts */
        for (uint32_t id = 0; !pass && id < r->n_rules; id++)
            first[id + 1] += first[id];
    }
    uint32_t tail = 0;
    for (uint32_t a = 0; !rc && a < n_alt; a++)
        if (!left[a] && !nullable[alt_rule[a]])
            nullable[alt_rule[a]] = true, queue[tail++] = alt_rule[a];
    for (uint32_t head = 0; !rc && head < tail; head++) {
        const uint32_t x = queue[head];
        for (uint32_t k = first[x]; k < first[x + 1]; k++)
            if (--left[occ[k]] == 0 && !nullable[alt_rule[occ[k]]])
                nullable[alt_rule[occ[k]]] = true, queue[tail++] = alt_rule[occ[k]];
    }
    free(alt_rule), free(left), free(first), free(occ), free(queue);
    return rc;
}

/* The rules a rule may expand to before it reads anything: those at the
 * start of an alternative, or after nullable ones. Left recursion is a
 * cycle among these edges; Kahn's order removes every rule not on or
 * behind one. */
static int check_left_recursion(struct reader *r)
{
    bool *nullable = calloc(r->n_rules, sizeof(bool));
    uint32_t *indeg = calloc(r->n_rules, sizeof(uint32_t)), *queue = NULL;
    uint32_t *succ = NULL, *first = calloc((size_t)r->n_rules + 1, sizeof(uint32_t));
    int rc = nullable && indeg && first ? 0 : -ENOMEM;
    if (!rc)
        rc = find_nullable(r, nullable);
    for (int pass = 0; !rc && pass < 2; pass++) { /* count the edges, then list them */
        uint32_t n = 0;
        for (uint32_t id = 0; id < r->n_rules; id++) {
            bool at_start = true;
            if (!pass)
                first[id] = n;
            for (const struct g_el *e = r->rules[id].p;; e++) {
                if (e->type == G_ALT || e->type == G_END) {
                    if (e->type == G_END)
                        break;
                    at_start = true;
                } else if (at_start && e->type == G_REF) {
                    if (pass)
                        succ[n] = e->value, indeg[e->value]++;
                    n++;
                    at_start = nullable[e->value];
                } else {
                    at_start = false;
                }
            }
        }
        first[r->n_rules] = n;
        if (!pass && !(succ = malloc(sizeof(uint32_t) * (n ? n : 1))))
            rc = -ENOMEM;
    }
    if (!rc && !(queue = malloc(sizeof(uint32_t) * r->n_rules)))
        rc = -ENOMEM;
    uint32_t head = 0, tail = 0;
    for (uint32_t id = 0; !rc && id < r->n_rules; id++)
        if (!indeg[id])
            queue[tail++] = id;
    while (!rc && head < tail) {
        const uint32_t id = queue[head++];
        for (uint32_t k = first[id]; k < first[id + 1]; k++)
            if (!--indeg[succ[k]])
                queue[tail++] = succ[k];
    }
    if (!rc && tail < r->n_rules) {
        /* the rules left are on a cycle or behind one, and each has one of
         * them before it: going back n_rules times ends on the cycle */
        uint32_t *before = queue, id = 0;
        for (uint32_t u = 0; u < r->n_rules; u++)
            for (uint32_t k = first[u]; indeg[u] && k < first[u + 1]; k++)
                if (indeg[succ[k]])
                    before[succ[k]] = u;
        while (!indeg[id])
            id++;
        for (uint32_t step = 0; step < r->n_rules; step++)
            id = before[id];
        const struct symbol *s = &r->sym[r->sym[id].origin];
        rc = fl_err_set(r->err, -EINVAL, "grammar: rule '%.*s' is left-recursive (it can reach "
                        "itself before reading anything)", (int)s->len, s->name);
    }
    free(nullable), free(indeg), free(queue), free(succ), free(first);
    return rc == -ENOMEM ? fl_err_set(r->err, rc, "grammar: out of memory") : rc;
}

static int check_defined(struct reader *r)
{
    for (uint32_t id = 0; id < r->n_rules; id++)
        if (!r->rules[id].defined)
            return fl_err_set(r->err, -EINVAL, "grammar: rule '%.*s' is used but not defined",
                              (int)r->sym[id].len, r->sym[id].name);
    for (uint32_t id = 0; id < r->n_rules; id++)
        if (r->sym[id].name && r->sym[id].len == 4 && !memcmp(r->sym[id].name, "root", 4)) {
            return (int)id;
        }
    return fl_err_set(r->err, -EINVAL, "grammar: no rule named 'root'");
}

static int program(struct reader *r, uint32_t root, struct fl_grammar **out)
{
    struct fl_grammar *g = calloc(1, sizeof(*g));
    if (g) {
        g->el = malloc(sizeof(*g->el) * r->n_el);
        g->rule = malloc(sizeof(uint32_t) * r->n_rules);
    }
    if (!g || !g->el || !g->rule) {
        fl_grammar_free(g);
        return fl_err_set(r->err, -ENOMEM, "grammar: out of memory");
    }
    for (uint32_t id = 0; id < r->n_rules; id++) {
        g->rule[id] = g->n_el;
        memcpy(g->el + g->n_el, r->rules[id].p, sizeof(*g->el) * r->rules[id].n);
        g->n_el += r->rules[id].n;
    }
    g->n_rules = r->n_rules;
    g->root = root;
    /* a start the matcher's limits cannot expand (references nested past
     * them) would leave every answer without a token to draw */
    struct fl_grammar_state *m = malloc(sizeof(*m));
    if (m)
        fl_grammar_init(g, m);
    const int rc = !m ? fl_err_set(r->err, -ENOMEM, "grammar: out of memory")
                   : !m->n ? fl_err_set(r->err, -EINVAL, "grammar: 'root' cannot start: its rules "
                                        "nest deeper than 1,024 references before a character")
                           : 0;
    free(m);
    if (rc) {
        fl_grammar_free(g);
        return rc;
    }
    *out = g;
    return 0;
}

int fl_grammar_compile(const char *text, size_t n, const struct fl_tokenizer *tok,
                       struct fl_grammar **out, struct fl_err *err)
{
    *out = NULL;
    if (memchr(text, 0, n))
        return fl_err_set(err, -EINVAL, "grammar: a NUL byte in the text");
    struct reader r = { .tok = tok, .err = err };
    char *copy = malloc(n + 1);
    if (!copy)
        return fl_err_set(err, -ENOMEM, "grammar: out of memory");
    memcpy(copy, text, n);
    copy[n] = 0;
    r.text = copy;
    const char *p = space(copy, true);
    if (!*p)
        fail(&r, p, "an empty grammar");
    while (p && *p)
        p = rule_at(&r, p);
    int rc = r.rc;
    const int root = rc ? rc : check_defined(&r);
    rc = root < 0 ? root : check_left_recursion(&r);
    if (!rc)
        rc = program(&r, (uint32_t)root, out);
    for (uint32_t id = 0; id < r.n_rules; id++)
        free(r.rules[id].p);
    free(r.rules);
    free(r.sym);
    free(r.by_name);
    free(copy);
    return rc;
}

int fl_grammar_check(const char *text, size_t n, const struct fl_tokenizer *tok,
                     struct fl_err *err)
{
    struct fl_grammar *g = NULL;
    const int rc = fl_grammar_compile(text, n, tok, &g, err);
    fl_grammar_free(g);
    return rc;
}

void fl_grammar_free(struct fl_grammar *g)
{
    if (!g)
        return;
    free(g->el);
    free(g->rule);
    free(g);
}
