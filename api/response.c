/* response.c: OpenAI-compatible completion, chunk and error documents
 * (openai.h): what faultline answers, as the server and batch files write
 * it. */
#include "api/openai.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/request-fields.h"
#include "api/request-tools.h"
#include "text/tokenizer.h"
#include "text/tool-calls.h"

/* --- responses ------------------------------------------------------------------------------ */

json_t *api_piece_json(const struct fl_tokenizer *tok, int32_t id, json_t **bytes)
{
    char buf[256];
    int n = tok ? fl_token_to_piece(tok, id, buf, sizeof(buf), false, true) : 0;
    n = n > 0 && (size_t)n <= sizeof(buf) ? n : 0;
    if (bytes) {
        *bytes = json_array();
        for (int i = 0; i < n; i++)
            json_array_append_new(*bytes, json_integer((unsigned char)buf[i]));
    }
    return fl_json_stringn(buf, (size_t)n);
}

/* chat's entry: {"token", "logprob", "bytes"} (+ "top_logprobs" when top). */
static json_t *chat_entry(const struct fl_tokenizer *tok, const struct fl_logprob *p,
                          const struct fl_token_logprob *top)
{
    json_t *bytes = NULL, *o = json_object();
    fl_json_set(o, "token", api_piece_json(tok, p->id, &bytes));
    fl_json_set(o, "logprob", fl_json_f32(p->logprob));
    fl_json_set(o, "bytes", bytes);
    if (top) {
        json_t *a = json_array();
        for (int k = 0; k < top->n_top; k++)
            json_array_append_new(a, chat_entry(tok, &top->top[k], NULL));
        fl_json_set(o, "top_logprobs", a);
    }
    return o;
}

json_t *api_logprobs_json(enum api_kind kind, const struct fl_tokenizer *tok,
                          const struct fl_token_logprob *v, int n)
{
    if (kind == API_CHAT) {
        json_t *content = json_array();
        for (int i = 0; i < n; i++)
            json_array_append_new(content, chat_entry(tok, &v[i].token, &v[i]));
        return json_pack("{s:o}", "content", content);
    }
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (int i = 0; i < n; i++) {
        json_array_append_new(tokens, api_piece_json(tok, v[i].token.id, NULL));
        json_array_append_new(lps, fl_json_f32(v[i].token.logprob));
        json_t *top = json_object();
        for (int k = 0; k < v[i].n_top; k++) { /* equal pieces: the likelier one */
            json_t *key = api_piece_json(tok, v[i].top[k].id, NULL);
            const char *ks = json_string_value(key);
            if (ks && !json_object_get(top, ks))
                fl_json_set(top, ks, fl_json_f32(v[i].top[k].logprob));
            json_decref(key);
        }
        if (isnan(v[i].token.logprob)) { /* echo's first token: nothing predicts it */
            json_decref(top);
            top = json_null();
        }
        json_array_append_new(tops, top);
        json_array_append_new(offs, json_integer((json_int_t)v[i].text_start));
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", lps,
                     "top_logprobs", tops, "text_offset", offs);
}

static json_t *choice_logprobs(enum api_kind kind, const struct fl_tokenizer *tok,
                               const struct fl_token_logprob *v, int n)
{
    return v ? api_logprobs_json(kind, tok, v, n) : json_null();
}

/* OpenAI's usage object, with prompt_tokens_details.cached_tokens as
 * llama-server and OpenAI report prompt caching. */
static json_t *usage_json(int prompt, int completion, int cached)
{
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", prompt, "completion_tokens",
                     completion, "total_tokens", prompt + completion, "prompt_tokens_details",
                     "cached_tokens", cached);
}

/* The chat answer's message: its text, or with tools the content (null
 * when only calls) and the calls. */
static json_t *chat_message(const struct api_completion *c)
{
    const struct fl_tool_answer *a = c->tools;
    if (!a)
        return json_pack("{s:s, s:o}", "role", "assistant", "content",
                         fl_json_stringn(c->text, c->len));
    json_t *m = json_pack("{s:s, s:o}", "role", "assistant", "content",
                          a->content_len || !a->n_calls ? fl_json_stringn(a->content, a->content_len)
                                                        : json_null());
    if (m && a->n_calls && fl_json_set(m, "tool_calls", api_tool_calls_json(a, c->id))) {
        json_decref(m);
        return NULL;
    }
    return m;
}

