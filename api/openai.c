/* openai.c: OpenAI-compatible request and response documents (openai.h). */
#include "api/openai.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/native.h"
#include "api/request-fields.h"
#include "api/request-chat.h"
#include "api/request-tools.h"
#include "api/sampler-fields.h"
#include "text/grammar.h"
#include "text/json-schema.h"
#include "text/tokenizer.h"
#include "text/tool-calls.h"

/* --- fields ---------------------------------------------------------------------- */

int api_field_bad(struct fl_err *err, const char *field, const char *what)
{
    return fl_err_set(err, -EINVAL, "%s: %s", field, what);
}

int api_field_nomem(struct fl_err *err)
{
    return fl_err_set(err, -ENOMEM, "out of memory");
}

int api_json_push(json_t *a, json_t *v, struct fl_err *err)
{
    return v && !json_array_append_new(a, v) ? 0 : api_field_nomem(err);
}

json_t *api_join_texts(const json_t *c, const char *delim)
{
    const size_t nd = strlen(delim);
    size_t len = 0, i;
    const json_t *part;
    json_array_foreach(c, i, part)
        len += json_string_length(json_object_get(part, "text")) + nd;
    char *joined = malloc(len + 1);
    if (!joined)
        return NULL;
    size_t at = 0;
    json_array_foreach(c, i, part) {
        const json_t *t = json_object_get(part, "text");
        if (at) {
            memcpy(joined + at, delim, nd);
            at += nd;
        }
        memcpy(joined + at, json_string_value(t), json_string_length(t));
        at += json_string_length(t);
    }
    json_t *s = json_stringn(joined, at);
    free(joined);
    return s;
}

int api_field_number(const json_t *o, const char *key, double lo, double hi, double *v,
                     struct fl_err *err)
{
    const json_t *j = json_object_get(o, key);
    if (!j || json_is_null(j))
        return 0;
    if (!json_is_number(j))
        return api_field_bad(err, key, "expected a number");
    *v = json_number_value(j);
    if (!(*v >= lo && *v <= hi))
        return fl_err_set(err, -EINVAL, "%s: %g is outside [%g, %g]", key, *v, lo, hi);
    return 1;
}

int api_field_integer(const json_t *o, const char *key, double lo, double hi, int64_t *v,
                      struct fl_err *err)
{
    double d = 0;
    int rc = api_field_number(o, key, lo, hi, &d, err);
    if (rc == 1 && d != floor(d))
        return api_field_bad(err, key, "expected an integer");
    if (rc == 1)
        *v = (int64_t)d;
    return rc;
}

int api_field_flag(const json_t *o, const char *key, bool *v, struct fl_err *err)
{
    const json_t *j = json_object_get(o, key);
    if (!j || json_is_null(j))
        return 0;
    if (!json_is_boolean(j))
        return api_field_bad(err, key, "expected true or false");
    *v = json_is_true(j);
    return 1;
}

/* --- messages and prompts ------------------------------------------------------------ */

/* A message's content: a string, or text parts joined as llama-server joins
 * them for a template that reads strings, a newline between parts (put back
 * into the document, which then owns the string). prefill: the last
 * message, an assistant's, which may be continued: llama-server joins its
 * parts with a blank line then (*continued; NULL for a string). */
static int content_text(json_t *msg, const char *path, bool prefill, const char **out,
                        json_t **continued, struct fl_err *err)
{
    json_t *c = json_object_get(msg, "content");
    if (json_is_string(c)) {
        *out = json_string_value(c);
        return 0;
    }
    if (!c || json_is_null(c)) { /* an assistant turn with tool calls only */
        *out = "";
        return 0;
    }
    if (!json_is_array(c))
        return fl_err_set(err, -EINVAL, "%s.content: expected a string or an array of parts", path);
    size_t i;
    json_t *part;
    json_array_foreach(c, i, part) {
        const char *t = fl_json_str(part, "text");
        if (!json_is_object(part) || !t || (fl_json_str(part, "type") &&
                                             strcmp(fl_json_str(part, "type"), "text")))
            return fl_err_set(err, -EINVAL, "%s.content[%zu]: only text parts are understood",
                              path, i);
    }
    if (prefill && !(*continued = api_join_texts(c, "\n\n")))
        return fl_err_set(err, -ENOMEM, "out of memory");
    json_t *s = api_join_texts(c, "\n");
    if (!s || json_object_set_new(msg, "content", s))
        return fl_err_set(err, -ENOMEM, "out of memory");
    *out = json_string_value(json_object_get(msg, "content"));
    return 0;
}

/* An assistant's "reasoning_content" (what llama-server answered it with),
 * which the templates write in place of a <think> in content. */
static int message_reasoning(json_t *msg, const char *path, struct fl_chat_msg *m,
                             struct fl_err *err)
{
    const json_t *rc = json_object_get(msg, "reasoning_content");
    if (!rc || json_is_null(rc) || strcmp(m->role, "assistant"))
        return 0;
    if (!json_is_string(rc))
        return fl_err_set(err, -EINVAL, "%s.reasoning_content: expected a string", path);
    m->reasoning = json_string_value(rc);
    return 0;
}

