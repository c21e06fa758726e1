/* embeddings.c: embedding requests and answers (embeddings.h). */
#include "api/embeddings.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/request-fields.h"

void api_embd_free(struct api_embd_request *r)
{
    for (int i = 0; r->in && i < r->n_in; i++)
        free(r->in[i].ids);
    free(r->in);
    json_decref(r->doc);
    memset(r, 0, sizeof(*r));
}

/* A list of token ids (every element an integer id) into in; 0 or -EINVAL/-ENOMEM. */
static int read_ids(const json_t *a, const char *field, struct api_embd_input *in,
                    struct fl_err *err)
{
    const size_t n = json_array_size(a);
    if (n == 0)
        return api_field_bad(err, field, "expected a non-empty list of token ids");
    if (!(in->ids = malloc(sizeof(int32_t) * n)))
        return api_field_nomem(err);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            char f[64];
            snprintf(f, sizeof(f), "%s[%zu]", field, i);
            return api_field_bad(err, f, "expected a token id (an integer >= 0)");
        }
        in->ids[i] = (int32_t)json_integer_value(v);
    }
    in->n_ids = (int)n;
    return 0;
}

/* One input: a string or a list of ids. */
static int read_one(const json_t *v, const char *field, struct api_embd_input *in,
                    struct fl_err *err)
{
    if (json_is_string(v)) {
        in->text = json_string_value(v);
        in->len = json_string_length(v);
        return 0;
    }
    if (json_is_array(v))
        return read_ids(v, field, in, err);
    return api_field_bad(err, field, "expected a string or a list of token ids");
}

/* "input" (or "content"): a string, a list of ids, or a list of strings and lists of ids. */
static int read_inputs(const json_t *p, const char *key, struct api_embd_request *r,
                       struct fl_err *err)
{
    const bool list = json_is_array(p) && json_array_size(p) > 0 &&
                      !json_is_integer(json_array_get(p, 0));
    const size_t n = list ? json_array_size(p) : 1;
    if (!json_is_string(p) && !json_is_array(p))
        return api_field_bad(err, key, "expected a string, a list of strings or token ids");
    if (n > API_MAX_INPUTS) {
        char why[64];
        snprintf(why, sizeof(why), "at most %d inputs in one request", API_MAX_INPUTS);
        return api_field_bad(err, key, why);
    }
    if (!(r->in = calloc(n, sizeof(*r->in))))
        return api_field_nomem(err);
    r->n_in = (int)n;
    if (!list)
        return read_one(p, key, &r->in[0], err);
    for (size_t i = 0; i < n; i++) {
        char f[48];
        snprintf(f, sizeof(f), "%s[%zu]", key, i);
        int rc = read_one(json_array_get(p, i), f, &r->in[i], err);
        if (rc)
            return rc;
    }
    return 0;
}

int api_embd_from_json(json_t *body, bool oai, int normalize, struct api_embd_request *out,
                       struct fl_err *err)
{
    memset(out, 0, sizeof(*out));
    out->doc = json_incref(body);
    if (!json_is_object(body))
        return api_field_bad(err, "the body", "expected a JSON object");
    const json_t *input = json_object_get(body, "input");
    const char *key = "input";
    if (!input && (input = json_object_get(body, "content")) != NULL) {
        key = "content"; /* llama-server's field: its own answer */
        oai = false;
    }
    if (!input)
        return api_field_bad(err, "input", "\"input\" or \"content\" must be provided");
    out->oai = oai;
    out->normalize = normalize;
    const json_t *m = json_object_get(body, "model");
    if (m && !json_is_null(m) && !json_is_string(m))
        return api_field_bad(err, "model", "expected a string");
    out->model = json_string_value(m);
    const json_t *f = json_object_get(body, "encoding_format");
    if (f && !json_is_null(f)) {
        const char *s = json_string_value(f);
        if (!s || (strcmp(s, "float") && strcmp(s, "base64")))
            return api_field_bad(err, "encoding_format", "expected \"float\" or \"base64\"");
        out->base64 = !strcmp(s, "base64");
    }
    int64_t norm;
    int rc = api_field_integer(body, "embd_normalize", -1, 64, &norm, err);
    if (rc < 0)
        return rc;
    if (rc == 1)
        out->normalize = (int)norm, out->has_normalize = true;
    return read_inputs(input, key, out, err);
}

