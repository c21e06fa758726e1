/* inspect-json.h: a small streaming JSON writer for `faultline inspect --json`.
 *
 * Values are written as they come; the writer tracks nesting to place commas
 * and keys. Inside an object every value takes a key, inside an array none
 * (pass NULL). Strings are escaped, and bytes that are not valid UTF-8 become
 * U+FFFD, so any GGUF string yields a valid document. */
#ifndef FL_INSPECT_JSON_H
#define FL_INSPECT_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define IJSON_MAX_DEPTH 32

struct ijson {
    FILE *out;
    int depth;
    bool has_items[IJSON_MAX_DEPTH]; /* a value was written at this level */
};

void ijson_init(struct ijson *j, FILE *out);
void ijson_obj(struct ijson *j, const char *key);  /* opens { */
void ijson_arr(struct ijson *j, const char *key);  /* opens [ */
void ijson_end(struct ijson *j, char close);       /* '}' or ']' */
void ijson_str(struct ijson *j, const char *key, const char *s);
void ijson_strn(struct ijson *j, const char *key, const char *s, uint64_t len);
void ijson_int(struct ijson *j, const char *key, int64_t v);
void ijson_uint(struct ijson *j, const char *key, uint64_t v);
void ijson_num(struct ijson *j, const char *key, double v); /* NaN, inf -> null */
void ijson_f32(struct ijson *j, const char *key, float v);  /* shortest round-trip form */
void ijson_bool(struct ijson *j, const char *key, bool v);
void ijson_null(struct ijson *j, const char *key);
void ijson_finish(struct ijson *j); /* ends the document with a newline */

/* Shortest %g form that reads back as v (as a float when single); "nan",
 * "inf" for the rest. Returns buf. */
const char *ijson_format_float(double v, bool single, char buf[32]);

#endif
