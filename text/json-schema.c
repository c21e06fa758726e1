/* json-schema.c: compiling a JSON schema into nodes (json-schema.h). */
#include "text/json-schema.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "text/json-schema-impl.h"

#define MAX_LITERAL 4096 /* bytes of one enum value's text */
#define MAX_REF_CHAIN 64 /* $ref to $ref to …: a cycle without a value in it */

struct compiler {
    struct fl_schema *s;
    const json_t *root;
    struct { const json_t *j; uint16_t node; } *seen;
    uint32_t n_seen, cap_seen;
    int chain;
    json_t *rest;   /* enum / const schemas' other keywords, kept while compiling */
    char path[256]; /* JSON pointer of the schema being compiled */
    struct fl_err *err;
};

/* Grows *p (of *cap items of size sz) to hold n + 1. */
static int grow(void **p, uint32_t *cap, uint32_t n, size_t sz)
{
    if (n < *cap)
        return 0;
    const uint32_t c = *cap ? *cap * 2 : 16;
    void *q = realloc(*p, c * sz);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

static int refuse(struct compiler *c, const char *what)
{
    return fl_err_set(c->err, -EINVAL, "json_schema: %s (at %s)", what,
                      c->path[0] ? c->path : "the root");
}

static int new_node(struct compiler *c, const struct sch_node *n)
{
    struct fl_schema *s = c->s;
    if (s->n_nodes >= FL_SCHEMA_MAX_NODES)
        return refuse(c, "more than 4096 schemas in one");
    if (grow((void **)&s->nodes, &s->cap_nodes, s->n_nodes, sizeof(*n)))
        return -ENOMEM;
    s->nodes[s->n_nodes] = *n;
    return (int)s->n_nodes++;
}

static const struct sch_node any_node = { .types = SCH_ANY, .addl = 0, .items = 0,
                                          .max_items = UINT32_MAX, .max_len = UINT32_MAX,
                                          .min_int = INT64_MIN, .max_int = INT64_MAX };

/* Appends "/seg" (and "/name", escaped as a JSON pointer) to the path;
 * returns the old length to cut back to. */
static size_t path_push(struct compiler *c, const char *seg, const char *name)
{
    const size_t old = strlen(c->path);
    size_t at = old;
    const char *parts[2] = { seg, name };
    for (int i = 0; i < 2 && parts[i]; i++) {
        if (at + 1 < sizeof(c->path))
            c->path[at++] = '/';
        for (const char *p = parts[i]; *p && at + 2 < sizeof(c->path); p++) {
            if (*p == '~' || *p == '/') {
                c->path[at++] = '~';
                c->path[at++] = *p == '~' ? '0' : '1';
            } else {
                c->path[at++] = (unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p; /* one line */
            }
        }
    }
    c->path[at] = 0;
    return old;
}

static int compile(struct compiler *c, const json_t *j);
static int filter_literals(struct compiler *c, int at, const json_t *j);

/* Compiles j's member key (a schema) with the path following it. */
static int compile_at(struct compiler *c, const json_t *j, const char *seg, const char *name)
{
    const size_t old = path_push(c, seg, name);
    const int rc = compile(c, j);
    c->path[old] = 0;
    return rc;
}

/* "#" or "#/a/b~1c": the schema it points to in the root, or NULL. */
static const json_t *resolve(const json_t *root, const char *ref)
{
    if (ref[0] != '#' || (ref[1] && ref[1] != '/'))
        return NULL;
    const json_t *at = root;
    for (const char *p = ref + 1; at && *p == '/';) {
        char key[256];
        size_t n = 0;
        for (p++; *p && *p != '/'; p++) {
            char ch = *p;
            if (ch == '~' && (p[1] == '0' || p[1] == '1'))
                ch = *++p == '0' ? '~' : '/';
            if (n + 1 >= sizeof(key))
                return NULL;
            key[n++] = ch;
        }
        key[n] = 0;
        if (json_is_array(at)) {
            char *end;
            const unsigned long i = strtoul(key, &end, 10);
            at = *key && !*end ? json_array_get(at, i) : NULL;
        } else {
            at = json_object_get(at, key);
        }
    }
    return at;
}

/* Keywords that constrain a value and that faultline cannot enforce. */
static const char *const unsupported[] = {
    "pattern", "multipleOf",
    "patternProperties", "propertyNames", "minProperties", "maxProperties", "uniqueItems",
    "contains", "minContains", "maxContains", "prefixItems", "additionalItems", "not", "if",
    "then", "else", "dependentRequired", "dependentSchemas", "dependencies",
    "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef",
};

/* Keywords that say what a value is (beside $ref, allOf and anyOf none may). */
static const char *const assertions[] = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "items",
    "minItems", "maxItems", "minLength", "maxLength", "anyOf", "oneOf", "allOf", "$ref",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
};

static int count_assertions(const json_t *j)
{
    int n = 0;
    for (size_t i = 0; i < sizeof(assertions) / sizeof(assertions[0]); i++)
        n += json_object_get(j, assertions[i]) != NULL;
    return n;
}

static int check_keywords(struct compiler *c, const json_t *j)
{
    for (size_t i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++)
        if (json_object_get(j, unsupported[i])) {
            char what[96];
            snprintf(what, sizeof(what), "\"%s\" is not supported", unsupported[i]);
            return refuse(c, what);
        }
    return 0;
}

/* A $ref or an allOf of one schema: that schema (no node of its own). */
static int compile_alias(struct compiler *c, const json_t *j)
{
    if (count_assertions(j) != 1)
        return refuse(c, "$ref or allOf beside other assertions is not supported");
    const json_t *ref = json_object_get(j, "$ref");
    const json_t *all = json_object_get(j, "allOf");
    if (all && (!json_is_array(all) || json_array_size(all) != 1))
        return refuse(c, "allOf of more than one schema is not supported");
    if (ref && !json_is_string(ref))
        return refuse(c, "$ref: expected a string");
    const json_t *to = ref ? resolve(c->root, json_string_value(ref)) : json_array_get(all, 0);
    if (!to)
        return refuse(c, "$ref: only \"#\" and \"#/...\" pointers into this schema are "
                      "supported, and this one points nowhere");
    if (++c->chain > MAX_REF_CHAIN)
        return refuse(c, "$ref: a cycle of references with no schema in it");
    const int rc = ref ? compile_at(c, to, "$ref", NULL) : compile_at(c, to, "allOf", "0");
    c->chain--;
    return rc;
}

static int remember(struct compiler *c, const json_t *j, int node)
{
    if (node < 0)
        return node;
    if (grow((void **)&c->seen, &c->cap_seen, c->n_seen, sizeof(*c->seen)))
        return -ENOMEM;
    c->seen[c->n_seen].j = j;
    c->seen[c->n_seen++].node = (uint16_t)node;
    return node;
}

static int compile_literals(struct compiler *c, struct sch_node *n, const json_t *j);
static int compile_alternatives(struct compiler *c, int at, const json_t *list, const char *kw);
static int compile_shape(struct compiler *c, int at, const json_t *j);

/* An enum or const beside other keywords: only the values those accept
 * (read by the matcher itself, from the other keywords compiled as a node
 * of their own). */
static int filter_literals(struct compiler *c, int at, const json_t *j)
{
    json_t *rest = json_copy((json_t *)j);
    if (!rest || json_object_del(rest, json_object_get(rest, "enum") ? "enum" : "const") ||
        json_array_append_new(c->rest, rest)) /* alive while seen[] may hold it */
        return -ENOMEM;
    const int other = compile(c, rest);
    if (other < 0)
        return other;
    struct fl_schema *s = c->s;
    struct sch_node *n = &s->nodes[at];
    uint16_t kept = 0;
    for (uint16_t k = 0; k < n->n_lit; k++) {
        struct sch_lit *l = &s->lits[n->lit + k];
        if (sch_accepts(s, (uint16_t)other, l->text, l->len)) {
            const struct sch_lit keep = *l;
            *l = s->lits[n->lit + kept];
            s->lits[n->lit + kept++] = keep;
        }
    }
    n->n_lit = kept; /* the others stay in lits[] for fl_schema_free */
    return kept ? 0 : refuse(c, "an enum or const whose values the keywords beside it refuse "
                               "accepts nothing");
}

static int compile(struct compiler *c, const json_t *j)
{
    for (uint32_t i = 0; i < c->n_seen; i++)
        if (c->seen[i].j == j)
            return c->seen[i].node;
    if (json_is_true(j))
        return 0; /* any value */
    if (json_is_false(j))
        return refuse(c, "the schema false accepts nothing");
    if (!json_is_object(j))
        return refuse(c, "expected a schema (an object or true)");
    int rc = check_keywords(c, j);
    if (rc || !count_assertions(j))
        return rc; /* {} and annotations alone: any value (node 0) */
    if (json_object_get(j, "$ref") || json_object_get(j, "allOf"))
        return remember(c, j, compile_alias(c, j));
    const json_t *any = json_object_get(j, "anyOf");
    const json_t *one = json_object_get(j, "oneOf");
    struct sch_node n = any_node;
    if (any || one) {
        if (count_assertions(j) != 1)
            return refuse(c, "anyOf or oneOf beside other assertions is not supported");
    } else if (json_object_get(j, "enum") || json_object_get(j, "const")) {
        if ((rc = compile_literals(c, &n, j)))
            return rc;
    }
    const int at = remember(c, j, new_node(c, &n)); /* before its parts: they may refer to it */
    if (at < 0)
        return at;
    if (any || one)
        rc = compile_alternatives(c, at, any ? any : one, any ? "anyOf" : "oneOf");
    else if (!c->s->nodes[at].n_lit)
        rc = compile_shape(c, at, j);
    else if (count_assertions(j) > 1)
        rc = filter_literals(c, at, j);
    return rc ? rc : at;
}

static int add_literal(struct compiler *c, const json_t *v)
{
    struct fl_schema *s = c->s;
    /* a number as its shortest exact text (0.1, 0.30000000000000004: Python's
     * repr); inside an array or object, compact with every digit */
    char *text = json_is_array(v) || json_is_object(v)
                     ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17))
                     : fl_json_dumps_python(v);
    if (!text)
        return -ENOMEM;
    const size_t len = strlen(text);
    if (len > MAX_LITERAL || !len) {
        free(text);
        return refuse(c, "an enum or const value over 4096 bytes of JSON");
    }
    if (grow((void **)&s->lits, &s->cap_lits, s->n_lits, sizeof(*s->lits))) {
        free(text);
        return -ENOMEM;
    }
    s->lits[s->n_lits++] = (struct sch_lit){ text, (uint16_t)len };
    return 0;
}