static int parse_messages(json_t *body, struct api_request *r, struct fl_err *err)
{
    json_t *m = json_object_get(body, "messages");
    if (!json_is_array(m) || json_array_size(m) == 0)
        return api_field_bad(err, "messages", "expected a non-empty array");
    if (json_array_size(m) > API_MAX_MESSAGES)
        return fl_err_set(err, -EINVAL, "messages: more than %d", API_MAX_MESSAGES);
    r->n_msgs = json_array_size(m);
    if (!(r->msgs = calloc(r->n_msgs, sizeof(*r->msgs))))
        return fl_err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < r->n_msgs; i++) {
        json_t *msg = json_array_get(m, i);
        char path[32];
        snprintf(path, sizeof(path), "messages[%zu]", i);
        if (!json_is_object(msg))
            return api_field_bad(err, path, "expected an object");
        r->msgs[i].role = fl_json_str(msg, "role");
        if (!r->msgs[i].role)
            return fl_err_set(err, -EINVAL, "%s.role: expected a string", path);
        const bool prefill = i + 1 == r->n_msgs && !strcmp(r->msgs[i].role, "assistant");
        const bool result = !strcmp(r->msgs[i].role, "tool"); /* as Kimi K3's template reads them */
        r->msgs[i].name = result && fl_json_str(msg, "tool") ? fl_json_str(msg, "tool")
                                                             : fl_json_str(msg, "name");
        r->msgs[i].tool_call_id = fl_json_str(msg, "tool_call_id");
        if (!r->msgs[i].tool_call_id)
            r->msgs[i].tool_call_id = fl_json_str(msg, "id");
        int rc = content_text(msg, path, prefill, &r->msgs[i].content, &r->continued, err);
        if (!rc)
            rc = message_reasoning(msg, path, &r->msgs[i], err);
        if (!rc)
            rc = api_parse_message_calls(msg, path, &r->msgs[i], err);
        if (rc)
            return rc;
    }
    return 0;
}

/* One prompt of a list: its text, or its token ids (into *ids, malloc'ed,
 * *n of them). -EINVAL naming the entry, -ENOMEM. */
static int read_ids(const json_t *p, const char *path, int32_t **ids, int *n, struct fl_err *err)
{
    const size_t len = json_array_size(p);
    if (!json_is_array(p) || len == 0)
        return fl_err_set(err, -EINVAL, "%s: expected a string or an array of token ids", path);
    if (len > INT32_MAX / 4 || !(*ids = malloc(sizeof(int32_t) * len)))
        return fl_err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < len; i++) {
        const json_t *t = json_array_get(p, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX)
            return fl_err_set(err, -EINVAL, "%s[%zu]: expected a token id", path, i);
        (*ids)[i] = (int32_t)json_integer_value(t);
    }
    *n = (int)len;
    return 0;
}

/* llama-server's mixed prompt: token ids and strings in one array (each
 * string tokenized in place), at least one of each. */
static bool is_mixed(const json_t *p)
{
    bool str = false, num = false;
    size_t i;
    const json_t *e;
    json_array_foreach(p, i, e) {
        if (json_is_string(e))
            str = true;
        else if (json_is_integer(e) && json_integer_value(e) >= 0 &&
                 json_integer_value(e) <= INT32_MAX)
            num = true;
        else
            return false;
    }
    return str && num;
}

/* Prompt p (a string, a mixed array, or token ids) as the request's one. */
static int select_one(struct api_request *r, const json_t *p, const char *path,
                      struct fl_err *err)
{
    free(r->prompt_ids);
    r->prompt_ids = NULL;
    r->n_prompt_ids = 0;
    r->prompt = json_string_value(p);
    r->prompt_mixed = is_mixed(p) ? p : NULL;
    return r->prompt || r->prompt_mixed ? 0 : read_ids(p, path, &r->prompt_ids, &r->n_prompt_ids, err);
}

/* A prompt: a string, token ids, or ids and strings mixed; or a list of
 * them (OpenAI's; llama-server answers each). */
static int parse_prompt(json_t *body, struct api_request *r, struct fl_err *err)
{
    json_t *p = json_object_get(body, "prompt");
    r->n_prompts = 1;
    const json_t *first = json_array_get(p, 0);
    if (json_is_string(p) || is_mixed(p) || !(json_is_string(first) || json_is_array(first)))
        return select_one(r, p, "prompt", err);
    const size_t n = json_array_size(p);
    if (n > API_MAX_PROMPTS)
        return fl_err_set(err, -EINVAL, "prompt: more than %d prompts", API_MAX_PROMPTS);
    for (size_t i = 0; i < n; i++) {
        char path[32];
        snprintf(path, sizeof(path), "prompt[%zu]", i);
        const int rc = select_one(r, json_array_get(p, i), path, err);
        if (rc)
            return rc;
    }
    r->n_prompts = (int)n;
    r->prompt_list = n > 1 ? p : NULL;
    return select_one(r, first, "prompt[0]", err);
}

int api_request_select_prompt(struct api_request *r, int i)
{
    const json_t *p = r->prompt_list ? json_array_get(r->prompt_list, (size_t)i) : NULL;
    struct fl_err err;
    return p ? select_one(r, p, "prompt", &err) : 0; /* one prompt: selected already */
}

