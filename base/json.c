/* json.c: see base/json.h. */
#include "base/json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/whole-file.h"

/* Reals are written with 15 significant digits: every float32 given as its
 * shortest decimal reads back as itself, and so does any decimal a person
 * typed; only doubles that need all 17 digits are rounded. */
#define REAL_DIGITS 15

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 if invalid:
 * no overlong forms, no surrogates, nothing above U+10FFFF. */
static int utf8_len(const unsigned char *s, size_t n)
{
    int len;
    uint32_t cp;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        len = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4, cp = s[0] & 0x07;
    else
        return 0;
    if ((size_t)len > n)
        return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

json_t *fl_json_stringn(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        const int len = utf8_len(s + i, n - i);
        bad += len == 0;
        i += len ? (size_t)len : 1;
    }
    if (!bad)
        return json_stringn(str, n);
    char *clean = malloc(n + 2 * bad + 1); /* U+FFFD is 3 bytes for 1 */
    if (!clean)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        const int len = utf8_len(s + i, n - i);
        if (len == 0) {
            memcpy(clean + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        } else {
            memcpy(clean + o, s + i, (size_t)len);
            o += (size_t)len;
            i += (size_t)len;
        }
    }
    json_t *v = json_stringn(clean, o);
    free(clean);
    return v;
}

json_t *fl_json_string(const char *s)
{
    return s ? fl_json_stringn(s, strlen(s)) : json_null();
}

json_t *fl_json_real(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* The encoder is a dozen lines: none of the project's libraries exports
 * one (jansson, libmicrohttpd keep theirs inside). */
json_t *fl_json_base64(const void *p, size_t n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *b = p;
    char *s = malloc((n + 2) / 3 * 4 + 1), *o = s;
    if (!s)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) |
                           (i + 2 < n ? b[i + 2] : 0);
        *o++ = abc[v >> 18 & 63];
        *o++ = abc[v >> 12 & 63];
        *o++ = i + 1 < n ? abc[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? abc[v & 63] : '=';
    }
    json_t *j = json_stringn(s, (size_t)(o - s));
    free(s);
    return j;
}

json_t *fl_json_f32(float v)
{
    if (!isfinite(v))
        return json_null();
    char buf[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof(buf), "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v)
            break;
    }
    return json_real(strtod(buf, NULL));
}

int fl_json_set(json_t *o, const char *key, json_t *v)
{
    return v && json_object_set_new(o, key, v) == 0 ? 0 : -ENOMEM;
}

char *fl_json_line(const json_t *v)
{
    return v ? json_dumps(v, JSON_REAL_PRECISION(REAL_DIGITS) | JSON_PRESERVE_ORDER | JSON_COMPACT)
             : NULL;
}

int fl_json_write(FILE *f, const json_t *v, enum fl_json_style style)
{
    size_t flags = JSON_REAL_PRECISION(REAL_DIGITS) | JSON_PRESERVE_ORDER;
    flags |= style == FL_JSON_INDENT ? JSON_INDENT(2) : JSON_COMPACT;
    if (style == FL_JSON_HTML)
        flags |= JSON_ESCAPE_SLASH;
    int rc = json_dumpf(v, f, flags);
    if (!rc && style != FL_JSON_HTML)
        rc = fputc('\n', f) == EOF ? -1 : 0;
    return rc || ferror(f) ? -EIO : 0;
}

int fl_json_load_bytes(const char *s, size_t n, bool trailing, const char *what, json_t **out,
                       struct fl_err *err)
{
    json_error_t je;
    *out = json_loadb(s, n, JSON_DECODE_ANY | (trailing ? JSON_DISABLE_EOF_CHECK : 0), &je);
    if (!*out) {
        /* jansson quotes the input near the error: its control bytes (a raw
         * newline) would break a one-line message */
        for (char *c = je.text; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
        /* strings are C strings here: a NUL in one would cut it short */
        const bool nul = json_error_code(&je) == json_error_null_character;
        return fl_err_set(err, -EINVAL, "%s: line %d column %d: %s", what, je.line, je.column,
                          nul ? "a string holds \\u0000 (NUL characters are not supported)"
                              : je.text);
    }
    return 0;
}

int fl_json_load_file(const char *path, size_t max_bytes, json_t **out, struct fl_err *err)
{
    char *txt;
    size_t len;
    *out = NULL;
    int rc = fl_read_whole_file(path, max_bytes, &txt, &len);
    if (rc)
        return fl_err_set(err, rc, "%s: %s", path,
                          rc == -EFBIG ? "too large" : strerror(-rc));
    rc = fl_json_load_bytes(txt, len, false, path, out, err);
    free(txt);
    return rc;
}

uint64_t fl_json_u64(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_integer(v))
        return json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
    if (json_is_real(v) && json_real_value(v) > 0 && json_real_value(v) < 1.8e19)
        return (uint64_t)json_real_value(v);
    return 0;
}

int32_t fl_json_i32(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    const json_int_t i = json_is_integer(v) ? json_integer_value(v) : 0;
    return i >= INT32_MIN && i <= INT32_MAX ? (int32_t)i : 0;
}

const char *fl_json_str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* --- as Python's json.dumps ---------------------------------------------------------- */

