/* gguf-override.c: llama.cpp's --override-kv on a file's metadata (see
 * gguf_override). The syntax and the four types are llama.cpp's
 * (common/common.cpp, string_parse_kv_override): KEY=int:N, KEY=float:X,
 * KEY=bool:true|false, KEY=str:TEXT; a list is comma-separated. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf-impl.h"
#include "gguf/gguf-keys.h"

#define KEY_MAX 127 /* llama.cpp's: a key and a string value fit 128 bytes */

enum kind { K_INT, K_FLOAT, K_BOOL, K_STR };

/* The kind of value v is, or -1 (an array that is not of integers). */
static int kind_of(const struct gguf_value *v)
{
    switch (v->type) {
    case GGUF_VT_FLOAT32:
    case GGUF_VT_FLOAT64: return K_FLOAT;
    case GGUF_VT_BOOL: return K_BOOL;
    case GGUF_VT_STRING: return K_STR;
    case GGUF_VT_ARRAY: /* a per-layer list: an int stands for every layer */
        return v->arr.type == GGUF_VT_STRING || v->arr.type == GGUF_VT_ARRAY ||
                       v->arr.type == GGUF_VT_FLOAT32 || v->arr.type == GGUF_VT_FLOAT64 ||
                       v->arr.type == GGUF_VT_BOOL
                   ? -1
                   : K_INT;
    default: return K_INT;
    }
}

/* "TYPE:VALUE" into v; NULL, or why not. */
static const char *parse_value(struct gguf_file *f, const char *s, enum kind *k,
                               struct gguf_value *v)
{
    char *end = NULL;
    if (!strncmp(s, "int:", 4)) {
        *k = K_INT;
        *v = (struct gguf_value){ .type = GGUF_VT_INT64, .i64 = strtoll(s + 4, &end, 10) };
        return end == s + 4 || *end ? "int: expected an integer" : NULL;
    }
    if (!strncmp(s, "float:", 6)) {
        *k = K_FLOAT;
        *v = (struct gguf_value){ .type = GGUF_VT_FLOAT64, .f64 = strtod(s + 6, &end) };
        return end == s + 6 || *end ? "float: expected a number" : NULL;
    }
    if (!strncmp(s, "bool:", 5)) {
        *k = K_BOOL;
        *v = (struct gguf_value){ .type = GGUF_VT_BOOL, .b = !strcmp(s + 5, "true") };
        return strcmp(s + 5, "true") && strcmp(s + 5, "false") ? "bool: expected true or false"
                                                               : NULL;
    }
    if (!strncmp(s, "str:", 4)) {
        const size_t n = strlen(s + 4);
        char *copy = n <= KEY_MAX ? gguf_arena(f, n + 1) : NULL;
        *k = K_STR;
        if (n > KEY_MAX)
            return "str: at most 127 bytes";
        if (!copy)
            return "out of memory";
        *v = (struct gguf_value){ .type = GGUF_VT_STRING, .str = { memcpy(copy, s + 4, n + 1), n } };
        return NULL;
    }
    return "expected TYPE:VALUE with TYPE int, float, bool or str";
}

/* One KEY=TYPE:VALUE. */
static int override_one(struct gguf_file *f, const char *item, struct fl_err *err)
{
    static const char *const names[] = { "an int", "a float", "a bool", "a str" };
    const char *eq = strchr(item, '=');
    if (!eq || eq == item || eq - item > KEY_MAX)
        return fl_err_set(err, -EINVAL, "--override-kv %s: expected KEY=TYPE:VALUE", item);
    char key[KEY_MAX + 1];
    memcpy(key, item, (size_t)(eq - item));
    key[eq - item] = '\0';
    enum kind k;
    struct gguf_value v;
    const char *why = parse_value(f, eq + 1, &k, &v);
    if (why)
        return fl_err_set(err, -EINVAL, "--override-kv %s: %s", item, why);
    const int64_t at = gguf_find_kv(f, key);
    if (at < 0)
        return gguf_add_kv(f, key, &v) ? fl_err_set(err, -ENOMEM, "out of memory") : 0;
    const int was = kind_of(&f->kv[at].val);
    if (was != (int)k)
        return fl_err_set(err, -EINVAL, "--override-kv %s: the file's %s is %s, not %s", item,
                          key, was < 0 ? "a list" : names[was], names[k]);
    f->kv[at].val = v;
    return 0;
}

int gguf_override(struct gguf_file *f, const char *spec, struct fl_err *err)
{
    char *list = strdup(spec), *save = NULL;
    if (!list)
        return fl_err_set(err, -ENOMEM, "out of memory");
    int rc = 0, n = 0;
    for (char *item = strtok_r(list, ",", &save); item && !rc; item = strtok_r(NULL, ",", &save))
        rc = override_one(f, item, err), n++;
    free(list);
    if (!rc && !n)
        return fl_err_set(err, -EINVAL, "--override-kv '%s': expected KEY=TYPE:VALUE", spec);
    struct fl_err why;
    if (!rc && (rc = gguf_keys_check(f, &why)))
        return fl_err_set(err, rc, "--override-kv %s: %s", spec, why.msg);
    return rc;
}