static int parse_stop(json_t *body, struct api_request *r, struct fl_err *err)
{
    json_t *s = json_object_get(body, "stop");
    if (!s || json_is_null(s))
        return 0;
    if (json_is_string(s)) {
        r->stop[r->n_stop++] = json_string_value(s);
    } else if (json_is_array(s)) {
        if (json_array_size(s) > API_MAX_STOP)
            return fl_err_set(err, -EINVAL, "stop: at most %d strings", API_MAX_STOP);
        for (size_t i = 0; i < json_array_size(s); i++) {
            if (!json_is_string(json_array_get(s, i)))
                return fl_err_set(err, -EINVAL, "stop[%zu]: expected a string", i);
            r->stop[r->n_stop++] = json_string_value(json_array_get(s, i));
        }
    } else {
        return api_field_bad(err, "stop", "expected a string or an array of strings");
    }
    for (int i = 0; i < r->n_stop; i++)
        if (!r->stop[i][0])
            return api_field_bad(err, "stop", "an empty string stops nothing");
    return 0;
}

/* --- the request ---------------------------------------------------------------------- */

static int parse_sampling(const json_t *b, struct api_request *r, struct fl_err *err)
{
    struct fl_sampler_params *s = &r->sampling;
    double v = 0;
    int64_t i = 0;
    int rc;
#define GET(call, has, assign)                                                   \
    if ((rc = (call)) < 0)                                                       \
        return rc;                                                               \
    if (rc == 1) {                                                               \
        r->has = true;                                                           \
        assign;                                                                  \
    }
    GET(api_field_number(b, "temperature", 0, 100, &v, err), has_temperature, s->temperature = (float)v)
    GET(api_field_number(b, "top_p", 0, 1, &v, err), has_top_p, s->top_p = (float)v)
    GET(api_field_number(b, "min_p", 0, 1, &v, err), has_min_p, s->min_p = (float)v)
    GET(api_field_number(b, "typical_p", 0, 1, &v, err), has_typical, s->typical_p = (float)v)
    GET(api_field_integer(b, "top_k", 0, INT32_MAX, &i, err), has_top_k, s->top_k = (int32_t)i)
    GET(api_field_number(b, "presence_penalty", -2, 2, &v, err), has_presence, s->presence_penalty = (float)v)
    GET(api_field_number(b, "frequency_penalty", -2, 2, &v, err), has_frequency,
        s->frequency_penalty = (float)v)
    GET(api_field_number(b, "repeat_penalty", 0, 100, &v, err), has_repeat, s->repeat_penalty = (float)v)
    GET(api_field_integer(b, "repeat_last_n", 0, INT32_MAX, &i, err), has_last_n,
        s->penalty_last_n = (int32_t)i)
    GET(api_field_integer(b, "seed", -9.2e18, 1.8e19, &i, err), has_seed, s->seed = (uint64_t)i)
    GET(api_field_integer(b, "min_keep", 0, INT32_MAX, &i, err), has_min_keep,
        s->min_keep = (int32_t)i)
#undef GET
    return api_sampler_fields_parse(b, s, &r->has_samplers, err);
}


static int parse_limits(const json_t *b, struct api_request *r, struct fl_err *err)
{
    static const char *const keys[] = { "max_completion_tokens", "max_tokens", "n_predict" };
    int64_t v = 0;
    r->max_tokens = -1;
    int rc = api_field_flag(b, "echo", &r->echo, err);
    if (rc < 0)
        return rc;
    if (r->echo && r->kind == API_CHAT)
        return api_field_bad(err, "echo", "echo is for completions (/v1/completions)");
    for (int k = 0; k < 3; k++) {
        rc = api_field_integer(b, keys[k], -1, INT32_MAX, &v, err);
        if (rc < 0)
            return rc;
        if (rc == 1 && v == 0 && !r->echo && !r->native)
            return api_field_bad(err, keys[k], "must be at least 1 (or -1: up to the context; 0 with "
                       "echo: the prompt alone)");
        if (rc == 1 && r->max_tokens < 0)
            r->max_tokens = (int)v;
    }
    int64_t n = 1; /* llama-server's n_cmpl, its "n" alias OpenAI's */
    rc = api_field_integer(b, json_object_get(b, "n_cmpl") ? "n_cmpl" : "n", 1, API_MAX_N, &n, err);
    if (rc < 0)
        return rc;
    r->n = (int)n;
    if ((rc = api_field_flag(b, "stream", &r->stream, err)) < 0)
        return rc;
    if (r->echo && r->stream && api_field_asks(b, "logprobs"))
        return api_field_bad(err, "echo", "echo with logprobs is not streamed (ask without stream)");
    const json_t *so = json_object_get(b, "stream_options");
    if (so && !json_is_null(so) && !json_is_object(so))
        return api_field_bad(err, "stream_options", "expected an object");
    if (json_is_object(so) && api_field_flag(so, "include_usage", &r->include_usage, err) < 0)
        return -EINVAL;
    bool cache = true;
    if (api_field_flag(b, "cache_prompt", &cache, err) < 0)
        return -EINVAL;
    r->no_cache_prompt = !cache;
    /* llama-server's code-completion limits (llama.vim and llama.vscode send them):
     * lines less indented than n_indent end the answer; past t_max_predict_ms a
     * newline does (t_max_prompt_ms it reads and ignores, as llama-server) */
    int64_t indent = 0, ms = 0;
    if (api_field_integer(b, "n_indent", 0, 1 << 20, &indent, err) < 0 ||
        api_field_integer(b, "t_max_predict_ms", 0, INT32_MAX, &ms, err) < 0)
        return -EINVAL;
    r->n_indent = (int)indent;
    r->t_max_predict_ms = (int)ms;
    return api_field_flag(b, "ignore_eos", &r->ignore_eos, err) < 0 ? -EINVAL : 0;
}

