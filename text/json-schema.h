/* json-schema.h: answers held to a JSON schema (structured outputs), and
 * JSON mode, which is the schema {"type": "object"}.
 *
 * A schema is compiled once into a small program of nodes; a match state
 * then reads the answer one byte at a time and says whether it can still
 * become a value the schema accepts. The sampler may only draw tokens whose
 * bytes keep that true (json-mode.h), so every finished answer is valid.
 *
 * The subset, as llama.cpp's json-schema-to-grammar reads it:
 *   type (one or a list), enum, const, properties, required,
 *   additionalProperties (absent: none when properties are given, any
 *   otherwise), items, minItems, maxItems, minLength, maxLength, minimum /
 *   maximum / exclusiveMinimum / exclusiveMaximum on integers, anyOf /
 *   oneOf (alone, with annotations), allOf of one schema, $ref to "#" and
 *   "#/..." (recursion included), true / {} (any value).
 * Properties are written in a fixed order: the required ones as declared,
 * then the optional ones as declared, each of those skippable; additional
 * properties only after every required one.
 * Annotations are ignored (title, description, default, examples, format —
 * an annotation unless a validator opts in, as JSON Schema 2020-12 says).
 * Assertions outside the subset (pattern, minimum, uniqueItems, …) are
 * refused by name: a client must never take an unchecked answer for a
 * checked one.
 *
 * oneOf is read as anyOf (an answer two branches accept passes), as
 * llama.cpp reads it.
 *
 * Whitespace between tokens is what llama.cpp's JSON grammars allow: none,
 * one space, or one or two newlines and up to FL_SCHEMA_MAX_INDENT spaces
 * and tabs (so a model cannot fill its answer with blanks); none before the
 * value.
 *
 * Limits, each a refusal of the byte that passes it (so the answer stays
 * valid): nesting FL_SCHEMA_MAX_DEPTH, 16 digits per part of a number, and
 * FL_SCHEMA_MAX_ALTS readings at once of an ambiguous prefix (anyOf
 * branches that both accept it) and 64 branches tried per reading and byte;
 * more are dropped, which only narrows the answers possible. */
#ifndef FL_TEXT_JSON_SCHEMA_H
#define FL_TEXT_JSON_SCHEMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define FL_SCHEMA_MAX_DEPTH 32
#define FL_SCHEMA_MAX_ALTS 4
#define FL_SCHEMA_MAX_INDENT 20
#define FL_SCHEMA_MAX_NODES 4096
#define FL_SCHEMA_MAX_PROPS 64   /* declared properties of one object */
#define FL_SCHEMA_MAX_ENUM 64    /* values of one enum */

struct fl_schema;

/* Compiles schema (not kept). 0, -EINVAL with one line in err naming the
 * keyword and where it is (a JSON pointer), or -ENOMEM. */
int fl_schema_compile(const json_t *schema, struct fl_schema **out, struct fl_err *err);
/* JSON mode's schema: any object. 0 or -ENOMEM. */
int fl_schema_any_object(struct fl_schema **out);
void fl_schema_free(struct fl_schema *s);

/* One open part of the value (json-match.c says what each field means for
 * each kind). */
struct fl_schema_frame {
    uint64_t mask;
    uint32_t count, esc;
    uint16_t node, pos, cur;
    uint8_t kind, phase;
};

/* One reading of the answer so far: its open parts, innermost last. */
struct fl_schema_alt {
    uint8_t depth, ws;
    bool started;
    struct fl_schema_frame f[FL_SCHEMA_MAX_DEPTH];
};

struct fl_schema_state {
    uint8_t n; /* readings alive; 0 only inside a refused feed */
    struct fl_schema_alt alt[FL_SCHEMA_MAX_ALTS];
};

/* The empty answer. */
void fl_schema_init(const struct fl_schema *s, struct fl_schema_state *m);

/* Feeds n bytes: true when the text so far can still become a value of the
 * schema; false as soon as it cannot (m is then left as it was). */
bool fl_schema_feed(const struct fl_schema *s, struct fl_schema_state *m, const char *bytes,
                    size_t n);

/* out = in read on by one byte; false (out undefined) when it cannot be. */
bool fl_schema_step(const struct fl_schema *s, const struct fl_schema_state *in, uint8_t c,
                    struct fl_schema_state *out);

/* The value is whole and nothing but whitespace may follow. */
bool fl_schema_done(const struct fl_schema_state *m);

/* The text may end here (whole, or a top-level number that could go on). */
bool fl_schema_may_end(const struct fl_schema_state *m);

/* Inside a string of any length, not in an escape or a UTF-8 sequence:
 * whole UTF-8 characters other than '"', '\\' and control bytes continue it
 * and leave the state as valid. */
bool fl_schema_in_free_string(const struct fl_schema *s, const struct fl_schema_state *m);

/* Whether a and b are the same state (their live parts). */
bool fl_schema_same(const struct fl_schema_state *a, const struct fl_schema_state *b);

#endif