static int compile_literals(struct compiler *c, struct sch_node *n, const json_t *j)
{
    const json_t *en = json_object_get(j, "enum");
    const json_t *co = json_object_get(j, "const");
    if (en && co)
        return refuse(c, "enum and const together are not supported");
    if (en && (!json_is_array(en) || !json_array_size(en)))
        return refuse(c, "enum: expected a non-empty array");
    const size_t k = en ? json_array_size(en) : 1;
    if (k > FL_SCHEMA_MAX_ENUM)
        return refuse(c, "an enum of more than 64 values");
    n->lit = c->s->n_lits;
    n->n_lit = (uint16_t)k;
    for (size_t i = 0; i < k; i++) {
        const int rc = add_literal(c, en ? json_array_get(en, i) : co);
        if (rc)
            return rc;
    }
    return 0;
}

static int compile_alternatives(struct compiler *c, int at, const json_t *list, const char *kw)
{
    if (!json_is_array(list) || !json_array_size(list) || json_array_size(list) > 64)
        return refuse(c, "anyOf / oneOf: expected an array of 1 to 64 schemas");
    struct fl_schema *s = c->s;
    const uint32_t first = s->n_alts, k = (uint32_t)json_array_size(list);
    for (uint32_t i = 0; i < k; i++) {
        if (grow((void **)&s->alts, &s->cap_alts, s->n_alts, sizeof(*s->alts)))
            return -ENOMEM;
        s->alts[s->n_alts++] = 0;
    }
    for (uint32_t i = 0; i < k; i++) {
        char idx[16];
        snprintf(idx, sizeof(idx), "%u", i);
        const int n = compile_at(c, json_array_get(list, i), kw, idx);
        if (n < 0)
            return n;
        s->alts[first + i] = (uint16_t)n;
    }
    s->nodes[at].alt = first;
    s->nodes[at].n_alt = (uint16_t)k;
    return 0;
}

