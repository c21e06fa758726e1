/* json-instance.h: the tests' own JSON Schema validator over jansson values
 * (test-json-schema, fuzz-json-schema), written from the rules of JSON
 * Schema for the subset text/json-schema.h compiles: whether v is an
 * instance of sch. It is looser than the matcher where the matcher writes
 * one form (property order, no additional properties beside declared ones
 * unless asked) and exact where the schema asserts; oneOf is read as anyOf,
 * as the matcher reads it. */
#ifndef FL_TESTS_JSON_INSTANCE_H
#define FL_TESTS_JSON_INSTANCE_H

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Whether every run of whitespace bytes in s (strings' too: it errs on
 * the side of leaving texts out) is one llama.cpp's JSON grammars allow:
 * " ", or one or two newlines and up to 20 spaces and tabs. */
static inline bool ws_runs_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t j = i, nl = 0, ind = 0;
        while (j < n && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r'))
            j++;
        if (j == i) {
            i++;
            continue;
        }
        while (i + nl < j && s[i + nl] == '\n')
            nl++;
        while (i + nl + ind < j && (s[i + nl + ind] == ' ' || s[i + nl + ind] == '\t'))
            ind++;
        const bool one_space = j - i == 1 && s[i] == ' ';
        if (!one_space && !(nl >= 1 && nl <= 2 && ind <= 20 && i + nl + ind == j))
            return false;
        i = j;
    }
    return true;
}

/* "#" or "#/a/b": the value it names in root (written here, not taken from
 * the compiler), or NULL. */
static inline const json_t *pointer(const json_t *root, const char *ref)
{
    if (!ref || ref[0] != '#')
        return NULL;
    const json_t *at = root;
    const char *p = ref + 1;
    if (*p && *p != '/')
        return NULL;
    while (at && *p == '/') {
        const char *end = strchr(p + 1, '/');
        const size_t n = end ? (size_t)(end - p - 1) : strlen(p + 1);
        char key[256];
        size_t k = 0;
        for (size_t i = 0; i < n && k + 1 < sizeof(key); i++) {
            char c = p[1 + i];
            if (c == '~' && i + 1 < n)
                c = p[1 + ++i] == '0' ? '~' : '/';
            key[k++] = c;
        }
        key[k] = 0;
        at = json_is_array(at) ? json_array_get(at, strtoul(key, NULL, 10))
                               : json_object_get(at, key);
        p += 1 + n;
    }
    return at;
}

static inline bool instance_of(const json_t *v, const json_t *sch, const json_t *root);

static inline size_t utf8_chars(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)s[i] & 0xc0) != 0x80;
    return k;
}

static inline bool type_is(const json_t *v, const char *t)
{
    if (!strcmp(t, "integer"))
        return json_is_integer(v) ||
               (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
    return (!strcmp(t, "null") && json_is_null(v)) || (!strcmp(t, "boolean") && json_is_boolean(v)) ||
           (!strcmp(t, "number") && json_is_number(v)) || (!strcmp(t, "string") && json_is_string(v)) ||
           (!strcmp(t, "array") && json_is_array(v)) || (!strcmp(t, "object") && json_is_object(v));
}

static inline bool object_instance(const json_t *v, const json_t *sch, const json_t *root)
{
    const json_t *props = json_object_get(sch, "properties"), *addl =
        json_object_get(sch, "additionalProperties"), *x;
    size_t i;
    json_array_foreach(json_object_get(sch, "required"), i, x) if (!json_object_get(
        v, json_string_value(x))) return false;
    const char *k;
    json_object_foreach((json_t *)v, k, x) {
        const json_t *ps = json_object_get(props, k);
        if ((ps && !instance_of(x, ps, root)) || (!ps && json_is_false(addl)) ||
            (!ps && addl && !json_is_boolean(addl) && !instance_of(x, addl, root)))
            return false;
    }
    return true;
}

static inline bool instance_of(const json_t *v, const json_t *sch, const json_t *root)
{
    if (json_is_true(sch))
        return true;
    const json_t *x;
    size_t i;
    if ((x = json_object_get(sch, "$ref"))) {
        const json_t *to = pointer(root, json_string_value(x));
        return to && instance_of(v, to, root);
    }
    json_array_foreach(json_object_get(sch, "allOf"), i, x) if (!instance_of(v, x, root))
        return false;
    if ((x = json_object_get(sch, "anyOf")) || (x = json_object_get(sch, "oneOf"))) {
        int hits = 0; /* oneOf read as anyOf, as the matcher does (json-schema.h) */
        const json_t *b;
        json_array_foreach(x, i, b) hits += instance_of(v, b, root);
        return hits > 0;
    }
    if ((x = json_object_get(sch, "const")) && !json_equal((json_t *)v, (json_t *)x))
        return false;
    if ((x = json_object_get(sch, "enum"))) {
        bool in = false;
        const json_t *e;
        json_array_foreach(x, i, e) in |= json_equal((json_t *)v, (json_t *)e);
        if (!in)
            return false;
    }
    if ((x = json_object_get(sch, "type"))) {
        bool ok = json_is_string(x) && type_is(v, json_string_value(x));
        const json_t *t;
        json_array_foreach(x, i, t) ok |= type_is(v, json_string_value(t));
        if (!ok)
            return false;
    }
    if (json_is_object(v) && !object_instance(v, sch, root))
        return false;
    if (json_is_array(v)) {
        const json_t *items = json_object_get(sch, "items"), *e;
        json_array_foreach(v, i, e) if (items && !instance_of(e, items, root)) return false;
        if ((x = json_object_get(sch, "minItems")) && json_array_size(v) < (size_t)json_integer_value(x))
            return false;
        if ((x = json_object_get(sch, "maxItems")) && json_array_size(v) > (size_t)json_integer_value(x))
            return false;
    }
    if (json_is_number(v)) {
        const double d = json_number_value(v);
        if (((x = json_object_get(sch, "minimum")) && d < json_number_value(x)) ||
            ((x = json_object_get(sch, "maximum")) && d > json_number_value(x)) ||
            ((x = json_object_get(sch, "exclusiveMinimum")) && d <= json_number_value(x)) ||
            ((x = json_object_get(sch, "exclusiveMaximum")) && d >= json_number_value(x)))
            return false;
    }
    if (json_is_string(v)) {
        const size_t n = utf8_chars(json_string_value(v), json_string_length(v));
        if ((x = json_object_get(sch, "minLength")) && n < (size_t)json_integer_value(x))
            return false;
        if ((x = json_object_get(sch, "maxLength")) && n > (size_t)json_integer_value(x))
            return false;
    }
    return true;
}

#endif
