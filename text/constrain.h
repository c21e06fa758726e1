/* constrain.h: one answer held to what its request asks: a value of a JSON
 * schema (json-schema.h; JSON mode is the schema of any object) or a
 * sentence of a GBNF grammar (grammar.h). It masks each logits row to the
 * tokens that keep the answer a prefix of one (over the vocabulary's
 * pieces, json-mode.h) and reads the drawn token on. */
#ifndef FL_TEXT_CONSTRAIN_H
#define FL_TEXT_CONSTRAIN_H

#include <stdbool.h>
#include <stdint.h>

struct fl_constraint;
struct fl_schema;
struct fl_grammar;
struct fl_mask_vocab;

/* An answer held to schema or (schema NULL) grammar, which it reads but
 * does not own; it starts empty. 0 or -ENOMEM. */
int fl_constraint_new(const struct fl_schema *schema, const struct fl_grammar *grammar,
                      struct fl_constraint **out);
void fl_constraint_free(struct fl_constraint *c);

/* Back to the empty answer. */
void fl_constraint_reset(struct fl_constraint *c);

/* out = row with every token that cannot come next at -INFINITY; the count
 * of tokens left (0: none can). End-of-generation tokens are left where
 * the answer may end. Uses v's scratch: one caller at a time. */
int32_t fl_constraint_mask(struct fl_constraint *c, struct fl_mask_vocab *v, const float *row,
                           float *out);

/* Reads token id on; false (the answer unchanged) when it cannot come next. */
bool fl_constraint_accept(struct fl_constraint *c, const struct fl_mask_vocab *v, int32_t id);

/* The answer is whole and nothing may follow it. */
bool fl_constraint_done(const struct fl_constraint *c);

#endif
