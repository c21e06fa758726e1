/* embeddings.h: embedding requests and answers, as llama-server serves
 * them: OpenAI's /v1/embeddings ("input": a string, a list of strings, a
 * list of token ids or a list of such lists; "encoding_format" "float" or
 * "base64") and llama-server's own /embedding ("content"; its answer a
 * list of {index, embedding: rows}), both with llama-server's
 * "embd_normalize". A body is outside input: each field is checked and a
 * wrong one named in one line. */
#ifndef FL_API_EMBEDDINGS_H
#define FL_API_EMBEDDINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/json.h"

#define API_MAX_INPUTS 2048 /* inputs in one request (OpenAI's limit) */

/* llama-server's --embd-normalize: -1 none, 0 max absolute scaled to an
 * int16's range, 1 taxicab, 2 euclidean (the default), N > 2 the p-norm. */
#define API_EMBD_NORM_DEFAULT 2

struct api_embd_input {
    const char *text;      /* in doc, or NULL: ids */
    size_t len;
    int32_t *ids;          /* malloc'ed */
    int n_ids;
};

struct api_embd_request {
    json_t *doc;
    const char *model;     /* NULL when not given */
    struct api_embd_input *in;
    int n_in;
    bool oai;              /* "input" at /v1/embeddings: OpenAI's answer; else llama-server's */
    bool base64;           /* "encoding_format": "base64" */
    int normalize;         /* "embd_normalize", else the default given to the parser */
    bool has_normalize;    /* the body gave it */
};

/* Reads body (n bytes). oai: the endpoint is /v1/embeddings (its answer is
 * OpenAI's unless the body uses llama-server's "content"). 0, or -EINVAL
 * with the field named, or -ENOMEM; api_embd_free either way. */
int api_embd_parse(const char *body, size_t n, bool oai, int normalize,
                   struct api_embd_request *out, struct fl_err *err);
/* The same from a batch line's body (taken: a new reference is kept). */
int api_embd_from_json(json_t *body, bool oai, int normalize, struct api_embd_request *out,
                       struct fl_err *err);
void api_embd_free(struct api_embd_request *r);

/* out = in scaled by llama-server's rule `norm` (above), n floats; in and
 * out may be the same. The sum is taken in double, as llama.cpp's. */
void api_embd_normalize(const float *in, float *out, int n, int norm);

/* The answer to r: for input i, rows[i] (n_rows[i] rows of n_embd floats,
 * already normalized; OpenAI's answer takes the first row, and n_rows may
 * be NULL for it) and the tokens it read, n_tokens[i]. OpenAI's
 * {"object": "list", "data": [{"embedding", "index", "object"}], "model",
 * "usage"} (model: the request's, else `model`; an input's first row), or
 * llama-server's [{"index", "embedding": [rows]}]. NULL when memory runs
 * out. */
json_t *api_embd_answer(const struct api_embd_request *r, const char *model,
                        const float *const *rows, const int *n_rows, int n_embd,
                        const int *n_tokens);

#endif
