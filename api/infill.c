/* infill.c: llama-server's /infill (native.h): the request's code around
 * the gap, and the fill-in-the-middle prompt built from it as llama-server
 * builds it, so a model completes the same prompt token for token. */
#include "api/native.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/request-fields.h"
#include "text/tokenizer.h"

/* --- the request ------------------------------------------------------------------ */

/* input_prefix / input_suffix: a string, token ids, or both mixed. */
static int check_piece(const json_t *b, const char *key, struct fl_err *err)
{
    const json_t *v = json_object_get(b, key);
    if (!v)
        return fl_err_set(err, -EINVAL, "\"%s\" is required", key);
    if (json_is_string(v))
        return 0;
    size_t i;
    const json_t *e;
    if (json_is_array(v)) {
        json_array_foreach(v, i, e) {
            if (!json_is_string(e) && !(json_is_integer(e) && json_integer_value(e) >= 0 &&
                                        json_integer_value(e) <= INT32_MAX))
                return fl_err_set(err, -EINVAL, "%s[%zu]: expected a string or a token id", key, i);
        }
        return 0;
    }
    return api_field_bad(err, key, "expected a string or an array of token ids and strings");
}

/* input_extra: [{"text": string, "filename": string (optional)}, ...] */
static int check_extra(const json_t *b, struct fl_err *err)
{
    const json_t *v = json_object_get(b, "input_extra");
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v))
        return api_field_bad(err, "input_extra", "expected an array of {\"filename\": string, "
                             "\"text\": string}");
    size_t i;
    const json_t *e;
    json_array_foreach(v, i, e) {
        const json_t *name = json_object_get(e, "filename");
        if (!json_is_string(json_object_get(e, "text")))
            return fl_err_set(err, -EINVAL, "input_extra[%zu].text: expected a string", i);
        if (name && !json_is_null(name) && !json_is_string(name))
            return fl_err_set(err, -EINVAL, "input_extra[%zu].filename: expected a string", i);
    }
    return 0;
}

int api_request_parse_infill(json_t *body, struct api_request *out, struct fl_err *err)
{
    memset(out, 0, sizeof(*out));
    if (!json_is_object(body))
        return api_field_bad(err, "body", "expected an object");
    const json_t *p = json_object_get(body, "prompt");
    int rc = p && !json_is_string(p) ? api_field_bad(err, "prompt", "expected a string (the "
                                                     "middle's start)") : 0;
    if (!rc)
        rc = check_piece(body, "input_prefix", err);
    if (!rc)
        rc = check_piece(body, "input_suffix", err);
    if (!rc)
        rc = check_extra(body, err);
    /* the rest is a /completion request whose prompt is the middle's start */
    if (!rc && !p && json_object_set_new(body, "prompt", json_string("")))
        rc = fl_err_set(err, -ENOMEM, "out of memory");
    if (!rc)
        rc = api_request_parse_native(body, out, err);
    if (rc)
        return rc;
    out->infill = true;
    out->input_prefix = json_object_get(body, "input_prefix");
    out->input_suffix = json_object_get(body, "input_suffix");
    out->input_extra = json_object_get(body, "input_extra");
    return 0;
}

/* --- the prompt ------------------------------------------------------------------- */

struct tokens {
    int32_t *v;
    int n, cap;
};

static int put(struct tokens *t, const int32_t *ids, int n)
{
    if (n > t->cap - t->n) {
        if (n > INT32_MAX / 4 - t->n)
            return -ENOMEM;
        int cap = t->cap ? t->cap : 64;
        while (cap < t->n + n)
            cap *= 2;
        int32_t *v = realloc(t->v, sizeof(*v) * (size_t)cap);
        if (!v)
            return -ENOMEM;
        t->v = v;
        t->cap = cap;
    }
    if (n)
        memcpy(t->v + t->n, ids, sizeof(*ids) * (size_t)n);
    t->n += n;
    return 0;
}

static int put_one(struct tokens *t, int32_t id)
{
    return put(t, &id, 1);
}

/* Plain text: no BOS, control-token texts left as text. */
static int put_text(struct tokens *t, const struct fl_tokenizer *tok, const char *s, size_t len)
{
    int32_t *ids = NULL;
    int n = fl_tokenize_alloc(tok, s, len, false, false, &ids);
    if (n >= 0)
        n = put(t, ids, n);
    free(ids);
    return n;
}

/* input_prefix / input_suffix: strings as plain text, ids as they are. */
static int put_piece(struct tokens *t, const struct fl_tokenizer *tok, const json_t *v)
{
    if (json_is_string(v))
        return put_text(t, tok, json_string_value(v), json_string_length(v));
    size_t i;
    const json_t *e;
    json_array_foreach(v, i, e) {
        const int rc = json_is_string(e)
            ? put_text(t, tok, json_string_value(e), json_string_length(e))
            : put_one(t, (int32_t)json_integer_value(e));
        if (rc)
            return rc;
    }
    return 0;
}

/* The repository-level context before the gap (arXiv 2409.12186's
 * pattern, as llama-server writes it): the repository's name, each extra
 * chunk under its file name (or a snippet separator for models without
 * file separators), then the current file's name. */