static void py_str(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (e)
            fputs(e, f);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* The p-digit decimal one unit above (step 1) or below (-1) the one in e
 * ("d.ddde+X"), written back into e. */
static void py_step(char *e, int step)
{
    char *x = strchr(e, 'e');
    int exp = atoi(x + 1);
    char *q = x - 1;
    for (; q >= e && (*q == '.' || *q == (step > 0 ? '9' : '0')); q--)
        if (*q != '.')
            *q = step > 0 ? '0' : '9';
    if (q >= e && *q != '-') {
        *q = (char)(*q + step);
        return;
    }
    if (step < 0) /* below 1.000: not a p-digit decimal of this exponent */
        return;
    /* 9.99e+X -> 1.00e+X+1 */
    q[1] = '1';
    char tail[16];
    snprintf(tail, sizeof(tail), "e%+03d", exp + 1);
    strcpy(x, tail);
}

/* The shortest decimal that reads back as v, as David Gay's algorithm (and
 * Python) finds it: at each length the nearest decimal, or, where v's
 * rounding interval is lopsided (powers of two), the one beside it. */
static void py_shortest(double v, char *e, size_t n)
{
    for (int p = 0; p <= 17; p++) {
        snprintf(e, n, "%.*e", p, v);
        if (strtod(e, NULL) == v)
            return;
        for (int step = -1; step <= 1; step += 2) {
            char c[40];
            snprintf(c, sizeof(c), "%s", e);
            py_step(c, step);
            if (strtod(c, NULL) == v) {
                snprintf(e, n, "%s", c);
                return;
            }
        }
    }
}

/* Python's repr of a float: those shortest digits, fixed notation for
 * decimal exponents -4..15 (with at least one decimal), else d.ddde+XX. */
static void py_float(FILE *f, double v)
{
    char e[40], digits[24];
    py_shortest(v, e, sizeof(e));
    const bool neg = e[0] == '-';
    const char *m = e + neg, *x = strchr(m, 'e');
    int nd = 0;
    for (const char *q = m; q < x; q++)
        if (*q != '.')
            digits[nd++] = *q;
    digits[nd] = '\0';
    const int exp = atoi(x + 1);
    fputs(neg ? "-" : "", f);
    if (exp < -4 || exp >= 16)
        fprintf(f, "%c%s%se%c%02d", digits[0], nd > 1 ? "." : "", digits + 1, exp < 0 ? '-' : '+',
                exp < 0 ? -exp : exp);
    else if (exp < 0)
        fprintf(f, "0.%.*s%s", -exp - 1, "0000", digits);
    else if (exp + 1 >= nd)
        fprintf(f, "%s%.*s.0", digits, exp + 1 - nd, "0000000000000000");
    else
        fprintf(f, "%.*s.%s", exp + 1, digits, digits + exp + 1);
}

/* Python's repr of a str: single quotes unless it holds ' and no " */
static void py_repr_str(FILE *f, const char *s, size_t n)
{
    const bool dq = memchr(s, '\'', n) && !memchr(s, '"', n);
    const char q = dq ? '"' : '\'';
    fputc(q, f);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == q || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n' || c == '\r' || c == '\t')
            fputs(c == '\n' ? "\\n" : c == '\r' ? "\\r" : "\\t", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
    fputc(q, f);
}

/* v as Python writes what json.loads makes of it: json.dumps's text, or
 * (repr) the repr of the dict, list, str, int, float, True, False or None;
 * numbers are the same either way. */
static void py_write(FILE *f, const json_t *v, bool repr)
{
    void (*str)(FILE *, const char *, size_t) = repr ? py_repr_str : py_str;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *x;
        const char *sep = "";
        fputc('{', f);
        json_object_foreach((json_t *)v, k, x) {
            fputs(sep, f);
            str(f, k, strlen(k));
            fputs(": ", f);
            py_write(f, x, repr);
            sep = ", ";
        }
        fputc('}', f);
        break;
    }
    case JSON_ARRAY:
        fputc('[', f);
        for (size_t i = 0; i < json_array_size(v); i++) {
            fputs(i ? ", " : "", f);
            py_write(f, json_array_get(v, i), repr);
        }
        fputc(']', f);
        break;
    case JSON_STRING: str(f, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER: fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); break;
    case JSON_REAL: py_float(f, json_real_value(v)); break;
    case JSON_TRUE: fputs(repr ? "True" : "true", f); break;
    case JSON_FALSE: fputs(repr ? "False" : "false", f); break;
    case JSON_NULL: fputs(repr ? "None" : "null", f); break;
    }
}

static void py_value(FILE *f, const json_t *v)
{
    py_write(f, v, false);
}

/* v written by how into a malloc'ed string; NULL on out of memory. */
static char *py_text(const json_t *v, void (*how)(FILE *, const json_t *))
{
    char *s = NULL;
    size_t n = 0;
    FILE *f = v ? open_memstream(&s, &n) : NULL;
    if (!f)
        return NULL;
    how(f, v);
    const bool failed = ferror(f);
    if (fclose(f) || failed) {
        free(s);
        return NULL;
    }
    return s;
}

static void py_str_of(FILE *f, const json_t *v)
{
    if (json_is_string(v))
        fwrite(json_string_value(v), 1, json_string_length(v), f);
    else
        py_write(f, v, true);
}

char *fl_json_str_python(const json_t *v)
{
    return py_text(v, py_str_of);
}

char *fl_json_dumps_python(const json_t *v)
{
    return py_text(v, py_value);
}