/* One logit_bias entry: a token id (a JSON integer, or a decimal string as
 * object keys are) and a bias in [-100, 100] or false (a ban). */
/* A bias: a number in [-100, 100], or false (never). */
static int bias_value(const json_t *v, float *out, struct fl_err *err)
{
    if (json_is_false(v)) {
        *out = -INFINITY;
        return 0;
    }
    if (!json_is_number(v) || !(json_number_value(v) >= -100 && json_number_value(v) <= 100))
        return api_field_bad(err, "logit_bias", "expected biases in [-100, 100] (or false: never)");
    *out = (float)json_number_value(v);
    return 0;
}

/* One entry: an object's key (key) or a pair's first (id), a token id or
 * (llama.cpp's) a text whose tokens all get the bias. */
static int bias_entry(const char *key, const json_t *id, const json_t *v, struct api_request *r,
                      struct fl_err *err)
{
    float bias = 0;
    int rc = bias_value(v, &bias, err);
    const char *text = key ? key : json_string_value(id);
    char *end = NULL;
    errno = 0;
    long long n = !text ? (json_is_integer(id) ? json_integer_value(id) : -1)
                        : strtoll(text, &end, 10);
    if (errno)
        n = -1;
    if (rc)
        return rc;
    if (text && (end == text || *end)) { /* not a number: text (llama.cpp's) */
        if (!*text)
            return api_field_bad(err, "logit_bias", "an empty text");
        r->bias_text[r->n_bias_text++] = (struct api_bias_text){ text, strlen(text), bias };
        return 0;
    }
    if (n < 0 || n > INT32_MAX)
        return api_field_bad(err, "logit_bias", "expected token ids (non-negative integers) or texts");
    r->logit_bias[r->n_logit_bias++] = (struct fl_logit_bias){ (int32_t)n, bias };
    return 0;
}

/* OpenAI's {"ID": bias} or llama.cpp's [[ID, bias], ...], where llama.cpp
 * also takes a text for an ID. */
static int parse_logit_bias(const json_t *b, struct api_request *r, struct fl_err *err)
{
    const json_t *lb = json_object_get(b, "logit_bias");
    if (!lb || json_is_null(lb))
        return 0;
    const bool obj = json_is_object(lb);
    if (!obj && !json_is_array(lb))
        return api_field_bad(err, "logit_bias", "expected an object of token id: bias");
    const size_t n = obj ? json_object_size(lb) : json_array_size(lb);
    if (n > API_MAX_LOGIT_BIAS)
        return api_field_bad(err, "logit_bias", "more than 1024 tokens");
    if (n && (!(r->logit_bias = calloc(n, sizeof(*r->logit_bias))) ||
              !(r->bias_text = calloc(n, sizeof(*r->bias_text)))))
        return -ENOMEM;
    const char *key;
    const json_t *v;
    size_t i;
    int rc = 0;
    if (obj) {
        json_object_foreach((json_t *)lb, key, v)
            if (!rc)
                rc = bias_entry(key, NULL, v, r, err);
    } else {
        json_array_foreach(lb, i, v)
            if (!rc)
                rc = json_is_array(v) && json_array_size(v) == 2
                         ? bias_entry(NULL, json_array_get(v, 0), json_array_get(v, 1), r, err)
                         : api_field_bad(err, "logit_bias", "expected [token id, bias] pairs");
    }
    return rc;
}

/* chat: "logprobs": bool, "top_logprobs": 0..20 with it; completions:
 * "logprobs": 0..20, the number of most likely tokens beside the chosen one. */
static int parse_logprobs(const json_t *b, struct api_request *r, struct fl_err *err)
{
    int64_t top = 0;
    int rc;
    if (r->kind == API_COMPLETION) {
        if ((rc = api_field_integer(b, "logprobs", 0, FL_MAX_TOP_LOGPROBS, &top, err)) < 0)
            return rc;
        r->logprobs = rc == 1;
        r->top_logprobs = (int)top;
        return 0;
    }
    if ((rc = api_field_flag(b, "logprobs", &r->logprobs, err)) < 0 ||
        (rc = api_field_integer(b, "top_logprobs", 0, FL_MAX_TOP_LOGPROBS, &top, err)) < 0)
        return rc;
    if (top > 0 && !r->logprobs)
        return api_field_bad(err, "top_logprobs", "needs \"logprobs\": true");
    r->top_logprobs = (int)top;
    return 0;
}

bool api_field_asks(const json_t *b, const char *key)
{
    const json_t *j = json_object_get(b, key);
    if (!j || json_is_null(j) || json_is_false(j))
        return false;
    if (json_is_number(j))
        return json_number_value(j) != 0;
    if (json_is_string(j))
        return json_string_length(j) != 0;
    if (json_is_array(j))
        return json_array_size(j) != 0;
    return !json_is_object(j) || json_object_size(j) != 0;
}