static int put_extra(struct tokens *t, const struct fl_tokenizer *tok, const json_t *extra)
{
    const int32_t rep = fl_token_fim(tok, FL_FIM_REP), sep = fl_token_fim(tok, FL_FIM_SEP);
    static const char repo[] = "myproject\n", snippet[] = "\n\n--- snippet ---\n\n",
                      current[] = "filename\n";
    int rc = 0;
    if (rep >= 0 && !(rc = put_one(t, rep)))
        rc = put_text(t, tok, repo, sizeof(repo) - 1);
    size_t i;
    const json_t *e;
    json_array_foreach(extra, i, e) {
        const json_t *name = json_object_get(e, "filename"), *text = json_object_get(e, "text");
        if (rc)
            return rc;
        if (sep >= 0) {
            const char *n = json_is_string(name) ? json_string_value(name) : "tmp";
            const size_t len = json_is_string(name) ? json_string_length(name) : 3;
            char *line = malloc(len + 2);
            if (!line)
                return -ENOMEM;
            memcpy(line, n, len);
            line[len] = '\n';
            if (!(rc = put_one(t, sep)))
                rc = put_text(t, tok, line, len + 1);
            free(line);
        } else {
            rc = put_text(t, tok, snippet, sizeof(snippet) - 1);
        }
        if (!rc)
            rc = put_text(t, tok, json_string_value(text), json_string_length(text));
    }
    if (!rc && sep >= 0 && !(rc = put_one(t, sep)))
        rc = put_text(t, tok, current, sizeof(current) - 1);
    return rc;
}

static int min_int(int a, int b) { return a < b ? a : b; }
static int max_int(int a, int b) { return a > b ? a : b; }

/* Assembles [extra][BOS][PRE prefix prompt][SUF suffix] MID (with spm, the
 * suffix part first), each part cut as llama-server cuts it. */
static int assemble(const struct fl_tokenizer *tok, const struct api_infill_limits *lim,
                    struct tokens *pre, struct tokens *suf, const struct tokens *prompt,
                    const struct tokens *extra, struct tokens *out)
{
    /* the prefix and suffix fit a batch, 3:1; extra chunks fill the
     * context that generation leaves */
    const int n_pre = min_int(pre->n, 3 * (lim->n_batch / 4));
    const int n_suf = min_int(suf->n, max_int(0, lim->n_batch / 4 - (2 + prompt->n)));
    const int n_extra = min_int(max_int(0, lim->n_ctx - lim->n_batch - 2 * lim->n_predict),
                                extra->n);
    const int32_t head[2][1] = { { fl_token_fim(tok, FL_FIM_PRE) },
                                 { fl_token_fim(tok, FL_FIM_SUF) } };
    /* (an empty part has no array: no pointer arithmetic on it) */
    const int32_t *parts[2] = { pre->v ? pre->v + pre->n - n_pre : NULL, suf->v };
    const int lens[2] = { n_pre, n_suf };
    const int first = lim->spm ? 1 : 0;
    int rc = extra->v ? put(out, extra->v + extra->n - n_extra, n_extra) : 0;
    if (!rc && fl_tokenizer_add_bos(tok))
        rc = put_one(out, fl_token_bos(tok));
    for (int k = 0; k < 2 && !rc; k++) {
        const int part = k ? 1 - first : first;
        rc = put(out, head[part], 1);
        if (!rc)
            rc = put(out, parts[part], lens[part]);
        if (!rc && part == 0)
            rc = put(out, prompt->v, prompt->n);
    }
    return rc ? rc : put_one(out, fl_token_fim(tok, FL_FIM_MID));
}

int api_infill_tokens(const struct fl_tokenizer *tok, const struct api_request *r,
                      const struct api_infill_limits *lim, int32_t **ids, const char **why)
{
    *why = "out of memory";
    if (!api_infill_supported(tok)) {
        *why = r->infill ? "infill is not supported by this model: it has no fill-in-the-middle "
                           "prefix, suffix and middle tokens"
                         : "suffix: this model has no fill-in-the-middle prefix, suffix and "
                           "middle tokens";
        return -ENOTSUP;
    }
    if (!r->infill && !r->prompt) {
        *why = "suffix: the prompt before it must be text";
        return -EINVAL;
    }
    struct tokens pre = { 0 }, suf = { 0 }, prompt = { 0 }, extra = { 0 }, out = { 0 };
    /* /infill's pieces, or OpenAI's prompt and suffix (the middle starts empty) */
    int rc = r->infill ? put_piece(&pre, tok, r->input_prefix)
                       : put_text(&pre, tok, r->prompt, strlen(r->prompt));
    if (!rc)
        rc = r->infill ? put_piece(&suf, tok, r->input_suffix)
                       : put_text(&suf, tok, r->suffix, strlen(r->suffix));
    if (!rc && r->infill && r->prompt) { /* the middle's start: control-token texts are those tokens */
        int32_t *p = NULL;
        const int n = fl_tokenize_alloc(tok, r->prompt, strlen(r->prompt), false, true, &p);
        rc = n < 0 ? n : put(&prompt, p, n);
        free(p);
    }
    if (!rc) /* with no chunks too: the repository's and the file's names */
        rc = put_extra(&extra, tok, r->infill ? r->input_extra : NULL);
    if (!rc)
        rc = assemble(tok, lim, &pre, &suf, &prompt, &extra, &out);
    free(pre.v), free(suf.v), free(prompt.v), free(extra.v);
    if (rc) {
        free(out.v);
        if (rc != -ENOMEM)
            *why = "the infill input cannot be tokenized";
        return rc;
    }
    *ids = out.v;
    return out.n;
}

bool api_infill_supported(const struct fl_tokenizer *tok)
{
    return fl_token_fim(tok, FL_FIM_PRE) >= 0 && fl_token_fim(tok, FL_FIM_SUF) >= 0 &&
           fl_token_fim(tok, FL_FIM_MID) >= 0;
}

int api_request_prompt_tokens(const struct fl_tokenizer *tok, enum fl_chat_format chat,
                              const struct api_request *r, const struct api_infill_limits *lim,
                              int32_t **ids, const char **why)
{
    return r->infill || r->suffix ? api_infill_tokens(tok, r, lim, ids, why)
                                  : api_request_tokens(tok, chat, r, ids, why);
}
