/* anthropic.c: Anthropic's Messages API (anthropic.h): its request as an
 * OpenAI chat body, and its message and error objects. */
#include "api/anthropic.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/request-fields.h"

/* A client's word for an error line: at most 40 bytes, control bytes as '?'
 * (an error is one line). */
static const char *printable(const char *s, char buf[static 48])
{
    size_t n = 0;
    for (; s[n] && n < 40; n++)
        buf[n] = (unsigned char)s[n] < 0x20 || s[n] == 0x7f ? '?' : s[n];
    buf[n] = 0;
    return buf;
}

/* A text block's text, or NULL (not a text block). */
static const char *block_text(const json_t *b)
{
    const char *type = fl_json_str(b, "type");
    return type && !strcmp(type, "text") ? fl_json_str(b, "text") : NULL;
}

/* A system text. Claude Code's first block is "x-anthropic-billing-header:
 * ...; cch=XXXXX;", whose five characters after cch= change from request to
 * request: the prompt cache would find nothing past the prompt's first
 * tokens. They are written fffff, as llama-server writes them. */
static json_t *system_text(const char *t)
{
    static const char head[] = "x-anthropic-billing-header:";
    const char *cch = strncmp(t, head, sizeof(head) - 1) ? NULL : strstr(t + sizeof(head) - 1, "cch=");
    if (!cch || strlen(cch + 4) < 6 || cch[9] != ';')
        return json_string(t);
    char *c = strdup(t);
    if (c)
        memset(c + (cch - t) + 4, 'f', 5);
    json_t *s = c ? json_string(c) : NULL;
    free(c);
    return s;
}

/* A system message of a system text: a string or text blocks (path names
 * it in an error). joined: the blocks as one string, run together as
 * llama-server joins the request's "system"; else text parts, as it passes
 * a system message's blocks on (a chat request joins parts by lines). */
static int put_system_text(const json_t *s, const char *path, bool joined, json_t *msgs,
                           struct fl_err *err)
{
    if (json_is_string(s))
        return api_json_push(msgs, json_pack("{s:s, s:o}", "role", "system", "content",
                                             system_text(json_string_value(s))), err);
    if (!json_is_array(s))
        return api_field_bad(err, path, "expected a string or an array of text blocks");
    json_t *parts = json_array();
    size_t i;
    const json_t *b;
    json_array_foreach(s, i, b) {
        const char *t = block_text(b);
        if (!t) {
            json_decref(parts);
            return fl_err_set(err, -EINVAL, "%s[%zu]: expected a text block", path, i);
        }
        if (api_json_push(parts, json_pack("{s:s, s:o}", "type", "text", "text", system_text(t)),
                          err)) {
            json_decref(parts);
            return -ENOMEM;
        }
    }
    json_t *content = joined ? api_join_texts(parts, "") : json_incref(parts);
    json_decref(parts);
    return api_json_push(msgs, json_pack("{s:s, s:o}", "role", "system", "content", content), err);
}

/* "system": a string or text blocks. */
static int put_system(const json_t *body, json_t *msgs, struct fl_err *err)
{
    const json_t *s = json_object_get(body, "system");
    return !s || json_is_null(s) ? 0 : put_system_text(s, "system", true, msgs, err);
}

/* A tool_result's content: a string, or text blocks joined. */
static int result_text(const json_t *c, const char *path, json_t **out, struct fl_err *err)
{
    if (!c || json_is_null(c) || json_is_string(c)) {
        *out = c && json_is_string(c) ? json_incref((json_t *)c) : json_string("");
        return *out ? 0 : api_field_nomem(err);
    }
    if (!json_is_array(c))
        return api_field_bad(err, path, "expected a string or an array of text blocks");
    json_t *parts = json_array();
    size_t i;
    const json_t *b;
    json_array_foreach(c, i, b) {
        const char *t = block_text(b);
        if (!t || api_json_push(parts, json_pack("{s:s, s:s}", "type", "text", "text", t), err)) {
            json_decref(parts);
            return t ? -ENOMEM : fl_err_set(err, -EINVAL, "%s[%zu]: only text blocks are "
                                            "understood", path, i);
        }
    }
    *out = parts;
    return 0;
}

