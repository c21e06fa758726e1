/* json.h: the project's one way to write and read JSON, over jansson
 * (Debian's libjansson): what every document (inspect --json, --stats-json,
 * trace files, pinned-hot profiles) is made and parsed with. jansson does
 * the encoding and parsing; this adds what they all need the same way:
 * strings from bytes that may not be UTF-8, floats written as short as they
 * read back, files read whole with a size limit and one-line errors. */
#ifndef FL_BASE_JSON_H
#define FL_BASE_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"

/* A JSON string of n bytes; bytes that are not valid UTF-8 become U+FFFD,
 * so any file's strings make a valid document. NULL only on out of memory. */
json_t *fl_json_stringn(const char *s, size_t n);
/* The same for a C string; NULL s gives JSON null. */
json_t *fl_json_string(const char *s);
/* A number; NaN and infinities (not JSON) become null. */
json_t *fl_json_real(double v);
/* A float32 as the shortest decimal that reads back as it (1e-05, not
 * 9.99999975e-06). */
json_t *fl_json_f32(float v);
/* n bytes as a JSON string in base64 (RFC 4648, padded), as OpenAI's
 * "encoding_format": "base64" carries a vector. NULL on out of memory. */
json_t *fl_json_base64(const void *p, size_t n);
/* Sets o[key] to v, taking v's reference (a NULL v sets nothing and
 * reports failure). 0 or -ENOMEM. */
int fl_json_set(json_t *o, const char *key, json_t *v);

/* How a document is laid out when written. */
enum fl_json_style {
    FL_JSON_COMPACT = 0,   /* one line, "key":value */
    FL_JSON_INDENT,        /* two-space indentation, for people */
    FL_JSON_HTML,          /* compact, with '/' escaped: safe inside <script> */
};

/* Writes v (then a newline unless HTML) to f. 0 or -EIO. */
int fl_json_write(FILE *f, const json_t *v, enum fl_json_style style);
/* v as one compact line, malloc'ed and NUL-terminated (reals as
 * fl_json_write prints them: 15 digits, so fl_json_f32's short decimals stay
 * short); NULL on out of memory or a NULL v. */
char *fl_json_line(const json_t *v);

/* v as Python's json.dumps(v, ensure_ascii=False) writes it, which is what
 * chat templates' tojson filter puts into prompts (Hugging Face, minja):
 * ", " and ": " between items, keys in order, floats as Python's repr (the
 * shortest decimal that reads back: 0.1, 100.0, 1e+21), control characters
 * as \u00xx, other text as it is. malloc'ed; NULL on out of memory. */
char *fl_json_dumps_python(const json_t *v);
/* Python's str() of what json.loads makes of v, as a template's `| string`
 * filter writes a value: a string as it is, True / False / None, numbers as
 * above, lists and dicts as their repr (['a', 'b']). malloc'ed; NULL on out
 * of memory. */
char *fl_json_str_python(const json_t *v);

/* Parses path (at most max_bytes) into *out (json_decref it). 0, or -errno
 * / -EINVAL with "PATH: line L column C: what" in err. */
int fl_json_load_file(const char *path, size_t max_bytes, json_t **out, struct fl_err *err);
/* Parses the n bytes at s: one JSON value at their start (trailing bytes
 * after it are allowed when trailing is true). Errors as above with `what`
 * in place of the path. */
int fl_json_load_bytes(const char *s, size_t n, bool trailing, const char *what, json_t **out,
                       struct fl_err *err);

/* o[key] as an unsigned / signed integer (0 when absent, negative or not an
 * integer; reals are truncated). */
uint64_t fl_json_u64(const json_t *o, const char *key);
int32_t fl_json_i32(const json_t *o, const char *key);
/* o[key] as a string, NULL when absent or not one. */
const char *fl_json_str(const json_t *o, const char *key);

#endif