int api_embd_parse(const char *body, size_t n, bool oai, int normalize,
                   struct api_embd_request *out, struct fl_err *err)
{
    json_t *doc = NULL;
    memset(out, 0, sizeof(*out));
    int rc = fl_json_load_bytes(body, n, false, "the body", &doc, err);
    if (rc)
        return rc;
    rc = api_embd_from_json(doc, oai, normalize, out, err);
    json_decref(doc); /* out holds its own reference */
    return rc;
}

void api_embd_normalize(const float *in, float *out, int n, int norm)
{
    double sum = 0;
    if (norm == -1) {
        sum = 1;
    } else if (norm == 0) { /* the largest magnitude maps to an int16's 32760 */
        for (int i = 0; i < n; i++)
            sum = fabs((double)in[i]) > sum ? fabs((double)in[i]) : sum;
        sum /= 32760.0;
    } else if (norm == 2) {
        for (int i = 0; i < n; i++)
            sum += (double)in[i] * (double)in[i];
        sum = sqrt(sum);
    } else {
        for (int i = 0; i < n; i++)
            sum += pow(fabs((double)in[i]), norm);
        sum = pow(sum, 1.0 / norm);
    }
    const float k = sum > 0 ? (float)(1.0 / sum) : 0.0f;
    for (int i = 0; i < n; i++)
        out[i] = in[i] * k;
}

/* A row as a list of numbers, or its float32 bytes (little-endian) in base64. */
static json_t *row_json(const float *row, int n, bool base64)
{
    if (base64) {
        unsigned char *b = malloc(sizeof(float) * (size_t)n);
        if (!b)
            return NULL;
        for (int i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &row[i], sizeof(u));
            for (int k = 0; k < 4; k++)
                b[4 * i + k] = (unsigned char)(u >> (8 * k));
        }
        json_t *s = fl_json_base64(b, sizeof(float) * (size_t)n);
        free(b);
        return s;
    }
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (json_array_append_new(a, fl_json_f32(row[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *oai_item(const struct api_embd_request *r, const float *row, int n_embd, int i)
{
    json_t *o = json_object();
    if (!o || fl_json_set(o, "embedding", row_json(row, n_embd, r->base64)) ||
        fl_json_set(o, "index", json_integer(i)) ||
        fl_json_set(o, "object", json_string("embedding")) ||
        (r->base64 && fl_json_set(o, "encoding_format", json_string("base64")))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *native_item(const float *rows, int n_rows, int n_embd, int i)
{
    json_t *a = json_array(), *o = NULL;
    for (int k = 0; a && k < n_rows; k++)
        if (json_array_append_new(a, row_json(rows + (size_t)k * (size_t)n_embd, n_embd, false)))
            break;
    if (a && (int)json_array_size(a) == n_rows)
        o = json_pack("{s:i, s:o}", "index", i, "embedding", a);
    else
        json_decref(a);
    return o;
}

json_t *api_embd_answer(const struct api_embd_request *r, const char *model,
                        const float *const *rows, const int *n_rows, int n_embd,
                        const int *n_tokens)
{
    json_t *data = json_array();
    int64_t used = 0;
    for (int i = 0; data && i < r->n_in; i++) {
        json_t *it = r->oai ? oai_item(r, rows[i], n_embd, i)
                            : native_item(rows[i], n_rows[i], n_embd, i);
        if (!it || json_array_append_new(data, it)) {
            json_decref(data);
            return NULL;
        }
        used += n_tokens[i];
    }
    if (!data || !r->oai)
        return data;
    return json_pack("{s:s, s:s, s:{s:I, s:I}, s:o}", "model", r->model ? r->model : model,
                     "object", "list", "usage", "prompt_tokens", (json_int_t)used,
                     "total_tokens", (json_int_t)used, "data", data);
}