/* "none" and "auto" ask for no tool call when no tools are given. */
static bool asks_call(const json_t *b, const char *key)
{
    const json_t *j = json_object_get(b, key);
    const char *v = json_string_value(j);
    return j && !json_is_null(j) && !(v && (!strcmp(v, "none") || !strcmp(v, "auto")));
}

static const struct { const char *name; enum api_reasoning_format f; } reasoning_names[] = {
    { "auto", API_REASONING_DEEPSEEK },
    { "deepseek", API_REASONING_DEEPSEEK },
    { "none", API_REASONING_NONE },
    { "deepseek-legacy", API_REASONING_LEGACY },
};

bool api_thinking_effort_ok(const char *s)
{
    return s && (!strcmp(s, "low") || !strcmp(s, "high") || !strcmp(s, "max"));
}

int api_reasoning_format_from_name(const char *name)
{
    for (size_t i = 0; name && i < sizeof(reasoning_names) / sizeof(reasoning_names[0]); i++)
        if (!strcmp(name, reasoning_names[i].name))
            return (int)reasoning_names[i].f;
    return -1;
}

/* llama-server's fields about reasoning: "reasoning_format";
 * "chat_template_kwargs" (of which the built-in templates read
 * enable_thinking, DeepSeek's thinking, GLM-4.7's clear_thinking and
 * MiniMax-M3's thinking_mode; the rest is for Jinja templates, which
 * faultline does not run, and is ignored); OpenAI's "reasoning_effort" ("none": no
 * thinking; a level goes to templates that take one: gpt-oss's). */
static int parse_reasoning(const json_t *b, struct api_request *r, struct fl_err *err)
{
    const json_t *f = json_object_get(b, "reasoning_format");
    if (f && !json_is_null(f) &&
        (r->reasoning_format = api_reasoning_format_from_name(json_string_value(f))) < 0)
        return api_field_bad(err, "reasoning_format", "expected \"auto\", \"deepseek\", \"none\" or "
                   "\"deepseek-legacy\"");
    const json_t *kw = json_object_get(b, "chat_template_kwargs");
    if (kw && !json_is_null(kw) && !json_is_object(kw))
        return api_field_bad(err, "chat_template_kwargs", "expected an object");
    const json_t *think = json_object_get(kw, "enable_thinking");
    if (think && !json_is_boolean(think))
        return api_field_bad(err, "chat_template_kwargs.enable_thinking", "expected a boolean");
    if (think)
        r->thinking = json_is_true(think);
    const json_t *ds = json_object_get(kw, "thinking"); /* DeepSeek V3.1's */
    if (ds && !json_is_boolean(ds))
        return api_field_bad(err, "chat_template_kwargs.thinking", "expected a boolean");
    if (ds)
        r->ds_thinking = json_is_true(ds) ? 1 : -1;
    const json_t *clear = json_object_get(kw, "clear_thinking"); /* GLM-4.7's */
    if (clear && !json_is_boolean(clear))
        return api_field_bad(err, "chat_template_kwargs.clear_thinking", "expected a boolean");
    if (clear)
        r->keep_reasoning = json_is_false(clear);
    const json_t *effort_k3 = json_object_get(kw, "thinking_effort"); /* Kimi K3's (its
                                                                        * words: at render) */
    if (effort_k3 && !json_is_string(effort_k3) && !json_is_null(effort_k3))
        return api_field_bad(err, "chat_template_kwargs.thinking_effort", "expected a string");
    r->thinking_effort = json_is_null(effort_k3) ? "" : json_string_value(effort_k3);
    const json_t *mode = json_object_get(kw, "thinking_mode"); /* MiniMax-M3's */
    if (mode && (r->think_mode = fl_chat_think_mode_from_name(json_string_value(mode))) < 0)
        return api_field_bad(err, "chat_template_kwargs.thinking_mode",
                             "expected \"enabled\", \"disabled\" or \"adaptive\"");
    const json_t *effort = json_object_get(b, "reasoning_effort");
    if (effort && !json_is_null(effort) && !json_is_string(effort))
        return api_field_bad(err, "reasoning_effort", "expected a string");
    const json_t *kw_effort = json_object_get(kw, "reasoning_effort");
    if (kw_effort && !json_is_string(kw_effort))
        return api_field_bad(err, "chat_template_kwargs.reasoning_effort", "expected a string");
    r->reasoning_effort = json_string_value(kw_effort);
    if (effort && json_is_string(effort) && !strcmp(json_string_value(effort), "none"))
        r->thinking = 0;
    else if (effort && json_is_string(effort) && json_string_length(effort))
        r->reasoning_effort = json_string_value(effort);
    const char *bkey = json_object_get(b, "reasoning_budget_tokens") ? "reasoning_budget_tokens"
                                                                     : "thinking_budget_tokens";
    int64_t budget = -1;
    int rc = api_field_integer(b, bkey, -1, 1e9, &budget, err);
    if (rc < 0)
        return rc;
    r->reasoning_budget = (int)budget;
    const json_t *msg = json_object_get(b, "reasoning_budget_message");
    if (msg && !json_is_null(msg) && !(r->reasoning_budget_message = json_string_value(msg)))
        return api_field_bad(err, "reasoning_budget_message", "expected a string");
    return 0;
}