/* "type": one name or a list of them; absent, what the keywords imply. */
static int parse_types(struct compiler *c, const json_t *j, uint8_t *types)
{
    static const struct { const char *name; uint8_t bit; } names[] = {
        { "null", SCH_NULL }, { "boolean", SCH_BOOL }, { "integer", SCH_INT },
        { "number", SCH_NUM }, { "string", SCH_STR }, { "array", SCH_ARR },
        { "object", SCH_OBJ },
    };
    const json_t *t = json_object_get(j, "type");
    if (!t) {
        *types = json_object_get(j, "properties") || json_object_get(j, "required") ||
                         json_object_get(j, "additionalProperties") ? SCH_OBJ
                 : json_object_get(j, "items") || json_object_get(j, "minItems") ||
                         json_object_get(j, "maxItems") ? SCH_ARR
                 : json_object_get(j, "minLength") || json_object_get(j, "maxLength") ? SCH_STR
                 : SCH_ANY;
        return 0;
    }
    *types = 0;
    const size_t k = json_is_array(t) ? json_array_size(t) : 1;
    for (size_t i = 0; i < k; i++) {
        const char *v = json_string_value(json_is_array(t) ? json_array_get(t, i) : t);
        size_t m = 0;
        while (v && m < sizeof(names) / sizeof(names[0]) && strcmp(v, names[m].name))
            m++;
        if (!v || m == sizeof(names) / sizeof(names[0]))
            return refuse(c, "type: expected null, boolean, integer, number, string, array or "
                          "object, or a list of them");
        *types |= names[m].bit;
    }
    return *types ? 0 : refuse(c, "type: an empty list accepts nothing");
}

