/* json-mode.h: constrained answers over a vocabulary: which tokens may come
 * next so that the answer stays the start of a value its schema accepts
 * (json-schema.h; JSON mode is the schema of any object), or of any text an
 * automaton reading bytes accepts (fl_mask_walk; a grammar's, grammar.h).
 * The tokens' pieces are rendered once and sorted, so tokens that share a
 * prefix share the automaton's work; each step masks a logits row. */
#ifndef FL_TEXT_JSON_MODE_H
#define FL_TEXT_JSON_MODE_H

#include <stdbool.h>
#include <stdint.h>

#include "text/json-schema.h"

struct fl_tokenizer;
struct fl_mask_vocab;

/* An automaton's step: out = in read on by byte c; false when it cannot. */
typedef bool (*fl_mask_step)(const void *prog, const void *in, uint8_t c, void *out);

/* The pieces of ids 0..n_vocab-1 (ids past the tokenizer's and control
 * tokens have none: never drawn; end-of-generation tokens are drawn only
 * where the answer may end). 0 or -ENOMEM. */
int fl_mask_vocab_new(const struct fl_tokenizer *tok, int32_t n_vocab, struct fl_mask_vocab **out);
void fl_mask_vocab_free(struct fl_mask_vocab *v);

/* out = row with every token whose piece cannot continue m's text at
 * -INFINITY. Returns how many tokens remain possible (0: none can). Uses v's
 * scratch: one caller at a time. */
int32_t fl_json_mask(struct fl_mask_vocab *v, const struct fl_schema *s,
                     const struct fl_schema_state *m, const float *row, float *out);

/* Sets out[id] = row[id] for each token whose whole piece step reads from
 * start (a state of state_size bytes, a schema's or a grammar's at most);
 * returns how many. End-of-generation tokens have no piece. Uses v's
 * scratch: one caller at a time. */
int32_t fl_mask_walk(struct fl_mask_vocab *v, fl_mask_step step, const void *prog,
                     const void *start, size_t state_size, const float *row, float *out);
/* Token id's piece (*len bytes; 0 for tokens that are never drawn as text). */
const char *fl_mask_piece(const struct fl_mask_vocab *v, int32_t id, uint32_t *len);
bool fl_mask_is_eog(const struct fl_mask_vocab *v, int32_t id);
/* Rows of n_vocab floats for a caller's own masks: one of zeros, one to
 * write (NULL when memory runs out). One caller at a time, as the walk. */
const float *fl_mask_zeros(struct fl_mask_vocab *v);
float *fl_mask_scratch(struct fl_mask_vocab *v);
int32_t fl_mask_n_vocab(const struct fl_mask_vocab *v);

/* Feeds token id's piece to m; false when it cannot continue the text (m
 * unchanged). An end-of-generation token is accepted where m may end. */
bool fl_json_accept(const struct fl_mask_vocab *v, const struct fl_schema *s,
                    struct fl_schema_state *m, int32_t id);

#endif