void api_request_reasoning_defaults(struct api_request *r, const struct api_reasoning_defaults *d)
{
    if (r->reasoning_format < 0)
        r->reasoning_format = (int)d->format;
    if (r->thinking < 0)
        r->thinking = d->thinking;
    if (r->reasoning_budget < 0)
        r->reasoning_budget = d->budget;
    if (!r->reasoning_budget_message)
        r->reasoning_budget_message = d->budget_message;
    if (!r->reasoning_effort)
        r->reasoning_effort = d->effort;
    if (r->keep_reasoning < 0)
        r->keep_reasoning = d->keep_reasoning == 1;
    if (!r->ds_thinking)
        r->ds_thinking = d->ds_thinking;
    if (!r->think_mode)
        r->think_mode = d->think_mode;
    if (!r->thinking_effort)
        r->thinking_effort = d->thinking_effort;
    if (d->no_prefill && r->continue_final < 0)
        r->continue_final = FL_CHAT_CONTINUE_NONE;
}

/* What faultline does not generate is refused by name, not ignored: a client
 * must never take plain text for the JSON, tool call or probabilities it
 * asked for. (llama-server without --jinja refuses tools the same way.) */
static int refuse_unsupported(const json_t *b, struct fl_err *err);

void api_request_constraint_defaults(struct api_request *r,
                                     const struct api_constraint_defaults *d)
{
    if (r->json_object || r->json_schema || r->grammar || r->n_tools)
        return;
    r->json_schema = d->schema;
    r->grammar = d->schema ? NULL : d->grammar;
    r->grammar_len = d->schema ? 0 : d->grammar_len;
}

/* llama-server's "grammar": GBNF text ("" or null: none). One constraint
 * at a time: not with a schema, JSON mode or tools (whose calls are held to
 * their own schemas). Compiled once the vocabulary is known
 * (api_request_check_vocab). */
static int parse_grammar(const json_t *b, struct api_request *r, struct fl_err *err)
{
    const json_t *g = json_object_get(b, "grammar");
    if (!g || json_is_null(g) || (json_is_string(g) && !json_string_length(g)))
        return 0;
    if (!json_is_string(g))
        return api_field_bad(err, "grammar", "expected a string of GBNF");
    if (r->json_object || r->json_schema)
        return api_field_bad(err, "grammar", "a grammar and a JSON schema (or JSON mode) both constrain "
                   "the answer: give one");
    if (api_field_asks(b, "tools"))
        return api_field_bad(err, "grammar", "a grammar cannot hold an answer with tools (their calls "
                   "follow the tools' own schemas)");
    r->grammar = json_string_value(g);
    r->grammar_len = json_string_length(g);
    return 0;
}

/* The answer's shape: "response_format" {"type": "text"}, {"type":
 * "json_object"} (JSON mode; with llama-server's "schema" member, that
 * schema), {"type": "json_schema", "json_schema": {"schema": ...}} (OpenAI's
 * structured outputs; "strict" or not, the schema holds), or llama-server's
 * top-level "json_schema". A schema is compiled here to be refused early (a
 * 400 naming the keyword faultline cannot hold an answer to); the scheduler
 * compiles it again for the request it runs. */
static int parse_response_format(const json_t *b, struct api_request *r, struct fl_err *err)
{
    const json_t *rf = json_object_get(b, "response_format");
    const json_t *schema = NULL;
    const char *type = rf && !json_is_null(rf) ? fl_json_str(rf, "type") : "text";
    if (type && !strcmp(type, "json_object") && !(schema = json_object_get(rf, "schema")))
        r->json_object = true;
    else if (type && !strcmp(type, "json_schema") &&
             !(schema = json_object_get(json_object_get(rf, "json_schema"), "schema")))
        return api_field_bad(err, "response_format.json_schema.schema", "expected a JSON schema");
    else if (!type || (strcmp(type, "text") && strcmp(type, "json_object") &&
                       strcmp(type, "json_schema")))
        return api_field_bad(err, "response_format", "{\"type\": \"text\"}, {\"type\": "
                   "\"json_object\"} or {\"type\": \"json_schema\", \"json_schema\": "
                   "{\"schema\": ...}}");
    if (api_field_asks(b, "json_schema")) {
        if (schema)
            return api_field_bad(err, "json_schema", "given twice (also in response_format)");
        schema = json_object_get(b, "json_schema");
    }
    struct fl_schema *compiled;
    if (schema && fl_schema_compile(schema, &compiled, err))
        return -EINVAL;
    if (schema)
        fl_schema_free(compiled);
    r->json_schema = schema;
    return parse_grammar(b, r, err);
}

/* OpenAI's completions "suffix": the text after the gap the answer fills
 * (the model's fill-in-the-middle prompt, api/native.h); the prompt is the
 * text before it. Not with echo (the answer is no continuation), nor on
 * chat or /completion (llama-server's /infill is its way). */