/* One message's blocks, sorted into the OpenAI message's text parts,
 * reasoning and tool calls, and the tool messages of its results. */
struct turn {
    json_t *parts, *calls, *results;
    json_t *reasoning; /* a string, NULL: none */
};

static int put_tool_use(const json_t *b, const char *path, struct turn *t, struct fl_err *err)
{
    const char *id = fl_json_str(b, "id"), *name = fl_json_str(b, "name");
    const json_t *input = json_object_get(b, "input");
    if (!id || !name || (input && !json_is_object(input)))
        return api_field_bad(err, path, "a tool_use block has a string id and name and an "
                             "object input");
    char *args = input ? json_dumps(input, JSON_COMPACT) : strdup("{}");
    json_t *c = args ? json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function",
                                 "function", "name", name, "arguments", args) : NULL;
    free(args);
    return api_json_push(t->calls, c, err);
}

static int put_tool_result(const json_t *b, const char *path, struct turn *t, struct fl_err *err)
{
    const char *id = fl_json_str(b, "tool_use_id");
    if (!id)
        return api_field_bad(err, path, "a tool_result block has a string tool_use_id");
    char cpath[128];
    snprintf(cpath, sizeof(cpath), "%s.content", path);
    json_t *content = NULL;
    const int rc = result_text(json_object_get(b, "content"), cpath, &content, err);
    if (rc)
        return rc;
    return api_json_push(t->results, json_pack("{s:s, s:s, s:o}", "role", "tool", "tool_call_id",
                                               id, "content", content), err);
}

static int put_block(const json_t *b, const char *path, bool assistant, struct turn *t,
                     struct fl_err *err)
{
    const char *type = fl_json_str(b, "type");
    if (!json_is_object(b) || !type)
        return api_field_bad(err, path, "expected a content block with a type");
    if (!strcmp(type, "text")) {
        const char *text = fl_json_str(b, "text");
        return text ? api_json_push(t->parts, json_pack("{s:s, s:s}", "type", "text", "text", text),
                                    err)
                    : api_field_bad(err, path, "a text block has a string text");
    }
    if (!strcmp(type, "thinking") && assistant) { /* the reasoning the model wrote before */
        const char *th = fl_json_str(b, "thinking");
        if (!th)
            return api_field_bad(err, path, "a thinking block has a string thinking");
        json_t *r = json_string(th);
        if (t->reasoning && r) { /* several: one text, in order */
            const size_t a = json_string_length(t->reasoning), n = json_string_length(r);
            char *both = malloc(a + n + 1);
            if (both) {
                memcpy(both, json_string_value(t->reasoning), a);
                memcpy(both + a, th, n + 1);
            }
            json_decref(r);
            r = both ? json_stringn(both, a + n) : NULL;
            free(both);
        }
        json_decref(t->reasoning);
        t->reasoning = r;
        return r ? 0 : api_field_nomem(err);
    }
    if (!strcmp(type, "redacted_thinking") && assistant)
        return 0; /* encrypted for Anthropic's models: nothing a local model reads */
    if (!strcmp(type, "tool_use") && assistant)
        return put_tool_use(b, path, t, err);
    if (!strcmp(type, "tool_result") && !assistant)
        return put_tool_result(b, path, t, err);
    char what[128], word[48];
    if (!strcmp(type, "image") || !strcmp(type, "document"))
        snprintf(what, sizeof(what), "%s input is not supported (text models)", type);
    else
        snprintf(what, sizeof(what), "%s blocks are not understood in %s turns",
                 printable(type, word), assistant ? "assistant" : "user");
    return api_field_bad(err, path, what);
}

/* One message as OpenAI's: tool results first (Anthropic puts them at the
 * start of the user turn that answers the calls), then the turn itself. */