/* ... and its reasoning, as llama-server writes it: only when there is some. */
static json_t *chat_answer(const struct api_completion *c)
{
    json_t *m = chat_message(c);
    if (m && c->reasoning_len &&
        fl_json_set(m, "reasoning_content", fl_json_stringn(c->reasoning, c->reasoning_len))) {
        json_decref(m);
        return NULL;
    }
    return m;
}

char *api_prompt_text(const struct api_request *r, const struct fl_tokenizer *tok,
                      const int32_t *ids, int n, size_t *len)
{
    if (r->prompt && !r->logprobs) {
        *len = strlen(r->prompt);
        return strdup(r->prompt);
    }
    char *t = NULL;
    FILE *f = open_memstream(&t, len);
    for (int i = 0; f && i < n; i++) {
        char piece[256];
        const int k = fl_token_to_piece(tok, ids[i], piece, sizeof(piece), false, false);
        if (k > 0 && (size_t)k <= sizeof(piece))
            fwrite(piece, 1, (size_t)k, f);
    }
    if (!f || fclose(f)) {
        free(t);
        return NULL;
    }
    return t;
}

/* echo's logprobs: the prompt's tokens, then the answer's, each offset into
 * the prompt's text and the answer after it. NULL: out of memory. */
static struct fl_token_logprob *echo_logprobs(const struct api_completion *c)
{
    const int n = c->prompt_tokens + c->n_logprobs;
    struct fl_token_logprob *v = malloc(sizeof(*v) * (size_t)(n ? n : 1));
    if (!v)
        return NULL;
    size_t at = 0;
    for (int i = 0; i < c->prompt_tokens; i++) {
        v[i] = c->prompt_logprobs[i];
        char piece[256];
        const int k = fl_token_to_piece(c->tok, v[i].token.id, piece, sizeof(piece), false, false);
        v[i].text_start = at;
        at += k > 0 ? (size_t)k : 0;
        v[i].text_end = at;
    }
    for (int i = 0; i < c->n_logprobs; i++) {
        v[c->prompt_tokens + i] = c->logprobs[i];
        v[c->prompt_tokens + i].text_start += c->prompt_len;
        v[c->prompt_tokens + i].text_end += c->prompt_len;
    }
    return v;
}

/* A completion's "text": with echo, the prompt's first. */
static json_t *completion_text(const struct api_completion *c)
{
    if (!c->echo)
        return fl_json_stringn(c->text, c->len);
    char *t = malloc(c->prompt_len + c->len + 1);
    if (!t)
        return NULL;
    memcpy(t, c->prompt, c->prompt_len);
    memcpy(t + c->prompt_len, c->text, c->len);
    json_t *s = fl_json_stringn(t, c->prompt_len + c->len);
    free(t);
    return s;
}

json_t *api_completion_json(const struct api_completion *c)
{
    json_t *lp;
    if (c->echo && c->prompt_logprobs) { /* given only with logprobs asked */
        struct fl_token_logprob *v = echo_logprobs(c);
        lp = v ? api_logprobs_json(c->kind, c->tok, v, c->prompt_tokens + c->n_logprobs) : NULL;
        free(v);
    } else {
        lp = choice_logprobs(c->kind, c->tok, c->logprobs, c->n_logprobs);
    }
    json_t *choice = c->kind == API_CHAT
        ? json_pack("{s:i, s:o, s:o, s:s}", "index", 0, "message", chat_answer(c), "logprobs", lp,
                    "finish_reason", c->tools && c->tools->n_calls ? "tool_calls" : c->finish_reason)
        : json_pack("{s:i, s:o, s:o, s:s}", "index", 0, "text", completion_text(c),
                    "logprobs", lp, "finish_reason", c->finish_reason);
    return json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o}", "id", c->id, "object",
                     c->kind == API_CHAT ? "chat.completion" : "text_completion", "created",
                     (json_int_t)c->created, "model", c->model, "choices", choice, "usage",
                     usage_json(c->prompt_tokens, c->completion_tokens, c->cached_tokens));
}

