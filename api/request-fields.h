/* request-fields.h: inside the api module, how a request's fields are read
 * (openai.c defines them; native.c reads llama-server's own fields with
 * them, anthropic.c and responses.c build OpenAI bodies with them; each
 * says which field is wrong in one line), and the token piece both answers
 * write. Not part of the module's interface. */
#ifndef FL_API_REQUEST_FIELDS_H
#define FL_API_REQUEST_FIELDS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "base/json.h"

/* -EINVAL with "field: what". */
int api_field_bad(struct fl_err *err, const char *field, const char *what);
/* -ENOMEM with "out of memory". */
int api_field_nomem(struct fl_err *err);
/* Appends v (taken; NULL: memory ran out) to array a: 0 or api_field_nomem's.
 * (The requests of other APIs are built as OpenAI bodies with it.) */
int api_json_push(json_t *a, json_t *v, struct fl_err *err);
/* The texts of parts ({"text": STRING} objects) as one string, delim
 * before each once there is text, as llama-server joins a message's text
 * parts ("\n"; a continued answer's "\n\n"; Anthropic's "system" blocks
 * ""). A new string, or NULL when memory runs out. */
json_t *api_join_texts(const json_t *parts, const char *delim);
/* o[key] as a number within [lo, hi]; 1 when present, 0 when absent or
 * null, -EINVAL. */
int api_field_number(const json_t *o, const char *key, double lo, double hi, double *v,
                     struct fl_err *err);
/* The same for an integer. */
int api_field_integer(const json_t *o, const char *key, double lo, double hi, int64_t *v,
                      struct fl_err *err);
/* The same for a boolean. */
int api_field_flag(const json_t *o, const char *key, bool *v, struct fl_err *err);
/* Whether a field asks for something: present and not null, false, 0, "",
 * [] or {}. */
bool api_field_asks(const json_t *b, const char *key);

struct fl_tokenizer;
/* A token's piece (control tokens as their text) as a string, and as its
 * bytes in *bytes when bytes is not NULL (response.c; native.c's
 * completion_probabilities write the same). */
json_t *api_piece_json(const struct fl_tokenizer *tok, int32_t id, json_t **bytes);

struct api_request;
/* llama-server's own fields of a /completion body (native.c): "n_probs",
 * "return_tokens", "samplers", "id_slot". */
int api_native_fields(const json_t *b, struct api_request *r, struct fl_err *err);

#endif
