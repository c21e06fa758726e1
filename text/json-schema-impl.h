/* json-schema-impl.h: the compiled schema, shared by the compiler
 * (json-schema.c) and the matcher (json-match.c) only. */
#ifndef FL_TEXT_JSON_SCHEMA_IMPL_H
#define FL_TEXT_JSON_SCHEMA_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text/json-schema.h"

/* Integers have at most this many digits (as llama.cpp's grammar: 16). */
#define SCH_MAX_DIGITS 16

enum {
    SCH_NULL = 1, SCH_BOOL = 2, SCH_INT = 4, SCH_NUM = 8, SCH_STR = 16, SCH_ARR = 32,
    SCH_OBJ = 64, SCH_ANY = 127,
};

#define SCH_NONE 0xffff /* no node: no additional properties */

struct sch_node {
    uint8_t types;             /* SCH_* the value may be (ignored with literals or alternatives) */
    uint16_t n_lit, n_alt;     /* enum / const texts; anyOf branches */
    uint32_t lit, alt;         /* first of them in lits[] / alts[] */
    /* object: properties in the order they are written (required first) */
    uint32_t prop;             /* first in props[] */
    uint16_t n_prop, n_req;
    uint16_t addl;             /* node of additional properties' values, or SCH_NONE */
    /* array */
    uint16_t items;
    uint32_t min_items, max_items;
    /* string, in characters (an escape is one) */
    uint32_t min_len, max_len;
    /* integer: [min_int, max_int] (INT64_MIN / INT64_MAX: no bound) */
    int64_t min_int, max_int;
};

struct sch_prop {
    char *key; /* the name as a JSON string, quotes included */
    uint16_t len, node;
};

struct sch_lit {
    char *text; /* compact JSON */
    uint16_t len;
};

/* Whether text is a whole value of node (the matcher's reading, for the
 * compiler's enum filter). */
bool sch_accepts(const struct fl_schema *s, uint16_t node, const char *text, size_t n);

struct fl_schema {
    struct sch_node *nodes;
    struct sch_prop *props;
    struct sch_lit *lits;
    uint16_t *alts;
    uint32_t n_nodes, n_props, n_lits, n_alts;
    uint32_t cap_nodes, cap_props, cap_lits, cap_alts;
    uint16_t root;
};

#endif
