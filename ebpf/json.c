/* json.c: a small recursive-descent JSON reader (a tree of struct jv).
 * Numbers keep their exact unsigned 64-bit value next to the double. */
#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ebpf/json.h"
#include "base/whole-file.h"

struct jp {
    const char *p, *begin, *end;
    int depth;
    const char *skip;
    char err[128];
};

void jv_free(struct jv *v)
{
    free(v->s);
    for (int i = 0; i < v->n; i++) {
        jv_free(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

static int fail(struct jp *j, const char *what)
{
    if (!j->err[0])
        snprintf(j->err, sizeof(j->err), "%s at byte %ld", what, (long)(j->p - j->begin));
    return -EINVAL;
}

static void ws(struct jp *j)
{
    while (j->p < j->end && isspace((unsigned char)*j->p))
        j->p++;
}

static int parse(struct jp *j, struct jv *v, bool keep);

static int parse_str(struct jp *j, char **out)
{
    j->p++;  /* the opening quote */
    size_t cap = 16, n = 0;
    char *s = out ? malloc(cap) : NULL;
    if (out && !s)
        return -ENOMEM;
    for (; j->p < j->end && *j->p != '"'; j->p++) {
        char c = *j->p;
        if ((unsigned char)c < 0x20) {
            free(s);
            return fail(j, "control character in string");
        }
        if (c == '\\') {
            if (++j->p >= j->end) {
                free(s);
                return fail(j, "unterminated escape");
            }
            c = *j->p;
            if (c == 'u') {   /* BMP code points to UTF-8; surrogate pairs become '?' */
                unsigned cp = 0;
                for (int k = 1; k <= 4; k++) {
                    char h = j->p + k < j->end ? j->p[k] : 0;
                    if (!isxdigit((unsigned char)h)) {
                        free(s);
                        return fail(j, "bad \\u escape");
                    }
                    cp = cp * 16 + (unsigned)(isdigit((unsigned char)h) ? h - '0' : (h | 32) - 'a' + 10);
                }
                j->p += 4;
                if (cp >= 0xd800 && cp < 0xe000)
                    cp = '?';
                char u8[3];
                int nu = 0;
                if (cp >= 0x800) {
                    u8[nu++] = (char)(0xe0 | cp >> 12);
                    u8[nu++] = (char)(0x80 | ((cp >> 6) & 0x3f));
                } else if (cp >= 0x80) {
                    u8[nu++] = (char)(0xc0 | cp >> 6);
                }
                c = (char)(cp >= 0x80 ? 0x80 | (cp & 0x3f) : cp);
                for (int k = 0; k < nu && s; k++) {
                    if (n + 4 > cap) {
                        char *ns = realloc(s, cap *= 2);
                        if (!ns) {
                            free(s);
                            return -ENOMEM;
                        }
                        s = ns;
                    }
                    s[n++] = u8[k];
                }
            } else if (c == 'n') c = '\n';
            else if (c == 't') c = '\t';
            else if (c == 'r') c = '\r';
            else if (c == 'b') c = '\b';
            else if (c == 'f') c = '\f';
            else if (c != '"' && c != '\\' && c != '/') {
                free(s);
                return fail(j, "bad escape");
            }
        }
        if (s) {
            if (n + 2 > cap) {
                char *ns = realloc(s, cap *= 2);
                if (!ns) {
                    free(s);
                    return -ENOMEM;
                }
                s = ns;
            }
            s[n++] = c;
        }
    }
    if (j->p >= j->end) {
        free(s);
        return fail(j, "unterminated string");
    }
    j->p++;
    if (s) {
        s[n] = 0;
        *out = s;
    }
    return 0;
}

static int parse_num(struct jp *j, struct jv *v)
{
    char *e;
    const char *a = j->p;
    v->t = J_NUM;
    v->d = strtod(a, &e);
    if (e == a || e > j->end)
        return fail(j, "bad number");
    if (*a != '-' && strspn(a, "0123456789") == (size_t)(e - a))
        v->u = strtoull(a, NULL, 10);
    else
        v->u = v->d >= 0x1p64 ? UINT64_MAX : v->d > 0 ? (uint64_t)v->d : 0; /* cast UB past 2^64 */
    j->p = e;
    return 0;
}

static int push(struct jv *v, bool obj, char *key, struct jv *item)
{
    if ((v->n & (v->n - 1)) == 0) { /* grow at powers of two */
        int cap = v->n ? v->n * 2 : 1;
        struct jv *ni = realloc(v->items, sizeof(*ni) * (size_t)cap);
        if (!ni)
            return -ENOMEM;
        v->items = ni;
        if (obj) {
            char **nk = realloc(v->keys, sizeof(*nk) * (size_t)cap);
            if (!nk)
                return -ENOMEM;
            v->keys = nk;
        }
    }
    v->items[v->n] = *item;
    if (obj)
        v->keys[v->n] = key;
    v->n++;
    return 0;
}

/* Arrays and objects; keep = false checks the syntax and builds nothing. */
static int parse_list(struct jp *j, struct jv *v, bool keep, bool obj)
{
    char close = obj ? '}' : ']';
    v->t = obj ? J_OBJ : J_ARR;
    j->p++;
    ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        return 0;
    }
    for (;;) {
        char *key = NULL;
        ws(j);
        if (obj) {
            if (j->p >= j->end || *j->p != '"')
                return fail(j, "expected a key");
            int rc = parse_str(j, keep ? &key : NULL);
            if (rc < 0)
                return rc;
            ws(j);
            if (j->p >= j->end || *j->p != ':') {
                free(key);
                return fail(j, "expected ':'");
            }
            j->p++;
        }
        struct jv item = { 0 };
        /* A skipped member (a bulky one the caller does not need) is only checked. */
        bool k = keep && !(obj && key && j->skip && !strcmp(key, j->skip));
        int rc = parse(j, &item, k);
        if (rc == 0 && keep)
            rc = push(v, obj, key, &item);
        else
            free(key);
        if (rc < 0) {
            jv_free(&item);
            return rc;
        }
        ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == close) {
            j->p++;
            return 0;
        }
        return fail(j, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int parse(struct jp *j, struct jv *v, bool keep)
{
    ws(j);
    if (j->p >= j->end)
        return fail(j, "unexpected end");
    if (++j->depth > 64)
        return fail(j, "nested too deeply");
    int rc;
    char c = *j->p;
    if (c == '{' || c == '[') {
        rc = parse_list(j, v, keep, c == '{');
    } else if (c == '"') {
        v->t = J_STR;
        rc = parse_str(j, keep ? &v->s : NULL);
    } else if (c == '-' || isdigit((unsigned char)c)) {
        rc = parse_num(j, v);
    } else if (j->end - j->p >= 4 && !strncmp(j->p, "true", 4)) {
        *v = (struct jv){ .t = J_BOOL, .u = 1 };
        j->p += 4;
        rc = 0;
    } else if (j->end - j->p >= 5 && !strncmp(j->p, "false", 5)) {
        *v = (struct jv){ .t = J_BOOL };
        j->p += 5;
        rc = 0;
    } else if (j->end - j->p >= 4 && !strncmp(j->p, "null", 4)) {
        j->p += 4;
        rc = 0;
    } else {
        rc = fail(j, "unexpected character");
    }
    j->depth--;
    return rc;
}

const struct jv *jv_get(const struct jv *o, const char *key)
{
    if (!o || o->t != J_OBJ)
        return NULL;
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->keys[i], key))
            return &o->items[i];
    return NULL;
}

uint64_t jv_u64(const struct jv *o, const char *key)
{
    const struct jv *v = jv_get(o, key);
    return v && v->t == J_NUM ? v->u : 0;
}

int32_t jv_i32(const struct jv *o, const char *key)
{
    const struct jv *v = jv_get(o, key);
    if (!v || v->t != J_NUM || !(v->d >= INT32_MIN && v->d <= INT32_MAX))
        return 0; /* absent, not a number, NaN or out of range: not a valid id */
    return (int32_t)v->d;
}

int jv_parse_file(const char *path, const char *skip, struct jv *out, struct fl_err *err)
{
    size_t len = 0;
    char *buf = NULL;
    int rc = fl_read_whole_file(path, SIZE_MAX / 2, &buf, &len); /* traces have no size cap */
    memset(out, 0, sizeof(*out));
    if (rc)
        return fl_err_set(err, rc, "%s: %s", path, strerror(-rc));
    struct jp j = { buf, buf, buf + len, 0, skip, { 0 } };
    rc = parse(&j, out, true);
    ws(&j);
    if (rc == 0 && j.p != j.end)
        rc = fail(&j, "trailing bytes");
    if (rc == -EINVAL)
        fl_err_set(err, rc, "%s: not valid JSON: %s", path, j.err);
    else if (rc < 0)
        fl_err_set(err, rc, "%s: out of memory", path);
    if (rc < 0) {
        jv_free(out);
        memset(out, 0, sizeof(*out));
    }
    free(buf);
    return rc;
}