/* A non-negative integer keyword into *v (absent: left as it is). */
static int count_keyword(struct compiler *c, const json_t *j, const char *key, uint32_t *v)
{
    const json_t *x = json_object_get(j, key);
    if (!x)
        return 0;
    if (!json_is_integer(x) || json_integer_value(x) < 0) {
        char what[96];
        snprintf(what, sizeof(what), "%s: expected a non-negative integer", key);
        return refuse(c, what);
    }
    const json_int_t i = json_integer_value(x);
    *v = i > (json_int_t)UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)i;
    return 0;
}

/* minimum, maximum and their exclusive forms, on an integer only: the
 * bounds in whole numbers. (A number's bounds would need its digits after
 * the point held too: refused.) */
static int integer_bounds(struct compiler *c, const json_t *j, struct sch_node *n)
{
    static const char *const keys[4] = { "minimum", "exclusiveMinimum", "maximum",
                                         "exclusiveMaximum" };
    const double big = 1e16; /* past 16 digits: no bound the digits do not already set */
    for (int k = 0; k < 4; k++) {
        const json_t *x = json_object_get(j, keys[k]);
        if (!x)
            continue;
        if (!json_is_number(x) || n->types != SCH_INT) {
            char what[128];
            snprintf(what, sizeof(what), "\"%s\" is supported on integers only (a number as its "
                     "value, \"type\": \"integer\")", keys[k]);
            return refuse(c, what);
        }
        /* past 16 digits a bound reaches only as far as they do: clamped
         * first, so an integer's arithmetic is exact and a real's fits */
        int64_t b;
        if (json_is_integer(x)) {
            const json_int_t v = json_integer_value(x);
            b = v > (json_int_t)big ? (int64_t)big : v < -(json_int_t)big ? -(int64_t)big : v;
            b += k == 1 ? 1 : k == 3 ? -1 : 0;
        } else {
            const double v = json_number_value(x);
            double d = k == 0 ? ceil(v) : k == 1 ? floor(v) + 1 : k == 2 ? floor(v) : ceil(v) - 1;
            b = (int64_t)(d > big ? big : d < -big ? -big : d);
        }
        if (k < 2 && b > n->min_int)
            n->min_int = b;
        else if (k >= 2 && b < n->max_int)
            n->max_int = b;
    }
    if (n->min_int > n->max_int)
        return refuse(c, "a minimum above its maximum accepts nothing");
    const int64_t most = 9999999999999999; /* 16 digits */
    return n->min_int > most || n->max_int < -most
               ? refuse(c, "bounds past what an integer of 16 digits reaches accept nothing")
               : 0;
}