static int parse_suffix(const json_t *b, struct api_request *r, struct fl_err *err)
{
    const json_t *s = json_object_get(b, "suffix");
    if (!s || json_is_null(s) || (json_is_string(s) && !json_string_length(s)))
        return 0;
    if (r->kind != API_COMPLETION || r->native)
        return api_field_bad(err, "suffix", r->native ? "is /v1/completions'; POST /infill (llama-"
                             "server's) fills in the middle" : "is for completions (/v1/completions)");
    if (!json_is_string(s))
        return api_field_bad(err, "suffix", "expected a string");
    if (r->echo)
        return api_field_bad(err, "echo", "an answer that fills in the middle is not the prompt's "
                             "continuation (no echo with a suffix)");
    r->suffix = json_string_value(s);
    return 0;
}

static int refuse_unsupported(const json_t *b, struct fl_err *err)
{
    static const struct { const char *key, *why; } no[] = {
        { "functions", "the legacy function calls are not supported (use tools)" },
        { "post_sampling_probs", "probabilities after the sampler chain are not reported "
                                 "(n_probs gives the model's)" },
        { "lora", "LoRA adapters are not supported" },
    };
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        if (api_field_asks(b, no[i].key))
            return api_field_bad(err, no[i].key, no[i].why);
    if (asks_call(b, "function_call"))
        return api_field_bad(err, "function_call", "the legacy function calls are not supported (use "
                   "tools)");
    int64_t best_of = 1;
    int rc = api_field_integer(b, "best_of", 1, 1e9, &best_of, err);
    if (rc < 0)
        return rc;
    if (best_of != 1)
        return api_field_bad(err, "best_of", "only one completion per request is generated");
    return 0;
}

static int parse_request(json_t *body, enum api_kind kind, bool native, struct api_request *out,
                         struct fl_err *err)
{
    memset(out, 0, sizeof(*out));
    out->kind = kind;
    out->native = native;
    out->reasoning_format = out->thinking = out->reasoning_budget = out->continue_final = -1;
    out->keep_reasoning = -1;
    out->add_generation_prompt = true;
    out->n_prompts = 1;
    out->doc = body;
    json_incref(body);
    int rc = json_is_object(body) ? 0 : api_field_bad(err, "body", "expected an object");
    if (!rc)
        rc = refuse_unsupported(body, err);
    if (!rc)
        rc = kind == API_CHAT ? parse_messages(body, out, err) : parse_prompt(body, out, err);
    if (!rc && json_object_get(body, "model") && !(out->model = fl_json_str(body, "model")))
        rc = api_field_bad(err, "model", "expected a string");
    if (!rc)
        rc = parse_stop(body, out, err);
    if (!rc)
        rc = parse_limits(body, out, err);
    if (!rc && !native && api_field_asks(body, "n_probs"))
        rc = api_field_bad(err, "n_probs", "is /completion's (llama-server's own API); here ask "
                           "for logprobs");
    if (!rc && !native)
        rc = parse_logprobs(body, out, err);
    if (!rc && native)
        rc = api_native_fields(body, out, err);
    if (!rc)
        rc = parse_suffix(body, out, err);
    if (!rc)
        rc = parse_logit_bias(body, out, err);
    if (!rc)
        rc = parse_response_format(body, out, err);
    if (!rc)
        rc = parse_sampling(body, out, err);
    if (!rc && kind == API_CHAT)
        rc = parse_reasoning(body, out, err);
    if (!rc && kind == API_CHAT)
        rc = api_parse_continuation(body, out, err);
    if (!rc && kind == API_CHAT)
        rc = api_parse_tools(body, out, err);
    else if (!rc && (api_field_asks(body, "tools") || asks_call(body, "tool_choice")))
        rc = api_field_bad(err, api_field_asks(body, "tools") ? "tools" : "tool_choice",
                 "tools are for chat completions (/v1/chat/completions)");
    if (rc)
        api_request_free(out);
    return rc;
}

int api_request_parse(json_t *body, enum api_kind kind, struct api_request *out,
                      struct fl_err *err)
{
    return parse_request(body, kind, false, out, err);
}

int api_request_parse_native(json_t *body, struct api_request *out, struct fl_err *err)
{
    return parse_request(body, API_COMPLETION, true, out, err);
}

/* Text entries' tokens onto logit_bias. */
static int bias_texts(struct api_request *r, const struct fl_tokenizer *tok, struct fl_err *err)
{
    for (int t = 0; t < r->n_bias_text; t++) {
        int32_t *ids = NULL;
        const int n = fl_tokenize_alloc(tok, r->bias_text[t].text, r->bias_text[t].len, false,
                                        false, &ids);
        if (n < 0)
            return fl_err_set(err, n == -ENOMEM ? -ENOMEM : -EINVAL, "logit_bias: a text that "
                              "cannot be tokenized");
        struct fl_logit_bias *grown = r->n_logit_bias + n <= API_MAX_LOGIT_BIAS
            ? realloc(r->logit_bias, sizeof(*grown) * (size_t)(r->n_logit_bias + n + 1)) : NULL;
        if (grown) {
            r->logit_bias = grown;
            for (int i = 0; i < n; i++)
                grown[r->n_logit_bias++] = (struct fl_logit_bias){ ids[i], r->bias_text[t].bias };
        }
        free(ids);
        if (!grown)
            return r->n_logit_bias + n > API_MAX_LOGIT_BIAS
                ? api_field_bad(err, "logit_bias", "its texts make more than 1024 tokens")
                : fl_err_set(err, -ENOMEM, "out of memory");
    }
    r->n_bias_text = 0; /* settled: a second check adds nothing */
    return 0;
}

