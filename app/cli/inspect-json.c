/* inspect-json.c: see inspect-json.h. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli/inspect-json.h"

void ijson_init(struct ijson *j, FILE *out)
{
    j->out = out;
    j->depth = 0;
    j->has_items[0] = false;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 if invalid:
 * no overlong forms, no surrogates, nothing above U+10FFFF. */
static int utf8_len(const unsigned char *s, uint64_t n)
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
    if ((uint64_t)len > n)
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

static void write_escaped(FILE *out, const char *str, uint64_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', out);
    for (uint64_t i = 0; i < n;) {
        unsigned char c = s[i];
        int len = utf8_len(s + i, n - i);
        if (len == 0) {
            fputs("\\ufffd", out);
            i++;
        } else if (c == '"' || c == '\\') {
            fprintf(out, "\\%c", c);
            i++;
        } else if (c == '\n') {
            fputs("\\n", out), i++;
        } else if (c == '\t') {
            fputs("\\t", out), i++;
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(out, "\\u%04x", c);
            i++;
        } else {
            fwrite(s + i, 1, (size_t)len, out);
            i += (uint64_t)len;
        }
    }
    fputc('"', out);
}

/* Comma, newline, indentation and key before a value at the current level. */
static void lead(struct ijson *j, const char *key)
{
    if (j->depth > 0) {
        fputs(j->has_items[j->depth] ? ",\n" : "\n", j->out);
        fprintf(j->out, "%*s", 2 * j->depth, "");
    }
    j->has_items[j->depth] = true;
    if (key) {
        write_escaped(j->out, key, strlen(key));
        fputs(": ", j->out);
    }
}

static void open_level(struct ijson *j, const char *key, char c)
{
    lead(j, key);
    fputc(c, j->out);
    /* Deeper levels than we track cannot occur in inspect's fixed schema;
     * clamping keeps a mistake from writing out of bounds. */
    if (j->depth < IJSON_MAX_DEPTH - 1)
        j->depth++;
    j->has_items[j->depth] = false;
}

void ijson_obj(struct ijson *j, const char *key) { open_level(j, key, '{'); }
void ijson_arr(struct ijson *j, const char *key) { open_level(j, key, '['); }

void ijson_end(struct ijson *j, char close)
{
    bool had = j->has_items[j->depth];
    if (j->depth > 0)
        j->depth--;
    if (had)
        fprintf(j->out, "\n%*s", 2 * j->depth, "");
    fputc(close, j->out);
}

void ijson_strn(struct ijson *j, const char *key, const char *s, uint64_t len)
{
    lead(j, key);
    write_escaped(j->out, s, len);
}

void ijson_str(struct ijson *j, const char *key, const char *s)
{
    if (!s) {
        ijson_null(j, key);
        return;
    }
    ijson_strn(j, key, s, strlen(s));
}

void ijson_int(struct ijson *j, const char *key, int64_t v)
{
    lead(j, key);
    fprintf(j->out, "%" PRId64, v);
}

void ijson_uint(struct ijson *j, const char *key, uint64_t v)
{
    lead(j, key);
    fprintf(j->out, "%" PRIu64, v);
}

const char *ijson_format_float(double v, bool single, char buf[32])
{
    if (!isfinite(v)) {
        snprintf(buf, 32, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
        return buf;
    }
    /* The shortest text that reads back as the same value: an f32 1e-5
     * prints as 1e-05, not 9.99999975e-06. */
    for (int prec = single ? 6 : 15; prec <= (single ? 9 : 17); prec++) {
        snprintf(buf, 32, "%.*g", prec, v);
        if (single ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

static void number(struct ijson *j, const char *key, double v, bool single)
{
    char buf[32];
    lead(j, key);
    fputs(isfinite(v) ? ijson_format_float(v, single, buf) : "null", j->out);
}

void ijson_num(struct ijson *j, const char *key, double v) { number(j, key, v, false); }
void ijson_f32(struct ijson *j, const char *key, float v) { number(j, key, v, true); }

void ijson_bool(struct ijson *j, const char *key, bool v)
{
    lead(j, key);
    fputs(v ? "true" : "false", j->out);
}

void ijson_null(struct ijson *j, const char *key)
{
    lead(j, key);
    fputs("null", j->out);
}

void ijson_finish(struct ijson *j)
{
    fputc('\n', j->out);
}