static bool in_required(const json_t *req, const char *name)
{
    size_t i;
    const json_t *v;
    json_array_foreach(req, i, v) if (json_is_string(v) && !strcmp(json_string_value(v), name))
        return true;
    return false;
}

/* The object's properties, required ones first (each name once, as
 * declared), into props[first ..]: their slots taken before any of their
 * schemas is compiled, as those add their own objects' properties after. */
static int add_props(struct compiler *c, const json_t *props, const json_t *req, uint32_t *n_req)
{
    struct fl_schema *s = c->s;
    const uint32_t first = s->n_props, n = (uint32_t)json_object_size(props);
    while (s->cap_props < first + n)
        if (grow((void **)&s->props, &s->cap_props, s->cap_props, sizeof(*s->props)))
            return -ENOMEM;
    const char *name;
    const json_t *sub;
    uint32_t k = 0;
    for (int pass = 0; pass < 2; pass++) {
        json_object_foreach((json_t *)props, name, sub) {
            if (in_required(req, name) != (pass == 0))
                continue;
            json_t *str = json_string(name);
            char *key = str ? json_dumps(str, JSON_ENCODE_ANY) : NULL;
            json_decref(str);
            if (!key)
                return str ? -ENOMEM : refuse(c, "a property name that is not UTF-8");
            s->props[first + k++] = (struct sch_prop){ key, (uint16_t)strlen(key), 0 };
            s->n_props = first + k; /* freed with the schema from here on */
            if (strlen(key) > MAX_LITERAL)
                return refuse(c, "a property name over 4096 bytes");
        }
        if (pass == 0)
            *n_req = k;
    }
    k = 0;
    for (int pass = 0; pass < 2; pass++)
        json_object_foreach((json_t *)props, name, sub) {
            if (in_required(req, name) != (pass == 0))
                continue;
            const int node = compile_at(c, sub, "properties", name);
            if (node < 0)
                return node;
            s->props[first + k++].node = (uint16_t)node;
        }
    return 0;
}

static int compile_object(struct compiler *c, int at, const json_t *j)
{
    const json_t *props = json_object_get(j, "properties");
    const json_t *req = json_object_get(j, "required");
    const json_t *addl = json_object_get(j, "additionalProperties");
    if (props && !json_is_object(props))
        return refuse(c, "properties: expected an object");
    if (req && !json_is_array(req))
        return refuse(c, "required: expected an array of names");
    size_t i;
    const json_t *v;
    json_array_foreach(req, i, v) if (!json_is_string(v) ||
                                      !json_object_get(props, json_string_value(v)))
        return refuse(c, "required: names a property that properties does not define");
    if (json_object_size(props) > FL_SCHEMA_MAX_PROPS)
        return refuse(c, "an object of more than 64 properties");
    struct fl_schema *s = c->s;
    const uint32_t first = s->n_props, n_prop = (uint32_t)json_object_size(props);
    uint32_t n_req = 0; /* a name required twice is one property */
    int rc = add_props(c, props, req, &n_req);
    if (rc)
        return rc;
    int an = props && !addl ? SCH_NONE : 0;
    if (json_is_false(addl))
        an = SCH_NONE;
    else if (addl && !json_is_true(addl) && (an = compile_at(c, addl, "additionalProperties",
                                                                NULL)) < 0)
        return an;
    struct sch_node *n = &s->nodes[at];
    n->prop = first;
    n->n_prop = (uint16_t)n_prop;
    n->n_req = (uint16_t)n_req;
    n->addl = (uint16_t)an;
    return 0;
}

