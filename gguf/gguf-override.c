/* gguf-override.c: llama.cpp's --override-kv on a file's metadata (see
 * gguf_override). The syntax and the four types are llama.cpp's
 * (common/common.cpp, string_parse_kv_override): KEY=int:N, KEY=float:X,
 * KEY=bool:true|false, KEY=str:TEXT; a list is comma-separated. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf-impl.h"

#define KEY_MAX 127 /* llama.cpp's: a key and a string value fit 128 bytes */

/* "TYPE:VALUE" into v; NULL, or why not. */
static const char *parse_value(struct gguf_file *f, const char *s, struct gguf_value *v)
{
    char *end = NULL;
    if (!strncmp(s, "int:", 4)) {
        *v = (struct gguf_value){ .type = GGUF_VT_INT64, .i64 = strtoll(s + 4, &end, 10) };
        return end == s + 4 || *end ? "int: expected an integer" : NULL;
    }
    if (!strncmp(s, "float:", 6)) {
        *v = (struct gguf_value){ .type = GGUF_VT_FLOAT64, .f64 = strtod(s + 6, &end) };
        return end == s + 6 || *end ? "float: expected a number" : NULL;
    }
    if (!strncmp(s, "bool:", 5)) {
        *v = (struct gguf_value){ .type = GGUF_VT_BOOL, .b = !strcmp(s + 5, "true") };
        return strcmp(s + 5, "true") && strcmp(s + 5, "false") ? "bool: expected true or false"
                                                               : NULL;
    }
    if (!strncmp(s, "str:", 4)) {
        const size_t n = strlen(s + 4);
        char *copy = n <= KEY_MAX ? gguf_arena(f, n + 1) : NULL;
        if (n > KEY_MAX)
            return "str: at most 127 bytes";
        if (!copy)
            return "out of memory";
        *v = (struct gguf_value){ .type = GGUF_VT_STRING, .str = { memcpy(copy, s + 4, n + 1), n } };
        return NULL;
    }
    return "expected TYPE:VALUE with TYPE int, float, bool or str";
}

/* One KEY=TYPE:VALUE: the file's value replaced (whatever its type: the
 * key table judges the result), or the key added; a key overridden before
 * keeps its first override, as llama.cpp's loader does. */
static int override_one(struct gguf_file *f, const char *item, struct fl_err *err)
{
    const char *eq = strchr(item, '=');
    if (!eq || eq == item || eq - item > KEY_MAX)
        return fl_err_set(err, -EINVAL, "--override-kv '%s': expected KEY=TYPE:VALUE", item);
    char key[KEY_MAX + 1];
    memcpy(key, item, (size_t)(eq - item));
    key[eq - item] = '\0';
    struct gguf_value v;
    const char *why = parse_value(f, eq + 1, &v);
    if (why)
        return fl_err_set(err, -EINVAL, "--override-kv %s: %s", item, why);
    const int64_t at = gguf_find_kv(f, key);
    if (at < 0) {
        if (gguf_add_kv(f, key, &v))
            return fl_err_set(err, -ENOMEM, "out of memory");
        f->kv[f->n_kv - 1].overridden = true;
    } else if (!f->kv[at].overridden) {
        f->kv[at].val = v;
        f->kv[at].overridden = true;
    }
    return 0;
}

int gguf_override(struct gguf_file *f, const char *spec, struct fl_err *err)
{
    int rc = 0;
    for (const char *item = spec; !rc;) { /* comma-separated; an empty item is an error */
        const char *comma = strchr(item, ',');
        const size_t n = comma ? (size_t)(comma - item) : strlen(item);
        char *one = strndup(item, n);
        rc = !one ? fl_err_set(err, -ENOMEM, "out of memory") : override_one(f, one, err);
        free(one);
        if (!comma)
            break;
        item = comma + 1;
    }
    return rc;
}