static int put_message(const json_t *m, size_t i, json_t *msgs, struct fl_err *err)
{
    char path[64];
    snprintf(path, sizeof(path), "messages[%zu]", i);
    const char *role = fl_json_str(m, "role");
    if (json_is_object(m) && role && !strcmp(role, "system")) { /* Claude Code sends some */
        char cpath[80];
        snprintf(cpath, sizeof(cpath), "%s.content", path);
        return put_system_text(json_object_get(m, "content"), cpath, false, msgs, err);
    }
    if (!json_is_object(m) || !role || (strcmp(role, "user") && strcmp(role, "assistant")))
        return api_field_bad(err, path, "expected {\"role\": \"user\", \"assistant\" or "
                             "\"system\", \"content\"}");
    const bool assistant = !strcmp(role, "assistant");
    const json_t *c = json_object_get(m, "content");
    if (json_is_string(c))
        return api_json_push(msgs, json_pack("{s:s, s:O}", "role", role, "content", c), err);
    if (!json_is_array(c))
        return fl_err_set(err, -EINVAL, "%s.content: expected a string or an array of blocks",
                          path);
    struct turn t = { json_array(), json_array(), json_array(), NULL };
    int rc = t.parts && t.calls && t.results ? 0 : api_field_nomem(err);
    size_t j;
    const json_t *b;
    json_array_foreach(c, j, b) {
        char bpath[96];
        snprintf(bpath, sizeof(bpath), "%s.content[%zu]", path, j);
        if (!rc)
            rc = put_block(b, bpath, assistant, &t, err);
    }
    const json_t *r;
    json_array_foreach(t.results, j, r) {
        if (!rc)
            rc = api_json_push(msgs, json_incref((json_t *)r), err);
    }
    const bool turn = json_array_size(t.parts) || json_array_size(t.calls) || t.reasoning;
    json_t *o = !rc && turn ? json_pack("{s:s, s:O}", "role", role, "content", t.parts) : NULL;
    if (o && json_array_size(t.calls))
        fl_json_set(o, "tool_calls", json_incref(t.calls));
    if (o && t.reasoning)
        fl_json_set(o, "reasoning_content", json_incref(t.reasoning));
    if (!rc && turn)
        rc = api_json_push(msgs, o, err);
    json_decref(t.parts), json_decref(t.calls), json_decref(t.results), json_decref(t.reasoning);
    return rc;
}

static int put_tools(const json_t *body, json_t *oai, struct fl_err *err)
{
    const json_t *tools = json_object_get(body, "tools");
    if (!tools || json_is_null(tools))
        return 0;
    if (!json_is_array(tools))
        return api_field_bad(err, "tools", "expected an array");
    json_t *list = json_array();
    int rc = list ? 0 : api_field_nomem(err);
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        char path[32];
        snprintf(path, sizeof(path), "tools[%zu]", i);
        const char *type = fl_json_str(t, "type"), *name = fl_json_str(t, "name");
        const json_t *schema = json_object_get(t, "input_schema");
        char word[48];
        if (rc)
            break;
        if (type && strcmp(type, "custom")) /* web_search_..., bash_..., computer_... */
            rc = fl_err_set(err, -EINVAL, "%s: Anthropic's server tool %s is not available "
                            "here", path, printable(type, word));
        else if (!name || !json_is_object(schema))
            rc = api_field_bad(err, path, "expected {\"name\", \"description\", "
                               "\"input_schema\": {...}}");
        else
            rc = api_json_push(list, json_pack("{s:s, s:{s:s, s:s, s:O}}", "type", "function",
                                               "function", "name", name, "description",
                                               fl_json_str(t, "description")
                                                   ? fl_json_str(t, "description") : "",
                                               "parameters", schema), err);
    }
    if (!rc && fl_json_set(oai, "tools", list))
        return api_field_nomem(err);
    if (rc)
        json_decref(list);
    return rc;
}

