/* json.h: a small JSON reader for faultline trace files and the pager's
 * stats JSON: the whole document as a tree; a member with a given key can be
 * skipped (checked, not built) to keep bulky arrays out of memory. */
#ifndef FL_JSON_H
#define FL_JSON_H

#include <stdint.h>

#include "base/error.h"

enum jv_type { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
    enum jv_type t;
    uint64_t u;        /* J_NUM as an unsigned integer (exact to 2^64), J_BOOL */
    double d;          /* J_NUM */
    char *s;           /* J_STR */
    int n;             /* J_ARR / J_OBJ: number of items */
    struct jv *items;
    char **keys;       /* J_OBJ: a key per item */
};

/* Parses path into out (freed with jv_free); members named skip (at any
 * depth) are syntax-checked only and left out. 0, or -errno with err. */
int jv_parse_file(const char *path, const char *skip, struct jv *out, struct fl_err *err);
void jv_free(struct jv *v);
/* Member key of object o, or NULL. */
const struct jv *jv_get(const struct jv *o, const char *key);
/* Member key as a number (0 when absent or not a number). */
uint64_t jv_u64(const struct jv *o, const char *key);
int32_t jv_i32(const struct jv *o, const char *key);

#endif