int api_request_check_vocab(struct api_request *r, const struct fl_tokenizer *tok,
                            struct fl_err *err)
{
    const int rc = bias_texts(r, tok, err);
    if (rc)
        return rc;
    const int32_t n_vocab = fl_n_vocab(tok);
    for (int i = 0; i < r->n_logit_bias; i++)
        if (r->logit_bias[i].id >= n_vocab)
            return fl_err_set(err, -EINVAL, "logit_bias: token %d is not in the vocabulary (%d "
                              "tokens)", r->logit_bias[i].id, n_vocab);
    return r->grammar ? fl_grammar_check(r->grammar, r->grammar_len, tok, err) : 0;
}

void api_request_free(struct api_request *r)
{
    api_free_tools(r);
    free(r->msgs);
    free(r->logit_bias);
    free(r->bias_text);
    free(r->prompt_ids);
    json_decref(r->continued);
    json_decref(r->doc);
    memset(r, 0, sizeof(*r));
}

int api_request_max_tokens(const struct api_request *r, int dflt, int n_ctx)
{
    if (r->max_tokens == 0 && (r->echo || r->native))
        return 0; /* the prompt alone */
    return r->max_tokens > 0 ? r->max_tokens : dflt > 0 ? dflt : n_ctx;
}

void api_request_sampling(const struct api_request *r, const struct fl_sampler_params *defaults,
                          struct fl_sampler_params *out)
{
    const struct fl_sampler_params *s = &r->sampling;
    *out = *defaults;
    if (r->has_temperature)
        out->temperature = s->temperature;
    if (r->has_top_k)
        out->top_k = s->top_k;
    if (r->has_top_p)
        out->top_p = s->top_p;
    if (r->has_min_p)
        out->min_p = s->min_p;
    if (r->has_typical)
        out->typical_p = s->typical_p;
    if (r->has_repeat)
        out->repeat_penalty = s->repeat_penalty;
    if (r->has_presence)
        out->presence_penalty = s->presence_penalty;
    if (r->has_frequency)
        out->frequency_penalty = s->frequency_penalty;
    if (r->has_last_n)
        out->penalty_last_n = s->penalty_last_n;
    if (r->has_seed)
        out->seed = s->seed;
    if (r->has_min_keep)
        out->min_keep = s->min_keep;
    if (r->has_order) {
        out->n_order = s->n_order;
        memcpy(out->order, s->order, sizeof(out->order));
    }
    api_sampler_fields_apply(s, r->has_samplers, out);
}

/* A mixed prompt's tokens: ids as they are, strings tokenized (BOS, where
 * the vocabulary adds one, only when the first entry is a string), as
 * llama-server's tokenize_mixed. */
static int tokenize_mixed(const struct fl_tokenizer *tok, const json_t *p, int32_t **ids)
{
    int32_t *all = NULL;
    int n = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(p, i, e) {
        int32_t one = (int32_t)json_integer_value(e), *part = &one;
        const int k = json_is_string(e) ? fl_tokenize_alloc(tok, json_string_value(e),
                                                            json_string_length(e), i == 0, true,
                                                            &part)
                                        : 1;
        int32_t *grown = k >= 0 && n <= INT32_MAX / 4 - k
                             ? realloc(all, sizeof(int32_t) * (size_t)(n + k + 1)) : NULL;
        if (grown) {
            memcpy(grown + n, part, sizeof(int32_t) * (size_t)k);
            all = grown;
            n += k;
        }
        if (part != &one)
            free(part);
        if (!grown) {
            free(all);
            return k < 0 ? k : -ENOMEM;
        }
    }
    *ids = all;
    return n;
}

int api_request_tokens(const struct fl_tokenizer *tok, enum fl_chat_format chat,
                       const struct api_request *r, int32_t **ids, const char **why)
{
    *why = "the prompt cannot be tokenized";
    if (r->kind == API_COMPLETION && r->prompt_ids) {
        *ids = malloc(sizeof(int32_t) * (size_t)r->n_prompt_ids);
        if (!*ids)
            return -ENOMEM;
        memcpy(*ids, r->prompt_ids, sizeof(int32_t) * (size_t)r->n_prompt_ids);
        return r->n_prompt_ids;
    }
    if (r->kind == API_COMPLETION && r->prompt_mixed)
        return tokenize_mixed(tok, r->prompt_mixed, ids);
    /* control tokens' texts become those tokens, as llama-server reads a
     * completion's prompt: a client that writes the chat format itself */
    if (r->kind == API_COMPLETION)
        return fl_tokenize_alloc(tok, r->prompt, strlen(r->prompt), true, true, ids);
    if (chat == FL_CHAT_UNKNOWN) {
        *why = "no chat format is known for this model (--chat-template NAME)";
        return -EINVAL;
    }
    char *text = NULL;
    int n = api_render_chat(chat, r, &text, why);
    if (n < 0) {
        free(text);
        return n;
    }
    n = fl_tokenize_alloc(tok, text, (size_t)n, true, true, ids);
    free(text);
    return n;
}