static int put_tool_choice(const json_t *body, json_t *oai, struct fl_err *err)
{
    const json_t *tc = json_object_get(body, "tool_choice");
    if (!tc || json_is_null(tc))
        return 0;
    const char *type = fl_json_str(tc, "type"), *name = fl_json_str(tc, "name");
    json_t *v = NULL;
    if (!type)
        return api_field_bad(err, "tool_choice", "expected {\"type\": \"auto\", \"any\", \"tool\" "
                             "or \"none\"}");
    if (!strcmp(type, "auto") || !strcmp(type, "none"))
        v = json_string(type);
    else if (!strcmp(type, "any"))
        v = json_string("required");
    else if (!strcmp(type, "tool") && name)
        v = json_pack("{s:s, s:{s:s}}", "type", "function", "function", "name", name);
    else
        return api_field_bad(err, "tool_choice", "expected type auto, any, none, or tool with a "
                             "name");
    const json_t *one = json_object_get(tc, "disable_parallel_tool_use");
    if (json_is_true(one) && fl_json_set(oai, "parallel_tool_calls", json_false()))
        return api_field_nomem(err);
    return fl_json_set(oai, "tool_choice", v) ? api_field_nomem(err) : 0;
}

/* "thinking": {"type": "enabled", "budget_tokens": N} or {"type": "disabled"}. */
static int put_thinking(const json_t *body, json_t *oai, struct fl_err *err)
{
    const json_t *th = json_object_get(body, "thinking");
    if (!th || json_is_null(th))
        return 0;
    const char *type = fl_json_str(th, "type");
    if (!type)
        return api_field_bad(err, "thinking", "expected {\"type\": \"enabled\" or \"disabled\"}");
    if (!strcmp(type, "disabled"))
        return fl_json_set(oai, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", 0))
                   ? api_field_nomem(err) : 0;
    if (strcmp(type, "enabled"))
        return 0; /* "adaptive" and later kinds: the model's own way */
    const json_t *b = json_object_get(th, "budget_tokens");
    if (b && !json_is_integer(b))
        return api_field_bad(err, "thinking.budget_tokens", "expected an integer");
    return b && fl_json_set(oai, "reasoning_budget_tokens", json_incref((json_t *)b))
               ? api_field_nomem(err) : 0;
}

/* The fields that mean the same in both: copied (openai.c checks them;
 * stop_sequences here, so that an error names it). */
static int put_common(const json_t *body, json_t *oai, struct fl_err *err)
{
    const json_t *stop = json_object_get(body, "stop_sequences");
    size_t i;
    const json_t *e;
    if (stop && !json_is_null(stop) && (!json_is_array(stop) || json_array_size(stop) > 8))
        return api_field_bad(err, "stop_sequences", "expected an array of at most 8 strings");
    json_array_foreach(stop, i, e) {
        if (!json_is_string(e) || !json_string_length(e))
            return fl_err_set(err, -EINVAL, "stop_sequences[%zu]: expected a non-empty string", i);
    }
    static const char *const same[][2] = {
        { "model", "model" }, { "max_tokens", "max_tokens" }, { "stop_sequences", "stop" },
        { "temperature", "temperature" }, { "top_p", "top_p" }, { "top_k", "top_k" },
        { "stream", "stream" },
    };
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        json_t *v = json_object_get(body, same[i][0]);
        if (v && fl_json_set(oai, same[i][1], json_incref(v)))
            return api_field_nomem(err);
    }
    return 0;
}

int api_anthropic_to_chat(const json_t *body, json_t **out, struct fl_err *err)
{
    *out = NULL;
    if (!json_is_object(body))
        return api_field_bad(err, "body", "expected an object");
    const json_t *m = json_object_get(body, "messages");
    if (!json_is_array(m) || !json_array_size(m))
        return api_field_bad(err, "messages", "expected a non-empty array");
    json_t *oai = json_object(), *msgs = json_array();
    int rc = oai && msgs ? put_system(body, msgs, err) : api_field_nomem(err);
    size_t i;
    const json_t *msg;
    json_array_foreach(m, i, msg) {
        if (!rc)
            rc = put_message(msg, i, msgs, err);
    }
    if (!rc && fl_json_set(oai, "messages", json_incref(msgs)))
        rc = api_field_nomem(err);
    if (!rc)
        rc = put_tools(body, oai, err);
    if (!rc)
        rc = put_tool_choice(body, oai, err);
    if (!rc)
        rc = put_thinking(body, oai, err);
    if (!rc)
        rc = put_common(body, oai, err);
    json_decref(msgs);
    if (rc)
        json_decref(oai);
    else
        *out = oai;
    return rc;
}