static int compile_shape(struct compiler *c, int at, const json_t *j)
{
    uint8_t types;
    int rc = parse_types(c, j, &types);
    struct sch_node n = any_node;
    n.types = types;
    if (!rc)
        rc = count_keyword(c, j, "minItems", &n.min_items);
    if (!rc)
        rc = count_keyword(c, j, "maxItems", &n.max_items);
    if (!rc)
        rc = count_keyword(c, j, "minLength", &n.min_len);
    if (!rc)
        rc = count_keyword(c, j, "maxLength", &n.max_len);
    if (!rc && (n.min_items > n.max_items || n.min_len > n.max_len))
        rc = refuse(c, "a minimum above its maximum accepts nothing");
    if (!rc)
        rc = integer_bounds(c, j, &n);
    if (rc)
        return rc;
    const json_t *items = json_object_get(j, "items");
    if (items && json_is_array(items))
        return refuse(c, "items as an array (a tuple) is not supported");
    c->s->nodes[at] = n;
    if (items) {
        const int in = compile_at(c, items, "items", NULL);
        if (in < 0)
            return in;
        c->s->nodes[at].items = (uint16_t)in;
    }
    return types & SCH_OBJ ? compile_object(c, at, j) : 0;
}

/* Whether union node i reaches itself through unions alone: a value of it
 * would have to be a value of it first (mark: 1 on the path, 2 cleared). */
static bool union_cycle(const struct fl_schema *s, uint32_t i, uint8_t *mark)
{
    if (mark[i] == 1)
        return true;
    if (mark[i] == 2 || !s->nodes[i].n_alt)
        return false;
    mark[i] = 1;
    for (uint32_t k = 0; k < s->nodes[i].n_alt; k++)
        if (union_cycle(s, s->alts[s->nodes[i].alt + k], mark))
            return true;
    mark[i] = 2;
    return false;
}

static int schema_new(struct fl_schema **out)
{
    struct fl_schema *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    struct compiler c = { .s = s };
    if (new_node(&c, &any_node) < 0) { /* node 0: any value */
        free(s);
        return -ENOMEM;
    }
    *out = s;
    return 0;
}

int fl_schema_compile(const json_t *schema, struct fl_schema **out, struct fl_err *err)
{
    struct fl_schema *s;
    int rc = schema_new(&s);
    if (rc)
        return fl_err_set(err, rc, "out of memory");
    struct compiler c = { .s = s, .root = schema, .err = err, .rest = json_array() };
    rc = c.rest ? compile(&c, schema) : -ENOMEM;
    free(c.seen);
    json_decref(c.rest);
    uint8_t *mark = rc >= 0 ? calloc(s->n_nodes, 1) : NULL;
    if (rc >= 0 && !mark)
        rc = -ENOMEM;
    for (uint32_t i = 0; mark && i < s->n_nodes && rc >= 0; i++)
        if (union_cycle(s, i, mark))
            rc = fl_err_set(err, -EINVAL, "json_schema: an anyOf or oneOf that is one of its "
                            "own branches accepts no value");
    free(mark);
    if (rc < 0) {
        fl_schema_free(s);
        return rc == -ENOMEM ? fl_err_set(err, rc, "out of memory") : rc;
    }
    s->root = (uint16_t)rc;
    *out = s;
    return 0;
}

int fl_schema_any_object(struct fl_schema **out)
{
    struct fl_schema *s;
    int rc = schema_new(&s);
    struct sch_node obj = any_node;
    obj.types = SCH_OBJ;
    struct compiler c = { .s = s };
    if (!rc && (rc = new_node(&c, &obj)) < 0)
        fl_schema_free(s);
    if (rc < 0)
        return rc;
    s->root = (uint16_t)rc;
    *out = s;
    return 0;
}

void fl_schema_free(struct fl_schema *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < s->n_props; i++)
        free(s->props[i].key);
    for (uint32_t i = 0; i < s->n_lits; i++)
        free(s->lits[i].text);
    free(s->nodes);
    free(s->props);
    free(s->lits);
    free(s->alts);
    free(s);
}