/* usage[key] += more */
static int add_usage(json_t *u, const char *key, json_int_t more)
{
    return json_object_set_new(u, key, json_integer(json_integer_value(json_object_get(u, key)) +
                                                    more));
}

int api_completion_add_choice(json_t *doc, json_t *other, int index, bool new_prompt)
{
    json_t *choices = json_object_get(doc, "choices");
    json_t *c = json_array_get(json_object_get(other, "choices"), 0);
    json_t *u = json_object_get(doc, "usage"), *ou = json_object_get(other, "usage");
    const json_int_t more = json_integer_value(json_object_get(ou, "completion_tokens"));
    const json_int_t prompt = new_prompt ? json_integer_value(json_object_get(ou, "prompt_tokens")) : 0;
    int rc = !json_is_array(choices) || !json_is_object(c) || !json_is_object(u) ? -EINVAL : 0;
    if (!rc)
        rc = json_object_set_new(c, "index", json_integer(index)) || json_array_append(choices, c) ||
                     add_usage(u, "completion_tokens", more) || add_usage(u, "prompt_tokens", prompt) ||
                     add_usage(u, "total_tokens", more + prompt)
                 ? -ENOMEM
                 : 0;
    json_decref(other);
    return rc;
}

json_t *api_completion_merge(json_t **choices, int n, int per_prompt)
{
    json_t *doc = n > 0 ? choices[0] : NULL;
    int rc = doc ? 0 : -EINVAL;
    for (int c = 1; c < n; c++) {
        if (!rc && choices[c])
            rc = api_completion_add_choice(doc, choices[c], c, c % per_prompt == 0);
        else if (!rc)
            rc = -EINVAL;
        else
            json_decref(choices[c]);
    }
    if (rc)
        json_decref(doc);
    return rc ? NULL : doc;
}

json_t *api_chunk_json(const struct api_chunk *c)
{
    json_t *text = c->text ? fl_json_stringn(c->text, c->len) : NULL;
    json_t *choice;
    if (c->kind == API_CHAT) {
        json_t *delta = json_object();
        if (c->role)
            fl_json_set(delta, "role", json_string("assistant"));
        if (text)
            fl_json_set(delta, c->reasoning ? "reasoning_content" : "content", text);
        if (c->call)
            fl_json_set(delta, "tool_calls",
                        json_pack("[o]", api_tool_call_delta_json(c->id, c->call - 1, c->call_name,
                                                                   c->call_args, c->call_args_len)));
        choice = json_pack("{s:i, s:o, s:o, s:o}", "index", c->index, "delta", delta, "logprobs",
                           choice_logprobs(c->kind, c->tok, c->logprobs, c->n_logprobs),
                           "finish_reason",
                           c->finish_reason ? json_string(c->finish_reason) : json_null());
    } else {
        choice = json_pack("{s:i, s:o, s:o, s:o}", "index", c->index, "text",
                           text ? text : json_string(""), "logprobs",
                           choice_logprobs(c->kind, c->tok, c->logprobs, c->n_logprobs),
                           "finish_reason",
                           c->finish_reason ? json_string(c->finish_reason) : json_null());
    }
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", c->id, "object",
                          c->kind == API_CHAT ? "chat.completion.chunk" : "text_completion",
                          "created", (json_int_t)c->created, "model", c->model, "choices",
                          choice);
    if (o && c->usage) { /* stream_options.include_usage: the last chunk, no choices */
        json_array_clear(json_object_get(o, "choices"));
        fl_json_set(o, "usage", usage_json(c->prompt_tokens, c->completion_tokens,
                                           c->cached_tokens));
    }
    return o;
}

json_t *api_error_json(const char *type, const char *code, const char *message)
{
    return json_pack("{s:{s:o, s:s, s:s}}", "error", "message", fl_json_string(message), "type",
                     type, "code", code);
}

