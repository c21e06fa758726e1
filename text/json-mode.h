/* json-mode.h: JSON mode over a vocabulary: which tokens may come next so
 * that the answer stays the start of a JSON object (json-prefix.h). The
 * tokens' pieces are rendered once; each step masks a logits row. */
#ifndef FL_TEXT_JSON_MODE_H
#define FL_TEXT_JSON_MODE_H

#include <stdint.h>

#include "text/json-prefix.h"

struct fl_tokenizer;
struct fl_json_vocab;

/* The pieces of ids 0..n_vocab-1 (ids past the tokenizer's, control tokens
 * and end-of-generation tokens have none: never drawn in JSON mode). 0 or
 * -ENOMEM. */
int fl_json_vocab_new(const struct fl_tokenizer *tok, int32_t n_vocab, struct fl_json_vocab **out);
void fl_json_vocab_free(struct fl_json_vocab *v);

/* out = row with every token whose piece cannot continue m's text at
 * -INFINITY. Returns how many tokens remain possible (0: none can). */
int32_t fl_json_mask(const struct fl_json_vocab *v, const struct fl_json_prefix *m,
                     const float *row, float *out);

/* Feeds token id's piece to m; false when it cannot continue the text (m
 * unchanged). */
bool fl_json_accept(const struct fl_json_vocab *v, struct fl_json_prefix *m, int32_t id);

#endif