/* --- answers ---------------------------------------------------------------------- */

const char *api_anthropic_stop_reason(const char *finish_reason, bool stop_string, bool calls)
{
    if (calls)
        return "tool_use";
    if (finish_reason && !strcmp(finish_reason, "length"))
        return "max_tokens";
    return stop_string ? "stop_sequence" : "end_turn";
}

void api_anthropic_tool_id(const char *id, int i, char *buf, size_t n)
{
    snprintf(buf, n, "toolu_%s_%d", id, i);
}

json_t *api_anthropic_tool_use_json(const char *id, int i, const struct fl_tool_call *c,
                                    bool empty_input)
{
    char tid[96];
    api_anthropic_tool_id(id, i, tid, sizeof(tid));
    json_t *input = empty_input ? json_object() : json_loads(c->arguments, 0, NULL);
    if (input && !json_is_object(input)) { /* the calls' arguments are objects (tool-calls.h) */
        json_decref(input);
        input = json_object();
    }
    return input ? json_pack("{s:s, s:s, s:s, s:o}", "type", "tool_use", "id", tid, "name",
                             c->name, "input", input) : NULL;
}

json_t *api_anthropic_message_json(const struct api_anthropic_message *m)
{
    json_t *content = json_array();
    /* a model's bytes need not be UTF-8: fl_json_stringn makes them a string */
    if (content && m->reasoning && m->reasoning_len)
        json_array_append_new(content, json_pack("{s:s, s:o, s:s}", "type", "thinking",
                                                 "thinking", fl_json_stringn(m->reasoning,
                                                                             m->reasoning_len),
                                                 "signature", ""));
    if (content && m->text && m->len)
        json_array_append_new(content, json_pack("{s:s, s:o}", "type", "text", "text",
                                                 fl_json_stringn(m->text, m->len)));
    for (int i = 0; content && m->tools && i < m->tools->n_calls; i++) {
        json_t *use = api_anthropic_tool_use_json(m->id, i, &m->tools->calls[i], false);
        if (json_array_append_new(content, use)) {
            json_decref(content);
            content = NULL;
        }
    }
    if (!content)
        return NULL;
    return json_pack("{s:s, s:s, s:s, s:o, s:s, s:s, s:o, s:{s:i, s:i, s:i, s:i}}", "id", m->id,
                     "type", "message", "role", "assistant", "content", content, "model",
                     m->model, "stop_reason", m->stop_reason, "stop_sequence",
                     fl_json_string(m->stop_sequence), "usage",
                     "input_tokens", m->input_tokens - m->cached_tokens,
                     "cache_creation_input_tokens", 0, "cache_read_input_tokens",
                     m->cached_tokens, "output_tokens", m->output_tokens);
}

json_t *api_anthropic_error_json(json_t *openai_error, unsigned status)
{
    const json_t *e = json_object_get(openai_error, "error");
    const char *msg = fl_json_str(e, "message");
    const char *type = status == 401 ? "authentication_error"
                       : status == 403 ? "permission_error"
                       : status == 404 ? "not_found_error"
                       : status == 413 ? "request_too_large"
                       : status == 429 ? "rate_limit_error"
                       : status == 503 ? "overloaded_error"
                       : status >= 500 && status != 501 ? "api_error"
                       : "invalid_request_error";
    json_t *v = json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type", type,
                          "message", msg ? msg : "error");
    json_decref(openai_error);
    return v;
}
