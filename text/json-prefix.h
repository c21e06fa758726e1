/* json-prefix.h: whether text is the start of a JSON object (RFC 8259), one
 * byte at a time, for JSON mode (`response_format: {"type": "json_object"}`):
 * the sampler may only draw tokens whose bytes keep the answer such a prefix,
 * and only an end-of-generation token once the object is closed.
 *
 * The state is a small value (copy it to try a token's bytes without
 * committing). The object starts the text; whitespace between tokens is
 * limited to FL_JSON_MAX_WS bytes in a row, so a model cannot fill its
 * answer with blanks; nesting to FL_JSON_MAX_DEPTH. */
#ifndef FL_TEXT_JSON_PREFIX_H
#define FL_TEXT_JSON_PREFIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FL_JSON_MAX_DEPTH 32
#define FL_JSON_MAX_WS 16

struct fl_json_prefix {
    uint8_t lex;                       /* what the next byte may be (json-prefix.c) */
    uint8_t sub;                       /* progress inside a literal, escape or number */
    uint8_t depth;
    uint8_t ws;                        /* whitespace bytes in a row */
    bool done;                         /* the top-level object is closed */
    uint8_t stack[FL_JSON_MAX_DEPTH];  /* '{' or '[' per open container */
};

/* The empty answer: expects '{' (an answer starts with it: no whitespace
 * before, which a model could otherwise spend its tokens on). */
void fl_json_prefix_init(struct fl_json_prefix *m);

/* Feeds n bytes. true when the text so far is still the start of a JSON
 * object (or the whole of one, then done is set and only whitespace may
 * follow); false as soon as it cannot be (m is then left as it was before
 * the call). */
bool fl_json_prefix_feed(struct fl_json_prefix *m, const char *bytes, size_t n);

/* Whether m is inside a string, not in an escape: then bytes without '"',
 * '\\' or control bytes continue it and leave m as it is. */
bool fl_json_prefix_in_string(const struct fl_json_prefix *m);

#endif
